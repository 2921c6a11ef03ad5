"""mcli run YAMLs as users have them: one with every field of mosaicml-cli 0.8.3's
RunConfig (models/run_config.py, utils/utils_config.py), one in its legacy spellings,
and llm-foundry's published mcli YAMLs (mcli/mcli-1b.yaml, mcli-hf-eval.yaml,
mcli-llama2-finetune.yaml), rewritten to need no network: the git_repo points at
GIT_URL (a git server on 127.0.0.1) and the command is a tiny stand-in for composer
that reads /mnt/config/parameters.yaml.

Each YAML is a template: {git_url} is the local server's repository URL.
"""

from __future__ import annotations

# The command that stands in for `composer train/train.py /mnt/config/parameters.yaml`:
# it reads the parameters at the path mcli promises and prints one line a test checks.
READ_PARAMETERS = (
    'python -c "import sys, yaml; p = yaml.safe_load(open(sys.argv[1])); '
    "print('parameters', sys.argv[1], 'max_seq_len', p['max_seq_len'])\" /mnt/config/parameters.yaml"
)

FULL_083 = """\
name: Every-Field_0.8.3
parent_name: sweep-parent
image: mosaicml/llm-foundry:2.1.0_cu121-latest
command: |
  {read_parameters}
compute:
  cluster: r1z1
  instance: oci.bm.gpu.b4.8
  gpu_type: a100_80gb
  gpus: 8
  cpus: 16
  nodes: 1
  node_names: [node-a]
scheduling:
  priority: low
  resumable: true
  preemptible: true
  retry_on_system_failure: false
  watchdogEnabled: false
  max_retries: 0
  max_duration: 1.5
integrations:
  - integration_type: git_repo
    git_repo: {git_url}
    git_branch: main
    path: repo
    ssh_clone: false
  - integration_type: wandb
    project: my-project
    entity: my-team
    group: sweep
    job_type: train
    tags: [a, b]
  - integration_type: mlflow
    experiment_name: /Users/someone@example.com/my-experiment
  - integration_type: comet_ml
    project_name: comet-project
    workspace: comet-ws
  - integration_type: pip_packages
    packages: [tqdm]
    upgrade: true
  - integration_type: apt_packages
    packages: [htop]
env_variables:
  EXTRA: "1"
parameters:
  max_seq_len: 2048
  _private: dropped
metadata:
  team: research
dependent_deployment:
  name: my-deployment
optimization_level: 2
platform: r1z1
"""

LEGACY = """\
run_name: legacy-spellings
image: mosaicml/pytorch:latest
gpu_num: 0
gpu_type: none
cluster: r7z2
cpus: 2
command: |
  {read_parameters}
env_variables:
  - key: FOO
    value: bar
parameters:
  max_seq_len: 128
"""

# llm-foundry mcli/mcli-1b.yaml, with the cluster commented in, a local git server and a
# stand-in command.
FOUNDRY_1B = """\
integrations:
- integration_type: git_repo
  git_repo: {git_url}
  git_branch: main
  path: llm-foundry
  ssh_clone: false  # Should be true if using a private repo

command: |
  cd llm-foundry
  {read_parameters}

image: mosaicml/llm-foundry:2.1.0_cu121_flash2-latest
name: mpt-1b-gpus-8

compute:
  gpus: 8  # Number of GPUs to use
  ## These configurations are optional
  cluster: r1z1 # Name of the cluster to use for this run
  gpu_type: a100_80gb # Type of GPU to use.

parameters:
  data_local: ./my-copy-c4
  data_remote: # If blank, files must be present in data_local
  max_seq_len: 2048
  global_seed: 17
  run_name: # If left blank, will be read from env var $RUN_NAME
  model:
    name: mpt_causal_lm
    init_device: meta
    d_model: 2048
    n_heads: 16
    n_layers: 24
    expansion_ratio: 4
    max_seq_len: ${{max_seq_len}}
    vocab_size: 50368
    attn_config:
      attn_impl: triton
  tokenizer:
    name: EleutherAI/gpt-neox-20b
    kwargs:
      model_max_length: ${{max_seq_len}}
  max_duration: 24800ba
  eval_interval: 2000ba
  global_train_batch_size: 512
  seed: ${{global_seed}}
  device_eval_batch_size: 16
  device_train_microbatch_size: 16
  precision: amp_bf16
  fsdp_config:
    sharding_strategy: FULL_SHARD
    mixed_precision: PURE
    activation_checkpointing: false
"""

# llm-foundry mcli/mcli-hf-eval.yaml
FOUNDRY_HF_EVAL = """\
integrations:
- integration_type: git_repo
  git_repo: {git_url}
  git_branch: main
  path: llm-foundry
  # git_commit: # OR use your commit hash
  ssh_clone: false # Should be true if using a private repo

command: |
  cd llm-foundry
  {read_parameters}

# Mosaic Cloud will use run_name (with a unique suffix) to populate the env var $RUN_NAME
name: mpt-eval
gpu_num: 8
gpu_type: a100_80gb
# cluster: # replace with your cluster here!

image: mosaicml/llm-foundry:2.1.0_cu121_flash2-latest

# The below is injected as a YAML file: /mnt/config/parameters.yaml
parameters:
  dist_timeout: 6000
  seed: 1
  max_seq_len: 1024
  device_eval_batch_size: 4
  precision: amp_fp16
  models:
  - model_name: mosaicml/mpt-7b-instruct
    model:
      name: hf_causal_lm
      pretrained_model_name_or_path: mosaicml/mpt-7b-instruct
      init_device: mixed
      pretrained: true
    tokenizer:
      name: mosaicml/mpt-7b-instruct
      kwargs:
        model_max_length: ${{max_seq_len}}
  fsdp_config:
    sharding_strategy: FULL_SHARD
    mixed_precision: FULL
    forward_prefetch: true
    limit_all_gathers: true
  icl_tasks: eval/yamls/tasks_v0.2.yaml
  eval_gauntlet: eval/yamls/eval_gauntlet_v0.2.yaml
"""

# llm-foundry mcli/mcli-llama2-finetune.yaml
FOUNDRY_LLAMA2_FINETUNE = """\
integrations:
- integration_type: git_repo
  git_repo: {git_url}
  git_branch: main
  path: llm-foundry
  ssh_clone: false # Should be true if using a private repo

command: |
  cd llm-foundry
  {read_parameters}
image: mosaicml/llm-foundry:2.1.0_cu121_flash2-latest
name: llama2-finetune

compute:
  # Note: Llama-2-70b requires at least 64 80GB GPUs
  gpus: 8  # Number of GPUs to use
  ## These configurations are optional
  # cluster: TODO # Name of the cluster to use for this run
  gpu_type: a100_80gb # Type of GPU to use. We use a100_80gb in our experiments

# The below is injected as a YAML file: /mnt/config/parameters.yaml
parameters:
  max_seq_len: 4096
  global_seed: 17
  run_name:  # If left blank, will be read from env var $RUN_NAME
  max_split_size_mb: 512
  model:
    name: hf_causal_lm
    init_device: mixed
    pretrained_model_name_or_path: meta-llama/Llama-2-7b-hf
    pretrained: true
    use_auth_token: true
  tokenizer:
    name: meta-llama/Llama-2-7b-hf
    kwargs:
      model_max_length: ${{max_seq_len}}
  train_loader:
    name: finetuning
    dataset:
      hf_name: mosaicml/dolly_hhrlhf
      split: train
      max_seq_len: ${{max_seq_len}}
      allow_pad_trimming: false
      decoder_only_format: true
      shuffle: true
    drop_last: true
    num_workers: 8
  scheduler:
    name: cosine_with_warmup
    t_warmup: 100ba
    alpha_f: 0.1
  optimizer:
    name: decoupled_lionw
    lr: 5.0e-7
    betas: [0.9, 0.95]
    weight_decay: 0.0
  max_duration: 1ep
  global_train_batch_size: 64
  seed: ${{global_seed}}
  device_train_microbatch_size: 8
  precision: amp_bf16
"""

# name -> (template, sanitized run name base, max_seq_len the command prints, runs locally)
TABLE = {
    "full-0.8.3": (FULL_083, "every-field-0-8-3", 2048, False),  # pip and apt need the network
    "legacy": (LEGACY, "legacy-spellings", 128, True),
    "foundry-1b": (FOUNDRY_1B, "mpt-1b-gpus-8", 2048, True),
    "foundry-hf-eval": (FOUNDRY_HF_EVAL, "mpt-eval", 1024, False),
    "foundry-llama2-finetune": (FOUNDRY_LLAMA2_FINETUNE, "llama2-finetune", 4096, False),
}


def render(template: str, git_url: str) -> str:
    return template.format(git_url=git_url, read_parameters=READ_PARAMETERS)

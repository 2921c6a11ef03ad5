"""A run whose command runs a built-in recipe (the MPT trainer, the HF recipe) has its
`parameters` checked against the recipe's own config by `validate`, `run --dry-run` and
`run`, before anything starts: an error names the user's spec file and line, the field
under `parameters`, and a did-you-mean, with exit code 2 and no traceback. A `--set` into
a path the recipe's config does not have is refused the same way. Any other command's
parameters stay free-form. Through the real CLI, as a user types it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import launcher

RUNSPECS = Path(__file__).resolve().parents[2] / "runspecs"

MPT = """\
name: tiny
command: composer -m launcher.train $PARAMETERS
data:
  remote: ./out/mds
parameters:
  variables:
    seq: 64
  max_seq_len: ${variables.seq}
  model:
    name: mpt_causal_lm
    d_model: 128
    n_heads: 4
    n_layers: 2
    max_seq_len: ${variables.seq}
    vocab_size: 512
  tokenizer: ./out/tokenizer
  train_loader:
    dataset:
      split: train
  optimizer:
    name: decoupled_adamw
    lr: 3.0e-3
  max_duration: 50ba
  global_train_batch_size: 16
"""

HF = """\
name: finetune
command: torchrun --nproc-per-node 2 -m launcher.train.hf "$PARAMETERS"
data:
  remote: ./out/prepared
parameters:
  model:
    name_or_path: distilbert-base-uncased
  output_dir: ./out/checkpoints/{run_name}
  training:
    num_train_epochs: 1
    learning_rate: 2.0e-3
"""


def line_of(text: str, needle: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(needle)]
    assert len(lines) == 1, (needle, lines)
    return lines[0]


def refused(r) -> str:
    """The one error line a refused command prints (exit 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.mark.parametrize("verb", [("validate",), ("run", "--dry-run")])
def test_a_misspelt_trainer_key_is_placed_at_its_line_in_the_spec(cli, verb):
    text = MPT.replace("  optimizer:", "  optimizr:")
    cli.spec("spec", text)
    err = refused(cli(*verb, "-f", "spec.yaml"))
    assert f"spec.yaml:{line_of(text, 'optimizr:')}:" in err, err
    assert "parameters.optimizr: unknown field (did you mean 'optimizer'?)" in err, err
    assert "/mnt/config" not in err


def test_run_refuses_a_misspelt_trainer_key_before_it_starts_anything(cli):
    text = MPT.replace("    lr:", "    lrr:")
    cli.spec("spec", text)
    err = refused(cli("run", "-f", "spec.yaml"))
    assert f"spec.yaml:{line_of(text, 'lrr:')}:" in err, err
    assert "parameters.optimizer.lrr: unknown field (did you mean 'lr'?)" in err, err
    listing = cli("get", "runs", "-o", "json")
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == [], listing.stdout


def test_the_hf_recipes_parameters_are_checked_against_its_own_config(cli):
    text = HF.replace("    learning_rate:", "    learning_rat:")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert f"spec.yaml:{line_of(text, 'learning_rat:')}:" in err, err
    assert "parameters.training.learning_rat: unknown field (did you mean 'learning_rate'?)" in err, err


def test_a_missing_required_trainer_field_is_named(cli):
    text = MPT.replace("  max_duration: 50ba\n", "")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert "parameters.max_duration: is required" in err, err


def test_a_bad_interpolation_is_placed_at_the_value_that_holds_it(cli):
    text = MPT.replace("    max_seq_len: ${variables.seq}", "    max_seq_len: ${variables.sq}")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert f"spec.yaml:{line_of(text, 'max_seq_len: ${variables.sq}')}:" in err, err
    assert "parameters.model.max_seq_len: ${variables.sq} refers to nothing" in err, err


def test_interpolations_and_a_remote_filled_at_run_time_are_not_errors(cli):
    # dataset.remote is empty: the trainer takes DATA_REMOTE (data.remote) when it starts.
    cli.spec("spec", MPT)
    r = cli("validate", "-f", "spec.yaml")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("spec", sorted(p.name for p in RUNSPECS.glob("*.yaml")))
def test_the_shipped_runspecs_still_validate(cli, spec):
    r = cli("secret", "create", "databricks", "--host", "https://example.cloud.databricks.com", input="dapi-x\n")
    assert r.returncode == 0, r.stderr
    r = cli("validate", "-f", str(RUNSPECS / spec))
    assert r.returncode == 0, r.stderr


def test_set_into_a_path_the_trainer_does_not_have_is_refused(cli):
    cli.spec("spec", MPT)
    err = refused(cli("validate", "-f", "spec.yaml", "--set", "parameters.optimzer.lr=1"))
    assert "--set parameters.optimzer.lr=1: parameters.optimzer: unknown field (did you mean 'optimizer'?)" in err


def test_set_into_a_trainer_field_changes_it(cli):
    cli.spec("spec", MPT)
    r = cli("run", "-f", "spec.yaml", "--dry-run", "-o", "json", "--set", "parameters.optimizer.lr=1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["run"]["parameters"]["optimizer"]["lr"] == 1


def test_another_commands_parameters_stay_free_form(cli):
    cli.spec("spec", MPT.replace("composer -m launcher.train $PARAMETERS", "python train.py $PARAMETERS"))
    r = cli("validate", "-f", "spec.yaml", "--set", "parameters.optimzer.lr=1")
    assert r.returncode == 0, r.stderr


def test_the_commands_own_overrides_count(cli):
    # The recipe applies key=value after $PARAMETERS: a field given there is not missing.
    text = MPT.replace("  max_duration: 50ba\n", "").replace("$PARAMETERS", "$PARAMETERS max_duration=10ba")
    cli.spec("spec", text)
    r = cli("validate", "-f", "spec.yaml")
    assert r.returncode == 0, r.stderr


def test_a_bad_override_in_the_command_is_placed_at_the_command(cli):
    text = MPT.replace("$PARAMETERS", "$PARAMETERS optimizr.lr=1")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert f"spec.yaml:{line_of(text, 'command:')}:" in err, err
    assert "parameters.optimizr: unknown field (did you mean 'optimizer'?)" in err, err


def test_an_override_the_shell_fills_in_is_left_to_the_recipe(cli):
    cli.spec("spec", MPT.replace("$PARAMETERS", "$PARAMETERS optimizer.lr=$LR"))
    r = cli("validate", "-f", "spec.yaml")
    assert r.returncode == 0, r.stderr


def test_a_recipe_reading_another_config_file_leaves_parameters_free_form(cli):
    text = MPT.replace("$PARAMETERS", "./my-config.yaml").replace("  optimizer:", "  optimizr:")
    cli.spec("spec", text)
    r = cli("validate", "-f", "spec.yaml")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "command",
    [
        "python -m launcher.train $PARAMETERS",
        "python3 -m launcher train $PARAMETERS",
        "/usr/local/bin/launcher train -n 2 $PARAMETERS",
        "cd /work; composer -n 8 -m launcher.train ${PARAMETERS} 2>&1 | tee train.log",
    ],
)
def test_each_way_to_run_the_mpt_trainer_is_checked(cli, command):
    text = MPT.replace("composer -m launcher.train $PARAMETERS", command).replace("  optimizer:", "  optimizr:")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert "parameters.optimizr: unknown field (did you mean 'optimizer'?)" in err, err


def test_launcher_train_in_a_script_is_a_recipe_too(cli):
    text = MPT.replace(
        "command: composer -m launcher.train $PARAMETERS",
        "command: |\n  echo starting\n  launcher train --nproc 2 ${PARAMETERS} && echo done",
    ).replace("  optimizer:", "  optimizr:")
    cli.spec("spec", text)
    err = refused(cli("validate", "-f", "spec.yaml"))
    assert "parameters.optimizr: unknown field (did you mean 'optimizer'?)" in err, err


def test_the_check_needs_no_train_extra(cli):
    """The core CLI without torch, composer, streaming or transformers checks recipes' parameters."""
    text = MPT.replace("  optimizer:", "  optimizr:")
    cli.spec("spec", text)
    blocked = "torch", "composer", "streaming", "transformers"
    program = (
        "import sys\n"
        f"for m in {blocked!r}: sys.modules[m] = None  # `import torch` raises ImportError\n"
        "from launcher.cli.main import main\n"
        "sys.argv = ['launcher', 'validate', '-f', 'spec.yaml']\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", program], cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=120
    )
    err = refused(r)
    assert "parameters.optimizr: unknown field (did you mean 'optimizer'?)" in err, err


def test_the_sdks_create_run_raises_the_same_error_placed_in_the_file(launcher_home, tmp_path):
    text = MPT.replace("  optimizer:", "  optimizr:")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(launcher.ValidationError) as bad:
        launcher.create_run(launcher.RunConfig.from_file(path))
    optimizr = next(i for i in bad.value.issues if i.field == "parameters.optimizr")
    assert (optimizr.file, optimizr.line) == (str(path), line_of(text, "optimizr:"))
    assert "did you mean 'optimizer'?" in optimizr.message
    # A spec given as a mapping has no lines to point at: the field says where.
    with pytest.raises(launcher.ValidationError) as bad:
        launcher.create_run(yaml.safe_load(text))
    optimizr = next(i for i in bad.value.issues if i.field == "parameters.optimizr")
    assert (optimizr.file, optimizr.line) == (None, None)
    assert launcher.get_runs() == []

"""The training config: validated before anything heavy, errors at file:line:col."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from launcher.errors import SpecError
from launcher.train.config import load_config
from launcher.train.interp import InterpolationError, interpolate

REPO = Path(__file__).resolve().parents[2]

BASE = """\
variables:
  seq: 64
  seed: 7
  remote: ""
seed: ${variables.seed}
model:
  d_model: 64
  n_heads: 4
  n_layers: 2
  max_seq_len: ${variables.seq}
  vocab_size: 512
tokenizer: ./tok
train_loader:
  dataset:
    remote: ${variables.remote}
    split: train
    shuffle: true
    shuffle_seed: ${variables.seed}
optimizer:
  name: decoupled_adamw
  lr: 1.0e-3
max_duration: 10ba
global_train_batch_size: 8
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def errors(path: Path, env: dict[str, str] | None = None, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(SpecError) as e:
        load_config(path, overrides, env={} if env is None else env)
    return str(e.value)


def test_interpolation_keeps_types_and_fills_remote_from_data_remote(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, BASE), env={"DATA_REMOTE": "dbfs:/Volumes/main/default/vol/mds"})
    assert cfg.seed == 7 and cfg.model.max_seq_len == 64
    assert cfg.train_loader.dataset.shuffle_seed == 7
    assert cfg.train_loader.dataset.remote == "dbfs:/Volumes/main/default/vol/mds"
    assert cfg.tokenizer.name == "./tok"


def test_explicit_remote_wins_over_data_remote(tmp_path: Path) -> None:
    p = write(tmp_path, BASE.replace('remote: ""', "remote: s3://bucket/mds"))
    cfg = load_config(p, env={"DATA_REMOTE": "dbfs:/Volumes/main/default/vol/mds"})
    assert cfg.train_loader.dataset.remote == "s3://bucket/mds"


def test_no_remote_anywhere_is_an_error_at_the_remote_field(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    msg = errors(p)
    assert msg.startswith(f"{p}:15:13: train_loader.dataset.remote: is empty and DATA_REMOTE is not set")


def test_rope_is_rejected_with_its_position(tmp_path: Path) -> None:
    text = BASE.replace("  vocab_size: 512\n", "  vocab_size: 512\n  attn_config:\n    rope: true\n")
    p = write(tmp_path, text)
    msg = errors(p, {"DATA_REMOTE": "./x"})
    assert (
        msg
        == f"{p}:13:11: model.attn_config.rope: RoPE is not supported: Hugging Face's MptForCausalLM implements only ALiBi; set alibi: true"
    )


def test_unknown_field_suggests_the_right_one(tmp_path: Path) -> None:
    p = write(tmp_path, BASE.replace("  n_layers: 2\n", "  n_layer: 2\n"))
    msg = errors(p, {"DATA_REMOTE": "./x"})
    lines = msg.splitlines()
    assert any(line.startswith(f"{p}:9:3: model.n_layer: unknown field (did you mean 'n_layers'?)") for line in lines)
    assert f"{p}:7:3: model.n_layers: is required" in lines


def test_bad_values_name_field_and_value(tmp_path: Path) -> None:
    text = BASE.replace("max_duration: 10ba", "max_duration: 10 batches").replace("name: decoupled_adamw", "name: adam")
    p = write(tmp_path, text)
    msg = errors(p, {"DATA_REMOTE": "./x"})
    assert f"{p}:20:9: optimizer.name: must be 'decoupled_adamw' or 'decoupled_lionw', got 'adam'" in msg
    assert f"{p}:22:15: max_duration: must be a time such as 100ba, 1ep or 1e6tok, got '10 batches'" in msg


def test_unsupported_mpt_options_are_errors_not_silently_different_models(tmp_path: Path) -> None:
    text = BASE.replace("  vocab_size: 512\n", "  vocab_size: 512\n  expansion_ratio: 2\n  no_bias: false\n")
    msg = errors(write(tmp_path, text), {"DATA_REMOTE": "./x"})
    assert "model.expansion_ratio: Hugging Face's MptForCausalLM fixes the MLP expansion ratio at 4, got 2" in msg
    assert "model.no_bias: Hugging Face's MptForCausalLM has no biases" in msg


def test_heads_must_divide_d_model(tmp_path: Path) -> None:
    msg = errors(write(tmp_path, BASE.replace("n_heads: 4", "n_heads: 5")), {"DATA_REMOTE": "./x"})
    assert "model: d_model (64) must be a multiple of n_heads (5)" in msg


def test_missing_variable_points_at_the_reference(tmp_path: Path) -> None:
    p = write(tmp_path, BASE.replace("seed: ${variables.seed}\nmodel", "seed: ${variables.sed}\nmodel"))
    msg = errors(p, {"DATA_REMOTE": "./x"})
    assert msg == f"{p}:5:7: seed: ${{variables.sed}} refers to nothing: there is no 'variables.sed' in the config"


def test_overrides_apply_before_validation(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    cfg = load_config(p, ["max_duration=3ba", "optimizer.lr=0.5", "variables.seq=32"], env={"DATA_REMOTE": "./x"})
    assert (cfg.max_duration, cfg.optimizer.lr, cfg.model.max_seq_len) == ("3ba", 0.5, 32)
    msg = errors(p, {"DATA_REMOTE": "./x"}, overrides=("global_train_batch_size=0",))
    assert msg == "command line: global_train_batch_size: must be a positive integer, got 0"


def test_autoresume_needs_a_save_folder(tmp_path: Path) -> None:
    msg = errors(write(tmp_path, BASE + "autoresume: true\n"), {"DATA_REMOTE": "./x"})
    assert "autoresume: true needs save_folder" in msg


def test_empty_and_non_mapping_files(tmp_path: Path) -> None:
    p = write(tmp_path, "# nothing\n")
    assert "is empty" in errors(p)
    p.write_text("- a\n- b\n")
    assert "the top level must be a mapping" in errors(p)


def test_interpolation_rules() -> None:
    data = {"v": {"a": 1, "b": "${v.a}", "c": "x-${v.b}-y", "n": None, "t": True}, "k": "${v.n}", "s": "${v.t}!"}
    assert interpolate(data) == {
        "v": {"a": 1, "b": 1, "c": "x-1-y", "n": None, "t": True},
        "k": None,
        "s": "true!",
    }
    with pytest.raises(InterpolationError, match="circular"):
        interpolate({"a": "${b}", "b": "${a}"})
    with pytest.raises(InterpolationError, match="unsupported interpolation"):
        interpolate({"a": "${oc.env:HOME}"})


@pytest.mark.parametrize("spec", ["mpt-125m-uc-volume.yaml", "mpt-tiny-local.yaml"])
def test_shipped_runspecs_validate(spec: str, tmp_path: Path) -> None:
    """Both the run spec and its parameters (as the entrypoint writes them) validate."""
    from launcher.spec.load import load_spec

    loaded = load_spec(REPO / "runspecs" / spec)
    run = loaded.spec
    assert "launcher.train" in run.command and "$PARAMETERS" in run.command
    params = tmp_path / "parameters.yaml"
    params.write_text(yaml.safe_dump(run.parameters_for_file()))
    cfg = load_config(params, env=run.env_for_run("x"))
    assert cfg.train_loader.dataset.remote == run.data.remote
    if spec == "mpt-125m-uc-volume.yaml":
        m = cfg.model
        assert (m.d_model, m.n_heads, m.n_layers, m.max_seq_len) == (768, 12, 12, 2048)
        assert cfg.tokenizer.name == "EleutherAI/gpt-neox-20b" and cfg.max_duration == "1000ba"
        assert run.compute.gpus == 8 and run.compute.gpu_type == "a100_80gb"
        assert run.data.remote.startswith("dbfs:/Volumes/") and run.secrets


def test_unions_and_lists_get_clean_fields_and_guesses(tmp_path: Path) -> None:
    """The run spec's error mapping (launcher.spec.issues): no union-member tags in field names,
    did-you-mean inside an optional model (eval_loader), a list (optimizer.betas) and a union."""
    text = BASE + textwrap.dedent("""\
        device_train_microbatch_size: big
        eval_loader:
          dataset: {remote: ./x, splt: val}
        """)
    text = text.replace(
        "optimizer:\n  name: decoupled_adamw\n", "optimizer:\n  name: decoupled_adamw\n  betas: [0.9, high]\n"
    )
    p = write(tmp_path, text)
    lines = errors(p, {"DATA_REMOTE": "./x"}).splitlines()
    assert any(
        ln.startswith(f"{p}:") and "eval_loader.dataset.splt: unknown field (did you mean 'split'?)" in ln
        for ln in lines
    ), lines
    assert f"{p}:21:16: optimizer.betas.1: must be a number, got 'high'" in lines
    assert any(ln.endswith("device_train_microbatch_size: must be an integer, got 'big'") for ln in lines)
    assert any(ln.endswith("device_train_microbatch_size: must be 'auto', got 'big'") for ln in lines)
    assert not any("literal[" in ln or ".int:" in ln or "function-" in ln for ln in lines), lines

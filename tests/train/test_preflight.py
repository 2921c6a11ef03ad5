"""Pre-flight: each failure is one clear line, before torch is even imported."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from launcher.train.main import main
from tests.conftest import needs
from tests.train.conftest import SEQ, VOLUME, run_trainer, tiny_config, train_env

needs("databricks.sdk")


def fail_line(capsys: pytest.CaptureFixture[str], cfg: Path) -> str:
    assert main([str(cfg)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("✗ ")
    return lines[0][2:]


@pytest.fixture
def cfg(tmp_path: Path, number_say) -> Path:
    return tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=VOLUME)


def use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key in (
        "DATABRICKS_HOST",
        "DATABRICKS_TOKEN",
        "DATABRICKS_CONFIG_PROFILE",
        "DATABRICKS_CLIENT_ID",
        "DATA_REMOTE",
        "DATA_LOCAL",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")  # ignore any real profile
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_wrong_token(monkeypatch, capsys, cfg: Path, databricks_files, uc_data: str) -> None:
    use(monkeypatch, databricks_files.env(token="dapi-wrong-token-000"))
    msg = fail_line(capsys, cfg)
    assert msg == (
        f"Databricks at {databricks_files.host} rejected the token (401 Unauthenticated) while reading "
        f"{VOLUME}/train/index.json: check DATABRICKS_TOKEN, or the databricks secret it comes from"
    )
    assert "dapi-wrong-token-000" not in msg


def test_missing_index_json(monkeypatch, capsys, tmp_path: Path, number_say, databricks_files) -> None:
    use(monkeypatch, databricks_files.env())
    remote = "dbfs:/Volumes/main/default/data/not-converted"
    cfg = tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=remote)
    assert fail_line(capsys, cfg) == (
        f"train_loader: {remote}/train has no index.json (checked as "
        f"{databricks_files.host}/api/2.0/fs/files/Volumes/main/default/data/not-converted/train/index.json): "
        f"convert the data there with `launcher data convert ... --out {remote} --split train`, "
        "or fix train_loader.dataset.remote"
    )


def test_missing_databricks_secret(monkeypatch, capsys, cfg: Path, databricks_files) -> None:
    use(monkeypatch, {"DATABRICKS_HOST": databricks_files.host})
    assert fail_line(capsys, cfg) == (
        f"{VOLUME} needs Databricks credentials, but DATABRICKS_TOKEN is not set: "
        "add a databricks secret to the run (it provides DATABRICKS_HOST and DATABRICKS_TOKEN)"
    )
    use(monkeypatch, {})
    assert "but DATABRICKS_HOST and DATABRICKS_TOKEN are not set" in fail_line(capsys, cfg)
    assert databricks_files.requests == []


def test_sequence_length_must_match_the_data(
    monkeypatch, capsys, tmp_path: Path, number_say, databricks_files, uc_data: str
) -> None:
    use(monkeypatch, databricks_files.env())
    cfg = tiny_config(
        tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=uc_data, variables={"seq": 2 * SEQ}
    )
    assert fail_line(capsys, cfg) == (
        f"{uc_data}/train holds sequences of {SEQ} tokens but model.max_seq_len is {2 * SEQ}: "
        "convert the data with the model's sequence length, or change model.max_seq_len"
    )


def test_data_without_sidecar_is_refused_not_guessed(monkeypatch, capsys, tmp_path: Path, number_say) -> None:
    use(monkeypatch, {})
    import shutil

    data = tmp_path / "mds"
    shutil.copytree(number_say.mds, data)
    (data / "train" / "launcher_dataset.json").unlink()
    cfg = tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=str(data))
    assert fail_line(capsys, cfg).startswith(
        f"{data}/train has no launcher_dataset.json, so its token dtype and sequence length are unknown"
    )
    sidecar = json.loads((number_say.mds / "train" / "launcher_dataset.json").read_text())
    (data / "train" / "launcher_dataset.json").write_text(json.dumps({**sidecar, "dtype": "float16"}))
    assert "unsupported dtype 'float16'" in fail_line(capsys, cfg)


def test_local_remote_without_data(monkeypatch, capsys, tmp_path: Path, number_say) -> None:
    use(monkeypatch, {})
    cfg = tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=str(tmp_path / "nothing"))
    assert fail_line(capsys, cfg).startswith(f"train_loader: {tmp_path}/nothing/train does not exist")


def test_dead_host_fails_in_seconds(monkeypatch, capsys, cfg: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    use(monkeypatch, {"DATABRICKS_HOST": f"http://127.0.0.1:{port}", "DATABRICKS_TOKEN": "dapi-x"})
    started = time.monotonic()
    msg = fail_line(capsys, cfg)
    assert time.monotonic() - started < 30, "the SDK's 5-minute retry window was not shortened"
    assert msg.startswith(f"cannot reach DATABRICKS_HOST http://127.0.0.1:{port}")


def test_preflight_runs_before_torch_is_imported(tmp_path: Path, number_say, databricks_files) -> None:
    cfg = tiny_config(tmp_path / "params.yaml", tokenizer=number_say.tokenizer, remote=VOLUME)
    code = (
        "import sys\nfrom launcher.train.main import main\n"
        f"rc = main([{str(cfg)!r}])\nprint('torch loaded:', 'torch' in sys.modules, 'rc:', rc)"
    )
    proc = run_trainer(["-c", code], train_env(databricks_files))
    assert proc.stdout.strip() == "torch loaded: False rc: 2", proc.stderr
    assert "has no index.json" in proc.stderr


def test_config_errors_come_from_the_trainer_with_positions(tmp_path: Path, capsys) -> None:
    p = tmp_path / "params.yaml"
    p.write_text("model:\n  d_model: 64\n")
    assert main([str(p)]) == 2
    err = capsys.readouterr().err
    assert f"✗ {p}:2:3: model.n_heads: is required" in err.splitlines()
    assert f"{p}:1:1: optimizer: is required" in err


def test_module_entry_point_exit_code(tmp_path: Path) -> None:
    proc = run_trainer(["-m", "launcher.train", str(tmp_path / "missing.yaml")], train_env())
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"✗ {tmp_path / 'missing.yaml'}: no such file"

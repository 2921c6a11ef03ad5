"""Items 4, 5, 6, 8, 9 and 12 of the hardening issue: a full disk, odd input files,
broken state files, values the launcher must refuse, host safety, and errors in
command-line overrides. Every case is the real CLI in a subprocess."""

from __future__ import annotations

import os
import time

import pytest

from tests.faults.conftest import describe, processes, refused


def test_item4_a_full_disk_ends_the_run_failed_and_says_so(cli, small_tmpfs, token):
    runs = small_tmpfs(cli.home / "runs", "2m")
    spec = cli.spec(
        "loud",
        f"name: loud\nenv_variables: {{FAULT_TOKEN: {token}}}\ncommand: |\n"
        "  for i in $(seq 40); do head -c 1000000 /dev/zero | tr '\\\\0' x; echo; done\n"
        "  echo the command finished\n",
    )
    began = time.monotonic()
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert time.monotonic() - began < 90  # it used to hang forever
    assert r.returncode == 1, r.stderr
    rec = describe(cli)
    assert rec["status"] == "FAILED"
    assert rec["reason"].startswith(f"disk full writing logs under {runs}/{rec['name']}/attempt-1"), rec["reason"]
    lines = [line for line in r.stderr.splitlines() if "disk full writing logs under" in line]
    assert len(lines) == 1, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert not processes(token)


def test_item5_odd_input_files_are_refused_quickly(cli, tmp_path):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    began = time.monotonic()
    refused(cli("run", "-f", str(fifo), timeout=30), f"{fifo}: is a FIFO (named pipe), not a run spec file")
    refused(cli("validate", "-f", "/dev/zero", timeout=30), "/dev/zero: is a character device, not a run spec file")
    refused(
        cli("secret", "create", "file", "zero", "--from", "/dev/zero", "--mount-path", "/etc/z", timeout=30),
        "/dev/zero: is a character device, not a secret file",
    )
    big = tmp_path / "big.yaml"
    big.write_bytes(b"name: a\ncommand: x\nmetadata:\n" + b"  k: v\n" * (2 << 20))
    refused(
        cli("validate", "-f", str(big), timeout=30), f"{big}: is 14 MiB, larger than a run spec file may be (8 MiB)"
    )
    assert time.monotonic() - began < 20
    # A million keys: refused for what it is, before the whole document is parsed.
    many = tmp_path / "many.yaml"
    many.write_text("name: a\ncommand: x\nmetadata:\n" + "".join(f" k{i}: {i}\n" for i in range(10**6 // 2)))
    began = time.monotonic()
    err = refused(cli("validate", "-f", str(many), timeout=60), "document has more than 20000 values")
    assert "alias" not in err
    assert time.monotonic() - began < 15


def test_item6_broken_state_files_name_the_file_and_the_way_out(cli):
    ok = cli.spec("ok", "name: fine\ncommand: echo hi\n")
    state = cli.home / "state.db"
    state.write_bytes(b"this is not a database" * 100)
    refused(cli("get", "runs"), f"{state} is corrupt", f"move it away and run again (mv {state} {state}.corrupt)")
    state.unlink()

    # A corrupt index: the run is refused before it starts, so nothing runs unrecorded.
    index = cli.home / "index.db"
    index.write_bytes(b"garbage" * 1000)
    refused(cli("run", "-f", str(ok)), f"{index} is corrupt", "move it away and run again")
    assert not (cli.home / "runs").exists() or not any((cli.home / "runs").iterdir())
    index.unlink()

    secrets = cli.home / "secrets" / "secrets.json"
    secrets.parent.mkdir(mode=0o700, exist_ok=True)
    secrets.write_text('{"version": 1, "secrets": []}')
    refused(cli("secret", "list"), f"{secrets} is corrupt", "move it away and run again")
    secrets.write_text('{"version": 1, "secrets": {"a": {"kind": "env", "data": "oops"}}}')
    refused(cli("run", "-f", str(ok)), f"{secrets} is corrupt (secret 'a' is not a kind, data and options)")
    secrets.unlink()

    home_file = cli.cwd / "not-a-dir"
    home_file.write_text("x")
    cli.env["LAUNCHER_HOME"] = str(home_file)
    refused(cli("get", "runs"), f"LAUNCHER_HOME {home_file} is not a directory")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["secret", "create", "file", "rel", "--from", "key.pem", "--mount-path", "relative/path"],
            "--mount-path: the mount path must be absolute (start with /), got 'relative/path'",
        ),
        (
            ["secret", "create", "file", "up", "--from", "key.pem", "--mount-path", "/secrets/../../etc"],
            "--mount-path: the mount path must not contain '..'",
        ),
        (
            ["secret", "create", "ssh", "dots", "--from", "key.pem", "--mount-path", "/a//b/"],
            "--mount-path: the mount path must be a normalised directory other than / (e.g. '/a/b')",
        ),
        (["cluster", "add", "my cluster"], "cluster profile names are lowercase letters, digits and '-'"),
        (["cluster", "add", "Prod"], "(RFC 1123), got 'Prod'"),
        (
            ["run", "-f", "ok.yaml", "--nodes", "100000"],
            f"compute.nodes: 100000 is more than the local backend runs on this machine: at most {4 * os.cpu_count()}",
        ),
    ],
)
def test_item8_bad_values_are_refused(cli, args, message):
    (cli.cwd / "key.pem").write_text("-----BEGIN KEY-----\nabcdefgh\n-----END KEY-----\n")
    cli.spec("ok", "name: a\ncommand: x\n")
    began = time.monotonic()
    refused(cli(*args), message)
    assert time.monotonic() - began < 15
    assert not (cli.home / "runs").exists()
    assert cli("secret", "list", "-o", "json").stdout.strip() == "[]"


def test_item8_gpus_on_a_machine_without_them_get_a_one_line_note(cli):
    spec = cli.spec("gpu", "name: gpu\ncompute: {gpus: 8}\ncommand: echo ran\n")
    cli.env["CUDA_VISIBLE_DEVICES"] = ""
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    notes = [line for line in cli("logs").stdout.splitlines() if "GPU" in line]
    assert notes == ["[launcher] note: the spec asks for 8 GPU(s) per node; this machine gives 0: running on CPU"]


def test_item9_apt_packages_are_refused_on_the_local_backend(cli):
    spec = cli.spec(
        "apt",
        "name: apt\nintegrations:\n  - integration_type: apt_packages\n    packages: [cowsay]\ncommand: echo ran\n",
    )
    refused(
        cli("run", "-f", str(spec)),
        "apt_packages: the local backend does not install system packages",
        "sudo apt-get install cowsay",
        "allow_host_packages: true",
    )
    assert not (cli.home / "runs").exists()
    # The setting is read from the local profile (and nothing is installed by this test).
    (cli.home / "config.yaml").write_text("clusters:\n  local:\n    allow_host_packages: true\n")
    r = cli("run", "-f", str(spec), "--dry-run")
    assert r.returncode == 0, r.stderr


def test_item12_override_errors_name_the_flag_and_list_items_name_the_field(cli):
    ok = cli.spec("ok", "name: a\nimage: x\ncommand: x\n")
    err = refused(cli("run", "-f", str(ok), "--set", "bogus.field=1"), "--set bogus.field=1: bogus: unknown field")
    assert "ok.yaml" not in err
    refused(
        cli("run", "-f", str(ok), "--set", "scheduling.max_retris=2"),
        "--set scheduling.max_retris=2: scheduling.max_retris: unknown field (did you mean 'max_retries'?)",
    )
    refused(cli("run", "-f", str(ok), "--gpus", "-3"), "--gpus -3: compute.gpus: must be zero or more, got -3")
    repo = cli.spec(
        "repo",
        "name: a\ncommand: x\nintegrations:\n  - integration_type: pip_packages\n"
        "    packages: [x]\n  - integration_type: git_repo\n    git_branch: main\n",
    )
    refused(cli("run", "-f", str(repo)), f"{repo}:6:5: integrations.1.git_repo: is required")

"""The entrypoint lays the plan's code snapshot over the working directory, or over the first
git_repo's clone, and refuses one whose digest does not match the plan."""

from __future__ import annotations

import json
import subprocess

from launcher.pod import contract
from launcher.pod.code_archive import digest_of, pack
from launcher.spec.models import RunSpec
from launcher.spec.plan import plan_text


def write_plan(entry, spec: dict, data: bytes, digest: str | None = None) -> dict[str, str]:
    snapshot = entry.run_dir / "code.tar.gz"
    snapshot.write_bytes(data)
    code = {"digest": digest or digest_of(data), "size": len(data), "file": str(snapshot)}
    plan = entry.run_dir / "plan.json"
    plan.write_text(plan_text(RunSpec.model_validate({"name": "test-run", **spec}), code=code))
    return {contract.PLAN: str(plan)}


def test_the_snapshot_is_laid_over_the_clone_before_the_command(entry, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (repo / "mod.py").write_text("WORD = 'committed'\n")
    (repo / "kept.py").write_text("KEPT = 'from the clone'\n")
    git("add", ".")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "mod.py").write_text("WORD = 'edited'\n")
    spec = {
        "command": "cd repo && python -c 'import mod, kept; print(mod.WORD, kept.KEPT)'",
        "integrations": [{"integration_type": "git_repo", "git_repo": str(repo), "path": "repo"}],
    }
    r = entry.run(spec, extra=write_plan(entry, spec, pack(tree, ["mod.py"])))
    assert r.code == 0, r.out
    assert "edited from the clone" in r.out
    assert f"laid over {entry.workdir / 'repo'}" in r.out


def test_a_snapshot_that_does_not_match_its_digest_is_a_setup_error(entry, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    spec = {"command": "echo the command ran"}
    wrong = digest_of(b"another tree")
    r = entry.run(spec, extra=write_plan(entry, spec, pack(tmp_path, ["a.py"]), digest=wrong))
    assert r.code == contract.EXIT_SETUP, r.out
    assert f"the plan says {wrong}" in r.out
    assert "the command ran" not in r.out
    assert not (entry.workdir / "a.py").exists()


def test_an_entry_outside_the_working_directory_is_refused(entry, tmp_path):
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escaped.py")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    spec = {"command": "true"}
    r = entry.run(spec, extra=write_plan(entry, spec, raw.getvalue()))
    assert r.code == contract.EXIT_SETUP, r.out
    assert "an entry it must not: '../escaped.py'" in r.out
    assert not (entry.workdir.parent / "escaped.py").exists()
    assert json.loads((entry.run_dir / "plan.json").read_text())["code"]["size"] > 0

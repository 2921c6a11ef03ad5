"""`launcher metrics` end to end, on runs of the real local backend whose commands print
known metric lines (with noise, interleaved ranks, and a failed first attempt)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import read_terminal

from .logdata import ATTEMPT_1, ATTEMPT_2, attempt_lines, expected_points, expected_time, loss, step_line


def _submit(home: Path, work: Path, name: str, command: str, *, retries: int = 0, follow: bool = True) -> str:
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "spec.yaml"
    indented = "\n".join("  " + line for line in command.splitlines())
    spec.write_text(
        f"name: {name}\nimage: x\ncommand: |\n{indented}\ncompute: {{gpus: 0}}\n"
        f"scheduling: {{max_retries: {retries}, retry_backoff: {{first: 0.1s}}}}\n"
    )
    env = {"LAUNCHER_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)}
    if os.environ.get("PYTHONPATH"):  # the launcher under test, where the tests run from a checkout
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "run", "-f", str(spec), *(["--follow"] if follow else [])],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return next(
        p.name
        for p in (home / "runs").iterdir()
        if p.name.startswith(name + "-") and p.stat().st_mtime >= spec.stat().st_mtime
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, object]:
    """Three finished runs sharing one LAUNCHER_HOME: 'retried' (two attempts, the first
    failing), 'solo' (one attempt) and 'quiet' (no metrics)."""
    root = tmp_path_factory.mktemp("metrics-cli")
    home = root / "home"
    home.mkdir()
    work = root / "retried"
    work.mkdir()
    (work / "attempt1.txt").write_text("\n".join(attempt_lines(1, ATTEMPT_1)) + "\n")
    (work / "attempt2.txt").write_text("\n".join(attempt_lines(2, ATTEMPT_2)) + "\n")
    retried = _submit(
        home,
        work,
        "retried",
        "if [ -f marker ]; then cat attempt2.txt; else touch marker; cat attempt1.txt; exit 3; fi",
        retries=1,
    )
    solo_work = root / "solo"
    solo_work.mkdir()
    (solo_work / "log.txt").write_text("\n".join(step_line(s, 3) for s in range(1, 9)) + "\n")
    solo = _submit(home, solo_work, "solo", "cat log.txt")
    quiet = _submit(home, root / "quiet", "quiet", "echo no metrics here")
    return {"home": home, "root": root, "retried": retried, "solo": solo, "quiet": quiet}


@pytest.fixture
def invoke(runs, monkeypatch, capsys):
    monkeypatch.setenv("LAUNCHER_HOME", str(runs["home"]))

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run_cli(cli, ["metrics", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_json_holds_exactly_the_points_of_rank_0_across_both_attempts(runs, invoke):
    code, out, err = invoke(runs["retried"], "-o", "json")
    assert code == 0, err
    want = [
        {
            "run": runs["retried"],
            "metric": "loss/train/total",
            "step": s,
            "value": v,
            "time": expected_time(s, a),
            "attempt": a,
        }
        for s, v, a in expected_points()
    ]
    assert json.loads(out) == want


def test_a_second_call_answers_the_same_from_the_cache(runs, invoke):
    first = invoke(runs["retried"], "-o", "json", "-m", "throughput/*")
    assert list((runs["home"] / "cache" / "metrics" / runs["retried"]).glob("*.pkl"))
    assert invoke(runs["retried"], "-o", "json", "-m", "throughput/*") == first
    assert [p["value"] for p in json.loads(first[1])] == [v for _, v, _ in expected_points("throughput/tokens_per_sec")]


def test_csv_parses_back_to_the_json_values(runs, invoke):
    _, out_json, _ = invoke(runs["retried"], "-o", "json", "-m", "loss/*", "-m", "throughput/tokens_per_sec")
    code, out_csv, _ = invoke(runs["retried"], "-o", "csv", "-m", "loss/*", "-m", "throughput/tokens_per_sec")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out_csv)))
    back = [
        {
            "run": r["run"],
            "metric": r["metric"],
            "step": int(r["step"]),
            "value": float(r["value"]),
            "time": float(r["time"]),
            "attempt": int(r["attempt"]),
        }
        for r in rows
    ]
    assert back == json.loads(out_json)
    assert len(back) == 2 * len(expected_points())


def test_every_and_last_filter_by_step(runs, invoke):
    _, out, _ = invoke(runs["retried"], "-o", "json", "--every", "2", "--last", "3")
    assert [(p["step"], p["attempt"]) for p in json.loads(out)] == [(6, 2), (8, 2), (10, 2)]


def test_the_table_marks_the_restart_and_summarizes(runs, invoke):
    code, out, _ = invoke(runs["retried"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"loss/train/total · run {runs['retried']} (COMPLETED) · from logs · 2 attempts")
    assert lines[1].split() == ["STEP", "VALUE", "SMOOTHED", "TIME"]
    steps = [int(line.split()[0]) for line in lines[2:] if line.split()[0].isdigit()]
    assert steps == [s for s, _, _ in expected_points()]
    mark = lines.index(f"  ↻ attempt 2 takes over at step {ATTEMPT_2.start}")
    assert lines[mark + 1].split()[0] == str(ATTEMPT_2.start)
    first, last = expected_points()[0], expected_points()[-1]
    assert lines[-1].startswith(f"first {first[1]:.6g} @ step {first[0]} · last {last[1]:.6g} @ step {last[0]} · min ")
    assert "trend ↓" in lines[-1]


def test_list_shows_names_counts_and_last_values(runs, invoke):
    code, out, _ = invoke(runs["retried"], "--list", "-o", "json")
    assert code == 0
    got = {r["metric"]: (r["points"], r["last_step"], r["last_value"]) for r in json.loads(out)}
    last = expected_points()[-1]
    assert got == {
        "loss/train/total": (len(expected_points()), last[0], last[1]),
        "throughput/tokens_per_sec": (len(expected_points()), last[0], 1000.0 * last[0]),
    }
    _, table, _ = invoke(runs["retried"], "--list")
    assert table.splitlines()[1].split() == ["METRIC", "POINTS", "LAST", "STEP", "LAST", "VALUE"]


def test_plot_draws_the_curve_with_axis_labels(runs, invoke):
    code, out, _ = invoke(runs["retried"], "--plot")
    assert code == 0
    plot = out.split("loss/train/total · run")[0]
    assert "step" in plot and "loss/train/total" in plot and "attempt 2" in plot
    assert any(ch in plot for ch in "▘▝▀▄▌▐▖▗▚▞█")  # the curve itself


def test_png_overlays_runs_in_a_valid_image(runs, invoke, tmp_path):
    from PIL import Image

    png = tmp_path / "curves.png"
    code, out, err = invoke(
        runs["retried"], runs["solo"], "--png", str(png), "-m", "loss/train/total", "-m", "throughput/*"
    )
    assert code == 0, err
    assert out == "" and err == f"✔ Wrote {png}\n"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as img:
        img.verify()
    with Image.open(png) as img:
        width, height = img.size
        assert 600 <= width <= 3000 and 400 <= height <= 3000
        assert img.text["Title"] == f"{runs['retried']}, {runs['solo']}"
        assert img.text["Description"] == "metrics: loss/train/total, throughput/tokens_per_sec"
    assert png.stat().st_size > 20_000


def test_errors_are_one_line_and_exit_2(runs, invoke):
    code, out, err = invoke(runs["retried"], "-m", "loss/train/totl")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        f"✗ no metric 'loss/train/totl' in run {runs['retried']} (did you mean 'loss/train/total'?)"
    )
    code, _, err = invoke(runs["quiet"])
    assert code == 2 and err.splitlines()[0] == f"✗ run {runs['quiet']} ended (COMPLETED) without any metrics"
    code, _, err = invoke("no-such-run")
    assert code == 2 and "no-such-run" in err and "Traceback" not in err
    code, _, err = invoke(runs["retried"], "-o", "json", "--plot")
    assert code == 2 and err.startswith("✗ --plot")
    code, _, err = invoke(runs["retried"], "--every", "0")
    assert code == 2


def test_the_default_is_the_latest_run_with_metrics(runs, invoke):
    # 'quiet' was submitted last, and ended without metrics: 'solo' is the latest with some.
    code, out, err = invoke()
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"loss/train/total · run {runs['solo']} (COMPLETED)")
    assert f"showing {runs['solo']}, the latest run with metrics ({runs['quiet']} has none)" in err


def test_two_runs_compared_share_one_table(runs, invoke):
    code, out, err = invoke(runs["retried"], runs["solo"])
    assert code == 0, err
    lines = out.splitlines()
    assert sum(line.startswith("loss/train/total · ") for line in lines) == 1
    assert lines[1].split() == ["STEP", runs["retried"], runs["solo"]]
    assert lines[-2].startswith(f"{runs['retried']}: first ") and lines[-1].startswith(f"{runs['solo']}: first ")


def test_a_run_without_metrics_yet_says_so(runs, invoke):
    from launcher.backends.local.backend import LocalBackend

    name = _submit(runs["home"], runs["root"] / "slow", "slow", "sleep 20", follow=False)
    try:
        code, _, err = invoke(name)
        assert code == 2
        assert err.startswith(f"✗ run {name} has no metrics yet (")
        assert f"launcher metrics {name} --follow" in err
    finally:
        LocalBackend(runs["home"]).stop(name)


def _slow_printer(runs, name: str, steps: int) -> str:
    """A run that starts quiet, then prints a step every 0.4 s."""
    work = runs["root"] / name
    work.mkdir()
    lines = [step_line(s, 1) for s in range(1, steps + 1)]
    (work / "printer.sh").write_text("sleep 1.5\n" + "".join(f"echo '{line}'\nsleep 0.4\n" for line in lines))
    return _submit(runs["home"], work, name, "bash printer.sh", follow=False)


def test_follow_prints_points_as_they_come_until_the_run_ends(runs, invoke):
    name = _slow_printer(runs, "follow", 4)
    code, out, err = invoke(name, "--follow")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"waiting for the first metrics of {name} (")
    printed = [line.split() for line in lines[1:-1]]
    assert printed == [[name, "loss/train/total", "step", str(s), f"{loss(s, 1):.6g}"] for s in range(1, 5)]
    assert lines[-1].startswith(f"{name} loss/train/total: first ")


def test_follow_on_a_terminal_redraws_the_plot_and_table(runs):
    import os
    import pty

    name = _slow_printer(runs, "follow-tty", 5)
    master, slave = pty.openpty()
    env = {"LAUNCHER_HOME": str(runs["home"]), "PATH": "/usr/bin:/bin", "COLUMNS": "100", "LINES": "60"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "metrics", name, "--follow", "--plot"], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    shown = read_terminal(master)
    assert proc.wait(timeout=60) == 0
    frames = shown.decode().split("\x1b[H\x1b[2J")[1:]
    assert len(frames) >= 3  # waiting, part of the curve, the whole curve
    assert "waiting for the first metrics" in frames[0]
    last = frames[-1]
    assert "step" in last and "loss/train/total · run" in last and "following" not in last
    rows = [line.split()[0] for line in last.splitlines() if line.split() and line.split()[0].isdigit()]
    assert rows[-5:] == ["1", "2", "3", "4", "5"]

"""Where a run's wall time went: goodput parts that add up to the wall time over a real local
run with one failure, its GPU-hours and its cost from the profile's price table."""

from __future__ import annotations

import json

import pytest

from launcher.backends.goodput import PARTS


def test_goodput_of_a_run_with_one_failure_adds_up_and_is_priced(cli, launcher_home):
    (launcher_home / "config.yaml").write_text(
        "current: local\nclusters:\n  local:\n    price_per_gpu_hour: {a100_80gb: 2.5}\n"
    )
    spec = cli.spec(
        "lossy",
        """\
        name: lossy
        compute: {gpus: 2, gpu_type: a100_80gb}
        command: |
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then launcher-heartbeat 1; sleep 1.5; exit 1; fi
          launcher-heartbeat 1; echo ok
        scheduling: {max_retries: 1, retry_backoff: {first: 1s}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "lossy", "-o", "json").stdout)
    g = rec["goodput"]
    assert abs(sum(g[p] for p in PARTS) - g["wall"]) < 0.01  # to the second, and better
    assert 1.0 <= g["restarting"] < 30  # the 1 s backoff between the attempts
    assert 1.4 <= g["lost"] < 30  # attempt 1's time since its last heartbeat
    assert g["queued"] >= 0 and g["starting"] > 0 and g["productive"] > 0
    held = g["starting"] + g["productive"] + g["lost"]
    assert g["gpus"] == 2 and g["gpu_hours"] == pytest.approx(2 * held / 3600, abs=1e-4)
    assert g["price_per_gpu_hour"] == 2.5 and g["cost"] == round(g["gpu_hours"] * 2.5, 2)
    text = cli("describe", "run", "lossy").stdout
    assert "Goodput:    " in text and "productive of" in text and "GPU-hours, $" in text
    for part in PARTS:
        assert f"  {part}:" in text
    assert "  Cost:        $" in text and "at $2.5 per GPU-hour" in text
    # A command that logs no throughput: its speed is not known, and says so.
    assert "  Tokens/s:    -\n" in text and "  MFU:         -\n" in text and "tokens/s" not in text
    assert g["tokens_per_sec"] is None and g["mfu"] is None

    # The SDK's Run carries the same split.
    from launcher.sdk import get_run

    run = get_run("lossy")
    sdk = run.goodput()
    assert sdk.price_per_gpu_hour == 2.5 and sdk.lost == g["lost"] and sdk.restarting == g["restarting"]


def test_a_profile_takes_a_price_table_and_refuses_a_bad_one(cli, launcher_home):
    (launcher_home / "config.yaml").write_text(
        "current: local\nclusters:\n  local:\n    price_per_gpu_hour: {h100: 3}\n"
    )
    assert cli("get", "runs").returncode == 0
    (launcher_home / "config.yaml").write_text(
        "current: local\nclusters:\n  local:\n    price_per_gpu_hour: {a100_80gb: -1}\n"
    )
    r = cli("get", "runs")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "price_per_gpu_hour" in r.stderr and "Traceback" not in r.stderr


def test_metrics_goodput_shows_each_attempts_parts_as_a_table_a_plot_and_a_png(cli, tmp_path):
    spec = cli.spec(
        "byattempt",
        """\
        name: byattempt
        command: |
          launcher-heartbeat 1
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then sleep 0.5; exit 1; fi
        scheduling: {max_retries: 1, retry_backoff: {first: 0.5s}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr

    r = cli("metrics", "byattempt", "--goodput", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    [record] = json.loads(r.stdout)
    first, second = record["attempts"]
    assert (first["attempt"], first["status"], second["attempt"], second["status"]) == (1, "FAILED", 2, "COMPLETED")
    # The backoff is the retry's; what attempt 1 lost is its own; together they are the run's.
    assert first["restarting"] == 0 and second["restarting"] >= 0.5 and first["lost"] >= 0.4 and second["lost"] == 0
    for part in PARTS:
        assert first[part] + second[part] == pytest.approx(record["goodput"][part], abs=0.01)
    assert second["goodput"] == round(second["productive"] / second["total"], 4)

    r = cli("metrics", "byattempt", "--goodput", "--plot")
    assert r.returncode == 0, r.stdout + r.stderr
    name = record["run"]
    assert f"goodput of {name} by attempt" in r.stdout
    assert f"attempt 1 ({first['goodput']:.0%})" in r.stdout and f"attempt 2 ({second['goodput']:.0%})" in r.stdout
    for part in ("queued", "restarting", "starting", "productive", "lost"):
        assert part in r.stdout
    assert f"{name}: " in r.stdout and "productive of" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("  1 ") or line.startswith("  2 ")]
    assert rows[0][:2] == ["1", "FAILED"] and rows[1][:2] == ["2", "COMPLETED"]
    assert rows[1][3] == f"{second['restarting']:.1f}" and rows[0][6] == f"{first['lost']:.1f}"

    png = tmp_path / "goodput.png"
    r = cli("metrics", "byattempt", "--goodput", "--png", str(png))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"goodput by attempt" in png.read_bytes()

    r = cli("metrics", "byattempt", "--goodput", "-m", "loss/*")
    assert r.returncode == 2 and "--goodput" in r.stderr and "-m" in r.stderr and "Traceback" not in r.stderr


def test_tokens_per_sec_and_mfu_come_from_the_trainers_speed_records(cli, launcher_home):
    """A command that prints the records Composer's SpeedMonitor gives our trainer (no
    training): describe, its JSON and the dashboard show their medians."""
    records = "".join(
        f"""echo '@@launcher.metrics {{"step": {step}, "time": {1.7e9 + step}, "rank": 0, "metrics": """
        f"""{{"loss/train/total": 2.0, "throughput/tokens_per_sec": {tps}, "throughput/device/mfu": {mfu}}}}}'\n"""
        for step, tps, mfu in ((1, 900.0, 0.1), (2, 12000.0, 0.41), (3, 12500.0, 0.43), (4, 12250.0, 0.42))
    )
    spec = cli.spec("speedy", "name: speedy\ncommand: |\n" + "".join(f"  {line}\n" for line in records.splitlines()))
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr

    g = json.loads(cli("describe", "run", "speedy", "-o", "json").stdout)["goodput"]
    assert g["tokens_per_sec"] == 12125.0 and g["mfu"] == pytest.approx(0.415)  # medians: warm-up aside
    text = cli("describe", "run", "speedy").stdout
    assert "  Tokens/s:    12,125\n" in text and "  MFU:         41.5%\n" in text
    assert "; 12,125 tokens/s; MFU 41.5%" in text.split("Goodput:    ")[1].splitlines()[0]

    pytest.importorskip("starlette", reason="the dashboard needs the ui extra")
    from starlette.testclient import TestClient

    from launcher.ui.app import create_app
    from launcher.ui.runs import RunsSource

    name = cli.describe("speedy")["name"]
    with TestClient(create_app(RunsSource())) as client:
        assert client.get(f"/api/runs/{name}").json()["goodput"]["tokens_per_sec"] == 12125.0
        assert "12,125 tokens/s, MFU 41.5%" in client.get(f"/runs/{name}").text


def test_parts_add_up_where_an_event_has_whole_seconds_before_a_finer_creation_time():
    # Kubernetes' statuses have whole seconds; a run's creation time may have microseconds:
    # the first event can come before it, and no part may count time before the run was.
    from datetime import UTC, datetime, timedelta

    from launcher.backends.base import Attempt, Run, RunStatus, StatusEvent

    t = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
    run = Run(
        name="r",
        backend="kubernetes",
        status=RunStatus.FAILED,
        created_at=t + timedelta(milliseconds=500),
        spec={"name": "r"},
        ended_at=t + timedelta(seconds=2),
        attempts=[Attempt(index=1, status=RunStatus.FAILED, progress_age=0.2)],
        events=[
            StatusEvent(RunStatus.PENDING, t, 1),
            StatusEvent(RunStatus.RUNNING, t + timedelta(seconds=1), 1),
            StatusEvent(RunStatus.FAILED, t + timedelta(seconds=2), 1),
        ],
    )
    g = run.goodput()
    assert (g.wall, g.queued, g.productive, g.lost) == (1.5, 0.5, 0.8, 0.2)

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

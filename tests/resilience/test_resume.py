"""A retried attempt resumes from the newest complete checkpoint (LAUNCHER_RESUME_FROM), and
describe says which step it resumed from and how many steps were lost (a real local run)."""

from __future__ import annotations

import json


def test_a_retry_resumes_from_the_newest_complete_checkpoint(cli):
    spec = cli.spec(
        "resumes",
        """\
        name: resumes
        parameters: {save_folder: "./ckpts/{run_name}"}
        command: |
          dir="ckpts/$RUN_NAME"
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then
            mkdir -p "$dir"
            echo weights > "$dir/ep0-ba10-rank0.pt"
            echo half > "$dir/ep0-ba20-rank0.pt.tmp"   # the one the crash interrupted
            : > "$dir/ep0-ba15-rank0.pt"               # empty: never written
            ln -s ep0-ba10-rank0.pt "$dir/latest-rank0.pt"
            launcher-heartbeat 25
            exit 1
          fi
          echo "resuming from $LAUNCHER_RESUME_FROM"
        scheduling: {max_retries: 1, retry_backoff: {first: 0.1s}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "resumes", "-o", "json").stdout)
    name = rec["name"]
    expected = str(cli.cwd / "ckpts" / name / "ep0-ba10-rank0.pt")
    assert f"resuming from {expected}" in cli("logs", "resumes", "--attempt", "2").stdout
    first, second = rec["attempts"]
    assert first["resumed"] is None and first["failure"]["last_step"] == 25
    assert second["resumed"] == {"from": expected, "step": 10, "steps_lost": 15}
    assert f"  Resumed: from {expected} (step 10); 15 steps lost" in cli("describe", "run", "resumes").stdout

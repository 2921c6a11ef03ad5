"""A rank that stops making progress: its Python stacks in the log, the attempt ended as a
hang, and the next attempt runs (real local runs of the entrypoint, through the CLI)."""

from __future__ import annotations

import json

HANGS_ON_ATTEMPT_1 = """\
name: hangs
command: |
  launcher-heartbeat 7
  python3 -c "
  import os, time
  print('@@launcher.heartbeat {\\"step\\": 8}', flush=True)
  def wait_for_the_allreduce():
      time.sleep(3600)
  if os.environ['LAUNCHER_ATTEMPT'] == '1':
      wait_for_the_allreduce()
  print('finished on attempt', os.environ['LAUNCHER_ATTEMPT'])
  "
scheduling: {retry_on_system_failure: true, retry_backoff: {first: 0.1s}}
resilience: {hang_timeout: 3s}
"""


def test_a_hang_dumps_the_stacks_ends_the_attempt_and_the_retry_completes(cli):
    spec = cli.cwd / "hangs.yaml"
    spec.write_text(HANGS_ON_ATTEMPT_1)
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "hangs", "-o", "json").stdout)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    failure = rec["attempts"][0]["failure"]
    assert failure["class"] == "hang" and failure["retried_as"] == "system"
    assert "no progress for 3 s (last at step 8); resilience.hang_timeout is 3 s" in failure["evidence"]
    assert failure["last_step"] == 8
    logs = cli("logs", "hangs", "--attempt", "1").stdout
    assert "hang: dumping the Python stacks of process(es)" in logs and "with faulthandler" in logs
    assert "in wait_for_the_allreduce" in logs  # the sleeping frame, named
    assert "finished on attempt 2" in cli("logs", "hangs", "--attempt", "2").stdout


def test_a_quiet_command_that_never_reported_progress_is_not_called_hung(cli):
    spec = cli.spec(
        "quiet",
        """\
        name: quiet
        command: sleep 4; echo done
        resilience: {hang_timeout: 1s}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "done" in r.stdout


def test_a_heartbeat_line_without_a_time_is_progress_as_it_is_read():
    from launcher.entrypoint.watch import Watch

    watch = Watch(hang_timeout=60)
    watch.feed(b'some output\n@@launcher.heartbeat {"step": 3}\n')
    assert watch.step == 3
    # Not hung at once: the line's place in the chunk is not its time.
    assert 0 <= watch.progress_age() < 60

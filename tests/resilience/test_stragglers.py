"""A rank slower than resilience.straggler_factor × the others' step time over its last 20
steps is named, with its step time against theirs, in its log and describe (a real local
run of 2 ranks, their steps timed from heartbeats)."""

from __future__ import annotations

import json
import re


def test_a_slow_rank_is_named_with_its_step_time(cli):
    spec = cli.spec(
        "slow",
        """\
        name: slow
        compute: {nodes: 2}
        command: |
          pause=0.05; [ "$NODE_RANK" = 1 ] && pause=0.3
          for step in $(seq 1 40); do launcher-heartbeat $step; sleep $pause; done
        resilience: {straggler_factor: 2}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "slow", "-o", "json").stdout)
    (line,) = rec["attempts"][0]["stragglers"]
    m = re.fullmatch(
        r"straggler: rank 1 on localhost: ([0-9.]+) s a step against the other ranks' median ([0-9.]+) s "
        r"\(([0-9.]+)x, resilience.straggler_factor 2\) over its last 20 steps",
        line,
    )
    assert m, line
    assert float(m.group(1)) > 2 * float(m.group(2))
    assert f"[launcher] {line}" in cli("logs", "slow", "--rank", "1").stdout
    assert "straggler" not in cli("logs", "slow", "--rank", "0").stdout
    assert f"  Straggler: {line.removeprefix('straggler: ')}" in cli("describe", "run", "slow").stdout

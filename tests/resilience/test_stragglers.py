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


def test_the_rule_is_the_median_of_the_other_ranks_step_times():
    """stragglers() finds each rank's others' median from one sorted list (rank 0 judges a
    large run's ranks twice a second): the same as taking each rank's others' median."""
    import random
    import statistics

    from launcher.pod.stragglers import Straggler, stragglers

    rng = random.Random(38)
    for _ in range(500):
        times = {r: rng.choice([0.5, 1.0, 1.0, 2.5, rng.uniform(0.1, 5)]) for r in range(rng.randint(0, 9))}
        expected = []
        for rank, seconds in sorted(times.items()):
            others = [v for r, v in times.items() if r != rank]
            if others and seconds > 2.0 * statistics.median(others):
                expected.append(Straggler(rank, seconds, statistics.median(others)))
        assert stragglers(times, 2.0) == expected, times

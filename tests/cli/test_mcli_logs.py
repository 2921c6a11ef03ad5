"""`launcher logs` with mcli 0.8.3's flags (issue 22, part 4): --resumption counted from 0,
-t/--tail, --no-follow, --node-rank, --gpu/--global-gpu-rank, --first-exception; the
trainer's metric records hidden unless --raw; the trainer's progress line."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC
from pathlib import Path

import pytest
import yaml

from tests.train.conftest import number_say, tiny_config  # noqa: F401 - number_say is a fixture

RECORDS = """\
  echo '@@launcher.metrics {"step":0,"time":1.0,"rank":0,"event":"fit_start","max_duration":"3ba","max_batches":3}'
  for s in 1 2 3; do
    echo "step $s"
    echo "@@launcher.metrics {\\"step\\":$s,\\"time\\":$s.5,\\"rank\\":0,\\"metrics\\":{\\"loss/train/total\\":$((4 - s)).5}}"
  done
"""

FAILING = """\
import os

rank = int(os.environ["NODE_RANK"])
print(f"rank {rank} starts", flush=True)


def load():
    raise KeyError("config")


if rank == 1:
    try:
        load()
    except KeyError as e:
        raise ValueError("rank one failed") from e
print(f"rank {rank} done", flush=True)
"""


def mine(text: str) -> list[str]:
    """The command's own lines, without the entrypoint's [launcher] lines."""
    return [line for line in text.splitlines() if "[launcher]" not in line]


def test_resumption_counts_from_zero_and_attempt_from_one(cli):
    spec = cli.spec(
        "retried",
        """\
        name: retried
        scheduling: {max_retries: 1, retry_backoff: {first: 0.1s}}
        command: |
          echo "this is attempt $LAUNCHER_ATTEMPT"
          [ "$LAUNCHER_ATTEMPT" = 2 ]
        """,
    )
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    first = cli("logs", "--resumption", "0")
    assert first.returncode == 0, first.stderr
    assert mine(first.stdout) == ["this is attempt 1"]
    assert mine(cli("logs", "--attempt", "1").stdout) == ["this is attempt 1"]
    assert mine(cli("logs", "--resumption", "1").stdout) == ["this is attempt 2"]
    assert mine(cli("logs").stdout) == ["this is attempt 2"]
    both = cli("logs", "--attempt", "2", "--resumption", "0")
    assert both.returncode == 2 and "resumption 0 is attempt 1" in both.stderr and "Traceback" not in both.stderr
    help_text = " ".join(cli("logs", "--help").stdout.split())
    assert "counted from 1" in help_text and "from 0: --resumption 0 is --attempt 1" in help_text


def test_tail_short_flag_and_no_follow(cli):
    spec = cli.spec(
        "lines",
        """\
        name: lines
        command: for i in 1 2 3 4 5; do echo "line $i"; done
        """,
    )
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    whole = cli("logs", "--no-follow")
    assert whole.returncode == 0, whole.stderr
    assert mine(whole.stdout) == [f"line {i}" for i in range(1, 6)]
    assert whole.stdout == cli("logs").stdout
    last = cli("logs", "-t", "3")
    assert last.returncode == 0, last.stderr
    assert last.stdout.splitlines() == cli("logs", "--tail", "3").stdout.splitlines()
    assert len(last.stdout.splitlines()) == 3 and last.stdout.splitlines() == whole.stdout.splitlines()[-3:]


def test_no_follow_on_a_running_run_prints_what_there_is(cli):
    spec = cli.spec(
        "slow",
        """\
        name: slow
        command: |
          echo started
          sleep 60
        """,
    )
    assert cli("run", "-f", str(spec)).returncode == 0
    try:
        cli.wait_status("slow", {"RUNNING"})
        from tests.conftest import wait_until

        now = wait_until(
            lambda: (
                (r := cli("logs", "slow", "--no-follow", timeout=20)).returncode == 0 and "started" in r.stdout and r
            ),
            30,
            message="`logs --no-follow` to show the first line",
        )
        assert "started" in now.stdout
    finally:
        cli("stop", "run", "slow", "-y")


def test_node_rank_gpu_and_global_gpu_rank(cli):
    spec = cli.spec(
        "gpus",
        """\
        name: gpus
        compute: {nodes: 2, gpus: 4}
        command: echo "node $NODE_RANK speaking"
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    assert mine(cli("logs", "gpus", "--node-rank", "1").stdout) == ["node 1 speaking"]

    # Two GPUs per node: global GPU rank 2 is local GPU rank 0 of node 1, whose log is node 1's.
    by_global = cli("logs", "gpus", "--global-gpu-rank", "2")
    assert by_global.returncode == 0, by_global.stderr
    assert mine(by_global.stdout) == ["node 1 speaking"]
    assert "global GPU rank 2 (local GPU rank 0 of node rank 1): its output is node rank 1's log" in by_global.stderr
    assert mine(cli("logs", "gpus", "--gpu", "0", "--node-rank", "1").stdout) == ["node 1 speaking"]
    assert mine(cli("logs", "gpus", "--gpu", "0").stdout) == ["node 0 speaking"]

    # A GPU rank other than a node's first has no log of its own: said, not faked.
    for args, words in (
        (["--global-gpu-rank", "3"], "global GPU rank 3 (local GPU rank 1 of node rank 1) has no log"),
        (["--gpu", "1"], "local GPU rank 1 of node rank 0 has no log of its own"),
        (["--gpu", "2"], "2 GPUs per node: local GPU ranks 0..1, not 2"),
        (["--global-gpu-rank", "4"], "GPU ranks 0..3 (2 node(s) of 2 GPUs), not 4"),
        (["--global-gpu-rank", "2", "--node-rank", "0"], "is on node rank 1, not 0"),
    ):
        bad = cli("logs", "gpus", *args)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)
        assert words in bad.stderr and "Traceback" not in bad.stderr, (args, bad.stderr)
    assert re.search(
        r"\n  launcher logs gpus-[a-z0-9]{6} --node-rank 1\n", cli("logs", "gpus", "--global-gpu-rank", "3").stderr
    )


def test_gpu_flags_on_a_cpu_run_say_it_has_no_gpu_ranks(cli):
    spec = cli.spec("cpu", "name: cpu\ncommand: echo hi\n")
    assert cli("run", "-f", str(spec), "--follow").returncode == 0
    bad = cli("logs", "cpu", "--gpu", "0")
    assert bad.returncode == 2 and "has no GPUs (compute.gpus is 0)" in bad.stderr and "--node-rank" in bad.stderr


def _failing_run(cli, tmp: Path, *extra: str) -> str:
    script = cli.cwd / "fail.py"
    script.write_text(FAILING)
    spec = cli.spec(
        "broken",
        f"""\
        name: broken
        compute: {{nodes: 2}}
        command: {sys.executable} {script}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow", *extra)
    assert r.returncode == 1, r.stderr
    return cli.describe()["name"]


def _assert_rank_one_traceback(out: str, err: str) -> None:
    lines = out.splitlines()
    assert lines[0] == "Traceback (most recent call last):", out
    assert lines[-1] == "ValueError: rank one failed", out
    # The chained traceback is part of it; nothing else the ranks printed is.
    assert "KeyError: 'config'" in out and "The above exception was the direct cause" in out
    assert "rank 0" not in out and "rank 1 starts" not in out and "[launcher]" not in out
    assert "rank 1, attempt 1: ValueError: rank one failed" in err


def test_first_exception_of_a_run_whose_rank_1_raised(cli, tmp_path):
    name = _failing_run(cli, tmp_path)
    r = cli("logs", name, "--first-exception")
    assert r.returncode == 0, r.stderr
    _assert_rank_one_traceback(r.stdout, r.stderr)
    assert "the first in rank order: these log lines carry no times" in r.stderr  # a local run's log files
    # Only rank 0: it raised nothing.
    none = cli("logs", name, "--first-exception", "--rank", "0")
    assert none.returncode == 1 and "has no Python traceback in its logs" in none.stderr
    refused = cli("logs", name, "--first-exception", "--tail", "3")
    assert refused.returncode == 2 and "takes neither --follow nor --tail" in refused.stderr


def test_first_exception_on_the_fake_cluster_is_the_earliest_by_time(cli, fake_kube, tmp_path):
    name = _failing_run(cli, tmp_path, "--cluster", "fake")
    r = cli("logs", name, "--first-exception")
    assert r.returncode == 0, r.stderr
    _assert_rank_one_traceback(r.stdout, r.stderr)
    assert "(the earliest by time)" in r.stderr  # a pod's log lines carry their times


def _recording_run(cli, *extra: str) -> str:
    spec = cli.spec("recorder", "name: recorder\ncommand: |\n" + RECORDS + "  echo plain output\n")
    r = cli("run", "-f", str(spec), "--follow", *extra)
    assert r.returncode == 0, r.stderr
    return cli.describe()["name"]


@pytest.mark.parametrize("where", ["local", "fake"])
def test_metric_records_are_hidden_unless_raw(cli, where, request):
    extra = []
    if where == "fake":
        request.getfixturevalue("fake_kube")
        extra = ["--cluster", "fake"]
    name = _recording_run(cli, *extra)
    shown = cli("logs", name)
    assert shown.returncode == 0, shown.stderr
    assert mine(shown.stdout) == ["step 1", "step 2", "step 3", "plain output"]
    raw = cli("logs", name, "--raw")
    assert raw.stdout.count("@@launcher.metrics") == 4
    # A tail counts the lines shown: the records between them do not take its places.
    tail = cli("logs", name, "-t", "4")
    assert "@@launcher.metrics" not in tail.stdout and len(tail.stdout.splitlines()) == 4
    assert "step 3" in tail.stdout and "plain output" in tail.stdout
    # Raw, the records count; after the command the entrypoint may log its step time too.
    assert mine(cli("logs", name, "-t", "3", "--raw").stdout)[-1] == "plain output"
    # `launcher metrics` still reads them.
    points = json.loads(cli("metrics", name, "-o", "json").stdout)
    assert [(p["step"], p["value"]) for p in points] == [(1, 3.5), (2, 2.5), (3, 1.5)]


@pytest.mark.train
def test_the_trainer_prints_a_progress_line_per_log_interval(cli, number_say):
    pytest.importorskip("composer")
    cfg = yaml.safe_load(
        tiny_config(
            cli.cwd / "params.yaml",
            tokenizer=number_say.tokenizer,
            remote=str(number_say.mds),
            local=cli.cwd / "cache",
            max_duration="6ba",
            batch=8,
        ).read_text()
    )
    # SpeedMonitor's window is 2 batches here, so the throughput is known from the first lines on.
    cfg.update(log_to_console=True, console_log_interval="2ba", callbacks={"speed_monitor": {"window_size": 2}})
    spec = cli.cwd / "train.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"name": "tiny", "command": f"{sys.executable} -m launcher.train $PARAMETERS", "parameters": cfg}
        )
    )
    r = cli("run", "-f", str(spec), "--follow", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    out = cli("logs").stdout
    progress = [line for line in out.splitlines() if line.startswith("[train] ")]
    assert [re.match(r"\[train\] step (\d+)/6 · loss \d", line) is not None for line in progress] == [True] * 3, out
    assert [int(re.match(r"\[train\] step (\d+)", line).group(1)) for line in progress] == [2, 4, 6]
    assert "@@launcher.metrics" not in out
    # Composer's block of every metric is not printed: the records carry those.
    assert "Train loss/train/total" not in out
    assert cli("logs", "--raw").stdout.count("@@launcher.metrics") >= 7  # fit_start and a record per step
    points = json.loads(cli("metrics", "-o", "json").stdout)
    assert [p["step"] for p in points] == list(range(1, 7))
    last = progress[-1]
    assert f"loss {points[-1]['value']:.4g} · " in last and " tok/s · ETA 0:00:00" in last, (last, points[-1])


def test_chunks_of_a_log_lose_no_line_when_records_are_cut_out():
    from launcher.sdk.logview import without_record_chunks

    text = b"".join(b'line %d\n@@launcher.metrics {"step": %d}\n' % (i, i) for i in range(2000)) + b"tail"
    for size in (1, 7, 64, 4096):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert b"".join(without_record_chunks(pieces)) == b"".join(b"line %d\n" % i for i in range(2000)) + b"tail"


def test_tracebacks_are_read_from_interleaved_ranks():
    from datetime import datetime, timedelta

    from launcher.backends.base import LogLine
    from launcher.sdk.logview import first_exception

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rank0 = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "a.py", line 1, in <module>',
        "[rank0]: RuntimeError: NCCL timeout",
        "after",
    ]
    rank1 = [
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in <module>',
        "    boom()",
        "ZeroDivisionError: division by zero",
    ]
    lines = []
    for i in range(4):  # interleaved; rank 1's traceback is the earlier one by time
        lines.append(LogLine(rank=0, text=rank0[i], timestamp=t0 + timedelta(seconds=10 + i)))
        lines.append(LogLine(rank=1, text=rank1[i], timestamp=t0 + timedelta(seconds=i)))
    found = first_exception(lines)
    assert found.by_time and found.traceback.rank == 1
    assert [x.text for x in found.traceback.lines] == rank1
    untimed = first_exception([LogLine(rank=x.rank, text=x.text) for x in lines])
    assert not untimed.by_time and untimed.traceback.rank == 0
    assert untimed.traceback.exception == "RuntimeError: NCCL timeout"

from __future__ import annotations

import json
from datetime import UTC, datetime

from launcher.backends.base import LogLine, RunStatus
from launcher.metrics.cache import IndexCache
from launcher.metrics.collect import Collector
from tests.conftest import wait_until

from .backends import DirBackend, StreamBackend, TrackerBackend, make_run
from .logdata import ATTEMPT_1, ATTEMPT_2, T0, attempt_lines, expected_points, expected_time, loss, step_line


def _points(rm, metric="loss/train/total"):
    s = rm.series[metric]
    return list(zip(s.steps, s.values, s.attempts))


def _two_attempt_run(backend, status=RunStatus.COMPLETED):
    run = make_run("r", [(RunStatus.FAILED, None), (status, None)], status=status)
    backend.runs["r"] = run
    return run


def test_logs_of_every_attempt_make_one_curve(tmp_path):
    backend = DirBackend(tmp_path / "runs")
    run = _two_attempt_run(backend)
    backend.log_file("r", 0, 1).write_text("\n".join(attempt_lines(1, ATTEMPT_1)) + "\n")
    backend.log_file("r", 0, 2).write_text("\n".join(attempt_lines(2, ATTEMPT_2)) + "\n")
    # Rank 1's own log is not read: global rank 0 lives on node rank 0.
    backend.log_file("r", 1, 1).write_text(step_line(1, 1, rank=0, extra={"loss/train/total": 55.0}) + "\n")

    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert rm.source == "logs"
    assert _points(rm) == expected_points()
    assert [(r.attempt, r.step) for r in rm.restarts] == [(2, ATTEMPT_2.start)]
    assert rm.series["loss/train/total"].times == [expected_time(s, a) for s, _, a in expected_points()]
    assert rm.fit is not None and rm.fit["max_batches"] == 10


def test_the_cache_survives_between_collectors(tmp_path):
    backend = DirBackend(tmp_path / "runs")
    run = _two_attempt_run(backend)
    log = backend.log_file("r", 0, 1)
    log.write_text("x" * 5000 + "\n" + "\n".join(step_line(s) for s in range(1, 4)) + "\n")
    cache = IndexCache(tmp_path / "cache")
    Collector(backend, run, cache=cache).refresh()

    # Same-size in-place edit of an indexed line: only a fresh parse would notice it.
    old = repr(loss(2, 1))
    log.write_text(log.read_text().replace(old, "7.".ljust(len(old), "0"), 1))
    with open(log, "a") as f:
        f.write(step_line(4) + "\n")
    rm = Collector(backend, run, cache=cache).refresh()
    assert _points(rm) == [(s, loss(s, 1), 1) for s in range(1, 5)]

    # Without the cache, the edit shows: the test above did depend on the cache.
    fresh = Collector(backend, run, cache=IndexCache(tmp_path / "other-cache")).refresh()
    assert _points(fresh)[1] == (2, 7.0, 1)


def test_metrics_jsonl_wins_and_is_split_into_attempts_by_start_time(tmp_path):
    backend = DirBackend(tmp_path / "runs")
    started = [datetime.fromtimestamp(T0 + 100 * a - 1, UTC) for a in (1, 2)]
    run = make_run("r", [(RunStatus.FAILED, started[0]), (RunStatus.COMPLETED, started[1])])
    backend.runs["r"] = run
    jsonl = backend.artifacts_dir("r") / "metrics.jsonl"
    jsonl.parent.mkdir(parents=True)
    body = [
        line.split("@@launcher.metrics ", 1)[1]
        for a, steps in ((1, ATTEMPT_1), (2, ATTEMPT_2))
        for line in attempt_lines(a, steps)
        if line.startswith('@@launcher.metrics {"')
    ]
    jsonl.write_text("\n".join(body) + "\n")
    backend.log_file("r", 0, 1).write_text(step_line(1, 1, extra={"loss/train/total": 42.0}) + "\n")

    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert rm.source == "metrics.jsonl"
    assert _points(rm) == expected_points()
    assert [(r.attempt, r.step) for r in rm.restarts] == [(2, ATTEMPT_2.start)]


def _stream_backend(status=RunStatus.COMPLETED):
    backend = StreamBackend()
    run = _two_attempt_run(backend, status)
    for attempt, steps in ((1, ATTEMPT_1), (2, ATTEMPT_2)):
        backend.lines[("r", attempt)] = [LogLine(0, text, attempt) for text in attempt_lines(attempt, steps)]
    return backend, run


def test_streamed_logs_of_ended_attempts_are_read_once(tmp_path):
    backend, run = _stream_backend()
    cache = IndexCache(tmp_path / "cache")
    assert _points(Collector(backend, run, cache=cache).refresh()) == expected_points()
    assert backend.streamed == [("r", 1), ("r", 2)]
    assert _points(Collector(backend, run, cache=cache).refresh()) == expected_points()
    assert backend.streamed == [("r", 1), ("r", 2)]


def test_the_running_attempt_is_streamed_again(tmp_path):
    backend, run = _stream_backend(RunStatus.RUNNING)
    cache = IndexCache(tmp_path / "cache")
    collector = Collector(backend, run, cache=cache)
    collector.refresh()
    backend.lines[("r", 2)].append(LogLine(0, step_line(11, 2), 2))
    rm = collector.refresh()
    assert rm.series["loss/train/total"].steps[-1] == 11
    assert backend.streamed == [("r", 1), ("r", 2), ("r", 2)]


def test_following_a_streamed_attempt_reads_it_in_the_background(tmp_path):
    backend, run = _stream_backend(RunStatus.RUNNING)
    collector = Collector(backend, run, cache=IndexCache(tmp_path / "cache"), follow=True)
    rm = wait_until(
        lambda: (rm := collector.refresh()).series and rm.series["loss/train/total"].steps[-1] == ATTEMPT_2[-1] and rm,
        5,
        interval=0.02,
        message="the follower to deliver attempt 2",
    )
    assert _points(rm) == expected_points()


def test_an_attempt_whose_log_is_gone_leaves_the_others_and_a_note(tmp_path):
    backend, run = _stream_backend()
    backend.gone.add(("r", 1))
    cache = IndexCache(tmp_path / "cache")
    rm = Collector(backend, run, cache=cache).refresh()
    assert _points(rm) == [(s, loss(s, 2), 2) for s in ATTEMPT_2]
    assert rm.notes == ["attempt 1 of r: cannot read its log: the pods of attempt 1 are gone"]
    # Not cached as empty: once readable again, attempt 1 is back.
    backend.gone.clear()
    assert _points(Collector(backend, run, cache=cache).refresh()) == expected_points()


def test_a_run_without_attempts_streams_nothing(tmp_path):
    backend = StreamBackend()
    backend.runs["p"] = run = make_run("p", [(RunStatus.PENDING, None)])
    run.attempts.clear()
    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert not rm.series and backend.streamed == []


def _json_text(rm, *, last=None):
    from launcher.metrics.render import choose, to_json

    return to_json(choose([rm], ["loss/train/total"], every=None, last=last))


def _dumps(run, points):
    """What json.dumps writes for each (step, value, attempt[, time]) point, one a line:
    the text -o json must match."""
    want = [
        {
            "run": run,
            "metric": "loss/train/total",
            "step": p[0],
            "value": p[1],
            "time": p[3] if len(p) > 3 else expected_time(p[0], p[2]),
            "attempt": p[2],
        }
        for p in points
    ]
    return "[\n" + ",\n".join(json.dumps(w) for w in want) + "\n]"


def test_json_text_kept_in_the_cache_stays_exact_as_the_log_grows(tmp_path):
    backend = DirBackend(tmp_path / "runs")
    run = _two_attempt_run(backend, RunStatus.RUNNING)
    backend.log_file("r", 0, 1).write_text("\n".join(attempt_lines(1, ATTEMPT_1)) + "\n")
    log2 = backend.log_file("r", 0, 2)
    log2.write_text("\n".join(attempt_lines(2, ATTEMPT_2)[:-6]) + "\n")  # attempt 2 is still writing
    cache = IndexCache(tmp_path / "cache")

    def call(**kw):
        collector = Collector(backend, run, cache=cache)
        try:
            return _json_text(collector.refresh(), **kw)
        finally:
            collector.close()  # as the CLI does: keeps the text formatted for this call

    partial = [p for p in expected_points() if p[2] == 1 or p[0] <= ATTEMPT_2[-3]]
    assert call() == _dumps("r", partial)
    assert call() == _dumps("r", partial)  # from the kept text
    assert call(last=2) == _dumps("r", partial[-2:])

    # The attempt goes on: the kept text covers the old points, the new ones are added.
    with open(log2, "a") as f:
        f.write("\n".join(attempt_lines(2, ATTEMPT_2)[-6:]) + "\n")
    assert call() == _dumps("r", expected_points())
    assert call() == _dumps("r", expected_points())
    assert call(last=3) == _dumps("r", expected_points()[-3:])

    # A replaced log (other values, fewer steps) is read again, and so is its text.
    log2.write_text("\n".join(attempt_lines(3, range(5, 8))) + "\n")
    want = [p for p in expected_points() if p[2] == 1] + [(s, loss(s, 3), 2, expected_time(s, 3)) for s in range(5, 8)]
    assert call() == _dumps("r", want)
    assert call() == _dumps("r", want)


def test_a_cache_entry_of_an_older_format_is_rebuilt(tmp_path):
    import pickle

    from launcher.metrics.cache import FORMAT_VERSION

    backend = DirBackend(tmp_path / "runs")
    run = _two_attempt_run(backend)
    backend.log_file("r", 0, 1).write_text("\n".join(attempt_lines(1, ATTEMPT_1)) + "\n")
    backend.log_file("r", 0, 2).write_text("\n".join(attempt_lines(2, ATTEMPT_2)) + "\n")
    cache = IndexCache(tmp_path / "cache")
    Collector(backend, run, cache=cache).refresh()

    # Each entry as an older launcher would have left it: an index that still matches
    # its file (so, if trusted, nothing would be read again) but holds no points.
    entries = sorted((tmp_path / "cache" / "r").glob("*.pkl"))
    assert len(entries) == 2
    for entry in entries:
        _, key, index = pickle.loads(entry.read_bytes())
        index.segments = []
        entry.write_bytes(pickle.dumps((FORMAT_VERSION - 1, key, index)))

    rm = Collector(backend, run, cache=cache).refresh()
    assert _points(rm) == expected_points()
    assert {pickle.loads(e.read_bytes())[0] for e in entries} == {FORMAT_VERSION}


def _tracker_backend():
    backend = TrackerBackend()
    run = _two_attempt_run(backend)
    for attempt, steps in ((1, ATTEMPT_1), (2, ATTEMPT_2)):
        backend.lines[("r", attempt)] = [LogLine(0, text, attempt) for text in attempt_lines(attempt, steps)]
    return backend, run


def test_a_trackers_history_is_the_curve_where_the_backend_reads_one(tmp_path):
    from launcher.backends.capabilities import TrackerRun

    backend, run = _tracker_backend()
    t0 = T0 + 1
    backend.tracked["r"] = [
        TrackerRun(
            "MLflow run a1", None, {"loss": [(s, t0 + s, 10.0 / s) for s in (1, 2, 3)], "lr": [(2, t0 + 2, 0.1)]}
        )
    ]
    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert rm.source == "MLflow run a1"
    assert list(zip(rm.series["loss"].steps, rm.series["loss"].values)) == [(1, 10.0), (2, 5.0), (3, 10.0 / 3)]
    assert rm.series["lr"].steps == [2]
    assert backend.streamed == []  # the logs were not read
    # the run has ended: a second reader finds its curves in the cache, not the tracker
    again = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert again.source == "MLflow run a1" and again.series["loss"].values == rm.series["loss"].values
    assert backend.asked == ["r"]


def test_without_a_tracker_run_the_logs_are_read_and_a_down_tracker_is_a_note(tmp_path):
    backend, run = _tracker_backend()
    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache")).refresh()
    assert rm.source == "logs" and _points(rm) == expected_points() and rm.notes == []
    backend.tracker_down = True
    rm = Collector(backend, run, cache=IndexCache(tmp_path / "cache2")).refresh()
    assert rm.source == "logs" and _points(rm) == expected_points()
    assert rm.notes == ["r: cannot read its tracker, so its curves come from its logs: the tracker answered 503"]

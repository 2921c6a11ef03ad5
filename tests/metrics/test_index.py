from __future__ import annotations

from pathlib import Path

from launcher.metrics.index import index_file, index_lines

from .logdata import ATTEMPT_1, attempt_lines, fit_start, loss, step_line


def _losses(segments) -> list[tuple[int, float]]:
    cols = [s.metrics["loss/train/total"] for s in segments]
    return [(st, v) for c in cols for st, v in zip(c.steps, c.values)]


def _write(path: Path, lines: list[str], mode: str = "w") -> None:
    with open(path, mode) as f:
        f.write("\n".join(lines) + "\n")


def test_only_rank_0_records_count_and_noise_is_ignored(tmp_path):
    log = tmp_path / "rank-0.log"
    _write(log, attempt_lines(1, ATTEMPT_1))
    read = index_file(log)
    assert _losses(read.segments) == [(s, loss(s, 1)) for s in ATTEMPT_1]
    assert read.segments[0].events[0]["max_batches"] == 10


def test_lines_without_a_rank_field_take_the_log_line_rank():
    from launcher.metrics.records import format_record

    rec = format_record({"step": 1, "time": 1.0, "metrics": {"m": 1.0}})
    assert index_lines([(1, rec)]) == []
    assert [list(s.metrics["m"].values) for s in index_lines([(0, rec)])] == [[1.0]]


def test_a_second_read_parses_only_appended_bytes(tmp_path):
    log = tmp_path / "rank-0.log"
    # Enough noise first that the rewritten line below lies past the header check.
    _write(log, ["x" * 100] * 60 + [step_line(s) for s in range(1, 4)])
    first = index_file(log)
    assert first.changed and first.index.offset == log.stat().st_size

    # Rewrite step 2's value in place, same length: a reader that re-parsed the whole file
    # would see it; an incremental one must not have read those bytes again.
    text = log.read_text()
    old = repr(loss(2, 1))
    new = str(9.0).ljust(len(old), "0")
    log.write_text(text.replace(old, new, 1))
    _write(log, [step_line(s) for s in range(4, 6)], mode="a")

    second = index_file(log, first.index)
    assert second.changed
    assert _losses(second.segments) == [(s, loss(s, 1)) for s in range(1, 6)]
    # `first` was not mutated: callers may hold it.
    assert _losses(first.segments) == [(s, loss(s, 1)) for s in range(1, 4)]

    third = index_file(log, second.index)
    assert not third.changed and third.segments == second.segments


def test_a_replaced_or_truncated_file_is_read_again(tmp_path):
    log = tmp_path / "rank-0.log"
    _write(log, [step_line(s) for s in range(1, 6)])
    first = index_file(log)
    _write(log, [step_line(s, attempt=2) for s in range(1, 3)])  # shorter: truncated
    again = index_file(log, first.index)
    assert _losses(again.segments) == [(s, loss(s, 2)) for s in (1, 2)]
    _write(log, [step_line(s, attempt=3) for s in range(1, 3)])  # same size, new content
    assert _losses(index_file(log, again.index).segments) == [(s, loss(s, 3)) for s in (1, 2)]


def test_an_unterminated_last_line_is_shown_but_not_committed(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_text(step_line(1) + "\n" + step_line(2))  # the writer has not finished line 2
    read = index_file(log)
    assert _losses(read.segments) == [(1, loss(1, 1)), (2, loss(2, 1))]
    assert read.index.offset == len(step_line(1)) + 1
    with open(log, "a") as f:
        f.write("\n" + step_line(3) + "\n")
    assert _losses(index_file(log, read.index).segments) == [(s, loss(s, 1)) for s in (1, 2, 3)]


def test_each_fit_start_begins_a_segment(tmp_path):
    log = tmp_path / "metrics.jsonl"
    lines = [fit_start(1), step_line(1), step_line(2), fit_start(2, start=1), step_line(2, 2)]
    _write(log, [line.split(" ", 1)[1] for line in lines])
    segments = index_file(log, prefixed=False).segments
    assert [[st for st in s.metrics["loss/train/total"].steps] for s in segments] == [[1, 2], [2]]
    assert [s.events[0]["event"] for s in segments] == ["fit_start", "fit_start"]


def test_values_that_are_not_numbers_are_dropped_point_by_point(tmp_path):
    from launcher.metrics.records import format_record

    log = tmp_path / "rank-0.log"
    recs = [
        {"step": 1, "metrics": {"a": 1.5, "b": "n/a"}},
        {"step": 2, "metrics": {"a": None, "b": 2}},
        {"step": 3, "metrics": {"a": True}},
    ]
    _write(log, [format_record(r) for r in recs])
    seg = index_file(log).segments[0]
    assert list(seg.metrics["a"].steps) == [1, 3] and list(seg.metrics["a"].values) == [1.5, 1.0]
    assert list(seg.metrics["b"].steps) == [2] and list(seg.metrics["b"].values) == [2.0]


def test_metrics_logged_together_grow_together_across_cached_reads(tmp_path):
    import pickle

    log = tmp_path / "rank-0.log"
    _write(log, [step_line(s) for s in range(1, 4)])
    index = index_file(log).index
    for more in (range(4, 6), range(6, 9)):
        _write(log, [step_line(s) for s in more], mode="a")
        # Through a pickle round trip, as the cache keeps it between calls.
        index = index_file(log, pickle.loads(pickle.dumps(index))).index
    cols = index.segments[0].metrics
    assert [list(c.steps) for c in cols.values()] == [list(range(1, 9))] * 2
    assert list(cols["loss/train/total"].values) == [loss(s, 1) for s in range(1, 9)]
    assert list(cols["throughput/tokens_per_sec"].values) == [1000.0 * s for s in range(1, 9)]
    assert [len(c.times) for c in cols.values()] == [8, 8]


def test_metrics_logged_at_different_steps_stay_right_across_many_appended_reads(tmp_path):
    """Found by the dashboard: a metric logged at some steps only (eval, throughput after its
    window) gets arrays of its own, and growing them across reads once met a freed array's
    id in the cache of shared arrays: a TypeError, or another metric's steps."""
    from launcher.metrics.records import format_record

    def record(step: int) -> str:
        metrics = {"loss/train/total": 10.0 / step, f"odd/{step % 7}": float(step)}
        if step % 3 == 0:
            metrics["metrics/eval/loss"] = 5.0 / step
        if step > 4:
            metrics["throughput/tokens_per_sec"] = 1000.0 + step
        return format_record({"step": step, "time": 1000.0 + step, "rank": 0, "metrics": metrics})

    log = tmp_path / "rank-0.log"
    _write(log, [record(s) for s in range(1, 4)])
    read = index_file(log)
    for first in range(4, 400, 3):  # three steps appended between reads, as a live run does
        _write(log, [record(s) for s in range(first, first + 3)], mode="a")
        read = index_file(log, read.index)
    fresh = index_file(log)
    grown, whole = read.segments[0].metrics, fresh.segments[0].metrics
    assert sorted(grown) == sorted(whole)
    for name, cols in whole.items():
        assert list(grown[name].steps) == list(cols.steps), name
        assert list(grown[name].times) == list(cols.times), name
        assert list(grown[name].values) == list(cols.values), name
    assert list(whole["metrics/eval/loss"].steps) == list(range(3, 402, 3))

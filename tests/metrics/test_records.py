from __future__ import annotations

from launcher.metrics.records import format_record, parse_record, record_rank, scan_records

from .logdata import NOISE, step_line


def test_scan_finds_every_record_among_noise_and_skips_broken_ones():
    lines = [NOISE[0], step_line(1), "[rank1]: " + step_line(2), *NOISE, step_line(3)]
    records = [r for r in scan_records("\n".join(lines).encode() + b"\n") if isinstance(r, dict)]
    assert [r["step"] for r in records] == [1, 2, 3]
    # The same rule as the one-line reader.
    assert [parse_record(line) for line in lines if parse_record(line)] == records


def test_scan_of_a_torn_line_keeps_the_others():
    torn = step_line(2)[:40]
    block = "\n".join([step_line(1), torn, step_line(3)]).encode()
    assert [r["step"] for r in scan_records(block)] == [1, 3]


def test_scan_does_not_merge_lines_that_only_parse_together():
    # '[1' and '2]' would form one valid array if the lines were joined naively.
    block = b"@@launcher.metrics [1\n@@launcher.metrics 2]\n" + step_line(4).encode()
    values = scan_records(block)
    assert [v for v in values if isinstance(v, dict)] == [parse_record(step_line(4))]


def test_scan_of_metrics_jsonl_reads_bare_objects():
    body = "\n".join(format_record({"step": s, "metrics": {"a": s}})[len("@@launcher.metrics ") :] for s in (1, 2))
    assert [r["step"] for r in scan_records((body + "\n\n").encode(), prefixed=False)] == [1, 2]


def test_record_rank_prefers_the_record_over_the_log():
    assert record_rank({"rank": 1}, default=0) == 1
    assert record_rank({"rank": 0}, default=3) == 0
    assert record_rank({}, default=2) == 2
    assert record_rank({"rank": "x"}, default=0) == 0

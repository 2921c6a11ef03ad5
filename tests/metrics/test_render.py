from __future__ import annotations

import csv
import io
import json
import math
from array import array

from launcher.metrics.index import Columns, Segment
from launcher.metrics.render import choose, default_rows, to_csv, to_json
from launcher.metrics.series import RunMetrics, merge


def run_metrics(values: list[float], times: list[float] | None = None, name: str = "r") -> RunMetrics:
    steps = list(range(1, len(values) + 1))
    times = times if times is not None else [1000.0 + s for s in steps]
    seg = Segment(metrics={"m": Columns(array("q", steps), array("d", times), array("d", values))})
    series, restarts, fit = merge([(1, seg)])
    return RunMetrics(name, "COMPLETED", "logs", series, restarts, fit)


def test_json_is_what_json_dumps_writes_and_round_trips_non_finite_values():
    values = [0.1, 1e-300, math.nan, math.inf, -math.inf, 2.0000000000000004]
    times = [1.5, math.nan, 3.0, 4.0, 5.0, 6.0]
    rm = run_metrics(values, times, name='odd "name" 100%')
    text = to_json(choose([rm], ["m"], every=None, last=None))
    want = [
        {
            "run": 'odd "name" 100%',
            "metric": "m",
            "step": i + 1,
            "value": v,
            "time": None if math.isnan(t) else t,
            "attempt": 1,
        }
        for i, (v, t) in enumerate(zip(values, times))
    ]
    assert text == "[\n" + ",\n".join(json.dumps(w) for w in want) + "\n]"
    back = json.loads(text)
    assert [p["value"] for p in back][:2] == values[:2] and math.isnan(back[2]["value"])
    assert back[3]["value"] == math.inf and back[4]["value"] == -math.inf and back[5]["value"] == values[5]


def test_csv_round_trips_exactly():
    values = [1 / 3, math.nan, 1e20, -0.0]
    rm = run_metrics(values)
    rows = list(csv.DictReader(io.StringIO(to_csv(choose([rm], ["m"], every=None, last=None)))))
    back = [float(r["value"]) for r in rows]
    assert back[0] == values[0] and math.isnan(back[1]) and back[2:] == values[2:]
    assert math.copysign(1, back[3]) == -1


def test_default_rows_span_the_run_and_keep_the_ends():
    rm = run_metrics([float(i) for i in range(1000)])
    rows = default_rows(rm.series["m"], limit=20)
    assert len(rows) == 20 and rows[0] == 0 and rows[-1] == 999
    assert default_rows(run_metrics([1.0] * 10).series["m"], limit=20) == list(range(10))

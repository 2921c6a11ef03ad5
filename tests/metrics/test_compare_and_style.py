"""Comparing runs and drawing them honestly: whole-number step ticks, curves that stay
visible when they coincide, and the last progress line before the exit line."""

from __future__ import annotations

import itertools
import re

from launcher.metrics.plot import integer_ticks, png_figure, terminal_plot
from launcher.metrics.render import choose, compare_table

from .logdata import step_line
from .test_plot import _run


def test_integer_ticks_are_whole_evenly_spaced_and_within_range():
    for lo, hi in [(1, 46), (0, 7), (3, 3), (1, 2), (10, 100_000), (5, 37)]:
        ticks = integer_ticks(lo, hi)
        assert all(isinstance(t, int) for t in ticks)
        assert ticks and lo <= ticks[0] and ticks[-1] <= hi and len(ticks) <= 6
        assert len({b - a for a, b in itertools.pairwise(ticks)}) <= 1


def test_the_terminal_plot_labels_steps_with_whole_numbers():
    text = terminal_plot(choose([_run("a", 46)], ["loss/train/total"], every=None, last=None), width=80, height=20)
    axis = next(line for line in text.splitlines()[::-1] if re.search(r"\d", line) and "step" not in line)
    labels = re.findall(r"-?\d+(?:\.\d+)?", axis)
    assert len(labels) >= 3, axis
    assert all("." not in label for label in labels), axis


def test_identical_curves_get_their_own_line_style_and_a_legend_note():
    chosen = choose(
        [_run("run-a", 40), _run("run-b", 40), _run("run-c", 60)], ["loss/train/total"], every=None, last=None
    )
    fig = png_figure(chosen)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["run-a", "run-b (same as run-a)", "run-c"]
    styles = [line.get_linestyle() for line in ax.get_lines()]
    assert len(set(styles)) == 3, styles
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_compared_runs_share_one_table_with_a_column_per_run():
    a, b = _run("run-a", 5), _run("run-b", 3)
    text = compare_table(choose([a, b], ["loss/train/total"], every=None, last=None))
    lines = text.splitlines()
    assert lines[0].startswith("loss/train/total · run run-a (COMPLETED)") and "vs run run-b" in lines[0]
    assert lines[1].split() == ["STEP", "run-a", "run-b"]
    rows = [line.split() for line in lines[2:7]]
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert [len(r) for r in rows] == [3, 3, 3, 2, 2]  # run-b has no steps 4 and 5
    assert lines[7].startswith("run-a: first ") and lines[8].startswith("run-b: first ")


def test_the_last_progress_line_comes_before_the_exit_line(capsys):
    from launcher.cli.follow import LiveProgress

    live = LiveProgress()
    for step in range(1, 5):
        live.print(step_line(step), 0, False)
    live.print("[launcher] exit code 0: the command ran 1.0s, 2.0s in all", 0, False)
    live.close()
    out = capsys.readouterr().out.splitlines()
    progress = [i for i, line in enumerate(out) if line.startswith("[progress]")]
    assert progress and "step 4" in out[progress[-1]], out
    assert progress[-1] < out.index("[launcher] exit code 0: the command ran 1.0s, 2.0s in all"), out

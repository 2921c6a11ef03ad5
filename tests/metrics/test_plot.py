from __future__ import annotations

from array import array
from pathlib import Path

from launcher.metrics.index import Columns, Segment
from launcher.metrics.plot import terminal_plot, write_png
from launcher.metrics.render import choose
from launcher.metrics.series import RunMetrics, merge


def _run(name: str, n: int, restart_at: int | None = None) -> RunMetrics:
    def seg(steps):
        vals = [10.0 / (s + 1) for s in steps]
        return Segment(
            metrics={
                "loss/train/total": Columns(array("q", steps), array("d", [float(s) for s in steps]), array("d", vals))
            }
        )

    labelled = [(1, seg(list(range(1, n + 1))))]
    if restart_at:
        labelled.append((2, seg(list(range(restart_at, n + 20)))))
    series, restarts, fit = merge(labelled)
    return RunMetrics(name, "COMPLETED", "logs", series, restarts, fit)


def test_terminal_plot_has_labels_title_and_restart_and_no_colour_codes_off_a_terminal():
    runs = [_run("run-a", 300, restart_at=200), _run("run-b", 100)]
    text = terminal_plot(choose(runs, ["loss/train/total"], every=None, last=None), width=80, height=20)
    lines = text.splitlines()
    assert "run-a vs run-b" in lines[0]
    assert lines[-1].split()[0] == "loss/train/total" and "step" in lines[-1]
    assert "attempt 2" in text and "run-a" in text and "run-b" in text
    assert "\x1b[" not in text
    assert max(len(line) for line in lines) <= 80


def test_a_long_curve_is_drawn_from_its_first_step_to_its_last():
    """A terminal has a few hundred columns, so a curve of 100k points is drawn from a sample
    of them; the sample keeps the first and the last. (How fast: bench/bench_metrics.py.)"""
    runs = [_run("big", 100_000)]
    lines = terminal_plot(choose(runs, ["loss/train/total"], every=None, last=None), width=100, height=24).splitlines()
    assert lines[0].strip() == "big"
    [ticks] = [line.split() for line in lines if line.split() and all(w.isdigit() for w in line.split())]
    assert ticks[-1] == "100000"  # the last step is drawn: the x axis reaches it
    assert lines[2].startswith("5.0┤")  # so is the first, the highest loss (10 / 2 at step 1)


def test_png_is_written_headless(tmp_path):
    import subprocess
    import sys

    # A fresh interpreter without a display: matplotlib must not need one.
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, '.');"
        "from tests.metrics.test_plot import _run; from launcher.metrics.render import choose;"
        "from launcher.metrics.plot import write_png;"
        f"write_png(choose([_run('a', 500, 300)], ['loss/train/total'], every=None, last=None), Path({str(tmp_path / 'x.png')!r}));"
        "print('pyplot' in ' '.join(sys.modules))"
    )
    env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "", "HOME": str(tmp_path)}
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=repo, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # no pyplot: no GUI backend, no global figures
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_to_an_unwritable_place_is_an_input_error(tmp_path):
    import pytest

    from launcher.errors import InputError

    with pytest.raises(InputError) as e:
        write_png(choose([_run("a", 10)], ["loss/train/total"], every=None, last=None), tmp_path / "no" / "x.png")
    assert e.value.message.startswith(f"cannot write {tmp_path / 'no' / 'x.png'}")

"""LTTB downsampling: what a chart of 100k points keeps."""

from __future__ import annotations

import math

import numpy as np

from launcher.ui.lttb import lttb


def test_keeps_n_points_ascending_with_both_ends_exact() -> None:
    xs = np.arange(1, 100_001)
    ys = 2.0 + 8.0 * np.exp(-xs / 20_000) + 0.05 * np.sin(xs)
    keep = lttb(xs, ys, 2000)
    assert len(keep) == 2000 and keep[0] == 0 and keep[-1] == len(xs) - 1
    assert np.all(np.diff(keep) > 0)


def test_a_spike_survives_where_striding_would_drop_it() -> None:
    ys = np.ones(10_000)
    ys[4321] = 50.0
    keep = lttb(np.arange(10_000), ys, 100)
    assert 4321 in keep
    assert 4321 not in range(0, 10_000, 100)  # what taking every 100th point would keep


def test_short_curves_are_kept_whole() -> None:
    assert lttb(np.arange(5), np.arange(5.0), 100).tolist() == [0, 1, 2, 3, 4]
    assert lttb(np.arange(5), np.arange(5.0), 2).tolist() == [0, 4]


def test_non_finite_values_lose_to_finite_ones() -> None:
    ys = np.linspace(5.0, 1.0, 1000)
    ys[500:510] = math.nan
    ys[700] = math.inf
    keep = lttb(np.arange(1000), ys, 50)
    assert len(keep) == 50
    assert not any(500 <= k < 510 or k == 700 for k in keep)

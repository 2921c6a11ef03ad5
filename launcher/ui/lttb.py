"""Largest-Triangle-Three-Buckets downsampling (Steinarsson, 2013) for the loss charts.

A chart is a few thousand pixels wide, so sending it 100k points only costs transfer and
drawing time. LTTB keeps the points that shape the curve (spikes survive, unlike with
striding or averaging) and always keeps the first and the last point exactly, so the
latest step a user reads off the chart is the real one.
"""

from __future__ import annotations

import numpy as np


def lttb(xs: np.ndarray, ys: np.ndarray, n_out: int) -> np.ndarray:
    """The indices (ascending) of at most `n_out` points of (xs, ys) to draw.

    Non-finite ys (a diverged loss) never win a bucket over a finite one, so a NaN does
    not hide the shape around it; a bucket of nothing but NaNs keeps one of them, and the
    chart shows a gap there.
    """
    n = len(xs)
    if n_out >= n or n <= 2:
        return np.arange(n)
    if n_out < 3:
        return np.array([0, n - 1])
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    finite = np.isfinite(y)
    y_for_mean = np.where(finite, y, 0.0)
    # Buckets for the points between the first and the last: bounds[i] <= idx < bounds[i+1].
    buckets = n_out - 2
    bounds = (np.arange(buckets + 1) * ((n - 2) / buckets)).astype(np.int64) + 1
    bounds[-1] = n - 1
    # The average point of each bucket (the third corner for the bucket before it); the
    # last bucket's third corner is the last point.
    sizes = np.diff(bounds)
    counts = np.add.reduceat(finite.astype(np.float64), bounds[:-1])
    avg_x = np.add.reduceat(x, bounds[:-1]) / sizes
    avg_y = np.add.reduceat(y_for_mean, bounds[:-1]) / np.maximum(counts, 1)
    avg_x = np.append(avg_x[1:], x[-1])
    avg_y = np.append(avg_y[1:], y[-1] if finite[-1] else avg_y[-1])

    out = np.empty(n_out, dtype=np.int64)
    out[0], out[-1] = 0, n - 1
    a = 0
    for i in range(buckets):
        lo, hi = bounds[i], bounds[i + 1]
        ax, ay = x[a], y[a] if finite[a] else avg_y[i]
        cx, cy = avg_x[i], avg_y[i]
        # Twice the area of triangle (a, p, c) for every p in the bucket.
        area = np.abs((ax - cx) * (y[lo:hi] - ay) - (ax - x[lo:hi]) * (cy - ay))
        area[~finite[lo:hi]] = -1.0
        a = lo + int(np.argmax(area))
        out[i + 1] = a
    return out

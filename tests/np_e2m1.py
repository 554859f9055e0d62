"""The E2M1 grid and its rounding, in numpy (float64), for the independent
reference checks of the tests (tests/decompose/numpy_check.py,
tests/remedy/numpy_check.py): written from the format's definition, not from
the library's code."""
import numpy as np

GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_rne(t):
    """E2M1 magnitude of t >= 0 (float64 exact), ties to the even code, saturating at 6."""
    idx = np.clip(np.searchsorted(GRID, t), 1, 7)
    lo, hi = GRID[idx - 1], GRID[idx]
    mid = (lo + hi) / 2
    even_lo = (idx - 1) % 2 == 0
    r = np.where(t < mid, lo, np.where(t > mid, hi, np.where(even_lo, lo, hi)))
    return np.where(t >= 6, 6.0, r)

"""The report's NIS statistics (numpy and scipy only: the page is written without importing matplotlib)."""
from __future__ import annotations

import numpy as np
from scipy.special import chdtri


def chi2_interval(dof, low: float = 0.025, high: float = 0.975) -> tuple[float, float]:
    """Quantiles ``low`` and ``high`` of the chi-square distribution with ``dof`` degrees of freedom."""
    return float(chdtri(dof, 1.0 - low)), float(chdtri(dof, 1.0 - high))


def nis_stats(nis: np.ndarray, accepted: np.ndarray, dof) -> dict:
    """Consistency figures of one sensor's NIS values: updates, rejected, and over the accepted
    updates the mean NIS, the two-sided 95 % bounds of that mean for a consistent filter
    (chi-square of n·dof over n: the time-average NIS test, Bar-Shalom, Li and Kirubarajan 2001,
    Estimation with Applications to Tracking and Navigation, sec. 5.4.2) and the percentage of
    single values inside the 95 % chi-square interval of dof (None without dof)."""
    nis = np.asarray(nis, dtype=float)
    accepted = np.asarray(accepted) > 0.5
    finite = np.isfinite(nis) & accepted
    n = int(finite.sum())
    inside = bounds = None
    if dof and n:
        low, high = chi2_interval(dof)
        inside = 100 * float(np.mean((nis[finite] >= low) & (nis[finite] <= high)))
        low, high = chi2_interval(n * dof)
        bounds = (low / n, high / n)
    return {"updates": int(len(nis)), "rejected": int((~accepted).sum()),
            "mean_nis": float(np.mean(nis[finite])) if n else float("nan"),
            "mean_bounds": bounds, "inside_95_percent": inside}

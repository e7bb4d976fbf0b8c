"""Kalman-filter building blocks shared by the observers: the sequential measurement update with
innovation gating and the Joseph form, per-sensor innovation statistics, and the white-noise plant
covariances.

Gating convention: a measurement block of dimension m with innovation nu and innovation covariance S is
rejected when its normalised innovation squared NIS = nu^T S^-1 nu exceeds the chi-square quantile
chi2.ppf(gate_probability, m) (default probability 0.9999: a correct measurement is rejected once in
10 000).  Rejections are counted per sensor, never silent (:class:`SensorStatistics`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from scipy.stats import chi2

DEFAULT_GATE_PROBABILITY = 0.9999


@dataclass
class SensorStatistics:
    """Innovation bookkeeping of one sensor: accepted and rejected updates, NIS sum and a running mean."""

    dof: int = 0
    accepted: int = 0
    rejected: int = 0
    consecutive_rejections: int = 0
    nis_sum: float = 0.0
    nis_mean_recent: float = float("nan")  # exponential mean of the NIS of accepted updates (~50 updates)
    last_nis: float = float("nan")
    last_innovation: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def reject(self, innovation: np.ndarray | None = None, nis: float | None = None) -> bool:
        """Count a rejected block (with its NIS when it was computed); returns False."""
        if nis is not None:
            self.dof, self.last_nis, self.last_innovation = len(innovation), nis, innovation
        self.rejected += 1
        self.consecutive_rejections += 1
        return False

    def accept(self, innovation: np.ndarray, nis: float) -> bool:
        """Count an applied block and its NIS; returns True."""
        self.dof, self.last_nis, self.last_innovation = len(innovation), nis, innovation
        self.accepted += 1
        self.consecutive_rejections = 0
        self.nis_sum += nis
        self.nis_mean_recent = nis if math.isnan(self.nis_mean_recent) else 0.98 * self.nis_mean_recent + 0.02 * nis
        return True

    @property
    def nis_mean(self) -> float:
        """Mean NIS of the accepted updates (expect ~ dof for a consistent filter)."""
        return self.nis_sum / self.accepted if self.accepted else float("nan")


class GateCache:
    """chi2.ppf(probability, m), memoised (scipy's ppf costs ~50 us)."""

    def __init__(self, probability: float = DEFAULT_GATE_PROBABILITY):
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"gate probability must be in (0, 1], got {probability}")
        self.probability = probability
        self._cache: dict[int, float] = {}

    def __call__(self, m: int) -> float:
        if self.probability >= 1.0:
            return math.inf
        if m not in self._cache:
            self._cache[m] = float(chi2.ppf(self.probability, m))
        return self._cache[m]


def sequential_update(x: np.ndarray, P: np.ndarray, innovation: np.ndarray, H: np.ndarray, R: np.ndarray,
                      gate: float, stats: SensorStatistics) -> bool:
    """One measurement block applied to the error state x (in place) and its covariance P (in place).

    ``innovation`` is y - h(model) - H x, i.e. with the corrections of the earlier blocks of this step
    already accounted for.  Covariance by the Joseph form P = (I - K H) P (I - K H)^T + K R K^T, valid for
    any gain, evaluated in its expanded form P - K (H P) - (P H^T) K^T + K S K^T (rank-m updates instead of
    two n^3 products), symmetrised.  Returns False (and changes nothing) when the block fails the gate,
    is not finite or S is not positive definite."""
    nis = _joseph_update(x, P, np.ascontiguousarray(innovation, dtype=float), np.ascontiguousarray(H, dtype=float),
                         np.ascontiguousarray(R, dtype=float), float(gate))
    if nis < 0.0:  # -1: not finite or S not positive definite; -2 - NIS: failed the gate
        return stats.reject(innovation, -2.0 - nis) if nis < -1.5 else stats.reject()
    return stats.accept(innovation, nis)


@njit(cache=True)
def _joseph_update(x, P, innovation, H, R, gate):
    """Compiled body of :func:`sequential_update`: returns the NIS when applied, -1 for non-finite input or an
    indefinite S, -2 - NIS when the gate rejects (x and P untouched then)."""
    if not (np.all(np.isfinite(innovation)) and np.all(np.isfinite(H)) and np.all(np.isfinite(R))):
        return -1.0
    PHt = P @ H.T
    S = H @ PHt + R
    m = S.shape[0]
    # Cholesky by hand: S must be positive definite
    L = np.zeros((m, m))
    for i in range(m):
        for j in range(i + 1):
            acc = S[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            if i == j:
                if not acc > 0.0:
                    return -1.0
                L[i, i] = math.sqrt(acc)
            else:
                L[i, j] = acc / L[j, j]
    S_inv = np.linalg.inv(S)
    nis = innovation @ S_inv @ innovation
    if not nis <= gate:
        return -2.0 - nis
    K = PHt @ S_inv
    x += K @ innovation
    KPH = K @ PHt.T
    P += K @ S @ K.T - KPH - KPH.T
    n = P.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            v = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = v
            P[j, i] = v
    return nis


def white_jerk_covariance(sigma2: np.ndarray, dt: float) -> np.ndarray:
    """Plant noise of [position, velocity, acceleration] errors driven by white jerk of intensity sigma2
    (per coordinate, (n,)), Grewal & Andrews; the Rodriguez 2020 eq. 3.80 block with its dt^3/6 middle
    entry corrected to dt^3/3 (as printed the block is indefinite).  Returns (3n, 3n), blocks ordered
    [positions, velocities, accelerations]."""
    block = np.array([[dt**5 / 20, dt**4 / 8, dt**3 / 6], [dt**4 / 8, dt**3 / 3, dt**2 / 2], [dt**3 / 6, dt**2 / 2, dt]])
    return np.kron(block, np.diag(sigma2))


def white_acceleration_covariance(sigma2: np.ndarray, dt: float) -> np.ndarray:
    """Plant noise of [position, velocity] errors driven by white acceleration of intensity sigma2 (n,)."""
    block = np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
    return np.kron(block, np.diag(sigma2))

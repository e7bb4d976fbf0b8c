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
from scipy.special import gammaincinv

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
    """chi2.ppf(probability, m) = 2 gammaincinv(m / 2, probability), memoised (scipy.special: ``scipy.stats``, which
    computes it the same way, took 0.7 s to import, a third of a command's start)."""

    def __init__(self, probability: float = DEFAULT_GATE_PROBABILITY):
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"gate probability must be in (0, 1], got {probability}")
        self.probability = probability
        self._cache: dict[int, float] = {}

    def __call__(self, m: int) -> float:
        if self.probability >= 1.0:
            return math.inf
        if m not in self._cache:
            self._cache[m] = 2.0 * float(gammaincinv(0.5 * m, self.probability))
        return self._cache[m]


def sequential_update(x: np.ndarray, P: np.ndarray, innovation: np.ndarray, H: np.ndarray, R: np.ndarray,
                      gate: float, stats: SensorStatistics) -> bool:
    """One measurement block applied to the error state x (in place) and its covariance P (in place).

    ``innovation`` is y - h(model) - H x, i.e. with the corrections of the earlier blocks of this step
    already accounted for.  Covariance by the Joseph form P = (I - K H) P (I - K H)^T + K R K^T, valid for
    any gain, evaluated in its expanded form P - K (H P) - (P H^T) K^T + K S K^T (rank-m updates instead of
    two n^3 products), symmetrised.  Returns False (and changes nothing) when the block fails the gate,
    is not finite or S is not positive definite."""
    nis = joseph_update(x, P, np.ascontiguousarray(innovation, dtype=float), np.ascontiguousarray(H, dtype=float),
                        np.ascontiguousarray(R, dtype=float), float(gate))
    return record_update(stats, innovation, nis)


def record_update(stats: SensorStatistics, innovation: np.ndarray, nis: float) -> bool:
    """Count the outcome of :func:`joseph_update` (its return value ``nis``) in ``stats``; True if applied."""
    if nis < 0.0:  # -1: not finite or S not positive definite; -2 - NIS: failed the gate
        return stats.reject(innovation, -2.0 - nis) if nis < -1.5 else stats.reject()
    return stats.accept(innovation, nis)


@njit(cache=True)
def joseph_update(x, P, innovation, H, R, gate):
    """Compiled body of :func:`sequential_update` (x (n,), P (n, n) in place; innovation (m,), H (m, n),
    R (m, m)): returns the NIS when applied, -1 for non-finite input or an indefinite S, -2 - NIS when the
    gate rejects (x and P untouched then).  Loops over the m rows (m is 1-4), zero entries of H skipped."""
    m, n = H.shape
    for a in range(m):
        if not math.isfinite(innovation[a]):
            return -1.0
        for b in range(m):
            if not math.isfinite(R[a, b]):
                return -1.0
        for k in range(n):
            if not math.isfinite(H[a, k]):
                return -1.0
    PHt = np.zeros((m, n))  # (P H^T)^T = H P^T, by rows of P (P is symmetric up to round-off)
    for a in range(m):
        for k in range(n):
            hk = H[a, k]
            if hk != 0.0:
                for i in range(n):
                    PHt[a, i] += hk * P[k, i]
    S = R.copy()
    for a in range(m):
        for b in range(m):
            acc = 0.0
            for k in range(n):
                acc += H[a, k] * PHt[b, k]
            S[a, b] += acc
    # Cholesky S = L L^T (S must be positive definite), then S^-1 = L^-T L^-1
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
    L_inv = np.zeros((m, m))
    for j in range(m):
        L_inv[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, m):
            acc = 0.0
            for k in range(j, i):
                acc -= L[i, k] * L_inv[k, j]
            L_inv[i, j] = acc / L[i, i]
    S_inv = np.zeros((m, m))
    for a in range(m):
        for b in range(m):
            acc = 0.0
            for k in range(max(a, b), m):
                acc += L_inv[k, a] * L_inv[k, b]
            S_inv[a, b] = acc
    nis = 0.0
    for a in range(m):
        for b in range(m):
            nis += innovation[a] * S_inv[a, b] * innovation[b]
    if not nis <= gate:
        return -2.0 - nis
    Kt = np.zeros((m, n))  # K^T = S^-1 H P
    KSt = np.zeros((m, n))  # (K S)^T
    for a in range(m):
        for b in range(m):
            sab = S_inv[a, b]
            for i in range(n):
                Kt[a, i] += sab * PHt[b, i]
    for a in range(m):
        for b in range(m):
            sab = S[a, b]
            for i in range(n):
                KSt[a, i] += sab * Kt[b, i]
    for a in range(m):
        for i in range(n):
            x[i] += Kt[a, i] * innovation[a]
    # P += K S K^T - K (H P) - (P H^T) K^T, symmetrised
    for i in range(n):
        for a in range(m):
            ks, k, ph = KSt[a, i], Kt[a, i], PHt[a, i]
            for j in range(n):
                P[i, j] += ks * Kt[a, j] - k * PHt[a, j] - ph * Kt[a, j]
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


def white_acceleration_block(dt: float) -> np.ndarray:
    """The (position, velocity) covariance over ``dt`` of one coordinate driven by white acceleration of unit intensity."""
    return np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])


def white_acceleration_covariance(sigma2: np.ndarray, dt: float) -> np.ndarray:
    """Plant noise of [position, velocity] errors driven by white acceleration of intensity sigma2 (n,)."""
    return np.kron(white_acceleration_block(dt), np.diag(sigma2))

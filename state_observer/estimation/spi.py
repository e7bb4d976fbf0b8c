"""State-parameter-input (SPI) observer: an unscented filter over the vehicle mass and the tire-road
friction coefficient, run beside the errorEKF-FE (Rodriguez 2020 §5.3.2.2).

The seeds propagate one multibody step per sigma point (2.75 times the errorEKF-FE cost).  Here the
parameters are judged by the force balance instead, which needs one force evaluation per sigma point and
no integration: after the errorEKF-FE correction the model state (z, z_dot, z_ddot) is the best estimate
of the motion, and right parameters theta explain it without a force correction,

    r(theta) = S [M(z; theta) z_ddot - Q(z, z_dot; theta)] = 0       (S: chassis x, y, yaw rows)

so r is an observation of theta with value 0 and covariance ``residual_sigma^2`` (the force the filter
would otherwise add).  The parameters are random walks.  With L = 2 parameters the unscented transform
uses 2 L + 1 = 5 sigma points (alpha = 1, beta = 2, kappa = 0: points at +-sqrt(L) sigma, centre weight 0
for the mean), and the update runs every ``every_steps`` model steps.  Friction is only observable while
tires slide: in the linear range r does not depend on mu and its estimate keeps the prior.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .errorekf import N, ErrorEkfSettings, VehicleErrorEKF

CHASSIS_ROWS = (0, 1)  # x, y (yaw would also see the inertia, which scales with the mass)


@dataclass
class SpiSettings:
    """Tuning measured on circle_mu08: the residual's errors are slow (they follow the errorEKF-FE's
    corrections), so it is trusted little (2000 N) and sampled every 0.1 s; starting before the
    errorEKF-FE has settled (~10 s from a cold start) drove the mass the wrong way by 30 %."""

    every_steps: int = 25  # parameter update period, model steps
    mass_sigma_kg: float = 150.0  # prior
    mu_sigma: float = 0.2
    mass_walk_kg_per_sqrt_s: float = 0.5
    mu_walk_per_sqrt_s: float = 0.02
    residual_sigma: tuple = (2000.0, 2000.0)  # N (x, y rows)
    mu_bounds: tuple = (0.1, 1.5)
    mass_bounds: tuple = (0.5, 2.0)  # times the initial mass
    start_after_s: float = 10.0  # let the errorEKF-FE settle first (the seeds' stabilisation period)


class VehicleSPI:
    """errorEKF-FE plus the parameter UKF (module docstring); the same per-step API as
    :class:`VehicleErrorEKF` (``start``, ``predict``, ``update_*``, ``correct``)."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None, spi: SpiSettings | None = None):
        self.filter = VehicleErrorEKF(vehicle, mounts, settings)
        self.vehicle = vehicle
        self.spi = spi or SpiSettings()
        self.theta = np.array([vehicle.total_mass_kg, float(np.mean(vehicle.mu))])
        self.P_theta = np.diag([self.spi.mass_sigma_kg**2, self.spi.mu_sigma**2])
        dt = vehicle.dt_s * self.spi.every_steps
        self.Q_theta = np.diag([self.spi.mass_walk_kg_per_sqrt_s**2 * dt, self.spi.mu_walk_per_sqrt_s**2 * dt])
        self.R = np.diag(np.square(self.spi.residual_sigma))
        self._steps = 0
        self._t0 = 0.0
        self._mass_range = (self.spi.mass_bounds[0] * self.theta[0], self.spi.mass_bounds[1] * self.theta[0])

    def __getattr__(self, name):  # the errorEKF-FE's API and state (update_*, stats, P, ...)
        return getattr(self.filter, name)

    def start(self, *args, **kwargs) -> None:
        self.filter.start(*args, **kwargs)
        self.theta = np.array([self.vehicle.total_mass_kg, float(np.mean(self.vehicle.mu))])
        self.P_theta = np.diag([self.spi.mass_sigma_kg**2, self.spi.mu_sigma**2])
        self._steps = 0
        self._t0 = self.vehicle.solver.t
        self._mass_range = (self.spi.mass_bounds[0] * self.theta[0], self.spi.mass_bounds[1] * self.theta[0])

    def predict(self) -> bool:
        return self.filter.predict()

    def correct(self) -> None:
        self.filter.correct()
        self._steps += 1
        if self._steps % self.spi.every_steps == 0 and self.vehicle.solver.t - self._t0 >= self.spi.start_after_s:
            self._update_parameters()

    def _residual(self, theta: np.ndarray, rows=CHASSIS_ROWS) -> np.ndarray:
        """r(theta) on ``rows`` at the current model state (the model keeps its parameters)."""
        return self.vehicle.force_residuals(np.asarray(theta, float)[None], rows)[0]

    def _update_parameters(self) -> None:
        """One unscented update of theta = (mass, mu) with r(theta) = 0 (module docstring)."""
        v = self.vehicle
        P = self.P_theta + self.Q_theta
        lo, hi = self.spi.mu_bounds
        m_lo, m_hi = self._mass_range
        bounds = np.array([[m_lo, lo], [m_hi, hi]])
        points = _sigma_points(self.theta, P, bounds)
        if points is None:
            return
        residuals = v.force_residuals(points, CHASSIS_ROWS)  # the model's parameters and records are kept
        theta, P_new = _unscented_correction(points, residuals, self.theta, P, self.R, bounds)
        if np.all(np.isfinite(theta)):
            self.theta, self.P_theta = theta, P_new
        # the errorEKF-FE's force correction compensated the old parameters: re-derive it at the new ones, along the
        # filter's force-error directions, so that the model still reproduces the estimated accelerations (no double counting)
        D = self.filter._directions
        correction = np.zeros(N)
        if D.shape[1]:
            residual = self._residual(self.theta, range(N))
            correction = D @ np.linalg.lstsq(D, residual, rcond=None)[0]
        v.set_total_mass(self.theta[0])
        v.mu = self.theta[1]
        v.force_correction[:] = correction

    def parameter_sigma(self) -> np.ndarray:
        return np.sqrt(np.diag(self.P_theta))


def _sigma_points(theta: np.ndarray, P: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """(2 L + 1, L): theta, then theta +- sqrt(L) S_i for each column i of the lower Cholesky factor S of
    P, clamped to ``bounds`` (rows: lower, upper); None when P is not positive definite."""
    try:
        S = np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        return None
    return _clamped_points(theta, S, bounds)


@njit(cache=True)
def _clamped_points(theta, S, bounds):
    L = theta.shape[0]
    points = np.empty((2 * L + 1, L))
    points[0] = theta
    for i in range(L):
        for k, sign in ((1 + 2 * i, 1.0), (2 + 2 * i, -1.0)):
            points[k] = theta + sign * np.sqrt(L) * S[:, i]
    for k in range(2 * L + 1):
        for j in range(L):
            points[k, j] = min(max(points[k, j], bounds[0, j]), bounds[1, j])
    return points


@njit(cache=True)
def _unscented_correction(points, residuals, theta, P, R, bounds):
    """theta + K (0 - r_mean) clamped to ``bounds`` and P - K P_rr K^T (symmetrised) from the sigma points
    and their residuals (weights of alpha = 1, beta = 2, kappa = 0: centre 0 for the mean, 2 for the
    covariance, 1/(2 L) for the others)."""
    m, L = points.shape
    w = np.full(m, 1.0 / (m - 1))
    w[0] = 0.0
    wc = w.copy()
    wc[0] += 2.0
    r_mean = w @ residuals
    dr = residuals - r_mean
    dth = points - theta
    P_rr = R.copy()
    P_tr = np.zeros((L, residuals.shape[1]))
    for k in range(m):
        P_rr += wc[k] * np.outer(dr[k], dr[k])
        P_tr += wc[k] * np.outer(dth[k], dr[k])
    K = np.linalg.solve(P_rr, P_tr.T).T
    theta_new = theta - K @ r_mean
    for j in range(L):
        theta_new[j] = min(max(theta_new[j], bounds[0, j]), bounds[1, j])
    P_new = P - K @ P_rr @ K.T
    return theta_new, 0.5 * (P_new + P_new.T)

"""Observers on the planar four-bar and five-bar of Sanjurjo 2016 chapter 4: errorEKF, DEKF and UKF.

The linkages are the natural-coordinate models of :mod:`state_observer.mbs.linkages`; the filters work in
the independent coordinates z (crank angles, rad) and their rates z_dot (rad/s):

* :class:`LinkageErrorEKF` (§3.4.6, eqs. 3.112-3.119): the multibody model (ALI3-P, trapezoidal rule)
  runs as a black box; the filter estimates its errors x = [dz, dz_dot] and feeds them back after every
  update, so the a-priori error is always 0.
* :class:`LinkageDEKF` (§3.4.2, eqs. 3.80-3.86): x = [z, z_dot] propagated by forward Euler with the
  model's z_ddot, constant transition F = [[I, dt I], [0, I]] (eq. 3.81).
* :class:`LinkageUKF` (§3.4.3, eqs. 3.87-3.99): x = [z, z_dot], 2L+1 sigma points, each propagated by one
  ALI3-P (trapezoidal) step after position and velocity problems ("UKF TR").

Sensors (§4.4-4.5, eqs. 4.3-4.16): crank encoder h = theta, crank gyro h = theta_dot, coupler gyro
h = omega of a bar (eq. 4.14), each with h_q and h_qd; the filters need H = [h_z, h_zdot] by the chain
rule through the velocity transform qd = R z_dot (eqs. 3.120-3.125):

    h_z    = h_q R + h_qd dqd/dz,   dqd/dz = -S (d(Phi_q qd)/dq) R = -S Phi_qq[qd, R]
    h_zdot = h_qd R

The second term of h_z (the dependent velocities change with the position at fixed z_dot) vanishes for
the crank sensors and matters for the coupler gyro; Phi_qq[qd, R] is the polarisation of the engine's
quadratic acceleration term gamma(q, qd) = Phi_qq[qd, qd].

:func:`run_study` reproduces the protocol of §4.7 (10 s free fall from rest, MB dt = 5 ms, sensor sigma
pi/180 at 200/100/50/20/10 Hz, a filter model with a gravity error and a crank-angle error) and
:func:`print_study_table` prints the grid (``python -m state_observer.estimation.linkage``).
"""
from __future__ import annotations

import functools
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import FilterDivergence, SolverError
from ..mbs.integrators import ALI3P, initial_accelerations
from ..mbs.kinematics import solve_position, solve_velocity, velocity_transform
from ..mbs.linkages import Linkage, five_bar, four_bar
from .kalman import GateCache, SensorStatistics, sequential_update, white_acceleration_covariance

DT = 5e-3  # MB time step of the chapter-4 tests (s)
SENSOR_SIGMA = math.pi / 180.0  # rad (encoders) or rad/s (gyros), §4.7
RATES_HZ = (200, 100, 50, 20, 10)
GRAVITY = -10.0  # true gravity along y (m/s^2)
ERRORS = {"low": (0.5, math.pi / 32.0), "high": (1.0, math.pi / 16.0)}  # (gravity error m/s^2, crank-angle error rad)
MECHANISMS = {"four_bar": four_bar, "five_bar": five_bar}
SENSOR_KINDS = ("crank_encoder", "coupler_gyro", "crank_gyro")
FILTERS = ("errorekf", "dekf", "ukf")
COUPLERS = {"four_bar": ("coupler",), "five_bar": ("left_coupler", "right_coupler")}
# plant-noise intensity (rad^2/s^3) per mechanism used by run_study when no settings are given: the value of
# {0.01, 0.1, 0.3, 1, 3, 10} (four-bar) and {0.1, 1, 10, 100} (five-bar) with the lowest errorEKF crank-encoder
# RMSE over both error levels and all rates (seed 0); the five-bar's short cranks see larger angular
# accelerations from the same gravity error
PLANT_SIGMA2 = {"four_bar": 0.1, "five_bar": 1.0}


def wrap_angle(a):
    """Angle(s) mapped to [-pi, pi) (rad)."""
    return (np.asarray(a) + math.pi) % (2.0 * math.pi) - math.pi



# ----- kinematic sensitivities ------------------------------------------------------------------------
def manifold_derivatives(model, independent: Sequence, q: np.ndarray, qd: np.ndarray, t: float = 0.0,
                         with_velocity_sensitivity: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """R = dq/dz = dqd/dz_dot (n, g) and dqd/dz at fixed z_dot (n, g) at a consistent (q, qd) (eqs. 3.54, 3.121).

    Differentiating [Phi_q; D] qd = [-Phi_t; z_dot] along the manifold (dq = R dz, scleronomic) gives
    dqd/dz = -S Phi_qq[qd, R], with Phi_qq[a, b] = (gamma(a + b) - gamma(a - b)) / 4 (gamma is the
    quadratic form qd^T Phi_qq qd of the engine's acceleration problem)."""
    R, S = velocity_transform(model, q, independent, t)
    if not with_velocity_sensitivity:
        return R, None
    cs = model.constraints
    dqd = np.zeros_like(R)
    na = float(np.linalg.norm(qd))
    if na > 0.0:
        cs.evaluate(q, t)  # gamma uses the last evaluation
        a = qd / na
        for i in range(R.shape[1]):
            nb = float(np.linalg.norm(R[:, i]))
            b = R[:, i] / nb
            bilinear = 0.25 * (cs.gamma(q, a + b) - cs.gamma(q, a - b)) * (na * nb)
            dqd[:, i] = -S @ bilinear
    return R, dqd


# ----- sensors ----------------------------------------------------------------------------------------
class _Sensor:
    """Measurement model h(q, qd) of ``dim`` scalar channels, white noise ``sigma`` per channel."""

    name = "sensor"
    angular = False  # innovations wrapped to [-pi, pi) (angle measurements)
    velocity_sensitive = False  # h_qd acts on dependent velocities: h_z needs dqd/dz

    def __init__(self, sigma: float = SENSOR_SIGMA):
        self.sigma = float(sigma)

    def h(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return self.jacobians(q, qd)[0]

    def jacobians(self, q, qd):  # -> (h (dim,), h_q (dim, n), h_qd (dim, n))
        raise NotImplementedError

    def evaluate(self, q: np.ndarray, qd: np.ndarray, R: np.ndarray, dqd_dz: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(h, H_z) with H_z = [h_q R + h_qd dqd/dz, h_qd R] (dim, 2g), eqs. 3.120-3.121."""
        h, h_q, h_qd = self.jacobians(q, qd)
        hz = h_q @ R
        if self.velocity_sensitive:
            if dqd_dz is None:
                raise ValueError(f"{self.name}: h_z needs dqd/dz (manifold_derivatives(..., with_velocity_sensitivity=True))")
            hz = hz + h_qd @ dqd_dz
        return h, np.hstack([hz, h_qd @ R])


class _CrankSensor(_Sensor):
    """Sensor(s) reading crank-angle coordinates directly; E selects them from q."""

    def __init__(self, model, angles: Sequence[str], sigma: float = SENSOR_SIGMA):
        super().__init__(sigma)
        self.idx = model.indices(list(angles))
        self.dim, self.n = len(self.idx), model.n
        self._E = np.zeros((self.dim, self.n))
        self._E[np.arange(self.dim), self.idx] = 1.0


class CrankEncoder(_CrankSensor):
    """Encoder(s) on the crank(s): h = theta (rad), h_z = I, h_zdot = 0 (eqs. 4.3, 4.5)."""

    name = "crank_encoder"
    angular = True

    def jacobians(self, q, qd):
        return q[self.idx].copy(), self._E.copy(), np.zeros_like(self._E)


class CrankGyro(_CrankSensor):
    """Gyro(s) on the crank(s): h = theta_dot (rad/s), h_z = 0, h_zdot = I (eqs. 4.7, 4.9)."""

    name = "crank_gyro"

    def jacobians(self, q, qd):
        return qd[self.idx].copy(), np.zeros_like(self._E), self._E.copy()


class CouplerGyro(_Sensor):
    """Planar gyro(s) on bar(s) a-b (rad/s), eqs. 4.11-4.16 with the constant bar length L:

        h    = [(xd_b - xd_a)(y_a - y_b) + (yd_b - yd_a)(x_b - x_a)] / L^2
        h_q  = [yd_a - yd_b, xd_b - xd_a, yd_b - yd_a, xd_a - xd_b] / L^2   on (x_a, y_a, x_b, y_b)
        h_qd = [y_b - y_a,   x_a - x_b,   y_a - y_b,   x_b - x_a] / L^2     on (xd_a, yd_a, xd_b, yd_b)

    Bar end points that are fixed (ground) have constant positions and zero velocity."""

    name = "coupler_gyro"
    velocity_sensitive = True

    def __init__(self, model, bars: Sequence[str], sigma: float = SENSOR_SIGMA):
        super().__init__(sigma)
        if model.dim != 2:
            raise ValueError("CouplerGyro is a planar sensor")
        self.n, self.dim = model.n, len(bars)
        self.ends = []  # per bar: ((index or None, fixed position), (index or None, fixed position), L^2)
        for bar in bars:
            body = model.bodies[bar]
            (a, la), (b, lb) = list(body.points.items())[:2]
            length2 = float(np.sum((np.asarray(lb) - np.asarray(la)) ** 2))
            self.ends.append((self._end(model, a), self._end(model, b), length2))

    @staticmethod
    def _end(model, point):
        if point in model.fixed:
            return None, np.asarray(model.fixed[point], float)
        c = model.coords[point]
        return c.index, None

    def jacobians(self, q, qd):
        h = np.zeros(self.dim)
        h_q = np.zeros((self.dim, self.n))
        h_qd = np.zeros((self.dim, self.n))
        for k, (A, B, L2) in enumerate(self.ends):
            ra, va = (A[1], np.zeros(2)) if A[0] is None else (q[A[0] : A[0] + 2], qd[A[0] : A[0] + 2])
            rb, vb = (B[1], np.zeros(2)) if B[0] is None else (q[B[0] : B[0] + 2], qd[B[0] : B[0] + 2])
            dx, dy = rb - ra
            dvx, dvy = vb - va
            h[k] = (dx * dvy - dy * dvx) / L2
            if A[0] is not None:
                h_q[k, A[0] : A[0] + 2] = np.array([-dvy, dvx]) / L2
                h_qd[k, A[0] : A[0] + 2] = np.array([dy, -dx]) / L2
            if B[0] is not None:
                h_q[k, B[0] : B[0] + 2] = np.array([dvy, -dvx]) / L2
                h_qd[k, B[0] : B[0] + 2] = np.array([-dy, dx]) / L2
        return h, h_q, h_qd


def make_sensor(linkage: Linkage, kind: str, sigma: float = SENSOR_SIGMA, mechanism: str | None = None) -> _Sensor:
    """Sensor configuration of §4.7 on ``linkage``: one channel per DOF (crank encoders, crank gyros,
    or gyros on the coupler(s): the four-bar coupler, the five-bar's two couplers)."""
    if kind == "crank_encoder":
        return CrankEncoder(linkage.model, linkage.independent, sigma)
    if kind == "crank_gyro":
        return CrankGyro(linkage.model, linkage.independent, sigma)
    if kind == "coupler_gyro":
        mech = mechanism or linkage.model.name
        if mech not in COUPLERS:
            raise ValueError(f"no coupler list for mechanism '{mech}'")
        return CouplerGyro(linkage.model, COUPLERS[mech], sigma)
    raise ValueError(f"unknown sensor '{kind}', choose one of {SENSOR_KINDS}")


def sensor_jacobian(model, independent, sensor: _Sensor, q, qd, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(h, H_z) of ``sensor`` at a consistent (q, qd), H_z with respect to [z, z_dot] (dim, 2g)."""
    R, dqd = manifold_derivatives(model, independent, q, qd, t, sensor.velocity_sensitive)
    return sensor.evaluate(q, qd, R, dqd)


# ----- filters ----------------------------------------------------------------------------------------
@dataclass
class LinkageFilterSettings:
    """Tuning shared by the three filters.

    plant_sigma2: intensity of the white acceleration noise per DOF (rad^2/s^3), Van Loan discretisation
        (eq. 3.128, :func:`.kalman.white_acceleration_covariance`); 0.1 suits the four-bar, 1.0 the
        five-bar (:data:`PLANT_SIGMA2`).
    initial_position_sigma / initial_velocity_sigma: sqrt of the initial P diagonal (rad, rad/s).
    gate_probability: chi-square gate of the measurement updates (1.0 = no gating; the study has no
        outliers, and a gate could lock out a filter whose model is wrong).
    position_feedback (errorEKF): "linear" (eq. 3.119: Phi_q dq = 0 with dz at the independent entries,
        dq = R dz), "exact" (position problem at z + dz) or "auto" (linear, then the position problem
        when the linearised correction leaves max|Phi| > feedback_tol; the length constraints are
        |r_b - r_a|^2 - L^2, so 1e-4 m^2 is about a 1 cm linearisation error on the 2-8 m bars).
    ukf_alpha, ukf_beta, ukf_kappa: sigma-point spread and weights, lambda = alpha^2 (L + kappa) - L.
    mb_alpha, mb_tol: ALI3-P penalty and Newton tolerance (MBDE: 1e9, 1e-10)."""

    plant_sigma2: float = 0.1
    initial_position_sigma: float = math.pi / 16.0
    initial_velocity_sigma: float = 0.01
    gate_probability: float = 1.0
    position_feedback: str = "auto"
    feedback_tol: float = 1e-4
    ukf_alpha: float = 1e-3
    ukf_beta: float = 2.0
    ukf_kappa: float = 0.0
    mb_alpha: float = 1e9
    mb_tol: float = 1e-10

    def __post_init__(self):
        if self.position_feedback not in ("linear", "exact", "auto"):
            raise ValueError(f"position_feedback must be 'linear', 'exact' or 'auto', got {self.position_feedback!r}")
        if not self.plant_sigma2 >= 0.0 or not 0.0 < self.ukf_alpha <= 1.0:
            raise ValueError("plant_sigma2 must be >= 0 and 0 < ukf_alpha <= 1")


class _LinkageFilter:
    """Common life cycle: per MB step ``predict()``, then ``update(o)`` if a sample arrived, then
    ``correct()``; ``z``, ``z_dot``, ``q``, ``qd`` give the current estimate."""

    kind = "filter"

    def __init__(self, linkage: Linkage, sensor: _Sensor, dt: float = DT, settings: LinkageFilterSettings | None = None):
        self.linkage, self.model, self.sensor, self.dt = linkage, linkage.model, sensor, float(dt)
        self.settings = s = settings or LinkageFilterSettings()
        self.ind = self.model.indices(list(linkage.independent))
        self.g = g = len(self.ind)
        self.F = np.block([[np.eye(g), dt * np.eye(g)], [np.zeros((g, g)), np.eye(g)]])  # eq. 3.81
        self.plant = white_acceleration_covariance(np.full(g, s.plant_sigma2), dt)  # eq. 3.128
        self.P = np.diag(np.r_[np.full(g, s.initial_position_sigma**2), np.full(g, s.initial_velocity_sigma**2)])
        self.gate = GateCache(s.gate_probability)
        self.stats = SensorStatistics()
        self.t = 0.0

    def _ali3p(self, q, qd):
        s = self.settings
        return ALI3P(self.model, q, qd, t=self.t, dt=self.dt, alpha=s.mb_alpha, tol=s.mb_tol)

    def _sequential(self, x: np.ndarray, h: np.ndarray, H: np.ndarray, o: np.ndarray) -> None:
        """Scalar sequential updates (§5.7.2, eqs. 5.76-5.80) of the correction x (in place) and P."""
        r = np.array([[self.sensor.sigma**2]])
        gate = self.gate(1)
        for i in range(len(h)):
            nu = o[i] - h[i] - H[i] @ x
            if self.sensor.angular:
                nu = wrap_angle(nu)
            sequential_update(x, self.P, np.array([nu]), H[i : i + 1], r, gate, self.stats)

    def step(self, o: np.ndarray | None = None) -> None:
        self.predict()
        if o is not None:
            self.update(np.atleast_1d(np.asarray(o, float)))
        self.correct()

    def predict(self) -> None:
        raise NotImplementedError

    def update(self, o: np.ndarray) -> None:
        raise NotImplementedError

    def correct(self) -> None:
        pass

    @property
    def z(self) -> np.ndarray:
        return self.q[self.ind].copy()

    @property
    def z_dot(self) -> np.ndarray:
        return self.qd[self.ind].copy()

    def _check(self, *arrays) -> None:
        if not all(np.all(np.isfinite(a)) for a in arrays):
            raise FilterDivergence(f"{self.kind}: non-finite state at t = {self.t:.3f} s")


class LinkageErrorEKF(_LinkageFilter):
    """errorEKF (§3.4.6): x = [dz, dz_dot] (rad, rad/s), x- = 0 (eq. 3.112), P- = F P F^T + Sigma^P
    (3.113), innovation o - h(q_MB, qd_MB) (3.114) applied by scalar sequential updates (Joseph form),
    then the feedback (3.119) and x = 0.

    Position feedback (``settings.position_feedback``, default "auto"): the velocity-level correction
    of the thesis, dq = R dz (Phi_q dq = 0 with dz at the independent entries), followed by the full
    position problem at z + dz only when that leaves the constraints violated by more than
    ``feedback_tol`` (the large first corrections from the initial-angle error, or low sensor rates).
    Velocity feedback: velocity problem at the corrected position with z_dot_MB + dz_dot.  The MB
    accelerations and multipliers are kept (as in the MBDE code)."""

    kind = "errorekf"

    def __init__(self, linkage, sensor, dt=DT, settings=None):
        super().__init__(linkage, sensor, dt, settings)
        self.solver = self._ali3p(linkage.q0, np.zeros(self.model.n))
        self.x = np.zeros(2 * self.g)
        self._R = None
        self.n_exact_feedback = 0

    @property
    def q(self):
        return self.solver.q

    @property
    def qd(self):
        return self.solver.qd

    def predict(self) -> None:
        result = self.solver.step()
        if not result.success:
            raise FilterDivergence(f"errorekf: MB step failed: {result.message}")
        self.t = self.solver.t
        self.x[:] = 0.0
        self.P[:] = self.F @ self.P @ self.F.T + self.plant
        self._R = None

    def update(self, o: np.ndarray) -> None:
        q, qd = self.solver.q, self.solver.qd
        R, dqd = manifold_derivatives(self.model, self.ind, q, qd, self.t, self.sensor.velocity_sensitive)
        self._R = R
        h, H = self.sensor.evaluate(q, qd, R, dqd)
        self._sequential(self.x, h, H, o)

    def correct(self) -> None:
        if not self.x.any():
            return
        self._check(self.x, self.P)
        g, solver, model = self.g, self.solver, self.model
        dz, dzd = self.x[:g], self.x[g:]
        R = self._R if self._R is not None else velocity_transform(model, solver.q, self.ind, self.t)[0]
        q = solver.q + R @ dz  # eq. 3.119: [Phi_q; D] dq = [0; dz]
        mode = self.settings.position_feedback
        if mode != "linear":
            exact = mode == "exact"
            if not exact:
                model.constraints.evaluate(q, self.t)
                exact = np.abs(model.constraints.phi).max(initial=0.0) > self.settings.feedback_tol
            if exact:
                q = solve_position(model, q, self.ind, self.t)
                self.n_exact_feedback += 1
        qd = solve_velocity(model, q, self.ind, solver.qd[self.ind] + dzd, self.t)
        self._check(q, qd)
        solver.q, solver.qd = q, qd
        self.x[:] = 0.0
        self._R = None


class _StateFilter(_LinkageFilter):
    """Filters with x = [z, z_dot]; the model state (q, qd) follows x by position and velocity problems."""

    def __init__(self, linkage, sensor, dt=DT, settings=None):
        super().__init__(linkage, sensor, dt, settings)
        self.q = linkage.q0.copy()
        self.qd = np.zeros(self.model.n)
        self.x = np.r_[self.q[self.ind], self.qd[self.ind]]
        self._R = None
        self._Q = np.zeros(self.model.n)
        self._K = np.zeros((self.model.n, self.model.n))
        self._C = np.zeros((self.model.n, self.model.n))

    def _assemble(self, x: np.ndarray, q_guess: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, qd, R) consistent with x = [z, z_dot]: position problem, then qd = R z_dot - S Phi_t."""
        self._check(x)
        g, model = self.g, self.model
        q = q_guess.copy()
        q[self.ind] = x[:g]
        q = solve_position(model, q, self.ind, self.t)
        R, S = velocity_transform(model, q, self.ind, self.t)
        qd = R @ x[g:] - S @ model.constraints.phi_t
        return q, qd, R

    def _set_state(self) -> None:
        self.q, self.qd, self._R = self._assemble(self.x, self.q)

    @property
    def z(self):
        return self.x[: self.g].copy()

    @property
    def z_dot(self):
        return self.x[self.g :].copy()


class LinkageDEKF(_StateFilter):
    """Discrete EKF (§3.4.2): x = [z, z_dot]; forward Euler z+ = z + dt z_dot, z_dot+ = z_dot + dt z_ddot
    with z_ddot the model's acceleration at (q, qd) (KKT system, eq. 3.63) (eq. 3.80); constant
    F = [[I, dt I], [0, I]] (eq. 3.81); EKF update (3.82-3.86) by scalar sequential updates."""

    kind = "dekf"

    def predict(self) -> None:
        qdd, _ = initial_accelerations(self.model, self.q, self.qd, self.t, self._Q, self._K, self._C)
        g, dt = self.g, self.dt
        zdd = qdd[self.ind]
        self.x = np.r_[self.x[:g] + dt * self.x[g:], self.x[g:] + dt * zdd]
        self.P[:] = self.F @ self.P @ self.F.T + self.plant
        self.t += dt
        self._set_state()

    def update(self, o: np.ndarray) -> None:
        dqd = manifold_derivatives(self.model, self.ind, self.q, self.qd, self.t)[1] if self.sensor.velocity_sensitive else None
        h, H = self.sensor.evaluate(self.q, self.qd, self._R, dqd)
        dx = np.zeros(2 * self.g)
        self._sequential(dx, h, H, o)
        self.x = self.x + dx
        self._set_state()


class LinkageUKF(_StateFilter):
    """Unscented KF with trapezoidal-rule propagation, "UKF TR" (§3.4.3, eqs. 3.87-3.99).

    L = 2g states, 2L+1 sigma points chi = x+ +- sqrt(L + lambda) (chol P+)_i (lower Cholesky factor),
    lambda = alpha^2 (L + kappa) - L, weights W0m = lambda/(L + lambda), W0c = W0m + 1 - alpha^2 + beta,
    Wi = 1/(2 (L + lambda)).  Default alpha = 1e-3, beta = 2, kappa = 0 (the MBDE code's values): the
    sigma points sit 1e-3 sqrt(L) standard deviations from the mean, so the transform acts as a central-
    difference linearisation of one ALI3-P step.  Each sigma point is assembled (position and velocity
    problems, KKT accelerations for the integrator's start) and stepped once; x- = sum Wm chi,
    P- = sum Wc (chi - x-)(chi - x-)^T + Sigma^P.  The update reuses the propagated points:
    P_yy = sum Wc (Y - y)(Y - y)^T + Sigma^S, P_xy, K = P_xy P_yy^-1, x+ = x- + K (o - y),
    P+ = P- - K P_yy K^T."""

    kind = "ukf"

    def __init__(self, linkage, sensor, dt=DT, settings=None):
        super().__init__(linkage, sensor, dt, settings)
        s = self.settings
        L = 2 * self.g
        lam = s.ukf_alpha**2 * (L + s.ukf_kappa) - L
        self.spread = math.sqrt(L + lam)
        self.wm = np.full(2 * L + 1, 0.5 / (L + lam))
        self.wc = self.wm.copy()
        self.wm[0] = lam / (L + lam)
        self.wc[0] = self.wm[0] + 1.0 - s.ukf_alpha**2 + s.ukf_beta
        self.integrator = self._ali3p(self.q, self.qd)
        self._points = None  # propagated (q, qd) of every sigma point

    def _sqrt(self, P: np.ndarray) -> np.ndarray:
        P = 0.5 * (P + P.T)
        try:
            return np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            w, V = np.linalg.eigh(P)
            return V * np.sqrt(np.clip(w, 0.0, None))

    def predict(self) -> None:
        L = 2 * self.g
        Sq = self.spread * self._sqrt(self.P)
        sigma = np.column_stack([self.x, self.x[:, None] + Sq, self.x[:, None] - Sq])
        integ, model = self.integrator, self.model
        chi = np.zeros_like(sigma)
        points = []
        for i in range(2 * L + 1):
            q, qd, _ = self._assemble(sigma[:, i], self.q)
            qdd, lam = initial_accelerations(model, q, qd, self.t, self._Q, self._K, self._C)
            integ.t, integ.q, integ.qd, integ.qdd, integ.lam = self.t, q, qd, qdd, lam
            result = integ.step()
            if not result.success:
                raise FilterDivergence(f"ukf: sigma point {i}: {result.message}")
            points.append((integ.q, integ.qd))
            chi[:, i] = np.r_[integ.q[self.ind], integ.qd[self.ind]]
        self.t += self.dt
        self.x = chi @ self.wm
        dev = chi - self.x[:, None]
        self.P = (dev * self.wc) @ dev.T + self.plant
        self._chi, self._points = chi, points

    def update(self, o: np.ndarray) -> None:
        Y = np.column_stack([self.sensor.h(q, qd) for q, qd in self._points])
        y = Y @ self.wm
        dy = Y - y[:, None]
        dx = self._chi - self.x[:, None]
        Pyy = (dy * self.wc) @ dy.T + np.eye(len(y)) * self.sensor.sigma**2
        Pxy = (dx * self.wc) @ dy.T
        nu = o - y
        if self.sensor.angular:
            nu = wrap_angle(nu)
        K = np.linalg.solve(Pyy, Pxy.T).T
        self.x = self.x + K @ nu
        self.P = self.P - K @ Pyy @ K.T
        self.P = 0.5 * (self.P + self.P.T)
        self.stats.accepted += 1

    def correct(self) -> None:
        """The posterior goes through the position and velocity problems (as in the MBDE code)."""
        self._set_state()


FILTER_CLASSES = {"errorekf": LinkageErrorEKF, "dekf": LinkageDEKF, "ukf": LinkageUKF}


# ----- the chapter-4 study ----------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def simulate_truth(mechanism: str = "four_bar", duration_s: float = 10.0, dt: float = DT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true linkage (gravity -10 m/s^2) falling from rest at its q0: times (N+1,), q, qd (N+1, n),
    by ALI3-P (alpha 1e9, tol 1e-10).  Cached; the arrays are read-only."""
    link = MECHANISMS[mechanism](gravity=GRAVITY)
    solver = ALI3P(link.model, link.q0, dt=dt, alpha=1e9, tol=1e-10)
    steps = int(round(duration_s / dt))
    t, q, qd = np.zeros(steps + 1), np.zeros((steps + 1, link.model.n)), np.zeros((steps + 1, link.model.n))
    q[0], qd[0] = solver.q, solver.qd
    for k in range(1, steps + 1):
        result = solver.step()
        if not result.success:
            raise SolverError(f"truth simulation of the {mechanism}: {result.message}")
        t[k], q[k], qd[k] = solver.t, solver.q, solver.qd
    for a in (t, q, qd):
        a.flags.writeable = False
    return t, q, qd


def filter_linkage(mechanism: str, error: str) -> Linkage:
    """The observer's model: gravity -10 + error (m/s^2), initial crank angle(s) + error (rad), from rest."""
    dg, dth = ERRORS[error]
    if mechanism == "four_bar":
        return four_bar(gravity=GRAVITY + dg, theta0=math.pi / 3.0 + dth)
    if mechanism == "five_bar":
        return five_bar(gravity=GRAVITY + dg, theta1=0.0 + dth, theta2=math.pi + dth)
    raise ValueError(f"unknown mechanism '{mechanism}', choose one of {sorted(MECHANISMS)}")


@dataclass
class StudyResult:
    """One run of the §4.7 protocol.  RMSEs over every MB step after t = 0 (rad, rad/s); the sensor
    RMSE is that of the raw samples against the truth (rad for encoders, rad/s for gyros)."""

    mechanism: str
    filter: str
    sensor: str
    rate_hz: float
    error: str
    seed: int
    rmse_angle: float  # crank angle(s), all cranks pooled (rad)
    rmse_rate: float  # crank rate(s) (rad/s)
    rmse_sensor: float  # raw samples vs truth
    rtf: float  # simulated s per wall-clock s of the filter loop
    rmse_angle_per_crank: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_updates: int = 0
    failed: bool = False
    message: str = ""


def run_study(mechanism: str = "four_bar", filter: str = "errorekf", sensor: str = "crank_encoder", rate_hz: float = 200,
              error: str = "high", seed: int = 0, duration_s: float = 10.0, settings: LinkageFilterSettings | None = None) -> StudyResult:
    """Sanjurjo §4.7: truth from rest (g = -10), sensor samples (sigma pi/180) every 1/rate_hz s, the filter
    on the wrong model (:func:`filter_linkage`), MB dt = 5 ms, tuned by :data:`PLANT_SIGMA2` unless ``settings``
    are given.  The noise is one N(0, 1) draw per MB step
    and channel from ``seed`` (samples at different rates share it).  Returns a :class:`StudyResult`;
    a diverging filter gives failed=True and NaN RMSEs instead of raising."""
    if filter not in FILTER_CLASSES:
        raise ValueError(f"unknown filter '{filter}', choose one of {FILTERS}")
    if error not in ERRORS:
        raise ValueError(f"unknown error level '{error}', choose one of {sorted(ERRORS)}")
    period = 1.0 / (rate_hz * DT)
    if abs(period - round(period)) > 1e-9 or round(period) < 1:
        raise ValueError(f"rate_hz = {rate_hz}: the sample period must be a whole number of {DT} s steps")
    period = int(round(period))
    t, q_true, qd_true = simulate_truth(mechanism, float(duration_s), DT)
    steps = len(t) - 1
    truth_link = MECHANISMS[mechanism](gravity=GRAVITY)
    true_sensor = make_sensor(truth_link, sensor, mechanism=mechanism)
    noise = np.random.default_rng(seed).standard_normal((steps + 1, true_sensor.dim))
    sample_steps = np.arange(period, steps + 1, period)
    samples = {k: true_sensor.h(q_true[k], qd_true[k]) + true_sensor.sigma * noise[k] for k in sample_steps}
    ind = truth_link.model.indices(list(truth_link.independent))
    if true_sensor.angular:
        sensor_err = np.array([wrap_angle(samples[k] - true_sensor.h(q_true[k], qd_true[k])) for k in sample_steps])
    else:
        sensor_err = np.array([samples[k] - true_sensor.h(q_true[k], qd_true[k]) for k in sample_steps])
    rmse_sensor = float(np.sqrt(np.mean(sensor_err**2)))

    link = filter_linkage(mechanism, error)
    if settings is None:
        settings = LinkageFilterSettings(plant_sigma2=PLANT_SIGMA2[mechanism])
    flt = FILTER_CLASSES[filter](link, make_sensor(link, sensor, mechanism=mechanism), DT, settings)
    z = np.full((steps + 1, len(ind)), np.nan)
    zd = np.full_like(z, np.nan)
    z[0], zd[0] = flt.z, flt.z_dot
    failed, message = False, ""
    start = time.perf_counter()
    try:
        for k in range(1, steps + 1):
            flt.step(samples.get(k))
            z[k], zd[k] = flt.z, flt.z_dot
    except (FilterDivergence, SolverError, np.linalg.LinAlgError, FloatingPointError) as exc:
        failed, message = True, f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - start
    err = wrap_angle(z[1:] - q_true[1:, ind])
    err_rate = zd[1:] - qd_true[1:, ind]
    nan = float("nan")
    return StudyResult(
        mechanism, filter, sensor, rate_hz, error, seed,
        rmse_angle=nan if failed else float(np.sqrt(np.mean(err**2))),
        rmse_rate=nan if failed else float(np.sqrt(np.mean(err_rate**2))),
        rmse_sensor=rmse_sensor,
        rtf=duration_s / wall if not failed else nan,
        rmse_angle_per_crank=np.full(len(ind), nan) if failed else np.sqrt(np.mean(err**2, axis=0)),
        n_updates=flt.stats.accepted, failed=failed, message=message,
    )


def study_grid(mechanisms=("four_bar", "five_bar"), sensors=SENSOR_KINDS, rates=RATES_HZ, errors=("low", "high"),
               filters=FILTERS, seed: int = 0, duration_s: float = 10.0, settings: LinkageFilterSettings | None = None,
               file=sys.stdout) -> list[StudyResult]:
    """Run the §4.7 grid, printing one table row per run as it completes (see :func:`print_study_table`)."""
    results = []
    if file is not None:
        print(_HEADER, file=file, flush=True)
    for mech in mechanisms:
        for sensor in sensors:
            for error in errors:
                for rate in rates:
                    for flt in filters:
                        r = run_study(mech, flt, sensor, rate, error, seed, duration_s, settings)
                        results.append(r)
                        if file is not None:
                            print(_row(r), file=file, flush=True)
    return results


_HEADER = f"{'mechanism':<9} {'sensor':<13} {'rate_Hz':>7} {'error':<5} {'filter':<8} {'rmse_angle_rad':>14} {'rmse_sensor':>11} {'rmse_rate_rad_s':>15} {'rtf':>7}"


def _row(r: StudyResult) -> str:
    if r.failed:
        return f"{r.mechanism:<9} {r.sensor:<13} {r.rate_hz:>7g} {r.error:<5} {r.filter:<8} {'failed':>14} {r.rmse_sensor:>11.5f} {'':>15} {'':>7}  {r.message[:60]}"
    return (f"{r.mechanism:<9} {r.sensor:<13} {r.rate_hz:>7g} {r.error:<5} {r.filter:<8} {r.rmse_angle:>14.5f} "
            f"{r.rmse_sensor:>11.5f} {r.rmse_rate:>15.5f} {r.rtf:>7.2f}")


def print_study_table(results: Sequence[StudyResult] | None = None, file=sys.stdout, **grid) -> list[StudyResult]:
    """Print the table (mechanism, sensor, rate, error level, filter, RMSE, RTF); runs :func:`study_grid`
    (keyword arguments passed on) when no results are given."""
    if results is None:
        return study_grid(file=file, **grid)
    print(_HEADER, file=file)
    for r in results:
        print(_row(r), file=file)
    return list(results)


if __name__ == "__main__":  # python -m state_observer.estimation.linkage [four_bar|five_bar ...]
    mechs = tuple(sys.argv[1:]) or ("four_bar", "five_bar")
    print_study_table(mechanisms=mechs)

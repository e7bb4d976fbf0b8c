"""Outputs: what the observer publishes, built from its filter and model at the current model time.

:class:`Odometry` (pose, twist and their covariances; cheap, for every IMU message) and :class:`ObserverEstimate`
(the full state with tire force, mass and friction uncertainties, NIS, the parameter report).  Covariances: position
and attitude errors are small angles about the ENU axes (the reduced model's Euler angle errors taken as such);
the twist's are the filter's velocity errors mapped into base_link.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..conventions import quaternion_to_matrix
from ..vehicle.reduced_kernels import body_rate_into, euler_rotation_into
from ..vehicle.state import VehicleState
from .errorekf import N, PARAMETER_NAMES, DetailedErrorEKF
from .spi import CONVERGED


class Odometry(NamedTuple):
    """Pose and twist of base_link (REP-103/105) with covariances."""

    stamp_ns: int
    position_m: np.ndarray  # (3,) local ENU
    orientation_wxyz: np.ndarray  # (4,) base_link -> ENU
    velocity_body_m_s: np.ndarray  # (3,) base_link axes
    angular_velocity_body_rad_s: np.ndarray  # (3,)
    pose_covariance: np.ndarray  # (6, 6) x y z (m), rotation about ENU x y z (rad)
    twist_covariance: np.ndarray  # (6, 6) base_link linear (m/s), angular (rad/s)


class ObserverEstimate(NamedTuple):
    """Everything the observer publishes about one instant (SI units, REP-103/105)."""

    stamp_ns: int
    state: VehicleState  # the corrected model's state: pose in the local ENU frame, twist, tire forces, mass, mu
    pose_covariance: np.ndarray  # (6, 6) x y z (ENU, m) and rotation about ENU x y z (rad)
    twist_covariance: np.ndarray  # (6, 6) linear (m/s) and angular (rad/s) velocity in base_link
    tire_force_sigma_n: np.ndarray  # (4, 3) 1-sigma of fx, fy, fz per wheel
    mass_sigma_kg: float
    friction_sigma: float
    parameters_converged: bool
    estimator: str
    nis: dict  # sensor -> latest normalised innovation squared
    parameters: dict | None = None  # spi_reduced: VehicleSPI.parameter_report() (value, sigma, status, bounds per parameter)


def make_odometry(f, t_ns: int) -> Odometry:
    """Odometry of filter ``f``'s model at model time ``t_ns`` (ns)."""
    v = f.vehicle
    P = f.P
    n = N  # [dz, dz_dot] lead every vehicle filter's state
    if isinstance(f, DetailedErrorEKF):
        state = v.truth()
        position, q = state.position_enu_m, state.orientation_wxyz
        R = quaternion_to_matrix(q)
        v_body, w_body = R.T @ state.velocity_enu_m_s, state.angular_velocity_body_rad_s
        rate_map = R.T  # the detailed filter's angular velocity errors are in world axes
    else:
        out = np.empty(13)
        pose, twist = np.empty((6, 6)), np.empty((6, 6))
        _reduced_odometry(v.solver.q, v.solver.qd, P, n, out, pose, twist)
        s = f.settings  # the lateral velocity's uncertainty the covariance leaves out: the tire model's share of the sideslip
        twist[1, 1] += (s.sideslip_model_relative * abs(out[8]) + s.sideslip_model_floor_rad * abs(out[7])) ** 2
        return Odometry(int(t_ns), out[:3], out[3:7], out[7:10], out[10:13], pose, twist)
    T = np.zeros((6, 6))
    T[:3, :3], T[3:, 3:] = R.T, rate_map
    twist = T @ P[n : n + 6, n : n + 6] @ T.T
    # position and attitude errors: small angles about the ENU axes (the reduced model's Euler angle errors
    # taken as such)
    return Odometry(int(t_ns), position, q, v_body, w_body, _symmetric(P[:6, :6]), _symmetric(twist))


def make_estimate(f, odometry: Odometry, estimator: str, tire_k_z: np.ndarray) -> ObserverEstimate:
    """The full estimate of filter ``f`` (configuration ``estimator``) at the instant of ``odometry`` (its
    :func:`make_odometry`); ``tire_k_z``: the tires' vertical stiffnesses (N/m, fl fr rl rr)."""
    state = f.vehicle.truth()
    if f.settings.force_estimation:  # the force correction's share of the tire forces (errorEKF-FE)
        state = state._replace(tire_force_n=f.tire_forces())
    mass_sigma = friction_sigma = 0.0
    converged = False
    report = f.parameter_report() if hasattr(f, "parameter_report") else None
    if report is not None:
        mass_sigma, friction_sigma = report["mass"]["sigma"], report["friction"]["sigma"]
        converged = report["mass"]["status"] == CONVERGED
    nis = {name: st.last_nis for name, st in f.stats.items() if st.dof}
    return ObserverEstimate(
        stamp_ns=odometry.stamp_ns, state=state, pose_covariance=odometry.pose_covariance, twist_covariance=odometry.twist_covariance,
        tire_force_sigma_n=tire_force_sigma(f, state, tire_k_z), mass_sigma_kg=mass_sigma, friction_sigma=friction_sigma,
        parameters_converged=bool(converged), estimator=estimator, nis=nis, parameters=report)


def tire_force_sigma(f, state: VehicleState, tire_k_z: np.ndarray) -> np.ndarray:
    """1-sigma of the tire forces (reduced models; zeros for the detailed one).  fx, fy: the uncertainty of the filter's
    longitudinal and lateral force errors, shared among the wheels in proportion to their normal loads, and of the
    estimated tire stiffness scales (a scale's sigma times the forces it scales), and what the covariance does not model
    (``tire_force_model_relative`` of each force, ``tire_force_model_load_share`` of the wheel load), in quadrature.  fz: the tire
    stiffness times the uncertainty of the wheel-centre height, dh = dz - x_i dpitch + y_i droll + ds_i (base_link
    contact point x_i, y_i; travel s_i; tire_k_z (N/m) per wheel).  The mass's uncertainty is not included."""
    sigma = np.zeros((4, 3))
    if isinstance(f, DetailedErrorEKF) or not f.relinearise:
        return sigma
    P = f.P
    forces = np.asarray(state.tire_force_n)
    fz = np.maximum(forces[:, 2], 0.0)
    share = fz / fz.sum() if fz.sum() > 0 else np.full(4, 0.25)
    variance = np.zeros((4, 2))
    for k, name in enumerate(f.force_names):
        if name in ("longitudinal", "lateral"):
            col = 2 * N + k
            variance[:, 0 if name == "longitudinal" else 1] += P[col, col] * share**2
    for k, name in enumerate(f.parameter_names):
        col = f.parameter_col + k
        scale = f.vehicle.parameters[PARAMETER_NAMES.index(name)]
        if name.startswith("cornering"):
            wheels = slice(0, 2) if name.endswith("front") else slice(2, 4)
            variance[wheels, 1] += P[col, col] * (forces[wheels, 1] / scale) ** 2
        elif name == "longitudinal":
            variance[:, 0] += P[col, col] * (forces[:, 0] / scale) ** 2
    # what the covariance does not model: a share of each force and of the wheel's load
    variance += np.square(f.settings.tire_force_model_relative * forces[:, :2]) + np.square(f.settings.tire_force_model_load_share * fz)[:, None]
    sigma[:, :2] = np.sqrt(variance)
    x, y = np.asarray(state.contact_point_base_m)[:, 0], np.asarray(state.contact_point_base_m)[:, 1]
    s = np.arange(6, 10)  # the travels' rows
    height = (P[2, 2] + y * y * P[3, 3] + x * x * P[4, 4] + P[s, s] + 2 * y * P[2, 3] - 2 * x * P[2, 4] + 2 * P[2, s]
              - 2 * x * y * P[3, 4] + 2 * y * P[3, s] - 2 * x * P[4, s])  # J P J^T with J = [1, y, -x, e_i] on z, roll, pitch, s
    sigma[:, 2] = np.hypot(tire_k_z * np.sqrt(np.maximum(height, 0.0)), f.settings.tire_force_model_relative * forces[:, 2])
    return sigma


def _symmetric(A: np.ndarray) -> np.ndarray:
    return 0.5 * (A + A.T)


@njit(cache=True)
def _reduced_odometry(z, zd, P, n, out, pose, twist):
    """Odometry of the 14-DOF model's state: out = [position (3), quaternion wxyz of R = Rz Ry Rx (4), base_link
    velocity R^T v (3), body rates E_b (roll, pitch, yaw)_dot (3)]; pose = sym(P[:6, :6]); twist = T P_v T^T with
    T = diag(R^T, E_b) over the velocity errors P[n:n+6, n:n+6]."""
    R, E = np.empty((3, 3)), np.empty((3, 3))
    dE = np.empty((3, 3))
    euler_rotation_into(z[3], z[4], z[5], R)
    body_rate_into(z[3], z[4], E, dE, dE)
    hr, hp, hy = 0.5 * z[3], 0.5 * z[4], 0.5 * z[5]
    cr, sr, cp, sp, cy, sy = math.cos(hr), math.sin(hr), math.cos(hp), math.sin(hp), math.cos(hy), math.sin(hy)
    out[0], out[1], out[2] = z[0], z[1], z[2]
    out[3] = cy * cp * cr + sy * sp * sr
    out[4] = cy * cp * sr - sy * sp * cr
    out[5] = cy * sp * cr + sy * cp * sr
    out[6] = sy * cp * cr - cy * sp * sr
    if out[3] < 0.0:  # the same rotation with w >= 0
        for i in range(3, 7):
            out[i] = -out[i]
    for i in range(3):
        out[7 + i] = R[0, i] * zd[0] + R[1, i] * zd[1] + R[2, i] * zd[2]
        out[10 + i] = E[i, 0] * zd[3] + E[i, 1] * zd[4] + E[i, 2] * zd[5]
    for i in range(6):
        for j in range(6):
            pose[i, j] = 0.5 * (P[i, j] + P[j, i])
    T = np.zeros((6, 6))
    for i in range(3):
        for j in range(3):
            T[i, j] = R[j, i]
            T[3 + i, 3 + j] = E[i, j]
    TP = np.zeros((6, 6))
    for i in range(6):
        for j in range(6):
            acc = 0.0
            for k in range(6):
                acc += T[i, k] * P[n + k, n + j]
            TP[i, j] = acc
    for i in range(6):
        for j in range(6):
            acc = 0.0
            for k in range(6):
                acc += TP[i, k] * T[j, k]
            twist[i, j] = acc
    for i in range(6):
        for j in range(i + 1, 6):
            twist[i, j] = twist[j, i] = 0.5 * (twist[i, j] + twist[j, i])

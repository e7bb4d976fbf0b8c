"""Sensor models of the 14-DOF vehicle state, with analytic Jacobians (Rodriguez 2020 §5.2.3, Sanjurjo
2016 §2.4).

State layout (:mod:`state_observer.vehicle.reduced`): z = [x, y, z, roll, pitch, yaw, s_fl..s_rr,
a_fl..a_rr], base_link origin in ENU, R = Rz(yaw) Ry(pitch) Rx(roll) (base_link -> ENU), body angular
velocity w_b = E_b (roll, pitch, yaw)_dot.  Every model returns ``(h, H)``: the predicted measurement
(m,) and its Jacobian (m, 3 n) with respect to [z, z_dot, z_ddot] (n = 14), the layout of the
errorEKF-FE error state.  Conventions match the sensor simulator (:mod:`state_observer.sim.sensors`):

* GNSS antenna position (ENU):  p + R r_a.  Its orientation columns are left out by default (the seeds'
  choice, so that a noisy fix does not tilt the chassis); ``orientation_columns=True`` keeps them.
* GNSS velocity (ENU):          p_dot + R (w_b x r_a).
* Gyroscope (sensor axes):      S^T w_b, S the mounting rotation (sensor -> base_link).
* Accelerometer (sensor axes):  S^T [R^T (p_ddot - g) + alpha_b x r + w_b x (w_b x r)],
                                alpha_b = E_b eta_ddot + E_b_dot eta_dot (specific force: gravity included,
                                which makes roll and pitch observable).
* Wheel encoders:               spin angle a_i (rad) and rate a_i_dot (rad/s), relative to the knuckle.
* Suspension travel:            s_i (m).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..conventions import GRAVITY_M_S2
from ..mbs.small_linalg import cross, mm, mtv, mv, skew

N = 14  # coordinates of the 14-DOF model
GRAVITY_ENU_M_S2 = np.array([0.0, 0.0, -GRAVITY_M_S2])


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b for 3-vectors (np.cross costs ~40 us on small arrays)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


@njit(cache=True)
def attitude_arrays(roll, pitch, yaw):
    """R = Rz(yaw) Ry(pitch) Rx(roll), dR/d(roll, pitch, yaw) (3, 3, 3), E_b, dE_b/d(roll, pitch) (2, 3, 3)
    and the second derivatives of E_b (rr, rp, pp) (3, 3, 3), written entry by entry (the products of
    the elementary rotations in closed form)."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    A = ((cy * cp, -sy, cy * sp), (sy * cp, cy, sy * sp), (-sp, 0.0, cp))  # Rz Ry
    R, dR = np.empty((3, 3)), np.empty((3, 3, 3))
    for i in range(3):
        a0, a1, a2 = A[i]
        R[i, 0], R[i, 1], R[i, 2] = a0, a1 * cr + a2 * sr, a1 * -sr + a2 * cr  # (Rz Ry) Rx
        # dR/dpitch = Rz Ry [e_y]x Rx
        dR[1, i, 0], dR[1, i, 1], dR[1, i, 2] = -a2, a0 * sr, a0 * cr
    for i in range(3):
        # dR/droll = R [e_x]x, dR/dyaw = [e_z]x R
        dR[0, i, 0], dR[0, i, 1], dR[0, i, 2] = 0.0, R[i, 2], -R[i, 1]
    for j in range(3):
        dR[2, 0, j], dR[2, 1, j], dR[2, 2, j] = -R[1, j], R[0, j], 0.0
    E = np.zeros((3, 3))
    E[0, 0], E[0, 2] = 1.0, -sp
    E[1, 1], E[1, 2] = cr, sr * cp
    E[2, 1], E[2, 2] = -sr, cr * cp
    dE = np.zeros((2, 3, 3))
    dE[0, 1, 1], dE[0, 1, 2], dE[0, 2, 1], dE[0, 2, 2] = -sr, cr * cp, -cr, -sr * cp
    dE[1, 0, 2], dE[1, 1, 2], dE[1, 2, 2] = -cp, -sr * sp, -cr * sp
    d2E = np.zeros((3, 3, 3))
    d2E[0, 1, 1], d2E[0, 1, 2], d2E[0, 2, 1], d2E[0, 2, 2] = -cr, -sr * cp, sr, -cr * cp
    d2E[1, 1, 2], d2E[1, 2, 2] = -cr * sp, sr * sp
    d2E[2, 0, 2], d2E[2, 1, 2], d2E[2, 2, 2] = sp, -sr * cp, -cr * cp
    return R, dR, E, dE, d2E


class Attitude:
    """R, E_b and their first and second derivatives with respect to (roll, pitch, yaw) (attributes R, dR,
    E, dE, d2E; see :func:`attitude_arrays`)."""

    def __init__(self, roll: float, pitch: float, yaw: float):
        self.R, self.dR, self.E, self.dE, self.d2E = attitude_arrays(float(roll), float(pitch), float(yaw))


def gnss_position(q: np.ndarray, antenna_m: np.ndarray, orientation_columns: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Antenna position in ENU (m): p + R r_a."""
    return _gnss_position(q, np.asarray(antenna_m, float), orientation_columns)


@njit(cache=True)
def _gnss_position(q, antenna_m, orientation_columns):
    R, dR, _, _, _ = attitude_arrays(q[3], q[4], q[5])
    H = np.zeros((3, 3 * N))
    for a in range(3):
        H[a, a] = 1.0
    if orientation_columns:
        for k in range(3):
            H[:, 3 + k] = mv(dR[k], antenna_m)
    return q[0:3] + mv(R, antenna_m), H


def gnss_velocity(q: np.ndarray, qd: np.ndarray, antenna_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Antenna velocity in ENU (m/s): p_dot + R (w_b x r_a)."""
    return _gnss_velocity(q, qd, np.asarray(antenna_m, float))


@njit(cache=True)
def _gnss_velocity(q, qd, antenna_m):
    R, dR, E, dE, _ = attitude_arrays(q[3], q[4], q[5])
    eta_d = qd[3:6]
    w = mv(E, eta_d)
    wxr = cross(w, antenna_m)
    R_skew = mm(R, skew(antenna_m))
    H = np.zeros((3, 3 * N))
    for a in range(3):
        H[a, N + a] = 1.0
    H[:, N + 3 : N + 6] = -mm(R_skew, E)
    for k in range(3):
        col = mv(dR[k], wxr)
        if k < 2:
            col = col - mv(R_skew, mv(dE[k], eta_d))
        H[:, 3 + k] = col
    return qd[0:3] + mv(R, wxr), H


def gyroscope(q: np.ndarray, qd: np.ndarray, mount_rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angular rate in sensor axes (rad/s): S^T E_b eta_dot."""
    return gyroscope_kernel(q, qd, np.ascontiguousarray(np.asarray(mount_rotation, float).T))


@njit(cache=True)
def gyroscope_kernel(q, qd, St):
    """:func:`gyroscope` compiled (callable from other kernels): St = S^T (3, 3), contiguous."""
    _, _, E, dE, _ = attitude_arrays(q[3], q[4], q[5])
    eta_d = qd[3:6]
    H = np.zeros((3, 3 * N))
    H[:, N + 3 : N + 6] = mm(St, E)
    H[:, 3] = mv(St, mv(dE[0], eta_d))
    H[:, 4] = mv(St, mv(dE[1], eta_d))
    return mv(St, mv(E, eta_d)), H


def accelerometer(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, position_m: np.ndarray, mount_rotation: np.ndarray,
                  gravity_enu_m_s2: np.ndarray = GRAVITY_ENU_M_S2) -> tuple[np.ndarray, np.ndarray]:
    """Specific force in sensor axes (m/s^2) at a base_link point r (module docstring)."""
    return accelerometer_kernel(q, qd, qdd, np.asarray(position_m, float), np.ascontiguousarray(np.asarray(mount_rotation, float).T),
                          np.asarray(gravity_enu_m_s2, float))


@njit(cache=True)
def accelerometer_kernel(q, qd, qdd, r, St, gravity):
    """:func:`accelerometer` compiled (callable from other kernels): lever arm r (3,) m, St = S^T (3, 3) contiguous,
    gravity (3,) ENU m/s^2."""
    R, dR, E, dE, d2E = attitude_arrays(q[3], q[4], q[5])
    eta_d, eta_dd = qd[3:6], qdd[3:6]
    rate, pitch_rate = eta_d[0], eta_d[1]
    E_dot = dE[0] * rate + dE[1] * pitch_rate
    w = mv(E, eta_d)
    alpha = mv(E, eta_dd) + mv(E_dot, eta_d)
    a_g = qdd[0:3] - gravity
    f = mtv(R, a_g) + cross(alpha, r) + cross(w, cross(w, r))
    # d f / d w = w r^T + (w . r) I - 2 r w^T, and d f / d alpha = -[r]x (alpha x r)
    df_dw = np.empty((3, 3))
    wr = w[0] * r[0] + w[1] * r[1] + w[2] * r[2]
    for i in range(3):
        for j in range(3):
            df_dw[i, j] = w[i] * r[j] - 2.0 * r[i] * w[j] + (wr if i == j else 0.0)
    df_dalpha = -skew(r)
    H = np.zeros((3, 3 * N))
    H[:, 2 * N : 2 * N + 3] = mm(St, R.T)
    H[:, 2 * N + 3 : 2 * N + 6] = mm(St, mm(df_dalpha, E))
    # velocities: w = E eta_dot; alpha depends on eta_dot through E_dot eta_dot
    dalpha_deta_d = E_dot.copy()
    dalpha_deta_d[:, 0] += mv(dE[0], eta_d)
    dalpha_deta_d[:, 1] += mv(dE[1], eta_d)
    H[:, N + 3 : N + 6] = mm(St, mm(df_dw, E) + mm(df_dalpha, dalpha_deta_d))
    # positions: R^T in every angle, E and E_dot in roll and pitch (d2E: rr, rp, pp)
    for k in range(3):
        col = mtv(dR[k], a_g)
        if k < 2:
            dw = mv(dE[k], eta_d)
            d2_r = d2E[0] if k == 0 else d2E[1]
            d2_p = d2E[1] if k == 0 else d2E[2]
            dalpha = mv(dE[k], eta_dd) + mv(d2_r * rate + d2_p * pitch_rate, eta_d)
            col = col + mv(df_dw, dw) + mv(df_dalpha, dalpha)
        H[:, 3 + k] = mv(St, col)
    return mv(St, f), H


def wheel_angles(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wheel spin angles relative to the knuckles (rad), fl fr rl rr."""
    H = np.zeros((4, 3 * N))
    H[:, 10:14] = np.eye(4)
    return q[10:14].copy(), H


def wheel_rates(qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wheel spin rates (rad/s), fl fr rl rr."""
    H = np.zeros((4, 3 * N))
    H[:, N + 10 : N + 14] = np.eye(4)
    return qd[10:14].copy(), H


def suspension_travel(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Suspension travels from the static position (m), fl fr rl rr."""
    H = np.zeros((4, 3 * N))
    H[:, 6:10] = np.eye(4)
    return q[6:10].copy(), H


class NaturalChassisSensors:
    """The same sensors on a natural-coordinate model (the detailed vehicle): the chassis is a point p0
    and three unit vectors ex, ey, ez that are coordinates themselves, so R = [ex ey ez], a chassis point
    is p0 + R r (linear in q) and the angular velocity is w = 1/2 sum_i e_i x e_i_dot (world axes).
    Every model returns (h, H_q, H_qd) over all n coordinates; the observer maps them to its independent
    coordinates with the velocity transform (h_z = H_q R, h_z_dot = H_qd R)."""

    def __init__(self, model, point: str = "p0", axes=("ex", "ey", "ez"), spins=()):
        self.n = model.n
        self.ip = model.index(f"{point}.x")
        self.ia = [model.index(f"{a}.x") for a in axes]
        self.spins = np.array([model.index(name) for name in spins], dtype=int)

    def _frame(self, q):
        return q[self.ip : self.ip + 3], np.column_stack([q[i : i + 3] for i in self.ia])

    def _point_map(self, r: np.ndarray) -> np.ndarray:
        """d(p0 + R r)/dq (3, n): identity on p0, r_i I on e_i."""
        J = np.zeros((3, self.n))
        J[:, self.ip : self.ip + 3] = np.eye(3)
        for k, i in enumerate(self.ia):
            J[:, i : i + 3] = r[k] * np.eye(3)
        return J

    def gnss_position(self, q, antenna_m, orientation_columns: bool = False):
        p0, R = self._frame(q)
        J = self._point_map(antenna_m)
        if not orientation_columns:
            for i in self.ia:
                J[:, i : i + 3] = 0.0
        return p0 + R @ antenna_m, J, np.zeros((3, self.n))

    def gnss_velocity(self, q, qd, antenna_m):
        J = self._point_map(antenna_m)
        return J @ qd, np.zeros((3, self.n)), J

    def _omega_world(self, q, qd):
        """w = 1/2 sum e_i x e_i_dot and its Jacobians (3, n) with respect to q and qd."""
        w = np.zeros(3)
        Wq, Wqd = np.zeros((3, self.n)), np.zeros((3, self.n))
        for i in self.ia:
            e, ed = q[i : i + 3], qd[i : i + 3]
            w += 0.5 * _cross(e, ed)
            Wq[:, i : i + 3] = -0.5 * skew(ed)
            Wqd[:, i : i + 3] = 0.5 * skew(e)
        return w, Wq, Wqd

    def gyroscope(self, q, qd, mount_rotation):
        """S^T R^T w; derivative of R^T w with respect to e_j adds w^T in row j."""
        _, R = self._frame(q)
        w, Wq, Wqd = self._omega_world(q, qd)
        St = mount_rotation.T
        Hq = R.T @ Wq
        for j, i in enumerate(self.ia):
            Hq[j, i : i + 3] += w
        return St @ (R.T @ w), St @ Hq, St @ (R.T @ Wqd)

    def accelerometer(self, q, qdd, position_m, mount_rotation, gravity_enu_m_s2=GRAVITY_ENU_M_S2):
        """S^T R^T (a_r - g) with a_r = J_r qdd the acceleration of the chassis point r (the model's
        accelerations are not filter states: H_q holds the dependence through R only)."""
        _, R = self._frame(q)
        J = self._point_map(position_m)
        a = J @ qdd - gravity_enu_m_s2
        St = mount_rotation.T
        Hq = np.zeros((3, self.n))
        for j, i in enumerate(self.ia):
            Hq[j, i : i + 3] = a
        return St @ (R.T @ a), St @ Hq, np.zeros((3, self.n))

    def wheel_rates(self, qd):
        H = np.zeros((len(self.spins), self.n))
        H[np.arange(len(self.spins)), self.spins] = 1.0
        return qd[self.spins].copy(), np.zeros_like(H), H

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

N = 14  # coordinates of the 14-DOF model
GRAVITY_ENU_M_S2 = np.array([0.0, 0.0, -9.81])


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b for 3-vectors (np.cross costs ~40 us on small arrays)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


_last_attitude: list = [None, None]


def attitude(angles: np.ndarray) -> "Attitude":
    """Attitude of (roll, pitch, yaw), memoised on the last angles (the sensors of one step share it)."""
    key = angles.tobytes()
    if _last_attitude[0] != key:
        _last_attitude[0], _last_attitude[1] = key, Attitude(*angles)
    return _last_attitude[1]


class Attitude:
    """R, E_b and their first and second derivatives with respect to (roll, pitch, yaw)."""

    def __init__(self, roll: float, pitch: float, yaw: float):
        cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
        Rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
        Ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
        Rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
        self.R = Rz @ Ry @ Rx
        ex, ey, ez = _skew(np.array([1.0, 0, 0])), _skew(np.array([0, 1.0, 0])), _skew(np.array([0, 0, 1.0]))
        # dR/droll = R [e_x]x, dR/dpitch = Rz Ry [e_y]x Rx, dR/dyaw = [e_z]x R
        self.dR = (self.R @ ex, Rz @ Ry @ ey @ Rx, ez @ self.R)
        self.E = np.array([[1.0, 0.0, -sp], [0.0, cr, sr * cp], [0.0, -sr, cr * cp]])
        self.dE = (np.array([[0.0, 0.0, 0.0], [0.0, -sr, cr * cp], [0.0, -cr, -sr * cp]]),
                   np.array([[0.0, 0.0, -cp], [0.0, 0.0, -sr * sp], [0.0, 0.0, -cr * sp]]))
        # second derivatives (rr, rp, pp) of E
        self.d2E = (np.array([[0.0, 0.0, 0.0], [0.0, -cr, -sr * cp], [0.0, sr, -cr * cp]]),
                    np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -cr * sp], [0.0, 0.0, sr * sp]]),
                    np.array([[0.0, 0.0, sp], [0.0, 0.0, -sr * cp], [0.0, 0.0, -cr * cp]]))


def gnss_position(q: np.ndarray, antenna_m: np.ndarray, orientation_columns: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Antenna position in ENU (m): p + R r_a."""
    att = attitude(q[3:6])
    r = att.R @ antenna_m
    H = np.zeros((3, 3 * N))
    H[:, 0:3] = np.eye(3)
    if orientation_columns:
        for k in range(3):
            H[:, 3 + k] = att.dR[k] @ antenna_m
    return q[0:3] + r, H


def gnss_velocity(q: np.ndarray, qd: np.ndarray, antenna_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Antenna velocity in ENU (m/s): p_dot + R (w_b x r_a)."""
    att = attitude(q[3:6])
    eta_d = qd[3:6]
    w = att.E @ eta_d
    wxr = _cross(w, antenna_m)
    H = np.zeros((3, 3 * N))
    H[:, N : N + 3] = np.eye(3)
    H[:, N + 3 : N + 6] = -att.R @ _skew(antenna_m) @ att.E
    for k in range(3):
        col = att.dR[k] @ wxr
        if k < 2:
            col = col - att.R @ _skew(antenna_m) @ (att.dE[k] @ eta_d)
        H[:, 3 + k] = col
    return qd[0:3] + att.R @ wxr, H


def gyroscope(q: np.ndarray, qd: np.ndarray, mount_rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angular rate in sensor axes (rad/s): S^T E_b eta_dot."""
    att = attitude(q[3:6])
    St = mount_rotation.T
    eta_d = qd[3:6]
    H = np.zeros((3, 3 * N))
    H[:, N + 3 : N + 6] = St @ att.E
    H[:, 3] = St @ (att.dE[0] @ eta_d)
    H[:, 4] = St @ (att.dE[1] @ eta_d)
    return St @ (att.E @ eta_d), H


def accelerometer(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, position_m: np.ndarray, mount_rotation: np.ndarray,
                  gravity_enu_m_s2: np.ndarray = GRAVITY_ENU_M_S2) -> tuple[np.ndarray, np.ndarray]:
    """Specific force in sensor axes (m/s^2) at a base_link point r (module docstring)."""
    att = attitude(q[3:6])
    St = mount_rotation.T
    r = position_m
    eta_d, eta_dd = qd[3:6], qdd[3:6]
    rate, pitch_rate = eta_d[0], eta_d[1]
    E_dot = att.dE[0] * rate + att.dE[1] * pitch_rate
    w = att.E @ eta_d
    alpha = att.E @ eta_dd + E_dot @ eta_d
    a_g = qdd[0:3] - gravity_enu_m_s2
    f = att.R.T @ a_g + _cross(alpha, r) + _cross(w, _cross(w, r))
    # d f / d w and d f / d alpha (alpha x r = -[r]x alpha)
    df_dw = np.outer(w, r) + (w @ r) * np.eye(3) - 2.0 * np.outer(r, w)
    df_dalpha = -_skew(r)
    H = np.zeros((3, 3 * N))
    # accelerations
    H[:, 2 * N : 2 * N + 3] = St @ att.R.T
    H[:, 2 * N + 3 : 2 * N + 6] = St @ df_dalpha @ att.E
    # velocities: w = E eta_dot; alpha depends on eta_dot through E_dot eta_dot
    dalpha_deta_d = E_dot.copy()
    dalpha_deta_d[:, 0] += att.dE[0] @ eta_d
    dalpha_deta_d[:, 1] += att.dE[1] @ eta_d
    H[:, N + 3 : N + 6] = St @ (df_dw @ att.E + df_dalpha @ dalpha_deta_d)
    # positions: R^T in every angle, E and E_dot in roll and pitch
    d2E = {(0, 0): att.d2E[0], (0, 1): att.d2E[1], (1, 0): att.d2E[1], (1, 1): att.d2E[2]}
    for k in range(3):
        col = att.dR[k].T @ a_g
        if k < 2:
            dw = att.dE[k] @ eta_d
            dalpha = att.dE[k] @ eta_dd + (d2E[(k, 0)] * rate + d2E[(k, 1)] * pitch_rate) @ eta_d
            col = col + df_dw @ dw + df_dalpha @ dalpha
        H[:, 3 + k] = St @ col
    return St @ f, H


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
            Wq[:, i : i + 3] = -0.5 * _skew(ed)
            Wqd[:, i : i + 3] = 0.5 * _skew(e)
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

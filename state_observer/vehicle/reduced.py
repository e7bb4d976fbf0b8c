"""The real-time 14-DOF vehicle model (the observers' model), in minimal coordinates.

z = [x, y, z, roll, pitch, yaw, s_fl, s_fr, s_rl, s_rr, a_fl, a_fr, a_rl, a_rr]: base_link origin in
ENU (m), chassis attitude R = Rz(yaw) Ry(pitch) Rx(roll), suspension travels s (m, wheel-centre height
along the chassis z axis from the static position) and wheel spin angles a (rad, relative to the
knuckle).  No constraints: each knuckle's pose is a function of its travel (and of the rack travel at
the steered corners) given by the quintic spline fit of the detailed model's sweep
(:mod:`.kinematic_fit`; Rodriguez 2020 §5.3 "macro-joints", eqs 5.45-5.50).  Time derivatives of the
rack travel are neglected in the knuckle kinematics, as in the seeds.

Bodies: the sprung mass (chassis, rack and half of every link), four unsprung masses at the wheel
centres (knuckle, strut, the wheel's non-spinning part and the other half of the links) and the four
spin inertias.  With J_v, J_w the Jacobians of each body's centre velocity and angular velocity
(world axes), M(z) = sum m J_v^T J_v + J_w^T I J_w (+ spin inertias) and the velocity terms are
Q_v = -sum m J_v^T a0 + J_w^T (I alpha0 + w x I w), a0 and alpha0 being the accelerations at zdd = 0.
Springs, anti-roll bars, drag, tires, brakes and drive are the detailed model's laws, with its
spring preloads, so both models share their static equilibrium.
"""
from __future__ import annotations

import math

import numpy as np

from ..mbs import ALI3P, MinimalModel
from ..mbs.model import body_point
from ..sim.truth import TruthSample
from .detailed import WHEELS, DetailedVehicle, quaternion_from_matrix
from .kinematic_fit import fit_vehicle_kinematics
from .tire import TireState, tire_forces
from .wheel_loads import _cross, road_contact, wheel_loads

GRAVITY = np.array([0.0, 0.0, -9.81])
UNSPRUNG_BODIES = ("knuckle", "lower_arm", "upper_arm", "tie_rod", "toe_link")


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]x for (..., 3) vectors."""
    out = np.zeros(v.shape + (3,))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


def euler_rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def body_rate_matrix(roll: float, pitch: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E_b with body angular velocity w_b = E_b (roll, pitch, yaw)_dot, and dE_b/droll, dE_b/dpitch."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    E = np.array([[1.0, 0.0, -sp], [0.0, cr, sr * cp], [0.0, -sr, cr * cp]])
    dE_dr = np.array([[0.0, 0.0, 0.0], [0.0, -sr, cr * cp], [0.0, -cr, -sr * cp]])
    dE_dp = np.array([[0.0, 0.0, -cp], [0.0, 0.0, -sr * sp], [0.0, 0.0, -cr * sp]])
    return E, dE_dr, dE_dp


def _knuckle_rate_matrix(angles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E_k (4, 3, 3) with w_rel = E_k (steer, incl, dive)_dot (chassis axes) and its angle derivatives."""
    st, inc = angles[:, 0], angles[:, 1]
    cs, ss, ci, si = np.cos(st), np.sin(st), np.cos(inc), np.sin(inc)
    z, o = np.zeros_like(st), np.ones_like(st)
    E = np.stack([np.stack([z, cs, -ss * ci], -1), np.stack([z, ss, cs * ci], -1), np.stack([o, z, si], -1)], -2)
    dE_dst = np.stack([np.stack([z, -ss, -cs * ci], -1), np.stack([z, cs, -ss * ci], -1), np.stack([z, z, z], -1)], -2)
    dE_din = np.stack([np.stack([z, z, ss * si], -1), np.stack([z, z, -cs * si], -1), np.stack([z, z, ci], -1)], -2)
    return E, dE_dst, dE_din


def _knuckle_rotation(angles: np.ndarray) -> np.ndarray:
    """K = Rz(steer) Rx(incl) Ry(dive) for (4, 3) angles."""
    st, inc, dv = angles[:, 0], angles[:, 1], angles[:, 2]
    cs, ss, ci, si, cd, sd = np.cos(st), np.sin(st), np.cos(inc), np.sin(inc), np.cos(dv), np.sin(dv)
    z, o = np.zeros_like(st), np.ones_like(st)
    Rz = np.stack([np.stack([cs, -ss, z], -1), np.stack([ss, cs, z], -1), np.stack([z, z, o], -1)], -2)
    Rx = np.stack([np.stack([o, z, z], -1), np.stack([z, ci, -si], -1), np.stack([z, si, ci], -1)], -2)
    Ry = np.stack([np.stack([cd, z, sd], -1), np.stack([z, o, z], -1), np.stack([-sd, z, cd], -1)], -2)
    return Rz @ Rx @ Ry


class ReducedVehicle:
    """The 14-DOF model with the same driving API as :class:`DetailedVehicle` (``start``, ``set_inputs``,
    ``step``, ``truth``, ``mu``), so the manoeuvre runner drives either."""

    def __init__(self, desc, kinematics=None, road=None, mu: float | None = None, dt_s: float = 0.004, tol: float = 1e-9, max_iter: int = 20, detailed: DetailedVehicle | None = None):
        self.desc = desc
        self.dt_s = dt_s
        self.detailed = detailed if detailed is not None else DetailedVehicle(desc, road=road, mu=mu, dt_s=dt_s)
        d = self.detailed
        if not hasattr(d, "q_static"):
            d.solve_statics()
        self.road = d.road
        self.kin = kinematics if kinematics is not None else fit_vehicle_kinematics(desc)
        self.corners = [self.kin[w] for w in WHEELS]
        self.total_mass_kg = d.total_mass_kg
        self._lump_masses()
        springs = d.spring_set
        self.spring_k, self.spring_c, self.spring_l0, self.spring_f0 = springs.k.copy(), springs.c.copy(), springs.l0.copy(), springs.f0.copy()
        self.arb = [(corners, c.anti_roll_bar_n_per_m) for corners, c in (((0, 1), desc.corners[0]), ((2, 3), desc.corners[2])) if c.anti_roll_bar_n_per_m]
        aero = desc.aerodynamics
        self.aero = None if aero is None else (np.asarray(aero.centre_of_pressure_m, float), 0.5 * aero.air_density_kg_m3 * aero.drag_area_m2)
        self.tire = d.wheels.tire
        self.R0, self.rD = d.wheels.R0, d.wheels.rD
        self.brake_eps = d.wheels.brake_spin_eps_rad_s
        self.spin_inertia = np.array([c.wheel.spin_inertia_kg_m2 for c in desc.corners])
        self.mu = d.wheels.mu
        self.rack_m = 0.0
        self.steering_wheel_angle_rad = 0.0
        self.drive_torque_n_m = np.zeros(4)
        self.brake_torque_n_m = np.zeros(4)
        self.tire_state = TireState(np.zeros(4), np.zeros(4))
        self._t0 = 0.0
        self.model = MinimalModel("reduced_vehicle", ["x", "y", "z", "roll", "pitch", "yaw"] + [f"s_{w}" for w in WHEELS] + [f"a_{w}" for w in WHEELS], self.mass_matrix, [_Loads(self)])
        self.solver_options = dict(dt=dt_s, tol=tol, max_iter=max_iter)
        self.solver: ALI3P | None = None
        self._cache_key = None
        self.last = None
        self._tires_enabled = True

    # ----- mass distribution from the detailed model ------------------------------------------------
    def _lump_masses(self) -> None:
        """Sprung body and four unsprung point bodies from the detailed model's bodies at its static pose."""
        d = self.detailed
        q = d.q_static
        p0, R = d.chassis_frame(q)
        centres = np.array([R.T @ (q[d.model.index(f"C_{w}.x") : d.model.index(f"C_{w}.x") + 3] - p0) for w in WHEELS])
        sprung_m, sprung_moment, points = 0.0, np.zeros(3), []
        unsprung = np.zeros(4)
        self.knuckle_inertia = np.zeros((4, 3, 3))
        for name, body in d.model.bodies.items():
            g = body_point(body, body.com)
            com = R.T @ (g.B @ q + g.c - p0)
            corner = next((i for i, w in enumerate(WHEELS) if name.endswith(f"_{w}")), None)
            kind = name.rsplit("_", 1)[0] if corner is not None else name
            if corner is not None and kind == "knuckle":
                unsprung[corner] += body.mass
                self.knuckle_inertia[corner] += np.asarray(body.inertia, float) if np.ndim(body.inertia) == 2 else np.diag(body.inertia)
            elif corner is not None and kind in UNSPRUNG_BODIES:
                unsprung[corner] += 0.5 * body.mass
                sprung_m += 0.5 * body.mass
                sprung_moment += 0.5 * body.mass * com
                points.append((0.5 * body.mass, com))
            else:
                sprung_m += body.mass
                sprung_moment += body.mass * com
                if name != "chassis":
                    points.append((body.mass, com))
        self.sprung_mass = sprung_m
        self.sprung_com = sprung_moment / sprung_m
        c = self.sprung_com
        ch = self.desc.chassis
        d_ch = np.asarray(ch.com_m, float) - c
        inertia = np.asarray(ch.inertia_kg_m2, float) + ch.mass_kg * (d_ch @ d_ch * np.eye(3) - np.outer(d_ch, d_ch))
        for m, p in points:
            r = p - c
            inertia += m * (r @ r * np.eye(3) - np.outer(r, r))
        self.sprung_inertia = inertia
        self.unsprung_mass = unsprung
        self.static_centres = centres
        self._Ks = _knuckle_rotation(np.array([k.evaluate(0.0).angles_rad for k in self.corners]))

    # ----- kinematics -------------------------------------------------------------------------------------
    def _kinematics(self, q: np.ndarray, qd: np.ndarray | None = None):
        """Position-level kinematics at q (memoised on the last q) plus, with qd, the velocity terms."""
        key = (q.tobytes(), self.rack_m)
        if key == self._cache_key:
            c = self._cache
            if qd is not None:
                self._velocity_terms(c, q, qd)
            return c
        c = self._position_terms(q)
        self._cache_key, self._cache = key, c
        if qd is not None:
            self._velocity_terms(c, q, qd)
        return c

    def _position_terms(self, q: np.ndarray) -> dict:
        R = euler_rotation(q[3], q[4], q[5])
        Eb, dEb_dr, dEb_dp = body_rate_matrix(q[3], q[4])
        RE = R @ Eb
        ch = np.array([c.channels(float(s), self.rack_m) for c, s in zip(self.corners, q[6:10])])  # (4, 7, 6)
        cbar = ch[:, :3, 0]  # (4, 3) wheel centre, base_link
        ang = ch[:, 3:6, 0]  # steer, inclination, dive
        d1 = ch[:, :6, 1]  # d/ds (4, 6)
        d2 = ch[:, :6, 3]  # d2/ds2
        Ek, dEk_dst, dEk_din = _knuckle_rate_matrix(ang)
        Kk = _knuckle_rotation(ang)
        rc = cbar @ R.T  # R cbar (4, 3)
        rc1 = d1[:, :3] @ R.T  # R dcbar/ds
        rw1 = np.einsum("wij,wj->wi", Ek, d1[:, 3:]) @ R.T  # R E_k dangles/ds: knuckle rate per unit travel
        # centre Jacobians on local columns [x y z roll pitch yaw s_i a_i]
        JC = np.zeros((4, 3, 8))
        JC[:, :, 0:3] = np.eye(3)
        JC[:, :, 3:6] = -_skew(rc) @ RE
        JC[:, :, 6] = rc1
        JW = np.zeros((4, 3, 8))
        JW[:, :, 3:6] = RE
        JW[:, :, 6] = rw1
        return dict(spring=ch[:, 6, :], R=R, Eb=Eb, RE=RE, cbar=cbar, ang=ang, d1=d1, d2=d2, Ek=Ek, dEk=(dEk_dst, dEk_din), K=Kk, rc=rc, rc1=rc1, rw1=rw1, JC=JC, JW=JW,
                    dEb=(dEb_dr, dEb_dp), C=q[:3] + rc)

    def _velocity_terms(self, c: dict, q: np.ndarray, qd: np.ndarray) -> None:
        """Angular velocities and the accelerations at zdd = 0 (a0, alpha0) of every body."""
        R, RE, rc, rc1, rw1, d1, d2, Ek = c["R"], c["RE"], c["rc"], c["rc1"], c["rw1"], c["d1"], c["d2"], c["Ek"]
        dEb_dr, dEb_dp = c["dEb"]
        dEk_dst, dEk_din = c["dEk"]
        eta_d = qd[3:6]
        omega = RE @ eta_d
        alpha0 = R @ ((dEb_dr * qd[3] + dEb_dp * qd[4]) @ eta_d)
        sd = qd[6:10]
        wk = omega + rw1 * sd[:, None]
        # alpha0 of the knuckles: alpha0 + w x (R w_rel) + R (dE_k/dt a' + E_k a'') sd
        ang_d = d1[:, 3:] * sd[:, None]
        dEk_dt = dEk_dst * ang_d[:, 0, None, None] + dEk_din * ang_d[:, 1, None, None]
        rel_acc = (np.einsum("wij,wj->wi", dEk_dt, d1[:, 3:]) + np.einsum("wij,wj->wi", Ek, d2[:, 3:]) * sd[:, None]) * sd[:, None]
        alpha0_k = alpha0 + _cross(omega, rw1 * sd[:, None]) + rel_acc @ R.T
        a0_C = _cross(alpha0, rc) + _cross(omega, _cross(omega, rc)) + 2.0 * _cross(omega, rc1 * sd[:, None]) + (d2[:, :3] * (sd * sd)[:, None]) @ R.T
        c.update(omega=omega, alpha0=alpha0, wk=wk, alpha0_k=alpha0_k, a0_C=a0_C, Cd=np.einsum("wik,wk->wi", c["JC"], self._local(qd)))

    @staticmethod
    def _local(v: np.ndarray) -> np.ndarray:
        """(4, 8) local copies [x y z roll pitch yaw s_i a_i] of a 14-vector."""
        out = np.empty((4, 8))
        out[:, :6] = v[:6]
        out[:, 6] = v[6:10]
        out[:, 7] = v[10:14]
        return out

    _COLS = np.array([[0, 1, 2, 3, 4, 5, 6 + i, 10 + i] for i in range(4)])

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        k = self._kinematics(q)
        R, RE = k["R"], k["RE"]
        M = np.zeros((14, 14))
        # sprung body
        rg = R @ self.sprung_com
        Jv = np.zeros((3, 6))
        Jv[:, :3] = np.eye(3)
        Jv[:, 3:] = -_skew(rg) @ RE
        Iw = R @ self.sprung_inertia @ R.T
        M[:6, :6] = self.sprung_mass * Jv.T @ Jv
        M[3:6, 3:6] += RE.T @ Iw @ RE
        # unsprung bodies (centre at the wheel centre) with their rotating inertia
        Rk = R @ k["K"] @ np.transpose(self._Ks, (0, 2, 1))  # knuckle rotation from its static pose, world
        Ik = Rk @ self.knuckle_inertia @ np.transpose(Rk, (0, 2, 1))
        JC, JW = k["JC"], k["JW"]
        blocks = self.unsprung_mass[:, None, None] * np.transpose(JC, (0, 2, 1)) @ JC + np.transpose(JW, (0, 2, 1)) @ Ik @ JW
        for i in range(4):
            M[np.ix_(self._COLS[i], self._COLS[i])] += blocks[i]
        M[10:14, 10:14] += np.diag(self.spin_inertia)
        return M

    # ----- forces (one element for everything, see _Loads) -------------------------------------------
    def _accumulate(self, q, qd, t, Q, K, C):
        k = self._kinematics(q, qd)
        R, RE = k["R"], k["RE"]
        s, sd = q[6:10], qd[6:10]
        # gravity and velocity terms of the sprung body
        rg = R @ self.sprung_com
        Jv = np.zeros((3, 6))
        Jv[:, :3] = np.eye(3)
        Jv[:, 3:] = -_skew(rg) @ RE
        omega, alpha0 = k["omega"], k["alpha0"]
        a0 = _cross(alpha0, rg) + _cross(omega, _cross(omega, rg))
        Iw = R @ self.sprung_inertia @ R.T
        Q[:6] += Jv.T @ (self.sprung_mass * (GRAVITY - a0))
        Q[3:6] -= RE.T @ (Iw @ alpha0 + _cross(omega, Iw @ omega))
        # unsprung bodies
        JC, JW = k["JC"], k["JW"]
        Rk = R @ k["K"] @ np.transpose(self._Ks, (0, 2, 1))
        Ik = Rk @ self.knuckle_inertia @ np.transpose(Rk, (0, 2, 1))
        wk = k["wk"]
        lin = self.unsprung_mass[:, None] * (GRAVITY - k["a0_C"])
        ang = -(np.einsum("wij,wj->wi", Ik, k["alpha0_k"]) + _cross(wk, np.einsum("wij,wj->wi", Ik, wk)))
        Qw = np.einsum("wik,wi->wk", JC, lin) + np.einsum("wik,wi->wk", JW, ang)
        # springs (the fitted spring length), anti-roll bars
        spring = k["spring"]  # (4, 6): length, d/ds, d/drack, d2/ds2, ...
        length, dl, d2l = spring[:, 0], spring[:, 1], spring[:, 3]
        f = self.spring_k * (length - self.spring_l0) + self.spring_c * dl * sd + self.spring_f0
        Qw[:, 6] -= f * dl
        for (a, b), stiffness in self.arb:
            Q[6 + a] -= stiffness * (s[a] - s[b])
            Q[6 + b] += stiffness * (s[a] - s[b])
        if self.aero is not None:
            cp, coef = self.aero
            rcp = R @ cp
            v = qd[:3] + _cross(omega, rcp)
            ex = R[:, 0]
            vx = ex @ v
            Fa = -coef * abs(vx) * vx * ex
            Q[:3] += Fa
            Q[3:6] += RE.T @ _cross(rcp, Fa)
        tires = self._tires(q, qd, t, k, K is not None) if self._tires_enabled else None
        if tires is not None:
            Qw += tires["Q"]
        np.add.at(Q, self._COLS, Qw)
        if K is None:
            return
        Kw = np.zeros((4, 8, 8))
        Cw = np.zeros((4, 8, 8))
        Kw[:, 6, 6] += self.spring_k * dl * dl + f * d2l
        Cw[:, 6, 6] += self.spring_c * dl * dl
        if tires is not None:
            Kw += tires["K"]
            Cw += tires["C"]
        for i in range(4):
            ix = np.ix_(self._COLS[i], self._COLS[i])
            K[ix] += Kw[i]
            C[ix] += Cw[i]
        for (a, b), stiffness in self.arb:
            K[np.ix_([6 + a, 6 + b], [6 + a, 6 + b])] += stiffness * np.array([[1.0, -1.0], [-1.0, 1.0]])

    def _tires(self, q, qd, t, k, tangent: bool):
        """Tire, brake, drive and rolling-resistance loads on local columns (the detailed model's laws)."""
        R, C = k["R"], k["C"]
        w = k["K"][:, :, 1] @ R.T  # axle (the knuckle frame's y column), world
        g = road_contact(self.road, C, k["Cd"], w, self.R0)
        JP = k["JC"] - _skew(g.P - C) @ k["JW"]  # hub point at P
        vP = np.einsum("wik,wk->wi", JP, self._local(qd))
        omega = qd[10:14]
        dt = max(t - self._t0, 1e-9)
        out = tire_forces(self.tire, self.mu, g.xi, g.xi_dot, np.sum(g.ex * vP, axis=1), np.sum(g.ey * vP, axis=1), omega, self.tire_state, dt)
        Qw, Cw, Kw = wheel_loads(out, g, JP, k["JC"], omega, self.drive_torque_n_m, self.brake_torque_n_m, self.brake_eps, tangent)
        if np.any(self.drive_torque_n_m):  # drive reaction: +T w on the knuckle, -T w on the chassis
            Tw = self.drive_torque_n_m[:, None] * w
            Qw += np.einsum("wik,wi->wk", k["JW"], Tw)
            Qw[:, 3:6] -= Tw @ k["RE"]
        self.last = out
        self.contact = dict(C=C, P=g.P, w=w, n=g.n, ex=g.ex)
        return dict(Q=Qw, K=Kw, C=Cw)

    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        d = self.detailed
        p0, Rs = d.chassis_frame(d.q_static)
        roll = math.atan2(Rs[2, 1], Rs[2, 2])
        pitch = -math.asin(Rs[2, 0])
        q = np.zeros(14)
        q[:3] = (position_m[0], position_m[1], p0[2])
        q[3:6] = (roll, pitch, yaw_rad)
        qd = np.zeros(14)
        qd[0:2] = speed_m_s * math.cos(yaw_rad), speed_m_s * math.sin(yaw_rad)
        qd[10:14] = speed_m_s / self.rD
        self.tire_state = TireState(np.zeros(4), np.zeros(4))
        self._t0 = t
        self._cache_key = None
        self.solver = ALI3P(self.model, q, qd, t=t, alpha=1.0, **self.solver_options)

    def set_inputs(self, steering_wheel_angle_rad: float, drive_torque_n_m, brake_torque_n_m, steering_rate_rad_s: float = 0.0) -> None:
        self.steering_wheel_angle_rad = float(steering_wheel_angle_rad)
        self.rack_m = self.desc.steering.rack_travel_per_steering_wheel_rad_m * steering_wheel_angle_rad
        self.drive_torque_n_m = np.broadcast_to(np.asarray(drive_torque_n_m, float), (4,)).copy()
        self.brake_torque_n_m = np.broadcast_to(np.asarray(brake_torque_n_m, float), (4,)).copy()

    def steering_ratio(self) -> float:
        return self.detailed.steering_ratio()

    def step(self):
        if self.solver is None:
            raise RuntimeError("call start() before step()")
        return self.solver.step()

    def truth(self) -> TruthSample:
        s = self.solver
        q, qd, qdd = s.q, s.qd, s.qdd
        k = self._kinematics(q, qd)
        R = k["R"]
        Eb, dEb_dr, dEb_dp = body_rate_matrix(q[3], q[4])
        w_body = Eb @ qd[3:6]
        a_body = Eb @ qdd[3:6] + (dEb_dr * qd[3] + dEb_dp * qd[4]) @ qd[3:6]
        out = self.last
        brake = self.brake_torque_n_m * np.tanh(qd[10:14] / self.brake_eps)
        mu = np.broadcast_to(np.asarray(self.mu, float), (4,))
        return TruthSample(
            t_s=s.t, position_enu_m=q[:3].copy(), orientation_wxyz=quaternion_from_matrix(R), velocity_enu_m_s=qd[:3].copy(),
            acceleration_enu_m_s2=qdd[:3].copy(), angular_velocity_body_rad_s=w_body, angular_acceleration_body_rad_s2=a_body,
            wheel_angle_rad=q[10:14].copy(), wheel_rate_rad_s=qd[10:14].copy(), wheel_torque_n_m=self.drive_torque_n_m - brake,
            steering_wheel_angle_rad=self.steering_wheel_angle_rad, suspension_travel_m=q[6:10].copy(),
            tire_force_n=np.column_stack([out.fx_n, out.fy_n, out.fz_n]), slip_ratio=out.slip_ratio.copy(), slip_angle_rad=out.slip_angle_rad.copy(),
            contact_point_base_m=(self.contact["P"] - q[:3]) @ R, mass_kg=self.total_mass_kg, friction_coefficient=float(mu.mean()),
        )


class _Loads:
    """The reduced vehicle's force element (gravity, velocity terms, springs, bars, drag, tires), with the
    integrator's stateful-element protocol for the tire deflections."""

    stiff = True
    state_dependent = True

    def __init__(self, vehicle: ReducedVehicle):
        self.vehicle = vehicle

    def accumulate(self, q, qd, t, Q, K, C):
        self.vehicle._accumulate(q, qd, t, Q, K, C)

    def start(self, q, qd, t):
        self.vehicle.tire_state = TireState(np.zeros(4), np.zeros(4))
        self.vehicle._t0 = t

    def commit(self, q, qd, t):
        v = self.vehicle
        v.tire_state = TireState(v.last.deflection_x_m, v.last.deflection_y_m)
        v._t0 = t

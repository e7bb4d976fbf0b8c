"""Tire, brake, drive and rolling-resistance loads on the four wheels, as one multibody force element.

Each wheel is a knuckle-fixed centre C and axle w (unit, pointing to the vehicle's left) plus a spin
angle th relative to the knuckle that carries the spin inertia (the relative-angle wheel of Sanjurjo
2016 §5.2.1 / Pastorino; the gyroscopic coupling I1 (w . omega_knuckle) th_dot between spin and knuckle
rotation is neglected: it is below 0.1 % of the spin momentum for road vehicles).

Contact (disc wheel on the local road plane, normal n): e_x = unit(w x n) forward, e_y = n x e_x,
e_u = e_x x w (up in the wheel plane); loaded radius r_s = ((C - X0).n) / (e_u.n) with X0 the road point
below C; contact point P = C - r_s e_u; compression xi = R0 - r_s.  The tire force F = Fx e_x + Fy e_y +
Fz n acts on the wheel's material point at P, whose velocity is J q_dot with J = B_P - r_s e_x dth
(B_P: P as a knuckle-fixed point), so Q = J^T F (virtual work).  As th is relative to the knuckle, the
brake (between wheel and knuckle) works on th alone; the drive torque (from the chassis through the
driveshaft) works on th and on the knuckle's rotation, and reacts on the chassis; rolling resistance
comes from the road.

Stiffness and damping for the Newton tangent keep the dominant terms: the tire's slip and
vertical derivatives chained through J (rank-3 update per wheel) and the brake's spin damping.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..mbs.errors import ModelError
from .tire import TireParameters, TireState, tire_forces


@dataclass(frozen=True)
class WheelSpec:
    """Names of one wheel's elements in the multibody model."""

    name: str  # fl, fr, rl, rr
    centre: str  # point coordinate, wheel centre (fixed to the knuckle)
    axle: str  # unit-vector coordinate, spin axis pointing to the vehicle's left
    spin: str  # angle coordinate (spin relative to the knuckle)
    knuckle: str  # body carrying the wheel
    unloaded_radius_m: float
    dynamic_radius_m: float


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product along the last axis (numpy.cross is slow on small arrays)."""
    return a[..., _I1] * b[..., _I2] - a[..., _I2] * b[..., _I1]


_I1, _I2 = np.array([1, 2, 0]), np.array([2, 0, 1])


class Contact(NamedTuple):
    """Disc wheel on the local road plane (module docstring), per wheel (4,) or (4, 3)."""

    ex: np.ndarray  # forward, in the road plane
    ey: np.ndarray  # left, in the road plane
    eu: np.ndarray  # up in the wheel plane
    n: np.ndarray  # road normal
    cos_u: np.ndarray  # eu . n
    r_s: np.ndarray  # loaded radius (m)
    xi: np.ndarray  # compression (m)
    xi_dot: np.ndarray  # compression rate (m/s)
    P: np.ndarray  # contact point (m)


def road_contact(road, C: np.ndarray, Cd: np.ndarray, w: np.ndarray, unloaded_radius_m: np.ndarray) -> Contact:
    """Contact geometry of wheels with centres C (4, 3), centre velocities Cd and unit axles w."""
    surface = road.contact(C[:, :2])
    n = surface.normal
    ex = _cross(w, n)
    ex /= np.sqrt(np.sum(ex * ex, axis=1))[:, None]
    ey = _cross(n, ex)
    eu = _cross(ex, w)
    cos_u = np.sum(eu * n, axis=1)
    r_s = (C[:, 2] - surface.height_m) * n[:, 2] / cos_u
    xi_dot = -np.sum(Cd * n, axis=1) / cos_u
    return Contact(ex, ey, eu, n, cos_u, r_s, unloaded_radius_m - r_s, xi_dot, C - r_s[:, None] * eu)


def wheel_loads(out, g: Contact, JP: np.ndarray, JC: np.ndarray, omega: np.ndarray, drive_n_m: np.ndarray,
                brake_n_m: np.ndarray, brake_eps_rad_s, tangent: bool):
    """Generalised forces of the tire, brake, drive and rolling resistance on each wheel's columns
    (spin angle last), and their damping and stiffness blocks when ``tangent``.

    JP (4, 3, k): velocity of the hub point at P; JC (4, 3, k): of the wheel centre.  The wheel's
    material point at P moves with J = JP - r_s e_x on the spin column.  Returns (Qw (4, k),
    Cw (4, k, k), Kw (4, k, k)); the blocks are None without ``tangent``.  The drive torque's
    reactions on the knuckle and the chassis are the caller's (they depend on the coordinates).
    """
    ex, ey, nrm = g.ex, g.ey, g.n
    J = JP.copy()
    J[:, :, -1] -= g.r_s[:, None] * ex
    F = out.fx_n[:, None] * ex + out.fy_n[:, None] * ey + out.fz_n[:, None] * nrm
    Qw = np.matmul(F[:, None, :], J)[:, 0]
    tanh = np.tanh(omega / brake_eps_rad_s)
    Qw[:, -1] += drive_n_m - brake_n_m * tanh + out.rolling_torque_n_m
    if not tangent:
        return Qw, None, None
    # dF/dqd and dF/dq through slip velocities, spin and compression
    dvx = np.matmul(ex[:, None, :], JP)[:, 0]  # d vx / d qd
    dvy = np.matmul(ey[:, None, :], JP)[:, 0]
    dxi = -np.matmul(nrm[:, None, :], JC)[:, 0] / g.cos_u[:, None]  # d xi / d q  (= d xi_dot / d qd)
    dom = np.zeros_like(dvx)
    dom[:, -1] = 1.0
    dfx = out.dfx_dvx[:, None] * dvx + out.dfx_dvy[:, None] * dvy + out.dfx_domega[:, None] * dom
    dfy = out.dfy_dvx[:, None] * dvx + out.dfy_dvy[:, None] * dvy + out.dfy_domega[:, None] * dom
    load_dir = ex * out.dfx_dfz[:, None] + ey * out.dfy_dfz[:, None] + nrm  # dF/dFz (load sensitivity)
    dfz_dqd = out.dfz_dxidot[:, None] * dxi
    dF_dqd = ex[:, :, None] * dfx[:, None, :] + ey[:, :, None] * dfy[:, None, :] + load_dir[:, :, None] * dfz_dqd[:, None, :]
    dfz_dq = out.dfz_dxi[:, None] * dxi
    dF_dq = load_dir[:, :, None] * dfz_dq[:, None, :]
    JT = np.transpose(J, (0, 2, 1))
    Cw = -np.matmul(JT, dF_dqd)
    Kw = -np.matmul(JT, dF_dq)
    # rolling resistance torque on the spin: T_rr(Omega, Fz); brake T_b tanh(Omega / eps)
    Cw[:, -1, :] -= out.drolling_torque_dfz[:, None] * dfz_dqd
    Cw[:, -1, -1] -= out.drolling_torque_domega
    Kw[:, -1, :] -= out.drolling_torque_dfz[:, None] * dfz_dq
    Cw[:, -1, -1] += brake_n_m * (1.0 - tanh * tanh) / brake_eps_rad_s
    return Qw, Cw, Kw


class WheelLoads:
    """Force element for the four wheels; ``compile`` returns the element itself.

    Inputs (set before each step): ``drive_torque_n_m`` (4,), ``brake_torque_n_m`` (4,) (magnitude,
    >= 0), ``mu`` (friction coefficient, scalar or (4,)).  After each evaluation ``last`` holds the
    tire output and ``contact`` the contact geometry (for the truth record).
    """

    stiff = True
    state_dependent = True
    brake_spin_eps_rad_s = 0.5  # smooth sign of the brake torque (rad/s)

    def __init__(self, wheels: list[WheelSpec], tire: TireParameters, road, chassis: str, mu=1.0):
        if len(wheels) != 4:
            raise ModelError("the vehicle needs exactly four wheels")
        self.wheels, self.tire, self.road, self.chassis = wheels, tire, road, chassis
        self.mu = mu
        self.drive_torque_n_m = np.zeros(4)
        self.brake_torque_n_m = np.zeros(4)
        self.state = TireState(np.zeros(4), np.zeros(4))
        self.last = None
        self.contact = None
        self._t0 = 0.0

    # ----- compile: resolve names into compact affine maps ------------------------------------
    def compile(self, ctx):
        cols, BC, cC, BW, cW, BE, cE, Ginv, th = [], [], [], [], [], [], [], [], []
        for w in self.wheels:
            knuckle = ctx.body(w.knuckle)
            if len(knuckle.basis) != 3:
                raise ModelError(f"wheel {w.name}: knuckle '{w.knuckle}' needs a full basis of points and vectors")
            centre, axle = ctx.point(w.centre), ctx.vector(w.axle)
            maps = [centre.B, axle.B] + [e.B for e in knuckle.basis]
            used = np.flatnonzero(np.any(np.vstack(maps) != 0.0, axis=0))
            i_th = ctx.scalar(w.spin)
            c = np.append(used[used != i_th], i_th)  # spin angle last
            cols.append(c)
            BC.append(centre.B[:, c])
            cC.append(centre.c)
            BW.append(axle.B[:, c])
            cW.append(axle.c)
            BE.append(np.stack([e.B[:, c] for e in knuckle.basis]))
            cE.append(np.stack([e.c for e in knuckle.basis]))
            X = knuckle.basis_local
            Ginv.append(np.linalg.inv(X.T @ X))
            th.append(i_th)
        width = max(len(c) for c in cols)
        if any(len(c) != width for c in cols):
            raise ModelError("the four wheels must be built alike (same number of knuckle coordinates)")
        self.cols = np.array(cols)  # (4, k) columns of q each wheel touches, spin angle last
        self.BC, self.cC = np.array(BC), np.array(cC)  # (4, 3, k), (4, 3)
        self.BW, self.cW = np.array(BW), np.array(cW)
        self.BE, self.cE = np.array(BE), np.array(cE)  # (4, 3 basis, 3, k), (4, 3, 3)
        self.Ginv = np.array(Ginv)  # (4, 3, 3)
        self.B_all = np.concatenate([self.BC, self.BW, self.BE.reshape(4, 9, -1)], axis=1)  # (4, 15, k)
        self.c_all = np.concatenate([self.cC, self.cW, self.cE.reshape(4, 9)], axis=1)
        self.th = np.array(th)
        self._block_index = (self.cols[:, :, None], self.cols[:, None, :])  # (4, k, k) blocks of K and C
        chassis = ctx.body(self.chassis)
        chassis_maps = [e.B for e in chassis.basis]
        self.chassis_cols = np.flatnonzero(np.any(np.vstack(chassis_maps) != 0.0, axis=0))
        self.chassis_BE = np.array([e.B[:, self.chassis_cols] for e in chassis.basis])  # (3, 3, kc)
        self.chassis_cE = np.array([e.c for e in chassis.basis])
        Xc = chassis.basis_local
        self.chassis_Ginv = np.linalg.inv(Xc.T @ Xc)
        self.R0 = np.array([w.unloaded_radius_m for w in self.wheels])
        self.rD = np.array([w.dynamic_radius_m for w in self.wheels])
        return self

    # ----- stateful element protocol ---------------------------------------------------------------
    def start(self, q, qd, t):
        self.state = TireState(np.zeros(4), np.zeros(4))
        self._t0 = t
        self.evaluate(q, qd, t)

    def commit(self, q, qd, t):
        """Keep the deflections of the last evaluation (the converged iterate, within tol of q)."""
        out = self.last
        self.state = TireState(out.deflection_x_m, out.deflection_y_m)
        self._t0 = t

    # ----- kinematics and forces -----------------------------------------------------------------
    def evaluate(self, q, qd, t):
        """Contact geometry, tire output and the maps needed for Q, K, C (stored on self)."""
        qc, qdc = q[self.cols], qd[self.cols]  # (4, k)
        X = np.matmul(self.B_all, qc[:, :, None])[:, :, 0] + self.c_all  # centre, axle, knuckle basis
        C, w, E = X[:, 0:3], X[:, 3:6], X[:, 6:15].reshape(4, 3, 3)
        Cd = np.matmul(self.BC, qdc[:, :, None])[:, :, 0]
        w = w / np.sqrt(np.sum(w * w, axis=1))[:, None]
        g = road_contact(self.road, C, Cd, w, self.R0)
        P = g.P
        # P as a knuckle-fixed point, P - C = sum_b c_b e_b; for a rigid knuckle E^-1 = G^-1 E^T
        c = np.matmul(self.Ginv, np.matmul(E, (P - C)[:, :, None]))[:, :, 0]
        BP = self.BC + np.einsum("wb,wbjk->wjk", c, self.BE)
        vP = np.matmul(BP, qdc[:, :, None])[:, :, 0]
        omega = qd[self.th]
        dt = max(t - self._t0, 1e-9)  # the deflections keep their state at the start of a step
        out = tire_forces(self.tire, self.mu, g.xi, g.xi_dot, np.sum(g.ex * vP, axis=1), np.sum(g.ey * vP, axis=1), omega, self.state, dt)
        self.last = out
        self.contact = dict(C=C, Cd=Cd, w=w, E=E, geometry=g, P=P, BP=BP, omega=omega)
        return out

    def accumulate(self, q, qd, t, Q, K, C):
        out = self.evaluate(q, qd, t)
        g = self.contact
        Qw, Cw, Kw = wheel_loads(out, g["geometry"], g["BP"], self.BC, g["omega"], self.drive_torque_n_m,
                                 self.brake_torque_n_m, self.brake_spin_eps_rad_s, K is not None)
        Q[self.cols] += Qw  # the wheels' columns are disjoint
        # th is relative to the knuckle: a torque between wheel and knuckle (brake) does work on th only;
        # the drive torque comes from the chassis, so it also turns the knuckle (+T w) and reacts on the
        # chassis (-T w)
        if np.any(self.drive_torque_n_m):
            drive = self.drive_torque_n_m[:, None] * g["w"]
            self._torque_on_knuckles(Q, drive, g["E"])
            self._torque_on_chassis(Q, -drive.sum(axis=0), q)
        if K is not None:
            rows, cols = self._block_index
            C[rows, cols] += Cw
            K[rows, cols] += Kw

    def _torque_on_knuckles(self, Q, T, E):
        """Generalised forces of torques T (4, 3) on the knuckles: 1/2 sum_kl G^-1_kl B_k^T (T x e_l)."""
        TxE = _cross(T[:, None, :], E)  # (4, l, 3)
        coef = 0.5 * np.einsum("wkl,wlj->wkj", self.Ginv, TxE)  # (4, k, 3)
        Qw = np.einsum("wkjc,wkj->wc", self.BE, coef)
        Q[self.cols] += Qw  # the wheels' columns are disjoint

    def _torque_on_chassis(self, Q, T, q):
        E = np.einsum("bjk,k->bj", self.chassis_BE, q[self.chassis_cols]) + self.chassis_cE
        coef = 0.5 * self.chassis_Ginv @ _cross(T[None, :], E)
        Q[self.chassis_cols] += np.einsum("bjk,bj->k", self.chassis_BE, coef)

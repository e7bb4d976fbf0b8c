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

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from ..errors import ModelError
from ..mbs.small_linalg import cross, dot, mtv
from .tire import TireOutput, TireParameters, TireState, tire_forces_array


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


def cross_last_axis(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product along the last axis (numpy.cross is slow on small arrays)."""
    return a[..., _I1] * b[..., _I2] - a[..., _I2] * b[..., _I1]


_I1, _I2 = np.array([1, 2, 0]), np.array([2, 0, 1])


class Contact(NamedTuple):
    """Disc wheel on the local road plane (module docstring), per wheel (4,) or (4, 3): views of one
    (4, GEOMETRY_WIDTH) array (``Contact.from_array``) laid out for the compiled kernels."""

    ex: np.ndarray  # forward, in the road plane
    ey: np.ndarray  # left, in the road plane
    eu: np.ndarray  # up in the wheel plane
    n: np.ndarray  # road normal
    cos_u: np.ndarray  # eu . n
    r_s: np.ndarray  # loaded radius (m)
    xi: np.ndarray  # compression (m)
    xi_dot: np.ndarray  # compression rate (m/s)
    P: np.ndarray  # contact point (m)

    @classmethod
    def from_array(cls, geo: np.ndarray) -> Contact:
        return cls(geo[:, 0:3], geo[:, 3:6], geo[:, 6:9], geo[:, 9:12], geo[:, 12], geo[:, 13], geo[:, 14], geo[:, 15], geo[:, 16:19])


GEOMETRY_WIDTH = 19  # columns of a contact-geometry row: ex, ey, eu, n, cos_u, r_s, xi, xi_dot, P


def road_contact_array(road, C: np.ndarray, Cd: np.ndarray, w: np.ndarray, unloaded_radius_m: np.ndarray) -> np.ndarray:
    """Contact geometry of wheels with centres C (4, 3), centre velocities Cd and unit axles w: the
    (4, GEOMETRY_WIDTH) rows of :class:`Contact` (``Contact.from_array`` gives the named views)."""
    surface = road.contact(C[:, :2])
    geo = np.empty((len(C), GEOMETRY_WIDTH))
    contact_into(C, Cd, w, unloaded_radius_m, surface.height_m, surface.normal, geo)
    return geo



@njit(cache=True)
def contact_into(C, Cd, w, unloaded_radius_m, height_m, normal, geo):
    """Compiled contact geometry (module docstring) of wheels i with the road height and normal below
    their centres; writes the rows of ``geo`` (layout of :class:`Contact`)."""
    for i in range(C.shape[0]):
        n = normal[i]
        ex = cross(w[i], n)
        ex /= math.sqrt(dot(ex, ex))
        ey = cross(n, ex)
        eu = cross(ex, w[i])
        cos_u = dot(eu, n)
        r_s = (C[i, 2] - height_m[i]) * n[2] / cos_u
        g = geo[i]
        g[0:3], g[3:6], g[6:9], g[9:12] = ex, ey, eu, n
        g[12], g[13], g[14], g[15] = cos_u, r_s, unloaded_radius_m[i] - r_s, -dot(Cd[i], n) / cos_u
        g[16:19] = C[i] - r_s * eu


def wheel_loads(tire: np.ndarray, geo: np.ndarray, JP: np.ndarray, JC: np.ndarray, omega: np.ndarray, drive_n_m: np.ndarray,
                brake_n_m: np.ndarray, brake_eps_rad_s, tangent: bool):
    """Generalised forces of the tire, brake, drive and rolling resistance on each wheel's columns
    (spin angle last), and their damping and stiffness blocks when ``tangent``.

    tire: the (20, 4) tire output (:func:`.tire.tire_forces_array`); geo: the contact rows
    (:func:`road_contact_array`); JP (4, 3, k): velocity of the hub point at P; JC (4, 3, k):
    of the wheel centre.  The wheel's material point at P moves with J = JP - r_s e_x on the spin column.
    Returns (Qw (4, k), Cw (4, k, k), Kw (4, k, k)); the blocks are None without ``tangent``.  The drive
    torque's reactions on the knuckle and the chassis are the caller's (they depend on the coordinates).
    """
    k = JP.shape[2]
    Qw, Cw, Kw = np.zeros((4, k)), np.zeros((4, k, k)), np.zeros((4, k, k))
    wheel_loads_into(tire, geo, np.ascontiguousarray(JP), np.ascontiguousarray(JC), omega,
                     np.asarray(drive_n_m, float), np.asarray(brake_n_m, float), np.broadcast_to(np.asarray(brake_eps_rad_s, float), (4,)),
                     tangent, Qw, Cw, Kw)
    return (Qw, Cw, Kw) if tangent else (Qw, None, None)


@njit(cache=True)
def wheel_loads_into(tire, geo, JP, JC, omega, drive_n_m, brake_n_m, brake_eps, tangent, Qw, Cw, Kw):
    """Compiled :func:`wheel_loads`: ADDS each wheel's loads to Qw[i] and, with ``tangent``, its damping
    and stiffness blocks to Cw[i], Kw[i].  ``tire`` is the (20, 4) TireOutput array, ``geo`` the
    contact rows (:class:`Contact` layout); brake_eps (4,) the spin rates of the brake's smooth sign."""
    k = JP.shape[2]
    J = np.empty((3, k))
    dvx, dvy, dxi = np.empty(k), np.empty(k), np.empty(k)
    for i in range(JP.shape[0]):
        ex, ey, nrm = geo[i, 0:3], geo[i, 3:6], geo[i, 9:12]
        cos_u, r_s = geo[i, 12], geo[i, 13]
        fx, fy, fz, trr = tire[0, i], tire[1, i], tire[2, i], tire[3, i]
        J[:, :] = JP[i]
        for a in range(3):
            J[a, k - 1] -= r_s * ex[a]
        F = fx * ex + fy * ey + fz * nrm
        for c in range(k):
            Qw[i, c] += F[0] * J[0, c] + F[1] * J[1, c] + F[2] * J[2, c]
        th = math.tanh(omega[i] / brake_eps[i])
        Qw[i, k - 1] += drive_n_m[i] - brake_n_m[i] * th + trr
        if not tangent:
            continue
        # dF/dqd and dF/dq through slip velocities, spin and compression
        for c in range(k):
            dvx[c] = ex[0] * JP[i, 0, c] + ex[1] * JP[i, 1, c] + ex[2] * JP[i, 2, c]
            dvy[c] = ey[0] * JP[i, 0, c] + ey[1] * JP[i, 1, c] + ey[2] * JP[i, 2, c]
            dxi[c] = -(nrm[0] * JC[i, 0, c] + nrm[1] * JC[i, 1, c] + nrm[2] * JC[i, 2, c]) / cos_u
        dfx_dvx, dfx_dvy, dfx_dom, dfy_dvx, dfy_dvy, dfy_dom = tire[8, i], tire[9, i], tire[10, i], tire[11, i], tire[12, i], tire[13, i]
        dfz_dxi, dfz_dxidot, dfx_dfz, dfy_dfz, dtrr_dom, dtrr_dfz = tire[14, i], tire[15, i], tire[16, i], tire[17, i], tire[18, i], tire[19, i]
        load_dir = ex * dfx_dfz + ey * dfy_dfz + nrm  # dF/dFz (load sensitivity)
        # J^T ex, J^T ey, J^T load_dir: the generalised directions of each force component
        gx, gy, gl = mtv(J, ex), mtv(J, ey), mtv(J, load_dir)
        for r in range(k):
            for c in range(k):
                dfx = dfx_dvx * dvx[c] + dfx_dvy * dvy[c]
                dfy = dfy_dvx * dvx[c] + dfy_dvy * dvy[c]
                if c == k - 1:
                    dfx += dfx_dom
                    dfy += dfy_dom
                Cw[i, r, c] -= gx[r] * dfx + gy[r] * dfy + gl[r] * dfz_dxidot * dxi[c]
                Kw[i, r, c] -= gl[r] * dfz_dxi * dxi[c]
        # rolling resistance torque on the spin: T_rr(Omega, Fz); brake T_b tanh(Omega / eps)
        for c in range(k):
            Cw[i, k - 1, c] -= dtrr_dfz * dfz_dxidot * dxi[c]
            Kw[i, k - 1, c] -= dtrr_dfz * dfz_dxi * dxi[c]
        Cw[i, k - 1, k - 1] += brake_n_m[i] * (1.0 - th * th) / brake_eps[i] - dtrr_dom


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
        geo = road_contact_array(self.road, C, Cd, w, self.R0)
        g = Contact.from_array(geo)
        P = g.P
        # P as a knuckle-fixed point, P - C = sum_b c_b e_b; for a rigid knuckle E^-1 = G^-1 E^T
        c = np.matmul(self.Ginv, np.matmul(E, (P - C)[:, :, None]))[:, :, 0]
        BP = self.BC + np.einsum("wb,wbjk->wjk", c, self.BE)
        vP = np.matmul(BP, qdc[:, :, None])[:, :, 0]
        omega = qd[self.th]
        dt = max(t - self._t0, 1e-9)  # the deflections keep their state at the start of a step
        tire = tire_forces_array(self.tire, self.mu, g.xi, g.xi_dot, np.sum(g.ex * vP, axis=1), np.sum(g.ey * vP, axis=1), omega, self.state, dt)
        self.last = TireOutput(*tire)
        self.contact = dict(C=C, Cd=Cd, w=w, E=E, geometry=g, P=P, BP=BP, omega=omega, arrays=(tire, geo))
        return self.last

    def accumulate(self, q, qd, t, Q, K, C):
        self.evaluate(q, qd, t)
        g = self.contact
        Qw, Cw, Kw = wheel_loads(*g["arrays"], g["BP"], self.BC, g["omega"], self.drive_torque_n_m,
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
        TxE = cross_last_axis(T[:, None, :], E)  # (4, l, 3)
        coef = 0.5 * np.einsum("wkl,wlj->wkj", self.Ginv, TxE)  # (4, k, 3)
        Qw = np.einsum("wkjc,wkj->wc", self.BE, coef)
        Q[self.cols] += Qw  # the wheels' columns are disjoint

    def _torque_on_chassis(self, Q, T, q):
        E = np.einsum("bjk,k->bj", self.chassis_BE, q[self.chassis_cols]) + self.chassis_cE
        coef = 0.5 * self.chassis_Ginv @ cross_last_axis(T[None, :], E)
        Q[self.chassis_cols] += np.einsum("bjk,bj->k", self.chassis_BE, coef)

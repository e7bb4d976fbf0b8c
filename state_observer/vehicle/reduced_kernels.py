"""Compiled evaluation of the 14-DOF model (:mod:`.reduced`): kinematics and mass matrix at q
(:func:`position_stage`), then generalised forces with their stiffness and damping matrices at (q, qd)
(:func:`force_stage`).  The road is queried in Python between the two, at the wheel centres.

The equations are those of the :mod:`.reduced` module docstring.  Layouts of the work arrays, filled by
``position_stage`` and read by ``force_stage``:

* ``mats`` (MATS, 3, 3): R, E_b, dE_b/droll, dE_b/dpitch, R E_b, the sprung inertia in world axes, then
  per corner c: E_k, dE_k/dsteer, dE_k/dincl, the knuckle rotation K (chassis axes) and its inertia in
  world axes.
* ``vecs`` (VECS, 3): R g (sprung centre of mass from base_link, world), then per corner the wheel centre
  from base_link R cbar, its travel derivative R dcbar/ds, the knuckle rate per unit travel R E_k da/ds,
  and the wheel centre C (world).
* ``ch`` (4, 7, 6): the fitted kinematic channels (:mod:`.kinematic_fit`) per corner.
* ``jac`` (2, 4, 3, 8): centre-velocity and angular-velocity Jacobians J_C, J_W of the unsprung bodies on
  the local columns [x y z roll pitch yaw s_c a_c].

``body`` (BODY_SIZE,) holds the constant parameters at the offsets below; ``inertia`` (8, 3, 3) the four
knuckle inertias (body axes at the static pose) and the four static knuckle rotations.  ``inputs``
(INPUT_SIZE,): rack travel (m), drive torques (4, N m), brake torques (4, N m), mu (4), tire time step (s).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..mbs.small_linalg import add3, cross3, dot, lu_factor, lu_solve, mm_into, mmt_into, mtv3, mv3, mv3_sum, mv_into, scale3, sub3
from .kinematic_fit import spline_channels_into
from .tire import ROLLING_OMEGA_EPS_RAD_S, TireOutput, tmeasy_into
from .wheel_loads import GEOMETRY_WIDTH, contact_into, wheel_loads_into

# mats
M_R, M_EB, M_DEB_DR, M_DEB_DP, M_RE, M_IW = 0, 1, 2, 3, 4, 5
M_EK, M_DEK_DST, M_DEK_DIN, M_K, M_IK = 6, 10, 14, 18, 22
MATS = 26
# vecs
V_RG, V_RC, V_RC1, V_RW1, V_C = 0, 1, 5, 9, 13
VECS = 17
# body
B_SPRUNG_M, B_SPRUNG_COM, B_SPRUNG_I, B_UNSPRUNG_M, B_SPIN_I = 0, 1, 4, 13, 17
B_SPRING_K, B_SPRING_C, B_SPRING_L0, B_SPRING_F0 = 21, 25, 29, 33
B_ARB, B_AERO_CP, B_AERO_COEF, B_R0, B_BRAKE_EPS, B_GRAVITY_Z, B_AERO_DOWN = 37, 39, 42, 43, 47, 51, 52
# gravity's east and north components (m/s^2): the road's slope under the car, on the model's level road (an observer's
# estimate; 0 for the vehicle file)
B_GRAVITY_X, B_GRAVITY_Y = 53, 54
BODY_SIZE = 55
# inputs
IN_RACK, IN_DRIVE, IN_BRAKE, IN_MU, IN_TIRE_DT = 0, 1, 5, 9, 13
INPUT_SIZE = 14
# load terms (bit flags of force_stage)
INERTIA, GRAVITY, SUSPENSION, AERO, TIRES = 1, 2, 4, 8, 16
ALL_LOADS = INERTIA | GRAVITY | SUSPENSION | AERO | TIRES
TIRE_OUTPUTS = len(TireOutput._fields)


@njit(cache=True)
def euler_rotation(roll, pitch, yaw):
    """R = Rz(yaw) Ry(pitch) Rx(roll)."""
    R = np.empty((3, 3))
    euler_rotation_into(roll, pitch, yaw, R)
    return R


@njit(cache=True)
def euler_rotation_into(roll, pitch, yaw, R):
    """:func:`euler_rotation` written into R (3, 3)."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    R[0, 0], R[0, 1], R[0, 2] = cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr
    R[1, 0], R[1, 1], R[1, 2] = sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr
    R[2, 0], R[2, 1], R[2, 2] = -sp, cp * sr, cp * cr


@njit(cache=True)
def body_rate(roll, pitch):
    """E_b with the body angular velocity w_b = E_b (roll, pitch, yaw)_dot, and dE_b/droll, dE_b/dpitch."""
    E, dE_dr, dE_dp = np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3))
    body_rate_into(roll, pitch, E, dE_dr, dE_dp)
    return E, dE_dr, dE_dp


@njit(cache=True)
def body_rate_into(roll, pitch, E, dE_dr, dE_dp):
    """:func:`body_rate` written into E, dE_dr, dE_dp (3, 3)."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    E[0, 0], E[0, 1], E[0, 2] = 1.0, 0.0, -sp
    E[1, 0], E[1, 1], E[1, 2] = 0.0, cr, sr * cp
    E[2, 0], E[2, 1], E[2, 2] = 0.0, -sr, cr * cp
    dE_dr[0, 0], dE_dr[0, 1], dE_dr[0, 2] = 0.0, 0.0, 0.0
    dE_dr[1, 0], dE_dr[1, 1], dE_dr[1, 2] = 0.0, -sr, cr * cp
    dE_dr[2, 0], dE_dr[2, 1], dE_dr[2, 2] = 0.0, -cr, -sr * cp
    dE_dp[0, 0], dE_dp[0, 1], dE_dp[0, 2] = 0.0, 0.0, -cp
    dE_dp[1, 0], dE_dp[1, 1], dE_dp[1, 2] = 0.0, 0.0, -sr * sp
    dE_dp[2, 0], dE_dp[2, 1], dE_dp[2, 2] = 0.0, 0.0, -cr * sp


@njit(cache=True)
def _knuckle_frames(steer, incl, dive, mats, c):
    """E_k (w_rel = E_k (steer, incl, dive)_dot, chassis axes), its steer and inclination derivatives,
    and K = Rz(steer) Rx(incl) Ry(dive) (:func:`.kinematic_fit.knuckle_rotation_kernel`, in closed form)."""
    cs, ss, ci, si = math.cos(steer), math.sin(steer), math.cos(incl), math.sin(incl)
    cd, sd = math.cos(dive), math.sin(dive)
    E, dst, din, K = mats[M_EK + c], mats[M_DEK_DST + c], mats[M_DEK_DIN + c], mats[M_K + c]
    E[0, 0], E[0, 1], E[0, 2] = 0.0, cs, -ss * ci
    E[1, 0], E[1, 1], E[1, 2] = 0.0, ss, cs * ci
    E[2, 0], E[2, 1], E[2, 2] = 1.0, 0.0, si
    dst[0, 0], dst[0, 1], dst[0, 2] = 0.0, -ss, -cs * ci
    dst[1, 0], dst[1, 1], dst[1, 2] = 0.0, cs, -ss * ci
    dst[2, 0], dst[2, 1], dst[2, 2] = 0.0, 0.0, 0.0
    din[0, 0], din[0, 1], din[0, 2] = 0.0, 0.0, ss * si
    din[1, 0], din[1, 1], din[1, 2] = 0.0, 0.0, -cs * si
    din[2, 0], din[2, 1], din[2, 2] = 0.0, 0.0, ci
    # Rz Rx = [[cs, -ss ci, ss si], [ss, cs ci, -cs si], [0, si, ci]], times Ry(dive)
    a0, a1, a2 = cs, -ss * ci, ss * si
    K[0, 0], K[0, 1], K[0, 2] = a0 * cd + a2 * -sd, a1, a0 * sd + a2 * cd
    a0, a1, a2 = ss, cs * ci, -cs * si
    K[1, 0], K[1, 1], K[1, 2] = a0 * cd + a2 * -sd, a1, a0 * sd + a2 * cd
    a0, a1, a2 = 0.0, si, ci
    K[2, 0], K[2, 1], K[2, 2] = a0 * cd + a2 * -sd, a1, a0 * sd + a2 * cd


@njit(cache=True)
def _minus_skew_times(r, A, out, col):
    """out[:, col + j] = -(r x A[:, j]) for the three columns of A (3, 3), i.e. -[r]x A."""
    for j in range(3):
        e0, e1, e2 = A[0, j], A[1, j], A[2, j]
        out[0, col + j] = -(r[1] * e2 - r[2] * e1)
        out[1, col + j] = -(r[2] * e0 - r[0] * e2)
        out[2, col + j] = -(r[0] * e1 - r[1] * e0)


@njit(cache=True)
def position_stage(q, rack, coef, bu, br, offsets, body, inertia, mats, vecs, ch, jac, M):
    """Kinematics at q and the mass matrix M (14, 14), overwritten.

    coef, bu, br: the four corners' spline tables stacked (padded: ``stack_corner_splines``); offsets
    (4, 3): static offset of the travel (m), static dive (rad), 1 if steered.  Products go into the work
    arrays (few allocations: this runs a few times per model step)."""
    R, RE, EB = mats[M_R], mats[M_RE], mats[M_EB]
    euler_rotation_into(q[3], q[4], q[5], R)
    body_rate_into(q[3], q[4], EB, mats[M_DEB_DR], mats[M_DEB_DP])
    mm_into(R, EB, RE)
    JC, JW = jac[0], jac[1]
    t33, Rk, t3 = np.empty((3, 3)), np.empty((3, 3)), np.empty(3)
    t38, block = np.empty((3, 8)), np.empty((8, 8))
    M[:, :] = 0.0
    for c in range(4):
        nu, nr = int(offsets[c, 3]), int(offsets[c, 4])
        r = rack if offsets[c, 2] > 0.0 else 0.0
        spline_channels_into(coef[c, : nu - 1, : nr - 1], bu[c, :nu], br[c, :nr], q[6 + c] + offsets[c, 0], r, ch[c])
        ch[c, 5, 0] -= offsets[c, 1]
        _knuckle_frames(ch[c, 3, 0], ch[c, 4, 0], ch[c, 5, 0], mats, c)
        rc, rc1, rw1 = vecs[V_RC + c], vecs[V_RC1 + c], vecs[V_RW1 + c]
        mv_into(R, ch[c, 0:3, 0], rc)
        mv_into(R, ch[c, 0:3, 1], rc1)
        mv_into(mats[M_EK + c], ch[c, 3:6, 1], t3)
        mv_into(R, t3, rw1)
        JCc, JWc = JC[c], JW[c]
        JCc[:, :] = 0.0
        JWc[:, :] = 0.0
        for a in range(3):
            vecs[V_C + c, a] = q[a] + rc[a]
            JCc[a, a] = 1.0
            JCc[a, 6] = rc1[a]
            JWc[a, 6] = rw1[a]
            for j in range(3):
                JWc[a, 3 + j] = RE[a, j]
        _minus_skew_times(rc, RE, JCc, 3)
        # knuckle inertia in world axes: rotation from the static pose R K Ks^T
        mm_into(R, mats[M_K + c], t33)
        mmt_into(t33, inertia[4 + c], Rk)
        mm_into(Rk, inertia[c], t33)
        Ik = mats[M_IK + c]
        mmt_into(t33, Rk, Ik)
        mm_into(Ik, JWc, t38)
        m = body[B_UNSPRUNG_M + c]
        for i in range(8):
            for j in range(8):
                block[i, j] = m * (JCc[0, i] * JCc[0, j] + JCc[1, i] * JCc[1, j] + JCc[2, i] * JCc[2, j]) + (
                    JWc[0, i] * t38[0, j] + JWc[1, i] * t38[1, j] + JWc[2, i] * t38[2, j])
        _scatter(M, block, c)
        M[10 + c, 10 + c] += body[B_SPIN_I + c]
    # sprung body
    rg = vecs[V_RG]
    mv_into(R, body[B_SPRUNG_COM : B_SPRUNG_COM + 3], rg)
    Iw = mats[M_IW]
    mm_into(R, body[B_SPRUNG_I : B_SPRUNG_I + 9].reshape(3, 3), t33)
    mmt_into(t33, R, Iw)
    Jv = np.zeros((3, 6))
    for a in range(3):
        Jv[a, a] = 1.0
    _minus_skew_times(rg, RE, Jv, 3)
    m = body[B_SPRUNG_M]
    for i in range(6):
        for j in range(6):
            M[i, j] += m * (Jv[0, i] * Jv[0, j] + Jv[1, i] * Jv[1, j] + Jv[2, i] * Jv[2, j])
    mm_into(Iw, RE, t33)
    for i in range(3):
        for j in range(3):
            M[3 + i, 3 + j] += RE[0, i] * t33[0, j] + RE[1, i] * t33[1, j] + RE[2, i] * t33[2, j]


@njit(cache=True)
def _scatter(A, block, c):
    """A[cols, cols] += block for the local columns [0..5, 6 + c, 10 + c] of corner c."""
    for i in range(8):
        ri = i if i < 6 else (6 + c if i == 6 else 10 + c)
        for j in range(8):
            cj = j if j < 6 else (6 + c if j == 6 else 10 + c)
            A[ri, cj] += block[i, j]


@njit(cache=True)
def force_stage(q, qd, inputs, xi0, road_height, road_normal, body, tire_rows, mats, vecs, ch, jac, terms, tangent,
                Q, K, C, tire_out, geo):
    """ADD the generalised forces at (q, qd) to Q and, with ``tangent``, their stiffness K = -dQ/dq and
    damping C = -dQ/dqd (dominant terms: springs, bars, tires, brakes) to K and C.  ``terms``: bit set of
    INERTIA, GRAVITY, SUSPENSION, AERO, TIRES.  Writes the tire output (20, 4) and the contact rows."""
    R, RE = mats[M_R], mats[M_RE]
    JC, JW = jac[0], jac[1]
    eta_d = (qd[3], qd[4], qd[5])
    omega = mv3(RE, eta_d)
    alpha0 = mv3(R, mv3_sum(mats[M_DEB_DR], qd[3], mats[M_DEB_DP], qd[4], eta_d))
    g = (body[B_GRAVITY_X], body[B_GRAVITY_Y], body[B_GRAVITY_Z]) if terms & GRAVITY else (0.0, 0.0, 0.0)
    inertia_on = 1.0 if terms & INERTIA else 0.0
    # sprung body: gravity and velocity terms (3-vectors as tuples: no allocation)
    rg = vecs[V_RG]
    Iw = mats[M_IW]
    a0 = scale3(inertia_on, add3(cross3(alpha0, rg), cross3(omega, cross3(omega, rg))))
    f = scale3(body[B_SPRUNG_M], sub3(g, a0))
    tau = mtv3(RE, sub3(cross3(rg, f), scale3(inertia_on, add3(mv3(Iw, alpha0), cross3(omega, mv3(Iw, omega))))))
    for a in range(3):
        Q[a] += f[a]
        Q[3 + a] += tau[a]
    local = np.empty(8)
    local[0:6] = qd[0:6]
    Qw = np.zeros((4, 8))
    Kw = np.zeros((4, 8, 8))
    Cw = np.zeros((4, 8, 8))
    Cd = np.empty((4, 3))
    axle = np.empty((4, 3))
    for c in range(4):
        sd = qd[6 + c]
        local[6], local[7] = sd, qd[10 + c]
        JCc, JWc = JC[c], JW[c]
        for a in range(3):
            acc = 0.0
            for j in range(8):
                acc += JCc[a, j] * local[j]
            Cd[c, a] = acc
        Kc = mats[M_K + c]
        axle[c] = mv3(R, (Kc[0, 1], Kc[1, 1], Kc[2, 1]))
        d1a, d2a = ch[c, 3:6, 1], ch[c, 3:6, 3]
        rw1, rc, rc1 = vecs[V_RW1 + c], vecs[V_RC + c], vecs[V_RC1 + c]
        # accelerations at zero coordinate accelerations (a0, alpha0) of the unsprung body
        wk = add3(omega, scale3(sd, rw1))
        rel_acc = scale3(sd, add3(mv3_sum(mats[M_DEK_DST + c], d1a[0] * sd, mats[M_DEK_DIN + c], d1a[1] * sd, d1a), scale3(sd, mv3(mats[M_EK + c], d2a))))
        alpha0_k = add3(add3(alpha0, cross3(omega, scale3(sd, rw1))), mv3(R, rel_acc))
        a0_c = add3(add3(add3(cross3(alpha0, rc), cross3(omega, cross3(omega, rc))), scale3(2.0, cross3(omega, scale3(sd, rc1)))),
                    scale3(sd * sd, mv3(R, ch[c, 0:3, 3])))
        Ik = mats[M_IK + c]
        lin = scale3(body[B_UNSPRUNG_M + c], sub3(g, scale3(inertia_on, a0_c)))
        ang = scale3(-inertia_on, add3(mv3(Ik, alpha0_k), cross3(wk, mv3(Ik, wk))))
        for j in range(8):
            Qw[c, j] += ((JCc[0, j] * lin[0] + JCc[1, j] * lin[1]) + JCc[2, j] * lin[2]) + ((JWc[0, j] * ang[0] + JWc[1, j] * ang[1]) + JWc[2, j] * ang[2])
        if terms & SUSPENSION:  # spring-damper along its fitted length
            dl, d2l = ch[c, 6, 1], ch[c, 6, 3]
            fs = body[B_SPRING_K + c] * (ch[c, 6, 0] - body[B_SPRING_L0 + c]) + body[B_SPRING_C + c] * dl * sd + body[B_SPRING_F0 + c]
            Qw[c, 6] -= fs * dl
            Kw[c, 6, 6] += body[B_SPRING_K + c] * dl * dl + fs * d2l
            Cw[c, 6, 6] += body[B_SPRING_C + c] * dl * dl
    if terms & SUSPENSION:
        for axle_index in range(2):
            a, b = 6 + 2 * axle_index, 7 + 2 * axle_index
            kb = body[B_ARB + axle_index]
            Q[a] -= kb * (q[a] - q[b])
            Q[b] += kb * (q[a] - q[b])
            if tangent:
                K[a, a] += kb
                K[b, b] += kb
                K[a, b] -= kb
                K[b, a] -= kb
    if terms & AERO and (body[B_AERO_COEF] > 0.0 or body[B_AERO_DOWN] > 0.0):
        rcp = mv3(R, body[B_AERO_CP : B_AERO_CP + 3])
        v = add3(qd[0:3], cross3(omega, rcp))
        ex = (R[0, 0], R[1, 0], R[2, 0])
        vx = (ex[0] * v[0] + ex[1] * v[1]) + ex[2] * v[2]
        # drag along the chassis x axis, downforce along its -z axis (1/2 rho CzA v_x^2), at the centre of pressure
        Fa = add3(scale3(-body[B_AERO_COEF] * abs(vx) * vx, ex), scale3(-body[B_AERO_DOWN] * vx * vx, (R[0, 2], R[1, 2], R[2, 2])))
        tau = mtv3(RE, cross3(rcp, Fa))
        for a in range(3):
            Q[a] += Fa[a]
            Q[3 + a] += tau[a]
    if terms & TIRES:
        contact_into(vecs[V_C : V_C + 4], Cd, axle, body[B_R0 : B_R0 + 4], road_height, road_normal, geo)
        JP = np.empty((4, 3, 8))
        vx, vy = np.empty(4), np.empty(4)
        for c in range(4):
            # hub point at P: J_P = J_C - [P - C]x J_W
            JCc, JWc, JPc = JC[c], JW[c], JP[c]
            d = sub3(geo[c, 16:19], vecs[V_C + c])
            for j in range(8):
                w0, w1, w2 = JWc[0, j], JWc[1, j], JWc[2, j]
                JPc[0, j] = JCc[0, j] - ((-d[2]) * w1 + d[1] * w2)
                JPc[1, j] = JCc[1, j] - (d[2] * w0 + (-d[0]) * w2)
                JPc[2, j] = JCc[2, j] - ((-d[1]) * w0 + d[0] * w1)
            local[6], local[7] = qd[6 + c], qd[10 + c]
            v0 = v1 = v2 = 0.0
            for j in range(8):
                v0 += JPc[0, j] * local[j]
                v1 += JPc[1, j] * local[j]
                v2 += JPc[2, j] * local[j]
            vx[c] = (geo[c, 0] * v0 + geo[c, 1] * v1) + geo[c, 2] * v2
            vy[c] = (geo[c, 3] * v0 + geo[c, 4] * v1) + geo[c, 5] * v2
        drive, brake, mu = inputs[IN_DRIVE : IN_DRIVE + 4], inputs[IN_BRAKE : IN_BRAKE + 4], inputs[IN_MU : IN_MU + 4]
        spin = qd[10:14].copy()
        tmeasy_into(tire_rows, mu, geo[:, 14].copy(), geo[:, 15].copy(), vx, vy, spin, xi0[0], xi0[1], inputs[IN_TIRE_DT], ROLLING_OMEGA_EPS_RAD_S, tire_out)
        wheel_loads_into(tire_out, geo, JP, JC, spin, drive, brake, body[B_BRAKE_EPS : B_BRAKE_EPS + 4], tangent, Qw, Cw, Kw)
        for c in range(4):  # drive reaction: +T w on the knuckle, -T w on the chassis
            Tw = scale3(drive[c], axle[c])
            JWc = JW[c]
            for j in range(8):
                Qw[c, j] += (JWc[0, j] * Tw[0] + JWc[1, j] * Tw[1]) + JWc[2, j] * Tw[2]
            tau = mtv3(RE, Tw)
            for a in range(3):
                Q[3 + a] -= tau[a]
    for c in range(4):
        Q[0:6] += Qw[c, 0:6]
        Q[6 + c] += Qw[c, 6]
        Q[10 + c] += Qw[c, 7]
        if tangent:
            _scatter(K, Kw[c], c)
            _scatter(C, Cw[c], c)


@njit(cache=True)
def flat_road_into(plane, vecs, road_height, road_normal):
    """Road below the wheel centres for the plane z = h + g_x x + g_y y: plane = (h, g_x, g_y, unit normal)."""
    for c in range(4):
        road_height[c] = vecs[V_C + c, 0] * plane[1] + vecs[V_C + c, 1] * plane[2] + plane[0]
        road_normal[c] = plane[3:6]


@njit(cache=True)
def trapezoidal_step(q0, qd0, qdd0, dt, tol, max_iter, accept_unconverged, rack, coef, bu, br, offsets, body, inertia, mats, vecs, ch, jac, M,
                     plane, inputs, xi0, road_height, road_normal, tire_rows, terms, force_correction, Q, K, C, tire_out, geo, W, piv):
    """One ALI3-P step of the unconstrained model on a flat road (``plane``, :func:`flat_road_into`): the
    trapezoidal rule with Newton-Raphson on M(q) qdd = Q(q, qd), the same iteration as
    :meth:`state_observer.mbs.integrators.ALI3P.step` without constraints (tangent W = M(q) + dt/2 C +
    dt^2/4 K with C, K from the first iterate, same convergence test), then qd and qdd from W.
    Q, K, C, W: work arrays (Q includes ``force_correction``; K and C are left at the first iterate, as
    the integrator leaves them).
    Returns (q, qd, qdd, iterations, converged, |dq| of the last iteration, |qd|^2 + |qdd|^2); qd and qdd
    are the old ones when the step failed (not converged, unless ``accept_unconverged`` and finite)."""
    n = q0.shape[0]
    c1, c2, h = 2.0 / dt, 4.0 / (dt * dt), 0.25 * dt * dt
    qd_hat = -(c1 * q0 + qd0)
    qdd_hat = -(c2 * q0 + (4.0 / dt) * qd0 + qdd0)
    h_qdd_hat = h * qdd_hat
    q = q0 + dt * qd0 + (0.5 * dt * dt) * qdd0
    no_tangent = np.zeros((1, 1))
    converged = False
    it = 0
    norm_dq = np.inf
    f = np.empty(n)
    while it < max_iter:
        it += 1
        first = it == 1
        position_stage(q, rack, coef, bu, br, offsets, body, inertia, mats, vecs, ch, jac, M)
        flat_road_into(plane, vecs, road_height, road_normal)
        Q[:] = 0.0
        if first:
            K[:, :] = 0.0
            C[:, :] = 0.0
        force_stage(q, c1 * q + qd_hat, inputs, xi0, road_height, road_normal, body, tire_rows, mats, vecs, ch, jac, terms, first,
                    Q, K if first else no_tangent, C if first else no_tangent, tire_out, geo)
        # residual h (M qdd - Q) = M (q + h qdd_hat) - h Q, tangent W = M + dt/2 C + dt^2/4 K
        for i in range(n):
            Q[i] += force_correction[i]
            s = 0.0
            for j in range(n):
                s += M[i, j] * (q[j] + h_qdd_hat[j])
                W[i, j] = M[i, j] + ((0.5 * dt) * C[i, j] + h * K[i, j])
            f[i] = s - h * Q[i]
        if lu_factor(W, piv):
            dq = lu_solve(W, piv, f)
        else:
            dq = np.full(n, np.nan)
        q = q - dq
        previous, norm_dq = norm_dq, math.sqrt(dot(dq, dq))
        rate = norm_dq / previous if it > 1 else 1.0
        left = norm_dq * rate / (1.0 - rate) if rate < 0.5 else norm_dq
        if left <= tol or (rate > 0.9 and norm_dq <= 10.0 * tol * max(1.0, np.abs(q).max())):
            converged = True
            break
        if not math.isfinite(norm_dq):
            break
    if not (converged or (accept_unconverged and math.isfinite(norm_dq))):
        return q, qd0, qdd0, it, False, norm_dq, 0.0  # failed: the caller keeps its state
    qd = lu_solve(W, piv, _tangent_times(M, C, K, dt, c1 * q + qd_hat))
    qdd = lu_solve(W, piv, _tangent_times(M, C, K, dt, c2 * q + qdd_hat))
    return q, qd, qdd, it, converged, norm_dq, dot(qd, qd) + dot(qdd, qdd)


@njit(cache=True)
def _tangent_times(M, C, K, dt, x):
    """(M + dt/2 C + dt^2/4 K) x."""
    n = x.shape[0]
    out = np.empty(n)
    h = 0.25 * dt * dt
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += (M[i, j] + ((0.5 * dt) * C[i, j] + h * K[i, j])) * x[j]
        out[i] = s
    return out


# columns of a parameter set of force_residuals: vehicle mass (kg), friction coefficient, and scale factors of the
# cornering stiffness of the front and rear tires and of the longitudinal slip stiffness of all four
P_MASS, P_MU, P_CORNERING_FRONT, P_CORNERING_REAR, P_LONGITUDINAL = 0, 1, 2, 3, 4
PARAMETERS = 5
_ROW_KX, _ROW_KY = 4, 5  # longitudinal slip and cornering stiffness columns of a tire parameter row


@njit(cache=True)
def scaled_tire_rows(nominal_rows, cornering_front, cornering_rear, longitudinal, out):
    """out = the four wheels' tire rows (fl fr rl rr) with k_y scaled per axle and k_x scaled on every wheel."""
    last = nominal_rows.shape[0] - 1
    for c in range(4):
        out[c] = nominal_rows[min(c, last)]
        out[c, _ROW_KY] *= cornering_front if c < 2 else cornering_rear
        out[c, _ROW_KX] *= longitudinal


@njit(cache=True)
def steady_tire_forces(tire_sets, q, qd, rack, coef, bu, br, offsets, body, inertia, inputs, xi0, road_height, road_normal, terms):
    """Steady-state (carcass relaxed) longitudinal and lateral tire forces (k, 2, 4), N, at (q, qd) for k sets of the four
    wheels' tire rows ``tire_sets`` (k, 4, columns); own work arrays."""
    mats, vecs, ch, jac, M = np.zeros((MATS, 3, 3)), np.zeros((VECS, 3)), np.zeros((4, 7, 6)), np.zeros((2, 4, 3, 8)), np.zeros((14, 14))
    tire_out, geo = np.zeros((TIRE_OUTPUTS, 4)), np.zeros((4, GEOMETRY_WIDTH))
    no_tangent = np.zeros((1, 1))
    inp = inputs.copy()
    inp[IN_TIRE_DT] = 1.0
    position_stage(q, rack, coef, bu, br, offsets, body, inertia, mats, vecs, ch, jac, M)
    out = np.empty((tire_sets.shape[0], 2, 4))
    for k in range(tire_sets.shape[0]):
        Q = np.zeros(14)
        force_stage(q, qd, inp, xi0, road_height, road_normal, body, tire_sets[k], mats, vecs, ch, jac, terms, False, Q, no_tangent, no_tangent, tire_out, geo)
        out[k, 0] = tire_out[0]
        out[k, 1] = tire_out[1]
    return out


@njit(cache=True)
def force_residuals(thetas, rows, total_mass, q, qd, qdd, rack, coef, bu, br, offsets, body, inertia, inputs, xi0, road_height, road_normal,
                    nominal_rows, terms):
    """r_k = (M(q; theta_k) qdd - Q(q, qd; theta_k))[rows] for parameter sets theta_k (k, PARAMETERS): vehicle mass (kg;
    the sprung mass changes, inertia scaled with it, as ``ReducedVehicle.set_total_mass`` from ``total_mass``), friction
    coefficient on all wheels, and the tire stiffness scales of :func:`scaled_tire_rows` on ``nominal_rows``.  No force
    correction; the road below the wheel centres is given (it depends on q only).  Own work arrays: nothing of the
    model's is changed.  Returns (k, len(rows))."""
    mats, vecs, ch, jac, M = np.zeros((MATS, 3, 3)), np.zeros((VECS, 3)), np.zeros((4, 7, 6)), np.zeros((2, 4, 3, 8)), np.zeros((14, 14))
    tire_out, geo = np.zeros((TIRE_OUTPUTS, 4)), np.zeros((4, GEOMETRY_WIDTH))
    tire_rows = np.empty((4, nominal_rows.shape[1]))
    no_tangent = np.zeros((1, 1))
    out = np.empty((thetas.shape[0], rows.shape[0]))
    for k in range(thetas.shape[0]):
        b = body.copy()
        sprung = body[B_SPRUNG_M] + (thetas[k, P_MASS] - total_mass)
        b[B_SPRUNG_I : B_SPRUNG_I + 9] = body[B_SPRUNG_I : B_SPRUNG_I + 9] * (sprung / body[B_SPRUNG_M])
        b[B_SPRUNG_M] = sprung
        inp = inputs.copy()
        inp[IN_MU : IN_MU + 4] = thetas[k, P_MU]
        scaled_tire_rows(nominal_rows, thetas[k, P_CORNERING_FRONT], thetas[k, P_CORNERING_REAR], thetas[k, P_LONGITUDINAL], tire_rows)
        position_stage(q, rack, coef, bu, br, offsets, b, inertia, mats, vecs, ch, jac, M)
        Q = np.zeros(14)
        force_stage(q, qd, inp, xi0, road_height, road_normal, b, tire_rows, mats, vecs, ch, jac, terms, False, Q, no_tangent, no_tangent, tire_out, geo)
        for r in range(rows.shape[0]):
            i = rows[r]
            acc = 0.0
            for j in range(14):
                acc += M[i, j] * qdd[j]
            out[k, r] = acc - Q[i]
    return out


@njit(cache=True)
def residual_derivatives(theta, total_mass, q, qd, qdd, rack, coef, bu, br, offsets, body, inertia, inputs, xi0, road_height, road_normal,
                         nominal_rows, terms, position_columns, velocity_columns, step, dq, dqd):
    """Central differences of :func:`force_residuals` (one parameter set ``theta`` (1, PARAMETERS), all 14 rows) at
    (q, qd): dr/dq on ``position_columns`` into ``dq`` and dr/dqd on ``velocity_columns`` into ``dqd`` ((14, k) each),
    steps of +-``step`` (:meth:`ReducedVehicle.residual_derivatives`)."""
    rows = np.arange(14)
    n_positions = position_columns.shape[0]
    for k in range(n_positions + velocity_columns.shape[0]):
        on_position = k < n_positions
        base = q if on_position else qd
        j = position_columns[k] if on_position else velocity_columns[k - n_positions]
        r = np.empty((2, 14))
        for side in range(2):
            x = base.copy()
            x[j] += step if side == 0 else -step
            r[side] = force_residuals(theta, rows, total_mass, x if on_position else q, qd if on_position else x, qdd, rack, coef, bu, br, offsets,
                                      body, inertia, inputs, xi0, road_height, road_normal, nominal_rows, terms)[0]
        column = (r[0] - r[1]) / (2.0 * step)
        if on_position:
            dq[:, k] = column
        else:
            dqd[:, k - n_positions] = column

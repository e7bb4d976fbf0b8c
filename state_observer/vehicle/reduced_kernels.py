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

from ..mbs.small_linalg import cross, dot, lu_factor, lu_solve, mm, mtm, mtv, mv, skew
from .kinematic_fit import knuckle_rotation_kernel, spline_channels_into
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
B_ARB, B_AERO_CP, B_AERO_COEF, B_R0, B_BRAKE_EPS, B_GRAVITY_Z = 37, 39, 42, 43, 47, 51
BODY_SIZE = 52
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
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    return np.array((
        (cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr),
        (sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr),
        (-sp, cp * sr, cp * cr),
    ))


@njit(cache=True)
def body_rate(roll, pitch):
    """E_b with the body angular velocity w_b = E_b (roll, pitch, yaw)_dot, and dE_b/droll, dE_b/dpitch."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    E = np.array(((1.0, 0.0, -sp), (0.0, cr, sr * cp), (0.0, -sr, cr * cp)))
    dE_dr = np.array(((0.0, 0.0, 0.0), (0.0, -sr, cr * cp), (0.0, -cr, -sr * cp)))
    dE_dp = np.array(((0.0, 0.0, -cp), (0.0, 0.0, -sr * sp), (0.0, 0.0, -cr * sp)))
    return E, dE_dr, dE_dp


@njit(cache=True)
def _knuckle_frames(steer, incl, dive, mats, c):
    """E_k (w_rel = E_k (steer, incl, dive)_dot, chassis axes), its steer and inclination derivatives,
    and K = Rz(steer) Rx(incl) Ry(dive)."""
    cs, ss, ci, si = math.cos(steer), math.sin(steer), math.cos(incl), math.sin(incl)
    mats[M_EK + c] = np.array(((0.0, cs, -ss * ci), (0.0, ss, cs * ci), (1.0, 0.0, si)))
    mats[M_DEK_DST + c] = np.array(((0.0, -ss, -cs * ci), (0.0, cs, -ss * ci), (0.0, 0.0, 0.0)))
    mats[M_DEK_DIN + c] = np.array(((0.0, 0.0, ss * si), (0.0, 0.0, -cs * si), (0.0, 0.0, ci)))
    mats[M_K + c] = knuckle_rotation_kernel(steer, incl, dive)


@njit(cache=True)
def position_stage(q, rack, coef, bu, br, offsets, body, inertia, mats, vecs, ch, jac, M):
    """Kinematics at q and the mass matrix M (14, 14), overwritten.

    coef, bu, br: the four corners' spline tables stacked (padded: ``stack_corner_splines``); offsets
    (4, 3): static offset of the travel (m), static dive (rad), 1 if steered."""
    R = euler_rotation(q[3], q[4], q[5])
    mats[M_R] = R
    mats[M_EB], mats[M_DEB_DR], mats[M_DEB_DP] = body_rate(q[3], q[4])
    RE = mm(R, mats[M_EB])
    mats[M_RE] = RE
    JC, JW = jac[0], jac[1]
    M[:, :] = 0.0
    for c in range(4):
        nu, nr = int(offsets[c, 3]), int(offsets[c, 4])
        r = rack if offsets[c, 2] > 0.0 else 0.0
        spline_channels_into(coef[c, : nu - 1, : nr - 1], bu[c, :nu], br[c, :nr], q[6 + c] + offsets[c, 0], r, ch[c])
        ch[c, 5, 0] -= offsets[c, 1]
        _knuckle_frames(ch[c, 3, 0], ch[c, 4, 0], ch[c, 5, 0], mats, c)
        rc = mv(R, ch[c, 0:3, 0])
        vecs[V_RC + c] = rc
        vecs[V_RC1 + c] = mv(R, ch[c, 0:3, 1])
        rw1 = mv(R, mv(mats[M_EK + c], ch[c, 3:6, 1]))
        vecs[V_RW1 + c] = rw1
        vecs[V_C + c] = q[0:3] + rc
        JC[c] = 0.0
        JW[c] = 0.0
        for a in range(3):
            JC[c, a, a] = 1.0
        JC[c, :, 3:6] = -mm(skew(rc), RE)
        JC[c, :, 6] = vecs[V_RC1 + c]
        JW[c, :, 3:6] = RE
        JW[c, :, 6] = rw1
        # knuckle inertia in world axes: rotation from the static pose R K Ks^T
        Rk = mm(mm(R, mats[M_K + c]), inertia[4 + c].T)
        Ik = mm(mm(Rk, inertia[c]), Rk.T)
        mats[M_IK + c] = Ik
        block = body[B_UNSPRUNG_M + c] * mtm(JC[c], JC[c]) + mtm(JW[c], mm(Ik, JW[c]))
        _scatter(M, block, c)
        M[10 + c, 10 + c] += body[B_SPIN_I + c]
    # sprung body
    rg = mv(R, body[B_SPRUNG_COM : B_SPRUNG_COM + 3])
    vecs[V_RG] = rg
    Iw = mm(mm(R, body[B_SPRUNG_I : B_SPRUNG_I + 9].reshape(3, 3)), R.T)
    mats[M_IW] = Iw
    Jv = np.zeros((3, 6))
    for a in range(3):
        Jv[a, a] = 1.0
    Jv[:, 3:6] = -mm(skew(rg), RE)
    M[0:6, 0:6] += body[B_SPRUNG_M] * mtm(Jv, Jv)
    M[3:6, 3:6] += mtm(RE, mm(Iw, RE))


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
    eta_d = qd[3:6]
    omega = mv(RE, eta_d)
    alpha0 = mv(R, mv(mats[M_DEB_DR] * qd[3] + mats[M_DEB_DP] * qd[4], eta_d))
    g = np.array((0.0, 0.0, body[B_GRAVITY_Z] if terms & GRAVITY else 0.0))
    inertia_on = 1.0 if terms & INERTIA else 0.0
    # sprung body: gravity and velocity terms
    rg = vecs[V_RG]
    Iw = mats[M_IW]
    a0 = inertia_on * (cross(alpha0, rg) + cross(omega, cross(omega, rg)))
    f = body[B_SPRUNG_M] * (g - a0)
    Q[0:3] += f
    Q[3:6] += mtv(RE, cross(rg, f) - inertia_on * (mv(Iw, alpha0) + cross(omega, mv(Iw, omega))))
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
        Cd[c] = mv(JC[c], local)
        axle[c] = mv(R, mats[M_K + c][:, 1])
        d1a, d2a = ch[c, 3:6, 1], ch[c, 3:6, 3]
        rw1, rc, rc1 = vecs[V_RW1 + c], vecs[V_RC + c], vecs[V_RC1 + c]
        # accelerations at zero coordinate accelerations (a0, alpha0) of the unsprung body
        wk = omega + rw1 * sd
        ang_d = d1a * sd
        dEk_dt = mats[M_DEK_DST + c] * ang_d[0] + mats[M_DEK_DIN + c] * ang_d[1]
        rel_acc = (mv(dEk_dt, d1a) + mv(mats[M_EK + c], d2a) * sd) * sd
        alpha0_k = alpha0 + cross(omega, rw1 * sd) + mv(R, rel_acc)
        a0_c = cross(alpha0, rc) + cross(omega, cross(omega, rc)) + 2.0 * cross(omega, rc1 * sd) + mv(R, ch[c, 0:3, 3]) * (sd * sd)
        Ik = mats[M_IK + c]
        lin = body[B_UNSPRUNG_M + c] * (g - inertia_on * a0_c)
        ang = -inertia_on * (mv(Ik, alpha0_k) + cross(wk, mv(Ik, wk)))
        Qw[c] += mtv(JC[c], lin) + mtv(JW[c], ang)
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
    if terms & AERO and body[B_AERO_COEF] > 0.0:
        rcp = mv(R, body[B_AERO_CP : B_AERO_CP + 3])
        v = qd[0:3] + cross(omega, rcp)
        ex = R[:, 0]
        vx = dot(ex, v)
        Fa = -body[B_AERO_COEF] * abs(vx) * vx * ex
        Q[0:3] += Fa
        Q[3:6] += mtv(RE, cross(rcp, Fa))
    if terms & TIRES:
        contact_into(vecs[V_C : V_C + 4], Cd, axle, body[B_R0 : B_R0 + 4], road_height, road_normal, geo)
        JP = np.empty((4, 3, 8))
        vx, vy = np.empty(4), np.empty(4)
        for c in range(4):
            JP[c] = JC[c] - mm(skew(geo[c, 16:19] - vecs[V_C + c]), JW[c])  # hub point at P
            local[6], local[7] = qd[6 + c], qd[10 + c]
            vP = mv(JP[c], local)
            vx[c] = dot(geo[c, 0:3], vP)
            vy[c] = dot(geo[c, 3:6], vP)
        drive, brake, mu = inputs[IN_DRIVE : IN_DRIVE + 4], inputs[IN_BRAKE : IN_BRAKE + 4], inputs[IN_MU : IN_MU + 4]
        spin = qd[10:14].copy()
        tmeasy_into(tire_rows, mu, geo[:, 14].copy(), geo[:, 15].copy(), vx, vy, spin, xi0[0], xi0[1], inputs[IN_TIRE_DT], ROLLING_OMEGA_EPS_RAD_S, tire_out)
        wheel_loads_into(tire_out, geo, JP, JC, spin, drive, brake, body[B_BRAKE_EPS : B_BRAKE_EPS + 4], tangent, Qw, Cw, Kw)
        for c in range(4):  # drive reaction: +T w on the knuckle, -T w on the chassis
            Tw = drive[c] * axle[c]
            Qw[c] += mtv(JW[c], Tw)
            Q[3:6] -= mtv(RE, Tw)
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
    Returns (q, qd, qdd, iterations, converged, |dq| of the last iteration); qd and qdd are the old ones
    when the step failed (not converged, unless ``accept_unconverged`` and finite)."""
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
        return q, qd0, qdd0, it, False, norm_dq  # failed: the caller keeps its state
    qd = lu_solve(W, piv, _tangent_times(M, C, K, dt, c1 * q + qd_hat))
    qdd = lu_solve(W, piv, _tangent_times(M, C, K, dt, c2 * q + qdd_hat))
    return q, qd, qdd, it, converged, norm_dq


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


@njit(cache=True)
def force_residuals(thetas, rows, total_mass, q, qd, qdd, rack, coef, bu, br, offsets, body, inertia, inputs, xi0, road_height, road_normal,
                    tire_rows, terms):
    """r_k = (M(q; theta_k) qdd - Q(q, qd; theta_k))[rows] for parameter sets theta_k = (vehicle mass kg,
    friction coefficient) (k, 2): the mass changes the sprung mass (inertia scaled with it, as
    ``ReducedVehicle.set_total_mass`` from ``total_mass``), mu is set on all wheels.  No force correction;
    the road below the wheel centres is given (it depends on q only).  Own work arrays: nothing of the
    model's is changed.  Returns (k, len(rows))."""
    mats, vecs, ch, jac, M = np.zeros((MATS, 3, 3)), np.zeros((VECS, 3)), np.zeros((4, 7, 6)), np.zeros((2, 4, 3, 8)), np.zeros((14, 14))
    tire_out, geo = np.zeros((TIRE_OUTPUTS, 4)), np.zeros((4, GEOMETRY_WIDTH))
    no_tangent = np.zeros((1, 1))
    out = np.empty((thetas.shape[0], rows.shape[0]))
    for k in range(thetas.shape[0]):
        b = body.copy()
        sprung = body[B_SPRUNG_M] + (thetas[k, 0] - total_mass)
        b[B_SPRUNG_I : B_SPRUNG_I + 9] = body[B_SPRUNG_I : B_SPRUNG_I + 9] * (sprung / body[B_SPRUNG_M])
        b[B_SPRUNG_M] = sprung
        inp = inputs.copy()
        inp[IN_MU : IN_MU + 4] = thetas[k, 1]
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

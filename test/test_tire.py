"""TMeasy tire, linearised and Magic-Formula characteristics: characteristic, deflection ODE, derivatives,
edge cases."""
import dataclasses
import re
import timeit

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from state_observer.vehicle.tire import BRUSH, TMEASY, TMEASY_PEAK_RATIO, TireOutput, TireParameters, TireState, tire_forces

P = TireParameters(
    unloaded_radius_m=0.30,
    dynamic_radius_m=0.29,
    vertical_stiffness_n_per_m=2.0e5,
    vertical_damping_n_s_per_m=500.0,
    longitudinal_slip_stiffness=18.0,
    cornering_stiffness_per_rad=12.0,
    deflection_stiffness_x_n_per_m=1.5e5,
    deflection_stiffness_y_n_per_m=1.0e5,
    deflection_damping_x_n_s_per_m=500.0,
    deflection_damping_y_n_s_per_m=400.0,
    slip_velocity_regularisation_m_s=0.01,
    rolling_resistance_coefficient=0.017,
)
MU = 0.9
XI_Z = 0.015                      # 3000 N static load
FZ = P.vertical_stiffness_n_per_m * XI_Z
DT = 0.004
LONG_DT = 1.0e3                   # E = exp(-a dt) = 0: the returned force is the steady-state one
RD = P.dynamic_radius_m
KX, KY = P.longitudinal_slip_stiffness, P.cornering_stiffness_per_rad
# Magic-Formula family: F_z = 3000 N is below F_z0, so both load factors differ from 1
P_MF = dataclasses.replace(P, shape_factor=1.3, curvature_factor=0.3, nominal_load_n=4000.0,
                           load_sensitivity_stiffness=0.3, load_sensitivity_friction=0.1)
# ... and with both load factors clipped at 0.2 (F_z/F_z0 ~ 3)
P_MF_CLIPPED = dataclasses.replace(P, shape_factor=1.6, curvature_factor=-0.5, nominal_load_n=1000.0,
                                   load_sensitivity_stiffness=1.0, load_sensitivity_friction=0.5)
P_BRUSH = dataclasses.replace(P, shape_factor=BRUSH)
P_TMEASY = dataclasses.replace(P, shape_factor=TMEASY)
# every characteristic with load sensitivity (F_z = 3000 N below F_z0: both load factors differ from 1)
LOAD_SENSITIVE = dict(nominal_load_n=4000.0, load_sensitivity_stiffness=0.3, load_sensitivity_friction=0.1)
FAMILIES = {"linearised": P, "tmeasy": P_TMEASY, "brush": P_BRUSH, "magic_formula": P_MF, "magic_formula_clipped": P_MF_CLIPPED,
            "linearised_load": dataclasses.replace(P, **LOAD_SENSITIVE), "tmeasy_load": dataclasses.replace(P_TMEASY, **LOAD_SENSITIVE),
            "brush_load": dataclasses.replace(P_BRUSH, **LOAD_SENSITIVE)}


def call(p=P, mu=MU, xi_z=XI_Z, xi_z_rate=0.0, vx=10.0, vy=0.0, omega=10.0 / RD,
         xi_x=0.0, xi_y=0.0, dt=DT) -> TireOutput:
    """tire_forces on (N,) arrays built from scalars or arrays."""
    a = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float))
                              for v in (xi_z, xi_z_rate, vx, vy, omega, xi_x, xi_y)))
    with np.errstate(all="raise"):      # no division by zero, overflow or NaN anywhere
        out = tire_forces(p, mu, a[0].copy(), a[1].copy(), a[2].copy(), a[3].copy(), a[4].copy(),
                          TireState(a[5].copy(), a[6].copy()), dt)
    for name, value in out._asdict().items():
        assert np.all(np.isfinite(value)), name
    return out


def reference_ode(p, fz, mu, vx, vy, omega, direction):
    """(v* d + G, v* F^S, v* c) of the deflection ODE from the thesis-style formulas."""
    v_star = RD * abs(omega) + p.slip_velocity_regularisation_m_s
    sx, sy = (RD * omega - vx) / v_star, -vy / v_star
    sig_x, sig_y = KX * sx, KY * sy
    sig = np.hypot(sig_x, sig_y)
    f = fz * min(sig, mu)
    if direction == "x":
        f_ss = f * sig_x / sig if sig > 0 else 0.0
        c, d = p.deflection_stiffness_x_n_per_m, p.deflection_damping_x_n_s_per_m
        g = KX * fz if sig <= mu else KX * f / sig     # tangent (linear), secant (saturated)
    else:
        f_ss = f * sig_y / sig if sig > 0 else 0.0
        c, d = p.deflection_stiffness_y_n_per_m, p.deflection_damping_y_n_s_per_m
        g = KY * fz if sig <= mu else KY * f / sig
    return v_star * d + g, v_star * f_ss, v_star * c, c, d, f_ss


# ----- steady-state characteristic ---------------------------------------------------------
def test_free_rolling_gives_zero_force_forward_and_reversing():
    for v in (10.0, -5.0, 0.3):
        out = call(vx=v, omega=v / RD, dt=LONG_DT)
        assert abs(out.fx_n[0]) < 1e-9 and abs(out.fy_n[0]) < 1e-9
        assert out.slip_ratio[0] == 0.0
        assert out.fz_n[0] == pytest.approx(FZ)


def test_pure_longitudinal_slope_and_saturation():
    vx = 10.0
    s_target = np.array([-0.8, -0.2, -0.03, -1e-4, 1e-4, 0.01, 0.03, 0.2, 0.8])
    # s_x = (r Omega - vx)/(r |Omega| + v_n), solved for Omega > 0 (driving and braking)
    vn = P.slip_velocity_regularisation_m_s
    omega = (vx + s_target * vn) / (RD * (1.0 - s_target))
    out = call(vx=vx, omega=omega, dt=LONG_DT)
    np.testing.assert_allclose(out.slip_ratio, s_target, rtol=1e-10)
    np.testing.assert_allclose(out.fy_n, 0.0, atol=1e-12)
    expected = FZ * np.sign(s_target) * np.minimum(KX * np.abs(s_target), MU)
    np.testing.assert_allclose(out.fx_n, expected, rtol=1e-9)
    small = np.abs(s_target) < 1e-3
    np.testing.assert_allclose(out.fx_n[small] / s_target[small], KX * FZ, rtol=1e-9)
    assert np.all(np.abs(out.fx_n[np.abs(s_target) >= 0.2]) == pytest.approx(MU * FZ, rel=1e-12))


def test_pure_lateral_cornering_stiffness_and_iso_slip_angle():
    p = dataclasses.replace(P, slip_velocity_regularisation_m_s=1e-12)
    vx = 20.0
    alpha = np.array([-1e-4, 1e-4, 2e-3])
    out = call(p=p, vx=vx, vy=vx * np.tan(alpha), omega=vx / RD, dt=LONG_DT)
    np.testing.assert_allclose(out.slip_angle_rad, alpha, rtol=1e-12)
    # ISO 8855: positive slip angle (velocity to the left of the heading) -> force to the right
    np.testing.assert_allclose(out.fy_n / alpha, -KY * FZ, rtol=1e-5)
    np.testing.assert_allclose(out.fx_n, 0.0, atol=1e-9)
    big = call(p=p, vx=vx, vy=vx * np.tan(0.3), omega=vx / RD, dt=LONG_DT)
    assert big.fy_n[0] == pytest.approx(-MU * FZ, rel=1e-12)


def test_combined_slip_inside_friction_circle_and_along_normalised_slip():
    rng = np.random.default_rng(3)
    n = 400
    vx = rng.uniform(-20.0, 20.0, n)
    vy = rng.uniform(-3.0, 3.0, n)
    omega = vx / RD * rng.uniform(0.0, 2.0, n) + rng.normal(0.0, 1.0, n)
    mu = rng.uniform(0.2, 1.2, n)
    fz = rng.uniform(500.0, 8000.0, n)
    out = call(mu=mu, xi_z=fz / P.vertical_stiffness_n_per_m, vx=vx, vy=vy, omega=omega, dt=LONG_DT)
    np.testing.assert_allclose(out.fz_n, fz, rtol=1e-12)
    f = np.hypot(out.fx_n, out.fy_n)
    assert np.all(f <= mu * fz * (1.0 + 1e-12))
    v_star = RD * np.abs(omega) + P.slip_velocity_regularisation_m_s
    sig_x, sig_y = KX * (RD * omega - vx) / v_star, KY * (-vy) / v_star
    sig = np.hypot(sig_x, sig_y)
    np.testing.assert_allclose(f, fz * np.minimum(sig, mu), rtol=1e-9)
    # parallel to (sigma_x, sigma_y): zero cross product, positive dot product
    np.testing.assert_allclose((out.fx_n * sig_y - out.fy_n * sig_x) / (f * sig), 0.0, atol=1e-12)
    assert np.all(out.fx_n * sig_x + out.fy_n * sig_y > 0.0)
    assert np.any(sig > mu) and np.any(sig < mu)        # both regions were exercised


# ----- normal force -------------------------------------------------------------------------
def test_airborne_wheel_carries_nothing():
    # lifted wheel, spinning, sliding sideways, carcass still deflected from before
    out = call(xi_z=[-0.01, 0.0], xi_z_rate=[-1.0, 2.0], vx=10.0, vy=2.0, omega=50.0,
               xi_x=0.01, xi_y=-0.02)
    for name in ("fx_n", "fy_n", "fz_n", "rolling_torque_n_m", "dfx_dvx", "dfx_dvy", "dfx_domega",
                 "dfy_dvx", "dfy_dvy", "dfy_domega", "dfz_dxi", "dfz_dxidot", "drolling_torque_domega"):
        np.testing.assert_array_equal(getattr(out, name), 0.0, err_msg=name)
    # the free carcass relaxes as c xi + d dxi/dt = 0
    np.testing.assert_allclose(out.deflection_x_m, 0.01 * np.exp(-1.5e5 / 500.0 * DT), rtol=1e-12)
    np.testing.assert_allclose(out.deflection_y_m, -0.02 * np.exp(-1.0e5 / 400.0 * DT), rtol=1e-12)


def test_normal_force_never_pulls():
    rate = np.array([-100.0, -10.0, -6.0, -5.0, 0.0, 3.0])     # fast rebound: d_z rate < -k_z xi
    out = call(xi_z=0.015, xi_z_rate=rate)
    expected = np.maximum(P.vertical_stiffness_n_per_m * 0.015 + P.vertical_damping_n_s_per_m * rate, 0.0)
    np.testing.assert_array_equal(out.fz_n, expected)
    assert np.all(out.fz_n >= 0.0) and out.fz_n[0] == 0.0
    pulling = expected == 0.0
    assert np.all(out.fx_n[pulling] == 0.0) and np.all(out.fy_n[pulling] == 0.0)
    np.testing.assert_array_equal(out.dfz_dxi, np.where(pulling, 0.0, P.vertical_stiffness_n_per_m))


# ----- deflection dynamics --------------------------------------------------------------------
OPERATING_POINTS = {            # (vx, vy, omega, xi_x, xi_y)
    "linear": (10.0, 0.05, 10.1 / RD, 0.002, -0.001),
    "saturated_combined": (10.0, 1.5, 12.0 / RD, -0.003, 0.004),
    "locked_sliding": (8.0, 0.5, 0.0, 0.01, -0.02),
    "reversing_braking": (-5.0, 0.2, -3.0 / RD, 0.001, 0.002),
    "slow_linear": (0.05, 0.0, 0.05 / RD + 0.02, 0.005, 0.003),
}


@pytest.mark.parametrize("dt", [DT, 0.05])
@pytest.mark.parametrize("point", OPERATING_POINTS)
def test_closed_form_matches_numerical_integration(point, dt):
    vx, vy, omega, xi_x, xi_y = OPERATING_POINTS[point]
    out = call(vx=vx, vy=vy, omega=omega, xi_x=xi_x, xi_y=xi_y, dt=dt)
    for direction, xi0, xi1, f in (("x", xi_x, out.deflection_x_m[0], out.fx_n[0]),
                                   ("y", xi_y, out.deflection_y_m[0], out.fy_n[0])):
        lhs, rhs_force, rhs_stiff, c, d, _ = reference_ode(P, FZ, MU, vx, vy, omega, direction)

        def rate(t, xi):
            return (rhs_force - rhs_stiff * xi) / lhs

        sol = solve_ivp(rate, (0.0, dt), [xi0], method="DOP853", rtol=1e-12, atol=1e-15)
        xi_num = sol.y[0, -1]
        assert xi1 == pytest.approx(xi_num, rel=1e-8, abs=1e-14), direction
        f_num = c * xi_num + d * rate(dt, np.array([xi_num]))[0]      # F^D = c xi + d dxi/dt
        assert f == pytest.approx(f_num, rel=1e-7, abs=1e-7), direction


@pytest.mark.parametrize("slip", [0.02, 0.5])
def test_constant_slip_converges_with_the_predicted_time_constant(slip):
    vx, vn = 15.0, P.slip_velocity_regularisation_m_s
    omega = (vx + slip * vn) / (RD * (1.0 - slip))
    vy = 0.3 * vx
    lhs, _, rhs_stiff, _, _, f_ss = reference_ode(P, FZ, MU, vx, vy, omega, "x")
    a_expected = rhs_stiff / lhs                   # v* c / (v* d + G)
    state = TireState(np.zeros(1), np.zeros(1))
    forces = []
    for _ in range(400):
        out = call(vx=vx, vy=vy, omega=omega, xi_x=state.deflection_x_m, xi_y=state.deflection_y_m)
        forces.append(out.fx_n[0])
        state = TireState(out.deflection_x_m, out.deflection_y_m)
    forces = np.array(forces)
    assert forces[-1] == pytest.approx(f_ss, rel=1e-9)
    gap = forces[:6] - f_ss
    a_measured = -np.log(gap[1:] / gap[:-1]) / DT
    np.testing.assert_allclose(a_measured, a_expected, rtol=1e-8)


def test_relaxation_length_is_speed_independent_for_small_damping():
    p = dataclasses.replace(P, deflection_damping_x_n_s_per_m=1.0)
    lengths = []
    for vx in (5.0, 20.0):
        omega = vx * 1.001 / RD
        lhs, _, rhs_stiff, _, _, _ = reference_ode(p, FZ, MU, vx, 0.0, omega, "x")
        a = rhs_stiff / lhs
        out0 = call(p=p, vx=vx, omega=omega)
        out1 = call(p=p, vx=vx, omega=omega, xi_x=out0.deflection_x_m)
        out2 = call(p=p, vx=vx, omega=omega, xi_x=out1.deflection_x_m)
        f_ss = call(p=p, vx=vx, omega=omega, dt=LONG_DT).fx_n[0]
        a_measured = -np.log((out2.fx_n[0] - f_ss) / (out1.fx_n[0] - f_ss)) / DT
        assert a_measured == pytest.approx(a, rel=1e-8)
        lengths.append((RD * omega + p.slip_velocity_regularisation_m_s) / a_measured)
    expected = KX * FZ / p.deflection_stiffness_x_n_per_m        # G / c
    np.testing.assert_allclose(lengths, expected, rtol=1e-3)


# ----- derivatives --------------------------------------------------------------------------
def _with(kwargs, name, delta):
    k = dict(kwargs)
    k[name] = k[name] + delta
    return k


DERIVATIVE_POINTS = dict(OPERATING_POINTS, **{
    "saturated_pure_longitudinal": (10.0, 0.0, 13.0 / RD, 0.002, 0.0),
    "linear_no_deflection": (20.0, -0.1, 20.05 / RD, 0.0, 0.0),
    "standstill_deflected": (0.0, 0.0, 0.0, 0.003, -0.002),
    # Magic Formula (P_MF peaks near sigma = 3.9): series branch, near and past the peak
    "tiny_slip": (20.0, 1e-5, 20.0 / RD, 0.001, 0.0),
    "near_peak_lateral": (10.0, 3.2, 10.0 / RD, 0.0, -0.002),
    "past_peak_lateral": (10.0, 6.0, 10.0 / RD, 0.001, 0.003),
    "past_peak_combined": (10.0, 3.0, 14.0 / RD, 0.002, -0.004),
})


@pytest.mark.parametrize("point", DERIVATIVE_POINTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_derivatives_match_central_differences(family, point):
    vx, vy, omega, xi_x, xi_y = DERIVATIVE_POINTS[point]
    base = dict(p=FAMILIES[family], vx=vx, vy=vy, omega=omega, xi_x=xi_x, xi_y=xi_y, xi_z=XI_Z, xi_z_rate=0.1)
    out = call(**base)
    h = 1e-6
    for var in ("vx", "vy", "omega"):
        plus, minus = call(**_with(base, var, h)), call(**_with(base, var, -h))
        for force in ("fx", "fy"):
            fd = (getattr(plus, force + "_n")[0] - getattr(minus, force + "_n")[0]) / (2.0 * h)
            analytic = getattr(out, f"d{force}_d{var}")[0]
            assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-3), (point, force, var)
    # F_z through the compression and its rate; load sensitivity via the chain rule
    h = 1e-7
    plus, minus = call(**_with(base, "xi_z", h)), call(**_with(base, "xi_z", -h))
    assert out.dfz_dxi[0] == pytest.approx((plus.fz_n[0] - minus.fz_n[0]) / (2 * h), rel=1e-7)
    for force, name in (("fx_n", "dfx_dfz"), ("fy_n", "dfy_dfz"),
                        ("rolling_torque_n_m", "drolling_torque_dfz")):
        fd = (getattr(plus, force)[0] - getattr(minus, force)[0]) / (2 * h)
        analytic = getattr(out, name)[0] * out.dfz_dxi[0]
        assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-3), (point, name)
    h = 1e-5
    plus, minus = call(**_with(base, "xi_z_rate", h)), call(**_with(base, "xi_z_rate", -h))
    assert out.dfz_dxidot[0] == pytest.approx((plus.fz_n[0] - minus.fz_n[0]) / (2 * h), rel=1e-7)
    assert out.dfx_dfz[0] * out.dfz_dxidot[0] == pytest.approx(
        (plus.fx_n[0] - minus.fx_n[0]) / (2 * h), rel=1e-5, abs=1e-3)
    h = 1e-6
    plus, minus = call(**_with(base, "omega", h)), call(**_with(base, "omega", -h))
    fd = (plus.rolling_torque_n_m[0] - minus.rolling_torque_n_m[0]) / (2 * h)
    assert out.drolling_torque_domega[0] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_derivatives_are_not_trivially_zero():
    """The finite-difference test above must see non-zero cross terms somewhere."""
    sat = call(vx=10.0, vy=1.5, omega=12.0 / RD, xi_x=-0.003, xi_y=0.004)
    for name in ("dfx_dvx", "dfx_dvy", "dfx_domega", "dfy_dvx", "dfy_dvy", "dfy_domega"):
        assert abs(getattr(sat, name)[0]) > 1.0, name                # N s/m, N s/rad
    for name in ("dfx_dfz", "dfy_dfz"):
        assert abs(getattr(sat, name)[0]) > 0.01, name               # -
    lin = call(vx=10.0, vy=0.05, omega=10.1 / RD)
    assert lin.dfx_dvy[0] == 0.0 and lin.dfy_dvx[0] == 0.0         # uncoupled while linear


# ----- edge cases ---------------------------------------------------------------------------
@pytest.mark.parametrize("vn", [1e-15, 1e-7, 0.01])
def test_standstill_holds_the_deflection_and_stays_finite(vn):
    p = dataclasses.replace(P, slip_velocity_regularisation_m_s=vn)
    out = call(p=p, vx=0.0, vy=0.0, omega=0.0, xi_x=0.004, xi_y=-0.003)
    # stick: F^D ~ c xi0, deflection decays with time constant (d + k F_z / v_n)/c >> dt
    assert out.fx_n[0] == pytest.approx(1.5e5 * 0.004, rel=1e-2)
    assert out.fy_n[0] == pytest.approx(-1.0e5 * 0.003, rel=1e-2)
    assert out.deflection_x_m[0] == pytest.approx(0.004, rel=1e-2)
    assert 0.0 < out.deflection_x_m[0] <= 0.004
    for name in ("dfx_dvx", "dfy_dvy"):        # bounded by -(c dt + d) as v_n -> 0
        assert -(1.5e5 * DT + 500.0) * 1.01 < getattr(out, name)[0] < 0.0
    # undeflected at rest: nothing at all
    rest = call(p=p, vx=0.0, vy=0.0, omega=0.0)
    assert rest.fx_n[0] == 0.0 and rest.fy_n[0] == 0.0 and rest.rolling_torque_n_m[0] == 0.0


def test_locked_wheel_slides_at_mu_fz_and_keeps_its_deflection():
    state = TireState(np.zeros(1), np.zeros(1))
    for _ in range(200):
        out = call(vx=15.0, vy=1.0, omega=0.0, xi_x=state.deflection_x_m, xi_y=state.deflection_y_m)
        state = TireState(out.deflection_x_m, out.deflection_y_m)
    assert out.slip_ratio[0] == pytest.approx(-15.0 / P.slip_velocity_regularisation_m_s)
    assert np.hypot(out.fx_n[0], out.fy_n[0]) == pytest.approx(MU * FZ, rel=1e-9)
    direction = np.array([KX * -15.0, KY * -1.0]) / np.hypot(KX * 15.0, KY * 1.0)
    np.testing.assert_allclose([out.fx_n[0], out.fy_n[0]], MU * FZ * direction, rtol=1e-9)
    assert out.deflection_x_m[0] == pytest.approx(out.fx_n[0] / 1.5e5, rel=1e-9)


def test_reversing_is_the_mirror_of_driving_forward():
    fwd = call(vx=6.0, vy=0.4, omega=5.0 / RD, xi_x=0.001, xi_y=0.002)
    rev = call(vx=-6.0, vy=-0.4, omega=-5.0 / RD, xi_x=-0.001, xi_y=-0.002)
    for name in ("fx_n", "fy_n", "deflection_x_m", "deflection_y_m", "slip_ratio", "rolling_torque_n_m"):
        np.testing.assert_allclose(getattr(rev, name), -getattr(fwd, name), rtol=1e-12, err_msg=name)
    assert fwd.fx_n[0] < 0.0 < rev.fx_n[0]      # braking in both directions opposes the motion
    assert rev.slip_angle_rad[0] == pytest.approx(np.arctan2(-0.4, -6.0))


def test_forces_bounded_by_friction_or_initial_deflection():
    rng = np.random.default_rng(11)
    n = 2000
    vx = rng.uniform(-30.0, 30.0, n) * rng.integers(0, 2, n)
    vy = rng.uniform(-5.0, 5.0, n) * rng.integers(0, 2, n)
    omega = rng.uniform(-100.0, 100.0, n) * rng.integers(0, 2, n)
    xi_x, xi_y = rng.uniform(-0.05, 0.05, (2, n))
    xi_z = rng.uniform(-0.01, 0.05, n)
    out = call(xi_z=xi_z, xi_z_rate=rng.normal(0.0, 1.0, n), vx=vx, vy=vy, omega=omega,
               xi_x=xi_x, xi_y=xi_y, dt=rng.choice([1e-3, 4e-3, 1e-1]))
    tol = 1.0 + 1e-12
    assert np.all(np.abs(out.fx_n) <= np.maximum(MU * out.fz_n, 1.5e5 * np.abs(xi_x)) * tol)
    assert np.all(np.abs(out.fy_n) <= np.maximum(MU * out.fz_n, 1.0e5 * np.abs(xi_y)) * tol)
    # deflections move monotonically from xi0 towards F^S/c
    assert np.all(np.abs(out.deflection_x_m) <= np.maximum(np.abs(xi_x), MU * out.fz_n / 1.5e5) * tol)


def test_rolling_resistance_torque():
    omega = np.array([-50.0, -0.1, 0.0, 0.1, 50.0])
    out = call(vx=omega * RD, omega=omega)
    t_max = P.rolling_resistance_coefficient * FZ * RD
    np.testing.assert_allclose(out.rolling_torque_n_m, -t_max * np.tanh(omega / 0.5), rtol=1e-12)
    assert out.rolling_torque_n_m[-1] == pytest.approx(-t_max) and out.rolling_torque_n_m[2] == 0.0


# ----- vectorisation and parameters ---------------------------------------------------------
def test_vectorised_equals_single_wheel_calls_with_per_axle_parameters():
    rear = dataclasses.replace(P_MF, longitudinal_slip_stiffness=15.0, cornering_stiffness_per_rad=9.0,
                               deflection_stiffness_y_n_per_m=8.0e4, vertical_stiffness_n_per_m=2.5e5)
    per_wheel = [P, P, rear, rear]
    stacked = TireParameters.stack(per_wheel)
    assert stacked.cornering_stiffness_per_rad.shape == (4,)
    mu = np.array([0.9, 0.8, 0.7, 0.6])
    xi_z = np.array([0.015, -0.01, 0.02, 0.012])
    rate = np.array([0.1, 0.0, -0.2, 0.05])
    vx = np.array([10.0, 0.0, -4.0, 8.0])
    vy = np.array([0.5, 0.0, 0.1, -2.0])
    omega = np.array([36.0, 0.0, -10.0, 0.0])
    xi_x = np.array([0.001, 0.0, -0.002, 0.004])
    xi_y = np.array([-0.002, 0.003, 0.0, 0.001])
    vec = call(p=stacked, mu=mu, xi_z=xi_z, xi_z_rate=rate, vx=vx, vy=vy, omega=omega, xi_x=xi_x, xi_y=xi_y)
    for i in range(4):
        one = call(p=per_wheel[i], mu=mu[i], xi_z=xi_z[i], xi_z_rate=rate[i], vx=vx[i], vy=vy[i],
                   omega=omega[i], xi_x=xi_x[i], xi_y=xi_y[i])
        for name in TireOutput._fields:
            assert getattr(vec, name).shape == (4,), name
            assert getattr(vec, name)[i] == pytest.approx(getattr(one, name)[0], rel=1e-14, abs=1e-300), name


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(TireParameters)])
@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_invalid_parameters_raise_naming_the_field(field, bad):
    if (field, bad) == ("shape_factor", -1.0):
        bad = -3.0  # -1 and -2 are the brush and TMeasy characteristics
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(P, **{field: bad})


def test_zero_allowed_only_where_it_makes_sense():
    dataclasses.replace(P, vertical_damping_n_s_per_m=0.0, rolling_resistance_coefficient=0.0)
    with pytest.raises(ValueError, match="deflection_damping_x_n_s_per_m"):
        dataclasses.replace(P, deflection_damping_x_n_s_per_m=0.0)
    with pytest.raises(ValueError, match="dynamic_radius_m"):
        dataclasses.replace(P, dynamic_radius_m=0.31)
    with pytest.raises(ValueError, match="cornering_stiffness_per_rad"):
        dataclasses.replace(P, cornering_stiffness_per_rad=np.array([12.0, -1.0]))


def test_invalid_call_arguments_raise():
    with pytest.raises(ValueError, match="dt_s"):
        call(dt=0.0)
    with pytest.raises(ValueError, match="mu"):
        call(mu=np.array([0.9, 0.0]))
    with pytest.raises(ValueError, match="mu"):
        call(mu=float("nan"))
    with pytest.raises(ValueError, match="stack"):
        TireParameters.stack([])


def test_stack_rejects_array_parameter_sets():
    stacked = TireParameters.stack([P, P])
    with pytest.raises(ValueError, match="scalar"):
        TireParameters.stack([stacked, stacked])


# ----- Magic-Formula family -----------------------------------------------------------------
# Outputs of the linearised kernel before the Magic-Formula family was added (same P, MU,
# xi_z = XI_Z, xi_z_rate = 0.1, DT), at OPERATING_POINTS linear, saturated_combined, reversing_braking.
LINEARISED_BEFORE = np.array([
    [341.904135817055, -114.96907591699306, 3050.0, -15.0365, 0.009891196834816979, 0.0049999583339583225,
     0.0021559031527518574, -0.0010767221643634606, -936.3195182565487, -0.0, 269.86776848463535, -0.0,
     -668.9477149718506, 0.601212148548068, 200000.0, 500.0, 0.019030023964625553, -0.006871967011668702,
     -0.0, -0.00493],
    [996.5269164770339, -440.2919895401592, 3050.0, -15.0365, 0.16652789342214822, 0.14888994760949725,
     0.0026827379454885487, -0.000554882340342404, -435.1065884150358, -58.709105246094445, 126.18091064036038,
     -80.6767755444621, -395.6287207923668, 23.396264907894004, 200000.0, 500.0, 0.14436665224449458,
     -0.06612850454464107, -0.0, -0.00493],
    [1363.087026001378, 13.575247871859887, 3050.0, 15.0365, 0.6644518272425249, 3.1016139664665032,
     0.005738401060028391, 0.0009952295569459343, -347.0326186940604, -13.09571322508566, 100.6394594212775,
     6.146760532002982, -445.1325943255779, -1.7825605542808647, 200000.0, 500.0, 0.1940741763193022,
     0.004048576700131655, -0.0, 0.00493],
])


def mf_per_load(sigma, c, e, d):
    """Pacejka 2012 eq. 4.49 shape: D sin(C atan(B sigma - E (B sigma - atan(B sigma)))), B = 1/(C D)."""
    bs = sigma / (c * d)
    return d * np.sin(c * np.arctan(bs - e * (bs - np.arctan(bs))))


def load_factor(q, fz, fz0):
    """max(1 - q (F_z/F_z0 - 1), 0.2)."""
    return max(1.0 - q * (fz / fz0 - 1.0), 0.2)


def mf_peak_sigma(c, e, d):
    """sigma where C atan(...) = pi/2, i.e. B sigma - E (B sigma - atan(B sigma)) = tan(pi/(2C))."""
    target = np.tan(np.pi / (2.0 * c))
    x = brentq(lambda x: x - e * (x - np.arctan(x)) - target, 0.0, 1e3 * target, xtol=1e-15, rtol=1e-15)
    return x * c * d


def test_shape_factor_zero_reproduces_the_linearised_tire_exactly():
    vx, vy, omega, xi_x, xi_y = np.array([OPERATING_POINTS[k] for k in
                                          ("linear", "saturated_combined", "reversing_braking")]).T
    # the other Magic-Formula fields (other than those that must be 0) are ignored
    explicit = dataclasses.replace(P, shape_factor=0.0, curvature_factor=0.0, nominal_load_n=1234.0,
                                   load_sensitivity_stiffness=0.0, load_sensitivity_friction=0.0)
    for p in (P, explicit):
        out = call(p=p, vx=vx, vy=vy, omega=omega, xi_x=xi_x, xi_y=xi_y, xi_z_rate=0.1)
        np.testing.assert_array_equal(np.array(out).T, LINEARISED_BEFORE)
    # a linearised wheel stacked next to a Magic-Formula wheel is unchanged too
    mixed = call(p=TireParameters.stack([P, P_MF]), vx=vx[:2], vy=vy[:2], omega=omega[:2], xi_x=xi_x[:2],
                 xi_y=xi_y[:2], xi_z_rate=0.1)
    np.testing.assert_array_equal(np.array(mixed)[:, 0], LINEARISED_BEFORE[0])
    assert not np.array_equal(np.array(mixed)[:, 1], LINEARISED_BEFORE[1])


def test_magic_formula_small_slip_equals_the_linear_force():
    xi_z = 4000.0 / P.vertical_stiffness_n_per_m          # F_z = F_z0: load factors 1
    vx, vn = 15.0, P.slip_velocity_regularisation_m_s
    s = np.array([-0.003, 0.003, 0.0, 0.002, -0.001])
    alpha = np.array([0.0, 0.0, 0.003, -0.002, 0.003])
    omega = (vx + s * vn) / (RD * (1.0 - s))
    kw = dict(xi_z=xi_z, vx=vx, vy=vx * np.tan(alpha), omega=omega, dt=LONG_DT)
    lin, mf = call(**kw), call(p=P_MF, **kw)
    assert np.all(np.hypot(lin.fx_n, lin.fy_n) > 5.0)
    np.testing.assert_allclose(mf.fx_n, lin.fx_n, rtol=5e-3)
    np.testing.assert_allclose(mf.fy_n, lin.fy_n, rtol=5e-3)
    # away from F_z0 the linear force uses the load-scaled stiffness k lam_k
    lam_k = load_factor(0.3, FZ, 4000.0)
    lin_k = dataclasses.replace(P, longitudinal_slip_stiffness=KX * lam_k, cornering_stiffness_per_rad=KY * lam_k)
    kw["xi_z"] = XI_Z
    lin, mf = call(p=lin_k, **kw), call(p=P_MF, **kw)
    np.testing.assert_allclose(mf.fx_n, lin.fx_n, rtol=5e-3)
    np.testing.assert_allclose(mf.fy_n, lin.fy_n, rtol=5e-3)


@pytest.mark.parametrize("p", [P_MF, P_MF_CLIPPED], ids=["magic_formula", "magic_formula_clipped"])
def test_magic_formula_steady_pure_lateral_force_is_the_formula(p):
    vx, vn = 20.0, p.slip_velocity_regularisation_m_s
    alpha = np.array([1e-6, 1e-3, 0.02, 0.08, 0.2, 0.5, 1.2, -0.3])
    omega = vx / RD
    out = call(p=p, vx=vx, vy=vx * np.tan(alpha), omega=omega, dt=LONG_DT)   # E = 0: the steady force
    lam_k = load_factor(p.load_sensitivity_stiffness, FZ, p.nominal_load_n)
    mu_eff = MU * load_factor(p.load_sensitivity_friction, FZ, p.nominal_load_n)
    sigma = KY * lam_k * np.abs(vx * np.tan(alpha)) / (RD * omega + vn)    # k_y |v_y| / v*
    expected = -np.sign(alpha) * FZ * mf_per_load(sigma, p.shape_factor, p.curvature_factor, mu_eff)
    np.testing.assert_allclose(out.fy_n, expected, rtol=1e-12)
    np.testing.assert_allclose(out.fx_n, 0.0, atol=1e-9)


@pytest.mark.parametrize("xi_z", [XI_Z, 0.04])                 # 3000 N and 8000 N = 2 F_z0
def test_magic_formula_peak_is_mu_eff_fz_and_falls_beyond(xi_z):
    fz = P.vertical_stiffness_n_per_m * xi_z
    lam_k = load_factor(0.3, fz, 4000.0)
    mu_eff = MU * load_factor(0.1, fz, 4000.0)
    sigma_peak = mf_peak_sigma(1.3, 0.3, mu_eff)
    factors = np.array([0.5, 0.9, 1.0, 1.1, 2.0, 10.0, 1e6])
    vx, vn = 10.0, P.slip_velocity_regularisation_m_s
    v_star = RD * (vx / RD) + vn
    # lateral: sigma = k_y lam_k |v_y| / v*
    lat = call(p=P_MF, xi_z=xi_z, vx=vx, vy=factors * sigma_peak * v_star / (KY * lam_k), omega=vx / RD,
               dt=LONG_DT)
    # longitudinal: sigma = k_x lam_k s_x with s_x = (r Omega - v_x)/(r Omega + v_n), Omega > 0
    s = factors[:-1] * sigma_peak / (KX * lam_k)
    lon = call(p=P_MF, xi_z=xi_z, vx=vx, omega=(vx + s * vn) / (RD * (1.0 - s)), dt=LONG_DT)
    for f in (-lat.fy_n, lon.fx_n):
        peak = f[2]
        assert peak == pytest.approx(mu_eff * fz, rel=1e-9)
        assert np.all(np.delete(f, 2) < peak)
        assert np.all(np.diff(f[2:]) < 0.0)                     # falls beyond the peak
    # ... towards D sin(C pi/2)
    assert -lat.fy_n[-1] == pytest.approx(mu_eff * fz * np.sin(1.3 * np.pi / 2.0), rel=1e-3)
    if xi_z == 0.04:
        assert mu_eff == pytest.approx(MU * (1.0 - 0.1))


def test_magic_formula_load_sensitivity_of_the_cornering_stiffness():
    p = dataclasses.replace(P_MF, slip_velocity_regularisation_m_s=1e-12)
    vx, alpha = 20.0, 1e-4
    for fz, lam in ((4000.0, 1.0), (8000.0, 1.0 - 0.3), (40000.0, 0.2)):   # F_z0, 2 F_z0, clipped
        out = call(p=p, xi_z=fz / P.vertical_stiffness_n_per_m, vx=vx, vy=vx * np.tan(alpha), omega=vx / RD,
                   dt=LONG_DT)
        assert out.fz_n[0] == pytest.approx(fz)
        assert -out.fy_n[0] / (alpha * fz) == pytest.approx(lam * KY, rel=1e-5)
    # the load derivative at 2 F_z0: F_y = -F_z k_y lam_k(F_z) alpha, d/dF_z = -k_y alpha (1 - q_k (2 F_z/F_z0 - 1))
    out = call(p=p, xi_z=8000.0 / P.vertical_stiffness_n_per_m, vx=vx, vy=vx * np.tan(alpha), omega=vx / RD,
               dt=LONG_DT)
    assert out.dfy_dfz[0] == pytest.approx(-KY * alpha * (1.0 - 0.3 * 3.0), rel=1e-5)


def test_magic_formula_edge_cases():
    rng = np.random.default_rng(17)
    n = 2000
    vx = rng.uniform(-30.0, 30.0, n) * rng.integers(0, 2, n)
    vy = rng.uniform(-5.0, 5.0, n) * rng.integers(0, 2, n)
    omega = rng.uniform(-100.0, 100.0, n) * rng.integers(0, 2, n)
    xi_x, xi_y = rng.uniform(-0.05, 0.05, (2, n))
    xi_z = rng.uniform(-0.01, 0.08, n)
    for p in (P_MF, P_MF_CLIPPED):
        out = call(p=p, xi_z=xi_z, xi_z_rate=rng.normal(0.0, 1.0, n), vx=vx, vy=vy, omega=omega,
                   xi_x=xi_x, xi_y=xi_y, dt=rng.choice([1e-3, 4e-3, 1e-1]))
        fz = out.fz_n
        mu_eff = MU * np.maximum(1.0 - p.load_sensitivity_friction * (fz / p.nominal_load_n - 1.0), 0.2)
        tol = 1.0 + 1e-12
        assert np.all(np.abs(out.fx_n) <= np.maximum(mu_eff * fz, 1.5e5 * np.abs(xi_x)) * tol)
        assert np.all(np.abs(out.fy_n) <= np.maximum(mu_eff * fz, 1.0e5 * np.abs(xi_y)) * tol)
        airborne = fz == 0.0
        assert np.any(airborne) and np.all(out.fx_n[airborne] == 0.0) and np.all(out.fy_n[airborne] == 0.0)
        # reversing mirrors driving forward; a tire at rest, undeflected, carries nothing
        fwd = call(p=p, vx=6.0, vy=2.4, omega=5.0 / RD, xi_x=0.001, xi_y=0.002)
        rev = call(p=p, vx=-6.0, vy=-2.4, omega=-5.0 / RD, xi_x=-0.001, xi_y=-0.002)
        for name in ("fx_n", "fy_n", "deflection_x_m", "deflection_y_m"):
            np.testing.assert_allclose(getattr(rev, name), -getattr(fwd, name), rtol=1e-12, err_msg=name)
        rest = call(p=p, vx=0.0, vy=0.0, omega=0.0)
        assert rest.fx_n[0] == 0.0 and rest.fy_n[0] == 0.0


@pytest.mark.parametrize("field, bad, why", [
    ("shape_factor", 0.5, "0 (linearised), -1 (brush), -2 (TMeasy) or within 1..2"), ("shape_factor", 2.5, "0 (linearised), -1 (brush), -2 (TMeasy) or within 1..2"),
    ("shape_factor", -1.3, "0 (linearised), -1 (brush), -2 (TMeasy) or within 1..2"), ("curvature_factor", 1.0, "< 1"), ("curvature_factor", 3.0, "< 1"),
    ("nominal_load_n", 0.0, "> 0"), ("nominal_load_n", -4000.0, "> 0"), ("load_sensitivity_stiffness", -0.1, ">= 0"),
    ("load_sensitivity_friction", -0.1, ">= 0"), ("curvature_factor", np.nan, "finite"),
])
def test_invalid_magic_formula_parameters_raise_naming_the_field(field, bad, why):
    with pytest.raises(ValueError, match=re.escape(f"TireParameters.{field} must be {why}")):
        dataclasses.replace(P_MF, **{field: bad})


def test_magic_formula_fields_refused_with_the_linearised_characteristic():
    with pytest.raises(ValueError, match="TireParameters.curvature_factor must be 0 where shape_factor is 0"):
        dataclasses.replace(P, curvature_factor=0.2)
    # per wheel: only the linearised wheels are constrained
    dataclasses.replace(P, shape_factor=np.array([0.0, 1.3]), curvature_factor=np.array([0.0, 0.3]))
    with pytest.raises(ValueError, match="curvature_factor"):
        dataclasses.replace(P, shape_factor=np.array([0.0, 1.3]), curvature_factor=np.array([0.3, 0.3]))
    assert P_MF.rows.shape == (1, len(dataclasses.fields(TireParameters)))


@pytest.mark.parametrize("shape", [0.0, TMEASY, BRUSH], ids=["linearised", "tmeasy", "brush"])
def test_load_sensitivity_scales_every_characteristic_as_the_magic_formula(shape):
    """k -> k lam_k and mu -> mu lam_mu with lam = max(1 - q (F_z/F_z0 - 1), 0.2): the load-sensitive tire at F_z gives
    the forces of the plain one with k_x, k_y and mu scaled by hand, over the linear range and the slide; q = 0 is the
    plain tire bit for bit."""
    plain = dataclasses.replace(P, shape_factor=shape)
    q_k, q_mu, fz0 = 0.3, 0.1, 4000.0
    loaded = dataclasses.replace(plain, nominal_load_n=fz0, load_sensitivity_stiffness=q_k, load_sensitivity_friction=q_mu)
    vx = 15.0
    vy = vx * np.tan(np.array([0.002, 0.02, 0.08, 0.3]))
    omega = np.array([vx / RD, 1.02 * vx / RD, 0.95 * vx / RD, vx / RD])
    for fz in (3000.0, 6000.0):
        lam_k, lam_mu = 1.0 - q_k * (fz / fz0 - 1.0), 1.0 - q_mu * (fz / fz0 - 1.0)
        by_hand = dataclasses.replace(plain, longitudinal_slip_stiffness=KX * lam_k, cornering_stiffness_per_rad=KY * lam_k)
        kw = dict(xi_z=fz / P.vertical_stiffness_n_per_m, vx=vx, vy=vy, omega=omega, dt=LONG_DT)
        a, b = call(p=loaded, **kw), call(p=by_hand, mu=MU * lam_mu, **kw)
        np.testing.assert_allclose(a.fx_n, b.fx_n, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(a.fy_n, b.fy_n, rtol=1e-12, atol=1e-9)
    same = dataclasses.replace(plain, nominal_load_n=1234.0)
    kw = dict(vx=vx, vy=vy, omega=omega)
    np.testing.assert_array_equal(np.array(call(p=same, **kw)), np.array(call(p=plain, **kw)))


if __name__ == "__main__":
    n = 4
    args = (TireParameters.stack([P] * n), MU, np.full(n, XI_Z), np.zeros(n), np.full(n, 10.0),
            np.array([0.1, -0.5, 0.0, 1.5]), np.array([34.0, 35.0, 33.0, 40.0]), TireState.zeros(n), DT)
    runs = 20000
    t = min(timeit.repeat(lambda: tire_forces(*args), number=runs, repeat=5)) / runs
    print(f"tire_forces, N = {n}, stacked parameters: {t * 1e6:.1f} us per call")
    args = (P,) + args[1:]
    t = min(timeit.repeat(lambda: tire_forces(*args), number=runs, repeat=5)) / runs
    print(f"tire_forces, N = {n}, scalar parameters:  {t * 1e6:.1f} us per call")


def test_brush_steady_pure_lateral_force_is_the_brush_formula():
    """Pure side slip, steady state: F_y = -sign(alpha) F_z mu (1 - (1 - z)^3), z = sigma / (3 mu), mu F_z from z = 1
    (Pacejka 2012 §3.2, parabolic pressure), sigma = k_y |v_y| / v*; its slope at zero slip is the linearised law's,
    and at three quarters of mu it needs 1.5 times that law's slip."""
    vx, vn = 20.0, P_BRUSH.slip_velocity_regularisation_m_s
    alpha = np.array([1e-6, 1e-3, 0.02, 0.08, 0.2, 0.5, 1.2, -0.3])
    omega = vx / RD
    out = call(p=P_BRUSH, vx=vx, vy=vx * np.tan(alpha), omega=omega, dt=LONG_DT)
    sigma = KY * np.abs(vx * np.tan(alpha)) / (RD * omega + vn)
    z = np.minimum(sigma / (3.0 * MU), 1.0)
    np.testing.assert_allclose(out.fy_n, -np.sign(alpha) * FZ * MU * (1.0 - (1.0 - z) ** 3), rtol=1e-9)
    linear = call(vx=vx, vy=vx * np.tan(alpha[:2]), omega=omega, dt=LONG_DT)
    np.testing.assert_allclose(out.fy_n[0], linear.fy_n[0], rtol=1e-5)  # the same slope at zero slip
    assert 0.99 < out.fy_n[1] / linear.fy_n[1] < 1.0  # and below the linear law from the first slip on
    # at 3/4 of mu: 1 - (1 - z)^3 = 3/4 -> z = 1 - 4^(-1/3), sigma = 3 mu z = 1.11 mu (the linear law: 0.75 mu)
    assert abs(3.0 * (1.0 - 4.0 ** (-1.0 / 3.0)) / 0.75 - 1.48) < 0.01


def test_brush_refuses_magic_formula_fields():
    for p in (P_BRUSH, P_TMEASY):
        with pytest.raises(ValueError, match="must be 0 where shape_factor is 0, -1 or -2"):
            dataclasses.replace(p, curvature_factor=0.3)


def test_tmeasy_steady_pure_lateral_force_is_the_rational_characteristic():
    """Pure side slip, steady state: F_y = -sign(alpha) F_z sigma / (1 + x (x + a - 2)), x = sigma / (a mu), mu F_z
    from x = 1 (Rill 2012, TMeasy with the peak at a = 2 times the linear law's saturation slip); its slope at zero
    slip is the linearised law's, at the linear law's saturation slip (sigma = mu) it gives 0.8 mu, the peak mu at 2 mu."""
    vx, vn = 20.0, P_TMEASY.slip_velocity_regularisation_m_s
    alpha = np.array([1e-6, 1e-3, 0.02, 0.08, 0.2, 0.5, 1.2, -0.3])
    omega = vx / RD
    out = call(p=P_TMEASY, vx=vx, vy=vx * np.tan(alpha), omega=omega, dt=LONG_DT)
    sigma = KY * np.abs(vx * np.tan(alpha)) / (RD * omega + vn)
    a = TMEASY_PEAK_RATIO
    x = np.minimum(sigma / (a * MU), 1.0)
    f = np.where(x < 1.0, sigma / (1.0 + x * (x + a - 2.0)), MU)
    np.testing.assert_allclose(out.fy_n, -np.sign(alpha) * FZ * f, rtol=1e-9)
    linear = call(vx=vx, vy=vx * np.tan(alpha[:2]), omega=omega, dt=LONG_DT)
    np.testing.assert_allclose(out.fy_n[0], linear.fy_n[0], rtol=1e-5)  # the same slope at zero slip
    # by hand, a = 2: f(mu) = mu / (1 + 1/4) = 0.8 mu; f(2 mu) = 2 mu / 2 = mu
    at = call(p=P_TMEASY, vx=vx, vy=np.array([1.0, 2.0]) * MU / KY * (RD * omega + vn), omega=omega, dt=LONG_DT)
    np.testing.assert_allclose(-at.fy_n / (FZ * MU), [0.8, 1.0], rtol=1e-9)

"""Suspension kinematics fitted to sweeps of the detailed model: accuracy, derivatives, symmetry, cache, physics.

The oracle here is independent of the sweep code: the detailed model's position problem solved with the
chassis left at its static pose (not moved to its own frame), the wheel-centre height set along the
chassis z axis by iteration, and the angles from the existing road_wheel_angles and scipy's Euler angles.
"""
import dataclasses
import math
import warnings

import numpy as np
import pytest
from numdiff import jacobian_fd
from scipy.spatial.transform import Rotation

from state_observer.conventions import WHEELS
from state_observer.mbs import solve_position
from state_observer.vehicle import kinematic_fit as kf
from state_observer.vehicle.description import load_vehicle
from state_observer.vehicle.detailed import DetailedVehicle

MIRROR = np.array([1.0, -1.0, 1.0])
COARSE = dict(travel_step_m=0.02, rack_nodes=7)  # cache tests only: 9 x 7 nodes


@pytest.fixture(scope="module")
def desc():
    from state_observer.paths import default_vehicle_path

    return load_vehicle(default_vehicle_path())


@pytest.fixture(scope="module")
def vehicle(desc):
    v = DetailedVehicle(desc)
    v.solve_statics()
    return v


@pytest.fixture(scope="module")
def fitted(desc, tmp_path_factory):
    """The production fit (17 travel x 21 rack nodes, quintic), built into a fresh cache."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default corners assemble over the whole grid
        vk = kf.fit_vehicle_kinematics(desc, tmp_path_factory.mktemp("kinematics"))
    print(vk.summary())
    return vk


# ---------------------------------------------------------------- independent oracle
def detailed_pose(vehicle, corner, travel_m, rack_m=0.0):
    """Knuckle pose from the detailed model with the chassis at q_static: (position, steer, incl, dive, spring).

    The wheel-centre height along the chassis z axis is set by a fixed-point iteration on the global
    C.z (the static chassis is pitched, so the two differ)."""
    m, k = vehicle.model, WHEELS.index(corner)
    q_s = vehicle.q_static
    p0, R = vehicle.chassis_frame(q_s)
    ez = R[:, 2]
    iz, ic, iw, il, it = m.index(f"C_{corner}.z"), *(m.index(f"{p}_{corner}.x") for p in ("C", "w", "L", "T"))
    target = (q_s[ic : ic + 3] - p0) @ ez + travel_m
    vehicle.rack_input.set(rack_m)
    try:
        q = q_s.copy()
        for _ in range(10):
            q = solve_position(m, q, vehicle.independent)
            h = (q[ic : ic + 3] - p0) @ ez
            if abs(h - target) < 1e-13:
                break
            q[iz] += (target - h) / ez[2]
        else:
            raise AssertionError("height iteration did not converge")
    finally:
        vehicle.rack_input.set(0.0)

    def local(qq):  # knuckle-fixed vectors in the chassis frame
        C = qq[ic : ic + 3]
        return R.T @ (C - p0), [R.T @ qq[iw : iw + 3], R.T @ (qq[il : il + 3] - C), R.T @ (qq[it : it + 3] - C)]

    position, vecs = local(q)
    _, vecs_s = local(q_s)
    rel, _ = Rotation.align_vectors(vecs, vecs_s)
    w_s = vecs_s[0]
    K_s = Rotation.from_euler("ZXY", [math.atan2(-w_s[0], w_s[1]), math.asin(w_s[2]), 0.0])  # dive 0 at static
    _, _, dive = (rel * K_s).as_euler("ZXY")
    steer = vehicle.road_wheel_angles(q)[k]
    incl = math.asin(vecs[0][2])
    spring = vehicle.spring_set.state(q, np.zeros(m.n))[0][k]
    return np.concatenate([position, [steer, incl, dive, spring]])


def fitted_pose(fit, z, s=0.0):
    c = fit.channels(z, s)
    return c[:, 0]


def inside_points(fit, n, seed):
    """Points strictly between the fit nodes (random, not on any node line)."""
    rng = np.random.default_rng(seed)
    lo, hi = fit.travel_range_m
    z = rng.uniform(lo, hi, n)
    s = rng.uniform(*fit.rack_range_m, n) if fit.steered else np.zeros(n)
    return list(zip(z, s))


# ---------------------------------------------------------------- accuracy (done criterion)
def test_fit_reproduces_the_detailed_sweep_between_the_nodes(fitted, vehicle):
    """Production grid: within 0.1 mm and 0.01 deg at every cell mid-point and at random points."""
    for name, r in fitted.residuals.items():
        fit = fitted[name]
        assert len(fit.u_m) == 17 and fit.travel_range_m[0] < -0.0795 and fit.travel_range_m[1] > 0.0795
        assert r.points == (16 * 20 if fit.steered else 16)
        if fit.steered:
            assert len(fit.rack_m) == 21 and fit.rack_range_m[1] == pytest.approx(8.5 * 0.0088)
        assert r.position_mm < 0.1 and r.angle_deg < 0.01 and r.spring_mm < 0.1, (name, r)
    assert fitted.max_position_error_mm < 0.1 and fitted.max_angle_error_deg < 0.01
    assert "max: position" in fitted.summary()
    worst = np.zeros(2)
    for name, n in (("fl", 8), ("fr", 3), ("rl", 4), ("rr", 2)):
        fit = fitted[name]
        for z, s in inside_points(fit, n, seed=len(name) + n):
            err = np.abs(fitted_pose(fit, z, s) - detailed_pose(vehicle, name, z, s))
            worst = np.maximum(worst, [err[:3].max() * 1e3, math.degrees(err[3:6].max())])
            assert err[6] < 1e-4, (name, z, s)
    print("independent points: max position error %.2e mm, angle %.2e deg" % tuple(worst))
    assert worst[0] < 0.1 and worst[1] < 0.01


# ---------------------------------------------------------------- derivatives
@pytest.mark.parametrize("name", ["fl", "rl"])
def test_derivatives_match_finite_differences_of_the_fit(fitted, name):
    fit = fitted[name]
    for z, s in inside_points(fit, 5, seed=3) + [(0.0, 0.0)]:
        x = np.array([z, s])
        e = fit.evaluate(z, s)
        value = lambda x: np.concatenate(fit.evaluate(x[0], x[1])[:2])  # noqa: E731
        J = jacobian_fd(value, x, h=1e-5)
        np.testing.assert_allclose(J[:, 0], e.d_dz, atol=1e-7, rtol=1e-6)
        np.testing.assert_allclose(J[:, 1], e.d_drack, atol=1e-7, rtol=1e-6)
        Jz = jacobian_fd(lambda x: fit.evaluate(x[0], x[1]).d_dz, x, h=1e-5)
        Js = jacobian_fd(lambda x: fit.evaluate(x[0], x[1]).d_drack, x, h=1e-5)
        np.testing.assert_allclose(Jz[:, 0], e.d2_dz2, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(Jz[:, 1], e.d2_dzdrack, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(Js[:, 0], e.d2_dzdrack, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(Js[:, 1], e.d2_drack2, atol=1e-5, rtol=1e-5)
        if not fit.steered:
            assert not np.any(e.d_drack) and not np.any(e.d2_dzdrack) and not np.any(e.d2_drack2)


def test_first_derivatives_match_the_detailed_model(fitted, vehicle):
    """Central differences of the detailed model's position problem: first derivatives (h = 0.1 mm) tightly,
    second derivatives (h = 1 mm, three-point) as a plausibility check."""
    h, h2 = 1e-4, 1e-3
    for name, points in (("fl", [(0.0, 0.0), (0.047, -0.031), (-0.062, 0.066)]), ("rl", [(0.0, 0.0), (0.071, 0.0)])):
        fit = fitted[name]
        for z, s in points:
            e = fit.evaluate(z, s)
            pose = lambda dz, ds: detailed_pose(vehicle, name, z + dz, s + ds)[:6]  # noqa: E731
            np.testing.assert_allclose(e.d_dz, (pose(h, 0) - pose(-h, 0)) / (2 * h), atol=1e-6)
            centre = pose(0, 0)
            np.testing.assert_allclose(e.d2_dz2, (pose(h2, 0) - 2 * centre + pose(-h2, 0)) / h2**2, atol=1e-3)
            if fit.steered:
                np.testing.assert_allclose(e.d_drack, (pose(0, h) - pose(0, -h)) / (2 * h), atol=2e-5)
                np.testing.assert_allclose(e.d2_drack2, (pose(0, h2) - 2 * centre + pose(0, -h2)) / h2**2, atol=5e-3)


def test_angle_rates_give_the_angular_velocity(fitted):
    """E(theta) theta_dot is the angular velocity of K(theta): skew(omega) = K_dot K^T."""
    e = fitted["fl"].evaluate(0.03, 0.02)
    rates = e.d_dz * 0.4 + e.d_drack * 0.05  # zd = 0.4 m/s, sd = 0.05 m/s
    theta, theta_dot, dt = e.angles_rad, rates[3:], 1e-6
    Kd = (kf.knuckle_rotation(theta + dt * theta_dot) - kf.knuckle_rotation(theta - dt * theta_dot)) / (2 * dt)
    W = Kd @ kf.knuckle_rotation(theta).T
    np.testing.assert_allclose(W, -W.T, atol=1e-8)
    np.testing.assert_allclose([W[2, 1], W[0, 2], W[1, 0]], kf.angular_velocity_matrix(theta) @ theta_dot, atol=1e-8)
    np.testing.assert_allclose(kf.angles_from_rotation(kf.knuckle_rotation(theta)), theta, atol=1e-12)


# ---------------------------------------------------------------- symmetry, vectorisation
def test_left_and_right_corners_mirror_each_other(fitted):
    """fr(z, s) is fl(z, -s) mirrored (y -> -y: steer and inclination change sign, dive does not)."""
    sign = np.array([1, -1, 1, -1, -1, 1, 1.0])
    for left, right in (("fl", "fr"), ("rl", "rr")):
        L, R = fitted[left], fitted[right]
        assert R.static_offset_m == pytest.approx(L.static_offset_m, abs=1e-12)
        for z, s in inside_points(L, 6, seed=7):
            cl, cr = L.channels(z, -s), R.channels(z, s)
            np.testing.assert_allclose(cr[:, [0, 1, 3, 5]], sign[:, None] * cl[:, [0, 1, 3, 5]], atol=1e-9)  # even in s
            np.testing.assert_allclose(cr[:, [2, 4]], -sign[:, None] * cl[:, [2, 4]], atol=1e-8)  # odd in s
        assert fitted.residuals[right].position_mm == pytest.approx(fitted.residuals[left].position_mm, abs=1e-6)


def test_vectorised_evaluation_equals_scalar_calls(fitted):
    for name in ("fl", "rl"):
        fit = fitted[name]
        pts = inside_points(fit, 7, seed=11) + [(fit.travel_range_m[1] + 0.01, 0.0)]  # one extrapolated
        z, s = np.array(pts).T
        vec = fit.evaluate(z, s)
        for n, (zi, si) in enumerate(pts):
            for a, b in zip(vec, fit.evaluate(zi, si)):
                np.testing.assert_allclose(a[n], b, rtol=1e-13, atol=1e-15)
        grid = fit.evaluate(z[:, None], s[None, :])
        assert grid.position_m.shape == (len(z), len(s), 3) and grid.d2_dzdrack.shape == (len(z), len(s), 6)


# ---------------------------------------------------------------- physics
def test_static_point_and_alignment(fitted, vehicle, desc):
    m = vehicle.model
    p0, R = vehicle.chassis_frame(vehicle.q_static)
    for k, name in enumerate(WHEELS):
        fit, corner = fitted[name], desc.corners[k]
        e = fit.evaluate(0.0, 0.0)
        ic = m.index(f"C_{name}.x")
        np.testing.assert_allclose(e.position_m, R.T @ (vehicle.q_static[ic : ic + 3] - p0), atol=1e-9)
        assert e.angles_rad[2] == 0.0  # dive from the static knuckle frame
        assert e.angles_rad[0] == pytest.approx(vehicle.road_wheel_angles(vehicle.q_static)[k], abs=1e-9)
        assert e.d_dz[2] == pytest.approx(1.0, abs=1e-9)  # z is the travel itself
        assert fit.evaluate(0.05, 0.0).position_m[2] - e.position_m[2] == pytest.approx(0.05, abs=1e-9)
        # the YAML's static alignment: exactly at the design height, within 0.01 deg at the static point
        a = corner.spin_axis * corner.side  # to the left
        yaml_toe, yaml_camber = -corner.side * math.degrees(math.atan2(-a[0], a[1])), -corner.side * math.degrees(math.asin(a[2]))
        toe, camber = fit.alignment_deg(-fit.static_offset_m)
        assert toe == pytest.approx(yaml_toe, abs=1e-6) and camber == pytest.approx(yaml_camber, abs=1e-6)
        toe, camber = fit.alignment_deg(0.0)
        assert toe == pytest.approx(yaml_toe, abs=0.01) and camber == pytest.approx(yaml_camber, abs=0.01)
    assert yaml_camber == pytest.approx(-1.0, abs=1e-3)  # rr: the YAML comment's -1.0 deg
    assert abs(fitted["fl"].static_offset_m) < 1e-3  # static point within 1 mm of the design height


def test_camber_and_toe_gain_agree_with_the_description_figures(fitted, vehicle):
    """Over +-30 mm (rack fixed): front -0.26, rear -0.22 deg/cm camber; toe under 0.05 deg/cm (YAML comment
    and test_vehicle_description); the steering ratio agrees with DetailedVehicle.steering_ratio()."""
    gains = {}
    for name in WHEELS:
        fit = fitted[name]
        (tm, cm), (tp, cp) = fit.alignment_deg(-0.03), fit.alignment_deg(0.03)
        gains[name] = (cp - cm) / 6.0
        assert -0.5 <= gains[name] <= -0.1 and abs(tp - tm) / 6.0 <= 0.05, name
        local = -fit.side * math.degrees(fit.evaluate(0.0).d_dz[4]) / 100.0  # d camber / dz per cm at static
        assert local == pytest.approx(gains[name], abs=0.02)
    assert gains["fl"] == pytest.approx(-0.26, abs=0.01) and gains["rl"] == pytest.approx(-0.22, abs=0.01)
    k = vehicle.desc.steering.rack_travel_per_steering_wheel_rad_m
    steer_rate = np.mean([fitted[w].evaluate(0.0, 0.0).d_drack[3] for w in ("fl", "fr")])
    assert 1.0 / (k * steer_rate) == pytest.approx(vehicle.steering_ratio(), rel=1e-3)
    assert steer_rate == pytest.approx(7.7, abs=0.1)  # YAML: 7.7 rad of steer per m of rack
    spring = fitted["fl"].spring(0.0)
    assert spring.d_dz == pytest.approx(-0.667, abs=0.02)  # YAML: front motion ratio 0.667 (spring shortens in bump)
    assert fitted["rl"].spring(0.0).d_dz == pytest.approx(-0.945, abs=0.02)


# ---------------------------------------------------------------- sweep limits and input checks
def test_sweep_is_cut_where_the_corner_stops_assembling(vehicle):
    with pytest.warns(UserWarning, match="does not assemble"):
        sweep = kf.sweep_corner(vehicle, "fl", np.arange(-0.40, 0.4001, 0.04), [0.0])
    assert -0.40 < sweep.travel_m[0] < -0.1 and 0.1 < sweep.travel_m[-1] < 0.40
    assert sweep.requested_travel_m == pytest.approx((-0.40, 0.40))
    assert np.all(np.isfinite(sweep.values))
    assert vehicle.rack_input.value == 0.0


def test_sweep_rejects_bad_input(vehicle):
    with pytest.raises(ValueError, match="not steered"):
        kf.sweep_corner(vehicle, "rl", [0.0, 0.01], [0.0])
    with pytest.raises(ValueError, match="steered"):
        kf.sweep_corner(vehicle, "fl", [0.0, 0.01])
    with pytest.raises(ValueError, match="increasing"):
        kf.sweep_corner(vehicle, "rl", [0.01, 0.0])
    with pytest.raises(ValueError, match="unknown corner"):
        kf.sweep_corner(vehicle, "xx", [0.0])
    with pytest.raises(kf.KinematicsError, match="at least 6 nodes"):
        kf.CornerKinematics("rl", 1, np.linspace(0, 0.01, 4), [0.0], np.zeros((4, 1, 7)), 0.0)


# ---------------------------------------------------------------- cache
def _no_solving(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the cache hit must not solve the detailed model")

    monkeypatch.setattr(kf, "sweep_corner", boom)
    monkeypatch.setattr(kf, "_sweep_vehicle", boom)
    monkeypatch.setattr("state_observer.vehicle.detailed.DetailedVehicle.solve_statics", boom)


def _same(a, b):
    for name in WHEELS:
        np.testing.assert_array_equal(a[name].spline_tables[0], b[name].spline_tables[0])
        assert a[name].static_offset_m == b[name].static_offset_m
        assert a.residuals[name] == b.residuals[name]
        for x, y in zip(a[name].evaluate(0.0123, 0.0111), b[name].evaluate(0.0123, 0.0111)):
            np.testing.assert_array_equal(x, y)


def test_cache_hit_is_identical_and_does_not_solve(fitted, desc, monkeypatch):
    assert not fitted.from_cache and fitted.cache_path.is_file()
    _no_solving(monkeypatch)
    again = kf.fit_vehicle_kinematics(desc, fitted.cache_path.parent)
    assert again.from_cache and again.key == fitted.key and again.sweep_time_s == fitted.sweep_time_s
    _same(again, fitted)


def test_cached_static_position_builds_the_same_reduced_model(fitted, desc, vehicle, monkeypatch):
    """The static position is kept with the kinematics: a reduced model built from the cache does not solve the statics,
    and is the one built by solving them (same q_static, same first steps); another description or an entry written
    before it was kept solves them again."""
    from state_observer.vehicle.reduced import ReducedVehicle

    np.testing.assert_allclose(fitted.static_position(desc), vehicle.q_static, rtol=0, atol=1e-12)
    heavy = dataclasses.replace(desc, chassis=dataclasses.replace(desc.chassis, mass_kg=desc.chassis.mass_kg + 50.0))
    assert fitted.static_position(heavy) is None
    solved = ReducedVehicle(desc, kinematics=fitted, detailed=vehicle)
    with monkeypatch.context() as patch:
        _no_solving(patch)
        cached = ReducedVehicle(desc, kinematics=kf.fit_vehicle_kinematics(desc, fitted.cache_path.parent))
    for v in (solved, cached):
        v.start(speed_m_s=15.0)
        v.set_inputs(0.5, np.zeros(4), np.zeros(4))
        for _ in range(25):
            assert v.step().success
    np.testing.assert_allclose(cached.detailed.q_static, vehicle.q_static, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cached.solver.q, solved.solver.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(cached.solver.qd, solved.solver.qd, rtol=0, atol=1e-9)
    # an entry without it (written by an earlier version): the statics are solved and the entry completed
    with np.load(fitted.cache_path) as z:
        arrays = {k: z[k] for k in z.files if k != "q_static"}
    old = fitted.cache_path.parent / "old"
    old.mkdir()
    np.savez(old / fitted.cache_path.name, **arrays)
    again = kf.fit_vehicle_kinematics(desc, old)
    np.testing.assert_allclose(again.static_position(desc), vehicle.q_static, rtol=0, atol=1e-12)
    with np.load(old / fitted.cache_path.name) as z:
        assert "q_static" in z.files


def test_cache_key_follows_the_geometry_only(desc, tmp_path, monkeypatch):
    key = kf.geometry_key(desc)
    moved = dataclasses.replace(desc.corners[0], lower_arm=dataclasses.replace(
        desc.corners[0].lower_arm, ball_joint_m=desc.corners[0].lower_arm.ball_joint_m + [0.0, 0.0, 0.001]))
    assert kf.geometry_key(dataclasses.replace(desc, corners=(moved,) + desc.corners[1:])) != key
    steering = dataclasses.replace(desc, steering=dataclasses.replace(desc.steering, max_steering_wheel_angle_rad=8.0))
    assert kf.geometry_key(steering) != key
    assert kf.geometry_key(desc, travel_step_m=0.005) != key
    heavy = dataclasses.replace(desc, chassis=dataclasses.replace(desc.chassis, mass_kg=1450.0))
    stiff = dataclasses.replace(desc.corners[0], tire=dataclasses.replace(desc.corners[0].tire, vertical_stiffness_n_per_m=250e3),
                                spring_damper=dataclasses.replace(desc.corners[0].spring_damper, stiffness_n_per_m=70e3))
    assert kf.geometry_key(heavy) == key and kf.geometry_key(dataclasses.replace(desc, corners=(stiff,) + desc.corners[1:])) == key
    assert kf.statics_key(heavy) != kf.statics_key(desc)
    # another mass: the cached sweep is reused, only the static point is solved again
    base = kf.fit_vehicle_kinematics(desc, tmp_path, **COARSE)
    with monkeypatch.context() as patch:
        patch.setattr(kf, "sweep_corner", lambda *a, **k: pytest.fail("re-swept although the geometry is unchanged"))
        other = kf.fit_vehicle_kinematics(heavy, tmp_path, **COARSE)
    assert other.from_cache and other.key == base.key
    heavy_vehicle = DetailedVehicle(heavy)
    heavy_vehicle.solve_statics()
    for name, offset in kf.static_offsets(heavy_vehicle).items():  # the heavier car's own static point
        assert other[name].static_offset_m == pytest.approx(offset, abs=1e-12)
        assert abs(offset - base[name].static_offset_m) > 5e-6
    np.testing.assert_array_equal(other["fl"].spline_tables[0], base["fl"].spline_tables[0])
    monkeypatch.setenv("STATE_OBSERVER_CACHE", str(tmp_path / "root"))
    assert kf.default_cache_dir() == tmp_path / "root" / "kinematics"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "nan"])
def test_corrupt_cache_entry_is_rebuilt_with_a_warning(desc, tmp_path, damage):
    first = kf.fit_vehicle_kinematics(desc, tmp_path, **COARSE)
    path = first.cache_path
    if damage == "garbage":
        path.write_bytes(b"not an npz file")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["fl_values"][3, 2, 4] = np.nan
        np.savez(path, **arrays)
    with pytest.warns(UserWarning, match="unusable.*rebuilding"):
        rebuilt = kf.fit_vehicle_kinematics(desc, tmp_path, **COARSE)
    assert not rebuilt.from_cache
    _same(rebuilt, first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kf.fit_vehicle_kinematics(desc, tmp_path, **COARSE).from_cache  # the rebuilt entry is good

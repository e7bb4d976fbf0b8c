"""The detailed vehicle against hand calculations: statics, steady cornering, braking, high speed."""
import math

import numpy as np
import pytest
from numdiff import jacobian_fd

from state_observer.mbs import mass_properties
from state_observer.sim.manoeuvres import MANOEUVRES, make_manoeuvre
from state_observer.sim.run import run
from state_observer.vehicle.description import load_vehicle
from state_observer.vehicle.detailed import DetailedVehicle

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)

G = 9.81


@pytest.fixture(scope="module")
def desc():
    from state_observer.paths import default_vehicle_path

    return load_vehicle(default_vehicle_path())


def drive(desc, manoeuvre, mu=None):
    vehicle = DetailedVehicle(desc, mu=mu)
    samples = list(run(vehicle, manoeuvre))
    return vehicle, samples


def test_static_wheel_loads_match_the_mass_distribution(desc):
    vehicle = DetailedVehicle(desc)
    vehicle.start(speed_m_s=0.0)
    vehicle.set_inputs(0.0, np.zeros(4), np.zeros(4))
    for _ in range(50):  # stays put
        assert vehicle.step().success
    truth = vehicle.truth()
    mass, com = mass_properties(vehicle.model, vehicle.solver.q)
    assert mass == pytest.approx(desc.total_mass_kg, rel=1e-9)
    xf = desc.corners[0].wheel_centre_m[0]
    xr = desc.corners[2].wheel_centre_m[0]
    front_share = (com[0] - xr) / (xf - xr)  # lever rule with the centre of mass of every body
    fz = truth.tire_force_n[:, 2]
    assert fz.sum() == pytest.approx(mass * G, rel=1e-3)
    np.testing.assert_allclose(fz[:2], 0.5 * front_share * mass * G, rtol=0.01)
    np.testing.assert_allclose(fz[2:], 0.5 * (1 - front_share) * mass * G, rtol=0.01)
    assert np.linalg.norm(truth.velocity_enu_m_s) < 1e-3
    np.testing.assert_allclose(truth.suspension_travel_m, 0.0, atol=1e-5)  # measured along the chassis z axis


def bicycle_steady_state(desc, vehicle, speed, delta_f, delta_r):
    """Linear single-track model with the same axle cornering stiffnesses: yaw rate and CoM sideslip."""
    mass, com = mass_properties(vehicle.model, vehicle.q_static)
    xf = np.mean([c.wheel_centre_m[0] for c in desc.corners[:2]])
    xr = np.mean([c.wheel_centre_m[0] for c in desc.corners[2:]])
    a, b = xf - com[0], com[0] - xr
    L = a + b
    loads = vehicle.static_wheel_loads()
    cf = sum(c.tire.cornering_stiffness_per_rad * fz for c, fz in zip(desc.corners[:2], loads[:2]))
    cr = sum(c.tire.cornering_stiffness_per_rad * fz for c, fz in zip(desc.corners[2:], loads[2:]))
    K = mass / L * (b / cf - a / cr)  # understeer gradient (rad s^2/m)
    r = speed * (delta_f - delta_r) / (L + K * speed**2)
    beta = b * r / speed + delta_r - mass * speed * r * a / (L * cr)
    return r, beta, com


def test_steady_circle_agrees_with_the_single_track_model(desc):
    speed, radius = 10.0, 50.0  # 2 m/s^2: linear tires
    vehicle, samples = drive(desc, make_manoeuvre("steady_circle", radius_m=radius, speed_m_s=speed, duration_s=20.0))
    tail = samples[-1000:]  # last 4 s
    yaw_rate = np.mean([s.angular_velocity_body_rad_s[2] for s in tail])
    assert yaw_rate == pytest.approx(speed / radius, rel=0.03)  # it really drives the circle
    angles = np.mean([vehicle.road_wheel_angles(q) for q in [vehicle.solver.q]], axis=0)
    static = vehicle.road_wheel_angles(vehicle.q_static)
    delta_f = np.mean(angles[:2] - static[:2])
    delta_r = np.mean(angles[2:] - static[2:])
    r_pred, beta_pred, com = bicycle_steady_state(desc, vehicle, speed, delta_f, delta_r)
    betas = []
    for s in tail:
        w, x, y, z = s.orientation_wxyz
        R = _matrix(s.orientation_wxyz)
        v_body = R.T @ s.velocity_enu_m_s + np.cross(s.angular_velocity_body_rad_s, com)
        betas.append(math.atan2(v_body[1], v_body[0]))
    beta = np.mean(betas)
    assert yaw_rate == pytest.approx(r_pred, rel=0.10)
    assert beta == pytest.approx(beta_pred, rel=0.10)
    assert abs(beta) > 2e-3  # a real sideslip, not a trivially small one


def _matrix(q):
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def test_straight_braking_on_mu_08_peaks_near_08_g(desc):
    vehicle, samples = drive(desc, make_manoeuvre("accelerate_brake", top_speed_m_s=25.0, duration_s=14.0, mu=0.8))
    t = np.array([s.t_s for s in samples])
    speed = np.array([np.linalg.norm(s.velocity_enu_m_s[:2]) for s in samples])
    window = 0.5  # s: deceleration over half a second, past the pitch and tire-deflection transients
    k = int(round(window / 0.004))
    decel = -(speed[k:] - speed[:-k]) / (t[k:] - t[:-k])
    moving = speed[k:] > 2.0
    peak = decel[moving].max()
    assert peak == pytest.approx(0.8 * G, rel=0.05)
    assert speed[-1] < 0.05  # it stopped
    # full throttle and full brake through traction control and ABS: the wheels neither spin up nor lock (without
    # them the front wheels reached a slip ratio of 30 at full throttle, 800 m/s at the tread)
    slip = np.array([s.slip_ratio for s in samples])[speed > 2.0]
    assert np.abs(slip).max() < 0.5 and np.percentile(np.abs(slip[:, :2]), 90) > 0.05  # held near the tires' peak, not idle
    assert vehicle.max_position_violation < 1e-7


def test_straight_at_40_m_s_for_30_s(desc):
    vehicle, samples = drive(desc, make_manoeuvre("straight", speed_m_s=40.0, duration_s=30.0))
    speed = np.array([np.linalg.norm(s.velocity_enu_m_s[:2]) for s in samples])
    assert samples[-1].t_s == pytest.approx(30.0)
    assert np.all(np.abs(speed[2500:] - 40.0) < 0.5)
    assert abs(samples[-1].position_enu_m[1]) < 0.5  # on its lane
    assert np.all(np.isfinite(vehicle.solver.q))
    assert vehicle.max_position_violation < 1e-7


@pytest.mark.parametrize("name", [n for n in MANOEUVRES if n != "straight"])
def test_every_manoeuvre_runs_within_constraint_tolerance(desc, name):
    vehicle, samples = drive(desc, make_manoeuvre(name))
    assert samples[-1].t_s == pytest.approx(make_manoeuvre(name).duration_s)
    assert vehicle.max_position_violation < 1e-7
    assert vehicle.max_velocity_violation < 1e-3
    fz = np.array([s.tire_force_n[:, 2] for s in samples])
    assert np.all(fz >= 0.0) and np.all(np.isfinite(fz))


def _forces(model, element, q, qd, t=0.5):
    n = model.n
    Q, K, C = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
    element.accumulate(q, qd, t, Q, K, C)
    return Q, K, C




@pytest.mark.parametrize("downforce_area_m2", [0.0, 2.0])
def test_chassis_load_jacobians_match_finite_differences(desc, downforce_area_m2):
    import dataclasses

    from state_observer.vehicle.chassis_loads import _AeroDrag, _AntiRollBar

    aero = dataclasses.replace(desc.aerodynamics, downforce_area_m2=downforce_area_m2)
    vehicle = DetailedVehicle(dataclasses.replace(desc, aerodynamics=aero))
    model = vehicle.model
    q, qd = vehicle.initial_state(speed_m_s=25.0)
    rng = np.random.default_rng(3)
    q = q + 1e-3 * rng.standard_normal(model.n)  # off the design: the bar is twisted
    qd = qd + 0.1 * rng.standard_normal(model.n)
    elements = [f for f in model.forces if isinstance(f, (_AeroDrag, _AntiRollBar))]
    assert {type(e) for e in elements} == {_AeroDrag, _AntiRollBar}
    for element in elements:
        _, K, C = _forces(model, element, q, qd)
        if isinstance(element, _AntiRollBar):
            assert np.abs(K).max() > 0
            np.testing.assert_allclose(K, -jacobian_fd(lambda x: _forces(model, element, x, qd)[0], q), rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(C, -jacobian_fd(lambda x: _forces(model, element, q, x)[0], qd), rtol=1e-5, atol=1e-3)


def test_wheel_load_damping_matches_finite_differences(desc):
    """The tire/brake damping matrix is exact; the stiffness keeps the vertical tire spring (checked there)."""
    vehicle = DetailedVehicle(desc)
    model = vehicle.model
    q, qd = vehicle.initial_state(speed_m_s=15.0)
    rng = np.random.default_rng(5)
    qd = qd + 0.2 * rng.standard_normal(model.n)
    wheels = vehicle.wheels
    wheels.start(q, qd, 0.0)
    wheels.brake_torque_n_m = np.array([300.0, 300.0, 100.0, 100.0])
    _, K, C = _forces(model, wheels, q, qd, t=0.004)
    C_fd = -jacobian_fd(lambda x: _forces(model, wheels, q, x, t=0.004)[0], qd)
    assert np.abs(C).max() > 1e3
    np.testing.assert_allclose(C, C_fd, rtol=1e-4, atol=1e-2 * np.abs(C).max() * 1e-3)
    K_fd = -jacobian_fd(lambda x: _forces(model, wheels, x, qd, t=0.004)[0], q)
    z = model.indices([f"C_{w}.z" for w in ("fl", "fr", "rl", "rr")])
    np.testing.assert_allclose(np.diag(K)[z], np.diag(K_fd)[z], rtol=0.05)


def test_runs_the_same_on_a_flat_mesh_road(desc):
    from state_observer.vehicle.road import MeshRoad

    mesh = MeshRoad.grid((-20.0, 200.0), (-30.0, 30.0), 2.0)
    runs = []
    for road in (None, mesh):
        vehicle = DetailedVehicle(desc, road=road)
        samples = list(run(vehicle, make_manoeuvre("step_steer", duration_s=4.0)))
        runs.append(samples[-1])
    np.testing.assert_allclose(runs[0].position_enu_m, runs[1].position_enu_m, atol=1e-6)
    np.testing.assert_allclose(runs[0].tire_force_n, runs[1].tire_force_n, atol=1e-3)


def test_starts_on_a_graded_road_away_from_the_origin(desc):
    """Started 100 m up a 3 % grade the car stands on the road (3 m higher) with the loads it has at the origin:
    the statics, solved at the origin, are lifted by the road's rise, not only moved across (before: 3 m of air), and
    the car drives along the road, not into it (before: 10 % more load at the first step)."""
    from state_observer.vehicle.road import FlatRoad

    vehicle = DetailedVehicle(desc, road=FlatRoad(grade_x=0.03))
    states = []
    for position in ((0.0, 0.0), (100.0, 20.0)):
        vehicle.start(speed_m_s=10.0, position_m=position)
        vehicle.set_inputs(0.0, np.zeros(4), np.zeros(4))
        assert vehicle.step().success
        states.append(vehicle.truth())
    assert states[1].position_enu_m[2] - states[0].position_enu_m[2] == pytest.approx(3.0, abs=0.01)
    np.testing.assert_allclose(states[1].tire_force_n[:, 2], states[0].tire_force_n[:, 2], rtol=1e-3)
    assert states[0].tire_force_n[:, 2].sum() == pytest.approx(desc.total_mass_kg * G, rel=0.005)


def test_quaternion_from_matrix_matches_scipy():
    from scipy.spatial.transform import Rotation

    from state_observer.conventions import quaternion_from_matrix

    for r in Rotation.random(300, random_state=4):
        x, y, z, w = r.as_quat()
        expected = np.array([w, x, y, z]) * np.sign(w)
        np.testing.assert_allclose(quaternion_from_matrix(r.as_matrix()), expected, atol=1e-12)

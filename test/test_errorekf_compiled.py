"""The compiled paths of the errorEKF-FE and the SPI against their plain numpy definitions: sensor blocks
(H mapped onto the error state, innovation, gate, Joseph form), the IMU and wheel-rate updates, the
covariance propagation with F kept as its velocity rows, the feedback, and the SPI's force residuals; with and
without the extra states (IMU biases, model parameters), whose acceleration response is checked against the model."""
import math
import numpy as np
import pytest

from state_observer.estimation import errorekf as ekf
from state_observer.estimation.errorekf import N, ErrorEkfSettings, VehicleErrorEKF
from state_observer.estimation.kalman import SensorStatistics, sequential_update
from state_observer.sensors import models


EXTRAS = dict(imu_biases=True, parameters=("mass", "cornering_front", "cornering_rear", "longitudinal"), road_slope=True)


def new_filter(settings: ErrorEkfSettings | None = None, **start) -> VehicleErrorEKF:
    """An errorEKF-FE on the default vehicle's 14-DOF model, started at 15 m/s (``start``: other arguments of start)."""
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = load_vehicle(default_vehicle_path())
    f = VehicleErrorEKF(ReducedVehicle(desc), mounts_from_vehicle(desc), settings)
    f.start(**{"speed_m_s": 15.0, **start})
    return f


@pytest.fixture(scope="module", params=["plain", "extras"])
def filt(request):
    f = new_filter(ErrorEkfSettings(**(EXTRAS if request.param == "extras" else {})))
    f.vehicle.set_inputs(0.4, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(30):
        assert f.predict()
        f.correct()
    assert f.predict()
    rng = np.random.default_rng(4)
    f.x[:] = rng.standard_normal(len(f.x)) * 1e-3  # as after earlier blocks of the step
    f.x[2 * N : 2 * N + len(f.force_names)] *= 1e3  # force errors in N
    return f


def slope_direct(f):
    """How the accelerometer's reading changes with gravity's east and north components at the model's own accelerations
    (3, 2), by central differences of the sensor model."""
    q, qd, qdd = model_state(f)
    m, g, out = f.mounts, f.gravity_enu(), np.zeros((3, 2))
    for k in range(2):
        dg = np.eye(3)[k] * 1e-3
        out[:, k] = (models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation, g + dg)[0]
                     - models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation, g - dg)[0]) / 2e-3
    return out


def mapped(f, H, bias_col=-1, h=None, scale_col=-1, tilt_col=-1, wheel_scale_col=-1, slope_col=-1):
    """H over [z, z_dot, z_ddot] onto [dz, dz_dot, e]: dz_ddot = A dz + B dz_dot + Gp e, plus the identity on a sensor's
    bias columns, the reading on the scale factor's and d(h + h x d)/dd on the tilt's (d = (dx, dy, 0)); wheel rates
    (1 + k) h with k their axle's scale factor: h on the axle's column from ``wheel_scale_col``; an accelerometer's
    direct response to the road slope (gravity's east and north components) on the two from ``slope_col``."""
    lin = f.linearisation
    out = np.zeros((H.shape[0], len(f.x)))
    out[:, : 2 * N] = H[:, : 2 * N]
    out[:, :N] += H[:, 2 * N :] @ lin.A
    out[:, N : 2 * N] += H[:, 2 * N :] @ lin.B
    out[:, 2 * N :] += H[:, 2 * N :] @ lin.Gp
    if bias_col >= 0:
        out[:, bias_col : bias_col + 3] += np.eye(3)
    if scale_col >= 0:
        out[2, scale_col] += h[2]
    if tilt_col >= 0:
        out[:, tilt_col : tilt_col + 2] += np.cross(h, np.eye(3)[:, :2].T).T
    if wheel_scale_col >= 0:
        out[[0, 1], wheel_scale_col] += h[:2]
        out[[2, 3], wheel_scale_col + 1] += h[2:]
    if slope_col >= 0:
        out[:, slope_col : slope_col + 2] += slope_direct(f)
    return out


def reference_block(f, x, P, y, h, H, R, bias_col=-1, scale_col=-1, tilt_col=-1, wheel_scale_col=-1, slope_col=-1):
    Hm = mapped(f, H, bias_col, h, scale_col, tilt_col, wheel_scale_col, slope_col)
    stats = SensorStatistics()
    accepted = sequential_update(x, P, y - h - Hm @ x, Hm, R, f.gate(len(y)), stats)
    return accepted, stats


def model_state(f):
    """q, qd, qdd of the filter's model."""
    s = f.vehicle.solver
    return s.q, s.qd, s.qdd


def test_sensor_blocks_match_the_numpy_update(filt):
    f = filt
    q, qd, qdd = model_state(f)
    m = f.mounts
    rng = np.random.default_rng(5)
    blocks = [(*models.gyroscope(q, qd, m.imu_rotation), f.gyro_bias_col, f.gyro_scale_col, f.imu_tilt_col, -1),
              (*models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation), f.accel_bias_col, -1, f.imu_tilt_col, f.slope_col),
              (*models.gnss_velocity(q, qd, m.gnss_position_m), -1, -1, -1, -1)]
    assert (f.slope_col >= 0) == f.settings.road_slope
    for h, H, bias_col, scale_col, tilt_col, slope_col in blocks:
        y = h + rng.standard_normal(3) * 0.05
        R = np.eye(3) * 0.01
        x0, P0 = f.x.copy(), f.P.copy()
        accepted, stats = reference_block(f, x0, P0, y, h, H, R, bias_col, scale_col, tilt_col, slope_col=slope_col)
        x1, P1, nu = f.x.copy(), f.P.copy(), np.empty(3)
        lin = f.linearisation
        nis = ekf.error_block(x1, P1, y, h, H, R, lin.A, lin.B, lin.Gp, f.gate(3), nu, bias_col, scale_col, tilt_col, slope_col)
        assert accepted and nis == pytest.approx(stats.last_nis, rel=1e-9)
        np.testing.assert_allclose(nu, stats.last_innovation, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12 * np.abs(x0).max())
        np.testing.assert_allclose(P1, P0, rtol=0, atol=1e-10 * np.abs(P0).max())
        assert np.array_equal(P1, P1.T)


def test_imu_and_wheel_updates_match_the_block_by_block_path(filt):
    f = filt
    q, qd, qdd = model_state(f)
    m = f.mounts
    gyro = models.gyroscope(q, qd, m.imu_rotation)[0] + 0.01
    accel = models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0] - 0.1
    rates = qd[10:14] + 0.05
    x0, P0 = f.x.copy(), f.P.copy()
    expected = []
    s = f.settings
    # the sample's sigma, what the model cannot reproduce and, on the car's roll and pitch axes turned into the sensor's by
    # its mounting S, the road's own turning: diag(S^T diag(s^2, s^2, 0) S) (here s = 0.1 rad/s; _track_road_rate sets it)
    S = np.asarray(m.imu_rotation, float)
    road = np.diag(S.T @ np.diag([1.0, 1.0, 0.0]) @ S) * 0.1**2
    assert road[:2].sum() > 0.0 and road[2] == 0.0
    road_var = f._gyro_road_var
    f._gyro_road_var = road
    R_gyro = np.diag(0.01**2 + s.gyro_model_sigma**2 + road)
    accel_model_sigma = s.accelerometer_model_sigma + s.accelerometer_model_relative * np.hypot(qdd[0], qdd[1])  # and a share of the model's acceleration
    R_accel = np.eye(3) * (0.1**2 + accel_model_sigma**2)
    R_wheels = np.diag(0.05**2 + np.square(s.wheel_rate_model_sigma * qd[10:14]))
    tilt, wheel_scale = f.imu_tilt.copy(), f.wheel_scale.copy()
    f.imu_tilt[:] = (0.004, -0.006)  # rad: the estimated tilt turns the readings back, R(d) y = y + d x y
    f.wheel_scale[:] = (0.01, -0.005)  # the rates are read as (1 + k) times the spins: divided by it
    slope = f.road_slope.copy()
    if f.slope_col >= 0:
        f._set_road_slope(np.array([0.2, -0.1]))  # m/s^2 of gravity east and north: the accelerometer's prediction reads it
    d = np.array([0.004, -0.006, 0.0])
    corrected_gyro = gyro - f.imu_bias[:3]  # the estimated biases, tilt and z scale factor removed
    corrected_gyro += np.cross(d, corrected_gyro)
    corrected_gyro[2] /= 1.0 + f.gyro_scale
    corrected_accel = accel - f.imu_bias[3:]
    corrected_accel += np.cross(d, corrected_accel)
    seen = f._gnss_accepted_t, f._gnss_since_t
    f._gnss_accepted_t, f._gnss_since_t = f.t, f.t - 100.0  # as after a GNSS update: the scales are observed
    assert f.wheel_scale_column() == f.wheel_scale_col >= 0 and np.all(f.wheel_scale_observed())
    corrected_rates = rates / (1.0 + np.array([0.01, 0.01, -0.005, -0.005]))
    for name, y, R, col, scale, tilt_col, wheel_col, slope_col in (
            ("gyroscope", corrected_gyro, R_gyro, f.gyro_bias_col, f.gyro_scale_column(), f.imu_tilt_col, -1, -1),
            ("accelerometer", corrected_accel, R_accel, f.accel_bias_col, -1, f.imu_tilt_col, -1, f.slope_col),
            ("wheel_rates", corrected_rates, R_wheels, -1, -1, -1, f.wheel_scale_col, -1)):
        h, H = f.measurement_model(name)
        if name == "accelerometer":  # the model's reading on the sloping road: R^T (a - g) with g tilted
            g = np.array([0.2, -0.1, -9.81]) if f.slope_col >= 0 else np.array([0.0, 0.0, -9.81])
            np.testing.assert_allclose(h, models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation, g)[0], rtol=1e-12)
        accepted, _ = reference_block(f, x0, P0, y, h, H, R, col, scale, tilt_col, wheel_col, slope_col)
        expected.append(accepted)
    stats = dict(f.stats)
    try:
        f.stats = {name: SensorStatistics() for name in stats}
        assert f.update_imu(gyro, accel, 0.01, 0.1) == tuple(expected[:2])
        assert f.update_wheel_rates(rates, 0.05) == expected[2]
        np.testing.assert_allclose(f.x, x0, rtol=1e-9, atol=1e-12 * np.abs(x0).max())
        np.testing.assert_allclose(f.P, P0, rtol=0, atol=1e-10 * np.abs(P0).max())
    finally:
        f.stats = stats
        f._gyro_road_var = road_var
        f.imu_tilt[:] = tilt
        f.wheel_scale[:] = wheel_scale
        f._set_road_slope(slope)
        f._gnss_accepted_t, f._gnss_since_t = seen


def test_covariance_propagation_and_feedback_match_the_dense_forms(filt):
    f = filt
    F = f.transition_matrix()  # also refreshes G, A, B, M
    lin = f.linearisation
    P = f.P.copy()
    assert np.all(lin.decay[: len(f.force_names)] < 1.0) and np.all(lin.decay[len(f.force_names) :] == 1.0)
    ekf.propagate_fe(P, lin.G, f.dt, f.plant, lin.decay, np.empty_like(P))
    expected = F @ f.P @ F.T + f.plant
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    solver = f.vehicle.solver
    x = f.x
    q, qd, qdd, finite = ekf.feed_back(x, solver.q, solver.qd, solver.qdd, lin.A, lin.B, lin.Gp, f.P)
    dz, dzd, e = x[:N], x[N : 2 * N], x[2 * N :]
    np.testing.assert_allclose(q, solver.q + dz, rtol=1e-14)
    np.testing.assert_allclose(qd, solver.qd + dzd, rtol=1e-14)
    np.testing.assert_allclose(qdd, solver.qdd + lin.A @ dz + lin.B @ dzd + lin.Gp @ e, rtol=1e-12, atol=1e-12)
    assert finite


def test_force_errors_are_fed_back_along_the_heading(filt):
    """A lateral force error becomes a generalised force across the heading at base_link: the model reproduces exactly
    the acceleration the filter assumed for it (the consistency the seeds' masked M a lacked)."""
    import copy

    f = copy.deepcopy(filt)
    f.linearise()
    k = f.force_names.index("lateral")
    yaw = f.vehicle.solver.q[5]
    before = f.vehicle.force_correction.copy()
    f.x[:] = 0.0
    f.x[2 * N + k] = 200.0
    f.correct()
    np.testing.assert_allclose(f.vehicle.force_correction - before, 200.0 * np.array([-np.sin(yaw), np.cos(yaw)] + [0.0] * (N - 2)), atol=1e-9)


def test_published_tire_forces_carry_the_lateral_correction_as_cornering_forces():
    """The lateral force and yaw-moment corrections go onto the tires as lateral (cornering) forces: across the car
    they sum to the correction and give its moment about base_link; a steered wheel's longitudinal force stays the
    model's (it follows the wheel torque; resolving a force across the car on a wheel steered 6 deg put 10 % of it on
    the wheel's longitudinal force: the harness' sine with dwell had Fx 11 % against the open loop's 9 %)."""
    f = new_filter()
    f.vehicle.set_inputs(1.6, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)  # 1.6 rad of steering wheel, ~0.1 rad at the road wheels
    for _ in range(30):
        assert f.predict()
        f.correct()
    v = f.vehicle
    model = v.tire_forces_n
    yaw = float(v.solver.q[5])
    c, s = np.cos(yaw), np.sin(yaw)
    v.force_correction[:] = 0.0
    v.force_correction[:2] = 300.0 * np.array([-s, c])  # 300 N to the car's left
    v.force_correction[5] = 150.0  # N m
    out = f.tire_forces()
    np.testing.assert_array_equal(out[:, 0], model[:, 0])
    np.testing.assert_array_equal(out[:, 2], model[:, 2])
    contact = v.contact
    added = out[:, 1] - model[:, 1]
    left = (-s, c)
    across = [added[w] * (left[0] * contact.ey[w, 0] + left[1] * contact.ey[w, 1]) for w in range(4)]  # each tire's lateral axis, across the car
    assert abs(contact.ey[0, 0] * c + contact.ey[0, 1] * s) > 0.05  # the front wheels are steered
    assert sum(across) == pytest.approx(300.0, rel=1e-9)
    forward = np.array([c, s])
    base = v.solver.q[:2]
    x_w = [(contact.P[w, :2] - base) @ forward for w in range(4)]  # the tires' positions along the car from base_link
    assert sum(a * x for a, x in zip(across, x_w)) == pytest.approx(150.0, rel=0.02)


@pytest.mark.parametrize("force_n", [800.0, -1500.0])
def test_without_measured_torques_the_longitudinal_correction_drives_the_wheels(force_n):
    """Unknown wheel torques: the force correction along the heading moves into the estimated drive (brake) force, which
    the model's wheels then carry as torque F r_i split as the vehicle file's drive (brake) torque limits; the tires
    settle at that force, and the longitudinal error walks by ``unknown_torque_walk``."""
    f = new_filter()
    f.torques_known = False
    for _ in range(10):
        assert f.predict()
        f.correct()
    v = f.vehicle
    fx_before = v.tire_forces_n[:, 0].sum()
    yaw = float(v.solver.q[5])
    v.force_correction[:2] = force_n * np.array([np.cos(yaw), np.sin(yaw)])
    v.force_correction[:2] += 50.0 * np.array([-np.sin(yaw), np.cos(yaw)])  # across the car: stays a correction
    assert f.predict()
    f.correct()
    assert f.unknown_drive_force_n == pytest.approx(force_n, rel=1e-9)
    along = np.cos(yaw) * v.force_correction[0] + np.sin(yaw) * v.force_correction[1]
    across = -np.sin(yaw) * v.force_correction[0] + np.cos(yaw) * v.force_correction[1]
    assert abs(along) < 1e-6 and across > 45.0
    desc = v.desc
    limits = np.array([c.max_drive_torque_n_m if force_n > 0 else c.max_brake_torque_n_m for c in desc.corners])
    torque = v.drive_torque_n_m if force_n > 0 else v.brake_torque_n_m
    np.testing.assert_allclose(torque, abs(force_n) * limits / limits.sum() * v.contact.r_s, rtol=0.01)
    assert not (v.brake_torque_n_m if force_n > 0 else v.drive_torque_n_m).any()
    for _ in range(100):  # 0.4 s: the wheels' slip settles
        assert f.predict()
        f.correct()
    assert v.tire_forces_n[:, 0].sum() - fx_before == pytest.approx(force_n, rel=0.1)
    k = 2 * N + f.force_names.index("longitudinal")
    assert f.plant[k, k] == pytest.approx(f.settings.unknown_torque_walk**2 * f.dt)
    f.torques_known = True  # measured torques again: the estimate is dropped
    for _ in range(5):
        assert f.predict()
    assert f.unknown_drive_force_n == 0.0 and f.plant[k, k] == pytest.approx(f.settings.force_walk["longitudinal"] ** 2 * f.dt, rel=0.5)


@pytest.mark.parametrize("travelled", [1.0, -1.0])
def test_without_measured_torques_a_standing_car_brakes_against_the_way_it_went(travelled):
    """Unknown wheel torques: after driving forwards (backwards) at 2 m/s the model stands and creeps the other way at
    1 cm/s (a standing car's jitter); a force correction against the way it went goes onto every wheel's brake (the
    brakes hold it), not onto the driven wheels as a drive the way it creeps; along the way it went it drives, and once
    the model goes the other way faster than ``travel_direction_speed_m_s`` the direction of travel turns."""
    f = new_filter(speed_m_s=0.0)
    f.torques_known = False
    assert f.predict()
    f.correct()
    v = f.vehicle
    yaw = float(v.solver.q[5])
    heading = np.array([np.cos(yaw), np.sin(yaw)])
    brakes = np.array([c.max_brake_torque_n_m for c in v.desc.corners])
    drives = np.array([c.max_drive_torque_n_m for c in v.desc.corners])

    def split(speed_m_s, force_n):
        v.solver.qd[:2] = speed_m_s * heading
        v.force_correction[:2] = (force_n - f.unknown_drive_force_n) * heading
        f._torques_from_correction()
        assert f.unknown_drive_force_n == pytest.approx(force_n, rel=1e-9)
        return v.drive_torque_n_m.copy(), v.brake_torque_n_m.copy()

    split(2.0 * travelled, 0.0)
    assert f.travel_direction == travelled
    drive, brake = split(-0.01 * travelled, -1500.0 * travelled)  # held against the way it went: brakes
    assert f.travel_direction == travelled and not drive.any()
    np.testing.assert_allclose(brake, 1500.0 * brakes / brakes.sum() * v.contact.r_s, rtol=1e-9)
    drive, brake = split(-0.01 * travelled, 800.0 * travelled)  # along the way it went: the driven wheels
    np.testing.assert_allclose(drive, 800.0 * travelled * drives / drives.sum() * v.contact.r_s, rtol=1e-9)
    assert not brake.any()
    drive, brake = split(-0.2 * travelled, -1500.0 * travelled)  # it goes the other way now: a drive that way
    assert f.travel_direction == -travelled and not brake.any()
    np.testing.assert_allclose(drive, -1500.0 * travelled * drives / drives.sum() * v.contact.r_s, rtol=1e-9)


def test_one_speed_on_both_wheels_of_an_axle_is_the_mean_of_their_rates():
    """A data set's vehicle speed put on both front wheels (the same number) is measured as the axle's mean rate: in a
    turn, where the model's front wheels turn at different rates, a speed equal to their mean changes nothing; taken
    per wheel it would pull both to it and tell the gyroscope the car does not turn."""
    f = new_filter()
    f.vehicle.set_inputs(3.0, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(100):
        assert f.predict()
        f.correct()
    assert f.predict()
    rates = f.vehicle.solver.qd[10:14].copy()
    assert abs(rates[0] - rates[1]) > 0.01 * abs(rates[0])  # the model turns
    assert ekf.axle_speeds([5.0, 5.0, np.nan, np.nan]) == (True, False)
    assert ekf.axle_speeds(rates) == (False, False)
    assert ekf.axle_speeds([0.0, 0.0, 1.0, 2.0]) == (False, False)  # standing wheels are wheels
    speed = 0.5 * (rates[0] + rates[1])
    P = f.P.copy()
    assert f.update_wheel_rates(np.array([speed, speed, np.nan, np.nan]), 0.05)
    np.testing.assert_allclose(f.x, 0.0, atol=1e-12)
    assert np.trace(f.P) < np.trace(P)  # it was used
    assert f.update_wheel_rates(np.array([speed + 0.5, speed + 0.5, np.nan, np.nan]), 0.05)
    assert f.x[N + 10] + f.x[N + 11] > 0.0  # the axle's mean rate follows the faster speed


@pytest.mark.parametrize("true_sigma, grows, meter", [(0.02, False, 400.0), (1.0, True, 0.0), (1.0, True, 400.0)])
def test_imu_noise_factor_follows_an_accelerometer_noisier_than_it_says(true_sigma, grows, meter):
    """An accelerometer whose noise (1 m/s^2, vibration) is ten times the 0.1 m/s^2 the filter is told (with its model
    share): without the noise meter the block's noise factor grows until the NIS matches its dof; with it the measured
    sigma (1 m/s^2, from the readings' second differences) is used and the factor stays near 1.  Either way the gate
    passes nearly every sample and the filter says by how much it widened the noise; one as quiet as it says keeps
    both at 1 (the harness' figures are unchanged)."""
    f = new_filter(ErrorEkfSettings(imu_noise_meter_samples=meter))
    rng = np.random.default_rng(7)
    stats = f.stats["accelerometer"]
    rejected_early = None
    for step in range(3000):  # 12 s, one IMU sample per step
        assert f.predict()
        accel = np.array([0.0, 0.0, 9.81]) + rng.normal(0.0, true_sigma, 3)
        f.update_imu(rng.normal(0.0, 1e-3, 3), accel, 1e-3, 0.1)
        f.correct()
        if step == 1000:
            rejected_early = stats.rejected
    scale = f.imu_noise_scale["accelerometer"]
    excess = f.imu_noise_excess()
    if grows and not meter:
        told = 0.1**2 + f.settings.accelerometer_model_sigma**2
        assert 0.3 * true_sigma**2 / told < scale < 3.0 * true_sigma**2 / told
        assert stats.nis_mean_recent == pytest.approx(3.0, rel=0.5)
        assert excess["accelerometer"] == pytest.approx(math.sqrt(scale))
    elif grows:
        np.testing.assert_allclose(f.imu_noise_meters[1].sigma(), true_sigma, rtol=0.1)
        assert excess["accelerometer"] > 0.8 * true_sigma / 0.1 and scale < 3.0  # without the meter: ~100 (the case above)
    else:
        assert scale == 1.0 and excess["accelerometer"] == 1.0
    if grows:
        assert stats.rejected - rejected_early < 0.05 * 2000  # the last 8 s: the gate passes nearly everything
    assert f.imu_noise_scale["gyroscope"] == 1.0 and excess["gyroscope"] == 1.0


@pytest.mark.parametrize("speed", [15.0, 2.5])
def test_plant_noise_across_the_heading_falls_with_the_square_of_a_low_speed(speed):
    """White acceleration along the heading at its intensity; across it the same above lateral_plant_speed_m_s (10 m/s)
    and (v / 10)^2 of it below (at walking pace the steering geometry sets the slip angles); on the wheel spins (v / 20)^2
    of theirs below spin_plant_speed_m_s (a spin error is a slip error d_omega r / v); on the heave, roll, pitch and
    travels (v / 10)^2 of theirs below vertical_plant_speed_m_s (the road's excitation grows with the speed)."""
    s = ErrorEkfSettings()
    f = new_filter(s, speed_m_s=speed)
    assert f.predict()
    yaw = float(f.vehicle.solver.q[5])
    along, across = np.array([np.cos(yaw), np.sin(yaw)]), np.array([-np.sin(yaw), np.cos(yaw)])
    velocity_block = f.plant[N : N + 2, N : N + 2] / f.dt  # the velocity rows of the white-acceleration noise: q dt
    speed_now = np.hypot(*f.vehicle.solver.qd[:2])
    assert along @ velocity_block @ along == pytest.approx(s.plant_sigma2[0], rel=1e-9)
    assert across @ velocity_block @ across == pytest.approx(s.plant_sigma2[1] * min((speed_now / s.lateral_plant_speed_m_s) ** 2, 1.0), rel=1e-9)
    spins = np.arange(10, 14)
    spin_share = (speed_now / s.spin_plant_speed_m_s) ** 2
    assert 0.01 < spin_share < 0.6
    np.testing.assert_allclose(np.diag(f.plant)[N + spins] / f.dt, s.plant_sigma2[spins] * spin_share, rtol=1e-9)
    np.testing.assert_allclose(f.plant[np.ix_(spins, N + spins)], np.diag(f._white_block[0, 1] * s.plant_sigma2[spins] * spin_share), rtol=1e-9)
    vertical = np.array([2, 3, 4, 6, 7, 8, 9])
    vertical_share = min((speed_now / s.vertical_plant_speed_m_s) ** 2, 1.0)
    assert vertical_share == 1.0 if speed > s.vertical_plant_speed_m_s else 0.01 < vertical_share < 0.6
    np.testing.assert_allclose(np.diag(f.plant)[N + vertical] / f.dt, s.plant_sigma2[vertical] * vertical_share, rtol=1e-9)
    np.testing.assert_allclose(f.plant[np.ix_(vertical, N + vertical)], np.diag(f._white_block[0, 1] * s.plant_sigma2[vertical] * vertical_share), rtol=1e-9)


def test_plant_noise_across_the_heading_comes_back_after_a_low_speed():
    """With equal intensities along and across the heading, the block written at a low speed (across it scaled down) is
    rewritten at speed, not kept."""
    s = ErrorEkfSettings()
    s.plant_sigma2[1] = s.plant_sigma2[0]
    f = new_filter(s, speed_m_s=2.5)
    assert f.predict()
    solver = f.vehicle.solver
    solver.qd = solver.qd.copy()
    solver.qd[:2] *= 15.0 / np.hypot(*solver.qd[:2])
    f.linearise()
    yaw = float(solver.q[5])
    across = np.array([-np.sin(yaw), np.cos(yaw)])
    assert across @ (f.plant[N : N + 2, N : N + 2] / f.dt) @ across == pytest.approx(s.plant_sigma2[1], rel=1e-9)


@pytest.mark.parametrize("steering_rad", [0.0, 0.8])
def test_yaw_plant_noise_grows_with_the_square_of_the_lateral_acceleration(steering_rad):
    """The yaw's white acceleration is a tire model's error: yaw_plant_floor of plant_sigma2[5] plus (a_y / 2 m/s^2)^2
    of it, capped at the whole; straight ahead (a_y ~ 0) the floor, in a firm turn the whole.  Its position-velocity
    block is the white-acceleration one (dt^3/3, dt^2/2; dt)."""
    s = ErrorEkfSettings()
    f = new_filter(s)
    f.vehicle.set_inputs(steering_rad, [150.0, 150.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(400):  # 1.6 s: the turn is established
        assert f.predict()
        f.correct()
    solver = f.vehicle.solver
    yaw = float(solver.q[5])
    a_lat = -np.sin(yaw) * solver.qdd[0] + np.cos(yaw) * solver.qdd[1]
    share = min(1.0, s.yaw_plant_floor + (a_lat / s.yaw_plant_accel_m_s2) ** 2)
    assert (share == pytest.approx(s.yaw_plant_floor, rel=1e-3)) if steering_rad == 0.0 else share == 1.0, a_lat
    q, dt = s.plant_sigma2[5] * share, f.dt
    block = f.plant[np.ix_((5, N + 5), (5, N + 5))]
    assert block == pytest.approx(q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]]), rel=0.05)  # a_y as of the last re-linearisation


def test_force_walk_follows_the_smoothed_force_level_not_its_jitter():
    """The walk's rate part reads the tire forces' level smoothed over force_walk_smoothing_s: forces that jitter by
    +-200 N from one re-linearisation to the next (an IMU update's jolt) widen the lateral walk by less than a third of
    what they did unsmoothed, while a rise of 4 kN over 0.5 s (a turn-in) gives nearly the same total walk."""
    from dataclasses import replace

    def walks(settings, levels):
        f = new_filter(settings)
        k = f.force_names.index("lateral")
        out = []
        for level in levels:
            f._tire_force_scales = lambda: np.array([level if name == "lateral" else 0.0 for name in f.force_names])
            f._force_plant()
            out.append(f.plant[2 * N + k, 2 * N + k] / f.dt)  # walk^2
        return np.array(out[1:])

    s = ErrorEkfSettings()
    assert s.force_walk_smoothing_s > 0.0
    raw = replace(s, force_walk_smoothing_s=0.0)
    jitter = 1000.0 + 200.0 * (-1.0) ** np.arange(50)
    base = s.force_walk["lateral"]
    extra = lambda w: np.sqrt(w) - base  # the rate part of the walk (N per sqrt(s))
    assert extra(walks(s, jitter)).mean() < extra(walks(raw, jitter)).mean() / 3.0
    rise = np.concatenate([np.zeros(5), np.linspace(0.0, 4000.0, 25), np.full(25, 4000.0)])
    assert walks(s, rise).sum() == pytest.approx(walks(raw, rise).sum(), rel=0.25)


def test_lateral_force_walk_follows_the_force_change_less_at_walking_pace():
    """The rate part of the walk of the force errors across the heading (lateral forces, yaw moment) falls with the
    square of the speed below lateral_plant_speed_m_s, as the plant noise across the heading does (to 1/16 at 2.5 m/s
    of 10); the base part and the other force errors' walk do not."""
    from dataclasses import replace

    from state_observer.estimation.errorekf import LATERAL_FORCES

    s = ErrorEkfSettings()

    def walks(speed_m_s, rate):
        f = new_filter(replace(s, force_walk_rate=rate), speed_m_s=speed_m_s)
        f._previous_scales = None
        for level in (0.0, 2000.0):  # a change of every force the errors act beside
            f._tire_force_scales = lambda: np.full(len(f.force_names), level)
            f._force_plant()
        return np.sqrt(np.diag(f.plant)[2 * N : 2 * N + len(f.force_names)] / f.dt), f.force_names

    (fast, names), (slow, _) = walks(20.0, s.force_walk_rate), walks(2.5, s.force_walk_rate)
    (base, _), (base_slow, _) = walks(20.0, 0.0), walks(2.5, 0.0)
    np.testing.assert_allclose(base_slow, base, rtol=1e-12)
    across = set(LATERAL_FORCES) | {"yaw"}
    assert across & set(names) and set(names) - across
    for k, name in enumerate(names):
        share = (2.5 / s.lateral_plant_speed_m_s) ** 2 if name in across else 1.0
        assert fast[k] - base[k] > 100.0  # the rate part is there at speed
        assert slow[k] - base[k] == pytest.approx(share * (fast[k] - base[k]), rel=1e-6), name


def test_spi_force_residuals_match_the_model_evaluation(filt):
    """(M(theta) z_ddot - Q(theta)) from the compiled sigma-point loop against the model itself with its
    mass and friction set to theta; the model's own parameters and records are left alone."""
    v = filt.vehicle
    solver = v.solver
    thetas = np.array([[v.total_mass_kg, 1.0], [v.total_mass_kg * 0.9, 0.7], [v.total_mass_kg * 1.1, 0.4]])
    before = v.total_mass_kg, v.mu.copy(), np.array(v.last), v.body.copy()
    got = v.force_residuals(thetas, range(N))
    assert v.total_mass_kg == before[0] and np.array_equal(v.mu, before[1])
    assert np.array_equal(np.array(v.last), before[2]) and np.array_equal(v.body, before[3])
    saved = v.force_correction.copy()
    try:
        for theta, r in zip(thetas, got):
            v.set_total_mass(theta[0])
            v.mu = theta[1]
            v.force_correction[:] = 0.0
            Q = np.zeros(N)
            v.accumulate(solver.q, solver.qd, solver.t, Q, None, None)
            inertial = v.mass_matrix(solver.q) @ solver.qdd
            expected = inertial - Q
            np.testing.assert_allclose(r, expected, rtol=0, atol=1e-12 * np.abs(inertial).max())  # a difference of ~1e4 N terms
    finally:
        v.set_total_mass(before[0])
        v.mu = before[1]
        v.force_correction[:] = saved


def test_parameter_states_predict_the_model_response(filt):
    """The filter's transition of a parameter error (the velocity rows G of F) equals what the model does over its next step
    when the parameter is fed back (the tires carry the new forces at once; the accelerations move by Gp e as in the feedback):
    velocities to 6 % of the response; zero response for the IMU biases."""
    import copy

    f = filt
    if not f.parameter_names:
        pytest.skip("no parameter states")
    f.linearise()
    lin = f.linearisation
    for k, name in enumerate(f.parameter_names):
        col = f.parameter_col + k - 2 * N
        step = {"mass": 30.0}.get(name, 0.05)
        changed, same = copy.deepcopy(f.vehicle), copy.deepcopy(f.vehicle)
        theta = changed.parameters
        theta[ekf.PARAMETER_NAMES.index(name)] += step
        changed.apply_parameters(theta, carry_tire_forces=True)
        changed.solver.qdd = changed.solver.qdd + lin.Gp[:, col] * step  # as the feedback does (VehicleErrorEKF.correct)
        assert changed.step().success and same.step().success
        response = changed.solver.qd - same.solver.qd
        predicted = lin.G[:, 2 * N + col] * step
        assert np.abs(response[:6]).max() > 1e-6
        np.testing.assert_allclose(response[:6], predicted[:6], rtol=0, atol=0.06 * np.abs(response[:6]).max(), err_msg=name)
    b = f.gyro_bias_col - 2 * N
    assert not lin.Gp[:, b : b + 6].any()  # the biases act on the measurements only


def test_force_correction_turns_with_the_heading_and_fades_as_its_covariance_does():
    """The x-y force correction is fixed to the heading (a drag correction stays along the car through a turn), and the
    force errors are first-order Gauss-Markov in the covariance as in the longitudinal correction: with no measurement
    their variance tends to walk^2 tau / 2, not to infinity."""
    settings = ErrorEkfSettings(force_walk_rate=0.0)
    f = new_filter(settings, yaw_rad=0.3)
    assert f.predict()
    yaw = float(f.vehicle.solver.q[5])
    f.vehicle.force_correction[:2] = 800.0 * np.array([np.cos(yaw), np.sin(yaw)])  # 800 N along the car, east-north
    f.vehicle.solver.q[5] = yaw + 0.5  # the car has turned by 0.5 rad
    assert f.predict()
    fc = f.vehicle.force_correction[:2]
    decay = np.exp(-f.dt / settings.force_memory_s)
    np.testing.assert_allclose(np.hypot(*fc), 800.0 * decay, rtol=1e-12)
    np.testing.assert_allclose(np.arctan2(fc[1], fc[0]), yaw + 0.5, atol=1e-9)  # still along the car
    # Gauss-Markov variance: from the initial sigma towards walk^2 tau / 2 within a few tau (no measurements)
    k = 2 * N + f.force_names.index("lateral")
    for _ in range(int(8 * settings.force_memory_s / f.dt)):  # the prior fades as exp(-2 t / tau)
        assert f.predict()
    stationary = settings.force_walk["lateral"] ** 2 * settings.force_memory_s / 2.0
    assert f.P[k, k] == pytest.approx(stationary, rel=0.05)


def test_lateral_correction_is_kept_while_cornering_and_follows_the_lateral_force_down():
    """The lateral part of the force correction (across the heading, the yaw moment) is not faded with time: in steady
    cornering it stays, where the longitudinal part fades with ``force_memory_s``; it scales with the tires' lateral force
    where that falls, F_c (|F_y| + F_0) / (|F_y|_0 + F_0), so that on the straight after a turn it is nearly gone; and it
    fades with time, ``saturated_lateral_memory_s``, while a friction estimator says the tires saturate (a friction error,
    not a stiffness error)."""
    settings = ErrorEkfSettings(force_walk_rate=0.0)
    f = new_filter(settings)
    v = f.vehicle
    floor = settings.lateral_correction_floor_n

    def run(seconds):
        for _ in range(round(seconds / f.dt)):
            assert f.predict()

    def parts():
        yaw = float(v.solver.q[5])
        fc = v.force_correction
        return np.cos(yaw) * fc[0] + np.sin(yaw) * fc[1], np.cos(yaw) * fc[1] - np.sin(yaw) * fc[0], fc[5]

    v.set_inputs(1.0, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)  # a steady turn
    run(3.0)
    yaw = float(v.solver.q[5])
    forward, left = np.array([np.cos(yaw), np.sin(yaw)]), np.array([-np.sin(yaw), np.cos(yaw)])
    v.force_correction[:2] = 300.0 * forward + 200.0 * left
    v.force_correction[5] = 100.0
    turning = abs(v.tire_forces_n[:, 1].sum())
    assert turning > 2000.0
    run(1.0)
    along, across, moment = parts()
    now = abs(v.tire_forces_n[:, 1].sum())
    assert along == pytest.approx(300.0 * np.exp(-1.0 / settings.force_memory_s), rel=0.01)
    assert across / 200.0 == pytest.approx(min(1.0, (now + floor) / (turning + floor)), abs=0.02)
    assert across > 180.0 and moment / 100.0 == pytest.approx(across / 200.0, rel=0.005)
    v.set_inputs(0.0, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)  # straight on
    run(3.0)
    along, across, moment = parts()
    assert abs(v.tire_forces_n[:, 1].sum()) < 100.0
    assert 0.0 < across < 200.0 * (floor + 100.0) / (turning + floor)
    assert moment / 100.0 == pytest.approx(across / 200.0, rel=0.005)
    f.tires_saturate = True
    run(1.0)
    assert settings.saturated_lateral_memory_s == 0.5  # its own time constant then (0: force_memory_s)
    assert parts()[1] == pytest.approx(across * np.exp(-1.0 / settings.saturated_lateral_memory_s), rel=0.01)


def test_a_slide_the_gnss_course_shows_goes_into_the_lateral_force_not_the_heading():
    """GNSS velocity that keeps showing the car moving sideways where the model does not (a slide the friction estimate
    has not caught yet) gives the lateral force errors an extra walk, so that their correction takes a share of it as a
    lateral force (on a straight road the heading still takes most; the harness' friction step is where it pays);
    velocity that agrees with the model gives none."""
    def drive(settings, sideways_m_s):
        f = new_filter(settings)
        f.widest = 0.0  # the largest extra walk seen
        for step in range(1750):  # 5 s as the model says, then 2 s of sliding; GNSS velocity at 5 Hz
            assert f.predict()
            if step % 50 == 49:
                v, _ = f.measurement_model("gnss_velocity")  # the car heads east: it drifts north
                f.update_gnss_velocity(np.array([v[0], sideways_m_s if step >= 1250 else v[1], 0.0]), np.eye(3) * 0.05**2)
                f.widest = max(f.widest, f._slide_walk)
            f.correct()
        return f, float(f.vehicle.solver.q[5])

    quiet, yaw0 = drive(ErrorEkfSettings(), 0.0)
    assert quiet.widest == 0.0
    watched, _ = drive(ErrorEkfSettings(), 0.3)
    assert watched.widest > 10.0 * watched.settings.force_walk["lateral"]
    unwatched, _ = drive(ErrorEkfSettings(slide_walk_response_s=0.0), 0.3)
    assert unwatched.widest == 0.0

    def across(f):  # the lateral force correction (N, towards the drift: north)
        return float(np.cos(yaw0) * f.vehicle.force_correction[1] - np.sin(yaw0) * f.vehicle.force_correction[0])

    assert across(watched) > 10.0 and across(watched) > across(unwatched) + 10.0


def test_a_receiver_noisier_than_it_claims_does_not_set_off_the_slide_watch():
    """GNSS velocity with 0.11 m/s of noise where its covariance claims 0.05, on a straight road: the slide watch judges
    the mean innovation against the innovations' own scatter, not the claim, and stays (nearly always) quiet."""
    f = new_filter()
    rng = np.random.default_rng(7)
    fired = updates = 0
    for step in range(2500):  # 10 s, GNSS velocity at 5 Hz
        assert f.predict()
        if step % 50 == 49:
            v, _ = f.measurement_model("gnss_velocity")
            f.update_gnss_velocity(v + np.append(rng.normal(0.0, 0.11, 2), 0.0), np.eye(3) * 0.05**2)
            updates += 1
            fired += f._slide_walk > 0.0
        f.correct()
    assert updates == 50 and fired <= 5


def test_gnss_is_used_horizontally_the_altitude_is_the_roads():
    """A fix 30 m above the model (a hill the flat-road model does not know) is accepted for its horizontal position and
    moves no vertical state; GNSS velocity likewise (2 rows each)."""
    f = new_filter()
    for _ in range(20):
        assert f.predict()
        f.correct()
    assert f.predict()
    h, _ = f.measurement_model("gnss_fix")
    assert f.update_gnss_fix(h + np.array([0.5, -0.3, 30.0]), np.diag([1.0, 1.0, 4.0]))
    assert f.stats["gnss_fix"].dof == 2
    assert f.x[0] > 0.0 and f.x[1] < 0.0  # moved towards the fix horizontally
    assert abs(f.x[2]) < 1e-6 and abs(f.x[N + 2]) < 1e-5  # the height and vertical speed stay the model's
    v, _ = f.measurement_model("gnss_velocity")
    x0, P0 = f.x.copy(), f.P.copy()
    results = []
    for climb in (3.0, 0.0):  # the vertical velocity changes nothing
        f.x[:], f.P[:] = x0, P0
        assert f.update_gnss_velocity(v + np.array([0.1, 0.0, climb]), np.eye(3) * 0.01)
        results.append(f.x.copy())
    np.testing.assert_array_equal(results[0], results[1])


def test_the_gyro_scale_factor_is_learnt_only_while_the_car_turns():
    """On a straight road the scale factor's regressor, the model's yaw rate, is only its jitter, whose error enters the
    innovation with it (E[r nu] = -P_rr): it pulled the scale towards zero gain, 0.6 % in 12 s on the harness.  Below
    ``gyro_scale_min_rate_rad_s`` the scale is left alone; in a turn the gyroscope's z axis updates it.  The truth: the
    same model, run on its own with the same inputs, measured by a gyroscope that reads 1 % high."""
    f, truth = new_filter(ErrorEkfSettings(imu_biases=True)), new_filter()
    m = f.mounts
    rng = np.random.default_rng(2)
    for steering in (0.0, 1.0):  # steering-wheel angle (rad): straight on, then a turn at 15 m/s (~0.35 rad/s)
        for v in (f.vehicle, truth.vehicle):
            v.set_inputs(steering, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)
        for _ in range(500):  # 2 s
            assert f.predict() and truth.vehicle.step().success
            q, qd, qdd = model_state(truth)
            gyro = models.gyroscope(q, qd, m.imu_rotation)[0] * np.array([1.0, 1.0, 1.01]) + rng.normal(0.0, 0.003, 3)
            accel = models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0] + rng.normal(0.0, 0.05, 3)
            f.update_imu(gyro, accel, 0.003, 0.05)
            f.correct()
        turning = abs(f.vehicle.solver.qd[5]) >= f.settings.gyro_scale_min_rate_rad_s
        assert turning == (steering > 0.0)
        assert f.gyro_scale_column() == (f.gyro_scale_col if turning else -1)
        if not turning:
            assert f.gyro_scale == 0.0
    assert f.gyro_scale != 0.0  # the turn's updates move it (how far depends on what pins the yaw rate: GNSS course)


def test_a_tire_rolling_radius_off_the_file_is_learnt_from_gnss_velocity():
    """Tires 1.5 % smaller than the vehicle file's at the front and 1 % larger at the rear (wear, another make): their
    wheels read 1/0.985 and 1/1.01 times the model's spin rates.  Taken as white noise that was a speed error of
    ~1 %; with the wheel scale states GNSS velocity (5 Hz) learns each axle's factor and the speed stays the truth's.
    Before the first GNSS velocity nothing tells a radius, and for wheel_scale_after_s after it the velocity settles: the
    scales are held.  The truth: the same model run on its own with the same inputs."""
    f, truth = new_filter(), new_filter()
    factor = np.array([1 / 0.985, 1 / 0.985, 1 / 1.01, 1 / 1.01])
    rng = np.random.default_rng(3)
    for v in (f.vehicle, truth.vehicle):
        v.set_inputs(0.0, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)
    for step in range(6000):  # 24 s, GNSS from 4 s on, the scales learnt from 7 s on (wheel_scale_after_s)
        assert f.predict() and truth.vehicle.step().success
        q, qd, qdd = model_state(truth)
        if step % 5 == 4:  # wheel rates at 50 Hz
            f.update_wheel_rates(qd[10:14] * factor + rng.normal(0.0, 0.05, 4), 0.05)
        if step % 50 == 49 and step > 1000:
            v = models.gnss_velocity(q, qd, f.mounts.gnss_position_m)[0]
            f.update_gnss_velocity(v + np.append(rng.normal(0.0, 0.05, 2), 0.0), np.eye(3) * 0.05**2)
        f.correct()
        if step in (1000, 1600):  # no GNSS yet; GNSS for less than wheel_scale_after_s
            assert f.wheel_scale_column() == -1 and np.all(f.wheel_scale == 0.0)
    assert f.wheel_scale_column() == f.wheel_scale_col
    np.testing.assert_allclose(f.wheel_scale, factor[[0, 2]] - 1.0, atol=0.002)
    assert abs(f.vehicle.solver.qd[0] - truth.vehicle.solver.qd[0]) < 0.02  # m/s, at ~15 m/s


def test_the_wheel_scales_are_left_alone_on_slow_wheels_and_kept_through_missing_wheels():
    """Below ``wheel_scale_min_rate_rad_s`` a wheel's rate says nothing of its scale (the regressor is the model's own
    jitter); a wheel that does not report (NaN) takes the block-by-block path, which uses the same scale columns."""
    f = new_filter(speed_m_s=2.0)  # 2 m/s: ~6.5 rad/s
    assert f.predict()
    qd = f.vehicle.solver.qd
    assert not f.wheel_scale_observed().any()
    H = ekf.wheel_rate_jacobian(qd, len(f.x), f.wheel_scale_col, f.wheel_scale_observed())
    assert not H[:, f.wheel_scale_col : f.wheel_scale_col + 2].any()
    f = new_filter()
    assert f.predict()
    qd = f.vehicle.solver.qd
    f._gnss_accepted_t, f._gnss_since_t = f.t, f.t - 100.0  # as after a GNSS update
    f.wheel_scale[:] = (0.01, -0.005)
    # the front wheels read apart: two equal readings on an axle are taken as one speed put on both wheels (one row),
    # and on a straight the model's own left and right spins can be equal to the last bit
    rates = qd[10:14] * np.array([1.02, 1.025, 1.02, 1.02])
    rates[3] = np.nan
    x0, P0 = f.x.copy(), f.P.copy()
    h, H = f.measurement_model("wheel_rates")
    keep = [0, 1, 2]
    y = rates[keep] / (1.0 + np.array([0.01, 0.01, -0.005]))
    R = np.diag(0.05**2 + np.square(f.settings.wheel_rate_model_sigma * qd[10:13]))
    Hm = mapped(f, H, h=h, wheel_scale_col=f.wheel_scale_col)[keep]
    stats = SensorStatistics()
    assert sequential_update(x0, P0, y - h[keep] - Hm @ x0, Hm, R, f.gate(3), stats)
    assert f.update_wheel_rates(rates, 0.05)
    np.testing.assert_allclose(f.x, x0, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(f.P, P0, rtol=0, atol=1e-10 * np.abs(P0).max())
    assert f.x[f.wheel_scale_col] != 0.0 and f.x[f.wheel_scale_col + 1] != 0.0


def test_a_slipping_wheel_tells_no_scale_and_the_scales_stay_within_their_bound():
    """A driven wheel at full throttle slips by what the slip stiffness (+-25 % on a real tire) says: its rate is not its
    radius, and it is left out of the scale (above ``wheel_scale_max_slip``); after a rejected wheel update the model
    disagrees with the wheels and a relock must not move the scales; the scales never pass WHEEL_SCALE_BOUND."""
    f = new_filter()
    f.vehicle.set_inputs(0.0, [1500.0, 1500.0, 0.0, 0.0], [0.0] * 4)  # full throttle on the front wheels
    for _ in range(50):
        assert f.predict()
        f.correct()
    slip = f.vehicle.tire_output_array[ekf.SLIP_ROW]
    assert np.all(np.abs(slip[:2]) > f.settings.wheel_scale_max_slip) and np.all(np.abs(slip[2:]) < f.settings.wheel_scale_max_slip)
    np.testing.assert_array_equal(f.wheel_scale_observed(), [False, False, True, True])
    f._gnss_accepted_t, f._gnss_since_t = f.t, f.t - 100.0
    assert f.wheel_scale_column() == f.wheel_scale_col
    f.stats["wheel_rates"].consecutive_rejections = 1
    assert f.wheel_scale_column() == -1
    f.x[f.wheel_scale_col : f.wheel_scale_col + 2] = (0.5, -0.5)
    f.correct()
    np.testing.assert_array_equal(f.wheel_scale, [ekf.WHEEL_SCALE_BOUND, -ekf.WHEEL_SCALE_BOUND])


def test_the_tilt_jacobian_matches_finite_differences_of_a_rotated_reading():
    """A sensor turned by d = (dx, dy, 0) about its own axes reads R(d)^T h (R the exact rotation, by the matrix
    exponential of the skew matrix); its derivative in d at 0 is tilt_jacobian(h)."""
    from scipy.linalg import expm

    h = np.array([0.3, -0.2, 9.7])
    J = np.zeros((3, 2))
    for k in range(2):
        d = np.zeros(3)
        d[k] = 1e-6
        turned = [expm(np.cross(np.eye(3), sign * d)).T @ h for sign in (1.0, -1.0)]
        J[:, k] = (turned[0] - turned[1]) / 2e-6
    np.testing.assert_allclose(ekf.tilt_jacobian(h), J, atol=1e-6)


def test_a_tilt_estimate_leaves_an_imu_with_missing_axes_usable():
    """A yaw-rate-only gyroscope and an accelerometer without its z axis (the race-car data of issue 14): the tilt's
    cross terms take the model's reading for the missing axes, so the z rate stays finite and is applied, and the
    lateral axis still has g dx taken out.  Without the gyroscope's x and y nothing tells the tilt from the
    accelerometer's biases, and it is left alone."""
    f, truth = new_filter(ErrorEkfSettings(imu_biases=True)), new_filter()  # the readings are the truth's (its own model)
    m = f.mounts
    for v in (f.vehicle, truth.vehicle):
        v.set_inputs(1.0, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)  # a turn, where a full IMU would show the tilt
    for _ in range(250):
        assert f.predict() and truth.vehicle.step().success
        q, qd, qdd = model_state(truth)
        gyro, accel = models.gyroscope(q, qd, m.imu_rotation)[0], models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0]
        gyro[:2], accel[2] = np.nan, np.nan
        f.update_imu(gyro + 0.002, accel + 0.05, np.array([np.nan, np.nan, 0.003]), np.array([0.05, 0.05, np.nan]))
        f.correct()
    assert f.stats["gyroscope"].accepted > 200 and f.stats["accelerometer"].accepted > 200
    assert np.all(f.imu_tilt == 0.0) and np.any(f.imu_bias[3:5] != 0.0)
    accepted = f.stats["gyroscope"].accepted
    f.imu_tilt[:] = (0.01, -0.01)
    q, qd, qdd = model_state(f)
    gyro, accel = models.gyroscope(q, qd, m.imu_rotation)[0], models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0]
    gyro[:2], accel[2] = np.nan, np.nan
    predicted = models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0]
    untilted = f._corrected_accel(accel, predicted)
    assert predicted[2] == pytest.approx(9.81, abs=0.5)  # g dx: the model's z reading stands in for the missing one
    assert untilted[1] == pytest.approx(accel[1] - f.imu_bias[4] - 0.01 * predicted[2], abs=1e-12) and np.isnan(untilted[2])
    tilted = predicted + np.cross(predicted, [0.01, -0.01, 0.0])  # what the tilted IMU reads, R(d)^T y, without its z axis
    tilted[2] = np.nan
    assert f.update_imu(gyro + 0.002, tilted + 0.05, np.array([np.nan, np.nan, 0.003]), np.array([0.05, 0.05, np.nan])) == (True, True)
    assert np.all(np.isfinite(f.x)) and f.stats["gyroscope"].accepted == accepted + 1


def test_the_road_rate_is_the_gyroscope_roll_and_pitch_innovation_that_lasts():
    """_track_road_rate, by hand: a pitch-rate innovation of 0.02 rad/s held for 5 s (a crest) is averaged over
    gyro_road_rate_time_s (tau = 1 s: 0.02 (1 - e^-5)); its square, times gain^2, is the variance the gyroscope's axes get,
    turned by the mounting S: diag(S^T diag(0, v, 0) S).  One second without it, the held square has decayed by
    e^(-1/hold_s).  White noise of 0.005 rad/s on all axes for 20 s (a level road) adds at most (0.01 rad/s)^2.  In a turn
    the innovation is weighed by 1 / (1 + (r / gyro_road_rate_turn_rad_s)^2).  Nothing while the gyroscope's biases have
    not settled (sigma above gyro_road_rate_bias_sigma), and nothing once the innovation's integral, leaking over
    gyro_road_grade_time_s, leaves +-gyro_road_grade_rad: 0.05 rad/s for 12 s integrates to 0.05 * 15 (1 - e^(-12/15)) =
    0.41 rad, beyond 0.35 from t = -15 ln(1 - 0.35 / 0.75) = 9.4 s."""
    s = ErrorEkfSettings()
    assert (s.gyro_road_rate_gain, s.gyro_road_rate_time_s, s.gyro_road_rate_hold_s, s.gyro_road_rate_bias_sigma, s.gyro_road_grade_rad,
            s.gyro_road_grade_time_s) == (4.0, 1.0, 5.0, 0.0006, 0.35, 15.0)
    on = ErrorEkfSettings(imu_biases=True)

    def settled(f):
        b = f.gyro_bias_col
        f.P[b:b + 3, b:b + 3] = np.eye(3) * 0.0003**2
        return f

    unsettled = new_filter(on)
    for k in range(101):
        unsettled._track_road_rate(np.array([0.0, 0.05, 0.05]), k * 0.01)
    assert not unsettled._gyro_road_var.any()  # the biases' initial sigma: their business
    f = settled(new_filter(on))
    S = np.asarray(f.mounts.imu_rotation, float)
    dt = 0.01
    for k in range(501):
        f._track_road_rate(S.T @ np.array([0.0, 0.02, 0.0]), k * dt)
    mean = 0.02 * (1.0 - math.exp(-5.0))
    np.testing.assert_allclose(f._gyro_road_var, np.diag(S.T @ np.diag([0.0, mean**2, 0.0]) @ S) * 16.0, rtol=1e-6, atol=1e-15)
    for k in range(501, 601):
        f._track_road_rate(np.array([0.0, 0.0, math.nan]), k * dt)  # a missing axis counts as no innovation
    np.testing.assert_allclose(f._gyro_road_var, np.diag(S.T @ np.diag([0.0, mean**2, 0.0]) @ S) * 16.0 * math.exp(-1.0 / 5.0),
                               rtol=1e-6, atol=1e-15)
    level = settled(new_filter(on))
    rng = np.random.default_rng(0)
    for k in range(2001):
        level._track_road_rate(rng.normal(0.0, 0.005, 3), k * dt)
    assert 0.0 < level._gyro_road_var.max() < 0.01**2 and level._gyro_road_var[np.argmax(np.abs(S[:, 2]))] < 1e-7
    turning = settled(new_filter(on))  # yaw rate 0.25 rad/s: weighed 1 / (1 + (0.25 / 0.05)^2)
    turning.vehicle.solver.qd[5] = 0.25
    for k in range(501):
        turning._track_road_rate(S.T @ np.array([0.0, 0.02, 0.0]), k * dt)
    np.testing.assert_allclose(turning._gyro_road_var, np.diag(S.T @ np.diag([0.0, (mean / 26.0) ** 2, 0.0]) @ S) * 16.0, rtol=1e-6, atol=1e-15)
    off = settled(new_filter(ErrorEkfSettings(imu_biases=True, gyro_road_rate_gain=0.0)))
    off._track_road_rate(np.array([0.0, 0.5, 0.0]), 0.0), off._track_road_rate(np.array([0.0, 0.5, 0.0]), 1.0)
    assert not off._gyro_road_var.any()
    runaway = settled(new_filter(on))  # a lasting 0.05 rad/s: a bias estimated wrong, not a road
    for k in range(1201):
        runaway._track_road_rate(S.T @ np.array([0.0, 0.05, 0.0]), k * dt)
        if k == 900:  # 9 s: still inside, the whole allowance
            np.testing.assert_allclose(runaway._road_rate[5], 0.05 * 15.0 * -math.expm1(-9.0 / 15.0), rtol=2e-3)
            assert runaway._gyro_road_var.max() > 16.0 * 0.049**2 * 0.9
    np.testing.assert_allclose(runaway._road_rate[5], 0.05 * 15.0 * -math.expm1(-12.0 / 15.0), rtol=2e-3)
    assert not runaway._gyro_road_var.any() and not runaway._road_rate[:4].any()


def test_the_imu_tilt_is_learnt_only_driving_forwards():
    """The tilt's columns (imu_tilt_column) at 15 m/s forwards, and none reversing at 4 m/s nor at 1 m/s
    (imu_tilt_min_speed_m_s 2), nor without the gyroscope's x and y axes; facing west at 15 m/s, the same as east."""
    for speed, yaw, expected in ((15.0, 0.0, True), (15.0, math.pi, True), (-4.0, 0.0, False), (1.0, 0.0, False)):
        f = new_filter(ErrorEkfSettings(imu_biases=True), speed_m_s=speed, yaw_rad=yaw)
        f._tilt_observable = True
        assert f.imu_tilt_column() == (f.imu_tilt_col if expected else -1) and f.imu_tilt_col >= 0, (speed, yaw)
        f._tilt_observable = False
        assert f.imu_tilt_column() == -1


def test_reversing_with_unsettled_accelerometer_biases_the_model_lateral_acceleration_counts_less():
    """The accelerometer's model sigma is reverse_accelerometer_model_sigma (0.5 m/s^2) reversing at 4 m/s while its x or
    y bias sigma is above reverse_accel_bias_settled_sigma, and the plain accelerometer_model_sigma once they have
    settled, driving forwards, facing west forwards, and with the rule off."""
    s = ErrorEkfSettings(imu_biases=True)
    for speed, yaw in ((-4.0, 0.0), (-4.0, math.pi)):
        f = new_filter(s, speed_m_s=speed, yaw_rad=yaw)
        assert f.P[f.accel_bias_col, f.accel_bias_col] == pytest.approx(s.accel_bias_sigma**2)
        assert f._accelerometer_model_sigma() == s.reverse_accelerometer_model_sigma == 0.5
        b = f.accel_bias_col
        f.P[b, b] = f.P[b + 1, b + 1] = (0.9 * s.reverse_accel_bias_settled_sigma) ** 2  # settled
        assert f._accelerometer_model_sigma() == s.accelerometer_model_sigma
        f.P[b + 1, b + 1] = (1.1 * s.reverse_accel_bias_settled_sigma) ** 2  # y not yet
        assert f._accelerometer_model_sigma() == s.reverse_accelerometer_model_sigma
    for speed, yaw in ((4.0, 0.0), (4.0, math.pi), (-0.3, 0.0)):
        assert new_filter(s, speed_m_s=speed, yaw_rad=yaw)._accelerometer_model_sigma() == s.accelerometer_model_sigma, (speed, yaw)
    off = ErrorEkfSettings(imu_biases=True, reverse_accelerometer_model_sigma=0.0)
    assert new_filter(off, speed_m_s=-4.0)._accelerometer_model_sigma() == off.accelerometer_model_sigma


def test_a_tilted_imu_is_learnt_in_a_turn_and_not_taken_for_roll():
    """An IMU fitted 0.6 deg off about x and -0.4 deg about y reads R(d)^T of the truth: in a turn its x and y gyroscope
    axes see the yaw rate times the tilt, which no bias explains.  The tilt states take it (their estimate comes within
    a third of the truth), and the model's roll stays the truth's, where without them it took the tilt.  The
    truth: the same model on its own with the same inputs.  (The road-rate allowance, on by default, may take the
    turn's first seconds for a road turning for a while; the tilt is learnt all the same.)"""
    tilt = np.radians([0.6, -0.4, 0.0])
    results = {}
    for sigma in (ErrorEkfSettings().imu_tilt_sigma, 1e-9):
        f, truth = new_filter(ErrorEkfSettings(imu_biases=True, imu_tilt_sigma=sigma)), new_filter()
        m = f.mounts
        rng = np.random.default_rng(3)
        attitude = []
        for steering, steps in ((0.0, 500), (1.0, 2500)):  # 2 s straight on, then 10 s of a turn at 15 m/s
            for v in (f.vehicle, truth.vehicle):
                v.set_inputs(steering, [60.0, 60.0, 0.0, 0.0], [0.0] * 4)
            for _ in range(steps):
                assert f.predict() and truth.vehicle.step().success
                q, qd, qdd = model_state(truth)
                gyro, accel = models.gyroscope(q, qd, m.imu_rotation)[0], models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0]
                gyro, accel = gyro + np.cross(gyro, tilt), accel + np.cross(accel, tilt)  # R(d)^T y to first order
                f.update_imu(gyro + rng.normal(0.0, 0.003, 3), accel + rng.normal(0.0, 0.05, 3), 0.003, 0.05)
                f.correct()
                attitude.append(f.vehicle.solver.q[3:5] - truth.vehicle.solver.q[3:5])
        results[sigma] = f.imu_tilt.copy(), np.sqrt(np.mean(np.square(attitude[-1000:]), axis=0))
    (learnt, attitude_with), (unused, attitude_without) = results.values()
    assert np.all(np.abs(learnt - tilt[:2]) < np.abs(tilt[:2]) / 3), np.degrees(learnt)
    assert np.all(np.abs(unused) < 1e-6)
    # roll: 0.03 deg RMS against 0.10 without the states (the turn's roll rate is the yaw rate times the x tilt); pitch
    # (the y tilt shows on the gyroscope's x axis, where the roll rate is) 0.02 deg either way
    assert attitude_with[0] < attitude_without[0] / 2 and np.all(attitude_with < np.radians(0.05)), (np.degrees(attitude_with), np.degrees(attitude_without))


def test_a_friction_change_leaves_the_force_on_the_chassis_as_it_was():
    """When the friction estimate changes the model's friction, the force correction gives back what the tires now carry
    (VehicleSPI): at that instant the tires' steady forces on the chassis plus the correction do not change, so the
    correction that stood for the missing grip is handed to the tires instead of being counted twice."""
    from state_observer.estimation.spi import VehicleSPI
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = load_vehicle(default_vehicle_path())
    f = VehicleSPI(ReducedVehicle(desc), mounts_from_vehicle(desc))
    f.start(speed_m_s=20.0)
    v = f.vehicle
    v.set_inputs(1.5, [80.0, 80.0, 0.0, 0.0], [0.0] * 4)  # a firm steady turn
    for _ in range(750):
        assert f.predict()
        f.correct()

    def tires():  # the tires' steady generalised force on the chassis (minus the residual without the correction)
        return -v.force_residuals(v.parameters[None], np.arange(6), steady_tires=True)[0]

    tires_before = tires()
    total_before = tires_before + v.force_correction[:6]
    f.mu = 0.45
    f.update_parameters()
    assert float(np.mean(v.mu)) == pytest.approx(0.45)
    tires_after = tires()
    assert np.hypot(*(tires_after - tires_before)[:2]) > 500.0  # the tires lost grip the correction now gives back
    np.testing.assert_allclose(tires_after + v.force_correction[:6], total_before, atol=1e-6 * np.abs(total_before).max())


def test_a_parameter_window_takes_each_step_as_the_equations_say():
    """spi's compiled step accumulation (accumulate_step) against the same sums written out in numpy: the torque balance
    along the heading (F_x,i = (T_i - I_i omega_dot_i) / r_i, r_i the loaded radius the learnt wheel scale gives, the
    lateral forces' share, drag), the centre of mass's acceleration as the accelerometer reads it (less gravity's part along the heading on the estimated road slope, plus the
    accelerometer's mean innovation) and turning part, the published forces, the axles' stiffness per load and slip angles,
    and the cornering estimator's linear-range sums; a car slower than min_speed counts as stopped and adds nothing."""
    from state_observer.estimation import spi
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle import reduced_kernels as kern
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = load_vehicle(default_vehicle_path())
    f = spi.VehicleSPI(ReducedVehicle(desc), mounts_from_vehicle(desc), ErrorEkfSettings(road_slope=True), spi.SpiSettings())
    f.start(speed_m_s=15.0)
    f.torques_known = True  # the model keeps the torques it is given
    v = f.vehicle
    for _ in range(50):  # turning in while accelerating
        v.set_inputs(np.radians(40.0), np.array([0.0, 0.0, 300.0, 300.0]), np.zeros(4))
        assert f.predict()
        f.correct()
    yaw = float(v.solver.q[5])
    c, s = np.cos(yaw), np.sin(yaw)
    v.force_correction[:2] = 400.0 * np.array([-s, c])
    v.force_correction[5] = -120.0
    slope, innovation = np.array([0.15, -0.2]), 0.07  # m/s^2: gravity east and north, the accelerometer's mean innovation
    f._set_road_slope(slope)
    wheel_scale = np.array([-0.012, 0.007])  # learnt: the front tires roll on a radius 1.2 % over the file's, the rear 0.7 % under
    q, qd, qdd = v.solver.q, v.solver.qd, v.solver.qdd
    x_cg = f._x_cg_m
    sums, forces = np.zeros(spi.W_SIZE), np.empty((4, 3))
    mu, low, high = 0.9, 0.02, 0.9
    args = (v.tire_output_array, v.contact_array, v.force_correction, q, qd, qdd, *f._axle_x_m, True, v.drive_torque_n_m, v.brake_torque_n_m,
            v.body, v.tire_rows[:, 5], v.tire_scales, x_cg, mu, low, high)
    assert not spi.accumulate_step(sums, *args, 3.0, forces, innovation, wheel_scale)
    published = f.tire_forces()
    np.testing.assert_allclose(forces, published, rtol=1e-12)
    contact, model = v.contact, v.last
    torque = v.drive_torque_n_m - v.brake_torque_n_m * np.tanh(qd[10:14] / np.maximum(v.body[kern.B_BRAKE_EPS : kern.B_BRAKE_EPS + 4], 1e-6))
    fx_torque = (torque - v.body[kern.B_SPIN_I : kern.B_SPIN_I + 4] * qdd[10:14]) / (contact.r_s / (1.0 + np.repeat(wheel_scale, 2)))
    lateral = published[:, 1] @ (c * contact.ey[:, 0] + s * contact.ey[:, 1])
    along = fx_torque @ (c * contact.ex[:, 0] + s * contact.ex[:, 1]) + lateral - v.body[kern.B_AERO_COEF] * (c * qd[0] + s * qd[1]) ** 2
    r = qd[5]
    expected_mass = [c * (qdd[0] - slope[0]) + s * (qdd[1] - slope[1]) + innovation - r**2 * x_cg, along, abs(lateral), abs(fx_torque.sum()), -(c * qd[1] - s * qd[0]) * r - r**2 * x_cg]
    assert abs(r) > 0.05 and fx_torque.sum() > 100.0  # a turn, driven
    np.testing.assert_allclose(sums[spi.W_MASS : spi.W_MASS + 5], expected_mass, rtol=1e-9, atol=1e-9)
    assert sums[spi.W_MASS_N] == 1.0 and sums[spi.W_AXLE_N] == 1.0
    np.testing.assert_allclose(sums[[spi.W_FX, spi.W_FY]], published[:, :2].sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(sums[spi.W_AXLE_K : spi.W_AXLE_K + 2], v.tire_rows[:, 5].reshape(2, 2).mean(axis=1), rtol=1e-12)
    alpha = model.slip_angle_rad.reshape(2, 2).mean(axis=1)
    np.testing.assert_allclose(sums[spi.W_AXLE_ALPHA : spi.W_AXLE_ALPHA + 2], alpha, rtol=1e-12)
    fy_axle, fz_axle, model_fy = (x.reshape(2, 2).sum(axis=1) for x in (published[:, 1], published[:, 2], model.fy_n))
    linear = (np.abs(fy_axle) / (mu * fz_axle) > low) & (np.abs(fy_axle) / (mu * fz_axle) < high)
    assert linear.all()
    np.testing.assert_array_equal(sums[spi.W_CORNER_N : spi.W_CORNER_N + 2], [1.0, 1.0])
    np.testing.assert_allclose(sums[spi.W_CORNER_U : spi.W_CORNER_U + 2], alpha * fy_axle / (model_fy / v.tire_scales[:2]), rtol=1e-12)
    before = sums.copy()
    assert spi.accumulate_step(sums, *args, 40.0, forces, innovation, wheel_scale)  # slower than 40 m/s: stopped, nothing added
    np.testing.assert_array_equal(sums, before)


def test_the_road_slope_is_held_at_walking_pace():
    """The road slope's states respond (gravity's generalised force in Dr, the accelerometer's own columns) only above
    road_slope_min_speed_m_s; below it they are held: zero response, the estimate still acting on the model."""
    for speed, learnt in ((15.0, True), (3.0, False)):
        f = new_filter(ErrorEkfSettings(road_slope=True), speed_m_s=speed)
        assert f.predict()
        f.correct()
        assert (f.slope_column() >= 0) == learnt
        cols = slice(f.slope_col - 2 * N, f.slope_col - 2 * N + 2)
        Dr = f.residual_sensitivity()
        if learnt:
            np.testing.assert_allclose(Dr[:, cols], -f.vehicle.slope_forces(), rtol=1e-12)
            assert Dr[0, cols.start] == pytest.approx(-f.vehicle.total_mass_kg)
        else:
            assert not Dr[:, cols].any()
        f._set_road_slope(np.array([0.1, -0.05]))
        np.testing.assert_array_equal(f.vehicle.road_slope, [0.1, -0.05])  # held, the model drives on it

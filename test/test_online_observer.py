"""The online observer (no ROS): start from GNSS, configured pose, late and jumping stamps."""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness import odometry_pose, simulated_scenario


@pytest.fixture(scope="module")
def scenario():
    desc, config, manoeuvre, truths, samples = simulated_scenario("circle_mu08", 8.0, seed=2)
    samples.sort(key=lambda s: s.receive_ns)  # the order a recorder received them
    return desc, config, truths, samples


def _observer(desc, config, **settings):
    from state_observer.estimation.online import OnlineObserver, OnlineSettings
    from state_observer.sensors.mounts import mounts_from_vehicle

    d = config.gnss_fix.datum
    return OnlineObserver(desc, mounts_from_vehicle(desc), OnlineSettings(datum=(d.latitude_deg, d.longitude_deg, d.altitude_m), **settings))


def test_starts_from_gnss_motion_without_gnss_velocity(scenario):
    from state_observer.sensors.samples import GnssVelocity

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, observer="errorekf_fe_reduced")
    for s in samples:
        if not isinstance(s, GnssVelocity):
            obs.feed(s)
        if obs.started:
            break
    assert obs.started
    truth = min(truths, key=lambda x: abs(x.t_s - obs.t_ns * 1e-9))
    true_yaw = math.atan2(truth.velocity_enu_m_s[1], truth.velocity_enu_m_s[0])
    _, _, yaw = obs.vehicle.solver.q[3:6]
    # two noisy fixes (1.8 m) at least 15 m apart on a 50 m circle: the chord's direction, within ~15 deg
    assert abs(math.remainder(yaw - true_yaw, 2 * math.pi)) < math.radians(20)
    assert "started" in obs.events[-1]


def test_gnss_start_tracks_the_truth_and_counts_everything(scenario):
    desc, config, truths, samples = scenario
    obs = _observer(desc, config)
    for s in samples:
        obs.feed(s)
    assert obs.started and obs.t_ns * 1e-9 > 7.9
    e = obs.estimate()
    truth = min(truths, key=lambda x: abs(x.t_s - e.stamp_ns * 1e-9))
    assert np.hypot(*(e.state.position_enu_m[:2] - truth.position_enu_m[:2])) < 1.5
    assert abs(e.state.angular_velocity_body_rad_s[2] - truth.angular_velocity_body_rad_s[2]) < 0.02
    counts = obs.counters
    # every received sample is accounted for: applied, used to start, rejected by the gate, or dropped for a named reason
    for kind in ("imu", "gnss_fix", "gnss_velocity", "wheels"):
        c = counts[kind]
        outcomes = sum(n for k, n in c.items() if k in ("applied", "used to start") or k.startswith(("dropped", "rejected")))
        assert c["received"] == outcomes + obs.pending()[kind], (kind, dict(c))
    assert counts["imu"]["applied"] > 0.9 * counts["imu"]["received"]
    assert counts["gnss_fix"]["applied"] >= counts["gnss_fix"]["received"] - 3
    P = e.pose_covariance
    assert np.all(np.linalg.eigvalsh(P) > 0) and np.all(e.tire_force_sigma_n >= 0)


def test_tire_force_sigma_adds_a_share_of_the_wheel_load_in_quadrature(scenario):
    """tire_force_sigma: the longitudinal and lateral sigmas take tire_force_model_load_share of the wheel load in
    quadrature with the rest (a standing car's forces are tens of newtons that no share of the force covers); the vertical
    one does not."""
    from state_observer.estimation.outputs import tire_force_sigma

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, observer="errorekf_fe_reduced")
    for s in samples[: len(samples) // 2]:
        obs.feed(s)
    e = obs.estimate()
    f, k_z = obs.filter, obs._tire_k_z
    f.settings.tire_force_model_load_share = 0.0
    without = tire_force_sigma(f, e.state, k_z)
    f.settings.tire_force_model_load_share = 0.01
    with_share = tire_force_sigma(f, e.state, k_z)
    fz = np.asarray(e.state.tire_force_n)[:, 2]
    assert np.all(fz > 1000.0)
    np.testing.assert_allclose(with_share[:, :2] ** 2 - without[:, :2] ** 2, np.square(0.01 * fz)[:, None] * np.ones((1, 2)), rtol=1e-9)
    np.testing.assert_array_equal(with_share[:, 2], without[:, 2])


def test_pose_start_late_samples_and_time_jump(scenario):
    from state_observer.sensors.samples import ImuSample

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, start_mode="pose", start_pose=(1.0, -50.0, 0.0, 15.0), start_speed_from_wheels=False)
    imus = [s for s in samples if isinstance(s, ImuSample)]
    obs.feed(imus[1])
    assert obs.started and abs(obs.vehicle.solver.q[0] - 1.0) < 1e-9 and obs.t_ns == imus[1].stamp_ns
    for s in imus[2:400]:
        obs.feed(s)
    t = obs.t_ns
    late = imus[100]._replace(stamp_ns=t - 500_000_000)  # 0.5 s behind: beyond max_delay_s (0.3)
    assert obs.feed(late) == [] and obs.counters["imu"]["dropped: late"] == 1
    # the bag loops: stamps 1.9 s back; three in a row reset the observer, which starts again at once
    for s in imus[2:5]:
        obs.feed(s)
    assert obs.n_resets == 1 and obs.started and obs.t_ns <= imus[4].stamp_ns + obs.dt_ns
    assert obs.counters["imu"]["dropped: late"] == 3  # the late one and the first two of the loop


def test_a_yaw_rate_only_imu_is_used_as_such(scenario):
    """An IMU that measures the yaw rate and the horizontal specific force only (the other axes NaN, as msg_to_imu gives
    for a -1 variance): the filter applies the axes it has, counts the missing ones, and tracks the yaw rate."""
    from state_observer.sensors.samples import ImuSample

    desc, config, truths, samples = scenario
    partial = [s._replace(angular_velocity_rad_s=np.array([np.nan, np.nan, s.angular_velocity_rad_s[2]]),
                          linear_acceleration_m_s2=np.array([*s.linear_acceleration_m_s2[:2], np.nan]),
                          angular_velocity_sigma=np.array([np.nan, np.nan, 0.0035]))
               if isinstance(s, ImuSample) else s for s in samples]
    obs = _observer(desc, config, observer="errorekf_fe_reduced", start_mode="pose", start_pose=(0.0, -50.0, 0.0, 15.0))
    rates = []
    for s in partial:
        if obs.feed(s) and obs.started:
            truth = min(truths, key=lambda x: abs(x.t_s - obs.t_ns * 1e-9))
            rates.append((obs.odometry().angular_velocity_body_rad_s[2], truth.angular_velocity_body_rad_s[2]))
    counts = obs.counters["imu"]
    assert counts["IMU axes missing (the others used)"] > 0.9 * counts["received"]
    assert counts["applied"] > 0.9 * counts["received"]
    error = np.array([a - b for a, b in rates[len(rates) // 2 :]])
    assert np.sqrt(np.mean(error**2)) < math.radians(0.5)


def test_standstill_is_told_by_the_wheels_that_report():
    """Zero-velocity updates need the wheels to say the car stands for 0.5 s: all four, or the two of an axle that carry
    a data set's one speed (the others NaN); one wheel is not enough, a wheel turning or a change of the reporting set
    starts the window again."""
    from state_observer.estimation.online import StandstillDetector

    detector = StandstillDetector()
    nan = math.nan
    ms = 1_000_000

    def stands(rates, n=60):  # 0.6 s of samples at 100 Hz
        return [detector.update(i * 10 * ms, np.array(rates, float)) for i in range(n)]

    four = stands([0.01, -0.01, 0.0, 0.02])
    assert four[-1] and not four[0]  # after 0.4 s of the 0.5 s window
    detector.clear()
    assert stands([nan, nan, 0.01, 0.01])[-1]  # one speed on the rear axle
    detector.clear()
    assert not any(stands([nan, nan, nan, 0.0]))  # one wheel
    detector.clear()
    assert not any(stands([nan, nan, 0.5, 0.5]))  # turning


def test_imu_message_covariances_are_read_per_axis():
    from state_observer.io.convert import _missing_axes, _sigma_from_covariance

    yaw_only = np.diag([-1.0, -1.0, 1e-4]).ravel()
    assert list(_missing_axes(yaw_only)) == [True, True, False]
    assert np.isnan(_sigma_from_covariance(yaw_only)[:2]).all() and _sigma_from_covariance(yaw_only)[2] == pytest.approx(0.01)
    not_provided = np.zeros(9)
    not_provided[0] = -1.0
    assert _missing_axes(not_provided).all()
    assert not _missing_axes(np.zeros(9)).any() and np.isnan(_sigma_from_covariance(np.zeros(9))).all()  # unknown: configured sigma


def test_pose_start_takes_the_speed_of_the_wheels(scenario):
    """start_mode pose without GNSS: the configured pose, at the speed of the first wheel sample (waited for)."""
    from state_observer.sensors.samples import WheelSample

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, observer="errorekf_fe_reduced", start_mode="pose", start_pose=(0.0, -50.0, 0.0, 0.0), sensors=("imu", "wheels"))
    for s in samples:
        obs.feed(s)
        if obs.started:
            break
    assert isinstance(s, WheelSample)
    speed = float(np.hypot(*obs.vehicle.solver.qd[:2]))
    mean_radius_m = float(np.mean([c.wheel.dynamic_radius_m for c in desc.corners]))
    assert speed == pytest.approx(float(np.mean(s.rate_rad_s)) * mean_radius_m, rel=1e-9) and speed > 10.0


def test_a_stream_delivered_late_is_applied_in_stamp_order_within_the_reorder_window(scenario):
    """Issue 13 item 12: the IMU messages arrive 0.5 s after the other streams' (a deep QoS queue drained late).  Without a
    window the wheels and GNSS move the model past them and they are dropped as late; with timing.reorder_window_s 0.7 s
    the model waits for them, applies them in stamp order, and flush() integrates what the window held at the end."""
    from state_observer.sensors.samples import ImuSample

    desc, config, truths, samples = scenario
    delayed = sorted(samples, key=lambda s: s.receive_ns + (500_000_000 if isinstance(s, ImuSample) else 0))
    results = {}
    for window in (0.0, 0.7):
        obs = _observer(desc, config, observer="errorekf_fe_reduced", reorder_window_s=window)
        for s in delayed:
            obs.feed(s)
        obs.flush()
        imu = obs.counters["imu"]
        results[window] = (imu.get("dropped: late", 0), imu.get("applied", 0), obs.t_ns)
    late, applied, _ = results[0.0]
    assert late > 0.5 * (late + applied)
    late, applied, t_ns = results[0.7]
    assert late == 0 and applied > 0.95 * sum(1 for s in samples if isinstance(s, ImuSample) and s.stamp_ns > 2e9)
    assert t_ns >= max(s.stamp_ns for s in samples) - 5_000_000  # flushed to the end
    with pytest.raises(ValueError, match="reorder_window_s"):
        _observer(desc, config, reorder_window_s=2.0)  # not below time_jump_s (1 s)


class _Inputs:
    def set_inputs(self, steering, drive, brake, steering_rate_rad_s=0.0):
        self.steering, self.steering_rate = steering, steering_rate_rad_s
        self.drive, self.brake = np.asarray(drive), np.asarray(brake)


def test_the_steering_angle_is_carried_over_its_latency_along_its_rate():
    """The steering angle reaches a step 10-30 ms after it was measured: the model gets it extrapolated to the step's
    middle along the slope of the last samples (exact on a ramp), at most STEERING_LEAD_MAX_S ahead; a lone sample
    after a gap, and an apply without a time, take the newest angle as it is."""
    from state_observer.estimation.online import STEERING_LEAD_MAX_S, ModelInputs
    from state_observer.sensors.samples import SteeringSample

    inputs, model = ModelInputs(), _Inputs()
    for k in range(6):  # 100 Hz ramp of 2 rad/s from 0.1 rad
        inputs.take(SteeringSample(k * 10_000_000, k * 10_000_000 + 10_000_000, 0.1 + 2.0 * k * 0.01))
    inputs.apply(model, 70_000_000)  # 20 ms after the newest sample (50 ms, 0.2 rad)
    assert model.steering == pytest.approx(0.24) and model.steering_rate == pytest.approx(2.0)
    inputs.apply(model, 2_000_000_000)  # the sensor fell silent: no further than the lead limit
    assert model.steering == pytest.approx(0.2 + 2.0 * STEERING_LEAD_MAX_S)
    inputs.apply(model, 40_000_000)  # before the newest sample: the sample itself
    assert model.steering == pytest.approx(0.2)
    inputs.apply(model)
    assert model.steering == pytest.approx(0.2)
    inputs.take(SteeringSample(500_000_000, 510_000_000, -0.3))  # after a gap: held, no slope across it
    inputs.apply(model, 520_000_000)
    assert model.steering == -0.3 and model.steering_rate == 0.0


def test_a_steering_sensor_offset_is_taken_off_every_sample(scenario):
    """model.steering_offset_rad: a steering sensor that reads 1.5 deg of steering-wheel angle with the wheels straight
    ahead (a sensor zeroed off centre) gives, with that offset set, the estimate of a sensor zeroed right (the same
    model steering at every step); without it the model steers by the offset (0.1 deg at the wheels) and the estimate
    differs.  Out of its range the setting is refused by name."""
    from state_observer.errors import ConfigError
    from state_observer.estimation.online import OnlineSettings
    from state_observer.sensors.samples import SteeringSample

    desc, config, truths, samples = scenario
    offset = math.radians(1.5)
    shifted = [s._replace(steering_wheel_angle_rad=s.steering_wheel_angle_rad + offset) if isinstance(s, SteeringSample) else s
               for s in samples[:3000]]

    def run(feed, **settings):
        obs = _observer(desc, config, start_mode="pose", start_pose=(1.0, -50.0, 0.0, 15.0), **settings)
        steering = []
        for s in feed:
            if obs.feed(s) and obs.started:
                steering.append(obs.vehicle.steering_wheel_angle_rad)
        return np.array(steering), obs.estimate().state.angular_velocity_body_rad_s[2]

    zeroed, zeroed_rate = run(samples[:3000])
    corrected, corrected_rate = run(shifted, steering_offset_rad=offset)
    uncorrected, _ = run(shifted)
    assert len(zeroed) > 500 and len(corrected) == len(zeroed) == len(uncorrected)
    assert np.max(np.abs(corrected - zeroed)) < 1e-12 and corrected_rate == pytest.approx(zeroed_rate, abs=1e-9)
    assert np.median(uncorrected - zeroed) == pytest.approx(offset, rel=0.05)
    with pytest.raises(ConfigError, match="steering_offset_rad"):
        OnlineSettings(steering_offset_rad=0.6)


def test_a_measured_torque_against_the_rotation_brakes_and_along_it_drives():
    """The net wheel torque (drive - brake * sign(rate)) is split by the wheels' direction of rotation: forward a
    negative torque brakes; reversing a negative torque drives and a positive one brakes (issue 13 item 9)."""
    from state_observer.estimation.online import ModelInputs
    from state_observer.sensors.samples import WheelSample

    inputs, model = ModelInputs(), _Inputs()
    torque = np.array([-30.0, -30.0, 40.0, 0.0])
    inputs.take(WheelSample(1, 1, np.zeros(4), np.full(4, 20.0), torque))
    inputs.apply(model)
    assert np.array_equal(model.drive, [0, 0, 40, 0]) and np.array_equal(model.brake, [30, 30, 0, 0])
    inputs.take(WheelSample(2, 2, np.zeros(4), np.array([-13.0, -13.0, -13.0, 0.1]), torque))  # reversing; wheel 4 ~ still
    inputs.apply(model)
    assert np.array_equal(model.drive, [-30, -30, 0, 0]) and np.array_equal(model.brake, [0, 0, 40, 0])


def test_sideslip_is_measured_from_the_direction_of_travel():
    from state_observer.conventions import sideslip_rad

    assert sideslip_rad(10.0, 1.0) == pytest.approx(math.atan(0.1)) and sideslip_rad(10.0, -1.0) == pytest.approx(-math.atan(0.1))
    assert sideslip_rad(-4.0, 0.0) == 0.0 and sideslip_rad(-4.0, 0.4) == pytest.approx(math.atan(-0.1))
    assert sideslip_rad(0.3, 0.3) == 0.0  # undefined at walking pace


def test_set_pose_starts_again_at_the_pose_with_the_speed_it_had(scenario):
    """robot_localization's set_pose (issue 16): the next sample restarts the model at the given pose, at the forward
    speed it had; the datum is kept; a non-finite pose is refused with one line."""
    desc, config, truths, samples = scenario
    obs = _observer(desc, config, observer="errorekf_fe_reduced")
    half = len(samples) // 2
    for s in samples[:half]:
        obs.feed(s)
    assert obs.started
    speed, datum, resets = odometry_pose(obs)[3], obs.datum, obs.n_resets
    obs.set_pose(10.0, -20.0, math.radians(30.0))
    assert not obs.started and obs.n_resets == resets + 1 and obs.datum is datum
    obs.feed(samples[half])
    assert obs.started
    x, y, yaw, v = odometry_pose(obs)
    assert (x, y) == pytest.approx((10.0, -20.0), abs=0.05) and yaw == pytest.approx(math.radians(30.0), abs=1e-3)
    assert v == pytest.approx(speed, abs=0.3)
    with pytest.raises(ValueError, match="finite"):
        obs.set_pose(math.nan, 0.0, 0.0)

"""Sensor synthesis from analytic truth: rest, tilted rest and a steady circle.

The truth sequences are built in closed form (test data, 4 ms apart like the model step);
the expected readings are computed independently of the synthesizer's formulas.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from state_observer.sensors.geodesy import LocalENU
from state_observer.sensors.samples import GnssFix, GnssVelocity, ImuSample, SteeringSample, WheelSample
from state_observer.conventions import rotation_from_rpy
from state_observer.sensors.mounts import SensorMounts, mounts_from_vehicle
from state_observer.sim.sensors import SensorConfigError, SensorSynthesizer, load_sensor_config, parse_sensor_config
from state_observer.vehicle.state import VehicleState

DEFAULT_YAML = Path(__file__).resolve().parents[1] / "config" / "sensors" / "default.yaml"
G = 9.81
DT_S = 0.004
TYPES = {"imu": ImuSample, "gnss_fix": GnssFix, "gnss_velocity": GnssVelocity,
         "wheel_encoders": WheelSample, "steering": SteeringSample}


# ------------------------------------------------------------------------------------------------
# Test data
# ------------------------------------------------------------------------------------------------

def default_dict() -> dict:
    return yaml.safe_load(DEFAULT_YAML.read_text())


def set_path(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[last] = value


def make_config(overrides: dict | None = None, *, noiseless: bool = False, only: tuple[str, ...] | None = None):
    data = default_dict()
    if noiseless:
        for noise in ("imu.gyro_rad_s", "imu.accel_m_s2", "wheel_encoders.rate_rad_s", "steering.angle_rad"):
            set_path(data, noise + ".sigma", 0.0)
        for noise in ("gnss_fix.position_m", "gnss_velocity.velocity_m_s"):
            set_path(data, noise + ".horizontal_sigma", 0.0)
            set_path(data, noise + ".vertical_sigma", 0.0)
    if only is not None:
        for name in TYPES:
            data[name]["enabled"] = name in only
    for key, value in (overrides or {}).items():
        set_path(data, key, value)
    return parse_sensor_config(data, "test.yaml")


def quat_yaw_pitch_roll(yaw: float = 0.0, pitch: float = 0.0, roll: float = 0.0) -> np.ndarray:
    """(w, x, y, z) of Rz(yaw) Ry(pitch) Rx(roll)."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


def truth(t_s: float, *, position=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0),
          acceleration=(0.0, 0.0, 0.0), omega=(0.0, 0.0, 0.0), alpha=(0.0, 0.0, 0.0), wheel_angle=0.0, wheel_rate=0.0,
          wheel_torque=0.0, steering=0.0) -> VehicleState:
    return VehicleState(
        t_s=t_s,
        position_enu_m=np.array(position, dtype=float),
        orientation_wxyz=np.array(quat, dtype=float),
        velocity_enu_m_s=np.array(velocity, dtype=float),
        acceleration_enu_m_s2=np.array(acceleration, dtype=float),
        angular_velocity_body_rad_s=np.array(omega, dtype=float),
        angular_acceleration_body_rad_s2=np.array(alpha, dtype=float),
        wheel_angle_rad=np.full(4, wheel_angle, dtype=float),
        wheel_rate_rad_s=np.full(4, wheel_rate, dtype=float),
        wheel_torque_n_m=np.full(4, wheel_torque, dtype=float),
        steering_wheel_angle_rad=float(steering),
        suspension_travel_m=np.zeros(4),
        tire_force_n=np.zeros((4, 3)),
        slip_ratio=np.zeros(4),
        slip_angle_rad=np.zeros(4),
        contact_point_base_m=np.zeros((4, 3)),
        mass_kg=1500.0,
        friction_coefficient=0.9,
    )


def times(duration_s: float) -> np.ndarray:
    return np.arange(round(duration_s / DT_S) + 1) * DT_S


def rest_run(duration_s: float, **kwargs) -> list[VehicleState]:
    return [truth(t, **kwargs) for t in times(duration_s)]


RADIUS_M, SPEED_M_S = 20.0, 10.0
YAW_RATE = SPEED_M_S / RADIUS_M
CENTRE = np.array([0.0, RADIUS_M, 0.0])  # left turn starting at the origin heading east


def circle_truth(t: float) -> VehicleState:
    """base_link origin on a circle of radius RADIUS_M at SPEED_M_S, level, turning left."""
    yaw = YAW_RATE * t
    return truth(
        t,
        position=(RADIUS_M * math.sin(yaw), RADIUS_M * (1.0 - math.cos(yaw)), 0.0),
        quat=quat_yaw_pitch_roll(yaw),
        velocity=(SPEED_M_S * math.cos(yaw), SPEED_M_S * math.sin(yaw), 0.0),
        acceleration=(-SPEED_M_S * YAW_RATE * math.sin(yaw), SPEED_M_S * YAW_RATE * math.cos(yaw), 0.0),
        omega=(0.0, 0.0, YAW_RATE),
    )


def of_type(samples, kind):
    return [s for s in samples if isinstance(s, kind)]


MOUNTS = SensorMounts(imu_position_m=[1.2, 0.3, 0.5], gnss_position_m=[0.4, -0.2, 1.4],
                      imu_frame_id="imu_link", gnss_frame_id="gnss_link", encoder_counts_per_revolution=48)


# ------------------------------------------------------------------------------------------------
# Configuration
# ------------------------------------------------------------------------------------------------

def test_default_config():
    cfg = load_sensor_config(DEFAULT_YAML)
    assert cfg.source == str(DEFAULT_YAML)
    assert (cfg.imu.rate_hz, cfg.gnss_fix.rate_hz, cfg.gnss_velocity.rate_hz,
            cfg.wheel_encoders.rate_hz, cfg.steering.rate_hz) == (200.0, 5.0, 5.0, 100.0, 100.0)
    assert cfg.gnss_fix.position_m.sigma == (1.786, 1.786, 2.551)
    assert 0.05 <= cfg.gnss_fix.latency_s <= 0.1 and 0.05 <= cfg.gnss_velocity.velocity_m_s.sigma[0] <= 0.1
    assert cfg.gnss_fix.datum.latitude_deg == pytest.approx(43.49, abs=0.01)
    assert cfg.gnss_fix.datum.longitude_deg == pytest.approx(-8.25, abs=0.01)
    assert cfg.gnss_fix.outage_mode == "drop" and cfg.gnss_fix.status == 0
    assert cfg.wheel_encoders.counts_per_revolution is None  # the vehicle's
    assert all(getattr(cfg, name).enabled for name in TYPES)


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "sensors.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def _delete(key):
    def edit(d):
        *parents, last = key.split(".")
        for p in parents:
            d = d[p]
        del d[last]
    return edit


def _set(key, value):
    return lambda d: set_path(d, key, value)


@pytest.mark.parametrize("edit, key, why", [
    (_delete("imu.rate_hz"), "imu.rate_hz", "missing required key"),
    (_delete("steering"), "steering", "missing required key"),
    (_delete("gnss_fix.datum.altitude_m"), "gnss_fix.datum.altitude_m", "missing required key"),
    (_set("imu.rate", 100.0), "imu.rate", "unknown key"),
    (_set("imu.gyro_rad_s.sigmaa", 0.1), "imu.gyro_rad_s.sigmaa", "unknown key"),
    (_set("lidar", {}), "lidar", "unknown key"),
    (_set("gnss_fix.rate_hz", "fast"), "gnss_fix.rate_hz", "must be a number"),
    (_set("imu.enabled", "yes"), "imu.enabled", "must be true or false"),
    (_set("imu.gyro_rad_s", 0.1), "imu.gyro_rad_s", "must be a mapping"),
    (_set("wheel_encoders.rate_hz", 0.0), "wheel_encoders.rate_hz", "must be > 0"),
    (_set("steering.rate_hz", -5.0), "steering.rate_hz", "must be > 0"),
    (_set("imu.accel_m_s2.sigma", -0.1), "imu.accel_m_s2.sigma", "must be >= 0"),
    (_set("gnss_fix.position_m.vertical_sigma", -1.0), "gnss_fix.position_m.vertical_sigma", "must be >= 0"),
    (_set("gnss_fix.latency_s", -0.01), "gnss_fix.latency_s", "must be >= 0"),
    (_set("imu.phase_s", 0.005), "imu.phase_s", "smaller than the sample period"),
    (_set("imu.accel_m_s2.bias", [0.0, 0.1]), "imu.accel_m_s2.bias", "list of 3 numbers"),
    (_set("gnss_fix.outage_mode", "hold"), "gnss_fix.outage_mode", "must be one of drop, no_fix"),
    (_set("gnss_fix.datum.latitude_deg", 95.0), "gnss_fix.datum.latitude_deg", "[-90, 90]"),
    (_set("gnss_fix.dropouts.intervals_s", [[5.0, 4.0]]), "gnss_fix.dropouts.intervals_s[0]", "before start"),
    (_set("gnss_fix.dropouts.intervals_s", [[5.0]]), "gnss_fix.dropouts.intervals_s[0]", "[t_start_s, t_end_s]"),
    (_set("imu.dropouts", {"probability": 1.5}), "imu.dropouts.probability", "[0, 1]"),
    (_set("wheel_encoders.counts_per_revolution", 0), "wheel_encoders.counts_per_revolution", "positive integer"),
    (_set("imu.frame_id", 3), "imu.frame_id", "non-empty string"),
])
def test_bad_config_names_file_and_key(tmp_path, edit, key, why):
    data = default_dict()
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(SensorConfigError) as info:
        load_sensor_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: "), message
    assert why in message
    assert "\n" not in message


def test_bad_files(tmp_path):
    with pytest.raises(SensorConfigError, match=r"nowhere\.yaml: cannot read"):
        load_sensor_config(tmp_path / "nowhere.yaml")
    with pytest.raises(SensorConfigError, match=r"sensors\.yaml: line \d+: invalid YAML"):
        load_sensor_config(write(tmp_path, "imu:\n  rate_hz: [200\n"))
    with pytest.raises(SensorConfigError, match=r"sensors\.yaml: <top level>: must be a mapping"):
        load_sensor_config(write(tmp_path, "- 1\n- 2\n"))


def test_config_is_immutable():
    cfg = make_config()
    with pytest.raises(AttributeError):
        cfg.imu.rate_hz = 100.0  # type: ignore[misc]


def test_mounts_validation():
    with pytest.raises(ValueError, match="imu_rotation"):
        SensorMounts(imu_rotation=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="gnss_position_m"):
        SensorMounts(gnss_position_m=[0.0, 1.0])
    with pytest.raises(ValueError, match="encoder_counts_per_revolution"):
        SensorMounts(encoder_counts_per_revolution=-3)
    with pytest.raises(ValueError, match="counts_per_revolution"):
        SensorSynthesizer(make_config(), SensorMounts(), seed=0)  # encoders on, no counts anywhere


def test_mounts_from_vehicle_description():
    from state_observer.vehicle.description import load_vehicle

    desc = load_vehicle(Path(__file__).resolve().parents[1] / "config" / "vehicles" / "default.yaml")
    mounts = mounts_from_vehicle(desc)
    np.testing.assert_array_equal(mounts.imu_position_m, desc.sensors.imu_position_m)
    np.testing.assert_array_equal(mounts.gnss_position_m, desc.sensors.gnss_antenna_position_m)
    np.testing.assert_allclose(mounts.imu_rotation, rotation_from_rpy(*desc.sensors.imu_orientation_rpy_rad))
    assert (mounts.imu_frame_id, mounts.gnss_frame_id) == (desc.sensors.imu_frame_id, desc.sensors.gnss_frame_id)
    assert mounts.encoder_counts_per_revolution == desc.sensors.encoder_counts_per_revolution
    SensorSynthesizer(load_sensor_config(DEFAULT_YAML), mounts, seed=0)  # encoders get their counts


# ------------------------------------------------------------------------------------------------
# Physics (noise off)
# ------------------------------------------------------------------------------------------------

def imu_readings(truths, mounts=MOUNTS, overrides=None):
    synth = SensorSynthesizer(make_config(overrides, noiseless=True, only=("imu",)), mounts, seed=0)
    return of_type(synth.feed_all(truths), ImuSample)


def test_level_at_rest_reads_plus_g_up():
    samples = imu_readings(rest_run(0.1))
    assert len(samples) == 21
    for s in samples:
        np.testing.assert_allclose(s.linear_acceleration_m_s2, [0.0, 0.0, G], atol=1e-12)
        np.testing.assert_allclose(s.angular_velocity_rad_s, 0.0, atol=1e-15)
        assert s.frame_id == "imu_link"


@pytest.mark.parametrize("roll, pitch, expected", [
    # REP-103: x forward, y left, z up. Positive roll lifts the left side: +y sees +g sin(roll).
    (math.radians(5.0), 0.0, (0.0, G * math.sin(math.radians(5.0)), G * math.cos(math.radians(5.0)))),
    # Positive pitch lowers the nose: +x points downhill, so it sees -g sin(pitch).
    (0.0, math.radians(5.0), (-G * math.sin(math.radians(5.0)), 0.0, G * math.cos(math.radians(5.0)))),
])
def test_tilted_at_rest_shows_gravity_components(roll, pitch, expected):
    samples = imu_readings(rest_run(0.02, quat=quat_yaw_pitch_roll(0.7, pitch, roll)))  # any heading
    for s in samples:
        np.testing.assert_allclose(s.linear_acceleration_m_s2, expected, atol=1e-12)


def test_steady_circle_centripetal_at_lever_arm():
    samples = imu_readings([circle_truth(t) for t in times(2.0)])
    assert len(samples) == 401  # 200 Hz instants fall between the 4 ms truth steps
    r_imu = MOUNTS.imu_position_m
    for s in samples:
        # Rigid rotation about the vertical through CENTRE: in base_link the centre is at
        # (0, RADIUS_M) and the IMU accelerates towards it with omega^2 * distance.
        to_centre = np.array([0.0, RADIUS_M]) - r_imu[:2]
        expected_xy = YAW_RATE**2 * to_centre
        np.testing.assert_allclose(s.linear_acceleration_m_s2[:2], expected_xy, atol=1e-5)
        assert s.linear_acceleration_m_s2[2] == pytest.approx(G, abs=1e-9)
        np.testing.assert_allclose(s.angular_velocity_rad_s, [0.0, 0.0, YAW_RATE], atol=1e-12)
    magnitude = np.linalg.norm(samples[0].linear_acceleration_m_s2[:2])
    assert magnitude == pytest.approx(YAW_RATE**2 * np.linalg.norm([1.2, RADIUS_M - 0.3]), rel=1e-6)
    assert samples[0].linear_acceleration_m_s2[1] > 0.0  # left turn: specific force to the left


def test_yaw_spin_up_matches_differentiated_imu_position():
    """Spinning up about the base_link origin: tangential (alpha x r) plus centripetal terms."""
    alpha_z = 0.8

    def yaw(t):
        return 0.5 * alpha_z * t * t

    run = [truth(t, quat=quat_yaw_pitch_roll(yaw(t)), omega=(0.0, 0.0, alpha_z * t), alpha=(0.0, 0.0, alpha_z))
           for t in times(1.0)]
    r = MOUNTS.imu_position_m

    def imu_enu(t):
        c, s = math.cos(yaw(t)), math.sin(yaw(t))
        return np.array([c * r[0] - s * r[1], s * r[0] + c * r[1], r[2]])

    h = 1e-4
    for sample in imu_readings(run)[::20]:
        t = sample.stamp_ns * 1e-9
        accel_enu = (imu_enu(t + h) - 2.0 * imu_enu(t) + imu_enu(t - h)) / h**2
        c, s = math.cos(yaw(t)), math.sin(yaw(t))
        to_body = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        expected = to_body @ (accel_enu + [0.0, 0.0, G])
        np.testing.assert_allclose(sample.linear_acceleration_m_s2, expected, atol=2e-5)


def test_rotated_mounting_rotates_readings():
    run = [circle_truth(t) for t in times(0.5)]
    rotation = rotation_from_rpy(0.3, -0.2, math.pi / 2)
    aligned = imu_readings(run)
    mounted = imu_readings(run, SensorMounts(imu_position_m=MOUNTS.imu_position_m, imu_rotation=rotation,
                                             encoder_counts_per_revolution=48))
    for a, m in zip(aligned, mounted):
        np.testing.assert_allclose(m.linear_acceleration_m_s2, rotation.T @ a.linear_acceleration_m_s2, atol=1e-12)
        np.testing.assert_allclose(m.angular_velocity_rad_s, rotation.T @ a.angular_velocity_rad_s, atol=1e-12)

    # Yawed 90 deg (sensor x = vehicle left): the lateral specific force shows on sensor x.
    yawed = imu_readings(run, SensorMounts(imu_position_m=MOUNTS.imu_position_m,
                                           imu_rotation=rotation_from_rpy(0.0, 0.0, math.pi / 2)))
    assert yawed[0].linear_acceleration_m_s2[0] == pytest.approx(aligned[0].linear_acceleration_m_s2[1])
    # Upside down (roll 180 deg): at rest z reads -g.
    flipped = imu_readings(rest_run(0.01), SensorMounts(imu_rotation=rotation_from_rpy(math.pi, 0.0, 0.0)))
    np.testing.assert_allclose(flipped[0].linear_acceleration_m_s2, [0.0, 0.0, -G], atol=1e-12)


def test_rotation_from_rpy_matches_quaternion_convention():
    from state_observer.conventions import quaternion_to_matrix
    angles = (0.3, -0.2, 1.1)
    np.testing.assert_allclose(rotation_from_rpy(*angles),
                               quaternion_to_matrix(quat_yaw_pitch_roll(angles[2], angles[1], angles[0])), atol=1e-15)


def test_gnss_fix_round_trips_through_datum():
    cfg = make_config(noiseless=True, only=("gnss_fix",))
    yaw = math.radians(30.0)
    position = np.array([120.0, -45.0, 2.0])
    samples = SensorSynthesizer(cfg, MOUNTS, seed=0).feed_all(rest_run(1.0, position=position,
                                                                          quat=quat_yaw_pitch_roll(yaw)))
    assert len(samples) == 6
    c, s = math.cos(yaw), math.sin(yaw)
    lever = MOUNTS.gnss_position_m
    antenna = position + np.array([c * lever[0] - s * lever[1], s * lever[0] + c * lever[1], lever[2]])
    datum = cfg.gnss_fix.datum
    enu = LocalENU(datum.latitude_deg, datum.longitude_deg, datum.altitude_m)
    for fix in samples:
        assert isinstance(fix, GnssFix) and fix.status == 0 and fix.frame_id == "gnss_link"
        np.testing.assert_allclose(enu.to_enu(fix.latitude_deg, fix.longitude_deg, fix.altitude_m), antenna, atol=1e-3)
        np.testing.assert_array_equal(fix.position_covariance_enu_m2, np.zeros((3, 3)))
    noisy = SensorSynthesizer(make_config(only=("gnss_fix",)), MOUNTS, seed=0).feed_all(rest_run(0.0))
    np.testing.assert_allclose(np.diag(noisy[0].position_covariance_enu_m2), [1.786**2, 1.786**2, 2.551**2])


def test_gnss_velocity_is_antenna_velocity():
    cfg = make_config(noiseless=True, only=("gnss_velocity",))
    run = [circle_truth(t) for t in times(2.0)]
    samples = SensorSynthesizer(cfg, MOUNTS, seed=0).feed_all(run)
    assert len(samples) == 11
    lever = MOUNTS.gnss_position_m
    for v in samples:
        yaw = YAW_RATE * v.stamp_ns * 1e-9
        c, s = math.cos(yaw), math.sin(yaw)
        origin = np.array([RADIUS_M * s, RADIUS_M * (1 - c), 0.0])
        antenna = origin + np.array([c * lever[0] - s * lever[1], s * lever[0] + c * lever[1], lever[2]])
        # rigid rotation about the vertical through CENTRE: v = omega z x (p - c)
        expected = np.cross([0.0, 0.0, YAW_RATE], antenna - CENTRE)
        np.testing.assert_allclose(v.velocity_enu_m_s, expected, atol=1e-9)
        assert v.frame_id == "gnss_link"


def test_wheel_encoder_quantisation_forward_and_backward():
    counts = 48
    step = 2.0 * math.pi / counts
    for rate in (7.3, -7.3):
        run = [truth(t, wheel_angle=0.01 + rate * t, wheel_rate=rate, wheel_torque=120.0) for t in times(2.0)]
        samples = SensorSynthesizer(make_config(noiseless=True, only=("wheel_encoders",)), MOUNTS, seed=0).feed_all(run)
        assert len(samples) == 201
        n_counts = np.array([s.angle_rad for s in samples]) / step
        np.testing.assert_allclose(n_counts, np.round(n_counts), atol=1e-9)  # whole counts only
        true_angle = np.array([0.01 + rate * s.stamp_ns * 1e-9 for s in samples])
        lag = true_angle[:, None] - np.array([s.angle_rad for s in samples])
        assert np.all(lag >= -1e-12) and np.all(lag < step)  # within one count, never ahead
        steps = np.unique(np.round(np.diff(n_counts[:, 0])))
        assert set(steps) <= {0.0, math.copysign(1.0, rate), math.copysign(2.0, rate)}
        np.testing.assert_allclose([s.rate_rad_s for s in samples], rate)
        np.testing.assert_allclose([s.torque_n_m for s in samples], 120.0)

    override = make_config({"wheel_encoders.counts_per_revolution": 1000, "wheel_encoders.include_torque": False},
                           noiseless=True, only=("wheel_encoders",))
    sample = SensorSynthesizer(override, MOUNTS, seed=0).feed(truth(0.0, wheel_angle=1.0))[0]
    assert sample.angle_rad[0] == pytest.approx(math.floor(1.0 / (2 * math.pi / 1000)) * 2 * math.pi / 1000)
    assert np.all(np.isnan(sample.torque_n_m))


def test_steering_angle():
    run = [truth(t, steering=0.5 * math.sin(t)) for t in times(1.0)]
    samples = SensorSynthesizer(make_config(noiseless=True, only=("steering",)), MOUNTS, seed=0).feed_all(run)
    assert len(samples) == 101
    for s in samples:
        # linear interpolation of a smooth signal between 4 ms steps: error < dt^2 / 8 * max|f''|
        assert s.steering_wheel_angle_rad == pytest.approx(0.5 * math.sin(s.stamp_ns * 1e-9), abs=1e-6)


# ------------------------------------------------------------------------------------------------
# Timing, latency, dropouts
# ------------------------------------------------------------------------------------------------

def test_rates_over_10_s():
    samples = SensorSynthesizer(make_config(), MOUNTS, seed=3).feed_all(rest_run(10.0))
    cfg = make_config()
    for name, kind in TYPES.items():
        stamps = np.array([s.stamp_ns for s in of_type(samples, kind)])
        rate = getattr(cfg, name).rate_hz
        assert abs(len(stamps) - rate * 10.0) <= 1, name
        assert np.all(np.diff(stamps) == round(1e9 / rate)), name  # on the sensor's own clock
    receive = [s.receive_ns for s in samples]
    assert receive == sorted(receive)


def test_feed_returns_samples_of_its_interval_sorted():
    synth = SensorSynthesizer(make_config(), MOUNTS, seed=3)
    previous_ns = None
    for t in times(1.0):
        out = synth.feed(truth(t))
        t_ns = round(t * 1e9)
        for s in out:
            assert (s.stamp_ns == t_ns) if previous_ns is None else (previous_ns < s.stamp_ns <= t_ns)
        assert [s.receive_ns for s in out] == sorted(s.receive_ns for s in out)
        previous_ns = t_ns
    with pytest.raises(ValueError, match="increase"):
        synth.feed(truth(0.5))


def test_phase_offset():
    samples = SensorSynthesizer(make_config({"gnss_fix.phase_s": 0.05}, only=("gnss_fix",)), MOUNTS,
                                seed=0).feed_all(rest_run(1.0))
    assert [s.stamp_ns for s in samples] == [50_000_000 + k * 200_000_000 for k in range(5)]


def test_latency_shifts_receive_time_only():
    run = [circle_truth(t) for t in times(2.0)]
    base = SensorSynthesizer(make_config(), MOUNTS, seed=5).feed_all(run)
    late = SensorSynthesizer(make_config({"imu.latency_s": 0.03, "gnss_fix.latency_s": 0.25}), MOUNTS,
                             seed=5).feed_all(run)
    cfg = make_config({"imu.latency_s": 0.03, "gnss_fix.latency_s": 0.25})
    for name, kind in TYPES.items():
        a, b = of_type(base, kind), of_type(late, kind)
        assert len(a) == len(b)
        for sa, sb in zip(a, b):
            assert sb.stamp_ns == sa.stamp_ns
            assert sb.receive_ns - sb.stamp_ns == round(getattr(cfg, name).latency_s * 1e9)
            for fa, fb in zip(sa[2:], sb[2:]):
                np.testing.assert_array_equal(fa, fb)
    assert [s.receive_ns for s in late] == sorted(s.receive_ns for s in late)


def test_dropout_intervals_remove_samples():
    overrides = {f"{name}.dropouts": {"intervals_s": [[2.0, 3.5], [7.0, 7.2]]} for name in TYPES}
    samples = SensorSynthesizer(make_config(overrides), MOUNTS, seed=1).feed_all(rest_run(10.0))
    full = SensorSynthesizer(make_config(), MOUNTS, seed=1).feed_all(rest_run(10.0))
    for kind in TYPES.values():
        stamps = np.array([s.stamp_ns for s in of_type(samples, kind)]) * 1e-9
        assert len(stamps) > 0
        assert not np.any((stamps >= 2.0) & (stamps <= 3.5)) and not np.any((stamps >= 7.0) & (stamps <= 7.2))
        # the other samples are untouched, noise included
        kept = [s for s in of_type(full, kind) if not (2.0 <= s.stamp_ns * 1e-9 <= 3.5 or 7.0 <= s.stamp_ns * 1e-9 <= 7.2)]
        assert len(kept) == len(stamps)
        for a, b in zip(kept, of_type(samples, kind)):
            for fa, fb in zip(a, b):
                np.testing.assert_array_equal(fa, fb)


def test_gnss_outage_no_fix_mode():
    cfg = make_config({"gnss_fix.outage_mode": "no_fix", "gnss_fix.dropouts": {"intervals_s": [[2.0, 3.5]]}},
                      only=("gnss_fix",))
    fixes = SensorSynthesizer(cfg, MOUNTS, seed=1).feed_all(rest_run(5.0))
    assert len(fixes) == 26  # nothing removed
    for fix in fixes:
        inside = 2.0 <= fix.stamp_ns * 1e-9 <= 3.5
        assert fix.status == (-1 if inside else 0)
        assert math.isnan(fix.latitude_deg) == inside
    assert sum(f.status == -1 for f in fixes) == 8  # 2.0, 2.2, ..., 3.4


def test_drop_probability():
    cfg = make_config({"imu.dropouts": {"probability": 0.3}}, only=("imu",))
    samples = SensorSynthesizer(cfg, MOUNTS, seed=2).feed_all(rest_run(20.0))
    assert len(samples) / 4001 == pytest.approx(0.7, abs=0.03)


# ------------------------------------------------------------------------------------------------
# Noise statistics and determinism
# ------------------------------------------------------------------------------------------------

FAST = {f"{name}.rate_hz": 250.0 for name in TYPES}  # one sample per truth step: 10 001 samples in 40 s


def test_noise_matches_configured_sigmas():
    overrides = dict(FAST)
    overrides.update({"imu.accel_m_s2.bias": [0.1, -0.2, 0.3], "steering.angle_rad.bias": 0.05})
    cfg = make_config(overrides)
    samples = SensorSynthesizer(cfg, MOUNTS, seed=11).feed_all(rest_run(40.0, wheel_rate=3.0, steering=0.2))

    imu = of_type(samples, ImuSample)
    gyro = np.array([s.angular_velocity_rad_s for s in imu])
    accel = np.array([s.linear_acceleration_m_s2 for s in imu]) - [0.0, 0.0, G]
    np.testing.assert_allclose(gyro.std(axis=0), cfg.imu.gyro_rad_s.sigma, rtol=0.03)
    np.testing.assert_allclose(accel.std(axis=0), cfg.imu.accel_m_s2.sigma, rtol=0.03)
    np.testing.assert_allclose(accel.mean(axis=0), [0.1, -0.2, 0.3], atol=4 * 0.025 / math.sqrt(len(imu)))

    datum = cfg.gnss_fix.datum
    enu = LocalENU(datum.latitude_deg, datum.longitude_deg, datum.altitude_m)
    fixes = of_type(samples, GnssFix)
    errors = enu.to_enu(*np.array([[f.latitude_deg, f.longitude_deg, f.altitude_m] for f in fixes]).T) \
        - MOUNTS.gnss_position_m
    np.testing.assert_allclose(errors.std(axis=0), [1.786, 1.786, 2.551], rtol=0.03)
    assert abs(np.corrcoef(errors[:, 0], errors[:, 1])[0, 1]) < 0.05

    vel = np.array([v.velocity_enu_m_s for v in of_type(samples, GnssVelocity)])
    np.testing.assert_allclose(vel.std(axis=0), cfg.gnss_velocity.velocity_m_s.sigma, rtol=0.03)

    wheel = np.array([w.rate_rad_s for w in of_type(samples, WheelSample)]) - 3.0
    np.testing.assert_allclose(wheel.std(axis=0), cfg.wheel_encoders.rate_rad_s.sigma, rtol=0.03)

    steer = np.array([s.steering_wheel_angle_rad for s in of_type(samples, SteeringSample)]) - 0.2
    assert steer.std() == pytest.approx(cfg.steering.angle_rad.sigma[0], rel=0.03)
    assert steer.mean() == pytest.approx(0.05, abs=4 * 0.0017 / math.sqrt(len(steer)))


def test_gauss_markov_and_bias_walk():
    tau, sigma, q = 0.02, 0.5, 0.01
    overrides = dict(FAST)
    overrides.update({"gnss_velocity.velocity_m_s.correlation_time_s": tau,
                      "gnss_velocity.velocity_m_s.horizontal_sigma": sigma,
                      "steering.angle_rad": {"sigma": 0.0, "bias_walk_per_sqrt_s": q}})
    cfg = make_config(overrides, only=("gnss_velocity", "steering"))
    samples = SensorSynthesizer(cfg, MOUNTS, seed=4).feed_all(rest_run(40.0))

    east = np.array([v.velocity_enu_m_s[0] for v in of_type(samples, GnssVelocity)])
    assert east.std() == pytest.approx(sigma, rel=0.08)
    lag1 = np.corrcoef(east[:-1], east[1:])[0, 1]
    assert lag1 == pytest.approx(math.exp(-0.004 / tau), abs=0.02)

    steer = np.array([s.steering_wheel_angle_rad for s in of_type(samples, SteeringSample)])
    assert steer[0] == 0.0  # the walk starts at the configured bias
    assert np.diff(steer).std() == pytest.approx(q * math.sqrt(0.004), rel=0.03)


def test_deterministic_for_a_seed():
    run = [circle_truth(t) for t in times(3.0)]

    def flat(samples):
        return [np.concatenate([np.ravel(np.asarray(f, dtype=float)) for f in s if not isinstance(f, str)])
                for s in samples]

    a = flat(SensorSynthesizer(make_config(), MOUNTS, seed=42).feed_all(run))
    b = flat(SensorSynthesizer(make_config(), MOUNTS, seed=42).feed_all(run))
    c = flat(SensorSynthesizer(make_config(), MOUNTS, seed=43).feed_all(run))
    assert len(a) == len(b) == len(c)
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_sensor_streams_are_independent():
    run = rest_run(2.0)
    imu_alone = of_type(SensorSynthesizer(make_config(only=("imu",)), MOUNTS, seed=9).feed_all(run), ImuSample)
    changed = make_config({"gnss_fix.position_m.horizontal_sigma": 5.0, "steering.enabled": False})
    imu_with_others = of_type(SensorSynthesizer(changed, MOUNTS, seed=9).feed_all(run), ImuSample)
    for a, b in zip(imu_alone, imu_with_others):
        np.testing.assert_array_equal(a.linear_acceleration_m_s2, b.linear_acceleration_m_s2)
        np.testing.assert_array_equal(a.angular_velocity_rad_s, b.angular_velocity_rad_s)


def test_truth_is_not_modified():
    run = [circle_truth(t) for t in times(0.2)]
    before = copy.deepcopy(run)
    SensorSynthesizer(make_config(), MOUNTS, seed=0).feed_all(run)
    for a, b in zip(run, before):
        for fa, fb in zip(a, b):
            np.testing.assert_array_equal(fa, fb)

"""Baseline estimators (state_observer.sim.baselines) on hand-built, noiseless sensor samples.

Motions are planar rigid-body motions in closed form (straight line, steady circle, rest); the
samples are written here from REP-103 physics, not with the simulator's synthesizer. Expected
values are hand calculations: the motion itself, and the linear single-track model's
steady-state formulas from its force and moment balance.
"""
from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Callable, NamedTuple

import numpy as np
import pytest

from state_observer.sensors.geodesy import LocalENU
from state_observer.sensors.samples import GnssFix, ImuSample, SteeringSample, WheelSample
from state_observer.sim.baselines import KinematicEKF, LinearSingleTrack
from state_observer.conventions import rotation_from_rpy
from state_observer.sensors.mounts import SensorMounts

G_M_S2 = 9.81
DATUM = LocalENU(43.4935695, -8.2477616, 59.877)
RADIUS_M = 0.315
MS = 1_000_000  # ns per ms


class Pose(NamedTuple):
    position_m: np.ndarray  # (2,) ENU
    yaw_rad: float
    velocity_body_m_s: np.ndarray  # (2,)
    yaw_rate_rad_s: float
    acceleration_body_m_s2: np.ndarray  # (2,) of the base_link origin, base_link axes
    yaw_acceleration_rad_s2: float = 0.0


Motion = Callable[[float], Pose]


def straight(p0, yaw_rad: float, speed_m_s: float) -> Motion:
    u = np.array([math.cos(yaw_rad), math.sin(yaw_rad)])
    return lambda t: Pose(np.asarray(p0, float) + speed_m_s * t * u, yaw_rad, np.array([speed_m_s, 0.0]), 0.0, np.zeros(2))


def circle(centre, speed_m_s: float, yaw_rate_rad_s: float, yaw0_rad: float = 0.0) -> Motion:
    """base_link on a circle of radius v / r, heading along it: p = c + R (sin psi, -cos psi)."""
    radius = speed_m_s / yaw_rate_rad_s

    def pose(t: float) -> Pose:
        psi = yaw0_rad + yaw_rate_rad_s * t
        p = np.asarray(centre, float) + radius * np.array([math.sin(psi), -math.cos(psi)])
        return Pose(p, psi, np.array([speed_m_s, 0.0]), yaw_rate_rad_s, np.array([0.0, speed_m_s * yaw_rate_rad_s]))

    return pose


def spin(p0, yaw_acceleration_rad_s2: float) -> Motion:
    """Turning on the spot about the base_link origin from rest: yaw = alpha t^2 / 2."""
    a = yaw_acceleration_rad_s2
    return lambda t: Pose(np.asarray(p0, float), 0.5 * a * t * t, np.zeros(2), a * t, np.zeros(2), a)


def rot2(yaw_rad: float) -> np.ndarray:
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    return np.array([[c, -s], [s, c]])


def imu_sample(t_ns: int, pose: Pose, mounts: SensorMounts) -> ImuSample:
    """Level vehicle on a flat road: f = a_o + alpha x r_imu + w x (w x r_imu) + (0, 0, g)."""
    r, alpha = pose.yaw_rate_rad_s, pose.yaw_acceleration_rad_s2
    lever = mounts.imu_position_m
    f_base = np.array([pose.acceleration_body_m_s2[0] - alpha * lever[1] - r * r * lever[0],
                       pose.acceleration_body_m_s2[1] + alpha * lever[0] - r * r * lever[1], G_M_S2])
    w_base = np.array([0.0, 0.0, r])
    R = mounts.imu_rotation  # sensor -> base_link
    return ImuSample(t_ns, t_ns, "imu_link", R.T @ w_base, R.T @ f_base, 0.0035, 0.025)


def wheel_sample(t_ns: int, pose: Pose, radius_m: float = RADIUS_M) -> WheelSample:
    rate = np.full(4, pose.velocity_body_m_s[0] / radius_m)
    return WheelSample(t_ns, t_ns, np.zeros(4), rate, np.full(4, np.nan))


def gnss_fix(t_ns: int, enu_m, sigma_m: float = 0.5) -> GnssFix:
    lat, lon, h = DATUM.to_geodetic(*enu_m)
    cov = np.diag([sigma_m**2, sigma_m**2, (2 * sigma_m) ** 2])
    return GnssFix(t_ns, t_ns, "gnss_link", float(lat), float(lon), float(h), 0, cov)


def antenna_enu(pose: Pose, mounts: SensorMounts) -> np.ndarray:
    lever = mounts.gnss_position_m
    return np.append(pose.position_m + rot2(pose.yaw_rad) @ lever[:2], lever[2])


def sensor_stream(motion: Motion, duration_s: float, mounts: SensorMounts, gnss_outage_s=None):
    """IMU and wheels at 100 Hz (wheels 3 ms after the IMU), GNSS at 5 Hz (+7 ms), sorted by stamp."""
    out = []
    for k in range(int(round(duration_s * 100)) + 1):
        t_ns = k * 10 * MS
        out.append(imu_sample(t_ns, motion(t_ns * 1e-9), mounts))
        out.append(wheel_sample(t_ns + 3 * MS, motion((t_ns + 3 * MS) * 1e-9)))
    for k in range(int(duration_s * 5) + 1):
        t_ns = k * 200 * MS + 7 * MS
        if gnss_outage_s is not None and gnss_outage_s[0] <= t_ns * 1e-9 <= gnss_outage_s[1]:
            continue
        out.append(gnss_fix(t_ns, antenna_enu(motion(t_ns * 1e-9), mounts)))
    return sorted(out, key=lambda s: s.stamp_ns)


def run_ekf(ekf: KinematicEKF, samples, motion: Motion):
    """Feed every sample; after each, (t_s, state, truth) for the sample's stamp."""
    rows = []
    for s in samples:
        ekf.feed(s)
        rows.append((s.stamp_ns * 1e-9, ekf.state(), motion(s.stamp_ns * 1e-9)))
    return rows


CAR_MOUNTS = SensorMounts(imu_position_m=(1.30, 0.0, 0.45), gnss_position_m=(1.10, 0.0, 1.45))


# ------------------------------------------------------------------------------------------------
# KinematicEKF
# ------------------------------------------------------------------------------------------------

def test_process_noise_and_initial_covariance_are_robot_localization_defaults():
    # params/ekf.yaml (template) and FilterBase::reset(): x 0.05, y 0.05, yaw 0.06, vx 0.025,
    # vy 0.025, vyaw 0.02, ax 0.01, ay 0.01; initial_estimate_covariance 1e-9 on the diagonal.
    assert KinematicEKF.PROCESS_NOISE_DIAG == (0.05, 0.05, 0.06, 0.025, 0.025, 0.02, 0.01, 0.01)
    assert KinematicEKF.INITIAL_VARIANCE == 1e-9
    ekf = KinematicEKF(DATUM, CAR_MOUNTS, np.full(4, RADIUS_M), start=(0.0, 0.0, 0.3, 0.0), t0_ns=0)
    np.testing.assert_array_equal(ekf.P, 1e-9 * np.eye(8))
    # at rest: P = F (1e-9 I) F^T + Q dt, Ekf::predict scales Q by dt (0.1 s)
    ekf.predict_to(100 * MS)
    expected = 0.1 * np.array(KinematicEKF.PROCESS_NOISE_DIAG) + 1e-9
    np.testing.assert_allclose(np.diag(ekf.P), expected, rtol=0, atol=1e-10)


def test_straight_drive_keeps_position_and_zero_sideslip():
    yaw, v = math.radians(30.0), 15.0
    motion = straight((100.0, -40.0), yaw, v)
    ekf = KinematicEKF(DATUM, CAR_MOUNTS, np.full(4, RADIUS_M), start=(100.0, -40.0, yaw, v), t0_ns=0)
    rows = run_ekf(ekf, sensor_stream(motion, 20.0, CAR_MOUNTS), motion)
    t_end, est, truth = rows[-1]
    assert t_end > 19.9
    for _, est, truth in rows:
        assert np.linalg.norm(est.position_m - truth.position_m) < 0.03
        assert abs(est.yaw_rad - yaw) < 1e-3
        assert est.sideslip_rad == pytest.approx(0.0, abs=1e-6)
        np.testing.assert_allclose(est.velocity_body_m_s, [v, 0.0], atol=1e-3)


@pytest.mark.parametrize("mounts", [
    # IMU at base_link but turned 90 deg about z (its x points left): gyro and accelerometer must
    # be rotated to base_link
    SensorMounts(imu_rotation=rotation_from_rpy(0.0, 0.0, math.pi / 2), gnss_position_m=(1.0, 0.0, 1.4)),
    # IMU 1.3 m ahead and 0.2 m left of base_link: its centripetal -r^2 (1.3, 0.2) must be removed
    SensorMounts(imu_position_m=(1.3, 0.2, 0.45), gnss_position_m=(1.0, 0.0, 1.4)),
], ids=["imu_turned", "imu_offset"])
def test_steady_circle_yaw_rate_and_position_on_the_circle(mounts):
    # 10 m/s, 0.2 rad/s: radius 50 m, lateral acceleration 2 m/s^2
    v, r, centre = 10.0, 0.2, np.array([20.0, 30.0])
    motion = circle(centre, v, r)
    p0 = motion(0.0)
    ekf = KinematicEKF(DATUM, mounts, np.full(4, RADIUS_M), start=(*p0.position_m, p0.yaw_rad, v), t0_ns=0)
    rows = run_ekf(ekf, sensor_stream(motion, 30.0, mounts), motion)
    late = [(est, truth) for t, est, truth in rows if t > 5.0]
    assert late
    for est, truth in late:
        assert est.yaw_rate_rad_s == pytest.approx(r, abs=1e-3)
        assert abs(np.linalg.norm(est.position_m - centre) - v / r) < 0.05  # on the circle
        assert np.linalg.norm(est.position_m - truth.position_m) < 0.05  # and where the car is
        # robot_localization integrates vy' = ay (= v r here) with no r x v term; the odometry's
        # vy = 0 holds the resulting sideslip error small (0.7 deg) but positive
        assert 0.0 < est.sideslip_rad < 0.02
    assert ekf.state().velocity_body_m_s[0] == pytest.approx(v, abs=0.05)
    # the base_link acceleration of the circle: (0, v r)
    np.testing.assert_allclose(ekf.x[6:8], [0.0, v * r], atol=1e-3)


def test_imu_lever_arm_transfer_uses_the_differentiated_yaw_rate():
    # Spinning up on the spot at 0.5 rad/s^2 with the IMU 1.3 m ahead and 0.2 m left: the IMU
    # feels alpha x r + w x (w x r) (0.65 m/s^2 sideways at the start), base_link feels nothing.
    alpha = 0.5
    mounts = SensorMounts(imu_position_m=(1.3, 0.2, 0.45), gnss_position_m=(1.0, 0.0, 1.4))
    motion = spin((5.0, 5.0), alpha)
    ekf = KinematicEKF(DATUM, mounts, np.full(4, RADIUS_M), start=(5.0, 5.0, 0.0, 0.0), t0_ns=0)
    assert ekf.tick_ns == round(1e9 / 30.0)
    alpha_by_tick, acceleration = {}, []
    for s in sensor_stream(motion, 3.0, mounts):
        ekf.feed(s)
        t = s.stamp_ns * 1e-9
        if t > 0.5:
            assert ekf.state().yaw_rate_rad_s == pytest.approx(alpha * t, abs=0.01)  # held between IMU samples
            alpha_by_tick[ekf.yaw_acceleration_stamp_ns] = ekf.yaw_acceleration_rad_s2
            acceleration.append(ekf.x[6:8].copy())
    # 3 or 4 gyro samples fall between 30 Hz ticks, so the difference quotient alternates
    # between 0.45 and 0.6 rad/s^2; on average it is alpha
    assert len(alpha_by_tick) > 70
    assert np.mean(list(alpha_by_tick.values())) == pytest.approx(alpha, rel=0.01)
    # without the transfer ay would read alpha r_x = 0.65 m/s^2 and ax -w^2 r_x, up to -2.9 m/s^2
    assert np.abs(acceleration).max() < 0.1
    est, truth = ekf.state(), motion(ekf.stamp_ns * 1e-9)
    assert est.yaw_rad == pytest.approx(truth.yaw_rad, abs=0.01)
    np.testing.assert_allclose(est.position_m, truth.position_m, atol=0.02)


@pytest.mark.parametrize("lever_m, expected_offset_m", [((1.0, 0.0, 1.5), 0.0), ((0.0, 0.0, 1.5), 1.0)])
def test_gnss_lever_arm_is_removed_with_the_yaw_estimate(lever_m, expected_offset_m):
    # At rest at (10, -5) heading north (yaw 90 deg); the antenna is 1 m forward, i.e. at (10, -4).
    truth_mounts = SensorMounts(gnss_position_m=(1.0, 0.0, 1.5))
    motion = straight((10.0, -5.0), math.pi / 2, 0.0)
    samples = sensor_stream(motion, 60.0, truth_mounts)
    np.testing.assert_allclose(DATUM.to_enu(samples[2].latitude_deg, samples[2].longitude_deg, samples[2].altitude_m)[:2],
                               [10.0, -4.0], atol=1e-6)
    # The filter starts 0.5 m off in x; with the right lever arm it settles on base_link, with
    # none (the control case) on the antenna, 1 m north.
    ekf = KinematicEKF(DATUM, SensorMounts(gnss_position_m=lever_m), np.full(4, RADIUS_M), start=(10.5, -5.0, math.pi / 2, 0.0))
    for s in samples:
        ekf.feed(s)
    est = ekf.state()
    np.testing.assert_allclose(est.position_m, [10.0, -5.0 + expected_offset_m], atol=0.02)
    assert est.yaw_rad == pytest.approx(math.pi / 2, abs=1e-3)
    assert est.sideslip_rad == 0.0


def test_gnss_outage_then_resumption_converges_back():
    # 20 m/s straight; the filter's wheel radius is 2 % too large, so during a 5 s GNSS outage
    # the position runs ahead by ~0.02 * 20 m/s * 5 s = 2 m; once fixes return it comes back.
    v, yaw = 20.0, math.radians(-60.0)
    motion = straight((0.0, 0.0), yaw, v)
    samples = sensor_stream(motion, 30.0, CAR_MOUNTS, gnss_outage_s=(10.0, 15.0))
    assert not any(isinstance(s, GnssFix) and 10.0 <= s.stamp_ns * 1e-9 <= 15.0 for s in samples)
    ekf = KinematicEKF(DATUM, CAR_MOUNTS, np.full(4, 1.02 * RADIUS_M), start=(0.0, 0.0, yaw, v))
    rows = run_ekf(ekf, samples, motion)
    assert all(np.isfinite(est.position_m).all() and np.isfinite(est.velocity_body_m_s).all() for _, est, _ in rows)

    def error_at(t_s: float) -> float:
        _, est, truth = min(rows, key=lambda row: abs(row[0] - t_s))
        return float(np.linalg.norm(est.position_m - truth.position_m))

    before, end_of_outage, after = error_at(9.9), error_at(15.0), error_at(25.0)
    assert end_of_outage > 1.0
    assert end_of_outage > 3.0 * before
    assert after < 0.5 * end_of_outage
    # back to the error it had before the outage (the steady lag of the 2 % odometry error)
    assert after == pytest.approx(before, abs=0.05)


def test_ekf_ignores_steering_and_no_fix_samples():
    ekf = KinematicEKF(DATUM, CAR_MOUNTS, np.full(4, RADIUS_M), start=(1.0, 2.0, 0.0, 5.0), t0_ns=0)
    before = ekf.state()
    ekf.feed(SteeringSample(50 * MS, 50 * MS, 0.3))
    ekf.feed(GnssFix(60 * MS, 60 * MS, "gnss_link", math.nan, math.nan, math.nan, -1, np.zeros((3, 3))))
    after = ekf.state()
    assert after.stamp_ns == before.stamp_ns == 0
    np.testing.assert_array_equal(after.position_m, before.position_m)


# ------------------------------------------------------------------------------------------------
# LinearSingleTrack
# ------------------------------------------------------------------------------------------------

M_KG, IZ_KG_M2, LF_M, LR_M = 1500.0, 2700.0, 1.14, 1.56
CF_N_RAD, CR_N_RAD, RATIO = 1.0e5, 0.95e5, 15.0  # l_r C_r > l_f C_f: understeer
L_M = LF_M + LR_M


def single_track(**kwargs) -> LinearSingleTrack:
    return LinearSingleTrack(M_KG, IZ_KG_M2, LF_M, LR_M, CF_N_RAD, CR_N_RAD, RATIO, np.full(4, RADIUS_M), **kwargs)


def drive(model: LinearSingleTrack, speed_m_s: float, steering_wheel_rad: float, duration_s: float, step_ms: int = 10, t0_ns: int = 0) -> None:
    for k in range(int(round(duration_s * 1000 / step_ms)) + 1):
        t_ns = t0_ns + k * step_ms * MS
        model.feed(SteeringSample(t_ns, t_ns, steering_wheel_rad))
        model.feed(WheelSample(t_ns, t_ns, np.zeros(4), np.full(4, speed_m_s / RADIUS_M), np.full(4, np.nan)))


def hand_steady_state(v: float, delta: float) -> tuple[float, float]:
    """(v_y at the centre of mass, r) from the steady force and moment balance:
    m v r = F_yf + F_yr, l_f F_yf = l_r F_yr, F_yr = -C_r (v_y - l_r r) / v, F_yf = C_f (delta - (v_y + l_f r) / v)."""
    K = M_KG * (LR_M * CR_N_RAD - LF_M * CF_N_RAD) / (CF_N_RAD * CR_N_RAD * L_M**2)
    r = v * delta / (L_M * (1.0 + K * v * v))
    f_rear = LF_M / L_M * M_KG * v * r
    vy = LR_M * r - f_rear * v / CR_N_RAD
    f_front = LR_M / L_M * M_KG * v * r
    assert f_front == pytest.approx(CF_N_RAD * (delta - (vy + LF_M * r) / v), rel=1e-9)  # the front balance closes
    return vy, r


@pytest.mark.parametrize("speed_m_s", [5.0, 20.0, 35.0])
def test_single_track_steady_state_matches_closed_form(speed_m_s):
    steering_wheel = 0.6  # rad; delta = 0.04 rad
    delta = steering_wheel / RATIO
    model = single_track()
    drive(model, speed_m_s, steering_wheel, 8.0)
    st = model.state()
    K = M_KG * (LR_M * CR_N_RAD - LF_M * CF_N_RAD) / (CF_N_RAD * CR_N_RAD * L_M**2)
    assert model.understeer_gradient_s2_per_m2 == pytest.approx(K, rel=1e-12)
    assert st.yaw_rate_rad_s == pytest.approx(speed_m_s * delta / (L_M * (1.0 + K * speed_m_s**2)), rel=1e-6)
    vy_cg, r = hand_steady_state(speed_m_s, delta)
    # sideslip at the centre of mass: beta = delta (l_r - l_f m v^2 / (C_r L)) / (L (1 + K v^2))
    beta_cg = delta * (LR_M - LF_M * M_KG * speed_m_s**2 / (CR_N_RAD * L_M)) / (L_M * (1.0 + K * speed_m_s**2))
    assert vy_cg / speed_m_s == pytest.approx(beta_cg, rel=1e-9)
    vy_base = vy_cg - r * LR_M  # base_link at the rear axle, l_r behind the centre of mass
    np.testing.assert_allclose(st.velocity_body_m_s, [speed_m_s, vy_base], rtol=1e-6, atol=1e-9)
    assert st.velocity_body_m_s[1] + st.yaw_rate_rad_s * LR_M == pytest.approx(vy_cg, rel=1e-6, abs=1e-9)
    assert st.sideslip_rad == pytest.approx(math.atan2(vy_base, speed_m_s), rel=1e-6, abs=1e-9)
    assert np.isnan(st.position_m).all()
    yaw0 = st.yaw_rad  # yaw integrates r: one more second of steady cornering adds r * 1 s
    drive(model, speed_m_s, steering_wheel, 1.0, t0_ns=st.stamp_ns + 10 * MS)
    assert math.remainder(model.state().yaw_rad - yaw0 - r * 1.01, 2 * math.pi) == pytest.approx(0.0, abs=1e-9)


def test_single_track_step_response_matches_fine_euler_and_is_step_size_independent():
    v, steering_wheel = 20.0, 0.9
    delta = steering_wheel / RATIO
    coarse, fine = single_track(), single_track()
    drive(coarse, v, steering_wheel, 0.3, step_ms=50)
    drive(fine, v, steering_wheel, 0.3, step_ms=1)
    # reference: forward Euler at 10 us of the equations of motion, from rest at t = 0
    vy, r, dt = 0.0, 0.0, 1e-5
    for _ in range(30000):
        f_front = CF_N_RAD * (delta - (vy + LF_M * r) / v)
        f_rear = -CR_N_RAD * (vy - LR_M * r) / v
        vy, r = vy + dt * ((f_front + f_rear) / M_KG - v * r), r + dt * (LF_M * f_front - LR_M * f_rear) / IZ_KG_M2
    for model in (coarse, fine):
        st = model.state()
        assert st.stamp_ns == 300 * MS
        assert st.yaw_rate_rad_s == pytest.approx(r, rel=1e-3)
        assert st.velocity_body_m_s[1] + st.yaw_rate_rad_s * LR_M == pytest.approx(vy, rel=2e-3, abs=1e-5)
    assert coarse.state().yaw_rate_rad_s == pytest.approx(fine.state().yaw_rate_rad_s, rel=1e-9)
    assert 0.0 < r < hand_steady_state(v, delta)[1] * 1.2


def test_single_track_low_speed_stays_finite_and_kinematic():
    model = single_track()
    steering_wheel = 6.0  # near lock: delta 0.4 rad
    for v in (2.0, 0.9, 0.3, 0.05, 0.0, 0.0):
        drive(model, v, steering_wheel, 1.0, step_ms=10, t0_ns=model.stamp_ns or 0)
        st = model.state()
        assert np.isfinite([st.yaw_rate_rad_s, st.sideslip_rad, st.yaw_rad, *st.velocity_body_m_s]).all()
        if v < 1.0:  # kinematic: r = v delta / L, and no lateral velocity at the rear axle (base_link)
            assert st.yaw_rate_rad_s == pytest.approx(v * 0.4 / L_M, rel=1e-3, abs=1e-12)
            assert abs(st.velocity_body_m_s[1]) < 1e-3 * max(v, 1e-3)
    assert model.state().yaw_rate_rad_s == 0.0
    assert model.state().sideslip_rad == 0.0


def test_single_track_from_default_vehicle_description():
    from state_observer.paths import default_vehicle_path
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.detailed import DetailedVehicle

    desc = load_vehicle(default_vehicle_path())
    model = LinearSingleTrack.from_description(desc)
    detailed = DetailedVehicle(desc)
    assert model.m == pytest.approx(detailed.total_mass_kg, rel=1e-12)
    assert model.m == pytest.approx(desc.total_mass_kg, rel=1e-9)
    assert model.lf + model.lr == pytest.approx(desc.wheelbase_m, rel=1e-12)
    assert model.cg_x_m == pytest.approx(model.lr, abs=1e-9)  # base_link below the rear axle
    # Axle loads from the moment balance about the rear axle; per tire k_y lam_k F_z with the
    # tire model's load sensitivity lam_k = max(1 - q_k (F_z/F_z0 - 1), 0.2) (F_z0 where the file gives none: the
    # wheel's static load from the lumped masses, lam_k = 1 but for the lumping's rounding).
    m_g = detailed.total_mass_kg * 9.81
    loads = np.array([m_g * model.lr / desc.wheelbase_m / 2] * 2 + [m_g * model.lf / desc.wheelbase_m / 2] * 2)

    def hand_axle_stiffness(vehicle):
        c = []
        for corner, f_z in zip(vehicle.corners, loads):
            q_k, f_z0 = corner.tire.load_sensitivity_stiffness, corner.tire.nominal_load_n
            f_z0 = vehicle.static_wheel_load_n(corner) if f_z0 is None else f_z0
            lam_k = max(1.0 - q_k * (f_z / f_z0 - 1.0), 0.2)
            c.append(corner.tire.cornering_stiffness_per_rad * lam_k * f_z)
        return c[0] + c[1], c[2] + c[3]

    cf, cr = hand_axle_stiffness(desc)
    assert model.cf == pytest.approx(cf, rel=1e-9)
    assert model.cr == pytest.approx(cr, rel=1e-9)
    K = model.m * (model.lr * cr - model.lf * cf) / (cf * cr * desc.wheelbase_m**2)
    assert model.understeer_gradient_s2_per_m2 == pytest.approx(K, rel=1e-9, abs=1e-12)
    if all(c.tire.load_sensitivity_stiffness == 0.0 or c.tire.nominal_load_n is None for c in desc.corners):
        # One k_y on all four tires and C = k_y F_z,static: l_f C_f = k_y m g l_f l_r / L = l_r C_r,
        # so the linear single track of a vehicle whose stiffnesses hold at its static loads is neutral steer (K = 0).
        assert model.lf * model.cf == pytest.approx(model.lr * model.cr, rel=1e-4)  # F_z0 from the lumped masses
        assert abs(model.understeer_gradient_s2_per_m2) < 1e-5  # a real car: ~1e-3
    else:
        assert model.understeer_gradient_s2_per_m2 > 0.0  # nose-heavy car, load-sensitive tires
    assert 2000.0 < model.iz < 3500.0  # the YAML's summary: ~2670 kg m^2
    assert 14.0 < model.steering_ratio < 16.0  # ~14.8:1
    np.testing.assert_array_equal(model.wheel_radius_m, [0.315, 0.315, 0.317, 0.317])

    # Softer front tires (k_y 12 /rad instead of 14) make it understeer, by the closed form.
    softer = replace(desc, corners=tuple(replace(c, tire=replace(c.tire, cornering_stiffness_per_rad=12.0)) if c.axle == "front" else c
                                         for c in desc.corners))
    under = LinearSingleTrack.from_description(softer)
    cf, cr = hand_axle_stiffness(softer)
    assert (under.cf, under.cr) == pytest.approx((cf, cr), rel=1e-9)
    K = under.m * (under.lr * cr - under.lf * cf) / (cf * cr * desc.wheelbase_m**2)
    assert under.understeer_gradient_s2_per_m2 == pytest.approx(K, rel=1e-9)
    assert K > 0.0


def test_single_track_load_sensitive_tires_understeer():
    from state_observer.paths import default_vehicle_path
    from state_observer.vehicle.description import Tire, load_vehicle

    if "load_sensitivity_stiffness" not in {f.name for f in fields(Tire)}:
        pytest.skip("this vehicle description has no tire load sensitivity")
    desc = load_vehicle(default_vehicle_path())
    mf = dict(characteristic="magic_formula", shape_factor=1.3, nominal_load_n=4000.0, load_sensitivity_stiffness=0.3)
    desc = replace(desc, corners=tuple(replace(c, tire=replace(c.tire, **mf)) for c in desc.corners))
    model = LinearSingleTrack.from_description(desc)
    # static loads ~4.26 kN front and ~3.10 kN rear per tire: lam_k = 1 - 0.3 (F_z / 4 kN - 1)
    m_g = model.m * 9.81
    f_front, f_rear = m_g * model.lr / (2 * desc.wheelbase_m), m_g * model.lf / (2 * desc.wheelbase_m)
    assert model.cf == pytest.approx(2 * 14.0 * (1 - 0.3 * (f_front / 4000.0 - 1)) * f_front, rel=1e-9)
    assert model.cr == pytest.approx(2 * 14.0 * (1 - 0.3 * (f_rear / 4000.0 - 1)) * f_rear, rel=1e-9)
    assert model.understeer_gradient_s2_per_m2 > 0.0

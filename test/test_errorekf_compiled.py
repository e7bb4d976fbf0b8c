"""The compiled paths of the errorEKF-FE and the SPI against their plain numpy definitions: sensor blocks
(H mapped onto the error state, innovation, gate, Joseph form), the IMU and wheel-rate updates, the
covariance propagation with F kept as its velocity rows, the feedback, and the SPI's force residuals."""
import numpy as np
import pytest

from state_observer.estimation import errorekf as ekf
from state_observer.estimation.errorekf import N, ErrorEkfSettings, VehicleErrorEKF
from state_observer.estimation.kalman import SensorStatistics, sequential_update
from state_observer.sensors import models


@pytest.fixture(scope="module")
def filt():
    from state_observer.paths import default_vehicle_path
    from state_observer.sim.sensors import mounts_from_vehicle
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = load_vehicle(default_vehicle_path())
    f = VehicleErrorEKF(ReducedVehicle(desc), mounts_from_vehicle(desc), ErrorEkfSettings())
    f.start(speed_m_s=15.0)
    f.vehicle.set_inputs(0.4, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(30):
        assert f.predict()
        f.correct()
    assert f.predict()
    rng = np.random.default_rng(4)
    f.x[:] = rng.standard_normal(3 * N) * 1e-3  # as after earlier blocks of the step
    return f


def mapped(f, H):
    """H over [z, z_dot, z_ddot] onto [dz, dz_dot, a]: dz_ddot = A dz + B dz_dot + a."""
    H = H.copy()
    H[:, :N] += H[:, 2 * N :] @ f._A
    H[:, N : 2 * N] += H[:, 2 * N :] @ f._B
    return H


def reference_block(f, x, P, y, h, H, R):
    Hm = mapped(f, H)
    stats = SensorStatistics()
    accepted = sequential_update(x, P, y - h - Hm @ x, Hm, R, f.gate(len(y)), stats)
    return accepted, stats


def test_sensor_blocks_match_the_numpy_update(filt):
    f = filt
    q, qd, qdd = f._state()
    m = f.mounts
    rng = np.random.default_rng(5)
    blocks = [models.gyroscope(q, qd, m.imu_rotation), models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation),
              models.gnss_velocity(q, qd, m.gnss_position_m)]
    for h, H in blocks:
        y = h + rng.standard_normal(3) * 0.05
        R = np.eye(3) * 0.01
        x0, P0 = f.x.copy(), f.P.copy()
        accepted, stats = reference_block(f, x0, P0, y, h, H, R)
        x1, P1, nu = f.x.copy(), f.P.copy(), np.empty(3)
        nis = ekf._error_block(x1, P1, y, h, H, R, f._A, f._B, f.gate(3), nu)
        assert accepted and nis == pytest.approx(stats.last_nis, rel=1e-9)
        np.testing.assert_allclose(nu, stats.last_innovation, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12 * np.abs(x0).max())
        np.testing.assert_allclose(P1, P0, rtol=0, atol=1e-10 * np.abs(P0).max())
        assert np.array_equal(P1, P1.T)


def test_imu_and_wheel_updates_match_the_block_by_block_path(filt):
    f = filt
    q, qd, qdd = f._state()
    m = f.mounts
    gyro = models.gyroscope(q, qd, m.imu_rotation)[0] + 0.01
    accel = models.accelerometer(q, qd, qdd, m.imu_position_m, m.imu_rotation)[0] - 0.1
    rates = qd[10:14] + 0.05
    x0, P0 = f.x.copy(), f.P.copy()
    expected = []
    for name, h, H, y, R in (("gyroscope", *f._h_gyroscope(), gyro, np.eye(3) * 1e-4),
                             ("accelerometer", *f._h_accelerometer(), accel, np.eye(3) * 1e-2),
                             ("wheel_rates", *f._h_wheel_rates(), rates, np.eye(4) * 0.05**2)):
        accepted, _ = reference_block(f, x0, P0, y, h, H, R)
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


def test_covariance_propagation_and_feedback_match_the_dense_forms(filt):
    f = filt
    F = f._transition()  # also refreshes G, A, B, M
    P = f.P.copy()
    ekf._propagate_fe(P, f._G, f.dt, f.plant, np.empty_like(P))
    expected = F @ f.P @ F.T + f.plant
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    solver = f.vehicle.solver
    x = f.x
    q, qd, qdd, dQ, force_ok, finite = ekf._feed_back(x, solver.q, solver.qd, solver.qdd, f._A, f._B, f._M, f._feedback_mask, f.P)
    dz, dzd, a = x[:N], x[N : 2 * N], x[2 * N :]
    np.testing.assert_allclose(q, solver.q + dz, rtol=1e-14)
    np.testing.assert_allclose(qd, solver.qd + dzd, rtol=1e-14)
    np.testing.assert_allclose(qdd, solver.qdd + f._A @ dz + f._B @ dzd + a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dQ, (f._M @ a) * f._feedback_mask, rtol=1e-12, atol=1e-12)
    assert force_ok and finite


def test_spi_force_residuals_match_the_model_evaluation(filt):
    """(M(theta) z_ddot - Q(theta)) from the compiled sigma-point loop against the model itself with its
    mass and friction set to theta; the model's own parameters and records are left alone."""
    v = filt.vehicle
    solver = v.solver
    thetas = np.array([[v.total_mass_kg, 1.0], [v.total_mass_kg * 0.9, 0.7], [v.total_mass_kg * 1.1, 0.4]])
    before = v.total_mass_kg, v.mu.copy(), v._tire_out.copy(), v.body.copy()
    got = v.force_residuals(thetas, range(N))
    assert v.total_mass_kg == before[0] and np.array_equal(v.mu, before[1])
    assert np.array_equal(v._tire_out, before[2]) and np.array_equal(v.body, before[3])
    saved = v.force_correction.copy()
    try:
        for theta, r in zip(thetas, got):
            v.set_total_mass(theta[0])
            v.mu = theta[1]
            v.force_correction[:] = 0.0
            Q = np.zeros(N)
            v._accumulate(solver.q, solver.qd, solver.t, Q, None, None)
            inertial = v.mass_matrix(solver.q) @ solver.qdd
            expected = inertial - Q
            np.testing.assert_allclose(r, expected, rtol=0, atol=1e-12 * np.abs(inertial).max())  # a difference of ~1e4 N terms
    finally:
        v.set_total_mass(before[0])
        v.mu = before[1]
        v.force_correction[:] = saved

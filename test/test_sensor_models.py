"""Sensor models of the 14-DOF state: Jacobians against finite differences, and the same numbers as the
sensor simulator on a truth sample of the reduced model."""
import numpy as np
import pytest

from state_observer.sensors import models
from state_observer.conventions import rotation_from_rpy

N = models.N
RNG = np.random.default_rng(7)
Q = np.array([12.0, -4.0, 0.33, 0.04, -0.03, 0.9, 0.01, -0.02, 0.015, 0.0, 3.0, 2.0, 1.0, 0.5])
QD = np.concatenate([[14.0, 3.0, 0.1, 0.2, -0.15, 0.4], RNG.normal(0, 0.1, 4), RNG.normal(40, 2, 4)])
QDD = np.concatenate([[1.0, -2.0, 0.3, 1.5, -0.7, 0.8], RNG.normal(0, 1, 4), RNG.normal(0, 5, 4)])
ANTENNA = np.array([-0.4, 0.1, 1.3])
IMU = np.array([0.3, -0.2, 0.15])
MOUNT = rotation_from_rpy(0.02, -0.05, 1.5)

CASES = {
    "gnss_position": lambda q, qd, qdd: models.gnss_position(q, ANTENNA, orientation_columns=True),
    "gnss_velocity": lambda q, qd, qdd: models.gnss_velocity(q, qd, ANTENNA),
    "gyroscope": lambda q, qd, qdd: models.gyroscope(q, qd, MOUNT),
    "accelerometer": lambda q, qd, qdd: models.accelerometer(q, qd, qdd, IMU, MOUNT),
    "wheel_angles": lambda q, qd, qdd: models.wheel_angles(q),
    "wheel_rates": lambda q, qd, qdd: models.wheel_rates(qd),
    "suspension_travel": lambda q, qd, qdd: models.suspension_travel(q),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jacobian_matches_finite_differences(name):
    model = CASES[name]
    x = np.concatenate([Q, QD, QDD])

    def h(x):
        return model(x[:N], x[N : 2 * N], x[2 * N :])[0]

    H = model(Q, QD, QDD)[1]
    step = 1e-6
    H_fd = np.array([(h(x + step * e) - h(x - step * e)) / (2 * step) for e in np.eye(3 * N)]).T
    assert np.abs(H_fd).max() > 0
    np.testing.assert_allclose(H, H_fd, atol=1e-7 * max(1.0, np.abs(H_fd).max()))


def test_gnss_position_leaves_orientation_out_by_default():
    H = models.gnss_position(Q, ANTENNA)[1]
    assert not H[:, 3:6].any()
    np.testing.assert_array_equal(H[:, :3], np.eye(3))


@pytest.fixture(scope="module")
def detailed():
    from state_observer.paths import default_vehicle_path
    from state_observer.vehicle.description import load_vehicle
    from state_observer.conventions import WHEELS
    from state_observer.vehicle.detailed import DetailedVehicle

    vehicle = DetailedVehicle(load_vehicle(default_vehicle_path()))
    vehicle.start(speed_m_s=12.0)
    vehicle.set_inputs(0.5, [150.0, 150.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(100):
        assert vehicle.step().success
    return vehicle, models.NaturalChassisSensors(vehicle.model, spins=[f"th_{w}" for w in WHEELS])


NATURAL = {
    "gnss_position": lambda s, q, qd, qdd: s.gnss_position(q, ANTENNA, orientation_columns=True),
    "gnss_velocity": lambda s, q, qd, qdd: s.gnss_velocity(q, qd, ANTENNA),
    "gyroscope": lambda s, q, qd, qdd: s.gyroscope(q, qd, MOUNT),
    "accelerometer": lambda s, q, qd, qdd: s.accelerometer(q, qdd, IMU, MOUNT),
    "wheel_rates": lambda s, q, qd, qdd: s.wheel_rates(qd),
}


@pytest.mark.parametrize("name", sorted(NATURAL))
def test_natural_coordinate_jacobians_match_finite_differences(detailed, name):
    vehicle, sensors = detailed
    q, qd, qdd = vehicle.solver.q, vehicle.solver.qd, vehicle.solver.qdd
    model = NATURAL[name]
    _, Hq, Hqd = model(sensors, q, qd, qdd)
    step = 1e-6
    for H, which in ((Hq, 0), (Hqd, 1)):
        def h(x):
            args = [q, qd] if which == 0 else [q, x]
            return model(sensors, x if which == 0 else q, args[1], qdd)[0]

        base = q if which == 0 else qd
        H_fd = np.array([(h(base + step * e) - h(base - step * e)) / (2 * step) for e in np.eye(len(base))]).T
        np.testing.assert_allclose(H, H_fd, atol=1e-7 * max(1.0, np.abs(H_fd).max()))


def test_natural_and_minimal_models_agree_on_the_same_motion(detailed):
    """The detailed model's chassis state mapped to (position, roll, pitch, yaw) gives the same gyroscope,
    GNSS velocity and accelerometer readings through both families of models."""
    vehicle, sensors = detailed
    q, qd = vehicle.solver.q, vehicle.solver.qd
    truth = vehicle.truth()
    p0, R = vehicle.chassis_frame(q)
    roll, pitch, yaw = np.arctan2(R[2, 1], R[2, 2]), -np.arcsin(R[2, 0]), np.arctan2(R[1, 0], R[0, 0])
    att = models.Attitude(roll, pitch, yaw)
    np.testing.assert_allclose(att.R, R, atol=1e-8)
    eta_d = np.linalg.solve(att.E, truth.angular_velocity_body_rad_s)
    z = np.concatenate([p0, [roll, pitch, yaw], np.zeros(8)])
    zd = np.concatenate([truth.velocity_enu_m_s, eta_d, np.zeros(8)])
    np.testing.assert_allclose(sensors.gyroscope(q, qd, MOUNT)[0], models.gyroscope(z, zd, MOUNT)[0], atol=1e-7)
    np.testing.assert_allclose(sensors.gnss_velocity(q, qd, ANTENNA)[0], models.gnss_velocity(z, zd, ANTENNA)[0], atol=1e-7)

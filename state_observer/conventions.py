"""Conventions shared by the whole package (a ground floor every layer may import; it imports nothing of the package):
gravity, the wheel order, attitude quaternions (w, x, y, z, body -> ENU), heading and sideslip."""
from __future__ import annotations

import math

import numpy as np

GRAVITY_M_S2 = 9.81  # magnitude of gravity in every model, the sensor models and the simulator
WHEELS = ("fl", "fr", "rl", "rr")  # order of every per-wheel array: front left, front right, rear left, rear right
MIN_SIDESLIP_SPEED_M_S = 0.5  # below this horizontal speed the sideslip angle is reported as 0 (undefined at rest)


def yaw_rad(q_wxyz) -> float:
    """Heading (rad, ENU, counter-clockwise from east) of a body orientation quaternion (w, x, y, z): the yaw of its ZYX
    (yaw-pitch-roll) angles."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quaternion_to_matrix(q_wxyz) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (w, x, y, z); it is normalised first."""
    w, x, y, z = np.asarray(q_wxyz, dtype=float) / np.linalg.norm(q_wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quaternion_from_matrix(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method).

    R must be orthonormal to the accuracy wanted (the chassis axes are, to the constraint tolerance);
    the result is normalised."""
    tr = np.trace(R)
    if tr > 0.0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    return q / np.linalg.norm(q) * (1.0 if q[0] >= 0.0 else -1.0)


def rotation_from_rpy(roll_rad: float, pitch_rad: float, yaw_rad: float) -> np.ndarray:
    """Rotation matrix R = Rz(yaw) Ry(pitch) Rx(roll) (URDF ``rpy``: fixed axes x, y, z in that order).

    Used for a sensor mounting it takes sensor-frame components to base_link components.
    """
    cr, sr = math.cos(roll_rad), math.sin(roll_rad)
    cp, sp = math.cos(pitch_rad), math.sin(pitch_rad)
    cy, sy = math.cos(yaw_rad), math.sin(yaw_rad)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def sideslip_rad(v_x: float, v_y: float) -> float:
    """Sideslip angle (rad) of a body velocity (m/s, base_link x forward, y left): ``atan(v_y / v_x)`` (SAE J670),
    the angle between the car's longitudinal axis and its path, so a car reversing straight has 0, not 180 deg;
    positive when the velocity points left of the direction of travel's axis. 0 below MIN_SIDESLIP_SPEED_M_S."""
    if math.hypot(v_x, v_y) <= MIN_SIDESLIP_SPEED_M_S:
        return 0.0
    return math.atan2(-v_y if v_x < 0.0 else v_y, abs(v_x))

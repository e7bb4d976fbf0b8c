"""Conventions shared by the whole package (a ground floor every layer may import; it imports nothing of the package):
attitude quaternions (w, x, y, z, body -> ENU), heading and sideslip."""
from __future__ import annotations

import math

import numpy as np

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

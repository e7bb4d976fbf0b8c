"""Conventions shared by the whole package (a ground floor every layer may import; it imports nothing of the package)."""
from __future__ import annotations

import math

MIN_SIDESLIP_SPEED_M_S = 0.5  # below this horizontal speed the sideslip angle is reported as 0 (undefined at rest)


def yaw_rad(q_wxyz) -> float:
    """Heading (rad, ENU, counter-clockwise from east) of a body orientation quaternion (w, x, y, z): the yaw of its ZYX
    (yaw-pitch-roll) angles."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def sideslip_rad(v_x: float, v_y: float) -> float:
    """Sideslip angle (rad) of a body velocity (m/s, base_link x forward, y left): ``atan(v_y / v_x)`` (SAE J670),
    the angle between the car's longitudinal axis and its path, so a car reversing straight has 0, not 180 deg;
    positive when the velocity points left of the direction of travel's axis. 0 below MIN_SIDESLIP_SPEED_M_S."""
    if math.hypot(v_x, v_y) <= MIN_SIDESLIP_SPEED_M_S:
        return 0.0
    return math.atan2(-v_y if v_x < 0.0 else v_y, abs(v_x))

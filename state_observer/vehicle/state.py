"""The state of a vehicle at one instant: the record the simulator's ground truth and the observer's estimate share."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class VehicleState(NamedTuple):
    """State of a vehicle at time t (SI units; base_link = REP-105 body frame): the simulator's truth or the observer's
    estimate.

    base_link: origin on the ground below the rear-axle centre at design ride height,
    x forward, y left, z up. Per-wheel arrays in the order fl, fr, rl, rr.
    """

    t_s: float
    position_enu_m: np.ndarray  # (3,) base_link origin in the local ENU frame
    orientation_wxyz: np.ndarray  # (4,) unit quaternion, base_link -> ENU
    velocity_enu_m_s: np.ndarray  # (3,) of the base_link origin, ENU
    acceleration_enu_m_s2: np.ndarray  # (3,) of the base_link origin, ENU, gravity not included
    angular_velocity_body_rad_s: np.ndarray  # (3,) base_link axes
    angular_acceleration_body_rad_s2: np.ndarray  # (3,) base_link axes
    wheel_angle_rad: np.ndarray  # (4,) spin angle relative to the knuckle
    wheel_rate_rad_s: np.ndarray  # (4,)
    wheel_torque_n_m: np.ndarray  # (4,) applied drive minus brake torque
    steering_wheel_angle_rad: float
    suspension_travel_m: np.ndarray  # (4,) wheel-centre travel from design position, + in bump
    tire_force_n: np.ndarray  # (4, 3) fx, fy, fz in the tire frame (ISO 8855 sense)
    slip_ratio: np.ndarray  # (4,)
    slip_angle_rad: np.ndarray  # (4,) ISO 8855 sign
    contact_point_base_m: np.ndarray  # (4, 3) in base_link
    mass_kg: float  # total mass
    friction_coefficient: float  # tire-road friction coefficient

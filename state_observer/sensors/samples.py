"""Sensor sample records shared by the simulator, the estimators and the I/O layer.

Immutable NamedTuples; time is integer nanoseconds. ``stamp_ns`` is when the quantity was
measured (it goes into header.stamp); ``receive_ns`` is when it reached the computer (bag log
time, stamp plus latency). Frames follow REP-103/105/145: vectors of IMU samples are in the
sensor frame ``frame_id``; GNSS positions are WGS84, velocities ENU.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..conventions import WHEELS  # order of every per-wheel array
WHEEL_JOINTS = tuple(f"wheel_{w}_joint" for w in WHEELS)
STEERING_JOINT = "steering_wheel_joint"


class ImuSample(NamedTuple):
    stamp_ns: int
    receive_ns: int
    frame_id: str
    angular_velocity_rad_s: np.ndarray  # (3,) sensor frame
    linear_acceleration_m_s2: np.ndarray  # (3,) specific force incl. gravity reaction, sensor frame
    angular_velocity_sigma: float | np.ndarray  # 1-sigma, one for all axes or (3,) per axis (rad/s); NaN: unknown
    linear_acceleration_sigma: float | np.ndarray  # likewise (m/s^2); a NaN value marks an axis the IMU does not measure


class GnssFix(NamedTuple):
    stamp_ns: int
    receive_ns: int
    frame_id: str
    latitude_deg: float
    longitude_deg: float
    altitude_m: float  # ellipsoidal height (m)
    status: int  # sensor_msgs/NavSatStatus: -1 no fix, 0 fix, 1 SBAS, 2 GBAS
    position_covariance_enu_m2: np.ndarray  # (3, 3) ENU


class GnssVelocity(NamedTuple):
    stamp_ns: int
    receive_ns: int
    frame_id: str
    velocity_enu_m_s: np.ndarray  # (3,)
    covariance_m2_s2: np.ndarray  # (3, 3)


class WheelSample(NamedTuple):
    stamp_ns: int
    receive_ns: int
    angle_rad: np.ndarray  # (4,) encoder angle from finite counts, fl fr rl rr
    rate_rad_s: np.ndarray  # (4,)
    torque_n_m: np.ndarray  # (4,) applied drive minus brake torque, NaN where unknown


class SteeringSample(NamedTuple):
    stamp_ns: int
    receive_ns: int
    steering_wheel_angle_rad: float


# the stream (sensor kind) of each record type: the names of the observer's counters, topics and node parameters
STREAM_OF: dict[type, str] = {ImuSample: "imu", GnssFix: "gnss_fix", GnssVelocity: "gnss_velocity", WheelSample: "wheels",
                              SteeringSample: "steering"}

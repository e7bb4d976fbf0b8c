"""Where the sensors sit on the vehicle: :class:`SensorMounts` (IMU position and mounting rotation, GNSS antenna) and
:func:`mounts_from_vehicle`, read from a vehicle description.  Used by the observer's sensor models and by the simulator
that synthesises the same sensors."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..conventions import rotation_from_rpy


@dataclass(frozen=True, kw_only=True)
class SensorMounts:
    """Where the sensors sit on the vehicle (from the vehicle YAML; base_link frame, SI units).

    Attributes
    ----------
    imu_position_m : ndarray, shape (3,)
        IMU origin in base_link.
    imu_rotation : ndarray, shape (3, 3)
        Mounting rotation, sensor -> base_link (``v_base = imu_rotation @ v_sensor``);
        :func:`rotation_from_rpy` builds it from roll, pitch, yaw.
    imu_frame_id : str
    gnss_position_m : ndarray, shape (3,)
        GNSS antenna phase centre in base_link.
    gnss_frame_id : str
    encoder_counts_per_revolution : int or None
        Wheel-encoder counts per wheel revolution (the sensor config may override it).
    """

    imu_position_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    imu_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    imu_frame_id: str = "imu_link"
    gnss_position_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    gnss_frame_id: str = "gnss_link"
    encoder_counts_per_revolution: int | None = None

    def __post_init__(self) -> None:
        for name, shape in (("imu_position_m", (3,)), ("imu_rotation", (3, 3)), ("gnss_position_m", (3,))):
            value = np.array(getattr(self, name), dtype=float)
            if value.shape != shape or not np.all(np.isfinite(value)):
                raise ValueError(f"SensorMounts.{name} must be a finite array of shape {shape}, got {value.shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        r = self.imu_rotation
        if np.abs(r.T @ r - np.eye(3)).max() > 1e-6 or np.linalg.det(r) < 0.0:
            raise ValueError("SensorMounts.imu_rotation must be a proper rotation matrix (orthonormal, det +1)")
        for name in ("imu_frame_id", "gnss_frame_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"SensorMounts.{name} must be a non-empty string")
        counts = self.encoder_counts_per_revolution
        if counts is not None and (isinstance(counts, bool) or not isinstance(counts, (int, np.integer)) or counts <= 0):
            raise ValueError(f"SensorMounts.encoder_counts_per_revolution must be a positive integer, got {counts!r}")


def mounts_from_vehicle(description) -> SensorMounts:
    """:class:`SensorMounts` of a vehicle description's ``sensors`` record.

    Duck-typed (this module does not import :mod:`state_observer.vehicle`): reads
    ``description.sensors.{imu_frame_id, imu_position_m, imu_orientation_rpy_rad, gnss_frame_id,
    gnss_antenna_position_m, encoder_counts_per_revolution}``.
    """
    s = description.sensors
    roll, pitch, yaw = (float(v) for v in s.imu_orientation_rpy_rad)
    return SensorMounts(
        imu_position_m=s.imu_position_m,
        imu_rotation=rotation_from_rpy(roll, pitch, yaw),
        imu_frame_id=s.imu_frame_id,
        gnss_position_m=s.gnss_antenna_position_m,
        gnss_frame_id=s.gnss_frame_id,
        encoder_counts_per_revolution=int(s.encoder_counts_per_revolution),
    )

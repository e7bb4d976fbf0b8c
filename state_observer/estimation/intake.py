"""Intake: the observer's rules for each sample on its own, and the counts of what became of every stream.

Faults are handled and counted per stream (never silently): non-finite values, NO_FIX, zero, missing or
indefinite covariances (the configured sigma is used instead), a frame other than the vehicle's IMU frame,
duplicates (these per-message rules are :class:`SampleScreen`, which ``state-observer check`` runs on its
own); :class:`StampGaps` counts the messages missing before they arrived; :func:`stream_losses` sums the
drops per stream.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..sensors.samples import STREAM_OF
from .errorekf import axle_speeds

if TYPE_CHECKING:
    from .online import OnlineSettings

STREAMS = tuple(STREAM_OF.values())  # "imu", "gnss_fix", "gnss_velocity", "wheels", "steering"
GNSS_POSITION_FLOOR_M = 0.01  # 1-sigma: no receiver (RTK included) knows its position better
GNSS_VELOCITY_FLOOR_M_S = 0.005


class StampGaps:
    """Messages missing from each stream, read from gaps in its header stamps: whatever lost them (the sensor,
    DDS, a subscriber queue overflowing while the node was starved).  A stream's period is the 20th percentile
    of its last 50 intervals (robust to losses and jitter); an interval of k periods means k - 1 messages
    missing.  Gaps longer than ``SILENCE_PERIODS`` periods are silences, reported by the diagnostics as such."""

    WINDOW = 50
    SILENCE_PERIODS = 1000

    def __init__(self):
        self.missing = Counter()
        self._last: dict[str, int] = {}
        self._intervals: dict[str, list] = {}

    def see(self, kind: str, stamp_ns: int) -> None:
        last = self._last.get(kind)
        if last is not None and stamp_ns <= last:
            return
        self._last[kind] = stamp_ns
        if last is None:
            return
        interval = stamp_ns - last
        recent = self._intervals.setdefault(kind, [])
        if len(recent) >= 10:
            period = sorted(recent)[len(recent) // 5]
            k = round(interval / period) if period > 0 else 1
            if 2 <= k <= self.SILENCE_PERIODS:
                self.missing[kind] += k - 1
        recent.append(interval)
        if len(recent) > self.WINDOW:
            del recent[0]


class StreamCounter(Counter):
    """A stream's outcome counts, bounded: reasons that quote the message (a frame_id, a joint name) could
    otherwise grow one key per distinct value; past ``MAX_KEYS`` keys new reasons are counted under one."""

    MAX_KEYS = 40
    OVERFLOW = "dropped: other reasons (too many distinct ones to list)"

    def __setitem__(self, key, value) -> None:
        if key not in self and len(self) >= self.MAX_KEYS:
            key = self.OVERFLOW
            value = self.get(key, 0) + 1
        super().__setitem__(key, value)

class InputLimits(NamedTuple):
    """What a sample may say before it is taken as broken (beyond it the model step would fail or lie): the
    vehicle file's steering and torque limits with a margin, a top speed, and common IMU full scales."""

    steering_wheel_rad: float  # |angle|
    torque_n_m: tuple  # (lowest, highest) signed net wheel torque (drive - brake * sign(rate)), fl fr rl rr arrays
    wheel_rate_rad_s: np.ndarray  # |rate| per wheel: TOP_SPEED_M_S on the dynamic radius
    speed_m_s: float  # |GNSS velocity|
    gyro_rad_s: float  # per axis: 2000 deg/s
    accel_m_s2: float  # per axis: 16 g

    TOP_SPEED_M_S = 150.0
    MARGIN = 1.5  # on the vehicle file's steering and torque limits (a measured torque may exceed the nominal one)

    @classmethod
    def of(cls, desc) -> "InputLimits":
        drive = np.array([c.max_drive_torque_n_m for c in desc.corners])
        brake = np.array([c.max_brake_torque_n_m for c in desc.corners])
        radius = np.array([c.wheel.dynamic_radius_m for c in desc.corners])
        strongest = cls.MARGIN * np.maximum(drive, brake) + 1.0  # a brake turns either way; so does a drive in reverse gear
        return cls(cls.MARGIN * desc.steering.max_steering_wheel_angle_rad, (-strongest, strongest),
                   cls.TOP_SPEED_M_S / radius, cls.TOP_SPEED_M_S, math.radians(2000.0), 16 * 9.80665)

class SampleScreen:
    """The observer's rules for one message on its own, without a model (also run by ``state-observer check``): a
    stamp, not the previous stamp of its stream again, finite values within the limits, a fix, the vehicle's IMU
    frame; sigmas filled in where the message has no usable covariance.  Every drop and replacement is counted in
    ``counters[kind]`` under its reason ("dropped: ..." for a drop)."""

    def __init__(self, settings: OnlineSettings, imu_frame_id: str, limits: InputLimits, counters: dict[str, Counter] | None = None):
        self.settings = settings
        self.imu_frame_id = imu_frame_id
        self.limits = limits
        self.counters = counters if counters is not None else {k: StreamCounter() for k in STREAMS}
        self.last_stamp: dict[str, int] = {}

    def take(self, kind: str, sample):
        """``sample`` checked (sigmas filled in, values beyond the limits removed), or None when it is dropped (counted)."""
        count = self.counters[kind]
        stamp = int(sample.stamp_ns)
        if stamp <= 0:
            count["dropped: no stamp"] += 1
            return None
        if self.last_stamp.get(kind) == stamp:
            count["dropped: duplicate stamp"] += 1
            return None
        sample = self._checked(kind, sample, count)
        if sample is not None:
            self.last_stamp[kind] = stamp
        return sample

    def _checked(self, kind: str, sample, count: Counter):
        """The sample with unusable parts removed and sigmas filled in, or None (counted) if nothing is left."""
        s = self.settings
        if kind == "imu":
            gyro = np.asarray(sample.angular_velocity_rad_s, float)
            accel = np.asarray(sample.linear_acceleration_m_s2, float)
            if sample.frame_id and sample.frame_id != self.imu_frame_id:
                count[f"dropped: frame {sample.frame_id[:64]!r} is not the vehicle's IMU frame {self.imu_frame_id!r}"] += 1
                return None
            lim = self.limits
            if _within(gyro, lim.gyro_rad_s) and _within(accel, lim.accel_m_s2):  # the common case, without the checks below
                return sample._replace(angular_velocity_rad_s=gyro, linear_acceleration_m_s2=accel,
                                       angular_velocity_sigma=self._sigma(sample.angular_velocity_sigma, s.gyro_sigma_rad_s, count, "gyro"),
                                       linear_acceleration_sigma=self._sigma(sample.linear_acceleration_sigma, s.accel_sigma_m_s2, count, "accel"))
            if np.any(np.abs(gyro[np.isfinite(gyro)]) > lim.gyro_rad_s):
                count[f"gyro beyond {lim.gyro_rad_s:.1f} rad/s (not used)"] += 1
                gyro = np.full(3, np.nan)
            if np.any(np.abs(accel[np.isfinite(accel)]) > lim.accel_m_s2):
                count[f"accelerometer beyond {lim.accel_m_s2:.0f} m/s^2 (not used)"] += 1
                accel = np.full(3, np.nan)
            if not (np.any(np.isfinite(gyro)) or np.any(np.isfinite(accel))):
                count["dropped: not finite or beyond full scale"] += 1
                return None
            if not (np.all(np.isfinite(gyro)) and np.all(np.isfinite(accel))):
                count["IMU axes missing (the others used)"] += 1
            gyro_sigma = self._sigma(sample.angular_velocity_sigma, s.gyro_sigma_rad_s, count, "gyro")
            accel_sigma = self._sigma(sample.linear_acceleration_sigma, s.accel_sigma_m_s2, count, "accel")
            return sample._replace(angular_velocity_rad_s=gyro, linear_acceleration_m_s2=accel, angular_velocity_sigma=gyro_sigma,
                                   linear_acceleration_sigma=accel_sigma)
        if kind == "gnss_fix":
            if sample.status < 0:
                count["dropped: no fix"] += 1
                return None
            if not (math.isfinite(sample.latitude_deg) and math.isfinite(sample.longitude_deg) and math.isfinite(sample.altitude_m)
                    and abs(sample.latitude_deg) <= 90 and abs(sample.longitude_deg) <= 180):
                count["dropped: not finite or out of range"] += 1
                return None
            cov = np.asarray(sample.position_covariance_enu_m2, float)
            if not (s.use_message_covariance and _usable_covariance(cov)):
                if s.use_message_covariance:
                    count["covariance replaced by the configured sigma"] += 1
                cov = np.diag([s.gnss_horizontal_sigma_m**2, s.gnss_horizontal_sigma_m**2, s.gnss_vertical_sigma_m**2])
            return sample._replace(position_covariance_enu_m2=_floored(cov, GNSS_POSITION_FLOOR_M, count, "position"))
        if kind == "gnss_velocity":
            v = np.asarray(sample.velocity_enu_m_s, float)
            if not np.all(np.isfinite(v)):
                count["dropped: not finite"] += 1
                return None
            if np.linalg.norm(v) > self.limits.speed_m_s:
                count[f"dropped: faster than {self.limits.speed_m_s:.0f} m/s"] += 1
                return None
            cov = np.asarray(sample.covariance_m2_s2, float)
            if not (s.use_message_covariance and _usable_covariance(cov)):
                if s.use_message_covariance:
                    count["covariance replaced by the configured sigma"] += 1
                cov = np.eye(3) * s.gnss_velocity_sigma_m_s**2
            return sample._replace(covariance_m2_s2=_floored(cov, GNSS_VELOCITY_FLOOR_M_S, count, "velocity"))
        if kind == "wheels":
            lim = self.limits
            rate, torque = np.asarray(sample.rate_rad_s, float), np.asarray(sample.torque_n_m, float)
            too_fast = np.abs(rate) > lim.wheel_rate_rad_s  # NaN compares False
            too_strong = (torque < lim.torque_n_m[0]) | (torque > lim.torque_n_m[1])
            if too_fast.any():
                count[f"wheel rates beyond {lim.TOP_SPEED_M_S:.0f} m/s (those wheels skipped)"] += 1
                rate = np.where(too_fast, np.nan, rate)
            if too_strong.any():
                count[f"wheel torques beyond {lim.MARGIN:g} x the vehicle file's limits (those wheels keep their last torque)"] += 1
                torque = np.where(too_strong, np.nan, torque)
            if not (np.any(np.isfinite(rate)) or np.any(np.isfinite(torque))):
                count["dropped: no finite rate or torque"] += 1
                return None
            if not np.all(np.isfinite(rate)):
                count["wheel rates missing or not finite (those wheels skipped)"] += 1
            if any(axle_speeds(rate)):
                count["one rate on both wheels of an axle (used as the axle's speed)"] += 1
            return sample._replace(rate_rad_s=rate, torque_n_m=torque)
        if not math.isfinite(sample.steering_wheel_angle_rad):
            count["dropped: not finite"] += 1
            return None
        if abs(sample.steering_wheel_angle_rad) > self.limits.steering_wheel_rad:
            count[f"dropped: steering-wheel angle beyond {self.limits.steering_wheel_rad:.2f} rad "
                  f"({self.limits.MARGIN:g} x the vehicle file's limit)"] += 1
            return None
        return sample

    def _sigma(self, message_sigma, configured: float, count: Counter, what: str) -> np.ndarray:
        """Per-axis 1-sigma (3,): the message's where it gives a usable one, else the configured (counted)."""
        try:
            axes = tuple(float(v) for v in message_sigma)  # per axis (three plain floats: cheaper than NumPy here)
        except TypeError:
            axes = (float(message_sigma),) * 3  # one for all axes
        if len(axes) != 3:
            axes = tuple(np.broadcast_to(np.asarray(axes, dtype=float), (3,)))  # one in a sequence: for all axes
        use = self.settings.use_message_covariance
        usable = [v > 0.0 and math.isfinite(v) for v in axes]
        if use and all(usable):
            return np.array(axes)
        if use:
            count[f"{what} covariance replaced by the configured sigma"] += 1
        return np.array([v if ok and use else configured for v, ok in zip(axes, usable)])


def _within(values: np.ndarray, limit: float) -> bool:
    """All of the three ``values`` finite and within +-``limit`` (plain floats: cheaper than NumPy on three)."""
    a, b, c = values
    return abs(a) <= limit and abs(b) <= limit and abs(c) <= limit  # NaN compares False


class StreamLoss(NamedTuple):
    """What the observer dropped of one stream: counter keys "dropped: <reason>" summed, and the commonest reason."""

    kind: str
    received: int
    dropped: int
    reason: str  # the reason most messages were dropped for ("" when none were)

    @property
    def share(self) -> float:
        return self.dropped / self.received if self.received else 0.0


def stream_losses(counters: dict[str, Counter]) -> dict[str, StreamLoss]:
    """:class:`StreamLoss` of every stream of ``counters`` (:attr:`OnlineObserver.counters` or a window of them)."""
    out = {}
    for kind, count in counters.items():
        drops = {key.split(": ", 1)[-1]: n for key, n in count.items() if key.startswith("dropped") and n > 0}
        reason = max(drops, key=drops.get) if drops else ""
        out[kind] = StreamLoss(kind, count.get("received", 0), sum(drops.values()), reason)
    return out


def _floored(cov: np.ndarray, sigma: float, count: Counter, what: str) -> np.ndarray:
    """``cov`` with its eigenvalues raised to ``sigma``^2 (counted when any was below): a covariance of 1e-20
    would make the filter take a fix as the truth."""
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    if values.min() >= sigma**2:
        return cov
    count[f"{what} covariance below {sigma:g} (1-sigma) raised to it"] += 1
    return (vectors * np.maximum(values, sigma**2)) @ vectors.T


def _usable_covariance(cov: np.ndarray) -> bool:
    """A 3x3 covariance with finite entries that is positive definite (REP-145: zeros mean "unknown")."""
    if cov.shape != (3, 3) or not np.all(np.isfinite(cov)) or not np.all(np.diag(cov) > 0.0):
        return False
    return bool(np.linalg.eigvalsh(0.5 * (cov + cov.T))[0] > 0.0)

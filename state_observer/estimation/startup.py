"""Start-up: when and where the observer's model starts, decided from the checked samples before the start.

``start_mode`` "gnss": from the first good fix (position, and the datum unless one is configured) once the
heading is known: from a GNSS velocity above ``start_min_speed_m_s`` (course over ground) or from two fixes
``start_min_distance_m`` apart; when the wheels turn backwards then, the car reverses and faces the other way.
"pose": at the configured ENU pose at the first sample's stamp (at the speed of the first wheel sample, waited
for up to :data:`WHEEL_START_WAIT_NS`); after a failed model step, from where the car was.  A ``set_pose``
request starts at its pose whatever the mode.  GNSS samples wait (are not used) until a datum exists.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

import numpy as np

from ..sensors.geodesy import LocalENU

_NS = 1_000_000_000
WHEEL_START_WAIT_NS = 500_000_000  # start_mode pose waits this long for a wheel speed


class Start(NamedTuple):
    """Where the model starts: base_link at ``xy`` (m, local ENU), heading ``yaw`` (rad from east), forward ``speed``
    (m/s), at ``stamp_ns``."""

    stamp_ns: int
    xy: tuple
    yaw: float
    speed: float
    from_gnss: bool  # from GNSS fixes (they were used to start); else a pose start, whose sample the first step applies


class Startup:
    """The start-up state of one run of the observer (a reset begins a new one): :meth:`take` every checked sample
    before the start; it returns the :class:`Start` once the observer can start."""

    def __init__(self, settings, mounts, mean_radius_m: float, events: list):
        s = self.settings = settings
        self.mounts = mounts
        self.mean_radius_m = mean_radius_m  # mean dynamic wheel radius (m): wheel rates to a speed
        self.events = events  # the observer's event list (datum and reversing notes are appended)
        self.datum: LocalENU | None = LocalENU(*s.datum) if s.datum is not None else None
        self.resume_pose: tuple | None = None  # start_mode pose: (x, y, yaw, speed) to start again at after a failed step
        self.requested_pose: tuple | None = None  # set_pose: (x, y, yaw, forward speed or None: the wheels')
        self._first_fix: tuple | None = None  # (stamp_ns, enu) for the heading from motion
        self._last_fix: tuple | None = None
        self._last_velocity: tuple | None = None
        self._last_wheel_rate: tuple | None = None  # (stamp_ns, mean wheel rate rad/s) before the start
        self._first_stamp_ns: int | None = None  # start_mode pose: the first sample's stamp (the wait for a wheel speed)

    def take(self, kind: str, sample, count: Counter) -> Start | None:
        """Take checked ``sample`` of stream ``kind`` (its outcome counted in ``count``); the start, if it is now."""
        s = self.settings
        if self.requested_pose is not None:  # set_pose: start there, whatever the start mode
            x, y, yaw, speed = self.requested_pose
            if speed is None:
                if not (kind == "wheels" and np.any(np.isfinite(sample.rate_rad_s))):
                    count["dropped: before start"] += kind != "steering"
                    return None
                speed = float(np.nanmean(sample.rate_rad_s)) * self.mean_radius_m
            self.requested_pose = None
            return self._start(sample.stamp_ns, (x, y), yaw, speed)
        if kind == "gnss_fix" and self.datum is None:
            self.datum = LocalENU(sample.latitude_deg, sample.longitude_deg, sample.altitude_m)
            self.events.append(f"datum set from the first good fix: {sample.latitude_deg:.7f}, {sample.longitude_deg:.7f}, {sample.altitude_m:.2f} m")
        if s.start_mode == "pose":
            if kind in ("gnss_fix", "gnss_velocity") and self.datum is None:
                count["dropped: before start"] += 1
                return None
            # after a failed step, on from where the car was, not from the configured start
            x, y, yaw, speed = self.resume_pose or s.start_pose
            if self.resume_pose is None and s.start_speed_from_wheels and "wheels" in s.sensors:
                # the configured pose, at the speed the wheels show (a bag or a drive joined while moving)
                if kind == "wheels" and np.any(np.isfinite(sample.rate_rad_s)):
                    speed = float(np.nanmean(sample.rate_rad_s)) * self.mean_radius_m
                elif self._first_stamp_ns is None or sample.stamp_ns - self._first_stamp_ns < WHEEL_START_WAIT_NS:
                    self._first_stamp_ns = self._first_stamp_ns or sample.stamp_ns
                    count["dropped: before start"] += kind != "steering"
                    return None
            self.resume_pose = None
            return self._start(sample.stamp_ns, (x, y), yaw, speed)
        if kind in ("gnss_fix", "gnss_velocity"):
            count["used to start"] += 1
        if kind == "gnss_fix":
            enu = self.datum.to_enu(sample.latitude_deg, sample.longitude_deg, sample.altitude_m)
            self._last_fix = (sample.stamp_ns, enu)
            if self._first_fix is None:
                self._first_fix = self._last_fix
        elif kind == "gnss_velocity":
            self._last_velocity = (sample.stamp_ns, np.asarray(sample.velocity_enu_m_s, float))
        else:
            if kind == "wheels" and np.any(np.isfinite(sample.rate_rad_s)):
                self._last_wheel_rate = (sample.stamp_ns, float(np.nanmean(sample.rate_rad_s)))
            if kind != "steering":
                count["dropped: before start"] += 1
            return None
        if self._last_fix is None:
            return None
        t_fix, p = self._last_fix
        if self._last_velocity is not None and abs(self._last_velocity[0] - t_fix) < 0.5 * _NS:
            t_vel, v = self._last_velocity
            speed = math.hypot(v[0], v[1])
            if speed >= s.start_min_speed_m_s:
                t0 = max(t_fix, t_vel)
                return self._start(t0, p[:2] + v[:2] * (t0 - t_fix) * 1e-9, math.atan2(v[1], v[0]), speed, antenna=True)
        t_first, p_first = self._first_fix
        d = p[:2] - p_first[:2]
        if math.hypot(*d) >= s.start_min_distance_m and t_fix > t_first:
            speed = math.hypot(*d) / ((t_fix - t_first) * 1e-9)
            return self._start(t_fix, p[:2], math.atan2(d[1], d[0]), speed, antenna=True)
        return None

    def _start(self, stamp_ns: int, xy, yaw: float, speed: float, antenna: bool = False) -> Start:
        """The start at ``stamp_ns``; ``antenna``: ``xy`` is the GNSS antenna (moved to base_link).  ``yaw`` and
        ``speed`` from a course over ground are those of the motion: when the wheels turn backwards (a recent wheel
        sample's mean rate below -1 rad/s) the car reverses, so it faces the other way."""
        wheel = self._last_wheel_rate
        if antenna and wheel is not None and abs(wheel[0] - stamp_ns) < 0.5 * _NS and wheel[1] < -1.0:
            yaw, speed = math.remainder(yaw + math.pi, 2 * math.pi), -speed
            self.events.append("reversing at the start (wheels turn backwards): heading opposite to the GNSS course")
        if antenna:
            c, s_ = math.cos(yaw), math.sin(yaw)
            a = self.mounts.gnss_position_m
            xy = (xy[0] - (c * a[0] - s_ * a[1]), xy[1] - (s_ * a[0] + c * a[1]))
        return Start(stamp_ns, xy, yaw, speed, antenna)

"""Manoeuvre library and a simple driver for the virtual test vehicle.

A manoeuvre gives the initial speed, a speed target (or pedal phases), the steering (a path to follow
or an open-loop steering-wheel angle) and optional friction changes.  The :class:`Driver` turns it into
the vehicle inputs every step: steering-wheel angle (pure pursuit on a path, or the open-loop profile)
and per-wheel drive and brake torques (PI speed control, or full pedal phases).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


# ----- paths ---------------------------------------------------------------------------------------
class Path:
    """A planar reference path sampled densely (ENU x, y in m), with arc length s."""

    def __init__(self, xy: np.ndarray, closed: bool = False):
        xy = np.asarray(xy, dtype=float)
        if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) < 2:
            raise ValueError("a path needs at least two (x, y) points")
        self.xy, self.closed = xy, closed
        self.curvature: np.ndarray | None = None  # 1/m per sample, for a path built from segments (:meth:`from_segments`)
        seg = np.linalg.norm(np.diff(xy, axis=0), axis=1)
        self.s = np.concatenate([[0.0], np.cumsum(seg)])
        self._last = 0

    def nearest(self, p: np.ndarray) -> int:
        """Index of the nearest sample, searched in a window after the last one (the car moves on)."""
        n = len(self.xy)
        window = np.arange(self._last - 20, self._last + 200)
        window = window % n if self.closed else window[(window >= 0) & (window < n)]
        d = np.sum((self.xy[window] - p) ** 2, axis=1)
        self._last = int(window[np.argmin(d)])
        return self._last

    def point_ahead(self, i: int, distance_m: float) -> np.ndarray:
        """The path point ``distance_m`` of arc length after sample i."""
        target = self.s[i] + distance_m
        if self.closed:
            target %= self.s[-1]
        j = min(int(np.searchsorted(self.s, target)), len(self.xy) - 1)
        return self.xy[j]

    @staticmethod
    def circle(radius_m: float, centre=(0.0, 0.0), start_angle_rad: float = -math.pi / 2, left: bool = True, spacing_m: float = 0.25) -> "Path":
        n = max(64, int(2 * math.pi * radius_m / spacing_m))
        a = start_angle_rad + (1 if left else -1) * np.linspace(0.0, 2 * math.pi, n, endpoint=False)
        return Path(np.column_stack([centre[0] + radius_m * np.cos(a), centre[1] + radius_m * np.sin(a)]), closed=True)

    @staticmethod
    def lane_change(offset_m: float = 3.5, lead_m: float = 60.0, change_m: float = 25.0, hold_m: float = 25.0, tail_m: float = 200.0, spacing_m: float = 0.25) -> "Path":
        """ISO 3888-1-like double lane change: out by ``offset_m`` and back, with cosine transitions."""
        x = np.arange(0.0, lead_m + 2 * change_m + hold_m + tail_m, spacing_m)
        y = np.zeros_like(x)
        x1, x2, x3, x4 = lead_m, lead_m + change_m, lead_m + change_m + hold_m, lead_m + 2 * change_m + hold_m
        up = (x >= x1) & (x < x2)
        y[up] = offset_m * 0.5 * (1 - np.cos(math.pi * (x[up] - x1) / change_m))
        y[(x >= x2) & (x < x3)] = offset_m
        down = (x >= x3) & (x < x4)
        y[down] = offset_m * 0.5 * (1 + np.cos(math.pi * (x[down] - x3) / change_m))
        return Path(np.column_stack([x, y]))

    @staticmethod
    def straight_then_circle(radius_m: float, lead_m: float, laps: int, spacing_m: float = 0.25) -> "Path":
        """A straight of ``lead_m`` heading east ending at (0, -radius), then ``laps`` laps of the left circle about the origin."""
        n = int(np.ceil(lead_m / spacing_m))
        straight = np.column_stack([np.linspace(-lead_m, 0.0, n, endpoint=False), np.full(n, -radius_m)])
        return Path(np.vstack([straight] + [Path.circle(radius_m, spacing_m=spacing_m).xy] * laps))

    @staticmethod
    def from_segments(segments, spacing_m: float = 0.25, closed: bool = False) -> "Path":
        """A path from the origin heading east through (length m, curvature 1/m, + left) segments: 0 for a straight, 1/R
        for an arc; its :attr:`curvature` (1/m) per sample is kept for a speed profile (:func:`speed_profile`)."""
        ds, kappa = [], []
        for length, curvature in segments:
            n = max(int(round(length / spacing_m)), 1)
            ds.append(np.full(n, length / n))
            kappa.append(np.full(n, float(curvature)))
        ds, kappa = np.concatenate(ds), np.concatenate(kappa)
        heading = np.concatenate([[0.0], np.cumsum(kappa * ds)])[:-1] + 0.5 * kappa * ds  # mid-step heading
        xy = np.vstack([[0.0, 0.0], np.column_stack([np.cumsum(ds * np.cos(heading)), np.cumsum(ds * np.sin(heading))])])
        path = Path(xy[:-1] if closed else xy, closed=closed)
        path.curvature = np.concatenate([kappa, kappa[-1:]])[: len(path.xy)]
        return path

    @staticmethod
    def straight(length_m: float = 2000.0, spacing_m: float = 0.5) -> "Path":
        x = np.arange(0.0, length_m, spacing_m)
        return Path(np.column_stack([x, np.zeros_like(x)]))


def speed_profile(path: Path, lateral_m_s2: float, accel_m_s2: float, brake_m_s2: float, start_m_s: float, laps: int = 1,
                  lead_s: float = 1.0):
    """The target speed (m/s) as a function of time (s) of a car driving ``laps`` of ``path`` as fast as a lateral
    acceleration of ``lateral_m_s2`` allows in its corners (v^2 |kappa| <= a_y), accelerating and braking at most at
    the given rates (a forward and a backward pass over the arc length), from ``start_m_s``; asked ``lead_s`` ahead
    (the driver's speed loop lags a ramp by acceleration / gain: 1 s at its 1/s)."""
    kappa = np.tile(np.abs(path.curvature), laps)
    ds = np.tile(np.diff(np.concatenate([path.s, [path.s[-1] + (np.linalg.norm(path.xy[0] - path.xy[-1]) if path.closed else 0.0)]])), laps)
    v = np.sqrt(lateral_m_s2 / np.maximum(kappa, 1e-6))
    v[0] = min(v[0], start_m_s)
    for i in range(1, len(v)):
        v[i] = min(v[i], math.sqrt(v[i - 1] ** 2 + 2.0 * accel_m_s2 * ds[i - 1]))
    for i in range(len(v) - 2, -1, -1):
        v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2.0 * brake_m_s2 * ds[i]))
    t = np.concatenate([[0.0], np.cumsum(2.0 * ds[:-1] / (v[:-1] + v[1:]))])
    return lambda time: float(np.interp(time + lead_s, t, v))


# ----- manoeuvres ----------------------------------------------------------------------------------
@dataclass
class Manoeuvre:
    """What the driver does.  Exactly one of ``path`` or ``steering`` steers the car.

    speed: target speed (m/s) as a function of time, or None with ``pedal`` phases.
    steering: open-loop steering-wheel angle (rad) as a function of time.
    pedal: function of (t, speed) -> (drive fraction 0..1, brake fraction 0..1), for full-pedal phases.
    friction: road friction coefficient as a function of time (None: the tire's default).
    """

    name: str
    duration_s: float
    initial_speed_m_s: float
    speed: Callable[[float], float] | None = None
    path: Path | None = None
    steering: Callable[[float], float] | None = None
    pedal: Callable[[float, float], tuple[float, float]] | None = None
    friction: Callable[[float], float] | None = None
    description: str = ""
    parameters: dict = field(default_factory=dict)


def steady_circle(radius_m: float = 50.0, speed_m_s: float = 12.0, duration_s: float = 40.0, mu: float | None = None) -> Manoeuvre:
    return Manoeuvre(
        "steady_circle", duration_s, speed_m_s, speed=lambda t: speed_m_s, path=Path.circle(radius_m),
        friction=None if mu is None else (lambda t: mu),
        description=f"circle of {radius_m:g} m radius at {speed_m_s:g} m/s (ay = {speed_m_s**2 / radius_m:.2f} m/s^2)",
        parameters=dict(radius_m=radius_m, speed_m_s=speed_m_s),
    )


def step_steer(speed_m_s: float = 22.2, steering_wheel_rad: float = math.radians(60.0), rate_rad_s: float = math.radians(400.0), t_step_s: float = 2.0, duration_s: float = 8.0) -> Manoeuvre:
    """ISO 7401-like step steer: straight, then a fast ramp to a held steering-wheel angle."""

    def steering(t):
        return float(np.clip((t - t_step_s) * rate_rad_s, 0.0, steering_wheel_rad)) if steering_wheel_rad >= 0 else -float(np.clip((t - t_step_s) * rate_rad_s, 0.0, -steering_wheel_rad))

    return Manoeuvre("step_steer", duration_s, speed_m_s, speed=lambda t: speed_m_s, steering=steering,
                     description=f"step to {math.degrees(steering_wheel_rad):.0f} deg at {speed_m_s:g} m/s", parameters=dict(steering_wheel_rad=steering_wheel_rad))


def sine_with_dwell(speed_m_s: float = 22.2, amplitude_rad: float = math.radians(90.0), frequency_hz: float = 0.7, dwell_s: float = 0.5, t_start_s: float = 2.0, duration_s: float = 8.0) -> Manoeuvre:
    """FMVSS 126-like sine with dwell: 0.7 Hz sine, 0.5 s dwell at the second peak, coasting."""
    w = 2 * math.pi * frequency_hz
    t_peak2 = 0.75 / frequency_hz

    def steering(t):
        tau = t - t_start_s
        if tau <= 0:
            return 0.0
        if tau < t_peak2:
            return amplitude_rad * math.sin(w * tau)
        if tau < t_peak2 + dwell_s:
            return -amplitude_rad
        tau2 = tau - dwell_s
        if tau2 < 1.0 / frequency_hz:
            return amplitude_rad * math.sin(w * tau2)
        return 0.0

    return Manoeuvre("sine_with_dwell", duration_s, speed_m_s, pedal=lambda t, v: (0.0, 0.0), steering=steering,
                     description=f"sine with dwell, {math.degrees(amplitude_rad):.0f} deg at {speed_m_s:g} m/s", parameters=dict(amplitude_rad=amplitude_rad))


def double_lane_change(speed_m_s: float = 16.7, duration_s: float = 12.0) -> Manoeuvre:
    return Manoeuvre("double_lane_change", duration_s, speed_m_s, speed=lambda t: speed_m_s, path=Path.lane_change(),
                     description=f"double lane change (3.5 m) at {speed_m_s:g} m/s", parameters=dict(speed_m_s=speed_m_s))


def accelerate_brake(top_speed_m_s: float = 25.0, start_speed_m_s: float = 5.0, duration_s: float = 25.0, mu: float | None = None) -> Manoeuvre:
    """Full drive torque up to ``top_speed_m_s``, then full braking to a stop; straight.

    Pedals move in ``pedal_ramp_s`` (brake pressure builds up in about 0.2-0.3 s)."""
    phase = {"brake_t": None}
    pedal_ramp_s = 0.3

    def pedal(t, v):
        if phase["brake_t"] is None and v >= top_speed_m_s:
            phase["brake_t"] = t
        if phase["brake_t"] is None:
            return min(1.0, t / pedal_ramp_s), 0.0
        return 0.0, min(1.0, (t - phase["brake_t"]) / pedal_ramp_s)

    return Manoeuvre("accelerate_brake", duration_s, start_speed_m_s, pedal=pedal, path=Path.straight(),
                     friction=None if mu is None else (lambda t: mu),
                     description=f"accelerate to {top_speed_m_s:g} m/s, brake to stop", parameters=dict(top_speed_m_s=top_speed_m_s))


def straight(speed_m_s: float = 40.0, duration_s: float = 30.0) -> Manoeuvre:
    return Manoeuvre("straight", duration_s, speed_m_s, speed=lambda t: speed_m_s, path=Path.straight(speed_m_s * duration_s + 500.0),
                     description=f"straight at {speed_m_s:g} m/s")


def friction_change(mu_before: float = 0.8, mu_after: float = 0.6, t_change_s: float = 20.0, radius_m: float = 50.0, speed_m_s: float = 14.0, duration_s: float = 40.0) -> Manoeuvre:
    """Steady circle whose road friction steps from ``mu_before`` to ``mu_after`` at ``t_change_s``."""
    return Manoeuvre("friction_change", duration_s, speed_m_s, speed=lambda t: speed_m_s, path=Path.circle(radius_m),
                     friction=lambda t: mu_before if t < t_change_s else mu_after,
                     description=f"circle, mu {mu_before:g} -> {mu_after:g} at {t_change_s:g} s", parameters=dict(t_change_s=t_change_s))


def handling_drive(duration_s: float = 40.0, radius_m: float = 50.0) -> Manoeuvre:
    """8 s straight at 12 m/s, then a left circle of ``radius_m`` driven at changing speed (12 -> 16 -> 10 -> 15 m/s,
    1.5-2 m/s^2): cornering, driving and braking in one drive, so that every estimated parameter has something to learn.
    From 40 s (a longer drive: a soak) the speed cycles every 40 s: 15, braking to 10, accelerating to 16, back to 15."""
    knots = np.array([[0.0, 12.0], [10.0, 12.0], [12.5, 16.0], [18.0, 16.0], [21.0, 10.0], [27.0, 10.0], [30.0, 15.0], [40.0, 15.0]])
    cycle = np.array([[0.0, 15.0], [3.0, 10.0], [10.0, 10.0], [13.0, 16.0], [20.0, 16.0], [21.0, 15.0], [40.0, 15.0]])

    def speed(t: float) -> float:
        if t < 40.0:
            return float(np.interp(t, knots[:, 0], knots[:, 1]))
        return float(np.interp((t - 40.0) % 40.0, cycle[:, 0], cycle[:, 1]))

    laps = int(np.ceil(16.0 * duration_s / (2 * math.pi * radius_m))) + 1
    return Manoeuvre("handling_drive", duration_s, 12.0, speed=speed,
                     path=Path.straight_then_circle(radius_m, 12.0 * 8.0, laps),
                     description=f"8 s straight at 12 m/s, then a circle of {radius_m:g} m at 12-16 m/s with accelerating and braking",
                     parameters=dict(radius_m=radius_m))


MANOEUVRES: dict[str, Callable[..., Manoeuvre]] = {
    "handling_drive": handling_drive,
    "steady_circle": steady_circle,
    "step_steer": step_steer,
    "sine_with_dwell": sine_with_dwell,
    "double_lane_change": double_lane_change,
    "accelerate_brake": accelerate_brake,
    "friction_change": friction_change,
    "straight": straight,
}


def make_manoeuvre(name: str, **parameters) -> Manoeuvre:
    try:
        factory = MANOEUVRES[name]
    except KeyError:
        raise ValueError(f"unknown manoeuvre '{name}'; choose one of {', '.join(MANOEUVRES)}") from None
    return factory(**parameters)


# ----- driver ------------------------------------------------------------------------------------------
SLIP_TARGET = 0.1  # traction control and ABS hold each wheel's slip ratio about this (a tire's peak lies at 0.1-0.2)
SLIP_CONTROL_MIN_SPEED_M_S = 1.0  # below it slip ratios say little (their denominator is the speed) and nothing is cut
SLIP_CONTROL_GAIN_PER_S = 20.0  # share of the demanded torque cut per second at twice the target slip


class Driver:
    """Steering (pure pursuit or open loop) and pedals (PI speed control or phases) for a vehicle.

    vehicle facts it needs: wheelbase (m), steering ratio (steering-wheel rad per road-wheel rad),
    total mass (kg), dynamic radii (m, (4,)), driven wheels (bool (4,)), max drive torque (N m, (4,)),
    max brake torque (N m, (4,)), max steering-wheel angle (rad).
    """

    def __init__(self, manoeuvre: Manoeuvre, wheelbase_m, steering_ratio, mass_kg, radii_m, driven, max_drive_n_m, max_brake_n_m, max_steering_rad,
                 speed_gain_1_s: float = 1.0, speed_integral_1_s2: float = 0.3, lookahead_s: float = 0.6, min_lookahead_m: float = 6.0):
        self.m = manoeuvre
        self.L, self.ratio, self.mass = wheelbase_m, steering_ratio, mass_kg
        self.radii = np.asarray(radii_m, float)
        self.driven = np.asarray(driven, bool)
        self.max_drive, self.max_brake = np.asarray(max_drive_n_m, float), np.asarray(max_brake_n_m, float)
        self.max_steering = max_steering_rad
        self.kp, self.ki = speed_gain_1_s, speed_integral_1_s2
        self.lookahead_s, self.min_lookahead = lookahead_s, min_lookahead_m
        self._integral = 0.0
        self._last_steer = None
        self._torque_share = np.ones(4)  # what traction control and ABS let through of each wheel's torque

    def steering_wheel_angle(self, t: float, position_xy: np.ndarray, yaw_rad: float, speed_m_s: float) -> float:
        if self.m.steering is not None:
            delta_sw = self.m.steering(t)
        else:  # pure pursuit on the path (rear-axle reference point)
            path = self.m.path
            i = path.nearest(position_xy)
            ld = max(self.min_lookahead, self.lookahead_s * speed_m_s)
            target = path.point_ahead(i, ld)
            d = target - position_xy
            alpha = math.atan2(d[1], d[0]) - yaw_rad
            delta = math.atan2(2.0 * self.L * math.sin(alpha), ld)
            delta_sw = self.ratio * delta
        return float(np.clip(delta_sw, -self.max_steering, self.max_steering))

    def torques(self, t: float, speed_m_s: float, dt_s: float, slip_ratio: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per-wheel drive torque (N m) and brake torque magnitude (N m).  The pedal phases ask for full torque: given
        the wheels' slip ratios, the car's traction control and ABS let through what the tires carry
        (:meth:`_limit_slip`).  The speed controller asks only for what tracks its target and is passed as it is."""
        drive, brake = self._demanded(t, speed_m_s, dt_s)
        if slip_ratio is None or self.m.pedal is None:
            return drive, brake
        return self._limit_slip(drive, brake, np.asarray(slip_ratio, float), speed_m_s, dt_s)

    def _limit_slip(self, drive: np.ndarray, brake: np.ndarray, slip: np.ndarray, speed_m_s: float, dt_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Traction control and ABS, as on every car sold in the EU since 2014: each wheel's share of its demanded torque
        is an integral controller on its slip ratio s_x = (r_D Omega - v_x) / |v_x| in the sense its torque drives it
        (spinning under drive, locking under the brake), d share / dt = -``SLIP_CONTROL_GAIN_PER_S`` (s - s*) / s*,
        s* = ``SLIP_TARGET``, clipped to 0-1: a wheel below the target gets its full demand back.  Without it the
        full-drive phase of ``accelerate_brake`` spun the front wheels up to 800 m/s and the full brake locked them."""
        direction = 1.0 if speed_m_s >= 0.0 else -1.0
        driving = np.where(brake > 0.0, -direction * slip, np.sign(drive) * slip)  # slip in the sense the torque drives it
        excess = np.where(abs(speed_m_s) > SLIP_CONTROL_MIN_SPEED_M_S, (driving - SLIP_TARGET) / SLIP_TARGET, -1.0)
        self._torque_share = np.clip(self._torque_share - SLIP_CONTROL_GAIN_PER_S * excess * dt_s, 0.0, 1.0)
        return drive * self._torque_share, brake * self._torque_share

    def _demanded(self, t: float, speed_m_s: float, dt_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The torques the manoeuvre asks for: its pedal phases, or the PI speed control."""
        if self.m.pedal is not None:
            drive_frac, brake_frac = self.m.pedal(t, speed_m_s)
            return drive_frac * self.max_drive * self.driven, brake_frac * self.max_brake
        target = self.m.speed(t)
        error = target - speed_m_s
        self._integral = float(np.clip(self._integral + error * dt_s, -20.0, 20.0))
        accel = self.kp * error + self.ki * self._integral  # m/s^2
        total = self.mass * accel * float(np.mean(self.radii))  # wheel torque needed (N m)
        if target < 0.0:  # reverse gear: the engine drives backwards, the brakes slow the car from reversing
            if total <= 0.0:
                per = total / max(self.driven.sum(), 1)
                return np.maximum(per * self.driven, -self.max_drive), np.zeros(4)
            share = self.max_brake / self.max_brake.sum()
            return np.zeros(4), np.minimum(total * share, self.max_brake)
        if total >= 0.0:
            per = total / max(self.driven.sum(), 1)
            return np.minimum(per * self.driven, self.max_drive), np.zeros(4)
        share = self.max_brake / self.max_brake.sum()
        return np.zeros(4), np.minimum(-total * share, self.max_brake)

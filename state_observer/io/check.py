"""``state-observer check BAG``: what the observer will make of a bag's sensor streams, before processing it.

Every message of the sensor topics goes through the conversion of the node and of ``process``
(:func:`~state_observer.io.pipeline.to_sample`, joint names from the parameters) and through the observer's own
per-message rules (:class:`~state_observer.estimation.intake.SampleScreen`: stamps, finite values, GNSS fix, IMU
frame, covariances), so what this says will be dropped, and why, is what they drop.  No model is built and no filter
runs: what only a run can tell (samples too late for the model, before the start, rejected by the filter's gate) is
reported by ``process`` after its run.

Besides, per stream it describes what the bag holds: type, count and rate, frame ids and joint names found against
the expected ones, covariances, stamp order, header stamp to log time, GNSS fix status, non-finite fields.  The
verdict fails when a stream the observer reads would be wholly dropped, has the wrong type, or when a GNSS start has
no fixes.

With GNSS velocity it also measures the steering sensor's zero (:func:`straight_ahead_steering`): the model steers by
what the sensor reads, so a sensor zeroed off centre steers the model off the road's line (harness: 1.5 deg of
steering-wheel angle took the sideslip error of a steady circle from 0.04 to 0.12 deg), and ``model.steering_offset_rad``
takes it off.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..estimation.intake import STREAMS, InputLimits, SampleScreen, StreamCounter, stream_losses
from ..sensors.samples import GnssVelocity, SteeringSample
from .bag import bag_info, read_messages
from .convert import SENSOR_MSGTYPES, IoError, stamp_to_ns
from .params import ObserverConfig, load_config
from .pipeline import loss_line, to_sample

_NS = 1_000_000_000
FIX_STATUS = {-1: "NO_FIX", 0: "FIX", 1: "SBAS_FIX", 2: "GBAS_FIX"}


def _covariance(values: Any) -> str:
    """How a 3x3 covariance (row-major) reads: given, not provided (-1), unknown (zeros), not finite, not positive
    definite."""
    c = np.asarray(values, dtype=np.float64).reshape(3, 3)
    if c[0, 0] == -1.0:
        return "not provided (-1)"
    if not np.all(np.isfinite(c)):
        return "not finite"
    if not c.any():
        return "unknown (all zeros)"
    if np.linalg.eigvalsh(0.5 * (c + c.T))[0] <= 0.0:
        return "not positive definite"
    return "given"


def _describe(kind: str, msg: Any, found: "StreamCheck") -> None:
    """Frame, joints, covariances, fix status and non-finite fields of one message into ``found``."""
    if kind in ("wheels", "steering"):
        found.joints[tuple(msg.name)] += 1
        arrays = {"position": msg.position, "velocity": msg.velocity, "effort": msg.effort}
    else:
        found.frames[msg.header.frame_id] += 1
    if kind == "imu":
        found.covariances[f"angular_velocity {_covariance(msg.angular_velocity_covariance)}"] += 1
        found.covariances[f"linear_acceleration {_covariance(msg.linear_acceleration_covariance)}"] += 1
        arrays = {"angular_velocity": [msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z],
                  "linear_acceleration": [msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z]}
    elif kind == "gnss_fix":
        unknown = msg.position_covariance_type == 0
        found.covariances["position unknown (type UNKNOWN)" if unknown else f"position {_covariance(msg.position_covariance)}"] += 1
        found.fix_status[FIX_STATUS.get(int(msg.status.status), f"status {msg.status.status}")] += 1
        arrays = {"latitude": [msg.latitude], "longitude": [msg.longitude], "altitude": [msg.altitude]}
    elif kind == "gnss_velocity":
        found.covariances[f"velocity {_covariance(np.asarray(msg.twist.covariance).reshape(6, 6)[:3, :3])}"] += 1
        v = msg.twist.twist.linear
        arrays = {"twist.linear": [v.x, v.y, v.z]}
    elif kind == "steering":
        arrays = {"position": msg.position}
    for name, values in arrays.items():
        if not np.all(np.isfinite(np.asarray(values, dtype=np.float64))):
            found.nonfinite[name] += 1


@dataclass
class StreamCheck:
    """What the bag holds of one sensor stream and what the observer will keep of it."""

    kind: str
    topic: str
    used_by_observer: bool  # False: switched off by the parameter sensors.<kind>
    found_type: str | None = None  # None: the topic is not in the bag
    count: int = 0
    stamps_ns: list = field(default_factory=list)
    offsets_ns: list = field(default_factory=list)  # log time - header stamp
    frames: Counter = field(default_factory=Counter)
    joints: Counter = field(default_factory=Counter)  # tuple of names -> messages
    covariances: Counter = field(default_factory=Counter)
    fix_status: Counter = field(default_factory=Counter)
    nonfinite: Counter = field(default_factory=Counter)  # field -> messages with a NaN/inf in it
    counters: Counter = field(default_factory=StreamCounter)  # the observer's: received, dropped: <why>, notes

    @property
    def expected_type(self) -> str:
        return SENSOR_MSGTYPES[self.kind]

    @property
    def loss(self):
        return stream_losses({self.kind: self.counters})[self.kind]


@dataclass
class BagCheck:
    """The streams of a bag as the observer will see them; ``ok`` False when processing would fail."""

    bag: Path
    config: ObserverConfig
    imu_frame: str
    gnss_frame: str
    vehicle: str
    streams: list[StreamCheck]
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    straight_ahead: "StraightAhead | None" = None  # the steering sensor's reading while the car drives straight

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def verdict(self) -> str:
        if self.failures:
            return "FAIL: " + "; ".join(self.failures)
        if self.warnings:
            return "OK with warnings: " + "; ".join(self.warnings)
        return f"OK: every message of the {len(self.streams)} sensor streams will be used"

    def text(self) -> str:
        """The report: one block per stream, then the verdict line."""
        lines = [f"check {self.bag}: vehicle {self.vehicle} (IMU frame {self.imu_frame!r}), observer {self.config.settings.observer}"]
        for s in self.streams:
            lines += [""] + self._block(s)
        return "\n".join(lines + ["", f"verdict: {self.verdict}"])

    def _block(self, s: StreamCheck) -> list[str]:
        head = f"{s.topic} ({s.kind}, {s.expected_type})"
        if s.found_type is None:
            return [head, "  not in the bag: the observer runs without it"]
        if s.found_type != s.expected_type:
            return [head, f"  type {s.found_type}: not {s.expected_type}; process refuses the bag"]
        out = [head]
        stamps = np.asarray(s.stamps_ns, dtype=np.int64)
        span_s = (stamps.max() - stamps.min()) / _NS if len(stamps) > 1 else 0.0
        rate = f"{(len(stamps) - 1) / span_s:.1f} Hz over {span_s:.2f} s of header stamps" if span_s > 0 else "no rate (fewer than 2 stamps)"
        out.append(f"  messages: {s.count}, {rate}")
        if len(stamps) > 1:
            steps = np.diff(stamps)
            out.append(f"  stamps in log order: {int((steps < 0).sum())} going back, {int((steps == 0).sum())} repeated")
        if s.offsets_ns:
            ms = np.asarray(s.offsets_ns, dtype=np.float64) * 1e-6
            out.append(f"  log time - header stamp: min {ms.min():.1f} ms, median {np.median(ms):.1f} ms, max {ms.max():.1f} ms")
            max_delay_s = self.config.settings.max_delay_s
            if ms.max() > 1e3 * max_delay_s:
                out.append(f"    (logged up to {ms.max() * 1e-3:.3f} s after their stamps: samples more than timing.max_delay_s = "
                           f"{max_delay_s:g} s behind the model time are dropped as late)")
        if s.frames:
            expected = {"imu": f"expected {self.imu_frame!r} (vehicle file sensors.imu_frame_id)",
                        "gnss_fix": f"vehicle file's {self.gnss_frame!r}, not checked by the observer",
                        "gnss_velocity": "not checked by the observer"}[s.kind]
            out.append(f"  frame_id: {_counts({repr(k): n for k, n in s.frames.items()})}; {expected}")
        if s.joints:
            wanted = list(self.config.joints.wheels) if s.kind == "wheels" else [self.config.joints.steering]
            names = sorted({n for names in s.joints for n in names})
            missing = [n for n in wanted if n not in names]
            out.append(f"  joints found: {', '.join(names) or 'none'}; expected (parameters joints.*): {', '.join(wanted)}"
                       + (f"; missing: {', '.join(missing)}" if missing else ""))
        if s.covariances:
            out.append(f"  covariances: {_counts(s.covariances)}")
        if s.kind == "steering":
            out.append(self._straight_ahead_line())
        if s.fix_status:
            out.append(f"  fix status: {', '.join(f'{k} {100 * n / s.count:.0f} %' for k, n in s.fix_status.most_common())}")
        out.append(f"  non-finite fields: {_counts(s.nonfinite) if s.nonfinite else 'none'}")
        loss = s.loss
        received = s.counters["received"]
        out.append(f"  will use: {received - loss.dropped} of {received} ({100 * (1 - loss.share):.0f} %)"
                   + ("" if s.used_by_observer else f" -- but the parameter sensors.{s.kind} is false: not used for updates"))
        for key, n in s.counters.most_common():
            if key.startswith("dropped"):
                out.append(f"  will drop: {n} ({100 * n / received:.0f} %): {key.split(': ', 1)[1]}")
        for key, n in s.counters.most_common():
            if key != "received" and not key.startswith("dropped"):
                out.append(f"  note: {key}: {n}")
        return out

    def _straight_ahead_line(self) -> str:
        a, configured = self.straight_ahead, self.config.settings.steering_offset_rad
        if a is None:
            return (f"  straight ahead: not measured (needs GNSS velocity and {STRAIGHT_MIN_SAMPLES} steering samples while the "
                    f"car drives straight at {STRAIGHT_MIN_SPEED_M_S:g} m/s or more)")
        return (f"  straight ahead: reads {math.degrees(a.offset_rad):+.2f} deg +- {math.degrees(a.sigma_rad):.2f} ({a.samples} samples over "
                f"{a.seconds:.1f} s of straight driving by the GNSS course); model.steering_offset_rad is {configured:.4f} rad")


STRAIGHT_MIN_SPEED_M_S = 8.0  # straight_ahead_steering: slower, the steering of a straight line is lost in the driver's
STRAIGHT_WINDOW_S = 2.0  # corrections; the course rate is the slope of the GNSS course over this window
STRAIGHT_MAX_COURSE_RATE_RAD_S = math.radians(1.0)
STRAIGHT_MIN_SAMPLES = 100
STEERING_OFFSET_WARN_RAD = math.radians(0.5)  # a measured zero further than this from model.steering_offset_rad is warned of


@dataclass(frozen=True)
class StraightAhead:
    """The steering-wheel angle (rad) the sensor reads with the wheels straight ahead, its 1-sigma, and what it is
    measured on (steering samples, seconds of straight driving)."""

    offset_rad: float
    sigma_rad: float
    samples: int
    seconds: float


def straight_ahead_steering(velocity: list, steering: list) -> StraightAhead | None:
    """The steering sensor's zero from the bag alone: the intercept of the least-squares line of the steering-wheel
    angle against the path's curvature (the GNSS course's rate over speed, rad/m; its slope is the steering ratio times
    the wheelbase), fitted where the car drives nearly straight: the course, fitted over STRAIGHT_WINDOW_S, turns by at
    most STRAIGHT_MAX_COURSE_RATE_RAD_S, at STRAIGHT_MIN_SPEED_M_S or faster.  ``velocity``: (stamp ns, east, north m/s)
    of the GNSS velocity; ``steering``: (stamp ns, angle rad).  The course, not the gyroscope, tells straight driving:
    a gyroscope's bias (0.3 deg/s at 20 m/s is 0.6 deg of steering-wheel angle) would bias the zero.  None with fewer
    than STRAIGHT_MIN_SAMPLES samples on straight stretches."""
    if len(velocity) < 5 or len(steering) < STRAIGHT_MIN_SAMPLES:
        return None
    v = np.array(sorted(velocity), dtype=float)
    t, speed = v[:, 0] * 1e-9, np.hypot(v[:, 1], v[:, 2])
    course = np.unwrap(np.arctan2(v[:, 2], v[:, 1]))
    half = 0.5 * STRAIGHT_WINDOW_S
    lo, hi = np.searchsorted(t, t - half), np.searchsorted(t, t + half, side="right")
    curvature = np.full(len(t), np.nan)  # rad/m where the car drives straight, else NaN
    for i in range(len(t)):
        window = slice(lo[i], hi[i])
        if hi[i] - lo[i] < 5 or speed[window].min() < STRAIGHT_MIN_SPEED_M_S:
            continue
        rate = np.polyfit(t[window], course[window], 1)[0]
        if abs(rate) <= STRAIGHT_MAX_COURSE_RATE_RAD_S:
            curvature[i] = rate / speed[i]
    period = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    st = np.array(sorted(steering), dtype=float)
    ts, angle = st[:, 0] * 1e-9, st[:, 1]
    nearest = np.clip(np.searchsorted(t, ts), 1, len(t) - 1)
    nearest -= (ts - t[nearest - 1]) < (t[nearest] - ts)  # the GNSS instant nearest each steering sample
    close = np.abs(t[nearest] - ts) <= max(period, 0.05)
    kappa = np.where(close, curvature[nearest], np.nan)
    keep = np.isfinite(kappa) & np.isfinite(angle)
    if keep.sum() < STRAIGHT_MIN_SAMPLES:
        return None
    A = np.column_stack([np.ones(int(keep.sum())), kappa[keep]])
    coef, *_ = np.linalg.lstsq(A, angle[keep], rcond=None)
    residual = angle[keep] - A @ coef
    dof = max(int(keep.sum()) - 2, 1)
    cov = np.linalg.pinv(A.T @ A) * float(residual @ residual) / dof
    # the samples of one GNSS window share its curvature error: count the windows, not the samples, as independent
    windows = int(np.isfinite(curvature).sum())
    share = max(1.0, keep.sum() / max(windows, 1))
    return StraightAhead(float(coef[0]), float(math.sqrt(max(cov[0, 0], 0.0) * share)), int(keep.sum()), windows * period)


def _counts(counter) -> str:
    return ", ".join(f"{key} x{n}" for key, n in Counter(counter).most_common())


def check_bag(bag: str | Path, config: ObserverConfig | None = None) -> BagCheck:
    """Read the sensor streams of ``bag`` as the observer of ``config`` would (module docstring)."""
    from ..paths import default_vehicle_path
    from ..sensors.mounts import mounts_from_vehicle
    from ..vehicle.description import load_vehicle

    bag = Path(bag)
    config = config or load_config()
    vehicle = config.vehicle_file or str(default_vehicle_path())
    desc = load_vehicle(vehicle)
    mounts = mounts_from_vehicle(desc)
    info = bag_info(bag)
    enabled = set(config.settings.sensors) | {"steering"}
    streams = {kind: StreamCheck(kind, config.topics[kind], kind in enabled) for kind in STREAMS}
    for s in streams.values():
        if s.topic in info.topics:
            s.found_type = info.topics[s.topic][0]
    readable = {s.topic: s.kind for s in streams.values() if s.found_type == s.expected_type}
    counters = {kind: streams[kind].counters for kind in STREAMS}
    screen = SampleScreen(config.settings, mounts.imu_frame_id, InputLimits.of(desc), counters)
    velocity, steering = [], []  # for straight_ahead_steering
    if readable:
        for topic, log_ns, msg in read_messages(bag, readable):
            kind = readable[topic]
            s = streams[kind]
            s.count += 1
            stamp = stamp_to_ns(msg.header.stamp)
            s.stamps_ns.append(stamp)
            s.offsets_ns.append(log_ns - stamp)
            _describe(kind, msg, s)
            sample = to_sample(kind, msg, log_ns, config.joints, counters)
            if sample is not None:
                counters[kind]["received"] += 1  # as OnlineObserver.feed counts it
                screen.take(kind, sample)
                if isinstance(sample, GnssVelocity) and np.all(np.isfinite(sample.velocity_enu_m_s[:2])):
                    velocity.append((sample.stamp_ns, float(sample.velocity_enu_m_s[0]), float(sample.velocity_enu_m_s[1])))
                elif isinstance(sample, SteeringSample):
                    steering.append((sample.stamp_ns, sample.steering_wheel_angle_rad))
    result = BagCheck(bag, config, mounts.imu_frame_id, mounts.gnss_frame_id, vehicle, list(streams.values()),
                      straight_ahead=straight_ahead_steering(velocity, steering))
    a = result.straight_ahead
    if a is not None and abs(a.offset_rad - config.settings.steering_offset_rad) > max(STEERING_OFFSET_WARN_RAD, 3.0 * a.sigma_rad):
        result.warnings.append(f"{config.topics['steering']} (steering) reads {math.degrees(a.offset_rad):+.2f} deg while the car drives "
                               f"straight ahead: the model steers by that; set model.steering_offset_rad: {a.offset_rad:.4f}")
    if not readable:
        result.failures.append(f"none of the sensor topics {', '.join(config.topics.values())} is in the bag "
                               f"(topics: {', '.join(sorted(info.topics)) or 'none'})")
    for s in streams.values():
        if s.found_type is None:
            if s.kind == "gnss_fix" and config.settings.start_mode == "gnss":
                result.failures.append(f"{s.topic} is not in the bag: the observer starts from GNSS fixes (start.mode gnss)")
            elif readable:
                result.warnings.append(f"{s.topic} ({s.kind}) is not in the bag")
        elif s.found_type != s.expected_type:
            result.failures.append(f"{s.topic} has type {s.found_type}, expected {s.expected_type}")
        elif s.used_by_observer and s.loss.received:
            loss = s.loss
            if loss.dropped == loss.received:
                result.failures.append(loss_line(s.topic, loss))
            elif loss.share > 0.5:
                result.warnings.append(loss_line(s.topic, loss))
            elif loss.dropped:
                result.warnings.append(f"{s.topic} ({s.kind}): {loss.dropped} of {loss.received} messages dropped")
    return result


def check_command(bag: str, params: str | None = None, vehicle: str | None = None) -> int:
    """CLI body: the report on stdout; 0 when the bag can be processed, 1 when not (or on bad input: one line)."""
    import sys

    try:
        config = load_config(params, **({"vehicle_file": vehicle} if vehicle else {}))
        result = check_bag(bag, config)
    except (IoError, ValueError, FileNotFoundError) as exc:
        print(f"state-observer check: {exc}", file=sys.stderr)
        return 1
    print(result.text())
    return 0 if result.ok else 1

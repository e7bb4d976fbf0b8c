"""Sensor synthesis: IMU, GNSS fix and velocity, wheel encoders and steering from the ground truth.

The virtual vehicle produces one :class:`~state_observer.vehicle.state.VehicleState` per model step
(4 ms). :class:`SensorSynthesizer` turns that stream into the sensor samples of
:mod:`state_observer.sensors.samples`, each sensor on its own clock, with the rates, noise,
biases, dropouts and latencies of a :class:`SensorConfig` (read from YAML by
:func:`load_sensor_config`, defaults in ``config/sensors/default.yaml``).

Frames and physics (REP-103/105/145; base_link x forward, y left, z up; ENU world):

* gyroscope      w_s = R_bs^T w                                   (sensor frame)
* accelerometer  f_s = R_bs^T [R^T (a_o - g) + alpha x r + w x (w x r)],  g = (0, 0, -g0) in ENU,
  so a level vehicle at rest reads f_s = (0, 0, +g0)
* GNSS fix       WGS84 of the antenna p_o + R r_a, the truth ENU frame being the local ENU frame
  of the configured datum; noise added in ENU; covariance diag(sh^2, sh^2, sv^2) in ENU
* GNSS velocity  v_o + R (w x r_a) in ENU
* wheel encoder  angle floor(theta N / 2 pi) 2 pi / N (N counts per revolution, either sign of
  rotation), rate = true rate + error
* steering       steering-wheel angle + error

with R the base_link -> ENU rotation, a_o and v_o the acceleration and velocity of the base_link
origin (ENU), w and alpha the angular velocity and acceleration in base_link axes, r the IMU
position and r_a the antenna position in base_link, and R_bs the IMU mounting rotation
(sensor -> base_link).

Error model of every channel (per component, per sample k of a sensor with period dt)::

    y_k = (1 + s) h_k + b_k + n_k                                 (s: scale-factor error per component)
    b_0 = bias,  b_{k+1} = b_k + q sqrt(dt) w_k                    (bias random walk, q >= 0)
    n_k = sigma w'_k                                             (white, correlation_time_s = 0)
    n_k = phi n_{k-1} + sqrt(1 - phi^2) sigma w'_k,  phi = exp(-dt / tau),  n_0 = sigma w'_0
                                                                 (first-order Gauss-Markov)

with w, w' standard normal. ``sigma`` is therefore the standard deviation of one sample in both
cases. Each sensor draws from its own generator, spawned from the seed in a fixed order, and
draws the same numbers whether a sample is kept or dropped: changing one sensor's settings
(or its dropouts) leaves the other sensors' noise unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Union

import numpy as np
import yaml

from ..conventions import GRAVITY_M_S2, quaternion_to_matrix
from ..errors import SensorConfigError
from ..sensors.geodesy import LocalENU
from ..sensors.mounts import SensorMounts
from ..sensors.samples import GnssFix, GnssVelocity, ImuSample, SteeringSample, WheelSample
from ..vehicle.state import VehicleState

Sample = Union[ImuSample, GnssFix, GnssVelocity, WheelSample, SteeringSample]


NAVSAT_STATUS = {"no_fix": -1, "fix": 0, "sbas": 1, "gbas": 2}
"""``sensor_msgs/NavSatStatus.status`` values."""

SENSOR_NAMES = ("imu", "gnss_fix", "gnss_velocity", "wheel_encoders", "steering")
"""Sections of the sensor YAML, also the order in which the random streams are spawned."""



# ----------------------------------------------------------------------------------------------
# Configuration records
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NoiseModel:
    """Error model of one measured quantity with ``n`` components (see the module docstring).

    Attributes
    ----------
    sigma : tuple of n float
        Standard deviation of one sample (white noise, or stationary Gauss-Markov noise).
    bias : tuple of n float
        Constant bias, the initial value of the bias random walk.
    bias_walk_per_sqrt_s : float
        Random-walk intensity q of the bias (unit of the quantity per sqrt(s)); 0 = constant.
    correlation_time_s : float
        Time constant of the first-order Gauss-Markov noise; 0 = white noise.
    scale_factor : tuple of n float
        Scale-factor error s per component (the sensor reads (1 + s) times the true value); 0 = none.
    """

    sigma: tuple[float, ...]
    bias: tuple[float, ...]
    bias_walk_per_sqrt_s: float = 0.0
    correlation_time_s: float = 0.0
    scale_factor: tuple[float, ...] | None = None

    def scaled(self, value: np.ndarray) -> np.ndarray:
        """(1 + s) value, the true value as the sensor's scale sees it."""
        return value if self.scale_factor is None else value * (1.0 + np.asarray(self.scale_factor, dtype=float))


@dataclass(frozen=True)
class Dropouts:
    """Missing samples.

    Attributes
    ----------
    intervals_s : tuple of (t_start_s, t_end_s)
        Outages: samples stamped in a closed interval are removed (GNSS fixes: or published as
        NO_FIX, see :attr:`GnssFixConfig.outage_mode`).
    probability : float
        Probability that any one sample is lost (a lost message; always removed).
    """

    intervals_s: tuple[tuple[float, float], ...] = ()
    probability: float = 0.0


@dataclass(frozen=True)
class ImuConfig:
    """IMU: 3-axis gyroscope (rad/s) and accelerometer (specific force, m/s^2), sensor frame.

    ``frame_id`` None means the mounting's (:attr:`SensorMounts.imu_frame_id`).
    """

    enabled: bool
    rate_hz: float
    latency_s: float
    gyro_rad_s: NoiseModel
    accel_m_s2: NoiseModel
    phase_s: float = 0.0
    dropouts: Dropouts = Dropouts()
    frame_id: str | None = None


@dataclass(frozen=True)
class Datum:
    """Origin of the local ENU frame (WGS84; ellipsoidal height)."""

    latitude_deg: float
    longitude_deg: float
    altitude_m: float

    def local_enu(self) -> LocalENU:
        """The local ENU frame at this datum."""
        return LocalENU(self.latitude_deg, self.longitude_deg, self.altitude_m)


@dataclass(frozen=True)
class GnssFixConfig:
    """GNSS antenna position, WGS84 around ``datum``.

    ``position_m`` has components (east, north, up): ``sigma`` is (horizontal, horizontal,
    vertical), i.e. the horizontal sigma applies to each horizontal axis.
    ``outage_mode``: "drop" publishes nothing during outage intervals, "no_fix" publishes
    samples with status NO_FIX (-1), NaN position and zero covariance. ``status`` is the
    NavSatStatus value of good fixes (0 FIX, 1 SBAS, 2 GBAS).
    """

    enabled: bool
    rate_hz: float
    latency_s: float
    datum: Datum
    position_m: NoiseModel
    phase_s: float = 0.0
    dropouts: Dropouts = Dropouts()
    frame_id: str | None = None
    outage_mode: str = "drop"
    status: int = 0


@dataclass(frozen=True)
class GnssVelocityConfig:
    """GNSS antenna velocity in ENU; ``velocity_m_s`` components (east, north, up)."""

    enabled: bool
    rate_hz: float
    latency_s: float
    velocity_m_s: NoiseModel
    phase_s: float = 0.0
    dropouts: Dropouts = Dropouts()
    frame_id: str | None = None


@dataclass(frozen=True)
class WheelEncoderConfig:
    """Wheel encoders (fl, fr, rl, rr): angle from finite counts, rate with noise.

    ``counts_per_revolution`` None means the mounting's (the vehicle's encoders).
    ``include_torque`` False fills ``WheelSample.torque_n_m`` with NaN (torque unknown).
    """

    enabled: bool
    rate_hz: float
    latency_s: float
    rate_rad_s: NoiseModel
    torque_n_m: NoiseModel
    phase_s: float = 0.0
    dropouts: Dropouts = Dropouts()
    counts_per_revolution: int | None = None
    include_torque: bool = True


@dataclass(frozen=True)
class SteeringConfig:
    """Steering-wheel angle (rad)."""

    enabled: bool
    rate_hz: float
    latency_s: float
    angle_rad: NoiseModel
    phase_s: float = 0.0
    dropouts: Dropouts = Dropouts()


@dataclass(frozen=True)
class SensorConfig:
    """All sensors of a simulated run; ``source`` names the file it came from."""

    imu: ImuConfig
    gnss_fix: GnssFixConfig
    gnss_velocity: GnssVelocityConfig
    wheel_encoders: WheelEncoderConfig
    steering: SteeringConfig
    source: str = "<config>"


# ----------------------------------------------------------------------------------------------
# YAML parsing
# ----------------------------------------------------------------------------------------------

_MISSING = object()


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


class _Section:
    """One mapping of the YAML file; every read is recorded so that unknown keys can be reported."""

    def __init__(self, source: str, data, path: str):
        self.source, self.path = source, path
        if not isinstance(data, dict):
            raise self.error(None, f"must be a mapping, got {_describe(data)}")
        self.data = data
        self.used: set = set()

    def where(self, key: str | None) -> str:
        if key is None:
            return self.path or "<top level>"
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str | None, why: str) -> SensorConfigError:
        return SensorConfigError(f"{self.source}: {self.where(key)}: {why}")

    def raw(self, key: str, default=_MISSING):
        self.used.add(key)
        if key not in self.data:
            if default is _MISSING:
                raise self.error(key, "missing required key")
            return default
        return self.data[key]

    def section(self, key: str, default=_MISSING) -> "_Section | None":
        value = self.raw(key, default)
        return None if value is None else _Section(self.source, value, self.where(key))

    def number(self, key: str, default=_MISSING, *, minimum: float | None = None, positive: bool = False) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, got {_describe(value)}")
        value = float(value)
        if not math.isfinite(value):
            raise self.error(key, f"must be finite, got {value}")
        if positive and value <= 0.0:
            raise self.error(key, f"must be > 0, got {value:g}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum:g}, got {value:g}")
        return value

    def boolean(self, key: str, default=_MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {_describe(value)}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default=_MISSING) -> str:
        value = self.raw(key, default)
        if value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}, got {_describe(value)}")
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.raw(key, None)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self.error(key, f"must be a non-empty string or null, got {_describe(value)}")
        return value

    def vector(self, key: str, n: int, default=_MISSING) -> tuple[float, ...]:
        """A scalar (same value for every component) or a list of ``n`` numbers."""
        value = self.raw(key, default)
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) != n:
            raise self.error(key, f"must be a number or a list of {n} numbers, got {len(value)} items")
        out = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
                raise self.error(key, f"must be a number or a list of {n} finite numbers, got {_describe(value)}")
            out.append(float(item))
        return tuple(out * n if len(out) == 1 else out)

    def finish(self) -> None:
        unknown = sorted(str(k) for k in self.data if k not in self.used)
        if unknown:
            raise self.error(unknown[0], f"unknown key (expected one of: {', '.join(sorted(self.used))})")


def _timing(sec: _Section) -> dict:
    """Keys common to every sensor."""
    rate_hz = sec.number("rate_hz", positive=True)
    phase_s = sec.number("phase_s", 0.0, minimum=0.0)
    if phase_s >= 1.0 / rate_hz:
        raise sec.error("phase_s", f"must be smaller than the sample period 1/rate_hz = {1.0 / rate_hz:g} s")
    return dict(
        enabled=sec.boolean("enabled"),
        rate_hz=rate_hz,
        phase_s=phase_s,
        latency_s=sec.number("latency_s", minimum=0.0),
        dropouts=_dropouts(sec.section("dropouts", None)),
    )


def _dropouts(sec: _Section | None) -> Dropouts:
    if sec is None:
        return Dropouts()
    raw = sec.raw("intervals_s", [])
    if not isinstance(raw, list):
        raise sec.error("intervals_s", f"must be a list of [t_start_s, t_end_s], got {_describe(raw)}")
    intervals = []
    for i, item in enumerate(raw):
        ok = (isinstance(item, list) and len(item) == 2
              and all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in item))
        if not ok:
            raise sec.error(f"intervals_s[{i}]", f"must be [t_start_s, t_end_s], got {_describe(item)}")
        if item[1] < item[0]:
            raise sec.error(f"intervals_s[{i}]", f"end {item[1]:g} s is before start {item[0]:g} s")
        intervals.append((float(item[0]), float(item[1])))
    probability = sec.number("probability", 0.0, minimum=0.0)
    if probability > 1.0:
        raise sec.error("probability", f"must be in [0, 1], got {probability:g}")
    sec.finish()
    return Dropouts(tuple(intervals), probability)


def _noise(parent: _Section, key: str, n: int, *, enu: bool = False, required: bool = True) -> NoiseModel:
    """A noise block; ``enu`` blocks give ``horizontal_sigma`` and ``vertical_sigma`` instead of ``sigma``."""
    sec = parent.section(key, _MISSING if required else None)
    if sec is None:
        return NoiseModel(sigma=(0.0,) * n, bias=(0.0,) * n)
    if enu:
        horizontal = sec.number("horizontal_sigma", minimum=0.0)
        sigma = (horizontal, horizontal, sec.number("vertical_sigma", minimum=0.0))
    else:
        sigma = (sec.number("sigma", minimum=0.0),) * n
    model = NoiseModel(
        sigma=sigma,
        bias=sec.vector("bias", n, 0.0),
        bias_walk_per_sqrt_s=sec.number("bias_walk_per_sqrt_s", 0.0, minimum=0.0),
        correlation_time_s=sec.number("correlation_time_s", 0.0, minimum=0.0),
        scale_factor=sec.vector("scale_factor", n, 0.0),
    )
    sec.finish()
    return model


def _imu(sec: _Section) -> ImuConfig:
    cfg = ImuConfig(**_timing(sec), frame_id=sec.optional_string("frame_id"),
                    gyro_rad_s=_noise(sec, "gyro_rad_s", 3), accel_m_s2=_noise(sec, "accel_m_s2", 3))
    sec.finish()
    return cfg


def _gnss_fix(sec: _Section) -> GnssFixConfig:
    d = sec.section("datum")
    datum = Datum(d.number("latitude_deg"), d.number("longitude_deg"), d.number("altitude_m"))
    if not -90.0 <= datum.latitude_deg <= 90.0:
        raise d.error("latitude_deg", f"must be in [-90, 90], got {datum.latitude_deg:g}")
    if not -180.0 <= datum.longitude_deg <= 180.0:
        raise d.error("longitude_deg", f"must be in [-180, 180], got {datum.longitude_deg:g}")
    d.finish()
    cfg = GnssFixConfig(
        **_timing(sec), frame_id=sec.optional_string("frame_id"), datum=datum,
        position_m=_noise(sec, "position_m", 3, enu=True),
        outage_mode=sec.choice("outage_mode", ("drop", "no_fix"), "drop"),
        status=NAVSAT_STATUS[sec.choice("status", ("fix", "sbas", "gbas"), "fix")],
    )
    sec.finish()
    return cfg


def _gnss_velocity(sec: _Section) -> GnssVelocityConfig:
    cfg = GnssVelocityConfig(**_timing(sec), frame_id=sec.optional_string("frame_id"),
                             velocity_m_s=_noise(sec, "velocity_m_s", 3, enu=True))
    sec.finish()
    return cfg


def _wheel_encoders(sec: _Section) -> WheelEncoderConfig:
    counts = sec.raw("counts_per_revolution", None)
    if counts is not None and (isinstance(counts, bool) or not isinstance(counts, int) or counts <= 0):
        raise sec.error("counts_per_revolution", f"must be a positive integer or null, got {_describe(counts)}")
    cfg = WheelEncoderConfig(
        **_timing(sec), counts_per_revolution=counts,
        rate_rad_s=_noise(sec, "rate_rad_s", 4),
        torque_n_m=_noise(sec, "torque_n_m", 4, required=False),
        include_torque=sec.boolean("include_torque", True),
    )
    sec.finish()
    return cfg


def _steering(sec: _Section) -> SteeringConfig:
    cfg = SteeringConfig(**_timing(sec), angle_rad=_noise(sec, "angle_rad", 1))
    sec.finish()
    return cfg


def parse_sensor_config(data, source: str = "<config>") -> SensorConfig:
    """Validate a parsed YAML document (nested dicts) and build a :class:`SensorConfig`.

    Raises
    ------
    SensorConfigError
        One line ``<source>: <key.path>: <why>`` for the first problem found: missing or
        unknown keys, wrong types, non-positive rates, negative sigmas or latencies, reversed
        dropout intervals, probabilities outside [0, 1], an out-of-range datum.
    """
    top = _Section(source, data, "")
    parsers = dict(imu=_imu, gnss_fix=_gnss_fix, gnss_velocity=_gnss_velocity,
                   wheel_encoders=_wheel_encoders, steering=_steering)
    sections = {name: parse(top.section(name)) for name, parse in parsers.items()}
    top.finish()
    return SensorConfig(**sections, source=source)


def load_sensor_config(path) -> SensorConfig:
    """Read and validate a sensor YAML file (schema: ``config/sensors/default.yaml``).

    Raises
    ------
    SensorConfigError
        If the file cannot be read or parsed, or fails validation (see :func:`parse_sensor_config`).
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SensorConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "<document>"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SensorConfigError(f"{source}: {line}: invalid YAML: {problem}") from None
    return parse_sensor_config(data, source)


# ----------------------------------------------------------------------------------------------
# Synthesis
# ----------------------------------------------------------------------------------------------

def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b of two 3-vectors (np.cross is slow on single vectors)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def interpolate_truth(a: VehicleState, b: VehicleState, alpha: float) -> VehicleState:
    """Truth at ``a.t_s + alpha (b.t_s - a.t_s)``: every field linearly, the quaternion by
    normalised lerp along the shorter arc (equal to slerp to O(angle^3); 4 ms steps)."""
    fields = []
    for name, va, vb in zip(VehicleState._fields, a, b):
        if name == "orientation_wxyz":
            qa, qb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
            if np.dot(qa, qb) < 0.0:
                qb = -qb
            q = qa + alpha * (qb - qa)
            fields.append(q / np.linalg.norm(q))
        else:
            fields.append(va + alpha * (vb - va))
    return VehicleState(*fields)


class _ErrorProcess:
    """Bias random walk plus white or Gauss-Markov noise of one channel (module docstring)."""

    def __init__(self, model: NoiseModel, dt_s: float, rng: np.random.Generator):
        self.rng = rng
        self.sigma = np.array(model.sigma, dtype=float)
        self.bias = np.array(model.bias, dtype=float)
        self.walk = model.bias_walk_per_sqrt_s * math.sqrt(dt_s)
        tau = model.correlation_time_s
        self.phi = math.exp(-dt_s / tau) if tau > 0.0 else 0.0
        self.gain = math.sqrt(1.0 - self.phi**2)
        self.noise: np.ndarray | None = None

    def draw(self) -> np.ndarray:
        """Error of the next sample, shape (n,). Always consumes 2 n normal draws."""
        w = self.rng.standard_normal((2, self.sigma.size))
        if self.noise is None:
            self.noise = self.sigma * w[0]
        else:
            self.noise = self.phi * self.noise + self.gain * self.sigma * w[0]
        error = self.bias + self.noise
        self.bias = self.bias + self.walk * w[1]
        return error


class _Clock:
    """Sampling instants t_k = phase + k / rate (integer ns) of one sensor."""

    def __init__(self, rate_hz: float, phase_s: float):
        self.period_ns = 1e9 / rate_hz
        self.phase_ns = round(phase_s * 1e9)
        self.k: int | None = None

    def instant_ns(self, k: int) -> int:
        return self.phase_ns + round(k * self.period_ns)

    def take(self, t_first_ns: int, t_ns: int) -> list[int]:
        """Instants in (previous t, t_ns]; on the first call, those in [t_first_ns, t_ns]."""
        if self.k is None:
            k = math.ceil((t_first_ns - self.phase_ns) / self.period_ns)
            while self.instant_ns(k - 1) >= t_first_ns:
                k -= 1
            while self.instant_ns(k) < t_first_ns:
                k += 1
            self.k = k
        out = []
        while self.instant_ns(self.k) <= t_ns:
            out.append(self.instant_ns(self.k))
            self.k += 1
        return out


class _Sensor:
    """Clock, latency, dropouts and random generator of one enabled sensor."""

    def __init__(self, cfg, rng: np.random.Generator):
        self.cfg = cfg
        self.clock = _Clock(cfg.rate_hz, cfg.phase_s)
        self.latency_ns = round(cfg.latency_s * 1e9)
        self.dt_s = 1.0 / cfg.rate_hz
        self.rng = rng
        self.outages_ns = tuple((round(t0 * 1e9), round(t1 * 1e9)) for t0, t1 in cfg.dropouts.intervals_s)

    def fate(self, stamp_ns: int) -> str:
        """"keep", "outage" (stamp in a closed outage interval) or "lost" (random loss); one uniform draw."""
        if self.rng.random() < self.cfg.dropouts.probability:
            return "lost"
        return "outage" if any(t0 <= stamp_ns <= t1 for t0, t1 in self.outages_ns) else "keep"


_TYPE_ORDER = {ImuSample: 0, WheelSample: 1, SteeringSample: 2, GnssFix: 3, GnssVelocity: 4}


def _sort_key(sample) -> tuple[int, int, int]:
    return sample.receive_ns, sample.stamp_ns, _TYPE_ORDER[type(sample)]


class SensorSynthesizer:
    """Sample the truth with the configured sensors.

    Parameters
    ----------
    config : SensorConfig
    mounts : SensorMounts
    seed : int
        Seed of all noise; the same seed and inputs give identical samples.
    gravity_m_s2 : float
        Magnitude of gravity; use the value of the vehicle model that produced the truth.

    Notes
    -----
    Feed the truth in time order with :meth:`feed`. A sample is stamped at its sensor's own
    instant (``stamp_ns``, measurement time) and received ``latency_s`` later (``receive_ns``).
    Samples returned by later calls are stamped after the current truth time, so a streaming
    writer can flush every buffered sample with ``receive_ns <=`` the current truth time.
    """

    def __init__(self, config: SensorConfig, mounts: SensorMounts, seed: int = 0,
                 gravity_m_s2: float = GRAVITY_M_S2):
        if not isinstance(config, SensorConfig):
            raise TypeError(f"config must be a SensorConfig, got {type(config).__name__}")
        if not isinstance(mounts, SensorMounts):
            raise TypeError(f"mounts must be a SensorMounts, got {type(mounts).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if not math.isfinite(gravity_m_s2) or gravity_m_s2 <= 0.0:
            raise ValueError(f"gravity_m_s2 must be positive, got {gravity_m_s2!r}")
        self.config, self.mounts = config, mounts
        self.gravity_enu_m_s2 = np.array([0.0, 0.0, -float(gravity_m_s2)])
        rngs = dict(zip(SENSOR_NAMES, (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(5))))

        self._sensors: dict[str, _Sensor] = {}
        for name in SENSOR_NAMES:
            cfg = getattr(config, name)
            if cfg.enabled:
                self._sensors[name] = _Sensor(cfg, rngs[name])

        self._imu_rotation_sb = mounts.imu_rotation.T  # base_link -> sensor
        self._imu_frame_id = config.imu.frame_id or mounts.imu_frame_id
        self._fix_frame_id = config.gnss_fix.frame_id or mounts.gnss_frame_id
        self._vel_frame_id = config.gnss_velocity.frame_id or mounts.gnss_frame_id
        self._enu = config.gnss_fix.datum.local_enu()
        self._fix_cov = np.diag(np.square(config.gnss_fix.position_m.sigma))
        self._vel_cov = np.diag(np.square(config.gnss_velocity.velocity_m_s.sigma))
        counts = config.wheel_encoders.counts_per_revolution or mounts.encoder_counts_per_revolution
        if "wheel_encoders" in self._sensors and counts is None:
            raise ValueError(f"{config.source}: wheel_encoders.counts_per_revolution: null here and not given "
                             "by the vehicle (SensorMounts.encoder_counts_per_revolution)")
        self.counts_per_revolution = counts

        self._errors: dict[str, _ErrorProcess] = {}
        channels = dict(gyro=("imu", "gyro_rad_s"), accel=("imu", "accel_m_s2"),
                        fix=("gnss_fix", "position_m"), vel=("gnss_velocity", "velocity_m_s"),
                        wheel_rate=("wheel_encoders", "rate_rad_s"), wheel_torque=("wheel_encoders", "torque_n_m"),
                        steering=("steering", "angle_rad"))
        for channel, (name, attr) in channels.items():
            if name in self._sensors:
                s = self._sensors[name]
                self._errors[channel] = _ErrorProcess(getattr(s.cfg, attr), s.dt_s, s.rng)

        self._previous: VehicleState | None = None
        self._previous_ns: int | None = None
        self._first_ns: int | None = None

    # -- public ---------------------------------------------------------------------------------

    def feed(self, truth: VehicleState) -> list[Sample]:
        """Consume the next truth sample; return the samples stamped in (previous t, t], sorted.

        The first call returns the samples stamped exactly at its time. Between two truth
        samples the truth is interpolated (:func:`interpolate_truth`).

        Returns
        -------
        list
            :class:`ImuSample`, :class:`GnssFix`, :class:`GnssVelocity`, :class:`WheelSample`
            and :class:`SteeringSample` records sorted by ``(receive_ns, stamp_ns)``.

        Raises
        ------
        ValueError
            If the truth time does not increase.
        """
        t_ns = round(float(truth.t_s) * 1e9)
        if self._previous_ns is not None and t_ns <= self._previous_ns:
            raise ValueError(f"truth time must increase: got t = {truth.t_s!r} s after "
                             f"{self._previous_ns * 1e-9!r} s")
        if self._first_ns is None:
            self._first_ns = t_ns
        states: dict[int, VehicleState] = {}

        def state_at(stamp_ns: int) -> VehicleState:
            if stamp_ns not in states:
                if stamp_ns == t_ns or self._previous is None:
                    states[stamp_ns] = truth
                else:
                    alpha = (stamp_ns - self._previous_ns) / (t_ns - self._previous_ns)
                    states[stamp_ns] = interpolate_truth(self._previous, truth, alpha)
            return states[stamp_ns]

        out: list = []
        for name, sensor in self._sensors.items():
            make = getattr(self, f"_{name}")
            for stamp_ns in sensor.clock.take(self._first_ns, t_ns):
                sample = make(sensor, stamp_ns, state_at(stamp_ns))
                if sample is not None:
                    out.append(sample)
        self._previous, self._previous_ns = truth, t_ns
        out.sort(key=_sort_key)
        return out

    def feed_all(self, truths: Iterable[VehicleState]) -> list[Sample]:
        """Feed a whole run; all samples sorted by ``(receive_ns, stamp_ns)``."""
        out: list = []
        for truth in truths:
            out.extend(self.feed(truth))
        out.sort(key=_sort_key)
        return out

    # -- one sample per sensor (None: dropped) ----------------------------------------------------

    def _imu(self, sensor: _Sensor, stamp_ns: int, x: VehicleState) -> ImuSample | None:
        gyro_error, accel_error = self._errors["gyro"].draw(), self._errors["accel"].draw()
        if sensor.fate(stamp_ns) != "keep":
            return None
        rot = quaternion_to_matrix(x.orientation_wxyz)  # base_link -> ENU
        omega = np.asarray(x.angular_velocity_body_rad_s, dtype=float)
        alpha = np.asarray(x.angular_acceleration_body_rad_s2, dtype=float)
        r = self.mounts.imu_position_m
        # f = R^T (a_o - g) + alpha x r + w x (w x r), base_link axes
        specific_force = (rot.T @ (np.asarray(x.acceleration_enu_m_s2, dtype=float) - self.gravity_enu_m_s2)
                          + _cross(alpha, r) + _cross(omega, _cross(omega, r)))
        cfg = sensor.cfg
        return ImuSample(
            stamp_ns=stamp_ns,
            receive_ns=stamp_ns + sensor.latency_ns,
            frame_id=self._imu_frame_id,
            angular_velocity_rad_s=cfg.gyro_rad_s.scaled(self._imu_rotation_sb @ omega) + gyro_error,
            linear_acceleration_m_s2=cfg.accel_m_s2.scaled(self._imu_rotation_sb @ specific_force) + accel_error,
            angular_velocity_sigma=float(cfg.gyro_rad_s.sigma[0]),
            linear_acceleration_sigma=float(cfg.accel_m_s2.sigma[0]),
        )

    def _gnss_fix(self, sensor: _Sensor, stamp_ns: int, x: VehicleState) -> GnssFix | None:
        error = self._errors["fix"].draw()
        fate = sensor.fate(stamp_ns)
        cfg = sensor.cfg
        if fate == "lost" or (fate == "outage" and cfg.outage_mode == "drop"):
            return None
        receive_ns = stamp_ns + sensor.latency_ns
        if fate == "outage":
            return GnssFix(stamp_ns, receive_ns, self._fix_frame_id, math.nan, math.nan, math.nan,
                           NAVSAT_STATUS["no_fix"], np.zeros((3, 3)))
        rot = quaternion_to_matrix(x.orientation_wxyz)
        antenna_enu = np.asarray(x.position_enu_m, dtype=float) + rot @ self.mounts.gnss_position_m + error
        lat, lon, h = self._enu.to_geodetic(*antenna_enu)
        return GnssFix(stamp_ns, receive_ns, self._fix_frame_id, float(lat), float(lon), float(h),
                       cfg.status, self._fix_cov.copy())

    def _gnss_velocity(self, sensor: _Sensor, stamp_ns: int, x: VehicleState) -> GnssVelocity | None:
        error = self._errors["vel"].draw()
        if sensor.fate(stamp_ns) != "keep":
            return None
        rot = quaternion_to_matrix(x.orientation_wxyz)
        omega = np.asarray(x.angular_velocity_body_rad_s, dtype=float)
        # v_a = v_o + R (w x r_a)
        velocity = (np.asarray(x.velocity_enu_m_s, dtype=float)
                    + rot @ _cross(omega, self.mounts.gnss_position_m) + error)
        return GnssVelocity(stamp_ns, stamp_ns + sensor.latency_ns, self._vel_frame_id, velocity, self._vel_cov.copy())

    def _wheel_encoders(self, sensor: _Sensor, stamp_ns: int, x: VehicleState) -> WheelSample | None:
        rate_error, torque_error = self._errors["wheel_rate"].draw(), self._errors["wheel_torque"].draw()
        if sensor.fate(stamp_ns) != "keep":
            return None
        step_rad = 2.0 * math.pi / self.counts_per_revolution
        angle = np.floor(np.asarray(x.wheel_angle_rad, dtype=float) / step_rad) * step_rad
        if sensor.cfg.include_torque:
            torque = np.asarray(x.wheel_torque_n_m, dtype=float) + torque_error
        else:
            torque = np.full(4, math.nan)
        return WheelSample(stamp_ns, stamp_ns + sensor.latency_ns, angle,
                           sensor.cfg.rate_rad_s.scaled(np.asarray(x.wheel_rate_rad_s, dtype=float)) + rate_error, torque)

    def _steering(self, sensor: _Sensor, stamp_ns: int, x: VehicleState) -> SteeringSample | None:
        error = self._errors["steering"].draw()
        if sensor.fate(stamp_ns) != "keep":
            return None
        return SteeringSample(stamp_ns, stamp_ns + sensor.latency_ns,
                              float(x.steering_wheel_angle_rad + error[0]))

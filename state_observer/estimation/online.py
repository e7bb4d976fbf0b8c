"""The observer on a live sample stream: sensor records in (any order, any rate, with faults), estimates out.

The observer node and ``state-observer process`` share this class, so a bag gives the same numbers
through either.  Time is sensor time (header stamps, integer ns), never arrival time.

Stepping.  The model advances in fixed steps of ``dt_s`` on sensor time.  A sample with a stamp ahead of
the model steps it until the model time reaches the stamp (so an IMU message gets its estimate at once);
each step is predict, the updates of every queued sample stamped up to the step's end in stamp order,
correct.  A sample whose stamp the model has already passed (GNSS fixes arrive ~80 ms after their epoch,
wheel signals ~10 ms) is applied at the next step with its age: GNSS positions and velocities are moved
to the model time along the model's antenna velocity and acceleration; samples older than
``max_delay_s`` are dropped and counted.  Steering angle and wheel torques are model inputs from the
step after they arrive; the steering angle is extrapolated along its recent rate to each step's middle
(:class:`ModelInputs`), which makes up for its latency.

The other jobs have modules of their own: :mod:`.intake` checks each sample first, :mod:`.startup` decides
when and where the model starts (``start_mode`` "gnss" or "pose"), :mod:`.outputs` builds what
:meth:`OnlineObserver.odometry` and :meth:`OnlineObserver.estimate` return.

Faults are handled and counted per stream in :attr:`counters` (never silently): the per-message rules of
:mod:`.intake` (:class:`~.intake.SampleScreen`), samples too late, samples before the start.  Three samples in a row
stamped more than ``time_jump_s`` behind the model (a looping bag, a restarted driver) reset the
observer; :meth:`reset` does the same on request.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..conventions import GRAVITY_M_S2, yaw_rad
from ..errors import ConfigError
from ..sensors.geodesy import LocalENU
from ..sensors.samples import STREAM_OF, GnssFix, GnssVelocity, ImuSample, SteeringSample, WheelSample
from .errorekf import DetailedErrorEKF, ErrorEkfSettings, VehicleErrorEKF, detailed_settings
from .intake import STREAMS, InputLimits, SampleScreen, StampGaps, StreamCounter
from .outputs import ObserverEstimate, Odometry, make_estimate, make_odometry
from .smoother import FixRecord
from .startup import Start, Startup

OBSERVERS = ("spi_reduced", "errorekf_fe_reduced", "errorekf_detailed")
_NS = 1_000_000_000
_JUMP_CONFIRM = 3  # samples in a row behind by more than time_jump_s before the observer resets
STANDSTILL_WINDOW_NS = 500_000_000  # wheel speeds averaged over this long to tell a car standing still
STANDSTILL_MEAN_RAD_S = 0.05  # every wheel's mean rate below this (1.5 cm/s at 0.3 m)
STANDSTILL_PEAK_RAD_S = 0.3  # and no single sample above this (six encoder sigmas of the default sensors)


@dataclass
class OnlineSettings:
    """Configuration of :class:`OnlineObserver` (the node's parameters map one to one onto these)."""

    observer: str = "spi_reduced"  # one of OBSERVERS
    dt_s: float = 0.004  # model step (s)
    datum: tuple | None = None  # (latitude deg, longitude deg, ellipsoidal height m); None: the first good fix
    start_mode: str = "gnss"  # "gnss" or "pose"
    start_pose: tuple = (0.0, 0.0, 0.0, 0.0)  # x m, y m (ENU), yaw rad (from east), speed m/s (start_mode "pose")
    start_min_speed_m_s: float = 2.0  # GNSS course is used as heading above this speed
    start_min_distance_m: float = 15.0  # else two fixes this far apart give the heading
    start_speed_from_wheels: bool = True  # start_mode pose: the speed of the first wheel sample (waited for up to 0.5 s), not start_pose's
    initial_mass_kg: float = 0.0  # model mass; 0: the vehicle file's
    initial_friction: float = 0.0  # model friction coefficient before it is estimated; 0: the vehicle file's
    parameters_after_s: float = 10.0  # spi_reduced: parameter estimation starts this long after the start
    road_slope: bool = False  # the errorEKF-FE learns the road's slope under the car (ErrorEkfSettings.road_slope)
    steering_offset_rad: float = 0.0  # the steering-wheel angle the sensor reads with the wheels straight ahead (subtracted)
    use_message_covariance: bool = True  # False: always the sigmas below
    gnss_horizontal_sigma_m: float = 1.8  # used when a fix has no usable covariance
    gnss_vertical_sigma_m: float = 2.6
    gnss_velocity_sigma_m_s: float = 0.1
    gyro_sigma_rad_s: float = 0.0035
    accel_sigma_m_s2: float = 0.025
    wheel_rate_sigma_rad_s: float = 0.05
    sensors: tuple = ("imu", "gnss_fix", "gnss_velocity", "wheels")  # streams used for updates (steering is an input)
    standstill_updates: bool = True  # zero velocity and rates while the wheels say the car stands (StandstillDetector)
    max_delay_s: float = 0.3  # samples stamped further behind the model are dropped
    time_jump_s: float = 1.0  # samples this far behind or ahead of the model: the time jumped (or a long silence)
    reorder_window_s: float = 0.0  # the model stays this far behind the newest stamp, so samples of streams delivered late (a deep
    # QoS queue, a bag written out of order) are still applied in stamp order; it delays every output by as much

    def __post_init__(self):
        def need(ok: bool, name: str, what: str):
            if not ok:
                raise ConfigError(f"{name}: {what} (got {getattr(self, name)!r})", key=name)

        need(self.observer in OBSERVERS, "observer", f"must be one of {', '.join(OBSERVERS)}")
        need(0.0005 <= self.dt_s <= 0.02, "dt_s", "must be within 0.0005-0.02 s")
        need(self.start_mode in ("gnss", "pose"), "start_mode", "must be 'gnss' or 'pose'")
        need(len(self.start_pose) == 4 and all(math.isfinite(v) for v in self.start_pose), "start_pose", "must be 4 finite numbers")
        if self.datum is not None:
            lat, lon, alt = (float(v) for v in self.datum)
            need(abs(lat) <= 90 and abs(lon) <= 180 and math.isfinite(alt), "datum", "must be latitude, longitude (deg), height (m)")
        need(self.initial_mass_kg == 0 or 50 <= self.initial_mass_kg <= 1e5, "initial_mass_kg", "must be 0 (vehicle file) or 50-100000 kg")
        need(self.initial_friction == 0 or 0.1 <= self.initial_friction <= 1.5, "initial_friction", "must be 0 (vehicle file) or within 0.1-1.5")
        need(0.0 <= self.parameters_after_s <= 3600.0, "parameters_after_s", "must be within 0-3600 s")
        need(isinstance(self.steering_offset_rad, (int, float)) and abs(self.steering_offset_rad) <= 0.5, "steering_offset_rad",
             "must be within -0.5 and 0.5 rad of steering-wheel angle")
        for name in ("gnss_horizontal_sigma_m", "gnss_vertical_sigma_m", "gnss_velocity_sigma_m_s", "gyro_sigma_rad_s",
                     "accel_sigma_m_s2", "wheel_rate_sigma_rad_s", "start_min_speed_m_s", "start_min_distance_m", "max_delay_s", "time_jump_s"):
            value = getattr(self, name)
            need(isinstance(value, (int, float)) and 0 < value < math.inf, name, "must be a positive number")
        need(0.0 <= self.reorder_window_s < min(self.time_jump_s, 5.0), "reorder_window_s", "must be within 0 s and time_jump_s (and below 5 s)")
        unknown = set(self.sensors) - set(STREAMS)
        need(not unknown, "sensors", f"unknown streams {sorted(unknown)}; known: {', '.join(STREAMS)}")


DIRECTION_MIN_RATE_RAD_S = 0.5  # a wheel turning slower keeps its last direction of rotation (ModelInputs; encoder noise)
STEERING_FIT_SAMPLES = 4  # steering samples in the line whose slope extrapolates the angle (ModelInputs; 30 ms at 100 Hz)
STEERING_FIT_WINDOW_S = 0.06  # samples older than this behind the newest are not fitted (a gap: hold the angle)
STEERING_LEAD_MAX_S = 0.05  # the angle is extrapolated at most this far ahead of the newest sample


class ModelInputs:
    """The latest measured steering angle and wheel torques (the model's inputs), set on the model only after
    they changed or while the steering moves (nothing else sets them).

    The steering angle reaches the model late: a sample is taken after its latency (a CAN cycle) and used from the
    next step on, and it is held until the next sample, about 20 ms on the default sensors.  At walking pace the
    steering sets the yaw rate, so the model's yaw rate lagged the truth's by as much.  :meth:`apply` with the
    step's middle instant extrapolates the angle to it along the rate of a least-squares line through the last
    ``STEERING_FIT_SAMPLES`` samples (at most ``STEERING_LEAD_MAX_S`` ahead of the newest sample; older samples
    than ``STEERING_FIT_WINDOW_S`` are not fitted, and a lone sample is held).

    A measured wheel torque is the signed net torque on the wheel (drive minus brake, the brake acting against the
    rotation). A torque against the wheel's last measured direction of rotation is applied as a brake (which the
    model holds at standstill), one along it as a drive: forward, a negative torque brakes; reversing, it drives."""

    def __init__(self, steering_offset_rad: float = 0.0):
        self.steering_offset_rad = steering_offset_rad  # the sensor's reading with the wheels straight ahead (rad)
        self.steering_rate = 0.0  # slope of the last samples' least-squares line (rad/s; the detailed model's rack driver)
        self._recent = deque(maxlen=STEERING_FIT_SAMPLES)  # (stamp ns, angle rad) of the last steering samples, newest last
        self.torque = np.zeros(4)
        self._drive_brake = (np.zeros(4), np.zeros(4))  # the torque split by direction of rotation (apply)
        self.direction = np.ones(4)  # sign of each wheel's last measured rate above DIRECTION_MIN_RATE_RAD_S (+1: forward)
        self.torques_known = False  # a torque was measured (else the model's zero torques are a guess)
        self._changed = True

    def take(self, sample) -> None:
        if isinstance(sample, SteeringSample) and math.isfinite(sample.steering_wheel_angle_rad):
            if self._recent and sample.stamp_ns <= self._recent[-1][0]:
                return  # out of order: the newer angle stays
            self._recent.append((sample.stamp_ns, sample.steering_wheel_angle_rad - self.steering_offset_rad))
            self.steering_rate = self._fitted_rate()
            self._changed = True
        elif isinstance(sample, WheelSample):
            rate = np.asarray(sample.rate_rad_s, float)
            turning = np.abs(rate) > DIRECTION_MIN_RATE_RAD_S  # NaN compares False
            if np.any(turning & (np.sign(rate) != self.direction)):
                self.direction = np.where(turning, np.sign(rate), self.direction)
                self._changed = True
            torque = np.asarray(sample.torque_n_m, float)
            if np.any(np.isfinite(torque)):  # wheels without a torque keep their last one
                self.torque = np.where(np.isfinite(torque), torque, self.torque)
                self.torques_known = True
                self._changed = True

    def _fitted_rate(self) -> float:
        """Slope (rad/s) of the least-squares line through the steering samples within STEERING_FIT_WINDOW_S of the
        newest; 0 for a lone sample."""
        newest = self._recent[-1][0]
        pts = [((t - newest) * 1e-9, a) for t, a in self._recent if newest - t <= STEERING_FIT_WINDOW_S * 1e9]
        if len(pts) < 2:
            return 0.0
        t_mean = sum(t for t, _ in pts) / len(pts)
        a_mean = sum(a for _, a in pts) / len(pts)
        return sum((t - t_mean) * (a - a_mean) for t, a in pts) / sum((t - t_mean) ** 2 for t, _ in pts)

    def steering_at(self, t_ns: int | None) -> float:
        """Steering-wheel angle (rad) at ``t_ns``: the newest sample moved along the fitted rate, at most
        STEERING_LEAD_MAX_S ahead of it; the newest sample itself for ``t_ns`` None or before it."""
        if not self._recent:
            return 0.0
        stamp_ns, angle = self._recent[-1]
        if t_ns is None:
            return angle
        return angle + self.steering_rate * min(max(t_ns - stamp_ns, 0), STEERING_LEAD_MAX_S * 1e9) * 1e-9

    def apply(self, vehicle, t_ns: int | None = None) -> None:
        """Set the inputs on ``vehicle`` for a step centred on ``t_ns`` (ns; None: the newest samples as they are)."""
        if self._changed:
            braking = self.torque * self.direction < 0.0
            self._drive_brake = np.where(braking, 0.0, self.torque), np.where(braking, np.abs(self.torque), 0.0)
        if self._changed or (t_ns is not None and self.steering_rate != 0.0):
            vehicle.set_inputs(self.steering_at(t_ns), *self._drive_brake, steering_rate_rad_s=self.steering_rate)
            self._changed = False


def make_filter(desc, mounts, observer: str, initial_mass_kg: float = 0.0, initial_friction: float = 0.0, linear_solver=None,
                parameters_after_s: float = 10.0, dt_s: float = 0.004, road_slope: bool = False):
    """The filter of configuration ``observer`` (see OBSERVERS) on its own model of vehicle ``desc``;
    ``linear_solver``: the model's Newton solve backend (:func:`state_observer.accel.make_backend`; None: LAPACK);
    ``parameters_after_s``: when SPI starts (a start from noisy GNSS fixes settles in 10-20 s; on the demo
    drive, 10 s moved the mass 30 % the wrong way first and ended 7.6 % off after 40 s, 20 s ended 1.3 % off);
    ``road_slope``: the 14-DOF filters learn the road's slope (:class:`.errorekf.ErrorEkfSettings`)."""
    if observer == "errorekf_detailed":
        from ..vehicle.detailed import DetailedVehicle

        if initial_mass_kg:
            extra = initial_mass_kg - DetailedVehicle(desc).total_mass_kg
            if desc.chassis.mass_kg + extra <= 0.0:
                raise ConfigError(f"initial_mass_kg: {initial_mass_kg:g} kg leaves the chassis no mass (the car weighs "
                                  f"{initial_mass_kg - extra:.0f} kg, its chassis {desc.chassis.mass_kg:.0f} kg)", key="initial_mass_kg")
            desc = dataclasses.replace(desc, chassis=dataclasses.replace(desc.chassis, mass_kg=desc.chassis.mass_kg + extra))
        return DetailedErrorEKF(DetailedVehicle(desc, mu=initial_friction or None, linear_solver=linear_solver, dt_s=dt_s), mounts, detailed_settings())
    from ..vehicle.reduced import ReducedVehicle

    vehicle = ReducedVehicle(desc, mu=initial_friction or None, linear_solver=linear_solver, dt_s=dt_s)
    if initial_mass_kg:
        try:
            vehicle.set_total_mass(initial_mass_kg)
        except ValueError as exc:
            raise ConfigError(f"initial_mass_kg: {exc}", key="initial_mass_kg") from None
    if observer == "spi_reduced":
        from .spi import SpiSettings, VehicleSPI

        return VehicleSPI(vehicle, mounts, ErrorEkfSettings(road_slope=road_slope), spi=SpiSettings(start_after_s=parameters_after_s))
    return VehicleErrorEKF(vehicle, mounts, ErrorEkfSettings(road_slope=road_slope))


class _Pending(NamedTuple):
    stamp_ns: int
    order: int  # arrival order, breaks ties between equal stamps
    sample: object


class StandstillDetector:
    """Standstill told by the wheels (:meth:`update`): over the last 0.5 s (:data:`STANDSTILL_WINDOW_NS`) every reporting
    wheel's mean rate below STANDSTILL_MEAN_RAD_S and no sample above STANDSTILL_PEAK_RAD_S (encoder noise of 0.05 rad/s
    averages out; a car creeping at 2 cm/s does not pass).  Two wheels that report suffice (a data set with one speed
    on an axle); their set must stay the same through the window."""

    def __init__(self):
        self._window: deque = deque()  # (stamp_ns, rates (4,)) of the last STANDSTILL_WINDOW_NS

    def clear(self) -> None:
        """Forget the wheel samples seen."""
        self._window.clear()

    def update(self, stamp_ns: int, rates: np.ndarray) -> bool:
        """Take a wheel sample (rates (4,) rad/s, NaN: not reported); whether the car stands now."""
        window = self._window
        finite = np.isfinite(rates)
        if window and not np.array_equal(np.isfinite(window[-1][1]), finite):
            window.clear()  # another set of wheels reports
        if finite.sum() < 2 or np.any(np.abs(rates[finite]) >= STANDSTILL_PEAK_RAD_S):
            window.clear()
            return False
        window.append((stamp_ns, rates))
        while stamp_ns - window[0][0] > STANDSTILL_WINDOW_NS:
            window.popleft()
        if stamp_ns - window[0][0] < 0.8 * STANDSTILL_WINDOW_NS:
            return False
        return bool(np.all(np.abs(np.mean([r[finite] for _, r in window], axis=0)) < STANDSTILL_MEAN_RAD_S))


class OnlineObserver:
    """Sensor samples in (:meth:`feed`), estimates out (:meth:`estimate`); module docstring."""

    def __init__(self, desc, mounts, settings: OnlineSettings | None = None, *, filt=None, linear_solver=None):
        self.settings = s = settings or OnlineSettings()
        self.mounts = mounts
        self.filter = filt if filt is not None else make_filter(desc, mounts, s.observer, s.initial_mass_kg, s.initial_friction, linear_solver, s.parameters_after_s, s.dt_s,
                                                                  s.road_slope)
        self.vehicle = self.filter.vehicle
        self.dt_ns = round(self.vehicle.dt_s * _NS)
        self._window_ns = round(self.settings.reorder_window_s * _NS)
        self._initial = (self.vehicle.total_mass_kg, float(np.mean(self.vehicle.mu)))
        self._tire_k_z = np.array([c.tire.vertical_stiffness_n_per_m for c in desc.corners])  # N/m, fl fr rl rr
        self._mean_radius_m = float(np.mean([c.wheel.dynamic_radius_m for c in desc.corners]))
        self._limits = InputLimits.of(desc)
        self.counters: dict[str, Counter] = {k: StreamCounter() for k in STREAMS}
        self.screen = SampleScreen(s, mounts.imu_frame_id, self._limits, self.counters)
        self.last_received_ns: dict[str, int] = {}  # receive time of each stream's latest sample (the caller's clock)
        self.gaps = StampGaps()  # messages missing before they reached the observer
        self.events: list[str] = []  # resets and other notable events, newest last (the caller may clear it)
        self.n_resets = 0
        self.record_gnss = False  # when True, gnss_log collects a FixRecord of each fix given to the filter (smoother.py)
        self.gnss_log: list = []
        self.started_from: tuple | None = None  # (stamp ns, (x, y) m base_link, yaw rad, speed m/s) of the latest start
        self._clear()

    # ----- state --------------------------------------------------------------------------------------
    @property
    def datum(self) -> LocalENU | None:
        """The local ENU frame's origin: the configured datum, or the first good fix (None before it)."""
        return self._startup.datum

    def _clear(self) -> None:
        self.started = False
        self.t_ns: int | None = None  # model time
        self._version = getattr(self, "_version", 0) + 1  # changes with the model state: keys the output caches
        self._cache: dict = {}
        self._queue: list[_Pending] = []
        self._late: list[_Pending] = []
        self._order = 0
        self.screen.last_stamp.clear()
        self._behind = 0
        self._ahead: list[tuple[str, int]] = []  # (stream, stamp) of the samples in a row stamped more than time_jump_s ahead
        self._inputs = ModelInputs(self.settings.steering_offset_rad)
        self._standstill = StandstillDetector()
        self._startup = Startup(self.settings, self.mounts, self._mean_radius_m, self.events)  # the datum and start-up state

    def reset(self, reason: str = "requested") -> None:
        """Forget the model state, covariance, buffers and (unless configured) the datum; restart from the next
        good GNSS fixes or the configured pose."""
        self._clear()
        self.n_resets += 1
        self.events.append(f"reset: {reason}")

    def set_pose(self, x_m: float, y_m: float, yaw_rad: float) -> None:
        """Start again with base_link at ``(x_m, y_m)``, heading ``yaw_rad`` (odom frame, the current datum kept), as
        robot_localization's ``set_pose``: the model restarts at the next sample, at the forward speed it had (a car
        that had not started: the wheels' speed, at the next wheel sample)."""
        if not all(math.isfinite(v) for v in (x_m, y_m, yaw_rad)):
            raise ValueError(f"set_pose: x, y and yaw must be finite, got {x_m}, {y_m}, {yaw_rad}")
        last = self._last_good_pose() if self.started else None
        datum = self.datum
        self.reset(f"set_pose: x {x_m:.2f} m, y {y_m:.2f} m, yaw {math.degrees(yaw_rad):.1f} deg")
        self._startup.datum = datum
        self._startup.requested_pose = (float(x_m), float(y_m), float(yaw_rad), None if last is None else last[3])

    def _pending(self, sample) -> _Pending:
        pending = _Pending(int(sample.stamp_ns), self._order, sample)
        self._order += 1
        return pending

    def warm_up(self, on_step=None) -> None:
        """Run every compiled kernel of this configuration once, on a throwaway copy of the observer (this one is
        untouched): numba compiles them (or loads them from its cache) on first use, tens of seconds on a fresh
        install, which a live node must not spend on its first messages.  ``on_step(done, total)`` is called
        after each of its steps (for a progress display)."""
        settings = dataclasses.replace(self.settings, start_mode="pose", datum=(0.0, 0.0, 0.0))
        obs = OnlineObserver(self.vehicle.desc, self.mounts, settings, linear_solver=self.vehicle.solver_options.get("linear_solver"))
        t = 1_000_000_000
        rate = 10.0 / float(np.mean(getattr(obs.vehicle, "rD", 0.3)))
        imu = ImuSample(t, 0, self.mounts.imu_frame_id, np.zeros(3), np.array([0.0, 0.0, GRAVITY_M_S2]), 0.01, 0.1)
        done, total = 0, 7
        for sample in (imu, WheelSample(t + 5_000_000, 0, np.zeros(4), np.full(4, rate), np.zeros(4)), SteeringSample(t + 5_000_000, 0, 0.0),
                       GnssFix(t + 6_000_000, 0, "", 0.0, 0.0, 0.0, 0, np.eye(3) * 4.0),
                       GnssVelocity(t + 6_000_000, 0, "", np.array([10.0, 0.0, 0.0]), np.eye(3) * 0.01), imu._replace(stamp_ns=t + 12_000_000)):
            obs.feed(sample)
            done += 1
            if on_step is not None:
                on_step(done, total)
        obs.estimate()
        if hasattr(obs.filter, "update_parameters"):  # SPI starts late in a drive: compile it now too
            obs.filter.update_parameters()
        if on_step is not None:
            on_step(total, total)

    def pending(self) -> Counter:
        """Samples per stream waiting for the model to reach them (or for the next step)."""
        return Counter(STREAM_OF[type(p.sample)] for p in self._queue + self._late)

    # ----- input --------------------------------------------------------------------------------------
    def feed(self, sample) -> list[int]:
        """Take one sensor sample; returns the end stamps (ns) of the model steps it completed (maybe none)."""
        kind = STREAM_OF.get(type(sample))
        if kind is None:
            raise TypeError(f"not a sensor sample: {type(sample).__name__}")
        count = self.counters[kind]
        count["received"] += 1
        self.last_received_ns[kind] = int(sample.receive_ns)
        stamp = int(sample.stamp_ns)
        self.gaps.see(kind, stamp)
        if stamp > 0 and self.started and stamp < self.t_ns - self.settings.time_jump_s * _NS:
            self._behind += 1
            if self._behind < _JUMP_CONFIRM:
                count["dropped: late"] += 1
                return []
            self.reset(f"time jumped back by {(self.t_ns - stamp) * 1e-9:.3f} s ({kind} stamp)")
        elif stamp > 0 and self.started and stamp > self.t_ns + self.settings.time_jump_s * _NS:
            # never integrate up to a far stamp (an hour of model steps in one call): one bad stamp is dropped;
            # the clock stepped (or all sensors were silent) when samples in a row, on one new clock (each
            # within time_jump_s of the last), confirm it from two streams, or from one stream alone long
            # enough that no other stream is live
            if self._ahead and abs(stamp - self._ahead[-1][1]) > self.settings.time_jump_s * _NS:
                self._ahead.clear()
            self._ahead.append((kind, stamp))
            streams = {k for k, _ in self._ahead}
            if len(self._ahead) < _JUMP_CONFIRM or (len(streams) < 2 and len(self._ahead) < 10 * _JUMP_CONFIRM):
                count["dropped: stamped too far ahead of the model"] += 1
                return []
            self.reset(f"time jumped ahead by {(stamp - self.t_ns) * 1e-9:.3f} s ({kind} stamp), or the sensors were silent")
        if stamp > 0:
            self._behind = 0
            self._ahead.clear()
        sample = self.screen.take(kind, sample)  # stamp, duplicate, values, frame, covariances
        if sample is None:
            return []
        if not self.started:
            self._before_start(kind, sample)
            if not self.started:
                return []
            return self._advance(stamp - self._window_ns)
        pending = self._pending(sample)
        if stamp <= self.t_ns:
            if self.t_ns - stamp > self.settings.max_delay_s * _NS:
                count["dropped: late"] += 1
                return []
            self._late.append(pending)
            return []
        heapq.heappush(self._queue, pending)
        return self._advance(stamp - self._window_ns)

    def flush(self) -> list[int]:
        """At the end of the data: step through the samples still held by ``reorder_window_s``; the steps' end stamps."""
        if not (self.started and self._queue):
            return []
        return self._advance(max(p.stamp_ns for p in self._queue))

    # ----- start ----------------------------------------------------------------------------------------
    def _before_start(self, kind: str, sample) -> None:
        self._inputs.take(sample)
        start = self._startup.take(kind, sample, self.counters[kind])
        if start is None:
            return
        self._start(start)
        if not start.from_gnss and kind != "steering":  # a pose start: the sample is applied at the first step
            self._late.append(self._pending(sample))

    def _last_good_pose(self) -> tuple | None:
        """(x m, y m, yaw rad, forward speed m/s) of the current estimate, if it is finite (a failed step leaves
        the model at its last good state)."""
        try:
            o = make_odometry(self.filter, self.t_ns)
        except Exception:  # noqa: BLE001 - a broken state has no pose to resume from
            return None
        pose = (float(o.position_m[0]), float(o.position_m[1]), yaw_rad(o.orientation_wxyz), float(o.velocity_body_m_s[0]))
        return pose if all(math.isfinite(v) for v in pose) else None

    def _start(self, start: Start) -> None:
        """Start the filter at ``start`` (:mod:`.startup`)."""
        stamp_ns, xy, yaw, speed = start.stamp_ns, start.xy, start.yaw, start.speed
        mass, mu = self._initial  # a restart forgets what was learnt (a looped bag gives the same numbers again)
        if abs(self.vehicle.total_mass_kg - mass) > 1e-9:
            self.vehicle.set_total_mass(mass)
        self.vehicle.mu = mu
        self._inputs.apply(self.vehicle, stamp_ns)  # the measured inputs, not what a failed run left on the model
        self.filter.start(speed, yaw, (float(xy[0]), float(xy[1])), t=stamp_ns * 1e-9)
        self.started_from = (int(stamp_ns), (float(xy[0]), float(xy[1])), float(yaw), float(speed))
        self.t_ns = int(stamp_ns)
        self._version += 1
        self.started = True
        self.events.append(f"started at {stamp_ns * 1e-9:.3f} s: x {xy[0]:.2f} m, y {xy[1]:.2f} m, yaw {math.degrees(yaw):.1f} deg, {speed:.2f} m/s")

    # ----- stepping -------------------------------------------------------------------------------------
    def _advance(self, target_ns: int) -> list[int]:
        done = []
        while self.t_ns < target_ns:
            if not self._step():
                break
            done.append(self.t_ns)
        return done

    def _step(self) -> bool:
        end = self.t_ns + self.dt_ns
        self._inputs.apply(self.vehicle, self.t_ns + self.dt_ns // 2)
        if not self.filter.predict():
            resume = self._last_good_pose()
            self.reset(f"model step failed at {end * 1e-9:.3f} s")
            self._startup.resume_pose = resume
            return False
        # the model time is the solver's (float seconds); stamps stay integer
        batch = self._late
        self._late = []
        while self._queue and self._queue[0].stamp_ns <= end:
            batch.append(heapq.heappop(self._queue))
        batch.sort()
        for pending in batch:
            self._inputs.take(pending.sample)
            self._update(pending.sample, (end - pending.stamp_ns) * 1e-9)
        if hasattr(self.filter, "torques_known"):
            self.filter.torques_known = self._inputs.torques_known
        self.filter.correct()
        self.t_ns = end
        self._version += 1
        return True

    def _update(self, sample, age_s: float) -> None:
        f, s = self.filter, self.settings
        kind = STREAM_OF[type(sample)]
        if kind not in s.sensors or kind == "steering":
            if kind != "steering":
                self.counters[kind]["not used (disabled)"] += 1
            return
        count = self.counters[kind]
        if kind == "imu":
            gyro = np.asarray(sample.angular_velocity_rad_s, float)
            accel = np.asarray(sample.linear_acceleration_m_s2, float)
            gyro_ok, accel_ok = bool(np.any(np.isfinite(gyro))), bool(np.any(np.isfinite(accel)))  # the filter skips missing axes
            enabled = f.settings.enabled_sensors  # the detailed model's filter leaves the accelerometer out by design
            use_gyro, use_accel = gyro_ok and "gyroscope" in enabled, accel_ok and "accelerometer" in enabled
            if use_gyro and use_accel:
                ok = f.update_imu(gyro, accel, sample.angular_velocity_sigma, sample.linear_acceleration_sigma)
            elif use_gyro:
                ok = (f.update_gyroscope(gyro, sample.angular_velocity_sigma),)
            elif use_accel:
                ok = (f.update_accelerometer(accel, sample.linear_acceleration_sigma),)
            else:
                count["not used (disabled)"] += 1
                return
            count["applied" if all(ok) else "rejected by the gate"] += 1
        elif kind == "gnss_fix":
            if self.datum is None:
                count["dropped: no datum yet"] += 1
                return
            enu = self.datum.to_enu(sample.latitude_deg, sample.longitude_deg, sample.altitude_m)
            before = self._corrected_position() if self.record_gnss else None
            accepted = f.update_gnss_fix(enu, sample.position_covariance_enu_m2, age_s=age_s)
            count["applied" if accepted else "rejected by the gate"] += 1
            if self.record_gnss:
                jump = self._corrected_position() - before  # the update's and a re-acquisition's, in the track from the next step
                C = sample.position_covariance_enu_m2
                self.gnss_log.append(FixRecord(int(sample.stamp_ns), float(enu[0]), float(enu[1]), bool(accepted), int(self.t_ns),
                                               (float(C[0, 0]), float(C[0, 1]), float(C[1, 1])), (float(jump[0]), float(jump[1]))))
        elif kind == "gnss_velocity":
            # moved forward to the model time along the model's acceleration (base_link origin's)
            v = np.asarray(sample.velocity_enu_m_s, float) + age_s * self.vehicle.solver.qdd[:3]
            accepted = f.update_gnss_velocity(v, sample.covariance_m2_s2)
            count["applied" if accepted else "rejected by the gate"] += 1
        elif kind == "wheels" and np.any(np.isfinite(sample.rate_rad_s)):
            rates = np.asarray(sample.rate_rad_s, float)
            accepted = f.update_wheel_rates(rates, s.wheel_rate_sigma_rad_s)
            count["applied" if accepted else "rejected by the gate"] += 1
            if s.standstill_updates and hasattr(f, "update_standstill") and self._standstill.update(sample.stamp_ns, rates):
                count["zero-velocity update" if f.update_standstill() else "zero-velocity update rejected"] += 1

    def _corrected_position(self) -> np.ndarray:
        """base_link's horizontal position (ENU, m) as the next model step will have it: the model's plus the
        corrections the updates since the last step have estimated."""
        return make_odometry(self.filter, self.t_ns).position_m[:2] + self.filter.pending_position_correction_m()

    # ----- output ---------------------------------------------------------------------------------------
    def _cached(self, key: str, make):
        """``make()``, computed once per model state."""
        hit = self._cache.get(key)
        if hit is not None and hit[0] == self._version:
            return hit[1]
        value = make()
        self._cache[key] = (self._version, value)
        return value

    def odometry(self) -> Odometry | None:
        """Pose, twist and their covariances at the current model time (cheap: for every IMU message)."""
        return self._cached("odometry", lambda: make_odometry(self.filter, self.t_ns)) if self.started else None

    def estimate(self) -> ObserverEstimate | None:
        """The full estimate at the current model time (None before the start)."""
        return self._cached("estimate", self._estimate) if self.started else None

    def _estimate(self) -> ObserverEstimate:
        return make_estimate(self.filter, self.odometry(), self.settings.observer, self._tire_k_z)


class OpenLoop:
    """The observer's model run open loop, without corrections: the baseline "what the model alone would say"
    of ``state-observer process``.

    A second model of the same class with the same vehicle description, kinematic fit, step, initial mass and
    friction as the observer's (the filter's model before any correction), started at the observer's first start
    (same stamp, pose and speed) and driven by the same steering angle and wheel torques (:class:`ModelInputs`,
    applied as in :meth:`OnlineObserver._step`: inputs of the samples stamped up to a step's end from the next
    step on, the steering angle extrapolated to the step's middle).  It keeps pace with the observer's model time
    after each :meth:`feed`.  Cost: one model step per observer step (no covariance, no updates);
    ``on_state(t_ns, VehicleState)`` is called every ``every_ns`` of model time on the grid the pipeline's outputs use.
    A failed model step stops it (:attr:`failed` says where).
    """

    def __init__(self, observer: OnlineObserver, on_state, every_ns: int):
        from ..vehicle.reduced import ReducedVehicle

        v = observer.vehicle
        mass, mu = observer._initial
        if isinstance(v, ReducedVehicle):  # shares the observer's kinematic fit and static solution (read only)
            self.vehicle = ReducedVehicle(v.desc, kinematics=v.kin, detailed=v.detailed, dt_s=v.dt_s)
            self.vehicle.set_total_mass(mass)
        else:
            self.vehicle = type(v)(v.desc, dt_s=v.dt_s)  # the detailed model: its description carries the mass
        self.vehicle.mu = mu
        self.observer, self.on_state, self.every_ns = observer, on_state, int(every_ns)
        self.dt_ns = observer.dt_ns
        self.t_ns: int | None = None
        self.failed: str | None = None
        self.wall_s = 0.0  # time spent in feed (s)
        self._inputs = ModelInputs(observer.settings.steering_offset_rad)
        self._queue: list[tuple[int, int, object]] = []
        self._order = 0
        self._due_ns: int | None = None

    def feed(self, sample) -> None:
        """Take the sample the observer has just been fed (its inputs only) and step up to the observer's time."""
        if self.failed is None:
            start = time.perf_counter()
            self._feed(sample)
            self.wall_s += time.perf_counter() - start

    def _feed(self, sample) -> None:
        obs = self.observer
        if self.t_ns is None:
            self._inputs.take(sample)  # before the start every sample's inputs count, as in _before_start
            if not obs.started:
                return
            stamp_ns, xy, yaw, speed = obs.started_from
            self.vehicle.start(speed_m_s=speed, yaw_rad=yaw, position_m=xy, t=stamp_ns * 1e-9)
            self.t_ns = stamp_ns
        elif isinstance(sample, (SteeringSample, WheelSample)):
            heapq.heappush(self._queue, (int(sample.stamp_ns), self._order, sample))
            self._order += 1
        while obs.t_ns is not None and self.t_ns < obs.t_ns:
            end = self.t_ns + self.dt_ns
            self._inputs.apply(self.vehicle, self.t_ns + self.dt_ns // 2)
            if not self.vehicle.step().success:
                self.failed = f"open-loop model step failed at {end * 1e-9:.3f} s"
                return
            while self._queue and self._queue[0][0] <= end:
                self._inputs.take(heapq.heappop(self._queue)[2])
            self.t_ns = end
            if self._due_ns is None or end >= self._due_ns:  # the grid of ObserverPipeline._due
                p = self.every_ns
                self._due_ns = end + p if self._due_ns is None else max(self._due_ns + p, end - end % p + p)
                self.on_state(end, self.vehicle.truth())

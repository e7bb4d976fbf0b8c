"""The accuracy harness of ``state-observer evaluate``: the observer against a car it was not built from.

For every manoeuvre and seed (Rodriguez 2020 §5.1's three simulations, on a truth the observer does not have):

* truth: the detailed multibody car of the vehicle file changed by a :class:`.mismatch.Mismatch` (Magic-Formula
  tires, perturbed parameters, IMU biases, scale factors and mounting error, noisier GNSS with an outage),
  driven by the manoeuvre's driver; its sensors synthesised.
* the product: :class:`state_observer.estimation.online.OnlineObserver` (the node's and ``process``'s code
  path) on the vehicle file, fed the samples in arrival order, started at the manoeuvre's start pose; once with
  every sensor and once without GNSS (IMU, wheels and steering only).
* baselines on the same samples: the observer's own model run open loop with the same parameters and inputs
  (:class:`state_observer.estimation.online.OpenLoop`), a kinematic EKF set up as robot_localization users do
  (:class:`.baselines.KinematicEKF`), the linear single-track model run open loop
  (:class:`.baselines.LinearSingleTrack`, the GNSS-free reference), zero sideslip, and the raw GNSS fixes; beside
  them the fixes averaged with the motion known exactly (:func:`gnss_averaged_run`), the position no causal filter
  can better, and the same with every fix of the run at each instant, the bound of the offline
  smoothed track (:mod:`state_observer.estimation.smoother`) that ``process`` adds.

Estimates are taken every ``RECORD_PERIOD_S`` of model time and compared with the truth at the same instant
after ``SKIP_S`` (metrics of :func:`.evaluate.error_metrics`, plus the share of sideslip and tire-force errors
inside the published 2-sigma and the observer's mean NIS per sensor).  :func:`summarise` gives the median
over seeds; :func:`targets` checks the goals of issues 14 and 15.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import pickle
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..estimation.smoother import smooth_since_start
from ..sensors.samples import GnssFix, ImuSample, WheelSample
from . import mismatch as mm
from .evaluate import error_metrics, sideslip
from .manoeuvres import Manoeuvre, Path as RoadPath, sine_with_dwell, speed_profile, step_steer

SKIP_S = 10.0  # metrics after the observer's first 10 s (the external evaluation's window)
STAMP_OFFSET_S = 1.0  # truth and samples start here, not at 0 (a zero stamp is "no stamp" to the observer)
RECORD_PERIOD_S = 0.02
HARNESS_VERSION = 3  # part of the truth cache key: bump when the truth, its sensors or its records change


LEAD_IN_S = 10.0  # straight driving before a circle (a car enters a circle from a road; the first seconds tell a heading)


def _circle(name: str, radius_m: float, speed: Callable[[float], float], v0: float, duration_s: float, friction=None, description: str = "") -> Manoeuvre:
    """A circle of ``radius_m`` (left) entered after LEAD_IN_S of straight road, laps enough for the duration."""
    laps = int(np.ceil(v0 * duration_s / (2.0 * math.pi * radius_m))) + 1
    path = RoadPath.straight_then_circle(radius_m, v0 * LEAD_IN_S, laps)
    return Manoeuvre(name, duration_s, v0, speed=speed, path=path, friction=friction,
                     description=f"{LEAD_IN_S:g} s straight, then {description}")


def _lane_change() -> Manoeuvre:
    return Manoeuvre("double_lane_change", 25.0, 16.7, speed=lambda t: 16.7, path=RoadPath.lane_change(lead_m=200.0),
                     description="12 s straight at 16.7 m/s, double lane change (3.5 m), 8 s straight")


LAP_LATERAL, LAP_ACCEL, LAP_BRAKE = 6.5, 2.5, 6.0  # m/s^2


def _race_lap() -> Manoeuvre:
    """The race car on a closed circuit (400 m and 150 m straights, 90 deg corners of 50 and 100 m), as fast as LAP_LATERAL
    across the car allows, accelerating at LAP_ACCEL and braking at LAP_BRAKE: 16-41 m/s, like the issue's real race-car
    recording (16-61 m/s)."""
    segments = []
    for straight_m, radius_m in ((400.0, 50.0), (150.0, 100.0), (400.0, 50.0), (150.0, 100.0)):
        segments += [(straight_m, 0.0), (0.5 * math.pi * radius_m, 1.0 / radius_m)]
    path = RoadPath.from_segments(segments, closed=True)
    return Manoeuvre("race_lap", 60.0, 30.0, speed=speed_profile(path, LAP_LATERAL, LAP_ACCEL, LAP_BRAKE, 30.0, laps=2), path=path,
                     description="the race car on a 1.6 km circuit (straights of 400 and 150 m, 90 deg corners of 50 and 100 m): "
                                 f"{LAP_LATERAL:g} m/s^2 in the corners, accelerating at {LAP_ACCEL:g} and braking at {LAP_BRAKE:g} m/s^2")


def _speed_changes() -> Manoeuvre:
    """Straight road: 10 s at 15 m/s, then accelerating and braking between 10 and 25 m/s (2-3 m/s^2)."""
    knots = np.array([[0.0, 15.0], [10.0, 15.0], [15.0, 25.0], [20.0, 25.0], [25.0, 10.0], [30.0, 10.0], [35.0, 20.0], [40.0, 20.0]])
    return Manoeuvre("speed_changes", 40.0, 15.0, speed=lambda t: float(np.interp(t, knots[:, 0], knots[:, 1])), path=RoadPath.straight(1200.0),
                     description="straight road, 10 s at 15 m/s, then accelerating to 25, braking to 10 and accelerating to 20 m/s (2-3 m/s^2)")


MANOEUVRES: dict[str, Callable[[], Manoeuvre]] = {
    "steady_circle": lambda: _circle("steady_circle", 50.0, lambda t: 15.0, 15.0, 40.0, description="a circle of 50 m at 15 m/s (4.5 m/s^2)"),
    "step_steer": lambda: dataclasses.replace(step_steer(speed_m_s=22.2, steering_wheel_rad=math.radians(45.0), t_step_s=12.0, duration_s=25.0),
                                              description="12 s straight at 22.2 m/s, step to 45 deg of steering wheel"),
    "sine_with_dwell": lambda: dataclasses.replace(sine_with_dwell(speed_m_s=22.2, amplitude_rad=math.radians(90.0), t_start_s=12.0, duration_s=22.0),
                                                   description="12 s straight at 22.2 m/s, 90 deg sine with dwell, coasting"),
    "double_lane_change": _lane_change,
    "brake_in_turn": lambda: _circle("brake_in_turn", 50.0, lambda t: 15.0 if t < 30.0 else max(5.0, 15.0 - 3.0 * (t - 30.0)), 15.0, 40.0,
                                     description="a circle of 50 m at 15 m/s, braking at 3 m/s^2 to 5 m/s from 30 s"),
    "friction_step": lambda: _circle("friction_step", 50.0, lambda t: 17.0, 17.0, 50.0, friction=lambda t: 0.8 if t < FRICTION_STEP_S else 0.6,
                                     description=f"a circle of 50 m at 17 m/s (5.8 m/s^2), friction 0.8 -> 0.6 at {FRICTION_STEP_S:g} s"),
    "speed_changes": _speed_changes,
    "reversing": lambda: Manoeuvre("reversing", 30.0, -4.0, speed=lambda t: -4.0, steering=lambda t: math.radians(60.0) * math.sin(0.2 * math.pi * t),
                                   description="reversing at 4 m/s, weaving (60 deg of steering wheel at 0.1 Hz)"),
    "low_speed": lambda: Manoeuvre("low_speed", 30.0, 2.5, speed=lambda t: 2.5, steering=lambda t: math.radians(180.0) * math.sin(0.2 * math.pi * t),
                                   description="a car park: 2.5 m/s, weaving (180 deg of steering wheel at 0.1 Hz)"),
    # the vehicle of RACE_CAR (wings: Cz A 3.2 m^2, 42 % front), 10 s at 25 m/s, then a 200 m circle accelerating to 40 m/s
    # (8 m/s^2, with 3 kN of downforce, a third of the weight, pressing the tires)
    "race_circle": lambda: _circle("race_circle", 200.0, lambda t: min(25.0 + 0.6 * max(t - LEAD_IN_S, 0.0), 40.0), 25.0, 45.0,
                                   description="a circle of 200 m accelerating from 25 to 40 m/s at 0.6 m/s^2 (8 m/s^2 lateral), "
                                               "the race car with wings"),
    "race_lap": _race_lap,
    # the truth on a plane rising 3 % towards the east (truth_road): in the circle the car meets +-3 % of grade and of crossfall
    # (1.7 deg), which the observer's flat road does not have; the accelerometer reads g sin of it (0.3 m/s^2)
    "tilted_circle": lambda: _circle("tilted_circle", 50.0, lambda t: 15.0, 15.0, 40.0,
                                     description="a circle of 50 m at 15 m/s on a plane rising 3 % towards the east (+-3 % of grade and "
                                                 "of crossfall in the circle; the observer's road is flat)"),
    # the truth over hills (truth_road: HILL_AMPLITUDE_M every HILL_WAVELENGTH_M, 6.3 % at the steepest) while it speeds up
    # and brakes as in speed_changes: wheel torques that climb and descend, an accelerometer that reads g sin of the grade
    "hill_drive": lambda: dataclasses.replace(_speed_changes(), name="hill_drive",
                                              description="the speed changes over hills of 6 m from dip to crest every 300 m (grades up to 6.3 %; "
                                                          "the observer's road is flat)"),
    "standstill": lambda: Manoeuvre("standstill", 140.0, 15.0, speed=lambda t: 15.0 if t < 10.0 else max(0.0, 15.0 - 3.0 * (t - 10.0)),
                                    path=RoadPath.straight(400.0), description="10 s at 15 m/s, braking at 3 m/s^2 to a stop, 125 s standing"),
}
RACE_CAR = "config/vehicles/race_car.yaml"  # `vehicle new` from a 982 kg race car's numbers, with downforce
VEHICLE_FILES = {"race_circle": RACE_CAR, "race_lap": RACE_CAR}  # the rest: the default car
TILTED_GRADE = 0.03  # the tilted_circle's plane: dz/dx
HILL_AMPLITUDE_M, HILL_WAVELENGTH_M = 3.0, 300.0  # the hill_drive's road: z = A (1 - cos(2 pi x / L))


def truth_road(manoeuvre: str):
    """The road the truth of a manoeuvre drives (the observer's model always drives a flat one)."""
    from ..vehicle.road import FlatRoad, RollingRoad

    if manoeuvre == "hill_drive":
        return RollingRoad(HILL_AMPLITUDE_M, HILL_WAVELENGTH_M)
    return FlatRoad(grade_x=TILTED_GRADE) if manoeuvre == "tilted_circle" else FlatRoad()


def vehicle_path(manoeuvre: str, vehicle_file: str | Path | None = None) -> Path:
    """The vehicle file a manoeuvre's truth and observer start from: ``vehicle_file`` when given (a user's car), else
    the harness's own (:data:`VEHICLE_FILES`, the default car for the rest)."""
    from ..paths import default_vehicle_path, find_data_file

    if vehicle_file is not None:
        return Path(vehicle_file)
    return find_data_file(VEHICLE_FILES[manoeuvre]) if manoeuvre in VEHICLE_FILES else default_vehicle_path()


# Where the data can teach the parameters nothing, they must hold (issue 15): (from, to) in s after the start (None: the end)
HOLD_S = {"standstill": (20.0, None), "reversing": (SKIP_S, None), "low_speed": (SKIP_S, None)}
FRICTION_STEP_S = 30.0
SEEDS = (0, 1, 2)


@dataclass
class Run:
    """Arrays of one configuration on one scenario, aligned with the truth (``t`` s; see :func:`error_metrics`)."""

    t: np.ndarray
    values: dict
    extra: dict = dataclasses.field(default_factory=dict)  # sigmas, NIS, notes


# ----- truth -------------------------------------------------------------------------------------------
def simulate(manoeuvre: str, seed: int, cache_dir: Path | None = None, mismatch: mm.Mismatch | None = None, vehicle_file: str | Path | None = None,
             sensors_file: str | Path | None = None):
    """(nominal description, nominal sensor config, mismatch, truth records, samples sorted by receive time) of one
    scenario with the mismatch of ``seed`` (:func:`.mismatch.draw`) or the one given, on ``vehicle_file`` or the
    manoeuvre's own car (:func:`vehicle_path`), with the sensor suite of ``sensors_file`` (default: the package's,
    ``config/sensors/default.yaml``; the mismatch's biases, scale factors, GNSS noise and outage go on top of it);
    cached under ``cache_dir`` when given (keyed by the inputs, the two files' texts and :data:`HARNESS_VERSION`)."""
    from ..paths import default_sensors_path
    from ..sensors.mounts import mounts_from_vehicle
    from ..vehicle.description import load_vehicle
    from ..vehicle.detailed import DetailedVehicle
    from .run import run
    from .sensors import SensorSynthesizer, load_sensor_config

    vehicle_file = vehicle_path(manoeuvre, vehicle_file)
    desc = load_vehicle(vehicle_file)
    sensors_file = Path(sensors_file) if sensors_file is not None else Path(default_sensors_path())
    config = load_sensor_config(sensors_file)
    m = MANOEUVRES[manoeuvre]()
    mismatch = mismatch if mismatch is not None else mm.draw(seed, m.duration_s)
    key = None
    if cache_dir is not None:
        text = Path(vehicle_file).read_text() + sensors_file.read_text() + repr((manoeuvre, m.description, m.duration_s, mismatch, HARNESS_VERSION))
        key = Path(cache_dir) / f"{manoeuvre}_{seed}_{hashlib.sha256(text.encode()).hexdigest()[:16]}.pkl"
        if key.exists():
            try:
                truths, samples = pickle.loads(key.read_bytes())
                return desc, config, mismatch, truths, samples
            except (pickle.UnpicklingError, EOFError, ImportError, AttributeError, TypeError, ValueError):
                pass  # written by another version of the package (its records moved or changed): simulate again
    truth_desc = mm.truth_description(desc, mismatch)
    synth = SensorSynthesizer(mm.truth_sensors(config, mismatch), mounts_from_vehicle(truth_desc), seed=seed)
    truths, samples = [], []
    for x in run(DetailedVehicle(truth_desc, road=truth_road(manoeuvre)), m):
        x = x._replace(t_s=x.t_s + STAMP_OFFSET_S)
        truths.append(x)
        samples.extend(synth.feed(x))
    samples.sort(key=lambda s: (s.receive_ns, s.stamp_ns))
    if key is not None:
        key.parent.mkdir(parents=True, exist_ok=True)
        tmp = key.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps((truths, samples)))
        tmp.replace(key)
    return desc, config, mismatch, truths, samples


def speed_only(samples: list, desc) -> list:
    """The samples a data set like the issue's real race-car recording holds (issue 14: IMU yaw rate and horizontal
    accelerations, one speed, the steering; no GNSS, no torques): the IMU's roll and pitch rates and vertical acceleration
    marked missing (NaN, per-axis sigmas), the wheels' torques unknown and their rates replaced by one speed, the undriven
    wheels' mean rate, on the undriven wheels only (a driven wheel's rate is not the speed; every wheel where all are
    driven).  GNSS is left to :func:`run_observer` (``gnss=False``)."""
    driven = np.array([c.max_drive_torque_n_m > 0.0 for c in desc.corners])
    free = ~driven if (~driven).any() else np.ones(4, dtype=bool)
    gyro_axes, accel_axes = np.array([np.nan, np.nan, 1.0]), np.array([1.0, 1.0, np.nan])
    out = []
    for sample in samples:
        if isinstance(sample, ImuSample):
            sample = sample._replace(angular_velocity_rad_s=np.asarray(sample.angular_velocity_rad_s, float) * gyro_axes,
                                     linear_acceleration_m_s2=np.asarray(sample.linear_acceleration_m_s2, float) * accel_axes,
                                     angular_velocity_sigma=np.nanmax(sample.angular_velocity_sigma) * gyro_axes,
                                     linear_acceleration_sigma=np.nanmax(sample.linear_acceleration_sigma) * accel_axes)
        elif isinstance(sample, WheelSample):
            speed = float(np.nanmean(np.asarray(sample.rate_rad_s, float)[free]))
            sample = sample._replace(angle_rad=np.full(4, np.nan), rate_rad_s=np.where(free, speed, np.nan), torque_n_m=np.full(4, np.nan))
        out.append(sample)
    return out


def truth_run(truths: list) -> Run:
    """The truth as a :class:`Run` (every model step)."""
    from ..conventions import quaternion_to_matrix

    rows = []
    for x in truths:
        R = quaternion_to_matrix(x.orientation_wxyz)
        rows.append((x.t_s, x.position_enu_m[:2], math.atan2(R[1, 0], R[0, 0]), sideslip(np.asarray(x.velocity_enu_m_s), R), x.angular_velocity_body_rad_s[2],
                     x.tire_force_n, x.mass_kg, x.friction_coefficient))
    return _columns(rows)


def _columns(rows) -> Run:
    t, pos, yaw, beta, rate, force, mass, mu = (np.array(c) for c in zip(*rows))
    return Run(t, dict(position=pos, yaw=yaw, sideslip=beta, yaw_rate=rate, tire_force=force, mass=mass, friction=mu))


# ----- the product and its baselines -------------------------------------------------------------------
def run_observer(desc, config, manoeuvre: Manoeuvre, samples: list, observer: str = "spi_reduced", gnss: bool = True, open_loop: bool = False):
    """The online observer on the samples (module docstring); returns its :class:`Run` and, with ``open_loop``,
    the open-loop model's (same parameters, start and inputs)."""
    from ..estimation.online import OnlineObserver, OnlineSettings, OpenLoop
    from .run import path_start
    from ..sensors.mounts import mounts_from_vehicle

    speed, yaw, xy = path_start(manoeuvre)
    d = config.gnss_fix.datum
    sensors = ("imu", "gnss_fix", "gnss_velocity", "wheels") if gnss else ("imu", "wheels")
    settings = OnlineSettings(observer=observer, start_mode="pose", start_pose=(xy[0], xy[1], yaw, speed), datum=(d.latitude_deg, d.longitude_deg, d.altitude_m),
                              sensors=sensors)
    obs = OnlineObserver(desc, mounts_from_vehicle(desc), settings)
    obs.record_gnss = True  # for the offline smoother, as process does
    period_ns = round(RECORD_PERIOD_S * 1e9)
    rows, sigmas, bounds, position_sigmas = [], [], [], []
    baseline_rows: list = []
    follower = OpenLoop(obs, lambda t_ns, x: baseline_rows.append(_state_row(t_ns * 1e-9, x)), period_ns) if open_loop else None
    next_ns = None
    for sample in samples:
        steps = obs.feed(sample)
        if follower is not None:
            follower.feed(sample)
        if not steps or not obs.started:
            continue
        if next_ns is None or obs.t_ns >= next_ns:
            next_ns = obs.t_ns - obs.t_ns % period_ns + period_ns
            e = obs.estimate()
            x = e.state
            rows.append(_state_row(obs.t_ns * 1e-9, x))
            position_sigmas.append(np.sqrt(np.diag(e.pose_covariance)[:2]))
            vb = quaternion_rotate_inverse(x.orientation_wxyz, x.velocity_enu_m_s)
            speed_xy = max(math.hypot(vb[0], vb[1]), 0.5)
            sigmas.append((math.sqrt(max(e.twist_covariance[1, 1], 0.0)) / speed_xy, e.tire_force_sigma_n))
            if e.parameters and "friction" in e.parameters:
                bounds.append(e.parameters["friction"]["lower_bound"])
    run = _columns(rows)
    final = obs.estimate() if obs.started else None
    report = final.parameters if final is not None else None
    run.extra = dict(sideslip_sigma=np.array([s[0] for s in sigmas]), tire_force_sigma=np.array([s[1] for s in sigmas]),
                     friction_lower_bound=np.array(bounds) if len(bounds) == len(rows) else None,
                     nis={name: st.nis_mean for name, st in obs.filter.stats.items() if st.accepted},
                     resets=obs.n_resets, counters={k: dict(v) for k, v in obs.counters.items()},
                     mass_observed=None if report is None else float(report["mass"]["status"] != 0),
                     cornering=None if report is None or "cornering_front" not in report else
                     tuple((report[a]["value"], report[a]["status"], report[a]["sigma"]) for a in ("cornering_front", "cornering_rear")),
                     road_slope=tuple(obs.filter.road_slope) if getattr(obs.filter, "slope_col", -1) >= 0 else None)
    if gnss and rows:  # what process adds offline (the same call): every fix, those after each instant too
        run.extra["smoothed_position"] = smooth_since_start(run.t, run.values["position"], run.values["yaw"], np.array(position_sigmas), obs.gnss_log,
                                                            obs.mounts.gnss_position_m, None if obs.started_from is None else obs.started_from[0])[:, :2]
    return run, (_columns(baseline_rows) if follower is not None and baseline_rows else None)


def quaternion_rotate_inverse(q_wxyz, v) -> np.ndarray:
    """R(q)^T v (ENU vector into the body axes)."""
    from ..conventions import quaternion_to_matrix

    return quaternion_to_matrix(q_wxyz).T @ np.asarray(v, dtype=float)


def _state_row(t_s: float, x):
    from ..conventions import quaternion_to_matrix

    R = quaternion_to_matrix(x.orientation_wxyz)
    return (t_s, np.asarray(x.position_enu_m)[:2], math.atan2(R[1, 0], R[0, 0]), sideslip(np.asarray(x.velocity_enu_m_s), R),
            float(x.angular_velocity_body_rad_s[2]), np.asarray(x.tire_force_n), x.mass_kg, x.friction_coefficient)


def run_baseline(kind: str, desc, config, manoeuvre: Manoeuvre, t0_s: float, samples: list) -> Run:
    """A baseline estimator (kinematic_ekf, single_track) fed the same samples, recorded every RECORD_PERIOD_S."""
    from .baselines import KinematicEKF, LinearSingleTrack
    from .run import path_start
    from ..sensors.mounts import mounts_from_vehicle

    speed, yaw, xy = path_start(manoeuvre)
    t0_ns = round(t0_s * 1e9)
    if kind == "kinematic_ekf":
        est = KinematicEKF(config.gnss_fix.datum.local_enu(), mounts_from_vehicle(desc), np.array([c.wheel.dynamic_radius_m for c in desc.corners]),
                           start=(xy[0], xy[1], yaw, speed), t0_ns=t0_ns)
    elif kind == "single_track":
        est = LinearSingleTrack.from_description(desc)
    else:
        raise ValueError(f"unknown baseline '{kind}'")
    period_ns = round(RECORD_PERIOD_S * 1e9)
    rows = []
    next_ns = t0_ns + period_ns
    nan2 = np.full(2, np.nan)
    for sample in sorted(samples, key=lambda s: s.stamp_ns):
        if sample.stamp_ns < t0_ns:
            continue
        est.feed(sample)
        s = est.state()
        if s.stamp_ns >= next_ns:
            next_ns = s.stamp_ns - s.stamp_ns % period_ns + period_ns
            pos = np.asarray(s.position_m, dtype=float) if s.position_m is not None else nan2
            rows.append((s.stamp_ns * 1e-9, pos, s.yaw_rad, s.sideslip_rad, s.yaw_rate_rad_s))
    t, pos, yaw, beta, rate = (np.array(c) for c in zip(*rows))
    return Run(t, dict(position=pos, yaw=yaw, sideslip=beta, yaw_rate=rate))


def gnss_run(desc, config, samples: list) -> Run:
    """The raw GNSS fixes as an estimate of base_link's position (antenna moved by the true heading is not
    available to a user: the antenna position itself, as a user plotting fixes sees it); ``extra["variance"]`` each
    fix's published east variance (m^2)."""
    enu = config.gnss_fix.datum.local_enu()
    rows = [(s.stamp_ns * 1e-9, enu.to_enu(s.latitude_deg, s.longitude_deg, s.altitude_m)[:2], s.position_covariance_enu_m2[0, 0])
            for s in samples if isinstance(s, GnssFix) and s.status >= 0 and math.isfinite(s.latitude_deg)]
    rows.sort(key=lambda r: r[0])
    return Run(np.array([r[0] for r in rows]), dict(position=np.array([r[1] for r in rows])), dict(variance=np.array([r[2] for r in rows])))


def gnss_averaged_run(truth: Run, fixes: Run, antenna_xy_m: np.ndarray, prior_sigma_m: float, every_fix: bool = False) -> Run:
    """The fixes (:func:`gnss_run`) averaged with the motion known exactly: at each fix, base_link's true position plus
    the inverse-variance weighted mean of the fix errors so far, after a start prior of ``prior_sigma_m`` (the
    observer's).  No causal filter given these fixes and that start can do better: the position figure's lower bound
    on this harness.  With ``every_fix`` the mean of all the run's fix errors at every instant: the bound of an offline
    smoother (``process``'s smoothed track)."""
    if not len(fixes.t):
        return Run(fixes.t, dict(position=np.zeros((0, 2))))
    t, at_antenna, _ = aligned(truth, fixes, antenna_xy_m)
    _, at_base, _ = aligned(truth, fixes)
    weight = 1.0 / np.maximum(fixes.extra["variance"], 1e-6)
    weighted = weight[:, None] * (fixes.values["position"] - at_antenna["position"])
    if every_fix:
        mean_error = np.broadcast_to(weighted.sum(axis=0) / (1.0 / prior_sigma_m**2 + weight.sum()), weighted.shape)
    else:
        mean_error = np.cumsum(weighted, axis=0) / (1.0 / prior_sigma_m**2 + np.cumsum(weight))[:, None]
    return Run(t, dict(position=at_base["position"] + mean_error))


# ----- metrics -----------------------------------------------------------------------------------------
def aligned(truth: Run, est: Run, antenna_xy_m: np.ndarray | None = None) -> tuple[np.ndarray, dict, dict]:
    """Truth and estimate at the estimate's instants (truth by nearest model step; with ``antenna_xy_m`` the truth
    position is the antenna's, for the raw fixes)."""
    idx = np.clip(np.searchsorted(truth.t, est.t - 1e-6), 0, len(truth.t) - 1)
    tv = {k: v[idx] for k, v in truth.values.items()}
    if antenna_xy_m is not None:
        yaw = tv["yaw"]
        c, s = np.cos(yaw), np.sin(yaw)
        tv["position"] = tv["position"] + np.column_stack([c * antenna_xy_m[0] - s * antenna_xy_m[1], s * antenna_xy_m[0] + c * antenna_xy_m[1]])
    return est.t, tv, est.values


def run_metrics(truth: Run, est: Run, friction_step_s: float | None = None, antenna_xy_m=None) -> dict:
    """:func:`error_metrics` after SKIP_S, plus 2-sigma coverage of sideslip and tire forces where the run has sigmas."""
    t, tv, ev = aligned(truth, est, antenna_xy_m)
    t_rel = t - truth.t[0]
    out = error_metrics(t_rel, tv, ev, SKIP_S, friction_step_s)
    keep = t_rel >= SKIP_S
    if "sideslip_sigma" in est.extra and keep.any():
        err = np.abs(ev["sideslip"] - tv["sideslip"])[keep]
        out["sideslip_2sigma_coverage"] = float(np.mean(err <= 2.0 * est.extra["sideslip_sigma"][keep]))
        ferr = np.abs(ev["tire_force"] - tv["tire_force"])[keep]
        out["tire_force_2sigma_coverage"] = float(np.mean(ferr <= 2.0 * est.extra["tire_force_sigma"][keep]))
    if "sideslip" in tv and keep.any():
        out["truth_sideslip_rms_deg"] = math.degrees(float(np.sqrt(np.mean(np.square(tv["sideslip"][keep])))))
    for name, nis in est.extra.get("nis", {}).items():
        out[f"nis_{name}"] = float(nis)
    if est.extra.get("mass_observed") is not None:
        out["mass_observed"] = est.extra["mass_observed"]  # 1: the data showed the mass (torque-driven acceleration)
    smoothed = est.extra.get("smoothed_position")
    if smoothed is not None:
        has = np.isfinite(smoothed).all(axis=1)  # from the observer's latest start
        if (t_rel[has] >= SKIP_S).any():
            out["position_smoothed_rmse_m"] = error_metrics(t_rel[has], {"position": tv["position"][has]}, {"position": smoothed[has]}, SKIP_S)["position_rmse_m"]
    return out


def hold_metrics(est: Run, t0_s: float, start_s: float, end_s: float | None) -> dict:
    """How far the mass (% of its value at ``start_s``) and the friction moved between ``start_s`` and ``end_s`` (s after
    ``t0_s``; None: the end), where the data shows neither."""
    t = est.t - t0_s
    keep = (t >= start_s) & (t <= (end_s if end_s is not None else math.inf))
    if not keep.any():
        return {}
    mass, mu = est.values["mass"][keep], est.values["friction"][keep]
    return dict(mass_hold_pct=float(100.0 * np.max(np.abs(mass - mass[0])) / mass[0]), friction_hold=float(np.max(np.abs(mu - mu[0]))))


def friction_bound_metrics(truth: Run, est: Run) -> dict:
    """How far the published friction lower bound ever rose above the truth's friction at the same time (issue 15: it
    must not; negative: it stayed below by that much at its closest)."""
    bound = est.extra.get("friction_lower_bound")
    if bound is None or not len(bound):
        return {}
    truth_mu = np.interp(est.t, truth.t, truth.values["friction"])
    return dict(friction_bound_excess=float(np.max(bound - truth_mu)))


def cornering_metrics(est: Run, mismatch: mm.Mismatch) -> dict:
    """The final cornering-stiffness scales per axle against the truth's (the harness' factor on the vehicle file's
    stiffness at the static load; the truth's load sensitivity lowers an axle's total in a turn by a few per cent):
    the larger error of the two axles (%), whether both were observed (status not NOT_OBSERVABLE), and the share of
    the axles whose error is within twice the published sigma."""
    final = est.extra.get("cornering")
    if final is None:
        return {}
    truths = mismatch.cornering_stiffness
    errors = [100.0 * abs(value - truth) / truth for (value, _, _), truth in zip(final, truths)]
    inside = [abs(value - truth) <= 2.0 * sigma for (value, _, sigma), truth in zip(final, truths)]
    return dict(cornering_error_pct=max(errors), cornering_observed=float(all(status != 0 for _, status, _ in final)),
                cornering_2sigma_coverage=float(np.mean(inside)))


def evaluate_scenario(manoeuvre: str, seed: int, cache_dir: Path | None = None, observers=("spi_reduced",), progress=print,
                      vehicle_file: str | Path | None = None, sensors_file: str | Path | None = None) -> dict:
    """{configuration: metrics} of one manoeuvre and seed (module docstring), on ``vehicle_file`` and with the sensor
    suite of ``sensors_file`` when given (:func:`simulate`)."""
    from ..estimation.errorekf import ErrorEkfSettings

    desc, config, mismatch, truths, samples = simulate(manoeuvre, seed, cache_dir, vehicle_file=vehicle_file, sensors_file=sensors_file)
    m = MANOEUVRES[manoeuvre]()
    truth = truth_run(truths)
    step_s = FRICTION_STEP_S if manoeuvre == "friction_step" else None
    out: dict = {"mismatch": {"description": mismatch.describe()}}
    out["zero_sideslip"] = run_metrics(truth, Run(truth.t, dict(sideslip=np.zeros(len(truth.t)))))
    antenna_xy = np.asarray(desc.sensors.gnss_antenna_position_m)[:2]
    fixes = gnss_run(desc, config, samples)
    out["gnss"] = run_metrics(truth, fixes, antenna_xy_m=antenna_xy)
    start_sigma = float(ErrorEkfSettings().initial_position_sigma[0])  # the observer's prior on a given start position
    out["gnss_averaged"] = run_metrics(truth, gnss_averaged_run(truth, fixes, antenna_xy, start_sigma))
    out["gnss_two_sided"] = run_metrics(truth, gnss_averaged_run(truth, fixes, antenna_xy, start_sigma, every_fix=True))
    for name in ("kinematic_ekf", "single_track"):
        out[name] = run_metrics(truth, run_baseline(name, desc, config, m, truths[0].t_s, samples))
    for i, observer in enumerate(observers):
        progress(f"evaluate: {manoeuvre} seed {seed}: {observer} ...")
        est, open_loop = run_observer(desc, config, m, samples, observer, gnss=True, open_loop=(i == 0))
        out[observer] = run_metrics(truth, est, step_s)
        out[observer].update(cornering_metrics(est, mismatch))
        out[observer].update(friction_bound_metrics(truth, est))
        if manoeuvre in HOLD_S:
            out[observer].update(hold_metrics(est, truths[0].t_s, *HOLD_S[manoeuvre]))
        if open_loop is not None:
            out["open_loop"] = run_metrics(truth, open_loop, step_s)
        est, _ = run_observer(desc, config, m, samples, observer, gnss=False)
        out[f"{observer}_no_gnss"] = run_metrics(truth, est, step_s)
        if i == 0:
            est, _ = run_observer(desc, config, m, speed_only(samples, desc), observer, gnss=False)
            out[f"{observer}_speed_only"] = run_metrics(truth, est, step_s)
    return out


# ----- all scenarios ------------------------------------------------------------------------------------
def evaluate(manoeuvres=None, seeds=SEEDS, cache_dir: Path | None = None, observers=("spi_reduced",), jobs: int = 1,
             cluster: str | None = None, progress=print, vehicle_file: str | Path | None = None, sensors_file: str | Path | None = None) -> dict:
    """{manoeuvre: {seed: {configuration: metrics}}} over every manoeuvre and seed, ``jobs`` processes at a time or
    on the Dask ``cluster`` (:func:`state_observer.batch.run_all`).  With ``vehicle_file`` (a user's car) every
    manoeuvre's truth and observer start from that file, and the default manoeuvres leave out the race car's
    (:data:`VEHICLE_FILES`: 8 m/s^2 with a third of the weight in downforce; they can still be asked for by name).
    With ``sensors_file`` (a user's sensor suite, the schema of ``config/sensors/default.yaml``) the samples are that
    suite's: its rates, latencies and noise, the mismatch's biases on top."""
    from ..batch import run_all

    if vehicle_file is not None:
        from ..vehicle.description import load_vehicle

        load_vehicle(vehicle_file)  # a bad file is one error here, naming it, not one per worker
        vehicle_file = str(Path(vehicle_file).resolve())  # workers may run elsewhere (a cluster shares the file system)
    if sensors_file is not None:
        from .sensors import load_sensor_config

        load_sensor_config(sensors_file)  # the same for the sensor file
        sensors_file = str(Path(sensors_file).resolve())
    names = list(manoeuvres or default_manoeuvres(vehicle_file))
    for name in names:
        if name not in MANOEUVRES:
            raise ValueError(f"unknown manoeuvre '{name}', choose from {', '.join(MANOEUVRES)}")
    work = [(name, seed) for name in names for seed in seeds]
    parallel = bool(cluster) or (jobs > 1 and len(work) > 1)
    say = _quiet if parallel else progress
    runs = run_all(evaluate_scenario, [(name, seed, cache_dir, observers, say, vehicle_file, sensors_file) for name, seed in work], jobs=jobs, cluster=cluster,
                   on_done=(lambda i, _: progress(f"evaluate: {work[i][0]} seed {work[i][1]}: done")) if parallel else None)
    results: dict = {name: {} for name in names}
    for (name, seed), metrics in zip(work, runs):
        results[name][seed] = metrics
    return results


def default_manoeuvres(vehicle_file: str | Path | None = None) -> list[str]:
    """What ``evaluate`` runs unless told: every manoeuvre, but the race car's (:data:`VEHICLE_FILES`) on a user's car."""
    return [m for m in MANOEUVRES if vehicle_file is None or m not in VEHICLE_FILES]


def _quiet(*_args) -> None:
    return None


def summarise(results: dict) -> dict:
    """{manoeuvre: {configuration: {metric: median over seeds}}} (configurations that failed on a seed are left out of
    that seed's median)."""
    out: dict = {}
    for name, by_seed in results.items():
        table: dict = {}
        configs = {c for r in by_seed.values() for c in r if c != "mismatch"}
        for config in sorted(configs):
            metrics: dict = {}
            for r in by_seed.values():
                for key, value in r.get(config, {}).items():
                    if isinstance(value, (int, float)) and math.isfinite(value):
                        metrics.setdefault(key, []).append(float(value))
            table[config] = {k: statistics.median(v) for k, v in metrics.items()}
        out[name] = table
    return out


COLUMNS = (("position_rmse_m", "pos m", 1.0), ("position_smoothed_rmse_m", "pos sm m", 1.0), ("sideslip_rmse_deg", "beta deg", 1.0), ("yaw_rate_rmse_dps", "r dps", 1.0),
           ("tire_force_nrmse_long", "Fx %", 100.0), ("tire_force_nrmse_lat", "Fy %", 100.0), ("tire_force_nrmse_vert", "Fz %", 100.0),
           ("mass_error_pct", "mass %", 1.0), ("cornering_error_pct", "Cy %", 1.0), ("friction_abs_error", "mu err", 1.0),
           ("friction_bound_excess", "LB-mu", 1.0), ("sideslip_2sigma_coverage", "beta 2s", 100.0),
           ("tire_force_2sigma_coverage", "F 2s", 100.0), ("cornering_2sigma_coverage", "Cy 2s", 100.0))
ORDER = ("spi_reduced", "errorekf_fe_reduced", "open_loop", "kinematic_ekf", "gnss", "gnss_averaged", "gnss_two_sided", "zero_sideslip", "spi_reduced_no_gnss",
         "errorekf_fe_reduced_no_gnss", "spi_reduced_speed_only", "single_track")


def format_table(summary: dict) -> str:
    """The median table: one block per manoeuvre, the observer first, its baselines under it."""
    lines = [f"{'manoeuvre / configuration':34s} " + " ".join(f"{label:>8s}" for _, label, _ in COLUMNS)]
    for name, table in summary.items():
        lines.append(name)
        for config in [c for c in ORDER if c in table] + sorted(c for c in table if c not in ORDER):
            m = table[config]
            cells = [f"{m[k] * scale:8.3f}" if k in m else f"{'-':>8s}" for k, _, scale in COLUMNS]
            lines.append(f"  {config:32s} " + " ".join(cells))
    return "\n".join(lines)


GYRO_NOISE_DPS = math.degrees(0.0035)  # 1-sigma of one gyroscope sample of the nominal IMU


def targets(summary: dict, observer: str = "spi_reduced") -> list[dict]:
    """The goals of issues 14 and 15 on the medians: one record (manoeuvre, goal, value, met) per goal and manoeuvre."""
    out = []

    def goal(name: str, text: str, value: float | None, met: bool | None) -> None:
        out.append(dict(manoeuvre=name, goal=text, value=value, met=met))

    for name, table in summary.items():
        o, o_free = table.get(observer, {}), table.get(f"{observer}_no_gnss", {})
        beta = o.get("sideslip_rmse_deg")
        baselines = {b: table.get(b, {}).get("sideslip_rmse_deg") for b in ("zero_sideslip", "open_loop", "kinematic_ekf")}
        if beta is not None:
            goal(name, "sideslip RMSE <= 0.15 deg", beta, beta <= 0.15)
            for b, value in baselines.items():
                if value is not None:
                    goal(name, f"sideslip below {b} ({value:.3f} deg)", beta, beta < value)
            best = min((v for v in baselines.values() if v is not None), default=None)
            if best is not None and table.get("zero_sideslip", {}).get("truth_sideslip_rms_deg", 0.0) > 0.3:
                goal(name, f"sideslip <= 0.7 x best baseline ({0.7 * best:.3f} deg)", beta, beta <= 0.7 * best)
        for component in ("long", "lat", "vert"):
            key = f"tire_force_nrmse_{component}"
            if key in o:
                goal(name, f"tire force {component} nRMSE <= 5 %", 100 * o[key], o[key] <= 0.05)
                ol = table.get("open_loop", {}).get(key)
                if ol is not None:
                    goal(name, f"tire force {component} below open loop ({100 * ol:.1f} %)", 100 * o[key], o[key] < ol)
        if "position_rmse_m" in o:
            goal(name, "position RMSE <= 0.25 m", o["position_rmse_m"], o["position_rmse_m"] <= 0.25)
        if "position_smoothed_rmse_m" in o:
            goal(name, "offline (process, smoothed) position RMSE <= 0.25 m", o["position_smoothed_rmse_m"], o["position_smoothed_rmse_m"] <= 0.25)
        if "yaw_rate_rmse_dps" in o:
            goal(name, f"yaw-rate RMSE below the gyro noise ({GYRO_NOISE_DPS:.2f} deg/s)", o["yaw_rate_rmse_dps"], o["yaw_rate_rmse_dps"] < GYRO_NOISE_DPS)
        if "sideslip_2sigma_coverage" in o:
            goal(name, "sideslip errors inside 2 sigma >= 90 %", 100 * o["sideslip_2sigma_coverage"], o["sideslip_2sigma_coverage"] >= 0.9)
        if "tire_force_2sigma_coverage" in o:
            goal(name, "tire-force errors inside 2 sigma >= 90 %", 100 * o["tire_force_2sigma_coverage"], o["tire_force_2sigma_coverage"] >= 0.9)
        if "mass_error_pct" in o and o.get("mass_observed", 0.0) >= 0.5:  # scenarios with longitudinal excitation
            goal(name, "mass error <= 3 %", o["mass_error_pct"], o["mass_error_pct"] <= 3.0)
        if "mass_hold_pct" in o:
            goal(name, "mass unchanged (+-0.5 %) where nothing shows it", o["mass_hold_pct"], o["mass_hold_pct"] <= 0.5)
        if "cornering_error_pct" in o and o.get("cornering_observed", 0.0) >= 0.5:  # scenarios with lateral excitation
            goal(name, "cornering stiffness scales within 10 %", o["cornering_error_pct"], o["cornering_error_pct"] <= 10.0)
        if "friction_bound_excess" in o:
            goal(name, "friction lower bound never above the truth", o["friction_bound_excess"], o["friction_bound_excess"] <= 0.0)
        if "friction_settle_s" in o:
            goal(name, "friction within 0.05 at most 5 s after the step", o["friction_settle_s"], o["friction_settle_s"] <= 5.0)
        single = table.get("single_track", {}).get("sideslip_rmse_deg")
        if "sideslip_rmse_deg" in o_free and single is not None:
            goal(name, f"without GNSS: sideslip below the linear single-track model ({single:.3f} deg)", o_free["sideslip_rmse_deg"],
                 o_free["sideslip_rmse_deg"] < single)
        o_speed = table.get(f"{observer}_speed_only", {})
        if "sideslip_rmse_deg" in o_speed and single is not None:
            goal(name, f"speed only (no GNSS, no torques, IMU r ax ay): sideslip below the single-track model ({single:.3f} deg)",
                 o_speed["sideslip_rmse_deg"], o_speed["sideslip_rmse_deg"] < single)
    return out


def format_targets(verdicts: list[dict]) -> str:
    met = sum(1 for v in verdicts if v["met"])
    lines = [f"targets: {met} of {len(verdicts)} met"]
    for v in verdicts:
        if not v["met"]:
            lines.append(f"  NOT MET  {v['manoeuvre']:20s} {v['goal']}: {v['value']:.3f}")
    return "\n".join(lines)

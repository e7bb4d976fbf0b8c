"""The three-simulation harness of the seeds (Rodriguez 2020 §5.1): truth, open loop and observer.

* truth: the detailed model with the true mass and friction, driven by the manoeuvre's driver; its
  sensors are synthesised (:mod:`.sensors`, the default sensor suite: IMU 200 Hz, GNSS 5 Hz with 1.8 m
  horizontal noise, GNSS velocity 5 Hz, encoders and steering 100 Hz).
* open loop: the observer's 14-DOF model with wrong parameters (mass +15 %, mu = 1.0), driven by the
  measured steering and wheel torques, without corrections.
* observer: the same wrong model corrected by the filter with the synthesised measurements
  (``errorekf_fe_reduced``, ``spi_reduced``), and the detailed model with the same parameter errors
  corrected by the plain errorEKF (``errorekf_detailed``).

Metrics (after the first ``skip_s`` = 20 s): horizontal position RMSE (base_link origin), CoM-free
sideslip at base_link and yaw-rate RMSE, tire-force normalised RMSE per component (RMSE over the four
wheels divided by the peak absolute truth value of that component), mass error (%) and friction error
over the final 10 s, and for ``mu_step`` the time after the step until the friction estimate stays
within 0.05.  ``sensor`` is the GNSS fix itself (position) and the gyroscope (yaw rate).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

from ..conventions import sideslip_rad
from ..estimation.online import ModelInputs
from ..sensors.samples import GnssFix, GnssVelocity, ImuSample, WheelSample
from ..vehicle.reduced_kernels import body_rate, euler_rotation
from .manoeuvres import Manoeuvre, Path, friction_change, make_manoeuvre, steady_circle
from .run import path_start, run
from ..vehicle.state import VehicleState

SKIP_S = 20.0
MASS_ERROR = 0.15  # open loop and observer model: mass +15 %
MODEL_MU = 1.0


def _brake_in_turn(duration_s: float = 60.0) -> Manoeuvre:
    """Circle of 50 m at 15 m/s on mu 0.8; from 40 s the speed target falls at 3 m/s^2 to 5 m/s."""
    def speed(t):
        return 15.0 if t < 40.0 else max(5.0, 15.0 - 3.0 * (t - 40.0))

    return Manoeuvre("brake_in_turn", duration_s, 15.0, speed=speed, path=Path.circle(50.0), friction=lambda t: 0.8,
                     description="circle of 50 m at 15 m/s, braking at 3 m/s^2 to 5 m/s from 40 s on mu 0.8")


SCENARIOS: dict[str, Callable[[], Manoeuvre]] = {
    "circle_mu08": lambda: steady_circle(radius_m=50.0, speed_m_s=15.0, duration_s=60.0, mu=0.8),
    # 17 m/s on R 50 m (5.8 m/s^2) saturates the front tires on mu 0.6: friction is observable only there
    "circle_mu06": lambda: steady_circle(radius_m=50.0, speed_m_s=17.0, duration_s=60.0, mu=0.6),
    "mu_step": lambda: friction_change(0.8, 0.6, t_change_s=60.0, radius_m=50.0, speed_m_s=17.0, duration_s=100.0),
    "double_lane_change": lambda: make_manoeuvre("double_lane_change", duration_s=30.0),
    "brake_in_turn": _brake_in_turn,
}
MU_STEP_T_S = 60.0


@dataclass
class Estimate:
    """One estimate record (ENU, base_link), aligned with a truth sample."""

    t_s: float
    position_m: np.ndarray  # (3,)
    yaw_rate_rad_s: float
    sideslip_rad: float
    tire_force_n: np.ndarray  # (4, 3) tire frame
    mass_kg: float
    friction: float


def sideslip(velocity_enu: np.ndarray, rotation: np.ndarray) -> float:
    """Sideslip angle at base_link (rad) of an ENU velocity and the body's rotation (:func:`conventions.sideslip_rad`)."""
    vb = rotation.T @ velocity_enu
    return sideslip_rad(float(vb[0]), float(vb[1]))


def _truth_record(x: VehicleState) -> Estimate:
    from ..conventions import quaternion_to_matrix

    R = quaternion_to_matrix(x.orientation_wxyz)
    return Estimate(x.t_s, np.asarray(x.position_enu_m), float(x.angular_velocity_body_rad_s[2]), sideslip(np.asarray(x.velocity_enu_m_s), R),
                    np.asarray(x.tire_force_n), x.mass_kg, x.friction_coefficient)


def simulate_truth(desc, sensor_config, manoeuvre: Manoeuvre, seed: int = 0):
    """Truth records and the synthesised samples (sorted by stamp) of one scenario."""
    from ..vehicle.detailed import DetailedVehicle
    from ..sensors.mounts import mounts_from_vehicle
    from .sensors import SensorSynthesizer

    synth = SensorSynthesizer(sensor_config, mounts_from_vehicle(desc), seed=seed)
    truths, samples = [], []
    for x in run(DetailedVehicle(desc), manoeuvre):
        truths.append(x)
        samples.extend(synth.feed(x))
    samples.sort(key=lambda s: s.stamp_ns)
    return truths, samples


@njit(cache=True)
def _yaw_rate_and_sideslip(q, qd):
    """Body yaw rate (rad/s) and the sideslip at base_link (rad, as :func:`sideslip`) of a 14-DOF state."""
    R = euler_rotation(q[3], q[4], q[5])
    E = body_rate(q[3], q[4])[0]
    yaw_rate = E[2, 0] * qd[3] + E[2, 1] * qd[4] + E[2, 2] * qd[5]
    vx = R[0, 0] * qd[0] + R[1, 0] * qd[1] + R[2, 0] * qd[2]
    vy = R[0, 1] * qd[0] + R[1, 1] * qd[1] + R[2, 1] * qd[2]
    return yaw_rate, (math.atan2(vy, vx) if math.hypot(vx, vy) > 0.5 else 0.0)


def wrong_model(desc, model: str = "reduced", kinematics=None, linear_solver=None):
    """The observer's model with the harness' parameter errors (mass +15 %, mu = 1.0).  The detailed model
    gets the extra mass on its chassis body (its spring preloads are then solved for that mass).
    ``linear_solver``: the integrator's linear-solver backend (:func:`state_observer.accel.make_backend`)."""
    if model == "reduced":
        from ..vehicle.reduced import ReducedVehicle

        vehicle = ReducedVehicle(desc, kinematics=kinematics, mu=MODEL_MU, linear_solver=linear_solver)
        vehicle.set_total_mass(vehicle.total_mass_kg * (1.0 + MASS_ERROR))
        return vehicle
    if model == "detailed":
        import dataclasses

        from ..vehicle.detailed import DetailedVehicle

        extra = MASS_ERROR * DetailedVehicle(desc).total_mass_kg
        chassis = dataclasses.replace(desc.chassis, mass_kg=desc.chassis.mass_kg + extra)
        return DetailedVehicle(dataclasses.replace(desc, chassis=chassis), mu=MODEL_MU, linear_solver=linear_solver)
    raise ValueError(f"unknown model '{model}' (reduced or detailed)")


def run_model(desc, manoeuvre: Manoeuvre, samples: list, sensor_config, steps: int, observer_settings=None, kinematics=None,
              timing: dict | None = None, spi=None, model: str = "reduced", filter_class=None, linear_solver=None):
    """Open loop (``observer_settings`` None) or the observer on the wrong model: ``model`` reduced (the
    14-DOF model with the errorEKF-FE, plus the SPI parameter filter when ``spi`` is given, or any filter
    class with the same API as ``filter_class(vehicle, mounts, settings)``) or detailed
    (:class:`DetailedErrorEKF`); one Estimate per step.
    ``timing`` receives ``loop_s``, the wall time of the stepping loop (model set-up excluded).
    ``linear_solver``: the model integrator's linear-solver backend (default: its own)."""
    from ..estimation.errorekf import DetailedErrorEKF, VehicleErrorEKF
    from ..sensors.mounts import mounts_from_vehicle

    vehicle = wrong_model(desc, model, kinematics, linear_solver)
    mounts = mounts_from_vehicle(desc)
    if observer_settings is None:
        filt = None
    elif filter_class is not None:
        filt = filter_class(vehicle, mounts, observer_settings)
    elif model == "detailed":
        filt = DetailedErrorEKF(vehicle, mounts, observer_settings)
    elif spi is not None:
        from ..estimation.spi import VehicleSPI

        filt = VehicleSPI(vehicle, mounts, observer_settings, spi)
    else:
        filt = VehicleErrorEKF(vehicle, mounts, observer_settings)
    speed, yaw, xy = path_start(manoeuvre)
    if filt is not None:
        filt.start(speed, yaw, xy)
    else:
        vehicle.start(speed_m_s=speed, yaw_rad=yaw, position_m=xy)
    vehicle.mu = MODEL_MU
    enu = sensor_config.gnss_fix.datum.local_enu()
    gyro_sigma = float(sensor_config.imu.gyro_rad_s.sigma[0])
    accel_sigma = float(sensor_config.imu.accel_m_s2.sigma[0])
    rate_sigma = float(sensor_config.wheel_encoders.rate_rad_s.sigma[0])
    inputs = ModelInputs()
    dt_ns = round(vehicle.dt_s * 1e9)
    t0_ns = round(vehicle.solver.t * 1e9)
    k_sample = 0
    out = []
    loop_start = time.perf_counter()
    for k in range(steps):
        t_end_ns = t0_ns + (k + 1) * dt_ns
        inputs.apply(vehicle, t_end_ns - dt_ns // 2)
        if filt is None:
            if not vehicle.step().success:
                raise RuntimeError(f"open loop model failed at t = {vehicle.solver.t:.3f} s")
        elif not filt.predict():
            raise RuntimeError(f"observer model failed at t = {vehicle.solver.t:.3f} s")
        tire_force = vehicle.tire_forces_n if model == "reduced" else None  # (4, 3): fx, fy, fz per wheel
        while k_sample < len(samples) and samples[k_sample].stamp_ns <= t_end_ns:
            sample = samples[k_sample]
            k_sample += 1
            inputs.take(sample)
            if filt is None:
                continue
            if isinstance(sample, ImuSample):
                filt.update_imu(np.asarray(sample.angular_velocity_rad_s), np.asarray(sample.linear_acceleration_m_s2), gyro_sigma, accel_sigma)
            elif isinstance(sample, GnssFix):
                if sample.status >= 0 and math.isfinite(sample.latitude_deg):
                    filt.update_gnss_fix(enu.to_enu(sample.latitude_deg, sample.longitude_deg, sample.altitude_m), np.asarray(sample.position_covariance_enu_m2),
                                         age_s=(t_end_ns - sample.stamp_ns) * 1e-9)
            elif isinstance(sample, GnssVelocity):
                filt.update_gnss_velocity(np.asarray(sample.velocity_enu_m_s), np.asarray(sample.covariance_m2_s2))
            elif isinstance(sample, WheelSample):
                filt.update_wheel_rates(np.asarray(sample.rate_rad_s), rate_sigma)
        if filt is not None:
            filt.correct()
        if model == "reduced":
            solver = vehicle.solver
            yaw_rate, beta = _yaw_rate_and_sideslip(solver.q, solver.qd)
            mu = vehicle.mu
            out.append(Estimate(solver.t, solver.q[:3].copy(), yaw_rate, beta, tire_force, vehicle.total_mass_kg, float(mu.sum() / 4.0)))
        else:
            out.append(_truth_record(vehicle.truth()))
    if timing is not None:
        timing["loop_s"] = time.perf_counter() - loop_start
    return out, filt


def _rmse(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if len(x) else float("nan")


def metrics(truths: list, estimates: list, skip_s: float = SKIP_S, mu_step_t_s: float | None = None) -> dict:
    """The harness metrics of one configuration (module docstring)."""
    truth = [_truth_record(x) for x in truths[1:]]
    n = min(len(truth), len(estimates))
    truth, estimates = truth[:n], estimates[:n]

    def arrays(records):
        return dict(position=np.array([e.position_m[:2] for e in records]), sideslip=np.array([e.sideslip_rad for e in records]),
                    yaw_rate=np.array([e.yaw_rate_rad_s for e in records]), tire_force=np.array([e.tire_force_n for e in records]),
                    mass=np.array([e.mass_kg for e in records]), friction=np.array([e.friction for e in records]))

    return error_metrics(np.array([e.t_s for e in truth]), arrays(truth), arrays(estimates), skip_s, mu_step_t_s)


def error_metrics(t: np.ndarray, truth: dict, estimate: dict, skip_s: float = SKIP_S, mu_step_t_s: float | None = None,
                  final_s: float | None = 10.0) -> dict:
    """The harness metrics (module docstring) of estimates and truth aligned at times ``t`` (s), each a dict of
    arrays: position (n, 2) m, yaw (n,) rad, sideslip (n,) rad, yaw_rate (n,) rad/s, tire_force (n, 4, 3) N,
    mass (n,) kg, friction (n,).  A metric is computed only when both dicts hold its arrays (the GNSS fixes alone
    give only position).  Mass and friction errors are the mean over the final ``final_s`` seconds (None: over
    the same window t >= skip_s as the others).  Also used by ``state-observer process`` on a bag with truth."""
    keep = t >= skip_s
    both = [k for k in ("position", "yaw", "sideslip", "yaw_rate", "tire_force", "mass", "friction") if k in truth and k in estimate]
    out = {}
    if "position" in both:
        out["position_rmse_m"] = _rmse(np.linalg.norm(estimate["position"][keep] - truth["position"][keep], axis=1))
    if "yaw" in both:  # heading, wrapped to +-180 deg
        out["yaw_rmse_deg"] = math.degrees(_rmse(np.angle(np.exp(1j * (estimate["yaw"] - truth["yaw"])))[keep]))
    if "sideslip" in both:
        out["sideslip_rmse_deg"] = math.degrees(_rmse((estimate["sideslip"] - truth["sideslip"])[keep]))
    if "yaw_rate" in both:
        out["yaw_rate_rmse_dps"] = math.degrees(_rmse((estimate["yaw_rate"] - truth["yaw_rate"])[keep]))
    if "tire_force" in both:
        ft, fe = truth["tire_force"][keep], estimate["tire_force"][keep]
        for c, name in enumerate(("long", "lat", "vert")):
            peak = np.abs(ft[:, :, c]).max(initial=0.0)
            out[f"tire_force_nrmse_{name}"] = _rmse((fe[:, :, c] - ft[:, :, c]).ravel()) / peak if peak > 0 else float("nan")
    last = keep if final_s is None else t >= t[-1] - final_s
    if "mass" in both:
        mass_t, mass_e = truth["mass"], estimate["mass"]
        out["mass_error_pct"] = float(100.0 * np.mean(np.abs(mass_e[last] - mass_t[last]) / mass_t[last]))
    if "friction" in both:
        mu_t, mu_e = truth["friction"], estimate["friction"]
        out["friction_abs_error"] = float(np.mean(np.abs(mu_e[last] - mu_t[last])))
        if mu_step_t_s is not None:
            after = t >= mu_step_t_s
            bad = np.flatnonzero(after & (np.abs(mu_e - mu_t) > 0.05))
            out["friction_settle_s"] = float(t[bad[-1]] - mu_step_t_s + (t[1] - t[0])) if len(bad) else 0.0
    return out


def sensor_metrics(truths: list, samples: list, sensor_config, desc, skip_s: float = SKIP_S) -> dict:
    """The raw sensors as an 'estimate': GNSS fix position (antenna vs. true antenna) and gyroscope yaw rate."""
    from ..conventions import quaternion_to_matrix
    from ..sensors.mounts import mounts_from_vehicle

    mounts = mounts_from_vehicle(desc)
    enu = sensor_config.gnss_fix.datum.local_enu()
    t_truth = np.array([x.t_s for x in truths])
    pos_err, yaw_err = [], []
    for s in samples:
        t = s.stamp_ns * 1e-9
        if t < skip_s:
            continue
        x = truths[min(int(np.searchsorted(t_truth, t)), len(truths) - 1)]
        R = quaternion_to_matrix(x.orientation_wxyz)
        if isinstance(s, GnssFix) and s.status >= 0 and math.isfinite(s.latitude_deg):
            antenna = np.asarray(x.position_enu_m) + R @ mounts.gnss_position_m
            pos_err.append(np.linalg.norm((enu.to_enu(s.latitude_deg, s.longitude_deg, s.altitude_m) - antenna)[:2]))
        elif isinstance(s, ImuSample):
            w = mounts.imu_rotation @ np.asarray(s.angular_velocity_rad_s)
            yaw_err.append(w[2] - x.angular_velocity_body_rad_s[2])
    return {"position_rmse_m": _rmse(np.array(pos_err)), "yaw_rate_rmse_dps": math.degrees(_rmse(np.array(yaw_err)))}


def model_configurations() -> dict:
    """The harness' model runs: name -> keyword arguments of :func:`run_model` (besides the ``sensor`` row)."""
    from ..estimation.errorekf import ErrorEkfSettings, detailed_settings
    from ..estimation.spi import SpiSettings

    return {
        "open_loop": dict(observer_settings=None),
        "errorekf_fe_reduced": dict(observer_settings=ErrorEkfSettings()),
        "spi_reduced": dict(observer_settings=ErrorEkfSettings(), spi=SpiSettings()),
        "errorekf_detailed": dict(observer_settings=detailed_settings(), model="detailed"),
    }


def evaluate(scenarios=None, seed: int = 0, progress=print) -> dict:
    """{scenario: {configuration: metrics}} for the harness (module docstring).  A configuration whose
    model fails is reported with ``failed`` (the message) instead of metrics."""
    from ..paths import default_sensors_path, default_vehicle_path
    from ..vehicle.description import load_vehicle
    from ..vehicle.kinematic_fit import fit_vehicle_kinematics
    from .sensors import load_sensor_config

    desc = load_vehicle(default_vehicle_path())
    config = load_sensor_config(default_sensors_path())
    kinematics = fit_vehicle_kinematics(desc)
    results: dict = {}
    for name in scenarios or SCENARIOS:
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario '{name}', choose from {', '.join(SCENARIOS)}")
        progress(f"evaluate: {name}: truth ...")
        manoeuvre = SCENARIOS[name]()
        truths, samples = simulate_truth(desc, config, manoeuvre, seed=seed)
        mu_step = MU_STEP_T_S if name == "mu_step" else None
        row = {"sensor": sensor_metrics(truths, samples, config, desc)}
        for key, options in model_configurations().items():
            progress(f"evaluate: {name}: {key} ...")
            try:
                estimates, _ = run_model(desc, SCENARIOS[name](), samples, config, len(truths) - 1, kinematics=kinematics, **options)
                row[key] = metrics(truths, estimates, mu_step_t_s=mu_step)
            except RuntimeError as exc:
                row[key] = {"failed": str(exc)}
        results[name] = row
    return results


def print_table(results: dict) -> None:
    keys = ["position_rmse_m", "sideslip_rmse_deg", "yaw_rate_rmse_dps", "tire_force_nrmse_long", "tire_force_nrmse_lat",
            "tire_force_nrmse_vert", "mass_error_pct", "friction_abs_error", "friction_settle_s"]
    short = ["pos m", "beta deg", "r dps", "Fx", "Fy", "Fz", "mass %", "mu", "settle s"]
    print(f"{'scenario':20s} {'configuration':20s} " + " ".join(f"{s:>9s}" for s in short))
    for scenario, row in results.items():
        for config, m in row.items():
            if "failed" in m:
                print(f"{scenario:20s} {config:20s} FAILED: {m['failed']}")
                continue
            cells = [f"{m[k]:9.3f}" if isinstance(m.get(k), float) and math.isfinite(m[k]) else f"{'-':>9s}" for k in keys]
            print(f"{scenario:20s} {config:20s} " + " ".join(cells))

"""Run a manoeuvre on the detailed vehicle: the virtual test vehicle's main loop."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import numpy as np

from .manoeuvres import MANOEUVRES, Driver, Manoeuvre, make_manoeuvre
from ..vehicle.state import VehicleState
from ..conventions import yaw_rad
from ..errors import SimulationError

__all__ = ["MANOEUVRES", "SimulationError", "VehicleInputs", "make_driver", "run", "simulate", "start_on_path", "path_start"]



def make_driver(vehicle, manoeuvre: Manoeuvre) -> Driver:
    desc = vehicle.desc
    corners = desc.corners
    return Driver(
        manoeuvre,
        wheelbase_m=desc.wheelbase_m,
        steering_ratio=vehicle.steering_ratio(),
        mass_kg=vehicle.total_mass_kg,
        radii_m=[c.wheel.dynamic_radius_m for c in corners],
        driven=[c.driven for c in corners],
        max_drive_n_m=[c.max_drive_torque_n_m for c in corners],
        max_brake_n_m=[c.max_brake_torque_n_m for c in corners],
        max_steering_rad=desc.steering.max_steering_wheel_angle_rad,
    )


class VehicleInputs(NamedTuple):
    """The inputs applied over one step: steering wheel (rad, rad/s), drive and brake torques (N m, (4,))."""

    steering_wheel_rad: float
    steering_rate_rad_s: float
    drive_torque_n_m: np.ndarray
    brake_torque_n_m: np.ndarray


def path_start(manoeuvre: Manoeuvre) -> tuple[float, float, tuple[float, float]]:
    """(speed m/s, yaw rad, (x, y) m) of the manoeuvre's start: its initial speed at the start of its
    path, heading along it (the origin heading east without a path)."""
    yaw0, start_xy = 0.0, (0.0, 0.0)
    path = manoeuvre.path
    if path is not None:
        d = path.xy[1] - path.xy[0]
        yaw0, start_xy = math.atan2(d[1], d[0]), (float(path.xy[0][0]), float(path.xy[0][1]))
    return float(manoeuvre.initial_speed_m_s), yaw0, start_xy


def start_on_path(vehicle, manoeuvre: Manoeuvre) -> None:
    """Start the vehicle at :func:`path_start` (and on the manoeuvre's initial friction)."""
    speed, yaw0, start_xy = path_start(manoeuvre)
    vehicle.start(speed_m_s=speed, yaw_rad=yaw0, position_m=start_xy)
    if manoeuvre.friction is not None:
        vehicle.mu = manoeuvre.friction(0.0)


def run(vehicle, manoeuvre: Manoeuvre, progress: Callable[[float, float], None] | None = None,
        inputs_log: list | None = None, replay: list | None = None) -> Iterator[VehicleState]:
    """Drive ``manoeuvre`` with a vehicle model (detailed or reduced); yield the truth after every model
    step (the first sample is the initial state).  ``inputs_log`` collects the
    :class:`VehicleInputs` of every step; ``replay`` applies such a list instead of the driver (the
    same inputs on another model).  Raises :class:`SimulationError` with the model's message if a
    step fails."""
    start_on_path(vehicle, manoeuvre)
    driver = make_driver(vehicle, manoeuvre)
    dt = vehicle.dt_s
    vehicle.set_inputs(0.0, np.zeros(4), np.zeros(4))
    truth = vehicle.truth()
    yield truth
    steps = int(round(manoeuvre.duration_s / dt)) if replay is None else len(replay)
    previous_sw = 0.0
    for k in range(steps):
        t = truth.t_s
        yaw = yaw_rad(truth.orientation_wxyz)
        v = truth.velocity_enu_m_s
        speed = math.copysign(float(np.hypot(v[0], v[1])), v[0] * math.cos(yaw) + v[1] * math.sin(yaw))  # < 0 reversing
        if replay is not None:
            applied = replay[k]
        else:
            sw = driver.steering_wheel_angle(t, truth.position_enu_m[:2], yaw, abs(speed))
            drive, brake = driver.torques(t, speed, dt, truth.slip_ratio)
            applied = VehicleInputs(sw, (sw - previous_sw) / dt, drive, brake)
            previous_sw = sw
        vehicle.set_inputs(applied.steering_wheel_rad, applied.drive_torque_n_m, applied.brake_torque_n_m, steering_rate_rad_s=applied.steering_rate_rad_s)
        if inputs_log is not None:
            inputs_log.append(applied)
        if manoeuvre.friction is not None:
            vehicle.mu = manoeuvre.friction(t + dt)
        result = vehicle.step()
        if not result.success:
            raise SimulationError(f"{manoeuvre.name}: {result.message}")
        truth = vehicle.truth()
        if progress is not None:
            progress(truth.t_s, manoeuvre.duration_s)
        yield truth


def simulate(manoeuvre: str, vehicle_path: str | Path | None = None, sensors_path: str | Path | None = None,
             duration_s: float | None = None, seed: int = 0, progress: Callable[[float, float], None] | None = None
             ) -> Iterator[tuple[VehicleState, list]]:
    """The ``simulate`` command's source: each truth sample and the sensor samples of that step."""
    from ..paths import default_sensors_path, default_vehicle_path
    from ..vehicle.description import load_vehicle
    from ..vehicle.detailed import DetailedVehicle
    from ..sensors.mounts import mounts_from_vehicle
    from .sensors import SensorSynthesizer, load_sensor_config

    desc = load_vehicle(vehicle_path or default_vehicle_path())
    config = load_sensor_config(sensors_path or default_sensors_path())
    m = make_manoeuvre(manoeuvre) if duration_s is None else make_manoeuvre(manoeuvre, duration_s=duration_s)
    vehicle = DetailedVehicle(desc)
    synth = SensorSynthesizer(config, mounts_from_vehicle(desc), seed=seed)
    for truth in run(vehicle, m, progress):
        yield truth, synth.feed(truth)

"""Truth variants for the accuracy harness: a car and sensors that are not the ones the observer is given.

The observer always runs on the vehicle file and sensor covariances a user would give it (the nominal
description).  The truth that produces its measurements differs the way a real car differs from its data
sheet (issue 14):

* tires of another family: the Magic-Formula characteristic with load sensitivity
  (:mod:`state_observer.vehicle.tire`) where the observer has the linearised TMeasy;
* parameters: cornering stiffness per axle and longitudinal slip stiffness +-25 %, chassis centre of mass
  +-5 cm forward and up, yaw inertia +-15 %, mass +-10 %, springs and dampers +-20 %, aerodynamic downforce
  (where the car has it) +-15 %, the tires' rolling radius per axle +-1.5 % (wear, pressure, another make: the
  wheels' rates are not the vehicle file's speed);
* sensors: IMU biases (accelerometer 0.05-0.2 m/s^2, gyroscope 0.1-0.5 deg/s per axis), scale factors
  (+-1 %), the IMU mounted 0.5 deg off the vehicle file's orientation, GNSS with 1.5-2.5 m noise per axis
  and one outage.

:func:`draw` turns a seed into one :class:`Mismatch` (uniform draws within those ranges, random signs);
:func:`truth_description` and :func:`truth_sensors` apply it.  Nothing here is tuned to a result: the
ranges are the issue's, and the same draw is used for every configuration of a scenario.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np


# Magic-Formula characteristic of the truth tires (Pacejka 2012 §4.3.2): shape C and curvature E drawn per seed over
# the range of passenger-car tires (C 1.2-1.5 lateral, E -1.5..0.2: the force peaks at 1.8 to 5 times the slip where
# the linear law reaches the friction, and gives 0.73-0.84 of the friction there), so that no fixed observer curve
# matches the truth; nominal C = 1.3, E = -1; load sensitivity of the slip stiffness ~0.3 and of the friction ~0.1 per
# unit of relative load increase.
MF_SHAPE = 1.3
MF_CURVATURE = -1.0
MF_SHAPE_RANGE = (1.2, 1.5)
MF_CURVATURE_RANGE = (-1.5, 0.2)
MF_LOAD_SENSITIVITY_STIFFNESS = 0.3
MF_LOAD_SENSITIVITY_FRICTION = 0.1


@dataclass(frozen=True)
class Mismatch:
    """How the truth differs from the vehicle file and the nominal sensors (factors are multipliers)."""

    seed: int
    cornering_stiffness: tuple[float, float]  # front, rear
    longitudinal_stiffness: float
    cg_forward_m: float  # chassis centre of mass shift
    cg_up_m: float
    yaw_inertia: float
    mass: float
    springs: float
    dampers: float
    gyro_bias_rad_s: tuple[float, float, float]
    accel_bias_m_s2: tuple[float, float, float]
    gyro_scale: tuple[float, float, float]  # scale-factor errors s (reads (1 + s) x)
    accel_scale: tuple[float, float, float]
    imu_mount_error_rpy_rad: tuple[float, float, float]
    gnss_sigma_m: float
    gnss_outage_s: tuple[float, float] | None  # (start, end) of one outage
    magic_formula: bool = True
    mf_shape: float = MF_SHAPE  # the truth tires' Magic-Formula C and E
    mf_curvature: float = MF_CURVATURE
    downforce: float = 1.0  # factor on the vehicle file's downforce area (a wind-tunnel figure is not the track's)
    rolling_radius: tuple[float, float] = (1.0, 1.0)  # front, rear: factor on the wheels' unloaded and dynamic radius (wear, make)

    def describe(self) -> str:
        c = self.cornering_stiffness
        tires = f"Magic Formula C {self.mf_shape:.2f} E {self.mf_curvature:+.2f}" if self.magic_formula else "TMeasy"
        return (f"seed {self.seed}: tires {tires}, cornering stiffness x{c[0]:.2f}/x{c[1]:.2f}, "
                f"slip stiffness x{self.longitudinal_stiffness:.2f}, CG {100 * self.cg_forward_m:+.0f} cm fwd {100 * self.cg_up_m:+.0f} cm up, "
                f"yaw inertia x{self.yaw_inertia:.2f}, mass x{self.mass:.2f}, springs x{self.springs:.2f}, dampers x{self.dampers:.2f}, "
                f"gyro bias {np.degrees(np.abs(self.gyro_bias_rad_s)).max():.2f} deg/s, accel bias {np.abs(self.accel_bias_m_s2).max():.2f} m/s^2, "
                f"IMU mount {np.degrees(np.abs(self.imu_mount_error_rpy_rad)).max():.2f} deg off, GNSS {self.gnss_sigma_m:.1f} m, "
                f"downforce x{self.downforce:.2f}, rolling radius x{self.rolling_radius[0]:.3f}/x{self.rolling_radius[1]:.3f}")


def nominal(seed: int = 0) -> Mismatch:
    """No mismatch at all (the truth is the vehicle file with TMeasy tires and ideal sensors)."""
    return Mismatch(seed, (1.0, 1.0), 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3, 1.786, None,
                    magic_formula=False)


def draw(seed: int, duration_s: float, gnss_outage: bool = True) -> Mismatch:
    """One mismatch of the issue's ranges (module docstring), reproducible from ``seed``; the GNSS outage (5 s)
    lies in the middle third of a run of ``duration_s``."""
    rng = np.random.default_rng(np.random.SeedSequence([14, int(seed)]))

    def factor(spread: float) -> float:
        return float(1.0 + rng.uniform(-spread, spread))

    def magnitudes(lo: float, hi: float) -> tuple[float, float, float]:
        return tuple(float(v) for v in rng.uniform(lo, hi, 3) * rng.choice([-1.0, 1.0], 3))

    cornering = (factor(0.25), factor(0.25))
    longitudinal = factor(0.25)
    cg_forward, cg_up = (float(v) for v in rng.uniform(-0.05, 0.05, 2))
    yaw_inertia, mass, springs, dampers = factor(0.15), factor(0.10), factor(0.20), factor(0.20)
    gyro_bias = magnitudes(math.radians(0.1), math.radians(0.5))
    accel_bias = magnitudes(0.05, 0.2)
    gyro_scale, accel_scale = magnitudes(0.0, 0.01), magnitudes(0.0, 0.01)
    axis = rng.normal(size=3)
    mount = tuple(float(v) for v in math.radians(0.5) * axis / np.linalg.norm(axis))
    gnss_sigma = float(rng.uniform(1.5, 2.5))
    t0 = float(rng.uniform(duration_s / 3.0, 2.0 * duration_s / 3.0 - 5.0)) if gnss_outage and duration_s > 20.0 else None
    shape, curvature = float(rng.uniform(*MF_SHAPE_RANGE)), float(rng.uniform(*MF_CURVATURE_RANGE))  # drawn last: the rest keeps its draws
    downforce = factor(0.15)  # after those: every earlier draw stays as it was
    rolling_radius = (factor(0.015), factor(0.015))  # and after it
    return Mismatch(int(seed), cornering, longitudinal, cg_forward, cg_up, yaw_inertia, mass, springs, dampers, gyro_bias, accel_bias, gyro_scale,
                    accel_scale, mount, gnss_sigma, None if t0 is None else (t0, t0 + 5.0), mf_shape=shape, mf_curvature=curvature,
                    downforce=downforce, rolling_radius=rolling_radius)


def truth_description(desc, m: Mismatch):
    """The truth vehicle: ``desc`` (the file the observer is given) changed by ``m``."""
    total = desc.total_mass_kg
    ch = desc.chassis
    chassis_mass = ch.mass_kg + (m.mass - 1.0) * total
    inertia = np.array(ch.inertia_kg_m2, dtype=float) * (chassis_mass / ch.mass_kg)
    inertia[2, 2] *= m.yaw_inertia
    for _ in range(50):  # a flat car (Izz near Ixx + Iyy): extra yaw inertia, as of a horizontal plate, adds to roll and pitch too
        deficit = -float(np.linalg.eigvalsh(0.5 * np.trace(inertia) * np.eye(3) - inertia).min())  # principal-moment triangle
        if deficit <= 0.0:
            break
        inertia[0, 0] += 1.01 * deficit + 1e-6 * np.trace(inertia)
        inertia[1, 1] += 1.01 * deficit + 1e-6 * np.trace(inertia)
    chassis = dataclasses.replace(ch, mass_kg=chassis_mass, inertia_kg_m2=inertia,
                                  com_m=np.asarray(ch.com_m, dtype=float) + np.array([m.cg_forward_m, 0.0, m.cg_up_m]))
    corners = []
    for c in desc.corners:
        t = c.tire
        axle = 0 if c.axle == "front" else 1
        tire = dataclasses.replace(t, cornering_stiffness_per_rad=t.cornering_stiffness_per_rad * m.cornering_stiffness[axle],
                                   longitudinal_slip_stiffness=t.longitudinal_slip_stiffness * m.longitudinal_stiffness)
        if m.magic_formula:
            tire = dataclasses.replace(tire, characteristic="magic_formula", shape_factor=m.mf_shape, curvature_factor=m.mf_curvature,
                                       nominal_load_n=desc.static_wheel_load_n(c), load_sensitivity_stiffness=MF_LOAD_SENSITIVITY_STIFFNESS,
                                       load_sensitivity_friction=MF_LOAD_SENSITIVITY_FRICTION)
        sd = c.spring_damper
        spring = dataclasses.replace(sd, stiffness_n_per_m=sd.stiffness_n_per_m * m.springs, damping_n_s_per_m=sd.damping_n_s_per_m * m.dampers)
        w, k = c.wheel, m.rolling_radius[axle]
        wheel = dataclasses.replace(w, unloaded_radius_m=w.unloaded_radius_m * k, dynamic_radius_m=w.dynamic_radius_m * k)
        corners.append(dataclasses.replace(c, tire=tire, spring_damper=spring, wheel=wheel))
    rpy = np.asarray(desc.sensors.imu_orientation_rpy_rad, dtype=float) + np.asarray(m.imu_mount_error_rpy_rad)
    sensors = dataclasses.replace(desc.sensors, imu_orientation_rpy_rad=rpy)
    aero = desc.aerodynamics
    if aero is not None and aero.downforce_area_m2 > 0.0:
        aero = dataclasses.replace(aero, downforce_area_m2=aero.downforce_area_m2 * m.downforce)
    return dataclasses.replace(desc, name=f"{desc.name} (truth, {m.describe()})", chassis=chassis, corners=tuple(corners), sensors=sensors,
                               aerodynamics=aero)


# The horizontal GNSS sigma of the package's sensor suite (config/sensors/default.yaml, m): the mismatch's 1.5-2.5 m are
# drawn for it, and a suite with another receiver gets them scaled (an RTK receiver's 2 cm becomes 1.7-2.8 cm)
NOMINAL_GNSS_SIGMA_M = 1.786


def truth_sensors(config, m: Mismatch):
    """The truth's sensor suite: ``config`` (nominal noise, rates, latencies) with the biases, scale factors,
    GNSS noise and outage of ``m``.  The published covariances stay those of ``config`` except the GNSS fix's,
    which reports its own noise (a receiver knows its accuracy roughly); the fix's noise is ``m.gnss_sigma_m`` times
    ``config``'s horizontal sigma over :data:`NOMINAL_GNSS_SIGMA_M` (the drawn value itself on the package's suite)."""
    imu = config.imu
    imu = dataclasses.replace(imu, gyro_rad_s=dataclasses.replace(imu.gyro_rad_s, bias=m.gyro_bias_rad_s, scale_factor=m.gyro_scale),
                              accel_m_s2=dataclasses.replace(imu.accel_m_s2, bias=m.accel_bias_m_s2, scale_factor=m.accel_scale))
    fix = config.gnss_fix
    sigma = fix.position_m.sigma
    # on the package's suite the drawn value itself (x * a / a need not give x back to the last bit: the samples and the
    # truth caches stay those of before the scaling)
    horizontal = m.gnss_sigma_m * sigma[0] / NOMINAL_GNSS_SIGMA_M if sigma[0] != NOMINAL_GNSS_SIGMA_M else m.gnss_sigma_m
    vertical = sigma[2] * horizontal / sigma[0] if sigma[0] > 0.0 else sigma[2]
    fix = dataclasses.replace(fix, position_m=dataclasses.replace(fix.position_m, sigma=(horizontal, horizontal, vertical)))
    if m.gnss_outage_s is not None:
        fix = dataclasses.replace(fix, dropouts=dataclasses.replace(fix.dropouts, intervals_s=fix.dropouts.intervals_s + (m.gnss_outage_s,)))
    vel = config.gnss_velocity
    if m.gnss_outage_s is not None:
        vel = dataclasses.replace(vel, dropouts=dataclasses.replace(vel.dropouts, intervals_s=vel.dropouts.intervals_s + (m.gnss_outage_s,)))
    return dataclasses.replace(config, imu=imu, gnss_fix=fix, gnss_velocity=vel)

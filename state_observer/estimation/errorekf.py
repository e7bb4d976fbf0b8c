"""errorEKF and errorEKF-FE on the 14-DOF vehicle (Sanjurjo 2016 §3; Rodriguez 2020 §3.3.1, §5.2.2.4).

The multibody model runs unmodified; the filter estimates the model's errors and feeds them back after every
step, so the a-priori error is always zero.

* errorEKF (``force_estimation=False``): error state x = [dz, dz_dot] (28), constant transition
  F = [[I, I dt], [0, I]], plant noise of white acceleration errors.
* errorEKF-FE: x = [dz, dz_dot, e]: the 14 coordinates' position and velocity errors plus extra states e:
  generalised force errors (longitudinal and lateral force at base_link in the heading frame, yaw moment; N, N m;
  first-order Gauss-Markov in the covariance, fading with ``force_memory_s``; the correction they feed turns with the
  heading, its longitudinal part fades with the same memory, its lateral part follows the tires' lateral force down and
  is otherwise kept, see ``lateral_correction_floor_n``), and, as random walks, optionally the IMU biases (gyroscope
  rad/s, accelerometer m/s^2, sensor axes), each axle's wheel-rate scale factor (the tires' rolling radius against the
  vehicle file's) and model parameters (mass, friction, cornering stiffness per axle, slip stiffness).  The error dynamics
  M dz_ddot = -K dz - C dz_dot - Dr e, with K, C the model's stiffness and damping and Dr = dr/de the response of
  the force residual r = M z_ddot - Q to the extra states (-1 on a force's direction; by differences of the
  model's steady-state forces for a parameter; 0 for a bias), are discretised with the integrator's trapezoidal
  rule (F = [[I + h/2 G_1, h/2 (I + G_2), h/2 G_e], G, [0, 0, D]], D the extra states' decay, G = W^-1 [-h K, M - h/2 C - h^2/4 K, -h Dr],
  W = M + h/2 C + h^2/4 K), with white-acceleration plant noise on the coordinates (x and y along and across the
  heading).  After the update the corrections are fed back: positions, velocities, the accelerations the model
  now has (z_ddot + A dz + B dz_dot + Gp e, A = -M^-1 K, B = -M^-1 C, Gp = -M^-1 Dr), the force errors into the
  model's force correction, the parameters into the model (the tires carry their new forces at once) and the
  biases into the measurement models.

Where this departs from the seeds and why.  The seeds (Rodriguez eq. 3.60) carry an unexplained acceleration on
every coordinate (x = [dz, dz_dot, dz_ddot], 42) and feed back the force M dz_ddot on a few of them; the model
then does not reproduce the acceleration the filter assumed (M couples the coordinates), and corrections in
east/north turn with the car: on a car it was not built from, the lateral force and yaw moment corrections
wandered by tens of kN and held sideslip errors of degrees on a straight road (issue 14).  Force errors as states
on exactly the coordinates that receive them make the feedback consistent, and their prior (a random walk of a
few hundred N per sqrt(s)) keeps the tire model in charge of what sideslip it implies.  The seeds' explicit
transition is unstable for the stiff tire modes at dt = 4 ms (|1 + dt lambda| > 1 for the wheel-spin slip damping
and wheel hop); the trapezoidal one is not.

Measurements are applied one sensor block at a time (any sensor may be missing at any step), each with
an innovation gate (:mod:`.kalman`) and the Joseph form.  A GNSS fix rejected for longer than
``reacquire_after_s`` (a datum jump, a wrong start) resets the position to the fix and widens its
covariance instead of being rejected for ever.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit

from ..mbs.small_linalg import lu_factor, lu_solve_columns, skew
from ..sensors import models
from ..vehicle.tire import TireOutput
from .kalman import (DEFAULT_GATE_PROBABILITY, GateCache, SensorStatistics, joseph_update, record_update, sequential_update,
                     white_acceleration_block, white_acceleration_covariance)

N = models.N
SENSORS = ("gnss_fix", "gnss_velocity", "gyroscope", "accelerometer", "wheel_rates", "wheel_angles", "suspension_travel", "standstill")
ROLL_ARM_M = 0.5  # m: the lateral (longitudinal) tire force times this scales the roll (pitch) moment errors' walk
LINEARISED_POSITIONS = (5,)  # K columns the errorEKF-FE takes from differences of the model (yaw)
LINEARISED_VELOCITIES = (3, 4, 5)  # C columns likewise (roll, pitch and yaw rates)
SPIN_COORDINATES = np.arange(10, 14)  # the wheels' spin angles (fl fr rl rr)
VERTICAL_COORDINATES = np.array([2, 3, 4, 6, 7, 8, 9])  # heave, roll, pitch and the four suspension travels
# force-error states: N along and across the heading at base_link, N m about z, N across the heading at the front and
# at the rear axle (a tire's force error acts there), N m on roll and pitch (spring, bar and damper errors)
FORCE_NAMES = ("longitudinal", "lateral", "yaw", "front_lateral", "rear_lateral", "roll", "pitch")
LATERAL_FORCES = ("lateral", "front_lateral", "rear_lateral")  # the force errors across the heading (with "yaw", their moment)
PARAMETER_NAMES = ("mass", "friction", "cornering_front", "cornering_rear", "longitudinal")  # the columns of ReducedVehicle.parameters
IMU_STATES = 9  # gyroscope biases (3), accelerometer biases (3), the gyroscope's z scale factor, the IMU's tilt (2)
WHEEL_SCALE_STATES = 2  # the wheel-rate scale factor of the front and of the rear axle (rolling radius of the file / the tires')
WHEEL_SCALE_BOUND = 0.05  # |k| at most this: a tire 5 % off the file's radius is a wrong vehicle file, not wear
SLOPE_STATES = 2  # gravity's east and north components (the road's slope under the car)
REVERSING_M_S = -0.5  # the model's forward speed below which the car reverses (m/s)
SLOPE_BOUND_M_S2 = 2.0  # |g_e|, |g_n| at most this (20 % of g; steeper is a wrong estimate, not a road)
SLIP_ROW = TireOutput._fields.index("slip_ratio")  # the model's tire output row of the longitudinal slip
PARAMETER_STEP = {"mass": 10.0, "friction": 0.01, "cornering_front": 0.01, "cornering_rear": 0.01, "longitudinal": 0.01}  # finite differences
PARAMETER_BOUNDS = {"mass": (0.5, 2.0), "friction": (0.1, 1.5), "cornering_front": (0.4, 2.5), "cornering_rear": (0.4, 2.5),
                    "longitudinal": (0.4, 2.5)}  # mass: times the initial mass


@dataclass
class ErrorEkfSettings:
    """Tuning of the vehicle errorEKF(-FE).  ``plant_sigma2``: white-acceleration intensities per coordinate
    [x y z, roll pitch yaw, 4 travels, 4 spins] (m^2/s^3, rad^2/s^3); for the errorEKF-FE x and y are along and
    across the heading (across: scaled down below ``lateral_plant_speed_m_s``).  Extra states of the errorEKF-FE (module docstring) have an initial 1-sigma and a random walk
    per sqrt(s)."""

    force_estimation: bool = True
    # the spins' 1 rad^2/s^3 is a wheel-torque error of ~16 N m per 4 ms step on a 1 kg m^2 wheel; 100 (158 N m, far
    # beyond a measured torque's error) let every accelerometer update move the spins, so the slip and the longitudinal
    # force jumped at 200 Hz (harness: Fx nRMSE 6.6 -> 2.2 % in the steady circle, 19 -> 11 % in the sine with dwell).
    # Along the heading 0.01, as across it: the force errors carry what the model misses of the car's longitudinal
    # acceleration (a walk of 300 N per sqrt(s) with known torques), and a white acceleration on top let each
    # accelerometer and GNSS velocity update move the forward speed alone, so the tires' slip and longitudinal forces
    # jittered where the open loop's follow the measured torques (tuning seeds 100-104, six manoeuvres, 0.1 -> 0.01:
    # Fx nRMSE 1.53 -> 1.24 % with GNSS, 1.51 -> 1.23 without; sideslip 0.129 -> 0.127, 0.197 -> 0.180 deg; seeds
    # 100-102 reversing and car park Fx 7.5 -> 5.1 and 7.0 -> 5.4 %).  Without measured torques the model's longitudinal
    # acceleration is a guess and it stays 0.1 (unknown_torque_plant_sigma2: the race car with a speed only, 0.01 gave
    # sideslip 0.228 -> 0.250 deg on the circle)
    plant_sigma2: np.ndarray = field(default_factory=lambda: np.array([0.01, 0.01, 0.1, 0.01, 0.01, 0.001] + [1.0] * 4 + [1.0] * 4))
    # Below this speed the plant noise across the heading falls with the square of the speed (to 1/1000 at standstill):
    # at walking pace the steering geometry sets the slip angles and the model's lateral velocity is nearly exact, and a
    # constant lateral noise let the GNSS velocity's (0.05 m/s is 1.1 deg of course at 2.5 m/s) move the sideslip (harness,
    # tuning seeds: car park at 2.5 m/s 0.127 -> 0.097 deg, reversing at 4 m/s 0.059 -> 0.041; 15-22 m/s unchanged).
    # The rate part of the walk of the force errors across the heading (force_walk_rate: lateral forces, yaw moment) falls
    # the same way: there the lateral forces change with the steering, as the model's own do, and a walk following them let
    # the corrections take the noise and lag the car's weaving (tuning seeds 100-102, sideslip with GNSS / without / speed
    # only: car park 0.087 -> 0.052 / 0.086 -> 0.040 / 0.079 -> 0.065 deg, reversing 0.058 -> 0.025 / 0.038 -> 0.026 /
    # 0.041 -> 0.035; yaw rate in the car park 0.08 -> 0.10 deg/s; standing with a speed only 0.014 -> 0.019 deg)
    lateral_plant_speed_m_s: float = 10.0
    # The yaw's plant noise (plant_sigma2[5]) is a tire model's error: it scales with the square of the lateral acceleration
    # up to this one (m/s^2), from yaw_plant_floor of it on a straight, where the model's yaw rate is known whatever its
    # tires (no steering, no lateral force).  Constant, it let the model's yaw rate wander 1.8 deg/s per sqrt(s) on a
    # straight, and the published yaw rate followed the gyroscope's noise there.  Tuning seeds 100-109, yaw rate over six manoeuvres:
    # 0.120 -> 0.109 deg/s with GNSS, 0.325 -> 0.302 without, 0.214 -> 0.192 speed only; sideslip 0.165 -> 0.164,
    # 0.259 -> 0.257, 0.212 -> 0.211 deg; car park, reversing, speed changes, standing: yaw rate 0.10-0.13 -> 0.02-0.08.
    yaw_plant_accel_m_s2: float = 2.0
    yaw_plant_floor: float = 0.01
    # Below this speed the wheel spins' plant noise (plant_sigma2[10:14]) falls with the square of the speed too (to 1/1000
    # at standstill): a spin error d_omega is a slip error d_omega r / v, so the intensity that suits 20 m/s let each
    # update move the slip, and the longitudinal forces, (20 / v)^2 times as much at walking pace; standing, it let the
    # spins jitter by a few hundredths of a rad/s, a slip velocity beyond the tire's 0.01 m/s that relaxed the tires'
    # held lateral deflections.  Tuning seeds 100-102, Fx nRMSE: car park at 2.5 m/s 5.35 -> 3.22 %, reversing at 4 m/s
    # 5.18 -> 4.09 %, standing 2.04 -> 2.00 % (Fy 20.8 -> 18.4 %); six manoeuvres at 15-22 m/s 1.22 -> 1.20 % with GNSS,
    # 1.20 -> 1.19 % without, 6.36 -> 6.38 % with a speed only; sideslip and the rest unchanged.  0: off.
    spin_plant_speed_m_s: float = 20.0
    # ... and so does the plant noise of the heave, roll, pitch and travels (plant_sigma2[2:5], [6:10]): what moves them is the
    # road, whose excitation grows with the speed.  Constant, it let each accelerometer update jitter the travels as the
    # car stopped, and the track change of that jitter ratcheted the tires' held lateral deflections: the front tires
    # came to rest with +-200 N of toe-like lateral force against the truth's +-21 (tuning seed 100).  Tuning seeds
    # 100-102, Fy nRMSE with GNSS / without: standing 18.4 -> 7.6 / 18.2 -> 7.6 %, car park 4.0 -> 3.6 / 3.8 -> 3.6,
    # reversing 4.4 -> 4.1 / 5.3 -> 3.8; Fx and Fz no worse; above 10 m/s unchanged.  With a speed only the standing
    # car's Fx is worse (2.7 -> 8.9 %), the car park's better (23.6 -> 13.5 %).  Smaller VERTICAL_COORDINATES, standing
    # Fy with GNSS / Fx with a speed only: the travels alone 10.7 / 3.0 %, without the heave 8.3 / 4.5, all seven 7.6 / 8.9;
    # without the heave also reversing Fy 4.1 -> 4.3 % and the car park's speed-only Fx 13.5 -> 15.2: all seven kept.  The
    # speed-only standing Fx was the unknown force's sign flip (travel_direction_speed_m_s: 8.9 -> 0.5 %).  0: off.
    vertical_plant_speed_m_s: float = 10.0
    # initial error sigmas per coordinate: positions (m, rad), velocities
    initial_position_sigma: np.ndarray = field(default_factory=lambda: np.array([1.0, 1.0, 0.01, 0.01, 0.01, 0.05] + [0.005] * 4 + [0.1] * 4))
    initial_velocity_sigma: np.ndarray = field(default_factory=lambda: np.array([0.1, 0.1, 0.02, 0.01, 0.01, 0.01] + [0.02] * 4 + [0.5] * 4))
    gate_probability: float = DEFAULT_GATE_PROBABILITY
    gnss_orientation_columns: bool = False
    reacquire_after_s: float = 2.0  # GNSS fixes rejected this long, and agreeing with each other, move the position to them
    reacquire_far_m: float = 50.0  # ... unless they are further than this from the model: then only after reacquire_far_after_s
    reacquire_far_after_s: float = 10.0
    enabled_sensors: tuple = SENSORS  # measurements the filter uses (others are ignored, not counted)
    relock_after: int = 50  # consecutive rejections of a (non-GNSS-fix) sensor before it is trusted again
    transition_every_steps: int = 5  # re-linearise the model (A, B, F) every 20 ms (every step: same accuracy on circle_mu08, 13 % slower)
    divergence_nis_factor: float = 20.0  # recent mean NIS above factor * dof flags divergence
    # what the model cannot reproduce of each IMU sample (vibration, body bending, unmodelled roll and pitch dynamics), added
    # in quadrature to the sample's own sigma: a 200 Hz accelerometer with its datasheet noise alone would make every
    # model error look like information (rad/s, m/s^2)
    gyro_model_sigma: float = 0.0
    # ... and, on the gyroscope's roll and pitch axes, the road's own turning: the model drives a level road, so a roll or
    # pitch rate is the body's on its springs, but over a crest or through a dip the whole car pitches with the road, v
    # times its vertical curvature (1.5 deg/s at 20 m/s over hills of 6 m every 300 m).  Taken as the body's, it pitched
    # the model's body +-2 deg on its springs and the loads with it (hill_drive, tuning seeds 100-101: vertical forces 39 %
    # against the open loop's 5 %, and the mass balance weighed the climbs: +45 %).  The body's own rate cannot last (its
    # springs hold its angle), the road's does: the innovation of those two axes averaged over gyro_road_rate_time_s is
    # the road's rate, 0.015-0.018 rad/s RMS over the hills against at most 0.0025 on level manoeuvres.  Its square, held
    # for gyro_road_rate_hold_s, times gyro_road_rate_gain^2, is added to the axes' variance.  A constant allowance
    # (0.1 rad/s) took the hills as well but threw away, on level roads, what the pitch rate says in a turn (the yaw
    # rate times the roll angle): the race circle's sideslip went 0.134 -> 0.156 deg.  0 turns it off.  In a turn a lasting
    # innovation on those axes is also the yaw rate r times an error of the model's roll or pitch (or of the IMU's tilt),
    # which the gyroscope must keep correcting: after the friction step's drop (0.8 -> 0.6) the model's roll is off and
    # the allowance fed on its own innovation (-0.006 and -0.008 rad/s after 20 s, against -0.003 and -0.002 without
    # it).  So the innovation is weighed by 1 / (1 + (r / gyro_road_rate_turn_rad_s)^2) before it is averaged: whole on
    # a straight, 1/50 at the friction step's 0.34 rad/s.  A gyroscope bias estimated wrong lasts as well: at the start
    # of a drive with a model far off its car (a 1501 kg car started at 600 kg) the y bias took -0.03 rad/s in 0.3 s,
    # the allowance then kept the gyroscope from taking it back, the innovation grew to 0.065 rad/s in 4 s and the filter
    # diverged at the braking (without the allowance the bias was back within 2.3 s).  So the tracker waits until the
    # gyroscope's x and y biases have settled, their sigma below gyro_road_rate_bias_sigma (0.0008 rad/s there at 2.4 s;
    # 0.0004 on the hills from 6 s on).  And a road's rate integrates to a change of grade, which stays within a few
    # degrees (the hills' 0 -> +-3.6); a bias's grows without end.  So the weighted innovation is also integrated, leaking
    # over gyro_road_grade_time_s, and an axis whose integral leaves +-gyro_road_grade_rad starts its tracker again (mean
    # and held square 0) with no allowance until the integral is back inside (0.35 rad, 20 deg: over the hills it
    # reaches 0.24, the y bias the allowance keeps from being learnt adding to the grades' 0.13; 0.1 cut the allowance
    # there, vertical forces 39 %).  0 turns the allowance off.
    gyro_road_rate_gain: float = 4.0
    gyro_road_rate_time_s: float = 1.0
    gyro_road_rate_hold_s: float = 5.0
    gyro_road_rate_turn_rad_s: float = 0.05
    gyro_road_rate_bias_sigma: float = 0.0006
    gyro_road_grade_rad: float = 0.35
    gyro_road_grade_time_s: float = 15.0
    # An IMU noisier than its covariance says (a race car's vibration, a covariance copied from a datasheet): each IMU block's
    # noise is scaled by a factor k >= 1 that follows the NIS, k <- k (1 + (NIS / dof - 1) / imu_noise_adaptation_updates)
    # (the NIS per dof capped at 10), so that the innovations match their covariance instead of half of them failing the
    # gate; with NIS below its dof k stays 1.  0 turns it off.  (race car, speed only, 0.5 m/s^2 of vibration the
    # covariance did not say: 52 % of the IMU samples were gated, sideslip 0.10 -> 0.22 deg)
    imu_noise_adaptation_updates: float = 1000.0
    imu_noise_scale_max: float = 1000.0
    # ... and before that, each IMU axis' noise is measured from the readings themselves (:class:`NoiseMeter`, second
    # differences over imu_noise_meter_samples samples): where it exceeds the sigma the message gives by
    # imu_noise_meter_ratio, the measured sigma is used instead.  The NIS cannot tell the sensor's noise from the model's
    # error, which is correlated in time, so the factor k stops at NIS = dof and weighs the IMU more than its noise
    # warrants: tuning seeds 100-102, an IMU with 0.57 deg/s and 0.15 m/s^2 per sample whose messages claimed the
    # datasheet's 0.2 deg/s and 0.025 m/s^2, mean sideslip over six manoeuvres with GNSS 0.238 deg with k alone, 0.170
    # with the meter (0.173 given the true covariance); with a speed only, four manoeuvres, 0.231 -> 0.171 (0.174).  An
    # IMU as quiet as it says never reaches the ratio: the package's suite's figures are unchanged to the last digit
    # with GNSS, without and with a speed only.  0 samples: off.
    imu_noise_meter_samples: float = 400.0
    imu_noise_meter_ratio: float = 1.25
    accelerometer_model_sigma: float = 0.1
    accelerometer_model_relative: float = 0.0  # plus this share of the model's horizontal acceleration (m/s^2 per m/s^2)
    wheel_rate_model_sigma: float = 0.02  # times the spin rate: a real tire's effective rolling radius is known to 1-2 %
    # what the published uncertainties add to the covariance, which knows only the modelled errors: the tire model's share of
    # the sideslip (a share of the sideslip, and a floor, rad) and of the tire forces (a share of each force)
    sideslip_model_relative: float = 0.25
    sideslip_model_floor_rad: float = 0.002
    # 10 %: with the force errors Gauss-Markov (their covariance no longer keeps its 500 N prior) 5 % covered 80-85 % of the
    # harness' tire-force errors in 2 sigma where the tires saturate, 8 % 87 % (tuning seeds 100-102)
    tire_force_model_relative: float = 0.10
    # ... and, for the longitudinal and lateral forces, this share of the wheel load: what a tire carries that no vehicle
    # file describes whatever the slip (conicity and ply steer, 1-3 % of the load on passenger tires; the deflection a
    # standing tire keeps from how it stopped).  A share of the force alone claimed a few newtons on a straight and at a
    # standstill, where the errors are tens of newtons.  Tuning seeds 100-102, tire-force errors inside 2 sigma: standing
    # 70.9 -> 97.2 %, speed changes 95.5 -> 100 %, low speed 90.7 -> 99.6 %, reversing 93.4 -> 100 % (0.02: 99.4-100 %)
    tire_force_model_load_share: float = 0.01
    # errorEKF-FE extra states
    forces: tuple = ("longitudinal", "lateral", "yaw", "roll", "pitch")
    force_sigma: dict = field(default_factory=lambda: {"longitudinal": 500.0, "lateral": 500.0, "yaw": 500.0, "front_lateral": 500.0,
                                                        "rear_lateral": 500.0, "roll": 300.0, "pitch": 300.0})  # N, N, N m, N, N, N m, N m
    # The walk per sqrt(s) of each force error has two parts. A base (N, N m), small for the lateral force and yaw
    # moment: below half the friction a tire model is nearly right, and a free lateral correction is exactly what lets a
    # sideslip error hide (with a sideslip error d_beta, forces (Cf + Cr) d_beta and a yaw moment (Cf lf - Cr lr) d_beta
    # cancel it, and no measurement changes; issue 14): with the old 50 N + 2 %/sqrt(s) of the forces, a circle at 4.5 m/s^2
    # let the sideslip drift 0.3-0.5 deg with the heading, and braking in a turn drove the heading 3-8 deg off.
    force_walk: dict = field(default_factory=lambda: {"longitudinal": 300.0, "lateral": 5.0, "yaw": 5.0, "front_lateral": 5.0,
                                                       "rear_lateral": 5.0, "roll": 20.0, "pitch": 20.0})  # per sqrt(s)
    # Plus this share of the change of the tire forces the error acts beside (per re-linearisation, as a walk; all four
    # tires' longitudinal or lateral force, an axle's lateral force, the lateral forces' yaw moment about base_link): a
    # model's force error moves with its operating point, so it may change where the forces change (a sine steer), and is
    # held where they do not (a steady circle).  There is no third part for the tires' utilisation: a walk growing towards
    # the friction limit (0.25 of the forces per sqrt(s) at full utilisation) was meant for a model characteristic
    # furthest from the real tire where it bends over, but there the forces hardly change with slip angle, and a free
    # correction is what lets the sideslip drift.  Without it, on tuning seeds 100-109, the sideslip's mean over six
    # manoeuvres went 0.265 -> 0.229 deg with GNSS, 0.311 -> 0.278 without and 0.351 -> 0.212 with a race car's sensors
    # only (step steer 0.47 -> 0.29, friction step 1.08 -> 0.55), the lateral forces 3.92 -> 3.97 %, 4.59 -> 4.45 %.
    force_walk_rate: float = 0.25
    # ... the change of the tire forces' level smoothed over this time (s; an exponential mean per re-linearisation):
    # each IMU update jolts the model's slip angles, and the jitter of the forces it gave (tens of newtons every 20 ms
    # on a straight) drove the walk as a force change would.  The corrections then wandered with it, a yaw moment of
    # 50 N m is a yaw rate of 0.15 deg/s at 17 m/s, and without GNSS the gyroscope's bias could not be told from it
    # (its sigma 0.22 deg/s after 10 s straight, 0.12 with 0.1 s).  Tuning seeds 100-109, mean sideslip over six
    # manoeuvres: 0.164 -> 0.151 deg with GNSS, 0.257 -> 0.249 without, 0.211 -> 0.180 speed only (lateral forces 4.17
    # -> 4.30 %).  0.1 s gave 0.148, 0.233, 0.175, but after a second of NaN IMU samples and a GNSS outage it let the
    # position go 4.7 m off (test_errorekf_vehicle's faults; 0.6 m with 0.05 or none; not traced: probably the jitter's walk had been
    # absorbing the jolt of the first updates after a gap).  0.3 s: 0.151, 0.236, 0.181.
    force_walk_smoothing_s: float = 0.05
    # the force correction fades with this time constant (s; 0: kept): a correction the measurements stop asking for, one
    # learnt for forces the car no longer has, does not stay (a first-order Gauss-Markov force error instead of a random walk)
    force_memory_s: float = 3.0
    # ... except the lateral part (the force across the heading, the yaw moment), which scales with the tires' lateral
    # force where that falls (a tire model's error is a share of its force: gone on the straight after a lane change) and
    # is otherwise kept.  In steady cornering the data cannot tell a lateral force error from a sideslip error (issue
    # 14), so what the correction learnt while the forces changed is all there is: fading it handed the sideslip back
    # to the tire model (a step steer's sideslip drifted to the open loop's, 0.3-0.9 deg off, and the GNSS course turned
    # the heading the other way).  While a friction estimator sees an axle saturate (:attr:`tires_saturate`) it fades
    # with time after all (saturated_lateral_memory_s): there the forces do not depend on the slip angle, and the error
    # is the friction's, which that estimator takes.  F_0 (N) keeps small forces from scaling it; 0: the lateral part
    # fades with time too.
    # Tuning seeds 100-109, mean sideslip over six manoeuvres: 0.222 -> 0.177 deg with GNSS (step steer 0.33 -> 0.20,
    # friction step 0.56 -> 0.48), 0.275 -> 0.259 without, 0.211 -> 0.212 with speed only (lateral force 4.50 -> 4.17 %).
    lateral_correction_floor_n: float = 500.0
    # ... and the time (s) it fades in while an axle saturates (0: force_memory_s): the friction estimator needs a second or
    # two to take a drop, and the correction learnt on the grip before it held the sideslip off until it faded (friction
    # step, tuning seeds 100-101: sideslip 0.311 -> 0.282 deg with GNSS, 0.552 -> 0.463 without; 3 s before; nothing
    # else saturates on the tuning manoeuvres)
    saturated_lateral_memory_s: float = 0.5
    lateral_level_smoothing_s: float = 0.1
    # A slide the model does not know of (the road lost grip; the friction estimate needs a second or two of it) shows
    # first in the GNSS course: the velocity across the heading.  Its mean innovation over slide_innovation_s (s),
    # beyond the receiver's sigma, gives the lateral force errors an extra walk m dv / T^1.5 (T = slide_walk_response_s;
    # 0: off), so that their correction takes the slide and the heading, which the gyroscope holds, does not (tuning
    # seeds 100-109, friction step with GNSS: the heading turned 0.5-0.8 deg in the 2 s before the friction estimate
    # caught up and stayed so at the limit, where the sideslip cannot tell; sideslip 0.48 -> 0.40 deg).
    # The noise the mean is judged against is the larger of the receiver's sigma and the innovations' own RMS over
    # slide_scatter_s: a receiver whose covariance claims 0.05 m/s and delivers 0.11 otherwise set it off on noise
    # (tuning seeds, six manoeuvres with that receiver: 0.197 deg without the watch, 0.226 with it judged by the claim,
    # 0.190 judged so; nominal 0.165 either way).
    slide_innovation_s: float = 0.5
    slide_walk_response_s: float = 0.3
    slide_scatter_s: float = 20.0
    # Without measured wheel torques the longitudinal force error stands for the unknown drive and brake force: it is then
    # a random walk of this size per sqrt(s) (N), kept rather than faded, and goes onto the wheels as their torque
    # (:meth:`VehicleErrorEKF._torques_from_correction`)
    unknown_torque_walk: float = 1000.0
    # ... and the white acceleration along the heading is this one (m^2/s^3) instead of plant_sigma2[0]
    unknown_torque_plant_sigma2: float = 0.1
    # ... and split as a drive along the car's direction of travel, or a brake against it: that direction is the sign of
    # the model's speed along the heading, kept while the speed is below this (m/s).  The instantaneous sign flipped with
    # a standing model's jitter about 0, and each flip put a held (braking) force on the driven wheels alone as a drive
    # (front tires at -4000 N, the truth's 0; tuning seed 102).  With a speed only, tuning seeds 100-102 standing: Fx 8.9
    # -> 0.49 %, Fy 26.1 -> 11.8 %; reversing, car park, brake in turn, friction step unchanged.
    travel_direction_speed_m_s: float = 0.1
    imu_biases: bool = True
    gyro_bias_sigma: float = 0.01  # rad/s (0.6 deg/s)
    gyro_bias_walk: float = 2e-5  # rad/s per sqrt(s) (a MEMS gyroscope's bias wanders by a few deg/h)
    accel_bias_sigma: float = 0.3  # m/s^2
    accel_bias_walk: float = 2e-3  # m/s^2 per sqrt(s)
    # scale-factor error of the yaw-rate axis (a 1 % error reads 0.2 deg/s at 20 deg/s): 0.5 %, a MEMS part's after calibration.
    # In steady cornering a scale error (the heading drifting) and a sideslip drift explain a GNSS course alike, so the prior
    # decides between them.  A tight prior (0.1 %) helps a perfect gyroscope (sideslip 0.27 -> 0.17 deg, nominal circle) and
    # hurts a real one: a -0.47 % gyroscope (harness seed 102) then drifts the heading 0.6 deg in a circle and the sideslip
    # takes the opposite (0.46 deg RMSE; 0.21 with 0.5 %); on the tuning seeds the two tie on average.  Measured again
    # on 2026-12-07 with 0.2 % (tuning seeds 100-104, six manoeuvres, mean sideslip): with GNSS 0.116 -> 0.110 deg (friction
    # step 0.317 -> 0.277, step steer 0.108 -> 0.113), without 0.156 -> 0.158, speed only 0.134 -> 0.144 (seeds 100-102).
    gyro_scale_sigma: float = 0.005
    gyro_scale_walk: float = 1e-5  # per sqrt(s)
    # the IMU's tilt: small rotations about its own x and y axes that the vehicle file's mounting does not hold (rad; an
    # IMU fitted by hand is 0.5-1 deg off).  In a turn a tilted gyroscope reads the yaw rate times the tilt on its x or y
    # axis, which no bias explains (it comes and goes with the yaw rate); without this state the model's roll and pitch
    # took it, the roll put gravity into the lateral acceleration (g x 0.5 deg = 0.09 m/s^2, 0.3 deg/s of yaw rate at
    # 17 m/s), and without GNSS the yaw rate came out worse than the raw gyroscope's
    imu_tilt_sigma: float = 0.017
    imu_tilt_walk: float = 1e-6  # rad per sqrt(s)
    # ... learnt only while the model drives forwards at least this fast (m/s): the tilt is a constant of the mounting,
    # and at the start of a weaving reverse (test_harness, seed 100) with the gyroscope's roll and pitch axes given a
    # constant road-rate allowance of 0.1 rad/s, the tilt and the accelerometer's bias took the lateral acceleration the
    # model had not yet built, turned the heading 35 deg and locked the GNSS velocity out by its gate (position 10 m)
    imu_tilt_min_speed_m_s: float = 2.0
    # reversing (model forward speed below -0.5 m/s) while the accelerometer's x or y bias sigma is above
    # ``reverse_accel_bias_settled_sigma`` (m/s^2), the accelerometer's model sigma is at least this (m/s^2).  Reversing,
    # a heading error turns the model's lateral acceleration the other way than driving forwards (its tires see the
    # velocity from behind), and the updates, which had tied the heading to the unsettled bias and the lateral force
    # correction, moved it the wrong way in a loop: on the harness' weaving reverse from the start the heading ran
    # 5-25 deg off within 2 s and the GNSS velocity was gated out until its relock 10 s later (tuning seeds 100-105:
    # position up to 2.1 m, 38 m without GNSS; 0.2-0.7 and 0.6-2.1 m with it, the lateral forces 5.1 -> 4.6 %)
    reverse_accelerometer_model_sigma: float = 0.5
    reverse_accel_bias_settled_sigma: float = 0.05
    # the scale factor is observed only while the yaw rate is at least this (rad/s, ~5.7 deg/s): its regressor is the
    # model's yaw rate, whose own error then enters the innovation with it, E[r_hat nu] = -P_rr, and drives the scale
    # towards zero gain by P_ss P_rr / S per update whatever the truth (on a straight road, where the model's yaw rate is
    # only its jitter of ~0.003 rad/s, the scale ran from 0 to -0.6 % in 12 s; 0.85 % was the truth, and the 0.26 deg/s
    # of yaw rate it cost in the step steer that followed turned the heading 1.4 deg and the sideslip with it)
    gyro_scale_min_rate_rad_s: float = 0.1
    # the wheels' rolling radius: a wheel rate reads (1 + k) times the model's, k = r_file / r_tire - 1 per axle (a tire
    # worn by 6 mm turns 2 % faster than the file's new one; the data sheet's radius and the (2 r0 + r_s) / 3 rule are
    # themselves good to ~1 %).  Taken as white noise (wheel_rate_model_sigma alone) a 1.5 % radius error became a
    # 1.5 % speed error: 0.25 m/s at 17 m/s, and the position between GNSS fixes 0.75-2.9 m off (tuning seeds 100-101,
    # radius x0.985).  As a state GNSS velocity and fixes learn it (without GNSS it is held, wheel_scale_gnss_s).
    wheel_scales: bool = True
    wheel_scale_sigma: float = 0.02
    wheel_scale_walk: float = 1e-5  # per sqrt(s)
    # the scale is observed only on a wheel spinning at least this fast (rad/s; ~3 m/s at 0.3 m): its regressor is the
    # model's spin rate, whose error enters the innovation with it (as gyro_scale_min_rate_rad_s) ...
    wheel_scale_min_rate_rad_s: float = 10.0
    # ... rolling with a model slip below this (a driven or braked wheel's slip is the slip stiffness's, +-25 %: at full
    # throttle with traction control it took the front scale to -80 % in a second, a mass 60 % off the truth's helping) ...
    wheel_scale_max_slip: float = 0.01
    # ... and only while GNSS (a fix or a velocity) was accepted within this long (s).  Without it the lateral
    # acceleration v r is what tells the speed, and an accelerometer's own 1 % scale factor reads as much: the scales
    # wandered within their prior and the dead-reckoned position with them (tuning seeds 100-101 without GNSS, exact
    # radius: lane change 0.63 -> 1.20 m, speed changes 1.75 -> 2.70 m).  Held, they keep what GNSS taught them.
    wheel_scale_gnss_s: float = 5.0
    # ... and only once GNSS has been accepted for this long since the start (s), as the SPI's parameters_after_s: before
    # the velocity has settled its error reads as a radius (a mass 60 % off took the scales to +1.6 % in the first
    # second of a full-throttle launch, and the full braking that followed diverged).  10 s cost the short eval runs
    # their learning (step steer position 0.45 -> 0.86 m, lane change 0.48 -> 0.73, eval seeds 0-2)
    wheel_scale_after_s: float = 3.0
    # the road's slope under the car: gravity's east and north components (m/s^2) in the model, which drives a level road.
    # On a rising road the car slows by g sin(grade) while the accelerometer, which reads what the tires push, does not
    # see it: the speed says what the accelerometer does not, which no force error (seen by both) and no accelerometer bias
    # (seen by it alone) explains.  Taken as a force error, a 3 % plane published m g 0.03 (~450 N) as longitudinal tire
    # force and, with a speed alone for the drive force, as the drive itself.  The slope is a random walk per metre
    # driven (a road's grade changes with distance, not time; standing, it does not change).
    # Off by default: on the accuracy harness, whose roads are level but for one plane, it cost as much as it gained
    # (docs/accuracy.md, "The road's slope"); the node's model.road_slope turns it on.
    road_slope: bool = False
    road_slope_sigma: float = 0.3  # m/s^2 (3 % of g)
    road_slope_across_sigma: float = 0.03  # m/s^2 at the start, across the heading
    road_slope_walk: float = 0.005  # m/s^2 per sqrt(m): 5 % of g over 1 km
    # ... and learnt only above this speed (m/s; held below it, the estimate still acting on the model): at walking pace
    # the tires' slip angles and forces are the steering geometry's, and the slope, a lateral accelerometer bias and the
    # force errors took each other's parts (a car park at 2.5 m/s, eval seeds 0-2: a cross slope of 12 %, sideslip 0.04 ->
    # 0.34 deg, lateral forces 6.6 -> 34 %; reversing at 4 m/s 0.03 -> 0.31 deg)
    road_slope_min_speed_m_s: float = 5.0
    # ... and, without measured wheel torques, only while the car turns at least this fast (rad/s): then the drive force is
    # a state too, and along the heading the speed and the accelerometer tell only the accelerometer's bias less the
    # grade; the slope (east-north) and a bias (the car's axes) part only as the heading turns
    road_slope_unknown_torque_rate_rad_s: float = 0.1
    parameters: tuple = ()  # names of PARAMETER_NAMES (mass kg, the others dimensionless)
    parameter_sigma: dict = field(default_factory=lambda: {"mass": 150.0, "friction": 0.2, "cornering_front": 0.25, "cornering_rear": 0.25,
                                                            "longitudinal": 0.25})
    parameter_walk: dict = field(default_factory=lambda: {"mass": 0.5, "friction": 0.02, "cornering_front": 0.01, "cornering_rear": 0.01,
                                                           "longitudinal": 0.01})

    def __post_init__(self):
        self.plant_sigma2 = np.broadcast_to(np.asarray(self.plant_sigma2, float), (N,)).copy()
        if np.any(self.plant_sigma2 < 0) or not np.all(np.isfinite(self.plant_sigma2)):
            raise ValueError("ErrorEkfSettings.plant_sigma2 must be finite and >= 0")
        for name, names, known in (("forces", self.forces, FORCE_NAMES), ("parameters", self.parameters, PARAMETER_NAMES)):
            unknown = [p for p in names if p not in known]
            if unknown:
                raise ValueError(f"ErrorEkfSettings.{name}: unknown {unknown}; known: {', '.join(known)}")
        if not self.lateral_plant_speed_m_s > 0.0:
            raise ValueError(f"ErrorEkfSettings.lateral_plant_speed_m_s must be positive, got {self.lateral_plant_speed_m_s}")


def trapezoidal_transition(M: np.ndarray, K: np.ndarray, C: np.ndarray, h: float) -> np.ndarray:
    """Error transition (2n, 2n) of one trapezoidal step of M dz_ddot = -K dz - C dz_dot.

    y = [dz, dz_dot] follows y' = J y with J = [[0, I], [-M^-1 K, -M^-1 C]]; the trapezoidal rule
    y+ = (I - h/2 J)^-1 (I + h/2 J) y, with dz eliminated, needs only the integrator's tangent
    W = M + h/2 C + h^2/4 K:  dz_dot+ = W^-1 [-h K, M - h/2 C - h^2/4 K] [dz; dz_dot], dz+ = dz + h/2 (dz_dot + dz_dot+)."""
    n = M.shape[0]
    hC, h2K = 0.5 * h * C, 0.25 * h * h * K
    F = np.zeros((2 * n, 2 * n))
    F[n:] = np.linalg.solve(M + hC + h2K, np.hstack([-h * K, M - hC - h2K]))
    F[:n] = 0.5 * h * F[n:]
    F[:n, :n] += np.eye(n)
    F[:n, n:] += 0.5 * h * np.eye(n)
    return F


@njit(cache=True)
def _map_columns(H, A, B, Gp, size):
    """H (m, 3n) over [z, z_dot, z_ddot] onto an error state [dz, dz_dot, e] of ``size`` columns:
    [H_z + H_a A, H_zd + H_a B, H_a Gp] (z_ddot responds as dz_ddot = A dz + B dz_dot + Gp e; Gp (n, size - 2n))."""
    m, n = H.shape[0], A.shape[0]
    out = np.zeros((m, size))
    out[:, : 2 * n] = H[:, : 2 * n]
    ne = size - 2 * n
    for a in range(m):
        for k in range(n):
            hk = H[a, 2 * n + k]
            if hk != 0.0:
                for j in range(n):
                    out[a, j] += hk * A[k, j]
                    out[a, n + j] += hk * B[k, j]
                for j in range(ne):
                    out[a, 2 * n + j] += hk * Gp[k, j]
    return out


@njit(cache=True)
def tilt_jacobian(h):
    """(3, 2): how a three-axis reading h (sensor frame) changes with small rotations of the sensor about its own x and
    y axes, d = (dx, dy, 0): the sensor reads R(d)^T h = h + h x d."""
    out = np.zeros((3, 2))
    out[0, 1] = -h[2]
    out[1, 0] = h[2]
    out[2, 0] = -h[1]
    out[2, 1] = h[0]
    return out


def heading_covariance(c: float, s: float, along: float, across: float) -> np.ndarray:
    """R diag(along, across) R^T (2, 2) in east-north, R the heading's rotation (c = cos, s = sin of the yaw): a
    covariance given along and across the heading."""
    return np.array([[c * c * along + s * s * across, c * s * (along - across)], [c * s * (along - across), s * s * along + c * c * across]])


@njit(cache=True)
def slope_columns(H, Hx, slope_col):
    """An accelerometer's columns of the road slope (gravity's east and north components g_e, g_n) onto ``Hx`` from
    ``slope_col``: it reads R^T (a - g), so beside the acceleration the slope gives the model (through z_ddot, in the mapped
    H) it reads -d/dg of the same, minus H's own columns of the ENU acceleration's x and y."""
    n = H.shape[1] // 3
    for a in range(H.shape[0]):
        Hx[a, slope_col] -= H[a, 2 * n]
        Hx[a, slope_col + 1] -= H[a, 2 * n + 1]


@njit(cache=True)
def error_block(x, P, y, h, H, R, A, B, Gp, gate, innovation, bias_col, scale_col, tilt_col, slope_col):
    """:meth:`VehicleErrorEKF._apply` compiled: H mapped (:func:`_map_columns`), plus the identity on the m columns
    from ``bias_col`` (a sensor bias state; -1: none), h[2] on ``scale_col`` (the third axis' scale-factor error;
    -1: none), :func:`tilt_jacobian` on the two columns from ``tilt_col`` (the sensor's tilt; -1: none) and
    :func:`slope_columns` on the two from ``slope_col`` (an accelerometer's road slope; -1: none), the innovation
    y - h - H x written to ``innovation``, then :func:`.kalman.joseph_update` (its return value)."""
    Hx = _map_columns(H, A, B, Gp, x.shape[0])
    if slope_col >= 0:
        slope_columns(H, Hx, slope_col)
    if bias_col >= 0:
        for a in range(y.shape[0]):
            Hx[a, bias_col + a] += 1.0
    if scale_col >= 0:
        Hx[2, scale_col] += h[2]
    if tilt_col >= 0:
        Hx[:, tilt_col : tilt_col + 2] += tilt_jacobian(h)
    for a in range(y.shape[0]):
        acc = y[a] - h[a]
        for k in range(x.shape[0]):
            acc -= Hx[a, k] * x[k]
        innovation[a] = acc
    return joseph_update(x, P, innovation, Hx, R, gate)


@njit(cache=True)
def _fe_transition(M, K, C, h, Dr, G, A, B, Gp):
    """The errorEKF-FE's transition (module docstring): its velocity rows G = W^-1 [-h K, M - h/2 C - h^2/4 K, -h Dr]
    (n, 2n + ne), A = -M^-1 K, B = -M^-1 C and Gp = -M^-1 Dr, written in place.  Returns False when M or W is singular."""
    n, ne = M.shape[0], Dr.shape[1]
    LU, piv = M.copy(), np.zeros(n, dtype=np.intp)
    W = np.empty((n, n))
    rhs = np.empty((n, 2 * n + ne))
    for i in range(n):
        for j in range(n):
            hC, h2K = 0.5 * h * C[i, j], 0.25 * h * h * K[i, j]
            W[i, j] = M[i, j] + hC + h2K
            rhs[i, j] = -h * K[i, j]
            rhs[i, n + j] = M[i, j] - hC - h2K
        for j in range(ne):
            rhs[i, 2 * n + j] = -h * Dr[i, j]
    if not lu_factor(LU, piv):
        return False
    ABG = lu_solve_columns(LU, piv, np.hstack((K, C, Dr)))
    A[:, :] = -ABG[:, :n]
    B[:, :] = -ABG[:, n : 2 * n]
    Gp[:, :] = -ABG[:, 2 * n :]
    if not lu_factor(W, piv):
        return False
    G[:, :] = lu_solve_columns(W, piv, rhs)
    return True


@njit(cache=True)
def propagate_fe(P, G, h, plant, decay, FP):
    """P <- F P F^T + plant (symmetrised) for the errorEKF-FE's F = [[I + h/2 G_1, h/2 (I + G_2), h/2 G_e], G, [0, 0, D]],
    G (n, 2n + ne) its velocity rows (:func:`_fe_transition`), D = diag(``decay``) (ne,) the extra states' first-order
    decay per step (1: a random walk): two (n, m) products instead of two (m, m) ones; ``FP`` (m, m) work array."""
    n, m = G.shape[0], P.shape[0]
    GP = G @ P
    for r in range(n):
        for j in range(m):
            FP[r, j] = P[r, j] + 0.5 * h * (P[n + r, j] + GP[r, j])
            FP[n + r, j] = GP[r, j]
    for r in range(2 * n, m):
        for j in range(m):
            FP[r, j] = decay[r - 2 * n] * P[r, j]
    X = FP @ G.T
    for i in range(m):
        for r in range(n):
            P[i, r] = FP[i, r] + 0.5 * h * (FP[i, n + r] + X[i, r])
            P[i, n + r] = X[i, r]
        for r in range(2 * n, m):
            P[i, r] = FP[i, r] * decay[r - 2 * n]
    for i in range(m):
        for j in range(i, m):
            v = 0.5 * (P[i, j] + P[j, i]) + plant[i, j]
            P[i, j] = v
            P[j, i] = v


@njit(cache=True)
def feed_back(x, q, qd, qdd, A, B, Gp, P):
    """errorEKF-FE feedback of x = [dz, dz_dot, e]: q + dz, qd + dz_dot, qdd + A dz + B dz_dot + Gp e (new arrays), with
    the finiteness of P and the new q."""
    n = q.shape[0]
    ne = Gp.shape[1]
    q1, qd1, qdd1 = np.empty(n), np.empty(n), np.empty(n)
    finite = True
    for i in range(n):
        q1[i] = q[i] + x[i]
        qd1[i] = qd[i] + x[n + i]
        acc = 0.0
        for j in range(n):
            acc += A[i, j] * x[j] + B[i, j] * x[n + j]
        for j in range(ne):
            acc += Gp[i, j] * x[2 * n + j]
        qdd1[i] = qdd[i] + acc
        finite = finite and math.isfinite(q1[i]) and math.isfinite(qdd1[i])
    for i in range(P.shape[0]):
        for j in range(P.shape[1]):
            finite = finite and math.isfinite(P[i, j])
    return q1, qd1, qdd1, finite


@njit(cache=True)
def _imu_blocks(x, P, q, qd, qdd, S, r, gyro, accel, gyro_var, accel_var, A, B, Gp, gate, use_gyro, use_accel, nu_gyro, nu_accel, gyro_bias_col,
                accel_bias_col, gyro_scale_col, tilt_col, gravity, slope_col):
    """:meth:`VehicleErrorEKF.update_imu` compiled: the gyroscope block, then the accelerometer block
    (:func:`error_block`; sensor models of :mod:`state_observer.sensors.models`, mounting rotation S, lever arm r,
    per-axis noise variances (3,) (rad/s)^2, (m/s^2)^2, the bias states' first columns or -1, the gyroscope's z scale
    factor's column or -1, the IMU tilt's first column or -1; ``gyro`` and ``accel`` with the estimated biases, scale
    and tilt already removed; the model's ``gravity`` (3,) ENU and the road slope's first column or -1).  Returns both codes of :func:`.kalman.joseph_update` (0 for a block
    not used)."""
    St = np.ascontiguousarray(S.T)
    nis_gyro = nis_accel = 0.0
    if use_gyro:
        h, H = models.gyroscope_kernel(q, qd, St)
        nis_gyro = error_block(x, P, gyro, h, H, np.diag(gyro_var), A, B, Gp, gate, nu_gyro, gyro_bias_col, gyro_scale_col, tilt_col, -1)
    if use_accel:
        h, H = models.accelerometer_kernel(q, qd, qdd, r, St, gravity)
        nis_accel = error_block(x, P, accel, h, H, np.diag(accel_var), A, B, Gp, gate, nu_accel, accel_bias_col, -1, tilt_col, slope_col)
    return nis_gyro, nis_accel


@njit(cache=True)
def untilt_into(reading, full, dx, dy, out):
    """An IMU reading (3,) turned back by the estimated tilt d = (dx, dy, 0), R(d) y = y + d x y (first order), into
    ``out``; the cross terms from ``full`` (the reading, or with its missing axes filled by the model's prediction: a
    missing axis stays missing, :meth:`VehicleErrorEKF._untilted`)."""
    out[0] = reading[0] + dy * full[2]
    out[1] = reading[1] + -dx * full[2]
    out[2] = reading[2] + (dx * full[1] - dy * full[0])


@njit(cache=True)
def road_rate_into(innovation, S, weight, dt, smoothing, decay, leak, grade_max, gain2, state, var):
    """One gyroscope innovation (3,) rad/s, sensor axes (non-finite: 0), times ``weight``, into the road-rate tracker
    ``state`` (6,), per vehicle axis i = x, y (S the mounting rotation, sensor to vehicle; n = w (S nu)_i): the implied
    road angle, a <- leak a + n dt (rad); while |a| <= grade_max its mean, m <- m + smoothing (n - m), and its held
    square, h <- max(m^2, decay h), else m = h = 0; ``var`` (3,) <- gain2 diag(S^T diag(h_x, h_y, 0) S), the variance
    it adds to the gyroscope's axes.  State layout (m_x, m_y, h_x, h_y, a_x, a_y) (:meth:`VehicleErrorEKF._track_road_rate`)."""
    for i in range(2):
        nu = 0.0
        for k in range(3):
            if math.isfinite(innovation[k]):
                nu += S[i, k] * innovation[k]
        state[4 + i] = leak * state[4 + i] + weight * nu * dt
        if abs(state[4 + i]) > grade_max:
            state[i] = 0.0
            state[2 + i] = 0.0
        else:
            state[i] += smoothing * (weight * nu - state[i])
            state[2 + i] = max(state[i] * state[i], decay * state[2 + i])
    for k in range(3):
        var[k] = gain2 * (S[0, k] * S[0, k] * state[2] + S[1, k] * S[1, k] * state[3])


@njit(cache=True)
def corrected_imu(gyro, accel, bias, tilt, gyro_scale, gyro_out, accel_out):
    """A complete IMU sample (every axis finite) with the estimated biases ``bias`` (6,), tilt (dx, dy) and gyroscope z
    scale factor removed, into ``gyro_out`` and ``accel_out`` (:meth:`VehicleErrorEKF._corrected_gyro`,
    ``_corrected_accel``, compiled)."""
    unbiased = np.empty(3)
    for i in range(3):
        unbiased[i] = gyro[i] - bias[i]
    untilt_into(unbiased, unbiased, tilt[0], tilt[1], gyro_out)
    for i in range(3):
        unbiased[i] = accel[i] - bias[3 + i]
    untilt_into(unbiased, unbiased, tilt[0], tilt[1], accel_out)
    gyro_out[2] /= 1.0 + gyro_scale


@njit(cache=True)
def published_tire_forces(tire_out, geo, fc, yaw, x_front, x_rear, out):
    """The four tires' forces into ``out`` (4, 3), N, in their tire frames (``tire_out`` the model's tire rows fx, fy,
    fz, ...; ``geo`` its contact rows): the model's, plus the lateral part of its force correction ``fc`` (the filter's
    lateral force and yaw moment errors stand for the tire model's errors): to the two axles (at x_front, x_rear from
    base_link, m) as the pair of axle forces with that sum and moment about base_link, then within an axle by normal
    load, each wheel's share resolved on its own forward and lateral axes (steered wheels turn them).  The longitudinal
    correction stays off the tires (drag, grade and rolling resistance errors land there too; the tires' longitudinal
    forces follow the measured wheel torques and speeds); the vertical forces are the model's."""
    for wheel in range(4):
        for k in range(3):
            out[wheel, k] = tire_out[k, wheel]
    if not (fc[0] != 0.0 or fc[1] != 0.0 or fc[5] != 0.0):
        return
    c, s = math.cos(yaw), math.sin(yaw)
    across, moment = -s * fc[0] + c * fc[1], fc[5]
    front = (moment - x_rear * across) / (x_front - x_rear) if x_front != x_rear else 0.5 * across
    fz = np.maximum(out[:, 2], 0.0)
    if fz[0] + fz[1] + fz[2] + fz[3] <= 0.0:
        return
    for wheel in range(4):
        axle = wheel // 2
        axle_fz = fz[2 * axle] + fz[2 * axle + 1]
        share = fz[wheel] / axle_fz if axle_fz > 0.0 else 0.5
        # along the car's left (-s, c, 0): a lateral force of the tire (the tire model's error is one of its cornering
        # force) with that component across the car; a steered wheel's longitudinal force stays the model's
        force = (front if axle == 0 else across - front) * share
        out[wheel, 1] += force / max(c * geo[wheel, 4] - s * geo[wheel, 3], 0.5)


@njit(cache=True)
def wheel_rate_jacobian(qd, size, scale_col, observed):
    """(4, size): how the four wheel rates (fl fr rl rr, with the estimated scale factors taken out) change with the error
    state: 1 on each spin rate's column and, from ``scale_col`` (the front and the rear axle's scale factor; -1: none), the
    model's spin rate z_dot[10 + i] on its axle's column for the wheels ``observed`` (bool (4,))."""
    H = np.zeros((4, size))
    for i in range(4):
        H[i, N + 10 + i] = 1.0
        if scale_col >= 0 and observed[i]:
            H[i, scale_col + i // 2] = qd[10 + i]
    return H


@njit(cache=True)
def _wheel_rate_block(x, P, qd, rates, var, gate, innovation, scale_col, observed):
    """:meth:`VehicleErrorEKF.update_wheel_rates` compiled for four finite rates (rad/s, the scale factors taken out;
    variances (4,) (rad/s)^2): h = the spin rates z_dot[10:14], H :func:`wheel_rate_jacobian`; returns the code of
    :func:`.kalman.joseph_update`."""
    H = wheel_rate_jacobian(qd, x.shape[0], scale_col, observed)
    for i in range(4):
        acc = rates[i] - qd[10 + i]
        for k in range(x.shape[0]):
            acc -= H[i, k] * x[k]
        innovation[i] = acc
    return joseph_update(x, P, innovation, H, np.diag(var), gate)


class Linearisation(NamedTuple):
    """The errorEKF-FE's model at its last linearisation (:meth:`VehicleErrorEKF.linearise`; the filter's own arrays,
    updated in place: copy to keep them).  The error accelerations are M dz_ddot = -K dz - C dz_dot - Dr e, i.e.
    dz_ddot = A dz + B dz_dot + Gp e; G (N, n) are the velocity rows of the transition F and ``decay`` (n - 2N,) the extra
    states' decay per step (1: a random walk).  M kg and kg m^2, K, C, Dr in the units of the generalised forces."""

    M: np.ndarray | None
    K: np.ndarray | None
    C: np.ndarray | None
    Dr: np.ndarray | None
    A: np.ndarray
    B: np.ndarray
    Gp: np.ndarray
    G: np.ndarray
    decay: np.ndarray


class SensorBookkeeping:
    """What every vehicle filter shares around its updates: gate, per-sensor statistics, divergence flag,
    and the GNSS re-acquisition (a fix rejected for longer than ``reacquire_after_s`` moves the position
    to the fix and widens its covariance instead of being rejected for ever).  Subclasses provide
    ``vehicle``, ``settings``, ``P`` and :meth:`shift_position`."""

    def _init_bookkeeping(self, settings: ErrorEkfSettings) -> None:
        self.gate = GateCache(settings.gate_probability)
        self.stats = {name: SensorStatistics() for name in SENSORS}
        self.diverged = False
        self._rejected_since: float | None = None
        self._rejected_offsets: list = []  # (t, fix - model antenna position) of the fixes rejected since _rejected_since
        self.n_resets = 0  # GNSS re-acquisitions
        self.n_relocks = 0  # sensors trusted again after persistent rejections

    def _restart_bookkeeping(self) -> None:
        """A (re)start forgets the divergence flag, a pending re-acquisition and the recent innovations (the
        counts stay): a reset observer is judged on what it does after the reset."""
        self.diverged = False
        self._rejected_since = None
        for st in self.stats.values():
            st.consecutive_rejections = 0
            st.nis_mean_recent = float("nan")

    @property
    def t(self) -> float:
        return self.vehicle.solver.t

    def shift_position(self, offset_m: np.ndarray) -> None:
        """Move the estimated position by ``offset_m`` (ENU, m), as the GNSS re-acquisition does."""
        raise NotImplementedError

    def initial_sigma(self) -> np.ndarray:
        """Initial 1-sigma of every error state: positions and velocities of the settings."""
        s = self.settings
        return np.concatenate([s.initial_position_sigma, s.initial_velocity_sigma])[: self.P.shape[0]]

    def _after_gnss_fix(self, accepted: bool, antenna_enu_m: np.ndarray, predicted, covariance_m2: np.ndarray) -> bool:
        """Re-acquisition bookkeeping after a fix was offered (``reacquire_*`` settings, :meth:`_fixes_agree`);
        ``predicted()`` gives the model's antenna position, evaluated for rejected fixes only.  Returns ``accepted``."""
        if accepted or not np.all(np.isfinite(antenna_enu_m)):
            self._rejected_since = None
            return accepted
        s = self.settings
        offset = np.asarray(antenna_enu_m, float) - predicted()
        if self._rejected_since is None:
            self._rejected_since, self._rejected_offsets = self.t, []
        self._rejected_offsets.append((self.t, offset))
        while self.t - self._rejected_offsets[0][0] > s.reacquire_after_s:  # the agreement is judged over the last window
            self._rejected_offsets.pop(0)
        waited = self.t - self._rejected_since
        if waited < s.reacquire_after_s or not self._fixes_agree(covariance_m2):
            return False
        mean = np.mean([o for _, o in self._rejected_offsets], axis=0)
        if np.hypot(mean[0], mean[1]) > s.reacquire_far_m and waited < s.reacquire_far_after_s:
            return False  # a jump the wheels and the IMU could not have missed: a receiver's error until it persists
        self.shift_position(np.array([mean[0], mean[1], 0.0]))  # horizontally: the road's height is not the car's
        self.P[:2, :] = 0.0
        self.P[:, :2] = 0.0
        self.P[:2, :2] = np.asarray(covariance_m2, float)[:2, :2] + np.eye(2) * 1e-3
        self._rejected_since = None
        self.n_resets += 1
        return False

    def _fixes_agree(self, covariance_m2: np.ndarray) -> bool:
        """Whether the fixes rejected over the last ``reacquire_after_s`` tell one position (their offsets from the model
        within 4 sigma + 1 m of their mean, horizontally): scattered fixes (multipath) are no ground to move the car."""
        offsets = np.array([o[:2] for _, o in self._rejected_offsets])
        sigma = math.sqrt(max(float(np.max(np.linalg.eigvalsh(np.asarray(covariance_m2, float)[:2, :2]))), 0.0))
        return len(offsets) >= 3 and float(np.max(np.linalg.norm(offsets - offsets.mean(axis=0), axis=1))) <= 4.0 * sigma + 1.0

    def _gated_update(self, name: str, innovation: np.ndarray, H: np.ndarray, R: np.ndarray) -> bool:
        """One gated block on (x, P).  A sensor rejected ``relock_after`` times in a row while its samples are
        finite says the model, not the sensor, is wrong: the states it observes get their initial
        covariance back and the block is applied ungated (counted in ``n_relocks``)."""
        stats = self.stats[name]
        gate = self.gate(len(innovation))
        if stats.consecutive_rejections >= self.settings.relock_after and np.all(np.isfinite(innovation)):
            observed = np.flatnonzero(np.any(H != 0.0, axis=0))
            self.P[observed, observed] += np.square(self.initial_sigma()[observed])
            gate = math.inf
            self.n_relocks += 1
        return sequential_update(self.x, self.P, innovation, H, R, gate, stats)

    def _check_divergence(self, state: np.ndarray | None, finite: bool | None = None) -> None:
        """Flag divergence: a sensor's recent mean NIS above ``divergence_nis_factor`` times its dimension,
        or a non-finite covariance or ``state`` (``finite``: that test already made)."""
        limit = self.settings.divergence_nis_factor
        for st in self.stats.values():
            if st.accepted > 50 and st.dof and st.nis_mean_recent > limit * st.dof:
                self.diverged = True
        if finite is None:
            finite = np.all(np.isfinite(self.P)) and np.all(np.isfinite(state))
        if not finite:
            self.diverged = True


class VehicleErrorEKF(SensorBookkeeping):
    """errorEKF(-FE) on a :class:`state_observer.vehicle.reduced.ReducedVehicle` (module docstring).

    Per model step: :meth:`predict` (inputs, model step, covariance), any number of ``update_*`` calls
    for the measurements stamped within the step, then :meth:`correct`."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None):
        self.vehicle = vehicle
        self.mounts = mounts
        self.settings = s = settings or ErrorEkfSettings()
        self.dt = dt = vehicle.dt_s
        fe = s.force_estimation
        # extra states after [dz, dz_dot] (errorEKF-FE only): force errors, IMU biases, model parameters
        self.force_names = tuple(s.forces) if fe else ()
        self.gyro_bias_col = 2 * N + len(self.force_names) if fe and s.imu_biases else -1
        self.accel_bias_col = self.gyro_bias_col + 3 if self.gyro_bias_col >= 0 else -1
        self.gyro_scale_col = self.gyro_bias_col + 6 if self.gyro_bias_col >= 0 else -1  # the yaw-rate axis' scale factor
        self.imu_tilt_col = self.gyro_bias_col + 7 if self.gyro_bias_col >= 0 else -1  # the IMU's tilt about its x and y axes
        after_imu = 2 * N + len(self.force_names) + (IMU_STATES if self.gyro_bias_col >= 0 else 0)
        self.wheel_scale_col = after_imu if fe and s.wheel_scales else -1
        self.parameter_names = tuple(s.parameters) if fe else ()
        after_wheels = after_imu + (WHEEL_SCALE_STATES if self.wheel_scale_col >= 0 else 0)
        self.slope_col = after_wheels if fe and s.road_slope else -1
        self.parameter_col = after_wheels + (SLOPE_STATES if self.slope_col >= 0 else 0)
        n = self.parameter_col + len(self.parameter_names)
        self.x = np.zeros(n)
        self.P = np.zeros((n, n))
        self.imu_bias = np.zeros(6)  # estimated gyroscope (rad/s) and accelerometer (m/s^2) biases, sensor axes
        self.gyro_scale = 0.0  # estimated scale-factor error of the gyroscope's z axis (it reads (1 + s) times the rate)
        self.imu_tilt = np.zeros(2)  # estimated tilt of the IMU about its own x and y axes beyond its mounting (rad)
        # the road's roll and pitch rates (settings gyro_road_rate_*): the gyroscope's innovation on the vehicle's x and y
        # axes averaged (rad/s), its square held, and the variance it adds to the gyroscope's own axes
        self._road_rate, self._road_rate_t = np.zeros(6), math.nan  # (mean x, y, held square x, y, implied angle x, y), model time
        self._gyro_road_var = np.zeros(3)
        self.wheel_scale = np.zeros(2)  # estimated wheel-rate scale factor k of the front and rear axle (a rate reads (1 + k) times)
        self.road_slope = np.zeros(2)  # estimated gravity's east and north components (m/s^2; the model's, vehicle.road_slope)
        self._gnss_accepted_t = -math.inf  # model time of the last accepted GNSS fix or velocity (s; wheel_scale_column)
        self._gnss_since_t = math.inf  # ... and of the first one since the start
        # only a gyroscope with x and y axes tells the tilt from the accelerometer's biases (the yaw rate times the tilt)
        self._tilt_observable = False
        self._parameter_index = np.array([PARAMETER_NAMES.index(p) for p in self.parameter_names], dtype=np.intp)
        self._initial_parameters = None  # the model's parameters at the first start (the mass bounds are relative to it)
        self._previous_scales = None  # the tire force scales (smoothed) at the last re-linearisation (force_walk_rate)
        plant = np.zeros((n, n))
        plant[: 2 * N, : 2 * N] = white_acceleration_covariance(s.plant_sigma2, dt)
        self._white_block = white_acceleration_block(dt)  # one coordinate's share of it per unit intensity (_heading_frame)
        plant[2 * N :, 2 * N :] = np.diag(np.square(self._extra_values(s.force_walk, s.gyro_bias_walk, s.accel_bias_walk, s.gyro_scale_walk,
                                                                        s.imu_tilt_walk, s.wheel_scale_walk, 0.0, s.parameter_walk)) * dt)
        self.plant = plant
        if not fe:
            self.F = np.block([[np.eye(N), dt * np.eye(N)], [np.zeros((N, N)), np.eye(N)]])
        self._init_bookkeeping(s)
        self.n_force_resets = 0  # force corrections dropped because the model step failed with them
        self.relinearise = fe  # the transition follows the model (else constant F)
        self._steps_since_transition = 0
        self._M = self._K = self._C = self._Dr = None  # mass matrix, tangent and force-error response of the last linearisation
        self._A, self._B = np.zeros((N, N)), np.zeros((N, N))  # -M^-1 K, -M^-1 C at the last linearisation
        self._Gp = np.zeros((N, n - 2 * N))  # acceleration response to the extra states (-M^-1 dr/de)
        self._G = np.zeros((N, n))  # errorEKF-FE: the velocity rows of F (_fe_transition)
        self._directions = np.zeros((N, len(self.force_names)))  # generalised-force direction of each force-error state
        self._correction_decay = math.exp(-dt / s.force_memory_s) if fe and s.force_memory_s > 0.0 else 1.0
        self._saturated_decay = math.exp(-dt / s.saturated_lateral_memory_s) if s.saturated_lateral_memory_s > 0.0 else self._correction_decay
        self._forget_lateral_history()
        self._level_gain = dt / (dt + s.lateral_level_smoothing_s)
        self._correction_yaw = None  # heading at which the force correction's x-y part was last turned (rad)
        # the force errors are first-order Gauss-Markov processes, in the covariance as in the correction they feed
        # (stationary sigma: walk sqrt(force_memory_s / 2)); the biases and parameters are random walks
        self._extra_decay = np.ones(n - 2 * N)
        self._extra_decay[: len(self.force_names)] = self._correction_decay
        desc = getattr(vehicle, "desc", None)
        self._axle_x_m = ((float(desc.corners[0].wheel_centre_m[0]), float(desc.corners[2].wheel_centre_m[0])) if desc is not None
                          else (0.0, 0.0))  # front and rear axle ahead of base_link
        self._work = np.zeros((n, n))
        # wheel torques: measured (set by the caller), or estimated from the longitudinal force correction
        self.torques_known = True
        self.unknown_drive_force_n = 0.0  # the drive (+) or brake (-) force along the heading that unknown torques give (N)
        self.travel_direction = 1.0  # +1 forwards, -1 backwards: the model's, kept at low speed (travel_direction_speed_m_s)
        self.imu_noise_scale = {"gyroscope": 1.0, "accelerometer": 1.0}  # the IMU blocks' noise factors (imu_noise_adaptation_updates)
        # the gyroscope's and accelerometer's measured noise (imu_noise_meter_samples)
        self.imu_noise_meters = (NoiseMeter(s.imu_noise_meter_samples), NoiseMeter(s.imu_noise_meter_samples)) if s.imu_noise_meter_samples > 0 else None
        self._long_col = self.force_names.index("longitudinal") if "longitudinal" in self.force_names else -1
        corners = desc.corners if desc is not None else ()
        self._drive_share = _shares([c.max_drive_torque_n_m for c in corners])
        self._brake_share = _shares([c.max_brake_torque_n_m for c in corners])
        self._compiled_sensors = True  # the IMU update in one compiled call (the sensor models of the 14-DOF state)

    def _extra_values(self, forces: dict, gyro: float, accel: float, gyro_scale: float, tilt: float, wheel_scale: float,
                      slope: float, parameters: dict) -> np.ndarray:
        """One value per extra state, in their order (forces, IMU biases, the gyroscope's z scale, the IMU's tilt, the wheel
        scales, the road's slope, parameters)."""
        values = [forces[f] for f in self.force_names]
        if self.gyro_bias_col >= 0:
            values += [gyro] * 3 + [accel] * 3 + [gyro_scale] + [tilt] * 2
        if self.wheel_scale_col >= 0:
            values += [wheel_scale] * WHEEL_SCALE_STATES
        if self.slope_col >= 0:
            values += [slope] * SLOPE_STATES
        return np.array(values + [parameters[p] for p in self.parameter_names], dtype=float)

    def initial_sigma(self) -> np.ndarray:
        """Initial 1-sigma of every error state (the diagonal of P at a start)."""
        s = self.settings
        return np.concatenate([s.initial_position_sigma, s.initial_velocity_sigma,
                               self._extra_values(s.force_sigma, s.gyro_bias_sigma, s.accel_bias_sigma, s.gyro_scale_sigma, s.imu_tilt_sigma,
                                                  s.wheel_scale_sigma, s.road_slope_sigma, s.parameter_sigma)])

    # ----- life cycle ---------------------------------------------------------------------------------
    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        """Start the model at a pose and speed (straight, level); the biases are forgotten, the model parameters kept."""
        self.vehicle.start(speed_m_s=speed_m_s, yaw_rad=yaw_rad, position_m=position_m, t=t)
        self._restart_bookkeeping()
        if self._initial_parameters is None and self.parameter_names:
            self._initial_parameters = self.vehicle.parameters.copy()
        self.P[:] = np.diag(np.square(self.initial_sigma()))
        if self.slope_col >= 0:  # the slope across the heading: road_slope_across_sigma
            k = slice(self.slope_col, self.slope_col + SLOPE_STATES)
            self.P[k, k] = heading_covariance(math.cos(yaw_rad), math.sin(yaw_rad), self.settings.road_slope_sigma**2,
                                              self.settings.road_slope_across_sigma**2)
        self.x[:] = 0.0
        self.imu_bias[:] = 0.0
        self.gyro_scale = 0.0
        self.imu_tilt[:] = 0.0
        self._road_rate[:], self._road_rate_t = 0.0, math.nan
        self._gyro_road_var[:] = 0.0
        self._set_road_slope(np.zeros(2))  # the road's, not the car's: a new start may be anywhere
        self._gnss_accepted_t, self._gnss_since_t = -math.inf, math.inf  # the wheel scales (the car's) are kept, learnt again with GNSS
        self._steps_since_transition = 0
        self._previous_scales = None
        self._correction_yaw = None
        self._forget_lateral_history()
        self.unknown_drive_force_n = 0.0
        self.travel_direction = 1.0

    def _forget_lateral_history(self) -> None:
        """What the lateral correction's memory and the slide watch keep between steps (a start forgets it)."""
        self._lateral_level = None  # the tires' lateral force, smoothed (N; lateral_correction_floor_n)
        self.tires_saturate = False  # set by a friction estimator while an axle saturates: the lateral correction then fades
        # GNSS velocity across the heading the model did not make (m/s, mean), when it was last seen, the extra walk it
        # gives the lateral force errors (N per sqrt(s)) and the innovation array last read (_watch_for_slide)
        self._lateral_innovation, self._slide_t, self._slide_walk, self._slide_innovation_seen = 0.0, None, 0.0, None
        # the mean square of that innovation over slide_scatter_s (m^2/s^2) and how many it has seen
        self._lateral_scatter, self._scatter_n = 0.0, 0

    def predict(self) -> bool:
        """Advance the model one step (inputs already set on the vehicle) and propagate P."""
        v = self.vehicle
        self._torques_from_correction()
        self._turn_correction_with_heading()
        self._fade_correction()
        result = v.step()
        if not result.success and self.force_names and v.force_correction.any():
            # a bad force correction (e.g. after a long sensor outage) must not stop the observer: drop it,
            # widen the force errors and retry the step (a failed step leaves the model unchanged)
            v.force_correction[:] = 0.0
            self.n_force_resets += 1
            k = 2 * N + np.arange(len(self.force_names))
            self.P[k, k] += np.square(self.initial_sigma()[k])
            result = v.step()
        if not result.success:
            return False
        fe = self.settings.force_estimation
        if self.relinearise and self._steps_since_transition == 0:
            if fe:
                self.linearise()  # F is kept as its velocity rows G
            else:
                self.F = self.transition_matrix()  # a model without force estimation (the detailed filter) re-linearises its F
        if self.relinearise:
            self._steps_since_transition = (self._steps_since_transition + 1) % self.settings.transition_every_steps
        if fe:
            propagate_fe(self.P, self._G, self.dt, self.plant, self._extra_decay, self._work)
        else:
            self.P[:] = self.F @ self.P @ self.F.T + self.plant
        self.x[:] = 0.0
        return True

    def _fade_correction(self) -> None:
        """The force correction's memory (``force_memory_s``, ``lateral_correction_floor_n``): its lateral part (the
        force across the heading and the yaw moment) follows the tires' lateral force down, F_c <- F_c (|F_y| + F_0) /
        (|F_y|_prev + F_0) where |F_y| falls, and is otherwise kept; the rest fades with time."""
        d = self._correction_decay
        if d >= 1.0:
            return
        v = self.vehicle
        fc = v.force_correction
        floor = self.settings.lateral_correction_floor_n
        if floor <= 0.0:
            fc *= d
            return
        level = abs(float(v.tire_forces_n[:, 1].sum()))
        previous = self._lateral_level if self._lateral_level is not None else level
        self._lateral_level = level = previous + self._level_gain * (level - previous)
        keep = self._saturated_decay if self.tires_saturate else min(1.0, (level + floor) / (previous + floor))
        yaw = float(v.solver.q[5])
        c, s = math.cos(yaw), math.sin(yaw)
        along, across = d * (c * fc[0] + s * fc[1]), keep * (c * fc[1] - s * fc[0])
        moment = keep * fc[5]
        fc *= d
        fc[0], fc[1], fc[5] = c * along - s * across, s * along + c * across, moment

    def _turn_correction_with_heading(self) -> None:
        """Keep the force correction's x-y part fixed to the heading: it stands for errors of the car's own forces (tires,
        drag), which turn with it.  Left in east-north, a longitudinal correction learnt at the start of a turn leaks across
        the car as it turns (at a yaw rate r and a memory tau it lags the heading by atan(r tau): 40 deg at 16 deg/s and
        3 s, so 800 N of drag correction became 600 N of lateral force, which the model answered with a sideslip error)."""
        if not self.force_names:  # the plain errorEKF (and the detailed model) carries no force correction
            return
        yaw = float(self.vehicle.solver.q[5])
        if self._correction_yaw is not None and yaw != self._correction_yaw:
            c, s = math.cos(yaw - self._correction_yaw), math.sin(yaw - self._correction_yaw)
            fc = self.vehicle.force_correction
            fc[0], fc[1] = c * fc[0] - s * fc[1], s * fc[0] + c * fc[1]
        self._correction_yaw = yaw

    def _torques_from_correction(self) -> None:
        """Without measured wheel torques (the model's are zero, a guess), the force correction's part along the heading is
        the car's unknown drive or brake force: it moves into :attr:`unknown_drive_force_n`, which is kept (not faded) and
        drives the model's wheels as torques, F r_i split as the vehicle file's torque limits (drive along the direction
        of travel on the driven wheels, brake against it on all; that direction is kept at low speed, so a standing car's
        brakes hold it), so the tires carry it through their slip as they carry a measured torque's: the published
        longitudinal forces, and the combined slip that takes lateral grip, follow it."""
        if self.torques_known:
            self.unknown_drive_force_n = 0.0
            return
        if self._long_col < 0:
            return
        v = self.vehicle
        yaw = float(v.solver.q[5])
        c, s = math.cos(yaw), math.sin(yaw)
        fc = v.force_correction
        along = c * fc[0] + s * fc[1]
        fc[0] -= c * along
        fc[1] -= s * along
        force = self.unknown_drive_force_n = self.unknown_drive_force_n + along
        radius = np.maximum(v.contact.r_s, 0.05)
        speed = c * v.solver.qd[0] + s * v.solver.qd[1]
        zero = np.zeros(4)
        if abs(speed) > self.settings.travel_direction_speed_m_s:
            self.travel_direction = math.copysign(1.0, speed)
        if force * self.travel_direction >= 0.0:  # drives the car the way it goes (a standing car: the way it went)
            v.set_inputs(v.steering_wheel_angle_rad, force * self._drive_share * radius, zero)
        else:
            v.set_inputs(v.steering_wheel_angle_rad, zero, abs(force) * self._brake_share * radius)

    def _heading_frame(self, yaw: float) -> None:
        """The force-error directions (along and across the heading at base_link, yaw) and the plant noise of x and y
        with the intensities of ``plant_sigma2[0:2]`` along and across the heading (R diag(q_long, q_lat) R^T)."""
        c, s = math.cos(yaw), math.sin(yaw)
        arm = {"lateral": 0.0, "front_lateral": self._axle_x_m[0], "rear_lateral": self._axle_x_m[1]}
        for k, name in enumerate(self.force_names):
            d = self._directions[:, k]
            if name == "longitudinal":
                d[0], d[1], d[5] = c, s, 0.0
            elif name in ("yaw", "roll", "pitch"):
                d[0], d[1], d[5] = 0.0, 0.0, float(name == "yaw")
                d[3], d[4] = float(name == "roll"), float(name == "pitch")
            else:  # a lateral force at base_link or an axle: the force and its moment about base_link
                d[0], d[1], d[5] = -s, c, arm[name]
        self._force_plant()
        st, solver = self.settings, self.vehicle.solver
        q_long, q_lat = st.plant_sigma2[0:2]
        if not self.torques_known:
            q_long = st.unknown_torque_plant_sigma2
        q_lat *= self._speed_share(st.lateral_plant_speed_m_s)
        block = self._white_block
        if st.yaw_plant_accel_m_s2 > 0.0:
            a_lat = -s * solver.qdd[0] + c * solver.qdd[1]
            q_yaw = st.plant_sigma2[5] * min(1.0, st.yaw_plant_floor + (a_lat / st.yaw_plant_accel_m_s2) ** 2)
            self.plant[np.ix_((5, N + 5), (5, N + 5))] = block * q_yaw
        for coordinates, reference_m_s in ((SPIN_COORDINATES, st.spin_plant_speed_m_s), (VERTICAL_COORDINATES, st.vertical_plant_speed_m_s)):
            share = self._speed_share(reference_m_s) if reference_m_s > 0.0 else 1.0
            q = st.plant_sigma2[coordinates] * share
            for i, rows in enumerate((coordinates, N + coordinates)):  # each coordinate's own 2x2 block (its diagonals)
                for j, cols in enumerate((coordinates, N + coordinates)):
                    self.plant[rows, cols] = block[i, j] * q
        if self.slope_col >= 0:  # a walk per metre driven, along the heading only (road_slope_walk)
            k = slice(self.slope_col, self.slope_col + SLOPE_STATES)
            walk = st.road_slope_walk**2 * math.hypot(solver.qd[0], solver.qd[1]) * self.dt
            self.plant[k, k] = heading_covariance(c, s, walk, 0.0)
        # written every time (not only where q_long != q_lat): a block written at a low speed must not stay at speed
        sigma = heading_covariance(c, s, q_long, q_lat)
        for i in range(2):
            for j in range(2):
                self.plant[i * N : i * N + 2, j * N : j * N + 2] = block[i, j] * sigma

    def _speed_share(self, reference_m_s: float) -> float:
        """(v / reference_m_s)^2 within 1e-3 and 1, v the model's horizontal speed (m/s): the share of a plant noise kept
        at low speed (across the heading and the rate part of the force errors' walk across it: lateral_plant_speed_m_s;
        the spins: spin_plant_speed_m_s; heave, roll, pitch and travels: vertical_plant_speed_m_s)."""
        qd = self.vehicle.solver.qd
        return min(max((math.hypot(qd[0], qd[1]) / reference_m_s) ** 2, 1e-3), 1.0)

    def _force_plant(self) -> None:
        """The random walk of each force error (settings ``force_walk``, ``force_walk_rate``): base + rate * |dF| /
        sqrt(dt_lin), F the tire forces the error acts beside (smoothed over ``force_walk_smoothing_s``), dF their
        change since the last re-linearisation (for the errors across the heading times (v / lateral_plant_speed_m_s)^2
        below that speed); plus,
        for the lateral ones, the walk a slide gives (:meth:`_watch_for_slide`)."""
        s = self.settings
        if not self.force_names:
            return
        scale = self._tire_force_scales()
        if s.force_walk_smoothing_s > 0.0 and self._previous_scales is not None:
            gain = min(1.0, self.dt * s.transition_every_steps / s.force_walk_smoothing_s)
            scale = self._previous_scales + gain * (scale - self._previous_scales)
        change = np.zeros_like(scale)
        if self._previous_scales is not None:
            change = np.abs(scale - self._previous_scales) / math.sqrt(self.dt * s.transition_every_steps)
        self._previous_scales = scale
        rate = s.force_walk_rate * change
        # at walking pace the steering geometry sets the slip angles (as for the plant noise across the heading): the
        # lateral forces' change is the model's own, and a walk following it only let the noise move the sideslip
        slow = self._speed_share(s.lateral_plant_speed_m_s)
        for k, name in enumerate(self.force_names):
            if name in LATERAL_FORCES or name == "yaw":
                rate[k] *= slow
        walk = np.array([s.force_walk[name] for name in self.force_names]) + rate
        if self._slide_walk > 0.0:
            if self._slide_t is None or self.vehicle.solver.t - self._slide_t > 2.0 * s.slide_innovation_s:
                self._slide_walk = 0.0  # no GNSS velocity of late: nothing says the car slides
            arm = 0.5 * abs(self._axle_x_m[0] - self._axle_x_m[1])
            for k, name in enumerate(self.force_names):
                if name in LATERAL_FORCES:
                    walk[k] += self._slide_walk
                elif name == "yaw":
                    walk[k] += self._slide_walk * arm
        if self._long_col >= 0:  # the unknown drive force is a random walk of its own (kept, not faded)
            unknown = not self.torques_known
            walk[self._long_col] = s.unknown_torque_walk if unknown else walk[self._long_col]
            self._extra_decay[self._long_col] = 1.0 if unknown else self._correction_decay
        for k in range(len(self.force_names)):
            self.plant[2 * N + k, 2 * N + k] = walk[k] ** 2 * self.dt

    def _tire_force_scales(self) -> np.ndarray:
        """For each force error, the size of the tire forces it acts beside (N or N m), from the model's last tire output:
        all four tires' longitudinal or lateral force, one axle's lateral force, the lateral forces' yaw moment about
        base_link, and the roll (pitch) moment of the lateral (longitudinal) forces on a ROLL_ARM_M arm."""
        fx, fy, _ = self.vehicle.tire_forces_n.T
        x_wheel = np.array([self._axle_x_m[0]] * 2 + [self._axle_x_m[1]] * 2)
        scale = {"longitudinal": abs(fx.sum()), "lateral": abs(fy.sum()), "yaw": abs((x_wheel * fy).sum()), "front_lateral": abs(fy[:2].sum()),
                 "rear_lateral": abs(fy[2:].sum()), "roll": ROLL_ARM_M * abs(fy.sum()), "pitch": ROLL_ARM_M * abs(fx.sum())}
        return np.array([scale[name] for name in self.force_names])

    def linearise(self) -> None:
        """errorEKF-FE: M, A = -M^-1 K, B = -M^-1 C, the extra states' acceleration response Gp and the velocity rows G
        of F at the current model state (:attr:`linearisation`; :meth:`predict` does it every ``transition_every_steps``)."""
        solver = self.vehicle.solver
        self._heading_frame(float(solver.q[5]))
        M = self._M = self.vehicle.mass_matrix(solver.q)
        K, C = solver.K.copy(), solver.C.copy()
        # the integrator's tangent leaves out how the tire forces turn with the heading (K's yaw column is zero) and
        # approximates the angular-velocity terms: without them a heading error would not change the slip angles, and
        # the heading could not be told from sideslip
        dq, dqd = self.vehicle.residual_derivatives(LINEARISED_POSITIONS, LINEARISED_VELOCITIES, self.dt)
        K[:, LINEARISED_POSITIONS], C[:, LINEARISED_VELOCITIES] = dq, dqd
        self._K, self._C, self._Dr = K, C, self.residual_sensitivity()
        if not _fe_transition(M, K, C, self.dt, self._Dr, self._G, self._A, self._B, self._Gp):
            raise np.linalg.LinAlgError("errorEKF-FE: singular mass or tangent matrix")

    @property
    def linearisation(self) -> Linearisation:
        """The model's linearisation the filter uses (:class:`Linearisation`)."""
        return Linearisation(self._M, self._K, self._C, self._Dr, self._A, self._B, self._Gp, self._G, self._extra_decay)

    def residual_sensitivity(self) -> np.ndarray:
        """Dr = dr/de (N, extra states), r = M z_ddot - Q - force correction: -1 along a force error's direction; for a
        model parameter forward differences of the steady-state tire forces (the parameters change slowly: the carcass
        has relaxed); for the road's slope gravity's generalised force per m/s^2 (:meth:`ReducedVehicle.slope_forces`);
        zero for the IMU biases, which act on measurements only."""
        Dr = np.zeros((N, self.P.shape[0] - 2 * N))
        Dr[:, : len(self.force_names)] = -self._directions
        if self.slope_column() >= 0:  # held (no response) where it is not learnt
            Dr[:, self.slope_col - 2 * N : self.slope_col - 2 * N + SLOPE_STATES] = -self.vehicle.slope_forces()
        if self.parameter_names:
            theta0 = self.vehicle.parameters
            thetas = np.repeat(theta0[None], 1 + len(self.parameter_names), axis=0)
            steps = np.array([PARAMETER_STEP[p] for p in self.parameter_names])
            thetas[1 + np.arange(len(steps)), self._parameter_index] += steps
            r = self.vehicle.force_residuals(thetas, np.arange(N), steady_tires=True)
            Dr[:, self.parameter_col - 2 * N :] = ((r[1:] - r[0]) / steps[:, None]).T
        return Dr

    def transition_matrix(self) -> np.ndarray:
        """The model's error transition F over one step (dense): the errorEKF-FE's F at the current state (re-linearised;
        the filter itself keeps only its velocity rows, :meth:`linearise`), or the plain errorEKF's constant F."""
        if not self.settings.force_estimation:
            return self.F
        self.linearise()
        h, m = self.dt, self.P.shape[0]
        F = np.zeros((m, m))
        F[N : 2 * N] = self._G
        F[:N] = 0.5 * h * self._G
        F[:N, :N] += np.eye(N)
        F[:N, N : 2 * N] += 0.5 * h * np.eye(N)
        F[2 * N :, 2 * N :] = np.diag(self._extra_decay)
        return F

    # ----- measurements -------------------------------------------------------------------------------
    def _state(self):
        s = self.vehicle.solver
        return s.q, s.qd, s.qdd

    def _apply(self, name: str, y: np.ndarray, h: np.ndarray, H: np.ndarray, R: np.ndarray, axes=None, full_h=None, extra=None) -> bool:
        """One gated block (:meth:`_gated_update`) with H (over [z, z_dot, z_ddot]) mapped onto the error state
        (:func:`_map_columns`) and the identity on the sensor's bias columns (``axes``: the sensor axes of the rows;
        ``full_h``: an IMU's prediction on all three axes, for its tilt's columns; ``extra``: a block added on the extra
        states' columns, as the wheel scales').  One compiled call (:func:`error_block`) unless the sensor is due for a
        relock, only some axes are given or ``extra`` is."""
        if name not in self.settings.enabled_sensors:
            return False
        stats = self.stats[name]
        y = np.asarray(y, float)
        bias_col = {"gyroscope": self.gyro_bias_col, "accelerometer": self.accel_bias_col}.get(name, -1)
        scale_col = self.gyro_scale_column() if name == "gyroscope" else -1
        tilt_col = self.imu_tilt_column() if bias_col >= 0 else -1
        slope_col = self.slope_column() if name == "accelerometer" else -1
        axes = np.arange(len(y)) if axes is None else np.asarray(axes)
        H = np.ascontiguousarray(H, dtype=float)
        if H.shape[1] == 2 * N:  # a model without accelerations in H (the detailed filter's mapped Jacobians)
            H = np.hstack([H, np.zeros((len(y), N))])
        if stats.consecutive_rejections < self.settings.relock_after and (bias_col < 0 or len(axes) == 3) and extra is None:
            innovation = np.empty(len(y))
            nis = error_block(self.x, self.P, y, np.asarray(h, float), H, np.ascontiguousarray(R, dtype=float),
                               self._A, self._B, self._Gp, self.gate(len(y)), innovation, bias_col, scale_col, tilt_col, slope_col)
            return record_update(stats, innovation, nis)
        Hx = _map_columns(H, self._A, self._B, self._Gp, self.x.shape[0])
        if slope_col >= 0:
            slope_columns(H, Hx, slope_col)
        H = Hx
        if bias_col >= 0:
            H[np.arange(len(y)), bias_col + axes] += 1.0
        if scale_col >= 0 and 2 in axes:
            row = int(np.flatnonzero(axes == 2)[0])
            H[row, scale_col] += h[row]
        if tilt_col >= 0 and full_h is not None:
            H[:, tilt_col : tilt_col + 2] += tilt_jacobian(np.asarray(full_h, float))[axes]
        if extra is not None:
            H[:, 2 * N :] += extra
        return self._gated_update(name, y - h - H @ self.x, H, R)

    def update_gnss_fix(self, antenna_enu_m: np.ndarray, covariance_m2: np.ndarray, age_s: float = 0.0) -> bool:
        """GNSS antenna position in the local ENU frame (m) with its covariance (3, 3), measured ``age_s``
        before the model's time (the prediction is moved back along the antenna velocity).  The horizontal part only:
        the model drives a flat road, and the altitude tells how high the road is, not how high the chassis stands on
        it (on a hill a 3-D fix would lift the model off its tires, or be gated for good)."""
        if "gnss_fix" not in self.settings.enabled_sensors:
            return False
        h, H = self._h_gnss_position()
        if age_s:
            h = h - age_s * self._h_gnss_velocity()[0]
        y, cov = np.asarray(antenna_enu_m, float), np.asarray(covariance_m2, float)
        accepted = self._apply("gnss_fix", y[:2], h[:2], H[:2], cov[:2, :2])
        if accepted:
            self._gnss_seen()
        return self._after_gnss_fix(accepted, y, lambda: h, cov)

    def shift_position(self, offset_m: np.ndarray) -> None:
        self._correct_state(np.concatenate([offset_m, np.zeros(N - 3)]), np.zeros(N))

    def pending_position_correction_m(self) -> np.ndarray:
        """The horizontal position correction (east, north, m) the updates since the last model step have estimated:
        the first error coordinates (the chassis position's), fed back into the model at the next step (:meth:`correct`)."""
        return self.x[:2].copy()

    def update_gnss_velocity(self, velocity_enu_m_s: np.ndarray, covariance: np.ndarray) -> bool:
        """GNSS antenna velocity (ENU, m/s) with its covariance (3, 3); horizontal part only, as the fix."""
        h, H = self._h_gnss_velocity()
        applied = self._apply("gnss_velocity", np.asarray(velocity_enu_m_s, float)[:2], h[:2], H[:2], np.asarray(covariance, float)[:2, :2])
        if applied:
            self._gnss_seen()
        self._watch_for_slide(np.asarray(covariance, float)[:2, :2])
        return applied

    def _watch_for_slide(self, covariance: np.ndarray) -> None:
        """After a GNSS velocity update: the mean of its innovation across the heading over ``slide_innovation_s``; what
        of it exceeds the noise (the receiver's sigma, or the innovations' RMS over ``slide_scatter_s`` where that is
        larger) is a lateral velocity the model did not make (a slide before the friction
        estimate knows of it), and the lateral force and yaw moment errors get an extra walk m dv / T^1.5 (T
        ``slide_walk_response_s``) that lets their correction take it (:meth:`_force_plant`)."""
        s = self.settings
        nu = self.stats["gnss_velocity"].last_innovation
        if s.slide_walk_response_s <= 0.0 or nu is self._slide_innovation_seen or len(nu) != 2:
            return
        self._slide_innovation_seen = nu
        t = self.vehicle.solver.t
        yaw = float(self.vehicle.solver.q[5])
        across = np.array([-math.sin(yaw), math.cos(yaw)])
        gain = 1.0
        if self._slide_t is not None:
            dt = max(t - self._slide_t, 0.0)
            gain = dt / (dt + s.slide_innovation_s)
        self._slide_t = t
        lateral = float(across @ nu)
        self._lateral_innovation += gain * (lateral - self._lateral_innovation)
        self._scatter_n += 1  # the first updates average plainly (a running mean), then the window takes over
        scatter_gain = max(gain * s.slide_innovation_s / s.slide_scatter_s, 1.0 / self._scatter_n)
        self._lateral_scatter += scatter_gain * (lateral**2 - self._lateral_scatter)
        noise = math.sqrt(max(float(across @ covariance @ across), self._lateral_scatter, 0.0))
        excess = max(0.0, abs(self._lateral_innovation) - noise)
        T = s.slide_walk_response_s
        self._slide_walk = self.vehicle.total_mass_kg * excess / (T * math.sqrt(T))

    def update_imu(self, angular_velocity_rad_s: np.ndarray, linear_acceleration_m_s2: np.ndarray, gyro_sigma, accel_sigma) -> tuple[bool, bool]:
        """IMU sample in the sensor frame: gyroscope (rad/s) and specific force (m/s^2), 1-sigma per axis (scalar or (3,));
        an axis whose value or sigma is NaN is missing (a yaw-rate-only IMU gives NaN for the others).  Returns whether
        each part was applied (False for a part with no axis)."""
        s = self.settings
        gyro, accel = np.asarray(angular_velocity_rad_s, float), np.asarray(linear_acceleration_m_s2, float)
        if self.imu_noise_meters is not None:
            gyro_sigma = self.imu_noise_meters[0].sigma_over(gyro, gyro_sigma, s.imu_noise_meter_ratio)
            accel_sigma = self.imu_noise_meters[1].sigma_over(accel, accel_sigma, s.imu_noise_meter_ratio)
        gyro_var = (_per_axis(np.square(np.asarray(gyro_sigma, float)) + s.gyro_model_sigma**2) + self._gyro_road_var) * self.imu_noise_scale["gyroscope"]
        accel_var = _per_axis(np.square(np.asarray(accel_sigma, float)) + self._accelerometer_model_sigma() ** 2) * self.imu_noise_scale["accelerometer"]
        gyro_stats, accel_stats = self.stats["gyroscope"], self.stats["accelerometer"]
        self._tilt_observable = bool(np.isfinite(gyro[:2]).all() and np.isfinite(gyro_var[:2]).all())
        # every axis and variance finite (a NaN or an infinity makes the sum so; physical values cannot overflow it)
        complete = math.isfinite(float(gyro.sum() + gyro_var.sum() + accel.sum() + accel_var.sum()))
        if complete and self._compiled_sensors and max(gyro_stats.consecutive_rejections, accel_stats.consecutive_rejections) < s.relock_after:
            use_gyro, use_accel = "gyroscope" in s.enabled_sensors, "accelerometer" in s.enabled_sensors
            q, qd, qdd = self._state()
            nu_gyro, nu_accel, gyro_c, accel_c = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
            corrected_imu(gyro, accel, self.imu_bias, self.imu_tilt, self.gyro_scale, gyro_c, accel_c)
            nis_gyro, nis_accel = _imu_blocks(self.x, self.P, q, qd, qdd, np.asarray(self.mounts.imu_rotation, float), np.asarray(self.mounts.imu_position_m, float),
                                              gyro_c, accel_c, np.ascontiguousarray(gyro_var),
                                              np.ascontiguousarray(accel_var), self._A, self._B, self._Gp, self.gate(3), use_gyro, use_accel, nu_gyro, nu_accel,
                                              self.gyro_bias_col, self.accel_bias_col, self.gyro_scale_column(), self.imu_tilt_column(), self.gravity_enu(),
                                              self.slope_column())
            applied = (use_gyro and record_update(gyro_stats, nu_gyro, nis_gyro)), (use_accel and record_update(accel_stats, nu_accel, nis_accel))
            if use_gyro:
                self._track_road_rate(nu_gyro, float(self.vehicle.solver.t))
            for name, used, code in (("gyroscope", use_gyro, nis_gyro), ("accelerometer", use_accel, nis_accel)):
                if used and (code >= 0.0 or code < -1.5):  # applied, or gated with its NIS (an unused block returns 0)
                    self._adapt_imu_noise(name, code if code >= 0.0 else -2.0 - code, 3)
            return applied
        return self.update_gyroscope(gyro, gyro_sigma), self.update_accelerometer(accel, accel_sigma)

    def _track_road_rate(self, innovation: np.ndarray, t_s: float) -> None:
        """The road's roll and pitch rates from one gyroscope innovation (rad/s, sensor axes; NaN: a missing axis, taken as
        0) at model time ``t_s``: turned onto the vehicle's axes, weighed by the model's yaw rate r as 1 / (1 + (r /
        ``gyro_road_rate_turn_rad_s``)^2), averaged over ``gyro_road_rate_time_s``, squared and held (decaying over
        ``gyro_road_rate_hold_s``); the gyroscope's variance gets ``gyro_road_rate_gain``^2 times it on those axes, none
        while the weighted innovation's integral (leaking over ``gyro_road_grade_time_s``) is beyond ``gyro_road_grade_rad``.
        Weight 0 while the gyroscope's x or y bias sigma is above ``gyro_road_rate_bias_sigma``."""
        s = self.settings
        if s.gyro_road_rate_gain <= 0.0:
            return
        dt = min(max(t_s - self._road_rate_t, 0.0), 0.1) if math.isfinite(self._road_rate_t) else 0.0
        self._road_rate_t = t_s
        turn = float(self.vehicle.solver.qd[5]) / s.gyro_road_rate_turn_rad_s
        weight = 1.0 / (1.0 + turn * turn)
        if self.gyro_bias_col >= 0 and max(self.P[self.gyro_bias_col, self.gyro_bias_col], self.P[self.gyro_bias_col + 1, self.gyro_bias_col + 1]) > s.gyro_road_rate_bias_sigma**2:
            weight = 0.0  # the biases have not settled: a lasting innovation is theirs
        road_rate_into(np.asarray(innovation, float), np.asarray(self.mounts.imu_rotation, float), weight, dt,
                       -math.expm1(-dt / s.gyro_road_rate_time_s), math.exp(-dt / s.gyro_road_rate_hold_s), math.exp(-dt / s.gyro_road_grade_time_s),
                       s.gyro_road_grade_rad, s.gyro_road_rate_gain**2, self._road_rate, self._gyro_road_var)

    def road_rate_allowance(self) -> np.ndarray:
        """The 1-sigma (rad/s) the gyroscope's roll and pitch axes (the vehicle's x and y) get now for the road's own
        turning (:meth:`_track_road_rate`; 0 on a level road or with ``gyro_road_rate_gain`` 0)."""
        return self.settings.gyro_road_rate_gain * np.sqrt(self._road_rate[2:4])

    def imu_noise_excess(self) -> dict:
        """{"gyroscope" | "accelerometer": how many times its message's sigma the filter takes the sensor's noise to be}:
        the measured noise's excess (:class:`NoiseMeter`) times the square root of the NIS factor (``imu_noise_scale``)."""
        meters = self.imu_noise_meters or (None, None)
        return {name: (meter.excess if meter is not None else 1.0) * math.sqrt(self.imu_noise_scale[name])
                for name, meter in zip(("gyroscope", "accelerometer"), meters)}

    def _adapt_imu_noise(self, name: str, nis: float, dof: int) -> None:
        """Move the IMU block's noise factor after an update with this NIS (settings ``imu_noise_adaptation_updates``)."""
        n = self.settings.imu_noise_adaptation_updates
        if self.imu_noise_scale[name] == 1.0 and nis <= dof:  # at its floor and consistent: nothing to move
            return
        if n > 0.0 and dof > 0 and math.isfinite(nis):
            k = self.imu_noise_scale[name] * (1.0 + (min(nis / dof, 10.0) - 1.0) / n)
            self.imu_noise_scale[name] = min(max(k, 1.0), self.settings.imu_noise_scale_max)

    def gyro_scale_column(self) -> int:
        """The gyroscope's scale-factor column for this update, or -1 while the model's yaw rate is below
        ``gyro_scale_min_rate_rad_s`` (the scale is then not observable and only its bias would be learnt)."""
        if self.gyro_scale_col < 0 or abs(self.vehicle.solver.qd[5]) < self.settings.gyro_scale_min_rate_rad_s:
            return -1
        return self.gyro_scale_col

    def _gnss_seen(self) -> None:
        """A GNSS fix or velocity was accepted now (the wheel scales' clock, :meth:`wheel_scale_column`)."""
        self._gnss_accepted_t = self.t
        self._gnss_since_t = min(self._gnss_since_t, self.t)

    def wheel_scale_column(self) -> int:
        """The wheel scales' first column for this update, or -1 without GNSS accepted within ``wheel_scale_gnss_s``
        (nothing then tells a radius from an accelerometer's scale: the scales are held, their estimate still used) or
        while the last wheel-rate update was rejected (the model disagrees with the wheels: a relock must not move them), and
        before GNSS has been accepted for ``wheel_scale_after_s`` since the start."""
        s = self.settings
        if (self.wheel_scale_col < 0 or self.t - self._gnss_accepted_t > s.wheel_scale_gnss_s or self.t - self._gnss_since_t < s.wheel_scale_after_s
                or self.stats["wheel_rates"].consecutive_rejections > 0):
            return -1
        return self.wheel_scale_col

    def wheel_scale_observed(self) -> np.ndarray:
        """Which wheels' rates tell their axle's scale now (bool (4,)): turning at least ``wheel_scale_min_rate_rad_s``
        and rolling with a model slip below ``wheel_scale_max_slip``."""
        s, v = self.settings, self.vehicle
        return (np.abs(v.solver.qd[10:14]) >= s.wheel_scale_min_rate_rad_s) & (np.abs(v.tire_output_array[SLIP_ROW]) <= s.wheel_scale_max_slip)

    def slope_column(self) -> int:
        """The road slope's first column, or -1 below ``road_slope_min_speed_m_s`` (model speed): the slope is then held,
        without a response in the model's linearisation nor in the accelerometer's columns."""
        if self.slope_col < 0:
            return -1
        s, qd = self.settings, self.vehicle.solver.qd
        turning = self.torques_known or abs(qd[5]) >= s.road_slope_unknown_torque_rate_rad_s
        return self.slope_col if math.hypot(qd[0], qd[1]) >= s.road_slope_min_speed_m_s and turning else -1

    def imu_tilt_column(self) -> int:
        """The IMU tilt's first column for this IMU sample, or -1 while its gyroscope gives no x and y axes (the tilt
        then cannot be told from the accelerometer's biases) or below ``imu_tilt_min_speed_m_s`` forwards (model)."""
        if not self._tilt_observable:
            return -1
        return self.imu_tilt_col if self._forward_speed() >= self.settings.imu_tilt_min_speed_m_s else -1

    def _forward_speed(self) -> float:
        """The model's speed along its heading (m/s; negative reversing)."""
        q, qd = self.vehicle.solver.q, self.vehicle.solver.qd
        return math.cos(q[5]) * qd[0] + math.sin(q[5]) * qd[1]

    def _untilted(self, reading: np.ndarray, predicted: np.ndarray | None) -> np.ndarray:
        """A reading of the IMU turned back by its estimated tilt d = (dx, dy, 0): R(d) y = y + d x y (first order).  A
        missing axis (NaN) stays missing; in the others' terms the model's ``predicted`` reading stands in for it (a
        yaw-rate-only gyroscope, an accelerometer without its z axis, whose g dx is still in its y axis)."""
        reading = np.asarray(reading, float)
        full = reading if predicted is None else np.where(np.isfinite(reading), reading, np.asarray(predicted, float))
        out = np.empty(3)
        untilt_into(reading, full, float(self.imu_tilt[0]), float(self.imu_tilt[1]), out)
        return out

    def _corrected_gyro(self, gyro: np.ndarray, predicted: np.ndarray | None = None) -> np.ndarray:
        """The gyroscope reading with the estimated biases, tilt and z scale factor removed (``predicted``: the model's
        reading, for missing axes)."""
        out = self._untilted(np.asarray(gyro, float) - self.imu_bias[:3], predicted)
        out[2] /= 1.0 + self.gyro_scale
        return out

    def _corrected_accel(self, accel: np.ndarray, predicted: np.ndarray | None = None) -> np.ndarray:
        """The accelerometer reading with the estimated biases and tilt removed (``predicted``: as for the gyroscope)."""
        return self._untilted(np.asarray(accel, float) - self.imu_bias[3:], predicted)

    def update_gyroscope(self, angular_velocity_rad_s: np.ndarray, sigma) -> bool:
        """Angular rate in the IMU frame (rad/s), 1-sigma per axis ``sigma`` (scalar or (3,)); NaN axes are missing."""
        return self._imu_axes("gyroscope", angular_velocity_rad_s, sigma, self.settings.gyro_model_sigma, self._h_gyroscope, 0, self._gyro_road_var)

    def update_accelerometer(self, specific_force_m_s2: np.ndarray, sigma) -> bool:
        """Specific force in the IMU frame (m/s^2, gravity reaction included), 1-sigma per axis ``sigma``; NaN axes are missing."""
        return self._imu_axes("accelerometer", specific_force_m_s2, sigma, self._accelerometer_model_sigma(), self._h_accelerometer, 3)

    def _accelerometer_model_sigma(self) -> float:
        """What the model cannot reproduce of an accelerometer sample (m/s^2): a constant part and a share of the model's
        horizontal acceleration (its forces' errors grow with the forces); at least ``reverse_accelerometer_model_sigma``
        reversing while the accelerometer's x or y bias is unsettled."""
        s = self.settings
        sigma = s.accelerometer_model_sigma
        if s.accelerometer_model_relative > 0.0:
            qdd = self.vehicle.solver.qdd
            sigma += s.accelerometer_model_relative * math.hypot(qdd[0], qdd[1])
        if s.reverse_accelerometer_model_sigma > sigma and self._forward_speed() < REVERSING_M_S:
            b = self.accel_bias_col
            if b < 0 or max(self.P[b, b], self.P[b + 1, b + 1]) > s.reverse_accel_bias_settled_sigma**2:
                return s.reverse_accelerometer_model_sigma
        return sigma

    def _imu_axes(self, name: str, y, sigma, model_sigma: float, model, bias_offset: int, model_var=0.0) -> bool:
        h, H = model()
        y = self._corrected_gyro(y, h) if bias_offset == 0 else self._corrected_accel(y, h)
        var = (np.broadcast_to(np.square(np.asarray(sigma, float)) + model_sigma**2, (3,)) + model_var) * self.imu_noise_scale[name]
        keep = np.flatnonzero(np.isfinite(y) & np.isfinite(var) & (var > 0.0))
        if len(keep) == 0:  # nothing usable: counted as a rejection (a non-finite sample)
            return name in self.settings.enabled_sensors and self.stats[name].reject()
        stats = self.stats[name]
        stats.last_nis = math.nan
        applied = self._apply(name, y[keep], h[keep], H[keep], np.diag(var[keep]), axes=keep, full_h=h)
        if bias_offset == 0 and name in self.settings.enabled_sensors:
            self._track_road_rate(y - h, float(self.vehicle.solver.t))  # the innovation on the model before this step's corrections
        self._adapt_imu_noise(name, stats.last_nis, len(keep))
        return applied

    def update_wheel_rates(self, rates_rad_s: np.ndarray, sigma: float) -> bool:
        """Wheel spin rates (rad/s, fl fr rl rr; NaN: missing) with the encoder's 1-sigma, plus the model's own uncertainty of
        a spin rate, ``wheel_rate_model_sigma`` times the rate (slip and rolling radius of a tire the model does not know)."""
        rates = np.asarray(rates_rad_s, float)
        keep = np.isfinite(rates)
        if not keep.any():
            return False
        qd = self.vehicle.solver.qd
        var = sigma**2 + np.square(self.settings.wheel_rate_model_sigma * qd[10:14])
        stats = self.stats["wheel_rates"]
        speeds = axle_speeds(rates)  # before the scales: a speed put on both wheels of an axle stays one number
        if self.wheel_scale_col >= 0:
            rates = rates / (1.0 + np.repeat(self.wheel_scale, 2))
        scale_col = self.wheel_scale_column()
        observed = self.wheel_scale_observed() if scale_col >= 0 else np.zeros(4, dtype=np.bool_)
        if (self._compiled_sensors and keep.all() and not any(speeds) and "wheel_rates" in self.settings.enabled_sensors
                and stats.consecutive_rejections < self.settings.relock_after):
            innovation = np.empty(4)
            nis = _wheel_rate_block(self.x, self.P, qd, rates, var, self.gate(4), innovation, scale_col, observed)
            return record_update(stats, innovation, nis)
        scales = wheel_rate_jacobian(qd, self.x.shape[0], scale_col, observed)[:, 2 * N :] if scale_col >= 0 else None
        h, H = self._h_wheel_rates()
        # rows: each wheel that reports, except that an axle whose two wheels report one speed gives one row, the mean of
        # its wheels' rates (a speed put on both wheels does not say that they turn alike: in a turn they do not)
        T = np.diag(keep.astype(float))
        for axle in (a for a in (0, 1) if speeds[a]):
            T[2 * axle, 2 * axle : 2 * axle + 2] = 0.5
            T[2 * axle + 1] = 0.0
        rows = T.any(axis=1)
        T = T[rows]
        return self._apply("wheel_rates", T @ np.where(keep, rates, 0.0), T @ h, T @ H, np.diag(var[rows]),
                           extra=None if scales is None else T @ scales)

    def update_standstill(self, velocity_sigma_m_s: float = 0.01, rate_sigma_rad_s: float = 0.002) -> bool:
        """Zero-velocity update of a car standing still (the wheels say so): base_link's ENU velocity (m/s) and body
        angular rate (rad/s) are zero with these 1-sigmas, so that neither the position nor the heading drifts while
        the car stands, with or without GNSS, and the gyroscope's bias is learnt."""
        h, H = self._h_standstill()
        R = np.diag([velocity_sigma_m_s**2] * 3 + [rate_sigma_rad_s**2] * 3)
        return self._apply("standstill", np.zeros(6), h, H, R)

    # ----- sensor models of the model state: (h, H over the error state's columns) -----------------------
    def measurement_model(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The predicted measurement h of sensor ``name`` (a key of :attr:`stats`) at the model's state and its Jacobian H
        over [z, z_dot, z_ddot] (the detailed filter: over its error coordinates [dz, dz_dot])."""
        models_by_name = {"gnss_fix": self._h_gnss_position, "gnss_velocity": self._h_gnss_velocity, "gyroscope": self._h_gyroscope,
                          "accelerometer": self._h_accelerometer, "wheel_rates": self._h_wheel_rates, "standstill": self._h_standstill}
        return models_by_name[name]()

    def _h_standstill(self):
        q, qd, _ = self._state()
        (hv, Hv), (hw, Hw) = models.gnss_velocity(q, qd, np.zeros(3)), models.gyroscope(q, qd, np.eye(3))
        return np.concatenate([hv, hw]), np.vstack([Hv, Hw])

    def _h_gnss_position(self):
        return models.gnss_position(self._state()[0], self.mounts.gnss_position_m, self.settings.gnss_orientation_columns)

    def _h_gnss_velocity(self):
        q, qd, _ = self._state()
        return models.gnss_velocity(q, qd, self.mounts.gnss_position_m)

    def _h_gyroscope(self):
        q, qd, _ = self._state()
        return models.gyroscope(q, qd, self.mounts.imu_rotation)

    def _h_accelerometer(self):
        q, qd, qdd = self._state()
        return models.accelerometer(q, qd, qdd, self.mounts.imu_position_m, self.mounts.imu_rotation, self.gravity_enu())

    def _h_wheel_rates(self):
        return models.wheel_rates(self._state()[1])

    # ----- outputs ------------------------------------------------------------------------------------
    def tire_forces(self) -> np.ndarray:
        """The four tires' forces (4, 3), N, in their tire frames: the model's, plus the lateral part of its force correction
        (:func:`published_tire_forces`)."""
        v = self.vehicle
        out = np.empty((4, 3))
        x_front, x_rear = self._axle_x_m
        published_tire_forces(v.tire_output_array, v.contact_array, v.force_correction, float(v.solver.q[5]), x_front, x_rear, out)
        return out

    # ----- feedback -----------------------------------------------------------------------------------
    def _correct_state(self, dz: np.ndarray, dzd: np.ndarray) -> None:
        """Add position and velocity errors of the independent coordinates to the model."""
        solver = self.vehicle.solver
        solver.q = solver.q + dz
        solver.qd = solver.qd + dzd

    def correct(self) -> None:
        """Feed the estimated errors back into the model (module docstring) and reset x to zero."""
        x = self.x
        if not self.settings.force_estimation:
            self._correct_state(x[:N], x[N : 2 * N])
            x[:] = 0.0
            self._check_divergence(self.vehicle.solver.q)
            return
        solver = self.vehicle.solver
        q, qd, qdd, finite = feed_back(x, solver.q, solver.qd, solver.qdd, self._A, self._B, self._Gp, self.P)
        if finite:
            solver.q, solver.qd, solver.qdd = q, qd, qdd
            e = x[2 * N :]
            k = len(self.force_names)
            if k:
                self._force_feedback(self._directions @ e[:k])
            if self.gyro_bias_col >= 0:
                self.imu_bias += e[k : k + 6]
                self.gyro_scale += e[k + 6]
                self.imu_tilt += e[k + 7 : k + 9]
            if self.wheel_scale_col >= 0:
                j = self.wheel_scale_col - 2 * N
                self.wheel_scale[:] = np.clip(self.wheel_scale + e[j : j + WHEEL_SCALE_STATES], -WHEEL_SCALE_BOUND, WHEEL_SCALE_BOUND)
            if self.slope_col >= 0:
                j = self.slope_col - 2 * N
                self._set_road_slope(self.road_slope + e[j : j + SLOPE_STATES])
            self._feed_back_parameters(e[self.parameter_col - 2 * N :])
        x[:] = 0.0
        self._check_divergence(None, finite)

    def _set_road_slope(self, slope: np.ndarray) -> None:
        """The estimated road slope (gravity's east and north components, m/s^2, within +-SLOPE_BOUND_M_S2), in the
        filter and in the model."""
        self.road_slope[:] = np.clip(slope, -SLOPE_BOUND_M_S2, SLOPE_BOUND_M_S2)
        if self.slope_col >= 0:
            self.vehicle.set_road_slope(*self.road_slope)

    def road_grade(self) -> tuple[float, float]:
        """The estimated road slope in the car's frame (sines): the grade along the heading (uphill +) and the cross slope
        (falling to the car's left +)."""
        yaw = float(self.vehicle.solver.q[5])
        c, s = math.cos(yaw), math.sin(yaw)
        g = -models.GRAVITY_ENU_M_S2[2]
        return -(c * self.road_slope[0] + s * self.road_slope[1]) / g, (-s * self.road_slope[0] + c * self.road_slope[1]) / g

    def gravity_enu(self) -> np.ndarray:
        """The model's gravity (3,) ENU m/s^2: level, tilted by the estimated road slope."""
        if self.slope_col < 0:
            return models.GRAVITY_ENU_M_S2
        return np.array([self.road_slope[0], self.road_slope[1], models.GRAVITY_ENU_M_S2[2]])

    def _feed_back_parameters(self, de: np.ndarray) -> None:
        """Model parameters take their estimated errors, within PARAMETER_BOUNDS; the tires carry their new forces at once."""
        if not self.parameter_names or not de.any():
            return
        theta = self.vehicle.parameters
        initial = self._initial_parameters if self._initial_parameters is not None else theta
        for k, name in enumerate(self.parameter_names):
            i = self._parameter_index[k]
            lo, hi = PARAMETER_BOUNDS[name]
            if name == "mass":
                lo, hi = lo * initial[0], hi * initial[0]
            theta[i] = min(max(theta[i] + de[k], lo), hi)
        self.vehicle.apply_parameters(theta, carry_tire_forces=True)

    def _force_feedback(self, dQ: np.ndarray) -> None:
        """The force correction grows by dQ, the generalised force of the estimated force errors.  (The seeds move its
        chassis part onto the tire deflections instead, Rodriguez eqs. 5.13-5.16; with a wrong mass that moved the mass
        error into the tires, issue 5, and it is not done here.)"""
        self.vehicle.force_correction += dQ


class DetailedErrorEKF(VehicleErrorEKF):
    """errorEKF (Sanjurjo 2016 §3.4.6) on the detailed vehicle (82 natural coordinates, 68 constraints).

    The 14 error coordinates are measures of motion that are valid in every configuration: the chassis
    point p0 (3), a world rotation vector of the chassis (3; the angular velocity w = 1/2 sum e_i x e_i_dot
    is its rate), the wheel-centre heights (4) and the spins (4).  Choosing entries of q instead (the
    model's ex.y for yaw) fails where that entry cannot move (heading +-90 deg).  With D the (14, n) map
    of these rates, the velocity transform is R = [Phi_q; D]^-1 [0; I] (qd = R z_dot).  Sensor Jacobians
    over all coordinates (:class:`state_observer.sensors.models.NaturalChassisSensors`) are mapped with R;
    the transition is the trapezoidal one of the model projected on them (R^T M R, R^T K R, R^T C R, the
    full form of Rodriguez 2020 eqs. 3.61-3.62); feedback dq = R dz and dqd = R dz_dot, plus Newton
    iterations of the position problem with D dq = 0 and the velocity problem when the linearised step left
    a violation above ``position_tolerance_m`` (large corrections: a GNSS re-acquisition, the first fixes)."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None):
        settings = settings or detailed_settings()
        if settings.force_estimation:
            raise ValueError("DetailedErrorEKF estimates positions and velocities only: use force_estimation=False")
        super().__init__(vehicle, mounts, settings)
        from ..conventions import WHEELS

        model = vehicle.model
        self.sensors = models.NaturalChassisSensors(model, spins=[f"th_{w}" for w in WHEELS])
        self._heights = model.indices([f"C_{w}.z" for w in WHEELS])
        self.position_tolerance_m = 1e-6  # constraint violation above which the feedback solves the position problem
        self._compiled_sensors = False
        self.relinearise = True
        self._spins = model.indices([f"th_{w}" for w in WHEELS])
        self._R, self._R_at = None, None

    def rate_map(self, q: np.ndarray) -> np.ndarray:
        """D (14, n): [p0_dot, w (world), wheel-centre height rates, spin rates] = D qd."""
        s = self.sensors
        D = np.zeros((N, self.vehicle.model.n))
        D[0:3, s.ip : s.ip + 3] = np.eye(3)
        for i in s.ia:
            D[3:6, i : i + 3] = 0.5 * skew(q[i : i + 3])
        D[6 + np.arange(4), self._heights] = 1.0
        D[10 + np.arange(4), self._spins] = 1.0
        return D

    def _augmented(self, q: np.ndarray, t: float):
        cs = self.vehicle.model.constraints
        cs.evaluate(q, t)
        D = self.rate_map(q)
        return cs, np.vstack([cs.jac, D]), D

    def velocity_transform(self) -> np.ndarray:
        """R (n, 14) at the current model state (memoised per state)."""
        solver = self.vehicle.solver
        key = (solver.t, solver.q.tobytes())
        if key != self._R_at:
            cs, A, _ = self._augmented(solver.q, solver.t)
            rhs = np.zeros((A.shape[0], N))
            rhs[cs.m :] = np.eye(N)
            self._R, self._R_at = np.linalg.solve(A, rhs), key
        return self._R

    def transition_matrix(self) -> np.ndarray:
        """The trapezoidal transition of the model projected on the error coordinates."""
        solver, R = self.vehicle.solver, self.velocity_transform()
        return trapezoidal_transition(R.T @ self.vehicle.model.mass @ R, R.T @ solver.K @ R, R.T @ solver.C @ R, self.dt)

    def _mapped(self, h, Hq, Hqd):
        R = self.velocity_transform()
        return h, np.hstack([Hq @ R, Hqd @ R])

    def _h_gnss_position(self):
        return self._mapped(*self.sensors.gnss_position(self._state()[0], self.mounts.gnss_position_m, self.settings.gnss_orientation_columns))

    def _h_gnss_velocity(self):
        q, qd, _ = self._state()
        return self._mapped(*self.sensors.gnss_velocity(q, qd, self.mounts.gnss_position_m))

    def _h_gyroscope(self):
        q, qd, _ = self._state()
        return self._mapped(*self.sensors.gyroscope(q, qd, self.mounts.imu_rotation))

    def _h_standstill(self):
        q, qd, _ = self._state()
        (hv, Hvq, Hvqd), (hw, Hwq, Hwqd) = self.sensors.gnss_velocity(q, qd, np.zeros(3)), self.sensors.gyroscope(q, qd, np.eye(3))
        return self._mapped(np.concatenate([hv, hw]), np.vstack([Hvq, Hwq]), np.vstack([Hvqd, Hwqd]))

    def _h_accelerometer(self):
        q, _, qdd = self._state()
        return self._mapped(*self.sensors.accelerometer(q, qdd, self.mounts.imu_position_m, self.mounts.imu_rotation))

    def _h_wheel_rates(self):
        return self._mapped(*self.sensors.wheel_rates(self._state()[1]))

    def _correct_state(self, dz: np.ndarray, dzd: np.ndarray) -> None:
        if not (dz.any() or dzd.any()):
            return
        solver = self.vehicle.solver
        R = self.velocity_transform()
        q = solver.q + R @ dz
        newton = 0
        for _ in range(3):  # the linearised step leaves violations of order |dz|^2
            cs, A, _ = self._augmented(q, solver.t)
            if np.abs(cs.phi).max(initial=0.0) < self.position_tolerance_m:
                break  # smaller ones the integrator's penalty removes within the next step
            q = q - np.linalg.solve(A, np.concatenate([cs.phi, np.zeros(N)]))
            newton += 1
        if newton:
            zd = self.rate_map(solver.q) @ solver.qd + dzd
            cs, A, _ = self._augmented(q, solver.t)
            solver.qd = np.linalg.solve(A, np.concatenate([-cs.phi_t, zd]))
        else:
            solver.qd = solver.qd + R @ dzd
        solver.q = q


def detailed_settings() -> ErrorEkfSettings:
    """Defaults of the detailed model's errorEKF: white-acceleration plant noise per error coordinate
    [p0 x y z, rotation x y z, 4 wheel-centre heights, 4 spins].  Without acceleration states the
    accelerometer is predicted from the model's own accelerations, whose error (mass, friction) is ~20
    times the sensor noise: every sample failed the gate, so it is off by default."""
    return ErrorEkfSettings(
        force_estimation=False,
        enabled_sensors=("gnss_fix", "gnss_velocity", "gyroscope", "wheel_rates", "standstill"),
        plant_sigma2=np.array([1.0, 1.0, 1e-2, 1e-3, 1e-3, 1e-3] + [1e-1] * 4 + [10.0] * 4),
        initial_position_sigma=np.array([1.0, 1.0, 0.01, 0.005, 0.005, 0.005] + [0.005] * 4 + [0.1] * 4),
        initial_velocity_sigma=np.array([0.1, 0.1, 0.02, 0.01, 0.01, 0.01] + [0.02] * 4 + [0.5] * 4),
    )


def axle_speeds(rates_rad_s) -> tuple[bool, bool]:
    """Per axle (front, rear), whether its two wheels report the same finite rate: one speed put on both wheels (a data
    set with a vehicle speed rather than wheel speeds), not two wheels turning alike."""
    fl, fr, rl, rr = (float(x) for x in rates_rad_s)
    return (fl == fr and fl != 0.0 and math.isfinite(fl), rl == rr and rl != 0.0 and math.isfinite(rl))


def _shares(values) -> np.ndarray:
    """Each wheel's share of a sum split as ``values`` (fl fr rl rr; equal shares where they are all zero or missing)."""
    v = np.maximum(np.asarray(values, float), 0.0) if len(values) == 4 else np.zeros(4)
    return v / v.sum() if v.sum() > 0.0 else np.full(4, 0.25)


@njit(cache=True)
def noise_meter_step(x, previous, mean_square, count, samples, claimed, ratio, out):
    """One reading ``x`` (3,) into a :class:`NoiseMeter`'s arrays; ``out`` gets per axis the measured sigma where, after
    ``samples`` differences, it exceeds ``ratio`` times ``claimed`` (3,), else ``claimed``.  Returns whether any axis did."""
    louder = False
    for i in range(3):
        d2 = x[i] - 2.0 * previous[0, i] + previous[1, i]
        if np.isfinite(d2):
            count[i] += 1.0
            mean_square[i] += max(1.0 / samples, 1.0 / count[i]) * (d2 * d2 - mean_square[i])  # a plain mean until `samples` are in
        previous[1, i] = previous[0, i]
        previous[0, i] = x[i]
        measured = math.sqrt(mean_square[i] / 6.0)
        if count[i] >= samples and measured > ratio * claimed[i]:  # False for a NaN claim (a missing axis)
            out[i] = measured
            louder = True
        else:
            out[i] = claimed[i]
    return louder


class NoiseMeter:
    """The white noise of a 3-axis signal sampled at a steady rate, measured from its second differences: for readings
    x_k = s_k + n_k, n white with variance sigma^2 and s smooth at the sampling rate, E[(x_k - 2 x_(k-1) + x_(k-2))^2] =
    6 sigma^2 (s's own second difference, its second derivative times dt^2, is orders below an IMU's noise at 100-200
    Hz: a yaw jerk of 20 rad/s^3 gives 5e-4 rad/s at 5 ms).  An exponential mean over ``samples`` (a plain mean before);
    an axis given as NaN is left out of it and breaks its chain of differences."""

    def __init__(self, samples: float):
        self.samples = float(samples)
        self.previous = np.full((2, 3), np.nan)  # x_(k-1), x_(k-2)
        self.mean_square = np.zeros(3)  # of the second differences
        self.count = np.zeros(3)  # differences taken per axis
        self._out = np.empty(3)
        self.excess = 1.0  # the largest measured / claimed sigma of the last reading where the measured one was used, else 1

    def sigma(self) -> np.ndarray:
        """The measured 1-sigma per axis, NaN for an axis with fewer than ``samples`` differences."""
        return np.where(self.count >= self.samples, np.sqrt(self.mean_square / 6.0), np.nan)

    def sigma_over(self, x: np.ndarray, claimed, ratio: float):
        """Feed ``x`` (3,) and return the sigma to use: per axis the measured one where it exceeds ``claimed`` (scalar or
        (3,)) ``ratio`` times, else ``claimed`` (returned as given while no axis exceeds it; a NaN claim, a missing axis,
        stays NaN)."""
        claimed_axes = _per_axis(np.asarray(claimed, float))
        if noise_meter_step(x, self.previous, self.mean_square, self.count, self.samples, claimed_axes, ratio, self._out):
            with np.errstate(invalid="ignore", divide="ignore"):
                self.excess = float(np.nanmax(self._out / claimed_axes))
            return self._out.copy()
        self.excess = 1.0
        return claimed


def _per_axis(value: np.ndarray) -> np.ndarray:
    """A (3,) array of a scalar or (3,) value (np.broadcast_to, whose cost shows at 200 Hz, only for other shapes)."""
    if value.shape == (3,):
        return value
    return np.full(3, float(value)) if value.ndim == 0 else np.array(np.broadcast_to(value, (3,)))

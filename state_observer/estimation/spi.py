"""State-parameter-input (SPI) observer: the errorEKF-FE plus estimators of the vehicle's uncertain parameters, each
fed only by what can tell it (Rodriguez 2020 §5.3.2.2 estimates mass and friction beside the errorEKF-FE; how each is
observed here departs from the seeds, see below).

* Mass, from the wheel-torque balance along the heading (a recursive least squares of the kind of Vahidi, Stefanopoulou
  and Peng 2005): per window of model steps the tires' longitudinal force from the measured wheel torques,
  F_x,i = (T_i - I_i omega_dot_i) / r_i (r_i the loaded radius, divided by 1 + k of the axle's wheel-rate scale the
  errorEKF-FE learnt from GNSS), with the lateral forces' share along the heading and the aerodynamic drag,
  y = sum_i (F_i . e_x) - F_drag, equals m a_x,cg + F_res, a_x,cg the centre of mass's acceleration along the heading and
  F_res an unknown resistance (grade, rolling resistance), a random walk.  A Kalman filter over (m, F_res) takes it.
  The tire model's stiffness does not enter (the seeds' force-balance residual on x and y made the mass absorb every
  lateral tire error); the mass is observable only with longitudinal excitation and known torques, and is left alone
  at low speed, reversing or without torque samples.
* Friction, from the car's utilisation u = |F| / (m g + D) (D the aerodynamic downforce) with the lateral force the accelerometer proves (the published
  forces plus the mass times the accelerometer's mean innovation across the car; in steady cornering the axles share
  the lateral force as they share the weight): the road offers at least the largest utilisation seen (a lower bound
  over the last ``lower_bound_window_s``).  An axle saturates where its force falls below ``saturation_ratio`` of what the vehicle
  file's linear characteristic gives at its slip angle; the slip angle is not taken from the state (whose sideslip is
  set by the very tire model in question) but from the difference of the axles' slip angles, which the steering angle,
  yaw rate and speed fix whatever the sideslip (alpha_f - alpha_r = delta - L r / v_x for a single track), with the
  other axle assumed linear: the understeer angle of the handling diagram (Pacejka 2012, ch. 1).  While an axle
  saturates, the largest utilisation of the episode, over what the model's tires can carry at a friction of 1 at
  their loads (:meth:`VehicleSPI._capacity_ratio`: their load sensitivity), is an observation of mu (a scalar Kalman
  filter with a random walk); the model's friction follows the
  estimate, never below the bound.  The forces of a model that believes the road grippier than it is never show
  saturation at the state's own slip angles: the earlier test on them let the estimate stay at its prior on the
  harness' friction step.  Saturation counts only in steady cornering, judged by the estimated yaw rate's change, not
  by the model's yaw acceleration (which on a road the model thinks grippier is the yaw the gyroscope takes away).
* Cornering stiffness per axle: in the linear range (axle utilisation 0.1-0.45) the axle's published lateral force
  against the model's own at the state's slip angle observes the scale c of its stiffness, but that slip angle carries
  the state's sideslip error, and both axles carry the same one.  So the estimator (a Kalman filter on the inverse
  scales x = 1/c of both axles) takes each window's mean slip angles as the measurement: alpha_a = u_a x_a + dbeta,
  u_a = alpha_a F_pub,a / F_model,a (the slip angle that would give the published force at a scale of 1), with a
  sideslip error dbeta (``cornering_sideslip_sigma_deg``) common to both axles.  What the sideslip cannot hide, the
  difference alpha_f - alpha_r (kinematic: steering, yaw rate, speed), then tells the axles apart wherever their forces'
  ratio changes (turning in, out, braking); a random walk keeps about 10 s of linear-range driving.  The windows'
  errors are correlated over ``cornering_error_time_s``, so a brief pass through the linear range says little.  The published
  sigma adds the error no data removes (``cornering_model_sigma``: a TMeasy curve scaled onto a tire of another
  shape).  It is published, and fed back to the model only with ``cornering_feedback``: in steady cornering a
  stiffness and a sideslip cannot be told apart (the scale adapts to whatever sideslip the state has), and a model that
  takes the scale loses the one thing that anchored its sideslip (on the harness the steady-cornering sideslip error
  grew from 0.39 to 0.49 deg with it).

Every parameter has a status (:data:`NOT_OBSERVABLE`, :data:`CONVERGING`, :data:`CONVERGED`, :data:`AT_BOUND`) and its
bounds, published with it.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, fields

import numpy as np

from numba import njit

from ..vehicle import reduced_kernels as kern
from ..conventions import GRAVITY_M_S2
from ..vehicle.tire import TireOutput, TireParameters
from .errorekf import N, ErrorEkfSettings, VehicleErrorEKF, published_tire_forces

NOT_OBSERVABLE, CONVERGING, CONVERGED, AT_BOUND = 0, 1, 2, 3
FZ_ROW = TireOutput._fields.index("fz_n")  # the model's tire output row of the normal load
_TIRE_COLUMNS = [f.name for f in fields(TireParameters)]  # a tire parameter row's columns (TireParameters.rows)
NOMINAL_LOAD_COLUMN, LOAD_SENSITIVITY_FRICTION_COLUMN = _TIRE_COLUMNS.index("nominal_load_n"), _TIRE_COLUMNS.index("load_sensitivity_friction")
STATUS_NAMES = ("not observable", "converging", "converged", "at a bound")


@dataclass
class SpiSettings:
    """Tuning of the parameter estimators (module docstring); SI units."""

    start_after_s: float = 10.0  # parameters are estimated this long after a start (the state settles first)
    every_steps: int = 10  # one parameter update per this many model steps (averaged over them)
    min_speed_m_s: float = 3.0  # below it (and reversing) nothing is estimated
    # mass
    mass_sigma_kg: float = 150.0  # prior 1-sigma
    mass_walk_kg_per_sqrt_s: float = 0.2
    resistance_sigma_n: float = 300.0
    resistance_walk_n_per_sqrt_s: float = 30.0
    force_balance_sigma_n: float = 150.0  # noise of one window's force balance
    force_balance_relative: float = 0.1  # plus this share of the lateral forces' projection on the heading
    mass_min_acceleration_m_s2: float = 0.5  # windows with less longitudinal acceleration update the resistance only
    mass_max_acceleration_change_m_s2: float = 1.0  # an acceleration that moved more from one window to the next
    mass_settle_s: float = 0.3  # holds the mass and resistance this long (the body's pitch settles)
    mass_bounds: tuple = (0.5, 2.0)  # times the initial mass
    mass_converged: float = 0.03  # 1-sigma below this share of the mass: converged
    # friction
    mu_sigma: float = 0.3  # prior 1-sigma
    mu_walk_per_sqrt_s: float = 0.05
    mu_bounds: tuple = (0.1, 1.5)
    # an axle saturates where its force is below this share of its linear characteristic's at its slip angle (a
    # Magic-Formula tire reaches it at 1.6 times the slip of its peak, where it still gives 96 % of the peak)
    saturation_ratio: float = 0.6
    min_saturated_utilisation: float = 0.15  # and carries at least this (a slip angle from a small rate error is no proof)
    min_saturation_speed_m_s: float = 8.0  # below it slip angles are too uncertain to judge saturation
    # and turns steadily (while the yaw rate builds up the steering leads it): the estimated yaw rate's change over
    # ``yaw_acceleration_s``.  Not the model's yaw acceleration: where the model's tires are wrong (a friction it does not
    # know yet) that is what the gyroscope corrects away each step, and it read 0.1-0.4 rad/s^2 on a car sliding steadily
    # on a surface of 0.6, which then never counted as saturated (tuning seed 108: sideslip 5.1 deg, heading 12 deg off)
    max_yaw_acceleration_rad_s2: float = 0.1
    # 0.3 s and 0.25 s (0.5 and 0.5 before): the friction step's drop was taken 0.24 s sooner on every tuning seed
    # (100-105, settled 1.44 s after it on average instead of 1.67), its sideslip 0.308 -> 0.287 deg with GNSS and
    # 0.458 -> 0.419 without (seed 104 apart, 2.0 -> 2.2 deg either way); the other manoeuvres, with GNSS and with a
    # speed only, to the last digit (nothing else saturates there)
    yaw_acceleration_s: float = 0.3
    min_saturated_s: float = 0.25  # an axle must saturate this long before its utilisation counts
    accel_innovation_s: float = 0.1  # the accelerometer's innovation is averaged over this time (s)
    utilisation_sigma: float = 0.04
    lower_bound_window_s: float = 5.0
    mu_converged: float = 0.05
    # cornering stiffness scales per axle
    cornering: bool = True
    cornering_feedback: bool = False  # the model takes the estimated scales (module docstring)
    cornering_sigma: float = 0.25
    cornering_walk_per_sqrt_s: float = 0.001  # random walk of the inverse scales
    cornering_sideslip_sigma_deg: float = 0.1  # the state's sideslip error, common to both axles' slip angles
    cornering_slip_noise_relative: float = 0.05  # each axle's own error of a window's mean slip angle, of the angle
    # the scale's error no amount of data removes, relative: a TMeasy curve scaled onto a tire of another shape fits as
    # well as the part of the curve the drive used (92 % of the final scales within 2 sigma on the tuning seeds)
    cornering_model_sigma: float = 0.07
    # the axle's range of utilisation, as a share of the friction, that observes its stiffness (the linear range; of the
    # weight instead, the harness' friction step on 0.6 took the scales to their bound 2.0)
    cornering_utilisation: tuple = (0.1, 0.45)
    cornering_bounds: tuple = (0.5, 2.0)
    # A window's slip-angle error (the state's sideslip, the force correction) moves on the filter's time scale, not from
    # one 40 ms window to the next: the windows of this long share one error, and each counts as that share of an
    # independent one (R x error_time / window).  Counted as independent, the ~0.3 s a step steer spends in the linear
    # range while turning in made the scales "converged" from eight windows, on tuning seeds 100-109 10 of 20 axles,
    # a quarter of them outside 2 sigma (seed 103: rear 0.93 +- 0.08, truth 1.22).  With 0.2 s: none converged there,
    # 2-sigma coverage 0.75 -> 0.85, and the errors elsewhere unchanged (lane change, circle, lap: medians 4.8, 4.7,
    # 5.8 -> 4.8, 4.7, 5.9 %).  0.5 s left a race lap's corners "converging" at a 6 % error.
    cornering_error_time_s: float = 0.2
    cornering_converged: float = 0.08  # the model's sigma and a little: the data have said what they can


class VehicleSPI(VehicleErrorEKF):
    """errorEKF-FE (:class:`VehicleErrorEKF`) plus the parameter estimators of the module docstring, run after each
    correction.  Read the estimates from :meth:`parameter_report`."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None, spi: SpiSettings | None = None):
        super().__init__(vehicle, mounts, settings)
        self.spi = spi or SpiSettings()
        self.torques_known = False  # set by the caller when wheel torques are measured (mass needs them)
        self._x_cg_m = float(vehicle.desc.com_m[0]) if hasattr(vehicle, "desc") else 0.0
        self._reset_parameters()

    # ----- life cycle ---------------------------------------------------------------------------------
    def _reset_parameters(self) -> None:
        sp, v = self.spi, self.vehicle
        self._initial_mass = float(v.total_mass_kg)
        self.mass = np.array([self._initial_mass, 0.0])  # mass kg, resistance N
        self.P_mass = np.diag([sp.mass_sigma_kg**2, sp.resistance_sigma_n**2])
        self.mu_prior = float(np.mean(v.mu))
        self.mu, self.P_mu = self.mu_prior, sp.mu_sigma**2
        self.mu_lower_bound = 0.0
        self._utilisation = deque()  # (t, largest utilisation)
        self._mu_seen_s = -math.inf  # when a saturating axle was last seen
        self._accel_innovation = np.zeros(2)  # mean accelerometer innovation along and across base_link (m/s^2)
        self._saturated_s = 0.0  # how long an axle has been seen saturating
        self._yaw_rates = deque()  # (t, the window's mean estimated yaw rate) over the last yaw_acceleration_s
        self._episode_u, self._episode_end_s = 0.0, -math.inf  # the saturation episode's largest utilisation, its last time
        self._cornering_seen = np.zeros(2, dtype=bool)
        scales = np.array(v.tire_scales[:2], dtype=float)
        self._inverse_cornering = 1.0 / scales  # the estimator's state: 1 / scale per axle, and its covariance
        self._P_inverse_cornering = np.diag(sp.cornering_sigma**2 / scales**4)
        self._mass_seen = False
        # parameters whose last update from data wanted to go beyond a bound: "at a bound" even where an update of a
        # correlated state (the resistance, the other axle) has since moved them a little off it
        self._against_bound = {"mass": False, "cornering_front": False, "cornering_rear": False}
        self._last_window_a = math.nan  # the previous window's acceleration (m/s^2): the mass counts only steady ones
        self._unsteady_until_s = -math.inf
        self._window = _Window()
        self._forces = np.empty((4, 3))  # accumulate_step's work array for the published tire forces
        self._steps = 0
        self._t0 = v.solver.t if v.solver is not None else 0.0

    def start(self, *args, **kwargs) -> None:
        super().start(*args, **kwargs)
        self._reset_parameters()

    def correct(self) -> None:
        super().correct()
        t = self.vehicle.solver.t
        if t - self._t0 < self.spi.start_after_s or self.diverged:
            return
        self._accumulate()
        self._steps += 1
        if self._steps % self.spi.every_steps == 0:
            self.update_parameters()

    # ----- the estimators -----------------------------------------------------------------------------
    def _accumulate(self) -> None:
        """Add this step's force balance, utilisations and axle force ratios to the window (:func:`accumulate_step`)."""
        v, sp, w = self.vehicle, self.spi, self._window
        solver = v.solver
        x_front, x_rear = self._axle_x_m
        low, high = sp.cornering_utilisation
        w.stopped |= accumulate_step(w.sums, v.tire_output_array, v.contact_array, v.force_correction, solver.q, solver.qd, solver.qdd, x_front, x_rear,
                                    self.torques_known, v.drive_torque_n_m, v.brake_torque_n_m, v.body, v.tire_rows[:, 5], v.tire_scales,
                                    self._x_cg_m, float(self.mu), low, high, sp.min_speed_m_s, self._forces,
                                    float(self._accel_innovation[0]) if self.slope_col >= 0 else 0.0, self.wheel_scale)

    def update_parameters(self) -> None:
        """One update of every estimator from the window's averages (module docstring)."""
        sp, v, w = self.spi, self.vehicle, self._window
        dt = sp.every_steps * v.dt_s
        t = v.solver.t
        # mass
        self.P_mass += np.diag([sp.mass_walk_kg_per_sqrt_s**2, sp.resistance_walk_n_per_sqrt_s**2]) * dt
        lo_m, hi_m = (b * self._initial_mass for b in sp.mass_bounds)
        if not w.mass_n or w.stopped:
            self._last_window_a = math.nan
        else:
            a, y, lateral, traction, turning = w.mass_sum / w.mass_n
            # excitation: a change of speed the wheel torques drive (not the cornering drag of a coasting car, nor the
            # turning part of the acceleration, whose sideslip the mass would then absorb: on the harness' step steer at
            # constant speed it took the mass from 1501 to 905 kg in 8 s)
            speed_change = a - turning
            # and a steady one: after the acceleration steps (a brake applied) the body pitches, which the acceleration
            # of the chassis' origin does not count, and the wheels' spin, the tires' relaxation and the torque samples'
            # age break the balance for a while (the first 0.2 s of a brake with ABS read 870-1290 kg for 1501)
            if not abs(a - self._last_window_a) <= sp.mass_max_acceleration_change_m_s2:
                self._unsteady_until_s = t + sp.mass_settle_s
            self._last_window_a = a
            steady = t >= self._unsteady_until_s
            excited = (steady and abs(speed_change) >= sp.mass_min_acceleration_m_s2 and abs(turning) < 0.25 * abs(speed_change)
                       and traction >= 0.5 * self.mass[0] * abs(a) and lateral < 0.3 * traction)
            # without longitudinal excitation the window says nothing of the mass: it updates the resistance alone, the
            # mass a considered (Schmidt) state, not moved through its correlation with the resistance (as the Kalman
            # gain would: on the harness' race circle, windows whose turning part had grown moved the mass 986 -> 994 kg
            # of a 959 kg car); an unsteady window updates neither
            H = np.array([a, 1.0]) if excited else np.array([0.0, 1.0])
            y = y if excited else y - a * self.mass[0]
            R = (sp.force_balance_sigma_n + sp.force_balance_relative * lateral) ** 2
            S = H @ self.P_mass @ H + R
            K = self.P_mass @ H / S
            if not excited:
                K[0] = 0.0
            innovation = y - H @ self.mass
            if steady and innovation**2 / S < 25.0:
                self.mass = self.mass + K * innovation
                keep = np.eye(2) - np.outer(K, H)
                self.P_mass = keep @ self.P_mass @ keep.T + np.outer(K, K) * R  # Joseph form: right for any gain
                self._mass_seen = self._mass_seen or excited
                if excited:  # the data said where the mass is: inside its bounds, or beyond one
                    self._against_bound["mass"] = not lo_m < self.mass[0] < hi_m
        self.mass[0] = min(max(self.mass[0], lo_m), hi_m)
        if abs(self.mass[0] - v.total_mass_kg) > 0.1:
            v.set_total_mass(self.mass[0])
        # friction
        self.P_mu += sp.mu_walk_per_sqrt_s**2 * dt
        u_max, u_saturated = self._axle_friction(w)
        capacity = self._capacity_ratio()  # utilisations in units of the model's friction
        u_max, u_saturated = u_max / capacity, u_saturated / capacity
        self.tires_saturate = math.isfinite(u_saturated)
        if math.isfinite(u_max):
            self._utilisation.append((t, u_max))
        while self._utilisation and self._utilisation[0][0] < t - sp.lower_bound_window_s:
            self._utilisation.popleft()
        if self._utilisation:
            best = max(self._utilisation, key=lambda r: r[1])
            self.mu_lower_bound = best[1]
        if math.isfinite(u_saturated):
            # a saturating axle: its utilisation is the friction here and now (a bound from earlier, perhaps on another
            # surface, no longer holds)
            K = self.P_mu / (self.P_mu + sp.utilisation_sigma**2)
            self.mu += K * (u_saturated - self.mu)
            self.P_mu *= 1.0 - K
            self._mu_seen_s = t
            self._utilisation.clear()
            self._utilisation.append((t, min(u_max, self.mu)))
            self.mu_lower_bound = min(u_max, self.mu)
        self.mu = min(max(self.mu, self.mu_lower_bound, sp.mu_bounds[0]), sp.mu_bounds[1])
        old = v.parameters
        if abs(self.mu - old[1]) > 1e-4:
            new = old.copy()
            new[1] = self.mu
            self._take_parameters(old, new)
        # cornering stiffness
        if sp.cornering:
            old = v.parameters
            self._update_cornering(w, dt)
            if sp.cornering_feedback and np.any(np.abs(self.cornering - old[2:4]) > 1e-6):
                self._take_cornering(old)
        self._window = _Window()

    def _update_cornering(self, w: "_Window", dt: float) -> None:
        """The inverse scales x_a = 1 / c_a from the window's mean slip angles (module docstring): alpha_a = u_a x_a +
        dbeta, u_a = alpha_a F_pub,a / F_model,a (F_model at a scale of 1), dbeta the sideslip error both axles share."""
        sp = self.spi
        x, P = self._inverse_cornering, self._P_inverse_cornering
        P += np.eye(2) * sp.cornering_walk_per_sqrt_s**2 * dt
        seen = [a for a in range(2) if w.corner_n[a]]
        if seen:
            alpha = w.corner_alpha[seen] / w.corner_n[seen]
            H = np.zeros((len(seen), 2))
            H[range(len(seen)), seen] = w.corner_u[seen] / w.corner_n[seen]
            sideslip = math.radians(sp.cornering_sideslip_sigma_deg)
            R = np.full((len(seen), len(seen)), sideslip**2) + np.diag((sp.cornering_slip_noise_relative * np.abs(alpha) + 1e-4) ** 2)
            R *= max(1.0, sp.cornering_error_time_s / dt)
            K = P @ H.T @ np.linalg.inv(H @ P @ H.T + R)
            x += K @ (alpha - H @ x)
            P[:] = (np.eye(2) - K @ H) @ P
            lo, hi = sp.cornering_bounds
            for a in seen:
                self._against_bound[("cornering_front", "cornering_rear")[a]] = not 1.0 / hi < x[a] < 1.0 / lo
            np.clip(x, 1.0 / hi, 1.0 / lo, out=x)
            self._cornering_seen[seen] = True

    @property
    def cornering(self) -> np.ndarray:
        """The cornering-stiffness scales (front, rear): 1 / the estimator's inverse scales."""
        return 1.0 / self._inverse_cornering

    @property
    def P_cornering(self) -> np.ndarray:
        """The scales' variances from the inverse scales' (sigma_c = sigma_x c^2)."""
        return np.diag(self._P_inverse_cornering) * self.cornering**4

    def _capacity_ratio(self) -> float:
        """What the car can carry at friction mu, over mu times its weight: sum_i lam_i F_z,i / sum_i F_z,i at the model's
        normal loads F_z,i, lam_i = max(1 - q_mu (F_z,i / F_z0 - 1), 0.2) the tire's peak friction at that load over its
        friction at F_z0 (the load sensitivity of :func:`~state_observer.vehicle.tire.tmeasy_into`).  A car cornering
        at its limit with the loads shifted outwards reaches a utilisation of mu times this (0.96 for q_mu 0.15 and half
        the static load transferred), so a utilisation seen is the model's friction times it."""
        rows, fz = self.vehicle.tire_rows, np.asarray(self.vehicle.tire_output_array[FZ_ROW], float)
        total = float(fz.sum())
        if not total > 0.0:
            return 1.0
        lam = np.maximum(1.0 - rows[:, LOAD_SENSITIVITY_FRICTION_COLUMN] * (fz / rows[:, NOMINAL_LOAD_COLUMN] - 1.0), 0.2)
        return float(lam @ fz) / total

    def _axle_friction(self, w: "_Window") -> tuple[float, float]:
        """The window's utilisation and, once an axle has saturated for ``min_saturated_s``, the largest utilisation of
        the saturation episode (else NaN) (module docstring).

        Window means: u = |(sum F_x, sum F_y + m a_nu,y)| / (m g + D) over the four tires (published forces, a_nu the
        accelerometer's mean innovation across base_link, D the downforce at the window's speed; the weight, not the model's normal loads, which follow its
        heave and pitch errors), which in steady cornering is each axle's too (the axles share the lateral force as they
        share the weight; the model's own split follows its force correction).  An axle saturates if
        u_y < saturation_ratio k tan(alpha'), alpha' its slip angle with the other axle's taken as linear,
        atan(u_y / k_other), plus the measured difference of the two (alpha_f - alpha_r)."""
        sp = self.spi
        if not w.axle_n:
            return math.nan, math.nan
        n = w.axle_n
        t = self.vehicle.solver.t
        rates = self._yaw_rates
        rates.append((t, w.yaw_rate / n))
        while t - rates[0][0] > sp.yaw_acceleration_s:
            rates.popleft()
        span = t - rates[0][0]
        steady = span >= 0.5 * sp.yaw_acceleration_s and abs(rates[-1][1] - rates[0][1]) <= sp.max_yaw_acceleration_rad_s2 * span
        mass = self.vehicle.total_mass_kg
        weight = mass * GRAVITY_M_S2 + self.vehicle.downforce_n(w.speed / n)  # what presses the tires on the road
        fy = w.fy / n + mass * self._accel_innovation[1]
        u_y = fy / weight
        u = math.hypot(w.fx / n, fy) / weight
        if abs(u_y) < sp.min_saturated_utilisation or w.speed / n < sp.min_saturation_speed_m_s or not steady:
            self._saturated_s = 0.0
            return u, math.nan
        k, alpha = w.axle_k / n, w.axle_alpha / n
        slip_difference = alpha[1] - alpha[0]  # front minus rear slip angle, signed as the lateral force (u_y = k tan(slip))
        linear = np.arctan(u_y / k)
        slip = np.array([linear[1] + slip_difference, linear[0] - slip_difference])
        demand = k * np.tan(np.clip(slip, -1.4, 1.4))  # what each axle's linear characteristic gives at that slip angle
        saturating = (u_y * demand > 0.0) & (abs(u_y) < sp.saturation_ratio * np.abs(demand))
        self._saturated_s = self._saturated_s + sp.every_steps * self.vehicle.dt_s if saturating.any() else 0.0
        if self._saturated_s < sp.min_saturated_s:
            return u, math.nan
        # one episode of saturation (gaps shorter than a second): the tire passed through its peak on the way in, and
        # beyond it gives less as it slides (a Magic-Formula tire ~10 % less at 17 deg): the episode's largest utilisation
        self._episode_u = u if t - self._episode_end_s > 1.0 else max(self._episode_u, u)
        self._episode_end_s = t
        return u, self._episode_u

    def update_imu(self, angular_velocity_rad_s, linear_acceleration_m_s2, gyro_sigma, accel_sigma):
        """The errorEKF-FE's IMU update, then the accelerometer's innovation of it (all three axes, rotated into
        base_link) into its mean over ``accel_innovation_s``, which the friction estimate adds to the published lateral
        forces."""
        stats = self.stats["accelerometer"]
        before = stats.last_innovation
        applied = super().update_imu(angular_velocity_rad_s, linear_acceleration_m_s2, gyro_sigma, accel_sigma)
        nu = stats.last_innovation  # a new array whenever the update computed one (applied or gated out)
        if nu is not before and len(nu) == 3:
            nu = np.asarray(self.mounts.imu_rotation, float) @ nu
            gain = min(1.0, 0.01 / self.spi.accel_innovation_s)  # 100 Hz
            self._accel_innovation += gain * (nu[:2] - self._accel_innovation)
        return applied

    def _take_cornering(self, old: np.ndarray) -> None:
        """The model takes the new stiffness scales."""
        new = old.copy()
        new[2:4] = self.cornering
        self._take_parameters(old, new)

    def _take_parameters(self, old: np.ndarray, new: np.ndarray) -> None:
        """The model takes the parameters ``new`` (layout of ``vehicle.parameters``); its force correction gives back what
        the tires now carry, so that the total force on the chassis is unchanged at the instant."""
        v = self.vehicle
        r = v.force_residuals(np.stack([old, new]), np.arange(N), steady_tires=True)
        v.apply_parameters(new, carry_tire_forces=True)
        change = np.zeros(N)
        change[:6] = r[0, :6] - r[1, :6]  # the tires' generalised force gained on the chassis
        v.force_correction -= change

    # ----- read-out ---------------------------------------------------------------------------------
    def parameter_sigma(self) -> np.ndarray:
        """1-sigma of mass (kg) and friction."""
        return np.array([math.sqrt(max(self.P_mass[0, 0], 0.0)), math.sqrt(max(self.P_mu, 0.0))])

    def parameter_report(self) -> dict:
        """Each parameter's value, 1-sigma, status (NOT_OBSERVABLE ...), bounds; friction also its proven lower bound."""
        sp, v = self.spi, self.vehicle
        mass_sigma, mu_sigma = self.parameter_sigma()
        lo, hi = (b * self._initial_mass for b in sp.mass_bounds)

        def status(seen: bool, value: float, bounds: tuple, sigma: float, converged: float, against: bool = False) -> int:
            if not seen:
                return NOT_OBSERVABLE
            if against or value <= bounds[0] + 1e-9 or value >= bounds[1] - 1e-9:
                return AT_BOUND
            return CONVERGED if sigma < converged else CONVERGING

        started = v.solver is not None and v.solver.t - self._t0 >= sp.start_after_s
        mu_seen = started and v.solver.t - self._mu_seen_s < sp.lower_bound_window_s
        report = {
            "mass": dict(value=float(self.mass[0]), sigma=float(mass_sigma), bounds=(lo, hi),
                         status=status(started and self._mass_seen, self.mass[0], (lo, hi), mass_sigma, sp.mass_converged * self.mass[0],
                                       self._against_bound["mass"])),
            "friction": dict(value=float(self.mu), sigma=float(mu_sigma), bounds=sp.mu_bounds, lower_bound=float(self.mu_lower_bound),
                             status=status(mu_seen, self.mu, sp.mu_bounds, mu_sigma, sp.mu_converged)),
        }
        for a, name in enumerate(("cornering_front", "cornering_rear")):
            sigma = math.sqrt(self.P_cornering[a] + (sp.cornering_model_sigma * self.cornering[a]) ** 2)
            report[name] = dict(value=float(self.cornering[a]), sigma=sigma, bounds=sp.cornering_bounds,
                                status=status(started and self._cornering_seen[a], self.cornering[a], sp.cornering_bounds, sigma, sp.cornering_converged,
                                              self._against_bound[name]))
        return report


# the window's sums (_Window.sums): mass balance (a, y, lateral, traction, turning) and its count, the published forces,
# per axle the cornering stiffness per load and the slip angle, speed, yaw rate and their count, per axle the cornering
# estimator's slip angles and regressors and their counts
W_MASS, W_MASS_N, W_FX, W_FY, W_AXLE_K, W_AXLE_ALPHA, W_SPEED, W_YAW_RATE, W_AXLE_N = 0, 5, 6, 7, 8, 10, 12, 13, 14
W_CORNER_ALPHA, W_CORNER_U, W_CORNER_N, W_SIZE = 15, 17, 19, 21


class _Window:
    """Sums over one parameter-update window (:func:`accumulate_step` adds each model step's)."""

    def __init__(self):
        self.stopped = False
        self.sums = np.zeros(W_SIZE)

    mass_sum = property(lambda self: self.sums[W_MASS:W_MASS_N])
    mass_n = property(lambda self: int(self.sums[W_MASS_N]))
    fx = property(lambda self: float(self.sums[W_FX]))
    fy = property(lambda self: float(self.sums[W_FY]))
    axle_k = property(lambda self: self.sums[W_AXLE_K:W_AXLE_K + 2])
    axle_alpha = property(lambda self: self.sums[W_AXLE_ALPHA:W_AXLE_ALPHA + 2])
    speed = property(lambda self: float(self.sums[W_SPEED]))
    yaw_rate = property(lambda self: float(self.sums[W_YAW_RATE]))
    axle_n = property(lambda self: int(self.sums[W_AXLE_N]))
    corner_alpha = property(lambda self: self.sums[W_CORNER_ALPHA:W_CORNER_ALPHA + 2])
    corner_u = property(lambda self: self.sums[W_CORNER_U:W_CORNER_U + 2])
    corner_n = property(lambda self: self.sums[W_CORNER_N:W_CORNER_N + 2])


@njit(cache=True)
def _sum4(a) -> float:
    """a[0] + a[1] + a[2] + a[3], left to right (numpy's order for four elements: the same bits)."""
    return ((a[0] + a[1]) + a[2]) + a[3]


@njit(cache=True)
def accumulate_step(sums, tire_out, geo, fc, q, qd, qdd, x_front, x_rear, torques_known, drive, brake, body, k, tire_scales, x_cg, mu,
                    low, high, min_speed, forces, accel_innovation, wheel_scale):
    """One model step into a window's ``sums`` (layout W_*; :meth:`VehicleSPI._accumulate`): returns True where the car
    is slower than ``min_speed`` (m/s; the window then counts as stopped).  ``forces`` (4, 3) takes the published tire
    forces (:func:`.errorekf.published_tire_forces`).

    Mass: the torque balance along the heading, F_x,i = (1 + k_a) (T_i - I_i omega_dot_i) / r_i (r_i the loaded radius,
    k_a the axle's learnt wheel-rate scale ``wheel_scale`` (2,): a tire that rolls on a radius r_i / (1 + k_a) pushes
    that much less for a torque), with the lateral forces' share along the heading and the drag; along the heading the
    centre of mass accelerates by the speed change plus a turning part -v_y r - r^2 x_cg, which only the sideslip sets.  Friction: the published forces, the axles'
    stiffness per load and slip angles.  Cornering stiffness: per axle in the linear range (utilisation low-high of the
    friction ``mu``) the published lateral force, the model's at a scale of 1 and the mean slip angle."""
    yaw = q[5]
    c, s = math.cos(yaw), math.sin(yaw)
    speed = c * qd[0] + s * qd[1]
    if speed < min_speed:
        return True
    published_tire_forces(tire_out, geo, fc, yaw, x_front, x_rear, forces)
    fz = np.maximum(forces[:, 2], 0.0)
    if torques_known:
        fx_torque = np.empty(4)
        lateral, along = 0.0, 0.0
        for i in range(4):
            spin = qd[10 + i]
            torque = drive[i] - brake[i] * math.tanh(spin / max(body[kern.B_BRAKE_EPS + i], 1e-6))
            # the contact force's arm is the loaded radius, the tire's own: the file's over (1 + k) where the wheel rates
            # showed the tire rolls on another (on the harness, a front radius 1 % over the file's put the mass 1 % high)
            fx_torque[i] = (1.0 + wheel_scale[i // 2]) * (torque - body[kern.B_SPIN_I + i] * qdd[10 + i]) / max(geo[i, 13], 0.05)
            lateral += forces[i, 1] * (c * geo[i, 3] + s * geo[i, 4])  # the tires' lateral axes along the heading
            along += fx_torque[i] * (c * geo[i, 0] + s * geo[i, 1])
        along += lateral
        drag = body[kern.B_AERO_COEF] * speed * abs(speed)
        yaw_rate = qd[5]
        turning = -(c * qd[1] - s * qd[0]) * yaw_rate - yaw_rate**2 * x_cg
        # what the tires drive: the specific force along the heading, as the accelerometer reads it (the model's, which
        # leaves out gravity's part along the heading, the road's estimated slope, plus the accelerometer's mean
        # innovation ``accel_innovation``, m/s^2): a mass error and a grade both make the model's speed wrong, and
        # the filter may take either for the other; only the mass changes what the accelerometer reads
        a_cg = c * (qdd[0] - body[kern.B_GRAVITY_X]) + s * (qdd[1] - body[kern.B_GRAVITY_Y]) + accel_innovation - yaw_rate**2 * x_cg
        sums[W_MASS] += a_cg
        sums[W_MASS + 1] += along - drag
        sums[W_MASS + 2] += abs(lateral)
        sums[W_MASS + 3] += abs(_sum4(fx_torque))
        sums[W_MASS + 4] += turning
        sums[W_MASS_N] += 1.0
    if not (fz > 200.0).any():
        return False
    sums[W_FX] += _sum4(forces[:, 0])
    sums[W_FY] += _sum4(forces[:, 1])
    for a in range(2):
        sums[W_AXLE_K + a] += (k[2 * a] + k[2 * a + 1]) / 2.0
        sums[W_AXLE_ALPHA + a] += (tire_out[5, 2 * a] + tire_out[5, 2 * a + 1]) / 2.0
    sums[W_SPEED] += speed
    sums[W_YAW_RATE] += qd[5]
    sums[W_AXLE_N] += 1.0
    for a in range(2):
        fy_axle = forces[2 * a, 1] + forces[2 * a + 1, 1]
        fz_axle = fz[2 * a] + fz[2 * a + 1]
        model_fy_axle = tire_out[1, 2 * a] + tire_out[1, 2 * a + 1]
        axle_u = abs(fy_axle) / max(mu * fz_axle, 1.0)  # of the friction the road offers
        if low < axle_u < high and abs(model_fy_axle) > 1.0:
            model_unit = model_fy_axle / tire_scales[a]  # the model's force per unit of the model's own scale
            alpha = (tire_out[5, 2 * a] + tire_out[5, 2 * a + 1]) / 2.0
            sums[W_CORNER_ALPHA + a] += alpha
            sums[W_CORNER_U + a] += alpha * fy_axle / model_unit
            sums[W_CORNER_N + a] += 1.0
    return False

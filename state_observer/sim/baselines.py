"""Baseline estimators, run on the same sensor samples as the observer so that its accuracy
figures (position, sideslip angle, yaw rate) are always printed beside theirs.

* :class:`KinematicEKF`: robot_localization's ``ekf_node`` in ``two_d_mode`` as a ROS user sets it
  up for a car (IMU yaw rate and accelerations, wheel-odometry twist, GNSS position through
  ``navsat_transform_node``).
* :class:`LinearSingleTrack`: the linear single-track (bicycle) model run open loop on the
  measured steering-wheel angle and wheel speed.

Both consume the records of :mod:`state_observer.sensors.samples` in stamp order through
``feed(sample)`` and report a :class:`BaselineState`. Conventions: REP-103 base_link (x forward,
y left, z up; origin on the ground below the rear-axle centre), ENU world, yaw from east
counter-clockwise; sideslip at base_link beta = atan(v_y / v_x) of the base_link velocity in
base_link axes, 0 below 0.5 m/s.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from ..conventions import sideslip_rad
from ..sensors.geodesy import LocalENU
from ..sensors.samples import GnssFix, ImuSample, SteeringSample, WheelSample

"""Below this speed (m/s) the sideslip angle is reported as 0."""


class BaselineState(NamedTuple):
    stamp_ns: int
    position_m: np.ndarray  # (2,) ENU x, y of base_link (m); NaN where not estimated
    yaw_rad: float
    velocity_body_m_s: np.ndarray  # (2,) base_link velocity in base_link axes (m/s)
    yaw_rate_rad_s: float
    sideslip_rad: float  # atan(v_y / v_x) at base_link (conventions.sideslip_rad)


def _wrap(angle_rad: float) -> float:
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi


X, Y, YAW, VX, VY, VYAW, AX, AY = range(8)


class KinematicEKF:
    """robot_localization's EKF in ``two_d_mode``, configured as usual for a car.

    Taken from robot_localization (``src/ekf.cpp``, ``src/filter_base.cpp``,
    ``src/ros_filter.cpp``, ``params/ekf.yaml``, ``src/navsat_transform.cpp``; docs "Preparing
    your data", "Integrating GPS data"):

    * state s = [x, y, yaw, vx, vy, yaw_rate, ax, ay]: pose in ENU, velocities and
      accelerations in base_link; two_d_mode drops z, roll, pitch and their rates (it fuses them
      as measured 0 with variance 1e-6, ``forceTwoD``, which amounts to not estimating them);
    * its omnidirectional constant-acceleration model with roll = pitch = 0 (c, s of yaw)::

          x   += (c vx - s vy) dt + (c ax - s ay) dt^2 / 2     yaw += yaw_rate dt
          y   += (s vx + c vy) dt + (s ax + c ay) dt^2 / 2     vx  += ax dt,  vy += ay dt

      Body-axis velocities integrate body-axis accelerations with no yaw_rate x v term, so in a
      steady turn the measured a_y = v r drives vy away from 0 until the odometry's vy = 0
      pulls it back: a property of robot_localization kept on purpose;
    * P <- J P J^T + Q dt with the analytic Jacobian J and Q the default (template)
      process_noise_covariance, :attr:`PROCESS_NOISE_DIAG`; initial_estimate_covariance 1e-9 I;
      dynamic process noise off; yaw wrapped to [-pi, pi);
    * correction per message: H selects the measured entries, K = P H^T (H P H^T + R)^-1,
      Joseph form P = (I - K H) P (I - K H)^T + K R K^T; measurement variances below 1e-9 raised
      to 1e-9; NaN entries skipped; Mahalanobis thresholds off (its default: infinite); a
      message stamped before the last one is corrected without a prediction.

    Measurements (the usual car set-up):

    * imu0 [yaw_rate, ax, ay]: gyro and specific force rotated to base_link, w = R_bs w_s,
      f = R_bs f_s, and the accelerometer moved from the IMU position r to the base_link origin
      as in the ROS 2 / noetic ``prepareAcceleration``: a = f + r x alpha - (r x w) x w, with w
      the filter's (0, 0, yaw_rate) and alpha its backward difference at every tick of the
      node's 30 Hz timer (``differentiateMeasurements``); older releases rotate only.
      imu0_remove_gravitational_acceleration with no orientation in the message uses the
      filter's roll = pitch = 0: the vehicle is taken as level on a flat road, gravity lies
      along base_link z and ax, ay are the x, y of a (body roll in a turn leaves
      g sin(roll) in ay). Variances sigma^2 of the sample.
    * odom0 twist [vx, vy] of the wheel odometry: vx = mean_i(omega_i r_i), vy = 0
      (non-holonomic), variances ``wheel_vx_variance_m2_s2`` (0.0025) and
      ``wheel_vy_variance_m2_s2`` (0.01), constant as in differential/Ackermann drive drivers.
    * odom1 [x, y] from navsat_transform: the antenna's ENU position less the lever arm rotated
      by the current yaw estimate (getRobotOriginWorldPose), p = p_a - Rz(yaw) r_a, with the
      fix's ENU x-y covariance; fixes with status < 0 or non-finite are dropped (its good_gps
      check). The yaw dependence is not in H (navsat_transform is a separate node).
    * GNSS velocity and steering are not used.

    The state starts at ``start`` (like set_pose / initial_state) instead of the first
    measurement's values.
    """

    PROCESS_NOISE_DIAG = (0.05, 0.05, 0.06, 0.025, 0.025, 0.02, 0.01, 0.01)
    """robot_localization's default Q for x, y, yaw, vx, vy, vyaw, ax, ay (per s)."""
    INITIAL_VARIANCE = 1e-9
    MIN_MEASUREMENT_VARIANCE = 1e-9

    def __init__(self, datum: LocalENU, mounts, wheel_radius_m: Sequence[float],
                 start: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0), t0_ns: int = 0,
                 wheel_vx_variance_m2_s2: float = 0.0025, wheel_vy_variance_m2_s2: float = 0.01,
                 frequency_hz: float = 30.0):
        """``start`` = (x_m, y_m, yaw_rad, speed_m_s) of base_link at ``t0_ns``; ``mounts`` a
        :class:`~state_observer.sensors.mounts.SensorMounts`; ``wheel_radius_m`` (4,) dynamic radii;
        ``frequency_hz`` the node's timer (its default 30 Hz), which differentiates the yaw rate."""
        self.datum = datum
        self.imu_rotation = np.asarray(mounts.imu_rotation, dtype=float)
        self.imu_position_m = np.asarray(mounts.imu_position_m, dtype=float).copy()
        self.gnss_lever_m = np.asarray(mounts.gnss_position_m, dtype=float)[:2].copy()
        self.wheel_radius_m = np.broadcast_to(np.asarray(wheel_radius_m, dtype=float), (4,)).copy()
        self.wheel_variances = np.array([wheel_vx_variance_m2_s2, wheel_vy_variance_m2_s2], dtype=float)
        x, y, yaw, speed = (float(v) for v in start)
        self.x = np.array([x, y, _wrap(yaw), speed, 0.0, 0.0, 0.0, 0.0])
        self.P = self.INITIAL_VARIANCE * np.eye(8)
        self.Q = np.diag(self.PROCESS_NOISE_DIAG)
        self.stamp_ns = int(t0_ns)
        self.tick_ns = round(1e9 / frequency_hz)
        self.yaw_acceleration_rad_s2 = 0.0  # yaw-rate difference quotient at the last timer tick (rad/s^2) ...
        self.yaw_acceleration_stamp_ns, self._diff_rate = self.stamp_ns, 0.0  # ... that tick (ns) and the yaw rate there

    def feed(self, sample) -> None:
        """Predict to the sample's stamp and correct with it (unused sample types are ignored)."""
        if isinstance(sample, ImuSample):
            measure = self._imu
        elif isinstance(sample, WheelSample):
            measure = self._wheel
        elif isinstance(sample, GnssFix) and sample.status >= 0 and np.isfinite(
                [sample.latitude_deg, sample.longitude_deg, sample.altitude_m]).all():
            measure = self._gnss
        else:
            return
        self._differentiate(sample.stamp_ns)
        self.predict_to(sample.stamp_ns)
        self._correct(*measure(sample))

    def _differentiate(self, stamp_ns: int) -> None:
        """At the last timer tick before ``stamp_ns`` (if new): alpha = (r - r_last tick) / (t - t_last tick)."""
        tick = self.yaw_acceleration_stamp_ns + (int(stamp_ns) - self.yaw_acceleration_stamp_ns) // self.tick_ns * self.tick_ns
        if tick > self.yaw_acceleration_stamp_ns:
            rate = float(self.x[VYAW])
            self.yaw_acceleration_rad_s2 = (rate - self._diff_rate) / ((tick - self.yaw_acceleration_stamp_ns) * 1e-9)
            self.yaw_acceleration_stamp_ns, self._diff_rate = tick, rate

    def predict_to(self, stamp_ns: int) -> None:
        """Motion model and covariance over dt = stamp - last stamp (nothing if dt <= 0)."""
        dt = (int(stamp_ns) - self.stamp_ns) * 1e-9
        if dt <= 0.0:
            return
        s = self.x
        c, sn = math.cos(s[YAW]), math.sin(s[YAW])
        h = 0.5 * dt * dt
        F = np.eye(8)
        F[X, [VX, VY, AX, AY]] = c * dt, -sn * dt, c * h, -sn * h
        F[Y, [VX, VY, AX, AY]] = sn * dt, c * dt, sn * h, c * h
        F[YAW, VYAW] = F[VX, AX] = F[VY, AY] = dt
        J = F.copy()
        J[X, YAW] = -(sn * s[VX] + c * s[VY]) * dt - (sn * s[AX] + c * s[AY]) * h
        J[Y, YAW] = (c * s[VX] - sn * s[VY]) * dt + (c * s[AX] - sn * s[AY]) * h
        self.x = F @ s
        self.x[YAW] = _wrap(self.x[YAW])
        self.P = J @ self.P @ J.T + dt * self.Q
        self.stamp_ns = int(stamp_ns)

    def _imu(self, m: ImuSample):
        w = self.imu_rotation @ np.asarray(m.angular_velocity_rad_s, dtype=float)
        f = self.imu_rotation @ np.asarray(m.linear_acceleration_m_s2, dtype=float)
        rx, ry = self.imu_position_m[:2]
        rate, alpha = float(self.x[VYAW]), self.yaw_acceleration_rad_s2
        ax = f[0] + alpha * ry + rate * rate * rx  # f + r x alpha - (r x w) x w, x and y
        ay = f[1] - alpha * rx + rate * rate * ry
        var_w = float(np.nanmax(np.broadcast_to(np.asarray(m.angular_velocity_sigma, dtype=float), (3,)))) ** 2
        var_a = float(np.nanmax(np.broadcast_to(np.asarray(m.linear_acceleration_sigma, dtype=float), (3,)))) ** 2
        return [VYAW, AX, AY], np.array([w[2], ax, ay]), np.diag([var_w, var_a, var_a])

    def _wheel(self, m: WheelSample):
        speeds = np.asarray(m.rate_rad_s, dtype=float) * self.wheel_radius_m
        if not np.isfinite(speeds).any():
            return [], np.zeros(0), np.zeros((0, 0))
        return [VX, VY], np.array([float(np.nanmean(speeds)), 0.0]), np.diag(self.wheel_variances)

    def _gnss(self, m: GnssFix):
        antenna = self.datum.to_enu(m.latitude_deg, m.longitude_deg, m.altitude_m)[:2]
        c, sn = math.cos(self.x[YAW]), math.sin(self.x[YAW])
        lever = np.array([[c, -sn], [sn, c]]) @ self.gnss_lever_m  # Rz(yaw) r_a, x-y part
        return [X, Y], antenna - lever, np.asarray(m.position_covariance_enu_m2, dtype=float)[:2, :2]

    def _correct(self, index: list[int], z: np.ndarray, R: np.ndarray) -> None:
        keep = np.flatnonzero(np.isfinite(z))
        if keep.size == 0:
            return
        idx = np.asarray(index)[keep]
        z, R = z[keep], np.array(R[np.ix_(keep, keep)], dtype=float)
        np.fill_diagonal(R, np.maximum(np.abs(np.diag(R)), self.MIN_MEASUREMENT_VARIANCE))
        H = np.zeros((idx.size, 8))
        H[np.arange(idx.size), idx] = 1.0
        PHt = self.P @ H.T
        K = np.linalg.solve(H @ PHt + R, PHt.T).T  # S is symmetric
        self.x = self.x + K @ (z - self.x[idx])
        self.x[YAW] = _wrap(self.x[YAW])
        A = np.eye(8) - K @ H
        self.P = A @ self.P @ A.T + K @ R @ K.T

    def state(self) -> BaselineState:
        s = self.x
        return BaselineState(self.stamp_ns, s[[X, Y]].copy(), float(s[YAW]), s[[VX, VY]].copy(), float(s[VYAW]),
                             sideslip_rad(float(s[VX]), float(s[VY])))


def _expm(M: np.ndarray) -> np.ndarray:
    """Matrix exponential: Taylor series (16 terms) on M / 2^k with |M / 2^k|_1 <= 0.5, then k squarings."""
    norm = float(np.abs(M).sum(axis=0).max())
    k = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    A = M / 2.0**k
    E, term = np.eye(len(M)), np.eye(len(M))
    for j in range(1, 17):
        term = term @ A / j
        E = E + term
    for _ in range(k):
        E = E @ E
    return E


class LinearSingleTrack:
    """The linear single-track (bicycle) model run open loop (Rajamani, "Vehicle Dynamics and
    Control", §2.3; Mitschke/Wallentowitz).

    States: lateral velocity v_y of the centre of mass (m/s) and yaw rate r (rad/s). Inputs,
    held between samples: road-wheel angle delta = steering-wheel angle / steering ratio (rad)
    and speed v_x = mean_i(omega_i r_i) of the wheel rates (m/s)::

        m (v_y' + v_x r) = F_yf + F_yr,          I_z r' = l_f F_yf - l_r F_yr
        F_yf = C_f (delta - (v_y + l_f r) / v_x),  F_yr = -C_r (v_y - l_r r) / v_x

    i.e. x' = A(v_x) x + b delta, advanced exactly between stamps (zero-order hold, matrix
    exponential of [[A, b], [0, 0]] dt). The model is stiff and singular at low speed: below
    ``min_speed_m_s`` (and reversing) the states are set to its steady state at the current v_x
    (kinematic as v_x -> 0: r = v_x delta / L, no slip at the rear axle), which is where the
    fast dynamics would be within milliseconds. Outputs at base_link, ``cg_x_m`` ahead of it:
    v_y,base = v_y - r cg_x_m; yaw integrates r (trapezoid) from ``yaw0_rad``; no position (NaN).
    """

    def __init__(self, mass_kg: float, yaw_inertia_kg_m2: float, lf_m: float, lr_m: float, cf_n_per_rad: float,
                 cr_n_per_rad: float, steering_ratio: float, wheel_radius_m: Sequence[float], cg_x_m: float | None = None,
                 yaw0_rad: float = 0.0, t0_ns: int | None = None, min_speed_m_s: float = 1.0):
        """``cg_x_m``: the centre of mass ahead of base_link (m), by default ``lr_m`` (base_link at the
        rear axle); ``t0_ns`` None starts the clock at the first sample fed."""
        self.m, self.iz, self.lf, self.lr = float(mass_kg), float(yaw_inertia_kg_m2), float(lf_m), float(lr_m)
        self.cf, self.cr = float(cf_n_per_rad), float(cr_n_per_rad)
        self.steering_ratio = float(steering_ratio)
        self.wheel_radius_m = np.broadcast_to(np.asarray(wheel_radius_m, dtype=float), (4,)).copy()
        self.cg_x_m = self.lr if cg_x_m is None else float(cg_x_m)
        self.min_speed_m_s = float(min_speed_m_s)
        self.stamp_ns = t0_ns
        self.vy_m_s, self.r_rad_s, self.yaw_rad = 0.0, 0.0, float(yaw0_rad)
        self.delta_rad, self.vx_m_s = 0.0, 0.0

    @property
    def wheelbase_m(self) -> float:
        return self.lf + self.lr

    @property
    def understeer_gradient_s2_per_m2(self) -> float:
        """K = m (l_r C_r - l_f C_f) / (C_f C_r L^2) (s^2/m^2): r / delta = v_x / (L (1 + K v_x^2))."""
        return self.m * (self.lr * self.cr - self.lf * self.cf) / (self.cf * self.cr * self.wheelbase_m**2)

    @classmethod
    def from_description(cls, desc, **kwargs) -> "LinearSingleTrack":
        """Parameters of a :class:`~state_observer.vehicle.description.VehicleDescription`.

        From the detailed multibody model at its design position (the description's static ride
        height): total mass and centre of mass of all its bodies; static wheel loads
        (``static_loads_n``: axle split by the centre of mass); yaw inertia about the centre of
        mass as the sum of every body's I_zz plus its parallel-axis term m (dx^2 + dy^2) (body
        axes are the base_link axes at design, except the slender links' x along the link: all
        near horizontal, so their local I_zz is the yaw value); steering ratio from the steering
        kinematics (``steering_ratio(q_design)``: 0.01 % from the solved static pose, without
        its ~7 s Newton solve). l_f, l_r from the mean wheel-centre x of each axle; axle
        cornering stiffness C = sum over its tires of k_y lam_k F_z,static with
        k_y = ``corner.tire.cornering_stiffness_per_rad`` and the tire model's load sensitivity
        lam_k = max(1 - q_k (F_z / F_z0 - 1), 0.2) (q_k = ``load_sensitivity_stiffness``; F_z0 the file's
        ``nominal_load_n``, else the wheel's static load, so lam_k = 1); wheel radii the dynamic radii.

        With one k_y and lam_k = 1, l_f C_f = k_y m g l_f l_r / L = l_r C_r: the model is neutral
        steer (K = 0) whatever the weight distribution; q_k > 0 with a common F_z0 makes the loaded
        axle relatively softer (understeer for a nose-heavy car).
        """
        from ..mbs.model import body_point
        from ..vehicle.detailed import DetailedVehicle

        d = DetailedVehicle(desc)
        q, cg = d.q_design, d.com_m
        iz = 0.0
        for body in d.model.bodies.values():
            g = body_point(body, body.com)
            p = g.B @ q + g.c
            inertia = np.asarray(body.inertia, dtype=float)
            izz = inertia[2, 2] if inertia.ndim == 2 else inertia[2]
            iz += izz + body.mass * ((p[0] - cg[0]) ** 2 + (p[1] - cg[1]) ** 2)
        corners = desc.corners
        x_front = np.mean([c.wheel_centre_m[0] for c in corners if c.axle == "front"])
        x_rear = np.mean([c.wheel_centre_m[0] for c in corners if c.axle == "rear"])
        loads = np.asarray(d.static_loads_n, dtype=float)
        tire = d.wheels.tire  # the tire model's own q_k and F_z0 per wheel (F_z0: the file's, else the static load)
        lam_k = np.maximum(1.0 - tire.load_sensitivity_stiffness * (loads / tire.nominal_load_n - 1.0), 0.2)
        stiffness = np.array([c.tire.cornering_stiffness_per_rad for c in corners]) * lam_k * loads
        front = np.array([c.axle == "front" for c in corners])
        return cls(d.total_mass_kg, iz, x_front - cg[0], cg[0] - x_rear, stiffness[front].sum(), stiffness[~front].sum(),
                   d.steering_ratio(q), [c.wheel.dynamic_radius_m for c in corners], cg_x_m=float(cg[0]), **kwargs)

    def steady_state(self, vx_m_s: float, delta_rad: float) -> tuple[float, float]:
        """(v_y at the centre of mass, r) of steady cornering: r = v_x delta / (L (1 + K v_x^2)),
        v_y = r (l_r - l_f m v_x^2 / (C_r L))."""
        L = self.wheelbase_m
        r = vx_m_s * delta_rad / (L * (1.0 + self.understeer_gradient_s2_per_m2 * vx_m_s**2))
        return r * (self.lr - self.lf * self.m * vx_m_s**2 / (self.cr * L)), r

    def advance_to(self, stamp_ns: int) -> None:
        """Integrate the states to ``stamp_ns`` with the inputs held (nothing if not later)."""
        if self.stamp_ns is None:
            self.stamp_ns = int(stamp_ns)
            return
        dt = (int(stamp_ns) - self.stamp_ns) * 1e-9
        if dt <= 0.0:
            return
        r0, vx = self.r_rad_s, self.vx_m_s
        if vx >= self.min_speed_m_s:
            m, iz, lf, lr, cf, cr = self.m, self.iz, self.lf, self.lr, self.cf, self.cr
            M = np.zeros((3, 3))
            M[0, :] = -(cf + cr) / (m * vx), (lr * cr - lf * cf) / (m * vx) - vx, cf / m
            M[1, :] = (lr * cr - lf * cf) / (iz * vx), -(lf * lf * cf + lr * lr * cr) / (iz * vx), lf * cf / iz
            E = _expm(M * dt)
            self.vy_m_s, self.r_rad_s = E[:2] @ np.array([self.vy_m_s, self.r_rad_s, self.delta_rad])
        else:
            self.vy_m_s, self.r_rad_s = self.steady_state(vx, self.delta_rad)
        self.yaw_rad = _wrap(self.yaw_rad + 0.5 * (r0 + self.r_rad_s) * dt)
        self.stamp_ns = int(stamp_ns)

    def feed(self, sample) -> None:
        """Advance to a steering or wheel sample's stamp, then take its input (others are ignored)."""
        if isinstance(sample, SteeringSample):
            self.advance_to(sample.stamp_ns)
            self.delta_rad = float(sample.steering_wheel_angle_rad) / self.steering_ratio
        elif isinstance(sample, WheelSample):
            self.advance_to(sample.stamp_ns)
            speeds = np.asarray(sample.rate_rad_s, dtype=float) * self.wheel_radius_m
            if np.isfinite(speeds).any():  # the wheels that report (a data set may give one speed on some wheels only)
                self.vx_m_s = float(np.nanmean(speeds))

    def state(self) -> BaselineState:
        vy_base = self.vy_m_s - self.r_rad_s * self.cg_x_m
        return BaselineState(-1 if self.stamp_ns is None else self.stamp_ns, np.full(2, np.nan), self.yaw_rad,
                             np.array([self.vx_m_s, vy_base]), self.r_rad_s, sideslip_rad(self.vx_m_s, vy_base))

"""DEKF and UKF on the 14-DOF vehicle (Sanjurjo 2016 §3.4.2-3.4.3), for comparison with the errorEKF-FE.

Both hold the state x = [z, z_dot] (28) of the 14 coordinates of
:class:`state_observer.vehicle.reduced.ReducedVehicle` themselves (not its error) and have the per-step
API of :class:`.errorekf.VehicleErrorEKF`: :meth:`start`, :meth:`predict` (the vehicle's inputs are
already set), any number of ``update_*`` calls for the samples stamped within the step, then
:meth:`correct`, which writes the estimate into the model (``vehicle.solver.q``, ``qd``).

* :class:`VehicleDEKF`: the prediction is one step of the model's own integrator (trapezoidal rule,
  ALI3-P) from x; the covariance goes through the constant transition F = [[I, dt I], [0, I]] (thesis eq.
  3.81: the dependence of z_ddot on z and z_dot is neglected) plus white-acceleration plant noise.
  Measurement blocks are applied sequentially (:func:`.kalman.sequential_update`, gated, Joseph form)
  with the sensor models of :mod:`state_observer.sensors.models` evaluated at the current estimate x
  (re-linearised after every block); only the [z, z_dot] columns of H are used and the accelerometer is
  predicted with the model's z_ddot of the step.
* :class:`VehicleUKF`: 2L + 1 = 57 sigma points (L = 28) from the Cholesky factor of P, each propagated
  by one model step (integrator state and tire deflections saved and restored around each step; the
  central point is stepped last and is the step the model keeps).  Scaled weights with alpha = 1,
  beta = 2, kappa = 0, i.e. lambda = 0: W0m = 0, W0c = 2, Wi = 1/(2L), spread sqrt(L) sigma (``alpha``
  is a constructor argument).  alpha = 1 keeps every weight positive, so the propagated covariance is
  positive semi-definite by construction (with small alpha W0c ~ -1/alpha^2).  On circle_mu08 (5 s)
  alpha = 0.1 and the MBDE's 1e-3 gave the same metrics to 2-3 digits: the state's uncertainty is small
  enough that the model is locally linear even over +-5.3 sigma.
  The update reuses the propagated sigma points (thesis eqs. 3.87-3.99, no redraw; the plant noise enters
  P but not the sigma points): per sensor block Y_i = h(chi_i) (the accelerometer with each point's own
  z_ddot), P_yy = sum Wc dY dY^T + R, P_xy = sum Wc dX dY^T, K = P_xy P_yy^-1, x += K nu,
  P -= K P_yy K^T.  Several blocks in one step are conditioned one after another on the same sigma
  points: the joint Gaussian of the state and all predicted measurements is carried as a metric G over
  the sigma points (G = diag(Wc) after the prediction; after a block G -= G dY^T P_yy^-1 dY G and the
  conditional mean shift g += G dY^T P_yy^-1 nu), so the sequential result equals the joint update.
  After the updates the model is set to the mean, with the conditional mean of the sigma points'
  accelerations as z_ddot.

Tuning (:func:`dekf_settings`, :func:`ukf_settings`) uses the fields of :class:`.errorekf.ErrorEkfSettings`
that make sense here: ``plant_sigma2`` as white-acceleration intensities per coordinate (m^2/s^3,
rad^2/s^3), ``initial_position_sigma``, ``initial_velocity_sigma``, ``gate_probability``,
``enabled_sensors``, ``gnss_orientation_columns`` (DEKF), ``reacquire_after_s``, ``relock_after`` (DEKF)
and ``divergence_nis_factor``.  ``force_estimation=True`` is refused.  ``accelerometer_model_sigma``
(constructor argument, m/s^2) is added to the accelerometer's noise: z_ddot is not a state, so the
model's acceleration error (mass, friction) would otherwise be read as a tilt of g.  The UKF has no
relock (inflating P within a step would leave its sigma points behind).

Neither is built by :func:`state_observer.sim.evaluate.run_model` (it creates the errorEKF and the SPI
only); ``test/test_vehicle_filters.py`` drives them with a copy of its loop.
"""
from __future__ import annotations

import math

import numpy as np

from ..sensors import models
from .errorekf import ErrorEkfSettings, SensorBookkeeping
from .kalman import white_acceleration_covariance

N = models.N


def _settings(enabled_sensors: tuple, spin_plant: float, gnss_orientation_columns: bool) -> ErrorEkfSettings:
    """White-acceleration plant noise per coordinate [x y z, roll pitch yaw, 4 travels, 4 spins] (m^2/s^3,
    rad^2/s^3).  Heave and the travels get almost none: no sensor measures them and, with the constant F
    of the DEKF, corrections of the chassis' vertical motion that leave the travels alone excite the
    wheel-hop modes (the model failed within 1-13 s with 1e-4 or more); the model's springs and tires
    keep them.  Their initial sigmas are small for the same reason (the start is the static pose)."""
    vertical = [2, 3, 4, 6, 7, 8, 9]
    position_sigma = np.array([1.0, 1.0, 0.01, 0.01, 0.01, 0.05] + [0.005] * 4 + [0.1] * 4)
    velocity_sigma = np.array([0.1, 0.1, 0.02, 0.01, 0.01, 0.01] + [0.02] * 4 + [0.5] * 4)
    position_sigma[vertical] = 1e-4
    velocity_sigma[vertical] = 1e-4
    return ErrorEkfSettings(
        force_estimation=False,
        plant_sigma2=np.array([1.0, 1.0, 1e-6, 1e-2, 1e-2, 1e-3] + [1e-6] * 4 + [spin_plant] * 4),
        initial_position_sigma=position_sigma,
        initial_velocity_sigma=velocity_sigma,
        gnss_orientation_columns=gnss_orientation_columns,
        enabled_sensors=enabled_sensors,
    )


def dekf_settings() -> ErrorEkfSettings:
    """Defaults of the vehicle DEKF (sweep on circle_mu08, 40 s, metrics after 20 s).

    * GNSS fix with its orientation columns: with the constant F nothing else ties the yaw to the
      direction of the velocity; without them the sideslip error was 0.59 deg instead of 0.11.
    * No accelerometer: z_ddot is not a state, so the model's acceleration error (mass, friction) is read
      as a tilt of g; with it the model failed at 1-2.5 s, and with 0.3-1 m/s^2 of model uncertainty
      added to its noise (``accelerometer_model_sigma``) every metric was worse (sideslip 0.42-0.50 deg).
    * Roll and pitch 1e-2 (1e-3: yaw-rate error 0.14 deg/s instead of 0.11; 1e-5 and less: the gyroscope
      is rejected up to 75 % of the time), yaw 1e-3, x and y 1 (0.3 and 3: position 0.25 and 0.26 m
      instead of 0.24, sideslip 0.17 and 0.11 deg), spins 0.1 (10: longitudinal tire force error
      0.18 instead of 0.08, but 0.1 rejects ~17 % of the wheel-rate samples: the model's spin rate jitters
      by ~0.13 rad/s against the encoders' 0.05)."""
    return _settings(("gnss_fix", "gnss_velocity", "gyroscope", "wheel_rates"), 0.1, True)


def ukf_settings() -> ErrorEkfSettings:
    """Defaults of the vehicle UKF (sweep on circle_mu08, 20 s, metrics after 10 s): the DEKF's plant
    noise with spins 1e-2, and the accelerometer, predicted with each sigma point's own z_ddot, with
    ``accelerometer_model_sigma`` = 0.1 m/s^2 (sideslip error 0.04 deg; without the accelerometer 0.43,
    with 0.3 and 1.0 m/s^2: 0.045 and 0.15).  The GNSS orientation columns do not apply (the UKF uses h,
    not H)."""
    return _settings(("gnss_fix", "gnss_velocity", "gyroscope", "accelerometer", "wheel_rates"), 0.01, False)


class _StateFilter(SensorBookkeeping):
    """What the DEKF and the UKF share: state [z, z_dot], life cycle, sensor blocks, feedback."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None, default, accelerometer_model_sigma: float = 0.0):
        settings = settings if settings is not None else default()
        if settings.force_estimation:
            raise ValueError(f"{type(self).__name__} estimates positions and velocities only (state [z, z_dot]): "
                             "use ErrorEkfSettings(force_estimation=False) or the module's default settings")
        self.vehicle = vehicle
        self.mounts = mounts
        self.settings = s = settings
        self.dt = vehicle.dt_s
        self.x = np.zeros(2 * N)
        self.P = np.zeros((2 * N, 2 * N))
        self.plant = white_acceleration_covariance(s.plant_sigma2, self.dt)
        self.F = np.block([[np.eye(N), self.dt * np.eye(N)], [np.zeros((N, N)), np.eye(N)]])
        self._init_bookkeeping(s)
        # uncertainty (m/s^2) of the model's acceleration, added to the accelerometer's noise: z_ddot is not
        # a state, so its error (mass, friction) would otherwise be read as a tilt of g
        if not accelerometer_model_sigma >= 0.0:
            raise ValueError(f"accelerometer_model_sigma must be >= 0, got {accelerometer_model_sigma}")
        self.accelerometer_model_sigma = float(accelerometer_model_sigma)

    # ----- life cycle ---------------------------------------------------------------------------------
    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        self.vehicle.start(speed_m_s=speed_m_s, yaw_rad=yaw_rad, position_m=position_m, t=t)
        self._restart_bookkeeping()
        s = self.settings
        solver = self.vehicle.solver
        self.x[:] = np.concatenate([solver.q, solver.qd])
        self.P[:] = np.diag(np.square(np.concatenate([s.initial_position_sigma, s.initial_velocity_sigma])))
        self._rejected_since = None
        self.diverged = False

    def correct(self) -> None:
        """Write the estimate into the model."""
        solver = self.vehicle.solver
        if np.all(np.isfinite(self.x)):
            solver.q = self.x[:N].copy()
            solver.qd = self.x[N:].copy()
        self._check_divergence(self.x)

    def shift_position(self, offset_m: np.ndarray) -> None:
        self.x[:3] += offset_m

    # ----- sensor models as functions of (q, qd, qdd) -> (h, H over [z, z_dot, z_ddot]) -----------------
    def _gnss_position(self, age_s: float):
        mounts, columns = self.mounts, self.settings.gnss_orientation_columns

        def h(q, qd, qdd):
            p, H = models.gnss_position(q, mounts.gnss_position_m, columns)
            if age_s:
                p = p - age_s * models.gnss_velocity(q, qd, mounts.gnss_position_m)[0]
            return p, H
        return h

    def _gnss_velocity(self, q, qd, qdd):
        return models.gnss_velocity(q, qd, self.mounts.gnss_position_m)

    def _gyroscope(self, q, qd, qdd):
        return models.gyroscope(q, qd, self.mounts.imu_rotation)

    def _accelerometer(self, q, qd, qdd):
        return models.accelerometer(q, qd, qdd, self.mounts.imu_position_m, self.mounts.imu_rotation)

    @staticmethod
    def _wheel_rates(keep):
        def h(q, qd, qdd):
            rates, H = models.wheel_rates(qd)
            return rates[keep], H[keep]
        return h

    # ----- measurements -------------------------------------------------------------------------------
    def _apply(self, name: str, y: np.ndarray, R: np.ndarray, model) -> bool:
        raise NotImplementedError

    def update_gnss_fix(self, antenna_enu_m: np.ndarray, covariance_m2: np.ndarray, age_s: float = 0.0) -> bool:
        """GNSS antenna position (ENU, m) with its covariance (3, 3), measured ``age_s`` before the model's
        time (the prediction is moved back along the antenna velocity).  Fixes rejected for longer than
        ``reacquire_after_s`` move the position to the fix (as the errorEKF does)."""
        if "gnss_fix" not in self.settings.enabled_sensors:
            return False
        y = np.asarray(antenna_enu_m, float)
        model = self._gnss_position(age_s)
        accepted = self._apply("gnss_fix", y, np.asarray(covariance_m2, float), model)
        return self._after_gnss_fix(accepted, y, lambda: model(self.x[:N], self.x[N:], self.vehicle.solver.qdd)[0], covariance_m2)

    def update_gnss_velocity(self, velocity_enu_m_s: np.ndarray, covariance: np.ndarray) -> bool:
        return self._apply("gnss_velocity", np.asarray(velocity_enu_m_s, float), np.asarray(covariance, float), self._gnss_velocity)

    def update_imu(self, angular_velocity_rad_s: np.ndarray, linear_acceleration_m_s2: np.ndarray, gyro_sigma: float, accel_sigma: float) -> tuple[bool, bool]:
        """IMU sample in the sensor frame: gyroscope (rad/s) and specific force (m/s^2)."""
        gyro = self._apply("gyroscope", np.asarray(angular_velocity_rad_s, float), np.eye(3) * gyro_sigma**2, self._gyroscope)
        accel_var = accel_sigma**2 + self.accelerometer_model_sigma**2
        accel = self._apply("accelerometer", np.asarray(linear_acceleration_m_s2, float), np.eye(3) * accel_var, self._accelerometer)
        return gyro, accel

    def update_wheel_rates(self, rates_rad_s: np.ndarray, sigma: float) -> bool:
        rates = np.asarray(rates_rad_s, float)
        keep = np.isfinite(rates)
        if not keep.any():
            return False
        return self._apply("wheel_rates", rates[keep], np.eye(int(keep.sum())) * sigma**2, self._wheel_rates(keep))


class VehicleDEKF(_StateFilter):
    """Discrete EKF on the 14-DOF model (module docstring)."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None, accelerometer_model_sigma: float = 0.0):
        super().__init__(vehicle, mounts, settings, dekf_settings, accelerometer_model_sigma)

    def predict(self) -> bool:
        """Model step from x (the model's integrator is the transition); P with the constant F."""
        solver = self.vehicle.solver
        solver.q = self.x[:N].copy()
        solver.qd = self.x[N:].copy()
        if not self.vehicle.step().success:
            return False
        self.x[:N], self.x[N:] = solver.q, solver.qd
        self.P[:] = self.F @ self.P @ self.F.T + self.plant
        return True

    def _apply(self, name: str, y: np.ndarray, R: np.ndarray, model) -> bool:
        """One gated block at the current estimate (:meth:`SensorBookkeeping._gated_update`, as in the errorEKF)."""
        if name not in self.settings.enabled_sensors:
            return False
        h, H = model(self.x[:N], self.x[N:], self.vehicle.solver.qdd)
        return self._gated_update(name, y - h, H[:, : 2 * N], R)


class VehicleUKF(_StateFilter):
    """Unscented Kalman filter on the 14-DOF model (module docstring).  ``alpha``, ``beta``, ``kappa``:
    the scaled unscented transform's parameters (lambda = alpha^2 (L + kappa) - L)."""

    def __init__(self, vehicle, mounts, settings: ErrorEkfSettings | None = None, alpha: float = 1.0, beta: float = 2.0, kappa: float = 0.0,
                 accelerometer_model_sigma: float = 0.1):
        super().__init__(vehicle, mounts, settings, ukf_settings, accelerometer_model_sigma)
        L = 2 * N
        if not alpha > 0.0:
            raise ValueError(f"UKF alpha must be > 0, got {alpha}")
        lam = alpha**2 * (L + kappa) - L
        if not L + lam > 0.0:
            raise ValueError("UKF: L + lambda must be > 0")
        self.alpha, self.beta, self.kappa = alpha, beta, kappa
        self.zeta = math.sqrt(L + lam)
        self.Wm = np.full(2 * L + 1, 0.5 / (L + lam))
        self.Wc = self.Wm.copy()
        self.Wm[0] = lam / (L + lam)
        self.Wc[0] = self.Wm[0] + 1.0 - alpha**2 + beta
        self.n_sigma_failures = 0  # sigma-point steps that failed (propagated with F from the central point instead)
        self._X = self._dX = self._Qdd = self._dQdd = None
        self._qdd_mean = np.zeros(N)
        self._G = np.diag(self.Wc)
        self._g = np.zeros(2 * L + 1)

    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        super().start(speed_m_s, yaw_rad, position_m, t)
        X = self._sigma_points()
        self._set_ensemble(X, np.repeat(self.vehicle.solver.qdd[:, None], X.shape[1], axis=1), mean=self.x.copy())

    # ----- sigma points -----------------------------------------------------------------------------------
    def _sqrt_P(self) -> np.ndarray:
        P = 0.5 * (self.P + self.P.T)
        try:
            return np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            w, V = np.linalg.eigh(P)
            return V * np.sqrt(np.clip(w, 0.0, None))

    def _sigma_points(self) -> np.ndarray:
        """(2N, 2L + 1): x, x + zeta S_i, x - zeta S_i (S the lower Cholesky factor of P)."""
        S = self.zeta * self._sqrt_P()
        return np.hstack([self.x[:, None], self.x[:, None] + S, self.x[:, None] - S])

    def _set_ensemble(self, X: np.ndarray, Qdd: np.ndarray, mean: np.ndarray | None = None) -> None:
        """The sigma points of this step (states and accelerations) with the metric of the unconditioned
        prediction; x becomes their mean (or ``mean``: the start state itself, not its round-off)."""
        self._X, self._Qdd = X, Qdd
        self.x[:] = X @ self.Wm if mean is None else mean
        self._qdd_mean = Qdd @ self.Wm
        self._dX = X - self.x[:, None]
        self._dQdd = Qdd - self._qdd_mean[:, None]
        self._G = np.diag(self.Wc)
        self._g = np.zeros(X.shape[1])

    def predict(self) -> bool:
        """Propagate every sigma point by one model step; the central point's step is the one the model keeps."""
        v = self.vehicle
        solver = v.solver
        X0 = self._sigma_points()
        t0, qdd0, lam0 = solver.t, solver.qdd.copy(), solver.lam
        tires = v.tire_memory()
        n_steps, n_iter = solver.n_steps, solver.n_iterations

        def restore(state):
            solver.t, solver.q, solver.qd, solver.qdd, solver.lam = t0, state[:N].copy(), state[N:].copy(), qdd0.copy(), lam0
            solver.n_steps, solver.n_iterations = n_steps, n_iter
            v.restore_tire_memory(tires)

        m = X0.shape[1]
        X, Qdd = np.empty_like(X0), np.empty((N, m))
        failed = []
        for i in range(1, m):
            restore(X0[:, i])
            if v.step().success and np.all(np.isfinite(solver.q)) and np.all(np.isfinite(solver.qd)):
                X[:N, i], X[N:, i], Qdd[:, i] = solver.q, solver.qd, solver.qdd
            else:
                failed.append(i)
        restore(X0[:, 0])
        if not v.step().success:
            restore(X0[:, 0])
            return False
        X[:N, 0], X[N:, 0], Qdd[:, 0] = solver.q, solver.qd, solver.qdd
        for i in failed:  # a point the model could not step: linear propagation about the central point
            X[:, i] = X[:, 0] + self.F @ (X0[:, i] - X0[:, 0])
            Qdd[:, i] = Qdd[:, 0]
        self.n_sigma_failures += len(failed)
        self._set_ensemble(X, Qdd)
        P = (self._dX * self.Wc) @ self._dX.T + self.plant
        self.P[:] = 0.5 * (P + P.T)
        return True

    def _apply(self, name: str, y: np.ndarray, R: np.ndarray, model) -> bool:
        """One gated block from the propagated sigma points, conditioned on the blocks already applied this
        step (module docstring); bookkeeping as :func:`.kalman.sequential_update`."""
        if name not in self.settings.enabled_sensors:
            return False
        stats = self.stats[name]
        X, Qdd = self._X, self._Qdd
        Y = np.column_stack([model(X[:N, i], X[N:, i], Qdd[:, i])[0] for i in range(X.shape[1])])
        if not (np.all(np.isfinite(Y)) and np.all(np.isfinite(y)) and np.all(np.isfinite(R))):
            return stats.reject()
        dY = Y - (Y @ self.Wm)[:, None]
        y_hat = Y @ self.Wm + dY @ self._g
        GdYt = self._G @ dY.T
        S = dY @ GdYt + R
        S = 0.5 * (S + S.T)
        try:
            np.linalg.cholesky(S)
            S_inv = np.linalg.inv(S)
        except np.linalg.LinAlgError:
            return stats.reject()
        innovation = y - y_hat
        nis = float(innovation @ S_inv @ innovation)
        if not nis <= self.gate(len(y)):
            return stats.reject(innovation, nis)
        Pxy = self._dX @ GdYt
        K = Pxy @ S_inv
        self.x += K @ innovation
        P = self.P - K @ S @ K.T
        self.P[:] = 0.5 * (P + P.T)
        self._g += GdYt @ (S_inv @ innovation)
        self._G -= GdYt @ S_inv @ GdYt.T
        return stats.accept(innovation, nis)

    def correct(self) -> None:
        """Set the model to the mean, with the conditional mean of the sigma points' accelerations."""
        qdd = self._qdd_mean + self._dQdd @ self._g
        if np.all(np.isfinite(qdd)) and np.all(np.isfinite(self.x)):
            self.vehicle.solver.qdd = qdd
        super().correct()

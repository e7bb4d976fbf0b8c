"""errorEKF-FE on the 14-DOF model with the three-simulation harness: the observer beats the open-loop
model, and sensor faults leave it finite and recovering."""
import math

import numpy as np
import pytest

from state_observer.estimation.errorekf import ErrorEkfSettings
from state_observer.sensors.samples import GnssFix, ImuSample
from state_observer.sim import evaluate as ev

from harness import simulated_scenario

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)

DURATION_S = 20.0
OUTAGE = True
SKIP_S = 5.0


@pytest.fixture(scope="module")
def scenario():
    return simulated_scenario("circle_mu08", DURATION_S, seed=3)


def run(scenario, samples=None, settings=None):
    desc, config, manoeuvre, truths, base = scenario
    return ev.run_model(desc, manoeuvre, base if samples is None else samples, config, len(truths) - 1, settings)


def test_observer_beats_the_open_loop_model_on_circle_mu08(scenario):
    truths = scenario[3]
    open_loop = ev.metrics(truths, run(scenario)[0], skip_s=SKIP_S)
    estimates, filt = run(scenario, settings=ErrorEkfSettings())
    observer = ev.metrics(truths, estimates, skip_s=SKIP_S)
    sensor = ev.sensor_metrics(truths, scenario[4], scenario[1], scenario[0], skip_s=SKIP_S)
    assert observer["position_rmse_m"] < 0.5 * sensor["position_rmse_m"]
    assert observer["position_rmse_m"] < 0.1 * open_loop["position_rmse_m"]
    assert observer["yaw_rate_rmse_dps"] < 0.5 * open_loop["yaw_rate_rmse_dps"]
    assert not filt.diverged
    for name in ("gnss_fix", "gnss_velocity", "gyroscope", "accelerometer", "wheel_rates"):
        stats = filt.stats[name]
        assert stats.accepted > 0 and stats.rejected < 0.1 * stats.accepted, (name, stats.accepted, stats.rejected)


def _faulty(samples):
    """NaN IMU samples (4-5 s), a GNSS outage (6-8 s), fixes 50 m off (9-10 s), duplicated and swapped samples."""
    out = []
    for s in samples:
        t = s.stamp_ns * 1e-9
        if isinstance(s, ImuSample) and 4.0 <= t < 5.0:
            s = s._replace(linear_acceleration_m_s2=np.full(3, math.nan), angular_velocity_rad_s=np.full(3, math.nan))
        if OUTAGE and isinstance(s, GnssFix) and 6.0 <= t < 8.0:
            continue
        if isinstance(s, GnssFix) and 9.0 <= t < 10.0:
            s = s._replace(latitude_deg=s.latitude_deg + 50.0 / 111_000.0)
        out.append(s)
        if 11.0 <= t < 11.1:
            out.append(s)  # duplicated
    for i in range(1, len(out) - 1, 97):
        out[i], out[i + 1] = out[i + 1], out[i]  # out of order
    return out


def test_sensor_faults_leave_the_estimate_finite_and_recovering(scenario):
    truths = scenario[3]
    estimates, filt = run(scenario, samples=_faulty(scenario[4]), settings=ErrorEkfSettings())
    assert all(np.all(np.isfinite(e.position_m)) and np.all(np.isfinite(e.tire_force_n)) for e in estimates)
    assert filt.stats["gnss_fix"].rejected >= 4  # the jumped fixes were gated, not used
    assert filt.stats["gyroscope"].rejected >= 150  # the NaN samples
    error = np.array([np.linalg.norm(e.position_m[:2] - x.position_enu_m[:2]) for e, x in zip(estimates, truths[1:])])
    t = np.array([e.t_s for e in estimates])
    assert error[t >= 15.0].max() < 1.0  # within 5 s of the last fault
    assert error.max() < 5.0


def test_error_transition_is_the_trapezoidal_rule(scenario):
    """F of the errorEKF-FE equals (I - h/2 J)^-1 [(I + h/2 J), h [0; -M^-1 Dr]] with J = [[0, I], [-M^-1 K, -M^-1 C]] (K, C
    the model's tangent with the columns the filter takes from differences, Dr the force residual's response to the
    extra states), the force errors first-order Gauss-Markov, the other extra states random walks."""
    from state_observer.estimation.errorekf import N, VehicleErrorEKF
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = scenario[0]
    vehicle = ReducedVehicle(desc)
    filt = VehicleErrorEKF(vehicle, mounts_from_vehicle(desc))
    filt.start(speed_m_s=15.0)
    vehicle.set_inputs(0.4, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(50):
        assert filt.predict()
        filt.correct()
    F = filt.transition_matrix()
    h, s = vehicle.dt_s, vehicle.solver
    M = vehicle.mass_matrix(s.q)
    K, C, Dr = filt.linearisation.K, filt.linearisation.C, filt.linearisation.Dr
    assert np.abs(K[:, 5]).max() > 1e3  # the tire forces turn with the heading (the integrator's tangent leaves it out)
    J = np.block([[np.zeros((N, N)), np.eye(N)], [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]])
    I2 = np.eye(2 * N)
    rhs = np.hstack([I2 + 0.5 * h * J, np.vstack([np.zeros((N, Dr.shape[1])), -h * np.linalg.solve(M, Dr)])])
    expected = np.linalg.solve(I2 - 0.5 * h * J, rhs)
    np.testing.assert_allclose(F[: 2 * N], expected, atol=1e-9 * np.abs(expected).max())
    decay = np.ones(F.shape[0] - 2 * N)  # force errors: first-order Gauss-Markov; biases: random walks
    decay[: len(filt.force_names)] = np.exp(-h / filt.settings.force_memory_s)
    np.testing.assert_allclose(F[2 * N :, 2 * N :], np.diag(decay), rtol=1e-15)
    # no growth of the error without measurements beyond the heading's neutral mode (a turning car's heading error grows by
    # well under a per cent per second: |lambda| - 1 < 1e-4 per 4 ms step)
    assert np.abs(np.linalg.eigvals(F)).max() < 1.0 + 1e-4


def test_detailed_model_errorekf_beats_its_open_loop(scenario):
    """The plain errorEKF on the detailed model (error coordinates valid at any heading: the circle turns
    through +-90 deg in the first seconds) against the same wrong detailed model open loop."""
    from state_observer.estimation.errorekf import detailed_settings

    truths = scenario[3]
    open_loop = ev.metrics(truths, run_detailed(scenario, None)[0], skip_s=SKIP_S)
    estimates, filt = run_detailed(scenario, detailed_settings())
    observer = ev.metrics(truths, estimates, skip_s=SKIP_S)
    assert observer["position_rmse_m"] < 0.5 and observer["position_rmse_m"] < 0.25 * open_loop["position_rmse_m"]
    assert observer["yaw_rate_rmse_dps"] < 0.5 * open_loop["yaw_rate_rmse_dps"]
    for name in set(detailed_settings().enabled_sensors) - {"standstill"}:  # the car never stands in this scenario
        stats = filt.stats[name]
        assert stats.accepted > 0 and stats.rejected < 0.1 * stats.accepted, (name, stats.accepted, stats.rejected)


def run_detailed(scenario, settings):
    desc, config, manoeuvre, truths, samples = scenario
    return ev.run_model(desc, manoeuvre, samples, config, len(truths) - 1, settings, model="detailed")

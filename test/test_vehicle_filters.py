"""DEKF and UKF on the 14-DOF model (state_observer.estimation.vehicle_filters) with the three-simulation
harness' data: circle_mu08 shortened to 12 s, the wrong model (mass +15 %, mu 1.0) driven by the
measured inputs, through the harness' run_model."""
import math

import numpy as np
import pytest

from state_observer.estimation.errorekf import ErrorEkfSettings
from state_observer.estimation.vehicle_filters import N, VehicleDEKF, VehicleUKF, dekf_settings, ukf_settings
from state_observer.sim import evaluate as ev
from state_observer.sensors.mounts import mounts_from_vehicle

from harness import simulated_scenario

DURATION_S = 12.0
SKIP_S = 5.0
UKF_S = 3.0  # 57 model steps per step: a few seconds only


@pytest.fixture(scope="module")
def scenario():
    from state_observer.vehicle.kinematic_fit import fit_vehicle_kinematics

    desc, config, manoeuvre, truths, samples = simulated_scenario("circle_mu08", DURATION_S, seed=3)
    return desc, config, manoeuvre, truths, samples, fit_vehicle_kinematics(desc)


def run_filter(scenario, cls, steps):
    """The harness' run_model with a DEKF or UKF (their default settings): one Estimate per step."""
    desc, config, manoeuvre, _, samples, kinematics = scenario
    settings = dekf_settings() if cls is VehicleDEKF else ukf_settings()
    estimates, filt = ev.run_model(desc, manoeuvre, samples, config, steps, settings, kinematics, filter_class=cls)
    return estimates, filt


def _finite(estimates):
    return all(np.all(np.isfinite(e.position_m)) and np.all(np.isfinite(e.tire_force_n)) and math.isfinite(e.yaw_rate_rad_s) for e in estimates)


def test_dekf_beats_the_gnss_fix_on_circle_mu08(scenario):
    desc, config, _, truths, samples, _ = scenario
    estimates, filt = run_filter(scenario, VehicleDEKF, len(truths) - 1)
    assert _finite(estimates) and not filt.diverged
    observer = ev.metrics(truths, estimates, skip_s=SKIP_S)
    sensor = ev.sensor_metrics(truths, samples, config, desc, skip_s=SKIP_S)
    assert observer["position_rmse_m"] < 0.5 * sensor["position_rmse_m"], (observer, sensor)
    assert observer["yaw_rate_rmse_dps"] < sensor["yaw_rate_rmse_dps"], (observer, sensor)
    for name in filt.settings.enabled_sensors:
        assert filt.stats[name].accepted > 0, name
    np.testing.assert_array_equal(filt.vehicle.solver.q, filt.x[:N])  # the estimate is the model's state


def test_ukf_runs_with_finite_estimates(scenario):
    truths = scenario[3]
    steps = int(round(UKF_S / 0.004))
    estimates, filt = run_filter(scenario, VehicleUKF, steps)
    assert _finite(estimates) and not filt.diverged
    assert np.all(np.isfinite(filt.P)) and np.all(np.linalg.eigvalsh(filt.P) > -1e-9)
    error = np.array([np.linalg.norm(e.position_m[:2] - x.position_enu_m[:2]) for e, x in zip(estimates, truths[1:])])
    assert error.max() < 1.5
    for name in filt.settings.enabled_sensors:
        assert filt.stats[name].accepted > 0, name
    np.testing.assert_array_equal(filt.vehicle.solver.q, filt.x[:N])


def test_ukf_sigma_points_do_not_leak_into_the_model(scenario):
    """After predict the model holds the central point's step, identical to a plain step of an equal model."""
    desc, kinematics = scenario[0], scenario[5]
    a, b = ev.wrong_model(desc, "reduced", kinematics), ev.wrong_model(desc, "reduced", kinematics)
    filt = VehicleUKF(a, mounts_from_vehicle(desc))
    filt.start(15.0)
    b.start(speed_m_s=15.0)
    for v in (a, b):
        v.set_inputs(0.4, [100.0, 100.0, 0.0, 0.0], [0.0] * 4)
    for _ in range(3):
        assert filt.predict() and b.step().success
        np.testing.assert_array_equal(a.solver.q, b.solver.q)
        np.testing.assert_array_equal(a.solver.qd, b.solver.qd)
        np.testing.assert_array_equal(a.tire_memory()[0], b.tire_memory()[0])
        assert a.solver.t == b.solver.t
        filt.x[:] = np.concatenate([a.solver.q, a.solver.qd])  # no measurements: keep the central point
        filt.correct()
        a.solver.qdd = b.solver.qdd.copy()
    assert filt.n_sigma_failures == 0


@pytest.mark.parametrize("cls", [VehicleDEKF, VehicleUKF])
def test_force_estimation_is_refused(scenario, cls):
    desc, kinematics = scenario[0], scenario[5]
    with pytest.raises(ValueError, match="force_estimation"):
        cls(ev.wrong_model(desc, "reduced", kinematics), mounts_from_vehicle(desc), ErrorEkfSettings(force_estimation=True))

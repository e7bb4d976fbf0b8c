"""SPI on the 14-DOF model: the parameter filter brings the +15 % model mass towards the truth on a steady
circle and leaves the (unobservable, tires not sliding) friction coefficient where it was."""
import numpy as np
import pytest

from state_observer.estimation.errorekf import ErrorEkfSettings
from state_observer.estimation.spi import SpiSettings
from state_observer.sim import evaluate as ev

from harness import simulated_scenario


@pytest.fixture(scope="module")
def circle():
    return simulated_scenario("circle_mu08", 50.0, seed=5)


def test_mass_estimate_converges_towards_the_truth(circle):
    desc, config, manoeuvre, truths, samples = circle
    estimates, spi = ev.run_model(desc, manoeuvre, samples, config, len(truths) - 1, ErrorEkfSettings(), spi=SpiSettings())
    true_mass = truths[-1].mass_kg
    start_error = ev.MASS_ERROR * true_mass
    masses = np.array([e.mass_kg for e in estimates])
    t = np.array([e.t_s for e in estimates])
    assert np.all(masses[t < SpiSettings().start_after_s] == masses[0])  # the stabilisation period
    assert abs(masses[-1] - true_mass) < 0.5 * start_error, (masses[-1], true_mass)
    assert spi.parameter_sigma()[0] < SpiSettings().mass_sigma_kg
    mu = np.array([e.friction for e in estimates])
    assert np.all(np.isfinite(mu)) and abs(mu[-1] - ev.MODEL_MU) < 0.1  # no information on friction here
    assert not spi.diverged

"""Observers on the planar linkages of Sanjurjo 2016 ch. 4 (errorEKF, DEKF, UKF-TR): sensor Jacobians
against finite differences, and the §4.7 claim that with crank encoders the filters beat the sensor."""
import math

import numpy as np
import pytest

from numdiff import jacobian_fd
from state_observer.estimation import linkage as lo
from state_observer.mbs import constraint_violation, solve_position, solve_velocity

SIGMA = math.pi / 180.0


def _state_map(link):
    """[z, z_dot] -> (q, qd) through the position and velocity problems."""
    model, ind = link.model, link.model.indices(list(link.independent))
    g = len(ind)

    def state(x):
        q = link.q0.copy()
        q[ind] = x[:g]
        q = solve_position(model, q, ind)
        return q, solve_velocity(model, q, ind, x[g:])

    return state, ind, g


def _test_states(link, g):
    rng = np.random.default_rng(7)
    ind = link.model.indices(list(link.independent))
    z0 = link.q0[ind]
    return [np.r_[z0 + 0.3 * rng.standard_normal(g), rng.standard_normal(g)] for _ in range(3)] + [np.r_[z0, np.zeros(g)]]


@pytest.mark.parametrize("mechanism", ["four_bar", "five_bar"])
@pytest.mark.parametrize("kind", lo.SENSOR_KINDS)
def test_sensor_jacobians_match_finite_differences(mechanism, kind):
    link = lo.MECHANISMS[mechanism]()
    state, ind, g = _state_map(link)
    sensor = lo.make_sensor(link, kind, mechanism=mechanism)
    assert sensor.dim == g  # one sensor per DOF (§4.7)
    for x in _test_states(link, g):
        q, qd = state(x)
        h, h_q, h_qd = sensor.jacobians(q, qd)
        np.testing.assert_allclose(h_q, jacobian_fd(lambda qq: sensor.h(qq, qd), q), atol=1e-8)
        np.testing.assert_allclose(h_qd, jacobian_fd(lambda vv: sensor.h(q, vv), qd), atol=1e-8)
        h2, H = lo.sensor_jacobian(link.model, ind, sensor, q, qd)
        np.testing.assert_allclose(h2, h)
        H_fd = jacobian_fd(lambda xx: sensor.h(*state(xx)), x)
        np.testing.assert_allclose(H, H_fd, atol=1e-7)


def test_coupler_gyro_needs_the_velocity_sensitivity_term():
    """h_z of the coupler gyro = h_q R + h_qd dqd/dz; without the second term it is wrong (eq. 3.120)."""
    link = lo.four_bar()
    state, ind, g = _state_map(link)
    x = _test_states(link, g)[0]
    q, qd = state(x)
    R, dqd = lo.manifold_derivatives(link.model, ind, q, qd)
    # R = dq/dz and dqd/dz at fixed z_dot, both by finite differences through the kinematic problems
    np.testing.assert_allclose(R, jacobian_fd(lambda z: state(np.r_[z, x[g:]])[0], x[:g]), atol=1e-7)
    np.testing.assert_allclose(dqd, jacobian_fd(lambda z: state(np.r_[z, x[g:]])[1], x[:g]), atol=1e-7)
    sensor = lo.make_sensor(link, "coupler_gyro")
    H_full = sensor.evaluate(q, qd, R, dqd)[1]
    _, h_q, _ = sensor.jacobians(q, qd)
    assert abs(H_full[0, 0] - (h_q @ R)[0, 0]) > 1e-3


@pytest.mark.parametrize("rate_hz", [200, 100, 50])
def test_errorekf_beats_the_crank_encoder_at_50_hz_and_above(rate_hz):
    """§4.7.1: with the "high" modelling error (1 m/s^2, pi/16 rad) the errorEKF's crank-angle RMSE is
    below the encoder's pi/180 at sensor rates of 50 Hz and above."""
    r = lo.run_study("four_bar", "errorekf", "crank_encoder", rate_hz, "high", seed=0)
    assert not r.failed, r.message
    assert r.n_updates == 2000 * rate_hz // 200
    assert 0.8 * SIGMA < r.rmse_sensor < 1.2 * SIGMA  # the synthesised encoder has the stated noise
    assert r.rmse_angle < SIGMA
    assert r.rmse_angle < r.rmse_sensor


@pytest.mark.parametrize("name", ["dekf", "ukf"])
def test_dekf_and_ukf_beat_the_crank_encoder_at_200_hz(name):
    r = lo.run_study("four_bar", name, "crank_encoder", 200, "high", seed=0)
    assert not r.failed, r.message
    assert r.rmse_angle < SIGMA
    assert r.rmse_angle < r.rmse_sensor


def test_errorekf_with_a_coupler_gyro_runs_finite():
    r = lo.run_study("four_bar", "errorekf", "coupler_gyro", 200, "high", seed=0)
    assert not r.failed, r.message
    assert np.isfinite([r.rmse_angle, r.rmse_rate, r.rmse_sensor]).all()
    assert r.n_updates == 2000
    assert r.rmse_angle < math.pi / 16  # it does learn the crank angle, though more slowly than with an encoder


def test_errorekf_feedback_stays_on_the_constraint_manifold():
    """After a large correction (the first sample, error pi/16) the model is assembled and its velocities
    consistent; the filter error state is reset to 0."""
    link = lo.filter_linkage("four_bar", "high")
    sensor = lo.make_sensor(link, "crank_encoder")
    f = lo.LinkageErrorEKF(link, sensor)
    f.step(np.array([math.pi / 3]))
    assert not f.x.any()
    assert abs(f.z[0] - math.pi / 3) < 0.02  # pulled from pi/3 + pi/16 to the measurement
    pos, vel = constraint_violation(link.model, f.q, f.qd)
    assert pos < 1e-8 and vel < 1e-8
    assert f.n_exact_feedback == 1


def test_ukf_weights():
    link = lo.four_bar()
    f = lo.LinkageUKF(link, lo.make_sensor(link, "crank_encoder"))
    assert f.wm.sum() == pytest.approx(1.0, abs=1e-6)
    L = 2
    lam = 1e-6 * L - L
    assert f.wc[0] == pytest.approx(lam / (L + lam) + 1 - 1e-6 + 2.0)

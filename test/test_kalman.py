"""Kalman building blocks: the sequential update equals the batch update, gating rejects and counts,
the plant-noise blocks are the exact discretisations of their continuous models."""
import numpy as np
import pytest
import scipy.linalg

from state_observer.estimation.kalman import GateCache, SensorStatistics, sequential_update, white_acceleration_covariance, white_jerk_covariance


def test_sequential_blocks_equal_one_batch_update():
    rng = np.random.default_rng(0)
    n = 6
    A = rng.standard_normal((n, n))
    P0 = A @ A.T + np.eye(n)
    H1, H2 = rng.standard_normal((2, n)), rng.standard_normal((3, n))
    R1, R2 = np.diag([0.5, 0.2]), np.diag([0.3, 0.1, 0.4])
    y1, y2 = rng.standard_normal(2), rng.standard_normal(3)
    # batch
    H, R, y = np.vstack([H1, H2]), scipy.linalg.block_diag(R1, R2), np.concatenate([y1, y2])
    K = P0 @ H.T @ np.linalg.inv(H @ P0 @ H.T + R)
    x_batch, P_batch = K @ y, (np.eye(n) - K @ H) @ P0
    # sequential, each innovation with the corrections of the earlier blocks
    x, P, stats = np.zeros(n), P0.copy(), SensorStatistics()
    assert sequential_update(x, P, y1 - H1 @ x, H1, R1, np.inf, stats)
    assert sequential_update(x, P, y2 - H2 @ x, H2, R2, np.inf, stats)
    np.testing.assert_allclose(x, x_batch, atol=1e-12)
    np.testing.assert_allclose(P, P_batch, atol=1e-12)
    np.testing.assert_array_equal(P, P.T)
    assert stats.accepted == 2 and stats.nis_mean > 0


def test_gate_rejects_outliers_and_non_finite_values_without_touching_the_state():
    x, P, stats = np.zeros(2), np.eye(2), SensorStatistics()
    H, R = np.eye(2), np.eye(2)
    gate = GateCache(0.9999)
    assert gate(2) == pytest.approx(18.42, abs=0.01)  # chi2.ppf(0.9999, 2)
    assert not sequential_update(x, P, np.array([10.0, 0.0]), H, R, gate(2), stats)  # NIS 50
    assert not sequential_update(x, P, np.array([np.nan, 0.0]), H, R, gate(2), stats)
    assert stats.rejected == 2 and stats.consecutive_rejections == 2 and stats.accepted == 0
    np.testing.assert_array_equal(x, 0.0)
    np.testing.assert_array_equal(P, np.eye(2))
    assert sequential_update(x, P, np.array([1.0, 0.0]), H, R, gate(2), stats)
    assert stats.consecutive_rejections == 0


@pytest.mark.parametrize("order", [2, 3])
def test_plant_noise_is_the_van_loan_discretisation(order):
    """Q = int_0^dt e^(A s) G q G^T e^(A^T s) ds for a chain of integrators driven by white noise."""
    dt, q = 0.004, 7.0
    A = np.diag(np.ones(order - 1), 1)
    G = np.zeros((order, 1))
    G[-1, 0] = 1.0
    F = np.block([[-A, G * q @ G.T], [np.zeros((order, order)), A.T]]) * dt
    E = scipy.linalg.expm(F)
    expected = E[order:, order:].T @ E[:order, order:]
    got = white_jerk_covariance(np.array([q]), dt) if order == 3 else white_acceleration_covariance(np.array([q]), dt)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    assert np.linalg.eigvalsh(got).min() > -1e-18

"""ALI3-P on a model in minimal coordinates with a configuration-dependent mass matrix (double pendulum)."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from state_observer.mbs import ALI3P, MinimalModel, mechanical_energy

M1, M2, L1, L2, G = 1.0, 2.0, 1.0, 0.7, 9.81


def mass(q):
    c = np.cos(q[0] - q[1])
    return np.array([[(M1 + M2) * L1**2, M2 * L1 * L2 * c], [M2 * L1 * L2 * c, M2 * L2**2]])


class DoublePendulumLoads:
    """Gravity and the velocity terms of the kinetic energy, with their stiffness and damping."""

    stiff = True
    state_dependent = True

    def accumulate(self, q, qd, t, Q, K, C):
        d = q[0] - q[1]
        s, c = np.sin(d), np.cos(d)
        k = M2 * L1 * L2
        Q[0] += -k * s * qd[1] ** 2 - (M1 + M2) * G * L1 * np.sin(q[0])
        Q[1] += k * s * qd[0] ** 2 - M2 * G * L2 * np.sin(q[1])
        if K is None:
            return
        K[0] += [k * c * qd[1] ** 2 + (M1 + M2) * G * L1 * np.cos(q[0]), -k * c * qd[1] ** 2]
        K[1] += [-k * c * qd[0] ** 2, k * c * qd[0] ** 2 + M2 * G * L2 * np.cos(q[1])]
        C[0, 1] += 2 * k * s * qd[1]
        C[1, 0] += -2 * k * s * qd[0]

    def potential(self, q):
        return -(M1 + M2) * G * L1 * np.cos(q[0]) - M2 * G * L2 * np.cos(q[1])


def reference(t_end, y0):
    def rhs(t, y):
        q, qd = y[:2], y[2:]
        Q, K, C = np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2))
        DoublePendulumLoads().accumulate(q, qd, t, Q, K, C)
        return np.concatenate([qd, np.linalg.solve(mass(q), Q)])

    return solve_ivp(rhs, (0, t_end), y0, method="DOP853", rtol=1e-11, atol=1e-12, dense_output=True)


def test_loads_jacobians():
    from numdiff import jacobian_fd

    rng = np.random.default_rng(1)
    q, qd = rng.standard_normal(2), rng.standard_normal(2)
    loads = DoublePendulumLoads()

    def Q(x, xd):
        out = np.zeros(2)
        loads.accumulate(x, xd, 0.0, out, None, None)
        return out

    Qv, K, C = np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2))
    loads.accumulate(q, qd, 0.0, Qv, K, C)
    np.testing.assert_allclose(K, -jacobian_fd(lambda x: Q(x, qd), q), atol=1e-6)
    np.testing.assert_allclose(C, -jacobian_fd(lambda x: Q(q, x), qd), atol=1e-6)


@pytest.mark.parametrize("dt, tolerance", [(1e-3, 3e-5), (5e-4, 8e-6)])  # second order: 1.1e-5, 2.8e-6 measured
def test_double_pendulum_matches_solve_ivp_and_keeps_its_energy(dt, tolerance):
    model = MinimalModel("double_pendulum", ["th1", "th2"], mass, [DoublePendulumLoads()])
    q0 = np.array([0.8, -0.4])
    solver = ALI3P(model, q0, np.zeros(2), dt=dt, tol=1e-12)
    ref = reference(3.0, np.concatenate([q0, np.zeros(2)]))
    e0 = mechanical_energy(model, solver.q, solver.qd)
    worst = 0.0
    for _ in range(round(3.0 / dt)):
        result = solver.step()
        assert result.success, result.message
        worst = max(worst, np.abs(solver.q - ref.sol(solver.t)[:2]).max())
    assert worst < tolerance
    # the trapezoidal rule conserves the energy of this conservative system up to O(dt^2)
    assert abs(mechanical_energy(model, solver.q, solver.qd) - e0) < 1e-5 * abs(e0)


def test_minimal_model_has_no_constant_mass():
    model = MinimalModel("double_pendulum", ["th1", "th2"], mass, [DoublePendulumLoads()])
    assert model.m == 0 and model.n == 2 and model.index("th2") == 1
    with pytest.raises(AttributeError, match="mass_matrix"):
        model.mass

"""Position/velocity/acceleration problems, the R matrix, drivers, closed-form dynamics and failure handling."""
import numpy as np
import pytest

from state_observer.mbs import (
    ALI3P,
    Driver,
    Function,
    Input,
    ModelBuilder,
    SolverError,
    SpringDamper,
    constraint_violation,
    make_solver,
    mechanical_energy,
    solve_acceleration,
    solve_position,
    solve_velocity,
    velocity_transform,
)
from state_observer.mbs.linkages import five_bar, four_bar


@pytest.mark.parametrize("make", [four_bar, five_bar])
def test_r_matrix_is_the_derivative_of_the_position_problem(make):
    link = make()
    model, q0, ind = link.model, link.q0, link.independent
    R, S = velocity_transform(model, q0, ind)
    assert R.shape == (model.n, len(ind)) and S.shape == (model.n, model.m)
    h = 1e-6
    for i, name in enumerate(ind):
        j = model.index(name)
        qp, qm = q0.copy(), q0.copy()
        qp[j] += h
        qm[j] -= h
        dq = (solve_position(model, qp, ind) - solve_position(model, qm, ind)) / (2 * h)
        np.testing.assert_allclose(R[:, i], dq, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make", [four_bar, five_bar])
def test_velocity_and_acceleration_problems_satisfy_the_constraints(make):
    link = make()
    model, q0, ind = link.model, link.q0, link.independent
    zd, zdd = np.linspace(0.7, -1.3, len(ind)), np.linspace(2.0, 0.5, len(ind))
    qd = solve_velocity(model, q0, ind, zd)
    qdd = solve_acceleration(model, q0, qd, ind, zdd)
    cs = model.constraints
    cs.evaluate(q0)
    np.testing.assert_allclose(cs.jac @ qd, 0.0, atol=1e-12)
    np.testing.assert_allclose(cs.jac @ qdd + cs.gamma(q0, qd), 0.0, atol=1e-10)
    np.testing.assert_allclose(qd[model.indices(ind)], zd)
    R, _ = velocity_transform(model, q0, ind)
    np.testing.assert_allclose(qd, R @ zd, atol=1e-12)


def test_bad_choice_of_independent_coordinates_is_named():
    link = four_bar()
    with pytest.raises(SolverError, match="rank"):
        velocity_transform(link.model, link.q0, [])


def test_unreachable_configuration_names_the_constraint():
    b = ModelBuilder(dim=2, name="too_short")
    b.fixed_point("A", (0.0, 0.0))
    b.fixed_point("B", (3.0, 0.0))
    b.point("P", (1.0, 0.5))
    b.bar("left", "A", "P", mass=1.0, length=1.0)
    b.bar("right", "P", "B", mass=1.0, length=1.0)
    model = b.build()
    with pytest.raises(SolverError, match="did not converge.*constraint '(left|right): e0.e0'"):
        solve_position(model, model.q_guess, [])


def test_rheonomic_driver_moves_the_crank_exactly():
    """Four-bar with its crank driven at theta0 + w t + a t^2/2."""
    w, a = 3.0, 0.5
    link = four_bar()
    b = ModelBuilder(dim=2, gravity=(0.0, -10.0))
    # rebuild the four-bar with a driver: reuse the linkage definitions through its model's builder inputs
    b.fixed_point("A", (0.0, 0.0))
    b.fixed_point("B", (10.0, 0.0))
    b.point("P1", link.q0[0:2])
    b.point("P2", link.q0[2:4])
    b.angle("theta", link.q0[4])
    b.bar("crank", "A", "P1", 2.0, 2.0)
    b.bar("coupler", "P1", "P2", 8.0, 8.0)
    b.bar("rocker", "P2", "B", 5.0, 5.0)
    from state_observer.mbs import AngleDef, PointDiff

    b.add_constraint(AngleDef("theta", PointDiff("A", "P1"), (1, 0), (0, 1)))
    th0 = link.q0[4]
    b.add_constraint(Driver(["theta"], Function(lambda t: th0 + w * t + 0.5 * a * t * t, lambda t: w + a * t, lambda t: a)))
    model = b.build()
    qd0 = solve_velocity(model, link.q0, [], [])
    solver = ALI3P(model, link.q0, qd0, dt=2e-3, alpha=1e11)
    for _ in range(1000):
        assert solver.step().success
    t = solver.t
    assert solver.q[4] == pytest.approx(th0 + w * t + 0.5 * a * t * t, abs=1e-8)
    # the penalty projections meet the velocity and acceleration constraints to O(M / (dt^2/4 alpha |Phi_q|^2))
    assert solver.qd[4] == pytest.approx(w + a * t, rel=1e-5)
    assert solver.qdd[4] == pytest.approx(a, abs=1e-4)
    pos, vel = constraint_violation(model, solver.q, solver.qd, t)
    assert pos < 1e-8 and vel < 1e-6


def test_input_signal_is_held_and_updated():
    sig = Input(1.0, 2.0)
    assert sig(5.0) == (1.0, 2.0, 0.0)
    sig.set(-1.0)
    assert sig(0.0) == (-1.0, 0.0, 0.0)


def oscillator(dim_damping=0.0):
    """Point mass on a spring, no constraints: an ODE integrated by the trapezoidal rule."""
    b = ModelBuilder(dim=2, name="oscillator")
    b.fixed_point("O", (0.0, 0.0))
    b.point("P", (1.0, 0.0))
    b.body("mass", 2.0, (0.0, 0.0), 0.0, {"P": (0.0, 0.0)})
    b.add_force(SpringDamper("O", "P", stiffness=50.0, damping=dim_damping, free_length=0.0))
    return b.build()


def test_linear_oscillator_follows_the_exact_trapezoidal_solution():
    """Trapezoidal rule on x'' = -w^2 x: x_k = cos(w~ k dt) with tan(w~ dt/2) = w dt/2 (no constraints, m = 0)."""
    model = oscillator()
    assert model.m == 0
    dt, w = 0.01, 5.0
    solver = ALI3P(model, [1.0, 0.0], dt=dt)
    wt = 2.0 / dt * np.arctan(w * dt / 2.0)
    e0 = mechanical_energy(model, solver.q, solver.qd)
    for k in range(1, 501):
        assert solver.step().success
        assert solver.q[0] == pytest.approx(np.cos(wt * k * dt), abs=1e-9)
    assert mechanical_energy(model, solver.q, solver.qd) == pytest.approx(e0, rel=1e-9)


def test_damped_oscillator_loses_energy():
    model = oscillator(dim_damping=4.0)
    solver = make_solver("ali3p", model, [1.0, 0.0], dt=0.01)
    for _ in range(300):
        solver.step()
    # decay rate zeta w = c / (2 m) = 1 1/s: amplitude ~ exp(-3) after 3 s
    assert np.linalg.norm(solver.q) < 1.2 * np.exp(-3.0)
    with pytest.raises(ValueError, match="unknown integrator"):
        make_solver("rk4", model, [1.0, 0.0])


def test_redundant_parallelogram_is_handled():
    """A parallelogram with a third parallel bar: one redundant but consistent constraint."""
    b = ModelBuilder(dim=2, gravity=(0.0, -9.81), name="parallelogram")
    for name, x in (("A", 0.0), ("B", 1.0), ("C", 2.0)):
        b.fixed_point(name, (x, 0.0))
    c, s = np.cos(1.0), -np.sin(1.0)  # hanging 1 rad below the horizontal: it swings without going flat
    for name, x in (("P", 0.0), ("R", 1.0), ("S", 2.0)):
        b.point(name, (x + c, s))
    b.bar("b1", "A", "P", 1.0)
    b.bar("b2", "B", "R", 1.0)
    b.bar("b3", "C", "S", 1.0)
    b.bar("top1", "P", "R", 1.0)
    b.bar("top2", "R", "S", 1.0)
    model = b.build()
    q = solve_position(model, model.q_guess + 0.01, ["P.x"])  # least squares copes with the redundancy
    px = c + 0.01
    py = -np.sqrt(1.0 - px**2)
    np.testing.assert_allclose(q, [px, py, px + 1.0, py, px + 2.0, py], atol=1e-10)
    assert model.m == 5 and model.n == 6  # 1 DOF with 5 constraints: one is redundant
    solver = ALI3P(model, q, dt=5e-3)
    lowest = 0.0
    for _ in range(400):
        res = solver.step()
        assert res.success, res.message
        assert res.position_violation < 1e-8
        lowest = min(lowest, solver.q[1])
    assert lowest < -0.99  # it swung through the bottom
    R, _ = velocity_transform(model, solver.q, ["P.x"])
    assert np.all(np.isfinite(R))


def test_failed_step_is_reported_and_state_kept():
    link = four_bar()
    solver = ALI3P(link.model, link.q0, dt=5e-3, tol=1e-30, max_iter=1)
    q_before = solver.q.copy()
    res = solver.step()
    assert not res.success and "Newton-Raphson failed" in res.message
    np.testing.assert_array_equal(solver.q, q_before)
    assert solver.t == 0.0
    capped = ALI3P(link.model, link.q0, dt=5e-3, tol=1e-30, max_iter=2, accept_unconverged=True)
    res = capped.step()
    assert res.success and "iteration limit" in res.message and res.iterations == 2


def test_integrator_rejects_bad_arguments():
    link = four_bar()
    with pytest.raises(ValueError, match="dt"):
        ALI3P(link.model, link.q0, dt=0.0)
    with pytest.raises(ValueError, match="shape"):
        ALI3P(link.model, link.q0[:3])
    with pytest.raises(ValueError, match="finite"):
        ALI3P(link.model, np.full(5, np.nan))


def test_mechanism_without_forces_stays_at_rest():
    link = four_bar(gravity=0.0)
    assert link.model.forces == []
    solver = ALI3P(link.model, link.q0, dt=5e-3)
    for _ in range(10):
        solver.step()
    np.testing.assert_allclose(solver.q, link.q0, atol=1e-12)


def test_sparse_and_dense_linear_solvers_agree():
    from state_observer.mbs import DenseLU, SparseLU, default_linear_solver

    link = five_bar()
    runs = []
    for backend in (DenseLU(), SparseLU()):
        solver = ALI3P(link.model, link.q0, dt=5e-3, linear_solver=backend)
        for _ in range(200):
            assert solver.step().success
        runs.append((solver.q, solver.n_iterations))
    np.testing.assert_allclose(runs[0][0], runs[1][0], atol=1e-9)
    assert runs[0][1] == runs[1][1]
    assert isinstance(default_linear_solver(10), DenseLU) and isinstance(default_linear_solver(500), SparseLU)

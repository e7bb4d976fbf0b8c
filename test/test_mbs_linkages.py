"""ALI3-P on the linkages of Sanjurjo 2016 ch. 4 against an independent minimal-coordinate solution."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from state_observer.mbs import ALI3P, constraint_violation, mechanical_energy
from state_observer.mbs.linkages import five_bar, four_bar

G = np.array([0.0, -10.0])
ROT = np.array([[0.0, -1.0], [1.0, 0.0]])


class FourBarMinimal:
    """Four-bar in its crank angle only: analytic loop closure and virtual power (no engine code).

    Bars are uniform: int a.dr dm = m/6 [(2 a_a + a_b).dr_a + (a_a + 2 a_b).dr_b].
    """

    A, B = np.zeros(2), np.array([10.0, 0.0])
    L1, L2, L3 = 2.0, 8.0, 5.0
    m = (2.0, 8.0, 5.0)

    def __init__(self, p2_initial):
        p1 = self.p1(np.pi / 3)
        d, e = self.B - p1, p2_initial - p1
        self.branch = np.sign(d[0] * e[1] - d[1] * e[0])

    def p1(self, th):
        return self.L1 * np.array([np.cos(th), np.sin(th)])

    def p2(self, th):
        p1 = self.p1(th)
        d = self.B - p1
        D = np.linalg.norm(d)
        a = (self.L2**2 - self.L3**2 + D**2) / (2 * D)
        h = np.sqrt(self.L2**2 - a**2)
        return p1 + a * d / D + self.branch * h * (ROT @ d) / D

    def kinematics(self, th, thd):
        """Positions, J = dr/dth and b (r_dd = J th_dd + b) of the two moving points."""
        c, s = np.cos(th), np.sin(th)
        p1, p2 = self.p1(th), self.p2(th)
        J1 = self.L1 * np.array([-s, c])
        b1 = -self.L1 * np.array([c, s]) * thd**2
        Gm = np.array([p2 - p1, p2 - self.B])
        J2 = np.linalg.solve(Gm, [(p2 - p1) @ J1, 0.0])
        v1, v2 = J1 * thd, J2 * thd
        b2 = np.linalg.solve(Gm, [(p2 - p1) @ b1 - (v2 - v1) @ (v2 - v1), -(v2 @ v2)])
        return p1, p2, J1, J2, b1, b2

    def bars(self, th, thd):
        p1, p2, J1, J2, b1, b2 = self.kinematics(th, thd)
        z = np.zeros(2)
        # (mass, r_a, r_b, J_a, J_b, b_a, b_b)
        return [
            (self.m[0], self.A, p1, z, J1, z, b1),
            (self.m[1], p1, p2, J1, J2, b1, b2),
            (self.m[2], p2, self.B, J2, z, b2, z),
        ]

    def rhs(self, t, y):
        th, thd = y
        lhs = rhs = 0.0
        for m, ra, rb, Ja, Jb, ba, bb in self.bars(th, thd):
            lhs += m / 6 * ((2 * Ja + Jb) @ Ja + (Ja + 2 * Jb) @ Jb)
            rhs += m / 2 * G @ (Ja + Jb) - m / 6 * ((2 * ba + bb) @ Ja + (ba + 2 * bb) @ Jb)
        return [thd, rhs / lhs]

    def energy(self, th, thd):
        e = 0.0
        for m, ra, rb, Ja, Jb, _, _ in self.bars(th, thd):
            va, vb = Ja * thd, Jb * thd
            e += m / 6 * (va @ va + va @ vb + vb @ vb) - m * G @ (ra + rb) / 2
        return e


@pytest.fixture(scope="module")
def reference():
    link = four_bar()
    ref = FourBarMinimal(link.q0[2:4])
    t_eval = np.linspace(0.0, 10.0, 2001)
    sol = solve_ivp(ref.rhs, (0.0, 10.0), [np.pi / 3, 0.0], method="DOP853", rtol=1e-10, atol=1e-12, t_eval=t_eval)
    assert sol.success
    return ref, sol


def test_reference_itself_conserves_energy(reference):
    ref, sol = reference
    e = [ref.energy(th, thd) for th, thd in sol.y.T]
    assert np.ptp(e) < 1e-6 * np.ptp([ref.energy(th, 0.0) for th in sol.y[0]])
    assert np.ptp(sol.y[0]) > 1.0  # it really swings


def test_initial_assembly_matches_loop_closure(reference):
    ref, _ = reference
    link = four_bar()
    np.testing.assert_allclose(link.q0[:2], ref.p1(np.pi / 3), atol=1e-12)
    np.testing.assert_allclose(link.q0[2:4], ref.p2(np.pi / 3), atol=1e-10)


@pytest.mark.parametrize("dt, tolerance, final_tolerance", [(1e-3, 1e-3, 1e-4), (5e-3, 0.035, 1e-2)])
def test_four_bar_matches_minimal_coordinates(reference, dt, tolerance, final_tolerance):
    """Crank angle against solve_ivp over 10 s of free fall.

    At 5 ms the largest error (0.031 rad, a 4.6 ms phase lag when the crank passes 6.8 rad/s at
    t = 8.2 s) exceeds the 1e-2 the foundation issue hoped for.  It comes from the velocity and
    acceleration projections, not from the trapezoidal rule itself (which gives 1.6e-3 on the
    minimal-coordinate ODE, and 3e-3 on this DAE without projections, where it is unstable for other
    models); see the issue's closing note.  The error shrinks as dt^2.4 (7e-4 at 1 ms).
    """
    ref, sol = reference
    link = four_bar()
    solver = ALI3P(link.model, link.q0, dt=dt)
    ith = link.model.index("theta")
    every = round(0.005 / dt)
    worst_violation = 0.0
    errors = []
    for k in range(1, round(10.0 / dt) + 1):
        res = solver.step()
        assert res.success, res.message
        worst_violation = max(worst_violation, res.position_violation, constraint_violation(link.model, solver.q, t=solver.t)[0])
        if k % every == 0:
            errors.append(solver.q[ith] - sol.y[0][k // every])
    assert len(errors) == 2000
    assert np.max(np.abs(errors)) < tolerance
    assert abs(errors[-1]) < final_tolerance
    assert worst_violation < 1e-8


def test_four_bar_energy(reference):
    ref, sol = reference
    link = four_bar()
    solver = ALI3P(link.model, link.q0, dt=5e-3)
    e0 = mechanical_energy(link.model, solver.q, solver.qd)
    assert e0 == pytest.approx(ref.energy(np.pi / 3, 0.0), rel=1e-12)
    kinetic_peak, energies = 0.0, []
    for _ in range(2000):
        assert solver.step().success
        kinetic_peak = max(kinetic_peak, 0.5 * solver.qd @ link.model.mass @ solver.qd)
        energies.append(mechanical_energy(link.model, solver.q, solver.qd))
    # measured against the energy that the fall exchanges between potential and kinetic
    assert kinetic_peak > 100.0
    assert abs(energies[-1] - e0) < 0.01 * kinetic_peak
    assert max(abs(e - e0) for e in energies) < 0.01 * kinetic_peak


def test_five_bar_falls_conserving_energy_and_constraints():
    link = five_bar()
    model = link.model
    # Table 4.2 lengths hold after assembly
    q = link.q0
    p = {"A": np.zeros(2), "P1": q[0:2], "P2": q[2:4], "P3": q[4:6], "B": np.array([3.0, 0.0])}
    for (a, b), length in zip([("A", "P1"), ("P1", "P2"), ("P2", "P3"), ("P3", "B")], [0.5, 2.062, 3.202, 0.5]):
        assert np.linalg.norm(p[b] - p[a]) == pytest.approx(length, abs=1e-12)
    solver = ALI3P(model, link.q0, dt=5e-3)
    e0 = mechanical_energy(model, solver.q, solver.qd)
    kinetic_peak = 0.0
    for _ in range(2000):
        res = solver.step()
        assert res.success, res.message
        assert res.position_violation < 1e-8
        kinetic_peak = max(kinetic_peak, 0.5 * solver.qd @ model.mass @ solver.qd)
    assert kinetic_peak > 10.0
    assert abs(mechanical_energy(model, solver.q, solver.qd) - e0) < 0.01 * kinetic_peak
    assert np.isfinite(solver.q).all()

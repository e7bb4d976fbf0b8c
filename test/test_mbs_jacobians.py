"""Every constraint and force Jacobian against finite differences; mass matrix and loads against rigid-body mechanics."""
import numpy as np
import pytest
from numdiff import jacobian_fd

from state_observer.mbs import (
    AngleDef,
    BodyPoint,
    BodyTorque,
    BodyVector,
    CoordinateForce,
    Distance,
    DistanceDef,
    Dot,
    Driver,
    Function,
    ModelBuilder,
    PointDiff,
    PointForce,
    Prismatic,
    Revolute,
    Spherical,
    SpringDamper,
    SpringDampers,
    generalized_forces,
)

RNG = np.random.default_rng(7)


def spatial_model():
    """A 3D model that uses every constraint and force definition of the library."""
    b = ModelBuilder(dim=3, gravity=(0.0, 0.0, -9.81), name="kitchen_sink")
    b.fixed_point("O", (0.0, 0.0, 0.0))
    b.point("p0", (0.0, 0.0, 1.0))
    b.point("p1", (1.0, 0.0, 1.0))
    b.vector("u", (0.0, 1.0, 0.0))
    b.vector("v", (0.0, 0.0, 1.0))
    b.point("p2", (1.0, 0.8, 1.0))
    b.vector("w", (0.0, 0.0, 1.0))
    b.point("s0", (0.0, 0.5, 1.0))
    b.vector("a1", (1.0, 0.0, 0.0))
    b.vector("a2", (0.0, 0.0, 1.0))
    b.point("c", (0.5, -0.3, 1.0))
    b.vector("ax", (0.0, 1.0, 0.0))
    b.point("r", (0.5, -0.3, 1.3))
    b.angle("phi", 0.0)
    b.distance("s", 1.0)
    b.scalar("rack", 0.1)
    inertia = np.array([[0.10, 0.01, 0.0], [0.01, 0.20, 0.02], [0.0, 0.02, 0.25]])
    b.body("box", 3.0, (0.2, 0.05, -0.1), inertia, {"p0": (0, 0, 0), "p1": (1, 0, 0)}, {"u": (0, 1, 0), "v": (0, 0, 1)})
    b.body("arm", 1.5, (0.0, 0.4, 0.0), (0.05, 0.02, 0.05), {"p1": (0, 0, 0), "p2": (0, 0.8, 0)}, {"w": (0, 0, 1), "a1": (1, 0, 0)})
    b.body("slider", 0.7, (0.0, 0.0, 0.0), (0.01, 0.01, 0.01), {"s0": (0, 0, 0)}, {"a1": (1, 0, 0), "a2": (0, 0, 1), "u": (0, 1, 0)})
    b.body("wheel", 2.0, (0.0, 0.0, 0.0), (0.3, 0.5, 0.3), {"c": (0, 0, 0), "r": (0, 0, 0.3)}, {"ax": (0, 1, 0), "a1": (1, 0, 0)})
    b.add_constraint(Distance("O", "p0", 1.0))
    b.add_constraint(Dot("u", "w", 0.0))
    b.add_constraint(Spherical(BodyPoint("box", (1, 0, 0)), BodyPoint("arm", (0, 0, 0))))
    b.add_constraint(Revolute(BodyPoint("box", (0.5, -0.3, 0)), BodyPoint("wheel", (0, 0, 0)), BodyVector("box", (0, 1, 0)), BodyVector("wheel", (0, 1, 0))))
    b.add_constraint(
        Prismatic(
            BodyPoint("box", (0, 0.5, 0)),
            BodyPoint("slider", (0, 0, 0)),
            BodyVector("box", (0, 1, 0)),
            BodyVector("slider", (0, 1, 0)),
            BodyVector("box", (1, 0, 0)),
            BodyVector("slider", (1, 0, 0)),
        )
    )
    b.add_constraint(AngleDef("phi", PointDiff("c", "r"), BodyVector("box", (0, 0, 1)), BodyVector("box", (1, 0, 0))))
    b.add_constraint(DistanceDef("s", "p2", "s0"))
    b.add_constraint(Driver(["rack", "p0.x"], Function(lambda t: 0.1 * np.sin(2 * t), lambda t: 0.2 * np.cos(2 * t), lambda t: -0.4 * np.sin(2 * t)), coeffs=[1.0, 0.5]))
    b.add_force(SpringDamper("p2", BodyPoint("box", (0.3, 0.2, 0.1)), stiffness=120.0, damping=8.0, free_length=0.5, preload=3.0))
    b.add_force(PointForce(BodyPoint("arm", (0.1, 0.4, 0.0)), lambda t: np.array([1.0, -2.0 * t, 0.5])))
    b.add_force(BodyTorque("box", lambda t: np.array([0.3, -0.1 * t, 0.7])))
    b.add_force(CoordinateForce("phi", force=lambda t: 2.0 * t, stiffness=5.0, damping=0.4, rest=0.1))
    b.add_force(CoordinateForce("rack", stiffness=50.0, damping=1.0))
    return b.build()


def planar_model():
    b = ModelBuilder(dim=2, gravity=(0.0, -9.81), name="planar")
    b.fixed_point("A", (0.0, 0.0))
    b.point("P", (1.0, 0.2))
    b.point("R", (1.5, 1.0))
    b.angle("th", 0.2)
    b.body("tri", 2.0, (0.6, 0.3), 0.4, {"A": (0, 0), "P": (1.0, 0.2), "R": (1.5, 1.0)})
    b.point("S", (2.0, 0.0))
    b.body("block", 1.0, (0.0, 0.0), 0.05, {"S": (0, 0), "R": (-0.5, 1.0)})
    b.add_constraint(AngleDef("th", PointDiff("A", "P"), (1.0, 0.0), (0.0, 1.0)))
    b.add_constraint(
        Prismatic(BodyPoint("tri", (0, 0)), BodyPoint("block", (0, 0)), BodyVector("tri", (1, 0)), BodyVector("block", (1, 0)), BodyVector("tri", (0, 1)), BodyVector("block", (0, 1)))
    )
    b.add_force(SpringDamper("A", "S", 40.0, 2.0, 1.5))
    b.add_force(SpringDampers((SpringDamper("R", "S", 30.0, 1.0, 0.8, preload=2.0), SpringDamper(BodyPoint("tri", (0.5, 0.5)), "P", 55.0, 3.0, 0.2))))
    b.add_force(BodyTorque("tri", lambda t: 1.5 + t))
    return b.build()


MODELS = {"spatial": spatial_model, "planar": planar_model}


def random_state(model):
    q = model.q_guess + 0.05 * RNG.standard_normal(model.n)
    return q, RNG.standard_normal(model.n), RNG.standard_normal(model.n)




@pytest.fixture(params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


def test_constraint_jacobian_matches_finite_differences(model):
    cs = model.constraints
    q, _, _ = random_state(model)
    t = 0.3

    def phi(x):
        cs.evaluate(x, t)
        return cs.phi.copy()

    cs.evaluate(q, t)
    jac = cs.jac.copy()
    assert cs.m > 0 and np.abs(jac).max() > 0
    np.testing.assert_allclose(jac, jacobian_fd(phi, q), rtol=1e-6, atol=1e-7)


def test_phi_t_and_gamma_match_finite_differences(model):
    """Along q(s) = q + qd s + qdd s^2/2: d2Phi/ds2 = Phi_q qdd + gamma and dPhi/ds = Phi_q qd + Phi_t."""
    cs = model.constraints
    q, qd, qdd = random_state(model)
    t, h = 0.4, 1e-4

    def phi(s):
        cs.evaluate(q + qd * s + 0.5 * qdd * s * s, t + s)
        return cs.phi.copy()

    cs.evaluate(q, t)
    jac, phi_t = cs.jac.copy(), cs.phi_t.copy()
    gamma = cs.gamma(q, qd)
    first = (phi(h) - phi(-h)) / (2 * h)
    second = (phi(h) - 2 * phi(0.0) + phi(-h)) / h**2
    np.testing.assert_allclose(jac @ qd + phi_t, first, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jac @ qdd + gamma, second, rtol=1e-5, atol=1e-4)


def test_force_stiffness_and_damping_match_finite_differences(model):
    n = model.n
    q, qd, _ = random_state(model)
    t = 0.7
    Q, K, C = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))

    def forces(x, xd):
        Qx, Kx, Cx = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
        generalized_forces(model, x, xd, t, Qx, Kx, Cx)
        return Qx

    generalized_forces(model, q, qd, t, Q, K, C)
    assert np.abs(K).max() > 0 and np.abs(C).max() > 0
    np.testing.assert_allclose(K, -jacobian_fd(lambda x: forces(x, qd), q), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(C, -jacobian_fd(lambda xd: forces(q, xd), qd), rtol=1e-6, atol=1e-6)


def rigid_motion(body_points, body_vectors, omega, v0, origin):
    """Velocities of points and unit vectors of a body in rigid motion (v0 at origin, angular velocity omega)."""
    pd = {k: v0 + np.cross(omega, p - origin) for k, p in body_points.items()}
    vd = {k: np.cross(omega, u) for k, u in body_vectors.items()}
    return pd, vd


def test_mass_matrix_gives_rigid_body_kinetic_energy():
    """1/2 qd^T M qd = 1/2 m v_G^2 + 1/2 w^T I w for a random rigid motion of a 3D body."""
    b = ModelBuilder(dim=3)
    b.point("p0", (0.3, -0.2, 0.5))
    b.point("p1", (0.3, 0.8, 0.5))
    b.vector("u", (1.0, 0.0, 0.0))
    b.vector("v", (0.0, 0.0, 1.0))
    I_local = np.array([[0.4, 0.05, -0.02], [0.05, 0.3, 0.01], [-0.02, 0.01, 0.5]])
    com = np.array([0.1, 0.3, -0.2])  # local frame: p0 at origin, p1 along local y
    b.body("b", 5.0, com, I_local, {"p0": (0, 0, 0), "p1": (0, 1, 0)}, {"u": (1, 0, 0), "v": (0, 0, 1)})
    model = b.build()
    # local axes coincide with global axes at the guess
    omega, v0 = RNG.standard_normal(3), RNG.standard_normal(3)
    p = {"p0": np.array([0.3, -0.2, 0.5]), "p1": np.array([0.3, 0.8, 0.5])}
    u = {"u": np.array([1.0, 0, 0]), "v": np.array([0, 0, 1.0])}
    pd, vd = rigid_motion(p, u, omega, v0, p["p0"])
    qd = np.concatenate([pd["p0"], pd["p1"], vd["u"], vd["v"]])
    vG = v0 + np.cross(omega, com)
    expected = 0.5 * 5.0 * vG @ vG + 0.5 * omega @ I_local @ omega
    assert 0.5 * qd @ model.mass @ qd == pytest.approx(expected, rel=1e-12)


def test_spring_set_equals_the_springs_one_by_one():
    def two_bars(grouped):
        b = ModelBuilder(dim=2, name="bars")
        b.fixed_point("A", (0.0, 0.0))
        b.point("P", (1.0, 0.1))
        b.point("R", (1.2, 1.0))
        b.bar("b1", "A", "P", mass=1.0)
        b.bar("b2", "P", "R", mass=2.0)
        springs = (SpringDamper("A", "R", 30.0, 1.0, 0.8, preload=2.0), SpringDamper(BodyPoint("b2", (0.5, 0.0)), "A", 55.0, 3.0, 0.2))
        for f in ((SpringDampers(springs),) if grouped else springs):
            b.add_force(f)
        return b.build()

    grouped, separate = two_bars(True), two_bars(False)
    q, qd, _ = random_state(grouped)
    results = []
    for model in (grouped, separate):
        n = model.n
        Q, K, C = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
        generalized_forces(model, q, qd, 0.0, Q, K, C)
        results.append((Q, K, C, sum(f.potential(q) for f in model.forces)))
    for a, b in zip(results[0], results[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_planar_bar_mass_matrix_is_the_textbook_one():
    """Uniform bar between two free points: M = m/6 [[2I, I], [I, 2I]]."""
    b = ModelBuilder(dim=2)
    b.point("a", (0.0, 0.0))
    b.point("b", (2.0, 0.0))
    b.bar("bar", "a", "b", mass=6.0)
    model = b.build()
    expected = np.kron(np.array([[2.0, 1.0], [1.0, 2.0]]), np.eye(2))
    np.testing.assert_allclose(model.mass, expected, atol=1e-12)


def test_gravity_and_torque_do_the_right_virtual_work():
    """Q . qd equals m g . v_G + T . omega for a rigid motion."""
    b = ModelBuilder(dim=3, gravity=(0.0, 0.0, -9.81))
    b.point("p0", (0.0, 0.0, 0.0))
    b.point("p1", (0.0, 2.0, 0.0))
    b.vector("u", (1.0, 0.0, 0.0))
    b.vector("v", (0.0, 0.0, 1.0))
    com = np.array([0.2, 0.7, 0.1])
    b.body("b", 4.0, com, (0.3, 0.2, 0.4), {"p0": (0, 0, 0), "p1": (0, 2, 0)}, {"u": (1, 0, 0), "v": (0, 0, 1)})
    torque = np.array([1.0, -2.0, 0.5])
    b.add_force(BodyTorque("b", torque))
    model = b.build()
    omega, v0 = RNG.standard_normal(3), RNG.standard_normal(3)
    p = {"p0": np.zeros(3), "p1": np.array([0, 2.0, 0])}
    u = {"u": np.array([1.0, 0, 0]), "v": np.array([0, 0, 1.0])}
    pd, vd = rigid_motion(p, u, omega, v0, p["p0"])
    qd = np.concatenate([pd["p0"], pd["p1"], vd["u"], vd["v"]])
    n = model.n
    Q, K, C = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
    generalized_forces(model, model.q_guess, qd, 0.0, Q, K, C)
    vG = v0 + np.cross(omega, com)
    assert Q @ qd == pytest.approx(4.0 * np.array([0, 0, -9.81]) @ vG + torque @ omega, rel=1e-12)

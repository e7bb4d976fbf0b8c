"""The 14-DOF model: Lagrangian consistency of its mass matrix and velocity terms, statics, and agreement
with the detailed model on the manoeuvre library."""
import numpy as np
import pytest

from state_observer.sim.manoeuvres import make_manoeuvre
from state_observer.sim.run import run
from state_observer.vehicle.description import load_vehicle
from state_observer.vehicle.detailed import DetailedVehicle
from state_observer.vehicle.reduced import ReducedVehicle

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)


@pytest.fixture(scope="module")
def desc():
    from state_observer.paths import default_vehicle_path

    return load_vehicle(default_vehicle_path())


@pytest.fixture(scope="module")
def reduced(desc, tmp_path_factory):
    from state_observer.vehicle.kinematic_fit import fit_vehicle_kinematics

    return ReducedVehicle(desc, kinematics=fit_vehicle_kinematics(desc, tmp_path_factory.mktemp("kin")))


def inertia_only(vehicle, q, qd):
    """Generalised forces with gravity, springs and tires switched off: the velocity terms alone."""
    from state_observer.vehicle import reduced_kernels

    try:
        vehicle.load_terms = reduced_kernels.INERTIA
        Q = np.zeros(14)
        vehicle.accumulate(q, qd, 0.0, Q, None, None)
    finally:
        vehicle.load_terms = reduced_kernels.ALL_LOADS
    return Q


def test_velocity_terms_follow_from_the_mass_matrix(reduced):
    """Lagrange: Q_v = -(dM/dt qd - 1/2 d(qd^T M qd)/dq), by finite differences of M(q)."""
    rng = np.random.default_rng(2)
    q = np.array([3.0, -2.0, -0.01, 0.03, -0.02, 0.7, 0.02, -0.015, 0.01, -0.02, 1.0, 2.0, 3.0, 4.0])
    qd = rng.standard_normal(14) * np.array([5, 5, 0.3, 0.3, 0.3, 0.5, 0.2, 0.2, 0.2, 0.2, 20, 20, 20, 20])
    h = 1e-6
    Mdot = (reduced.mass_matrix(q + h * qd) - reduced.mass_matrix(q - h * qd)) / (2 * h)
    grad = np.array([(qd @ reduced.mass_matrix(q + h * e) @ qd - qd @ reduced.mass_matrix(q - h * e) @ qd) / (2 * h) for e in np.eye(14)])
    expected = -(Mdot @ qd - 0.5 * grad)
    assert np.abs(expected).max() > 10.0  # a real test: sizeable Coriolis and centrifugal terms
    got = inertia_only(reduced, q, qd)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4 * np.abs(expected).max())
    M = reduced.mass_matrix(q)
    np.testing.assert_allclose(M, M.T, atol=1e-9)
    assert np.linalg.eigvalsh(M).min() > 0
    assert M[0, 0] == pytest.approx(reduced.total_mass_kg, rel=1e-12)  # translation carries every mass


def test_rests_at_the_detailed_static_equilibrium(reduced):
    reduced.start()
    reduced.set_inputs(0.0, np.zeros(4), np.zeros(4))
    for _ in range(250):
        assert reduced.step().success
    truth = reduced.truth()
    detailed_loads = reduced.detailed.static_wheel_loads()
    np.testing.assert_allclose(truth.tire_force_n[:, 2], detailed_loads, rtol=0.01)
    assert np.abs(truth.suspension_travel_m).max() < 1e-3
    assert np.linalg.norm(truth.velocity_enu_m_s) < 1e-3


def nrmse(truth: np.ndarray, model: np.ndarray) -> float:
    """RMSE over time and wheels divided by the peak absolute truth value."""
    return float(np.sqrt(np.mean((truth - model) ** 2)) / np.abs(truth).max())


@pytest.fixture(scope="module")
def comparisons(desc, reduced):
    """Each manoeuvre on the detailed model (with the driver), then on the reduced one with the same inputs."""
    from state_observer.sim.manoeuvres import MANOEUVRES

    out = {}
    for name in MANOEUVRES:
        manoeuvre = make_manoeuvre(name, duration_s=20.0) if name == "double_lane_change" else make_manoeuvre(name)
        inputs = []
        detailed = list(run(DetailedVehicle(desc), manoeuvre, inputs_log=inputs))
        again = make_manoeuvre(name, duration_s=20.0) if name == "double_lane_change" else make_manoeuvre(name)
        model = list(run(reduced, again, replay=inputs))
        out[name] = (detailed, model)
    return out


@pytest.mark.parametrize("name", ["steady_circle", "step_steer", "sine_with_dwell", "double_lane_change", "accelerate_brake", "friction_change", "straight"])
def test_tire_forces_follow_the_detailed_model(comparisons, name):
    detailed, model = comparisons[name]
    assert len(detailed) == len(model)
    skip = 250  # the first second: both start from their own static equilibrium
    fd = np.array([s.tire_force_n for s in detailed[skip:]])
    fr = np.array([s.tire_force_n for s in model[skip:]])
    for c in range(3):
        if np.abs(fd[:, :, c]).max() > 100.0:  # components that carry load in this manoeuvre
            assert nrmse(fd[:, :, c], fr[:, :, c]) < 0.05, ("xyz"[c], nrmse(fd[:, :, c], fr[:, :, c]))


def test_trajectory_after_20_s_of_double_lane_change(comparisons):
    detailed, model = comparisons["double_lane_change"]
    assert detailed[-1].t_s == pytest.approx(20.0)
    assert np.linalg.norm(detailed[-1].position_enu_m[:2] - model[-1].position_enu_m[:2]) < 1.0


def test_stiffness_and_damping_match_finite_differences(reduced):
    """C = -dQ/dqd is exact for the springs, bars and tires; K = -dQ/dq keeps their dominant terms and
    omits the turning of the tire-force directions with the chassis (a few % of the largest entry, in
    the yaw column)."""
    from state_observer.vehicle import reduced_kernels

    reduced.start(15.0)
    reduced.set_inputs(0.5, [80.0, 80.0, 0.0, 0.0], [0.0, 0.0, 30.0, 30.0])
    for _ in range(200):
        assert reduced.step().success
    q, qd, t = reduced.solver.q.copy(), reduced.solver.qd.copy(), reduced.solver.t + reduced.dt_s
    reduced.load_terms = reduced_kernels.SUSPENSION | reduced_kernels.TIRES
    try:
        def forces(q, qd):
            Q = np.zeros(14)
            reduced.accumulate(q, qd, t, Q, None, None)
            return Q

        K, C, Q = np.zeros((14, 14)), np.zeros((14, 14)), np.zeros(14)
        reduced.accumulate(q, qd, t, Q, K, C)
        np.testing.assert_array_equal(Q, forces(q, qd))
        h = 1e-6
        K_fd = np.array([-(forces(q + h * e, qd) - forces(q - h * e, qd)) / (2 * h) for e in np.eye(14)]).T
        C_fd = np.array([-(forces(q, qd + h * e) - forces(q, qd - h * e)) / (2 * h) for e in np.eye(14)]).T
    finally:
        reduced.load_terms = reduced_kernels.ALL_LOADS
    assert np.abs(C - C_fd).max() < 1e-7 * np.abs(C_fd).max()
    assert np.abs(K - K_fd).max() < 0.04 * np.abs(K_fd).max()
    vertical = np.ix_([2, 3, 4, 6, 7, 8, 9], [2, 3, 4, 6, 7, 8, 9])  # heave, roll, pitch, travels
    assert np.abs(K[vertical] - K_fd[vertical]).max() < 0.005 * np.abs(K_fd).max()


def test_compiled_step_is_the_integrators_step(reduced):
    """On a flat road the model steps with one compiled Newton loop; it follows the generic ALI3-P step
    (Python between the kernels) to round-off, force corrections included."""
    runs = []
    for compiled in (False, True):
        reduced.compiled_step = compiled
        reduced.set_inputs(0.0, np.zeros(4), np.zeros(4))  # the start's accelerations depend on the inputs
        reduced.start(15.0)
        states = []
        for k in range(300):
            reduced.set_inputs(0.5 * np.sin(0.02 * k), [80.0, 80.0, 0.0, 0.0], [0.0, 0.0, 20.0 * (k > 150), 20.0 * (k > 150)])
            reduced.force_correction[[0, 1, 5]] = 200.0 if k % 7 == 0 else 0.0
            assert reduced.step().success
            s = reduced.solver
            states.append(np.concatenate([s.q, s.qd, s.qdd, s.Q, np.ravel(reduced.last)]))
        runs.append((np.array(states), s.K.copy(), s.C.copy(), s.n_iterations))
    reduced.compiled_step = True
    reduced.force_correction[:] = 0.0
    (generic, K0, C0, it0), (compiled, K1, C1, it1) = runs
    assert abs(it0 - it1) <= 3  # a convergence test can fall on either side of tol
    scale = np.abs(generic).max(axis=0) + 1e-3
    assert (np.abs(compiled - generic) / scale).max() < 1e-8
    np.testing.assert_allclose(K1, K0, rtol=0, atol=1e-10 * np.abs(K0).max())
    np.testing.assert_allclose(C1, C0, rtol=0, atol=1e-10 * np.abs(C0).max())


@pytest.mark.parametrize("model", ["detailed", "reduced"])
def test_downforce_loads_the_axles_by_the_lever_rule(desc, reduced, model):
    """Downforce 1/2 rho CzA v^2 at the centre of pressure (hand calculation): driving straight at 40 m/s, the four tire
    loads grow by it in total, and the front axle's by its lever-rule share (x_cp - x_rear) / (x_front - x_rear)."""
    import dataclasses

    from state_observer.sim.manoeuvres import straight

    aero = dataclasses.replace(desc.aerodynamics, downforce_area_m2=2.0)
    speed = 40.0
    downforce = 0.5 * aero.air_density_kg_m3 * aero.downforce_area_m2 * speed**2  # 1920 N
    x_front, x_rear = desc.corners[0].wheel_centre_m[0], desc.corners[2].wheel_centre_m[0]
    front_share = (aero.centre_of_pressure_m[0] - x_rear) / (x_front - x_rear)
    loads = []
    for d in (desc, dataclasses.replace(desc, aerodynamics=aero)):
        vehicle = DetailedVehicle(d) if model == "detailed" else ReducedVehicle(d, kinematics=reduced.kin)
        samples = list(run(vehicle, straight(speed_m_s=speed, duration_s=4.0)))
        assert abs(np.linalg.norm(samples[-1].velocity_enu_m_s) - speed) < 0.5
        loads.append(np.mean([s.tire_force_n[:, 2] for s in samples[-250:]], axis=0))
    added = loads[1] - loads[0]
    assert added.sum() == pytest.approx(downforce, rel=0.02)
    assert added[:2].sum() == pytest.approx(front_share * downforce, rel=0.05)
    if model == "reduced":  # what the friction estimate divides the tire forces by besides the weight
        assert vehicle.downforce_n(speed) == pytest.approx(downforce, rel=1e-12)


def test_residual_derivatives_are_central_differences_of_the_residual(reduced):
    """residual_derivatives (one compiled loop) is the central difference of r = M qdd - Q, column by column, at the
    solver's state: each column against two residual evaluations at q +- h e_j (qd +- h e_j), to round-off; the state is
    left as it was."""
    from state_observer.vehicle import reduced_kernels as kern

    reduced.start(15.0)
    reduced.set_inputs(0.5, [80.0, 80.0, 0.0, 0.0], [0.0, 0.0, 30.0, 30.0])
    for _ in range(100):
        assert reduced.step().success
    s = reduced.solver
    before = s.q.copy(), s.qd.copy(), s.qdd.copy()
    positions, velocities, h, tire_dt = [0, 1, 5, 3], [1, 5, 10], 1e-6, 0.004
    dq, dqd = reduced.residual_derivatives(positions, velocities, tire_dt, h)
    for array, kept in zip((s.q, s.qd, s.qdd), before):
        np.testing.assert_array_equal(array, kept)
    inputs = reduced._inputs.copy()
    inputs[kern.IN_TIRE_DT] = tire_dt

    def r(q, qd):
        return kern.force_residuals(reduced.parameters[None], np.arange(14), reduced.total_mass_kg, q, qd, s.qdd, inputs[kern.IN_RACK], *reduced._splines,
                                    reduced.body, reduced._inertia, inputs, reduced._xi0, reduced._road_height, reduced._road_normal, reduced.tire.rows,
                                    reduced.load_terms)[0]

    e = np.eye(14)
    expected_q = np.array([(r(s.q + h * e[j], s.qd) - r(s.q - h * e[j], s.qd)) / (2 * h) for j in positions]).T
    expected_qd = np.array([(r(s.q, s.qd + h * e[j]) - r(s.q, s.qd - h * e[j])) / (2 * h) for j in velocities]).T
    np.testing.assert_array_equal(dq, expected_q)
    np.testing.assert_array_equal(dqd, expected_qd)
    assert np.abs(dq[:, 2]).max() > 1.0 and np.abs(dqd).max() > 1.0  # the roll stiffness and the damping are there


def test_road_slope_forces_are_gravity_on_every_body(desc, reduced):
    """slope_forces, gravity's generalised force per m/s^2 of its east and north components: the central difference of
    the residual r = M qdd - Q in the body's gravity (dQ/dg = -dr/dg), and by hand on a car facing east: the whole mass on
    x and y, and the moments of the bodies' weights about base_link, sum m_b z_b (pitch, east) and sum m_b x_b (yaw,
    north), the unsprung masses at their wheel centres."""
    from state_observer.vehicle import reduced_kernels as kern

    reduced.set_inputs(0.0, np.zeros(4), np.zeros(4))  # straight ahead, whatever the module's earlier tests left
    reduced.start(10.0)
    for _ in range(50):
        assert reduced.step().success
    got = reduced.slope_forces()
    s = reduced.solver
    inputs = reduced._inputs.copy()
    h = 1e-3

    def r(g_east, g_north):
        body = reduced.body.copy()
        body[kern.B_GRAVITY_X], body[kern.B_GRAVITY_Y] = g_east, g_north
        return kern.force_residuals(reduced.parameters[None], np.arange(14), reduced.total_mass_kg, s.q, s.qd, s.qdd, inputs[kern.IN_RACK], *reduced._splines,
                                    body, reduced._inertia, inputs, reduced._xi0, reduced._road_height, reduced._road_normal, reduced.tire.rows,
                                    reduced.load_terms)[0]

    expected = -np.column_stack([(r(h, 0.0) - r(-h, 0.0)) / (2 * h), (r(0.0, h) - r(0.0, -h)) / (2 * h)])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    m = reduced.total_mass_kg
    wheels = np.array([c.wheel_centre_m for c in desc.corners])
    masses = np.concatenate([[reduced.sprung_mass], reduced.unsprung_mass])
    points = np.vstack([reduced.sprung_com, wheels])
    assert abs(s.q[5]) < 1e-3 and np.allclose(reduced.road_slope, 0.0)  # facing east, the model's own slope left level
    assert got[0, 0] == pytest.approx(m, rel=1e-9) and got[1, 1] == pytest.approx(m, rel=1e-9)
    assert abs(got[1, 0]) < 1e-6 * m and abs(got[2]).max() < 1e-6 * m
    assert got[4, 0] == pytest.approx(masses @ points[:, 2], rel=0.02)  # nose down when gravity pulls forwards
    assert got[5, 1] == pytest.approx(masses @ points[:, 0], rel=0.02)

"""The real-time 14-DOF vehicle model (the observers' model), in minimal coordinates.

z = [x, y, z, roll, pitch, yaw, s_fl, s_fr, s_rl, s_rr, a_fl, a_fr, a_rl, a_rr]: base_link origin in
ENU (m), chassis attitude R = Rz(yaw) Ry(pitch) Rx(roll), suspension travels s (m, wheel-centre height
along the chassis z axis from the static position) and wheel spin angles a (rad, relative to the
knuckle).  No constraints: each knuckle's pose is a function of its travel (and of the rack travel at
the steered corners) given by the quintic spline fit of the detailed model's sweep
(:mod:`.kinematic_fit`; Rodriguez 2020 §5.3 "macro-joints", eqs 5.45-5.50).  Time derivatives of the
rack travel are neglected in the knuckle kinematics, as in the seeds.

Bodies: the sprung mass (chassis, rack and half of every link), four unsprung masses at the wheel
centres (knuckle, strut, the wheel's non-spinning part and the other half of the links) and the four
spin inertias.  With J_v, J_w the Jacobians of each body's centre velocity and angular velocity
(world axes), M(z) = sum m J_v^T J_v + J_w^T I J_w (+ spin inertias) and the velocity terms are
Q_v = -sum m J_v^T a0 + J_w^T (I alpha0 + w x I w), a0 and alpha0 being the accelerations at zdd = 0.
Springs, anti-roll bars, drag, tires, brakes and drive are the detailed model's laws, with its
spring preloads, so both models share their static equilibrium.

The evaluation runs in compiled kernels (:mod:`.reduced_kernels`, numba): one call for the kinematics
and M(q), a Python road query at the wheel centres, one call for Q and its stiffness and damping.  On a
:class:`.road.FlatRoad` a whole integrator step is one compiled call (the ALI3-P Newton loop without
constraints, :func:`.reduced_kernels.trapezoidal_step`); ``compiled_step = False`` or any other road
uses the generic step.
"""
from __future__ import annotations

import math

import numpy as np

from ..mbs import ALI3P, MinimalModel
from ..mbs.integrators import StepResult
from ..mbs.model import body_point
from .state import VehicleState
from . import reduced_kernels as kern
from ..conventions import GRAVITY_M_S2, WHEELS, quaternion_from_matrix
from .detailed import DetailedVehicle
from .kinematic_fit import fit_vehicle_kinematics, knuckle_rotation
from .road import FlatRoad
from .tire import TireOutput
from .wheel_loads import GEOMETRY_WIDTH, Contact
UNSPRUNG_BODIES = ("knuckle", "lower_arm", "upper_arm", "tie_rod", "toe_link")


def stack_corner_splines(corners) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four corners' spline tables padded to common shapes for :func:`.reduced_kernels.position_stage`:
    coef (4, ncu, ncr, ch, P, Q), bu (4, nu), br (4, nr) and offsets (4, 5) = static travel offset (m),
    static dive (rad), steered (0/1), number of travel and rack breakpoints."""
    shapes = np.array([k.spline_tables[0].shape for k in corners])
    coef = np.zeros((4,) + tuple(shapes.max(axis=0)))
    bu = np.zeros((4, shapes[:, 0].max() + 1))
    br = np.zeros((4, shapes[:, 1].max() + 1))
    offsets = np.zeros((4, 5))
    for c, k in enumerate(corners):
        k_coef, k_bu, k_br = k.spline_tables
        a, b, _, p, r = k_coef.shape
        coef[c, :a, :b, :, :p, :r] = k_coef
        bu[c, : a + 1], br[c, : b + 1] = k_bu, k_br
        offsets[c] = (k.static_offset_m, k.dive_static_rad, float(k.steered), a + 1, b + 1)
    return coef, bu, br, offsets


class ReducedVehicle:
    """The 14-DOF model with the same driving API as :class:`DetailedVehicle` (``start``, ``set_inputs``,
    ``step``, ``truth``, ``mu``), so the manoeuvre runner drives either."""

    def __init__(self, desc, kinematics=None, road=None, mu: float | None = None, dt_s: float = 0.004, tol: float = 1e-9, max_iter: int = 20, detailed: DetailedVehicle | None = None,
                 linear_solver=None):
        """``linear_solver``: backend of the Newton iteration's linear solve (:func:`state_observer.accel.make_backend`);
        None for the integrator's default."""
        self.desc = desc
        self.dt_s = dt_s
        self.detailed = detailed if detailed is not None else DetailedVehicle(desc, road=road, mu=mu, dt_s=dt_s)
        d = self.detailed
        self.kin = kinematics if kinematics is not None else fit_vehicle_kinematics(desc)
        if not hasattr(d, "q_static"):
            level = type(d.road) is FlatRoad and (d.road.height_m, d.road.grade_x, d.road.grade_y) == (0.0, 0.0, 0.0)
            known = self.kin.static_position(desc) if level else None  # solved with the kinematics, on the level
            if known is not None:
                d.q_static = known
            else:
                d.solve_statics()
        self.road = d.road
        self.corners = [self.kin[w] for w in WHEELS]
        self.total_mass_kg = d.total_mass_kg
        self._lump_masses()
        springs = d.spring_set
        arb = {c: desc.corners[c].anti_roll_bar_n_per_m or 0.0 for c in (0, 2)}
        aero = desc.aerodynamics
        self.tire = d.wheels.tire
        # the tire rows the model uses: the description's, with the stiffness scales an observer may estimate
        # (cornering front, cornering rear, longitudinal slip; see set_tire_scales)
        self.tire_scales = np.ones(3)
        self.tire_rows = np.empty((4, self.tire.rows.shape[1]))
        kern.scaled_tire_rows(self.tire.rows, 1.0, 1.0, 1.0, self.tire_rows)
        self.R0, self.rD = d.wheels.R0, d.wheels.rD
        body = np.zeros(kern.BODY_SIZE)
        body[kern.B_SPRUNG_M] = self.sprung_mass
        body[kern.B_SPRUNG_COM : kern.B_SPRUNG_COM + 3] = self.sprung_com
        body[kern.B_SPRUNG_I : kern.B_SPRUNG_I + 9] = self.sprung_inertia.ravel()
        body[kern.B_UNSPRUNG_M : kern.B_UNSPRUNG_M + 4] = self.unsprung_mass
        body[kern.B_SPIN_I : kern.B_SPIN_I + 4] = [c.wheel.spin_inertia_kg_m2 for c in desc.corners]
        for offset, values in ((kern.B_SPRING_K, springs.k), (kern.B_SPRING_C, springs.c), (kern.B_SPRING_L0, springs.l0), (kern.B_SPRING_F0, springs.f0)):
            body[offset : offset + 4] = values
        body[kern.B_ARB : kern.B_ARB + 2] = arb[0], arb[2]
        if aero is not None:
            body[kern.B_AERO_CP : kern.B_AERO_CP + 3] = aero.centre_of_pressure_m
            body[kern.B_AERO_COEF] = 0.5 * aero.air_density_kg_m3 * aero.drag_area_m2
            body[kern.B_AERO_DOWN] = 0.5 * aero.air_density_kg_m3 * aero.downforce_area_m2
        body[kern.B_R0 : kern.B_R0 + 4] = self.R0
        body[kern.B_BRAKE_EPS : kern.B_BRAKE_EPS + 4] = d.wheels.brake_spin_eps_rad_s
        body[kern.B_GRAVITY_Z] = -GRAVITY_M_S2
        self.body = body
        self.load_terms = kern.ALL_LOADS  # bit set of the loads force_stage includes (tests switch them)
        self._inertia = np.concatenate([self.knuckle_inertia, self._Ks])
        self._splines = stack_corner_splines(self.corners)
        # work arrays of the kernels
        self._mats, self._vecs = np.zeros((kern.MATS, 3, 3)), np.zeros((kern.VECS, 3))
        self._ch, self._jac = np.zeros((4, 7, 6)), np.zeros((2, 4, 3, 8))
        self._M = np.zeros((14, 14))
        self._inputs = np.zeros(kern.INPUT_SIZE)
        self._tire_out = np.zeros((len(TireOutput._fields), 4))
        self._geo = np.zeros((4, GEOMETRY_WIDTH))
        self._road_height, self._road_normal = np.zeros(4), np.zeros((4, 3))
        self._xi0 = np.zeros((2, 4))
        self._no_tangent = np.zeros((14, 14))
        self._position_key = None
        self.force_correction = np.zeros(14)  # generalised forces added by an observer (errorEKF-FE), N and N m
        self.steering_wheel_angle_rad = 0.0
        self.set_inputs(0.0, np.zeros(4), np.zeros(4))
        self.mu = d.wheels.mu
        self._t0 = 0.0
        self.model = MinimalModel("reduced_vehicle", ["x", "y", "z", "roll", "pitch", "yaw"] + [f"s_{w}" for w in WHEELS] + [f"a_{w}" for w in WHEELS], self.mass_matrix, [_Loads(self)])
        self.solver_options = dict(dt=dt_s, tol=tol, max_iter=max_iter, linear_solver=linear_solver)
        self.solver: ALI3P | None = None
        # on a flat road and with the default (LAPACK) solve, step with the compiled Newton loop (False: always the
        # generic ALI3P step); a linear-solver backend always gets the generic step, which calls it
        self.compiled_step = True

    # ----- mass distribution from the detailed model ------------------------------------------------
    def _lump_masses(self) -> None:
        """Sprung body and four unsprung point bodies from the detailed model's bodies at its static pose."""
        d = self.detailed
        q = d.q_static
        p0, R = d.chassis_frame(q)
        centres = np.array([R.T @ (q[d.model.index(f"C_{w}.x") : d.model.index(f"C_{w}.x") + 3] - p0) for w in WHEELS])
        sprung_m, sprung_moment, points = 0.0, np.zeros(3), []
        unsprung = np.zeros(4)
        self.knuckle_inertia = np.zeros((4, 3, 3))
        for name, body in d.model.bodies.items():
            g = body_point(body, body.com)
            com = R.T @ (g.B @ q + g.c - p0)
            corner = next((i for i, w in enumerate(WHEELS) if name.endswith(f"_{w}")), None)
            kind = name.rsplit("_", 1)[0] if corner is not None else name
            if corner is not None and kind == "knuckle":
                unsprung[corner] += body.mass
                self.knuckle_inertia[corner] += np.asarray(body.inertia, float) if np.ndim(body.inertia) == 2 else np.diag(body.inertia)
            elif corner is not None and kind in UNSPRUNG_BODIES:
                unsprung[corner] += 0.5 * body.mass
                sprung_m += 0.5 * body.mass
                sprung_moment += 0.5 * body.mass * com
                points.append((0.5 * body.mass, com))
            else:
                sprung_m += body.mass
                sprung_moment += body.mass * com
                if name != "chassis":
                    points.append((body.mass, com))
        self.sprung_mass = sprung_m
        self.sprung_com = sprung_moment / sprung_m
        c = self.sprung_com
        ch = self.desc.chassis
        d_ch = np.asarray(ch.com_m, float) - c
        inertia = np.asarray(ch.inertia_kg_m2, float) + ch.mass_kg * (d_ch @ d_ch * np.eye(3) - np.outer(d_ch, d_ch))
        for m, p in points:
            r = p - c
            inertia += m * (r @ r * np.eye(3) - np.outer(r, r))
        self.sprung_inertia = inertia
        self.unsprung_mass = unsprung
        self.static_centres = centres
        self._Ks = np.array([knuckle_rotation(k.evaluate(0.0).angles_rad) for k in self.corners])

    # ----- evaluation (compiled kernels, see reduced_kernels) ----------------------------------------
    def _position(self, q: np.ndarray) -> None:
        """Kinematics, mass matrix and road below the wheel centres at q (memoised on the last q and rack)."""
        key = (q.tobytes(), self._inputs[kern.IN_RACK])
        if key == self._position_key:
            return
        kern.position_stage(q, self._inputs[kern.IN_RACK], *self._splines, self.body, self._inertia, self._mats, self._vecs, self._ch, self._jac, self._M)
        surface = self.road.contact(self._vecs[kern.V_C : kern.V_C + 4, :2])
        self._road_height[:] = surface.height_m
        self._road_normal[:] = surface.normal
        self._position_key = key

    def set_total_mass(self, mass_kg: float) -> None:
        """Change the vehicle mass by changing the sprung mass (centre of mass kept, inertia scaled with it)."""
        sprung = self.sprung_mass + (float(mass_kg) - self.total_mass_kg)
        if not sprung > 0.0:
            raise ValueError(f"{float(mass_kg):g} kg is not more than the vehicle file's unsprung masses "
                             f"({self.unsprung_mass.sum():.0f} kg; the car weighs {self.total_mass_kg:.0f} kg)")
        body = self.body
        body[kern.B_SPRUNG_I : kern.B_SPRUNG_I + 9] *= sprung / body[kern.B_SPRUNG_M]
        body[kern.B_SPRUNG_M] = sprung
        self.sprung_mass, self.total_mass_kg = sprung, float(mass_kg)
        self._position_key = None

    def set_tire_scales(self, cornering_front: float, cornering_rear: float, longitudinal: float) -> None:
        """Scale the description's cornering stiffness per axle and the longitudinal slip stiffness (factors > 0)."""
        scales = np.array([cornering_front, cornering_rear, longitudinal], dtype=float)
        if not np.all(scales > 0.0) or not np.all(np.isfinite(scales)):
            raise ValueError(f"tire stiffness scales must be finite and > 0, got {scales}")
        self.tire_scales = scales
        kern.scaled_tire_rows(self.tire.rows, scales[0], scales[1], scales[2], self.tire_rows)

    @property
    def parameters(self) -> np.ndarray:
        """The model's parameter set in the layout of :func:`.reduced_kernels.force_residuals`: mass (kg), friction,
        cornering stiffness scales front and rear, longitudinal slip stiffness scale."""
        return np.array([self.total_mass_kg, float(np.mean(self.mu)), *self.tire_scales])

    def apply_parameters(self, theta: np.ndarray, carry_tire_forces: bool = False) -> None:
        """Set a parameter set in the layout of :attr:`parameters` (mass kg, friction, three tire stiffness scales).
        ``carry_tire_forces``: the tires take the new parameters' forces at once (the carcass deflections move by the
        change of the steady-state force over their stiffness, as an observer's correction means "the tires have been
        carrying this all along"); otherwise the forces relax to them over the tires' time constant."""
        old_rows = self.tire_rows.copy()
        old_mu = self.mu
        if theta[0] != self.total_mass_kg:
            self.set_total_mass(theta[0])
        self.mu = theta[1]
        self.set_tire_scales(theta[2], theta[3], theta[4])
        if carry_tire_forces and self.solver is not None:
            s = self.solver
            self._position(s.q)
            inputs = self._inputs.copy()
            sets = np.stack([old_rows, self.tire_rows])
            inputs_old = inputs.copy()
            inputs_old[kern.IN_MU : kern.IN_MU + 4] = old_mu
            before = kern.steady_tire_forces(sets[:1], s.q, s.qd, inputs[kern.IN_RACK], *self._splines, self.body, self._inertia, inputs_old, self._xi0,
                                             self._road_height, self._road_normal, self.load_terms)[0]
            after = kern.steady_tire_forces(sets[1:], s.q, s.qd, inputs[kern.IN_RACK], *self._splines, self.body, self._inertia, inputs, self._xi0,
                                            self._road_height, self._road_normal, self.load_terms)[0]
            self._xi0[0] += (after[0] - before[0]) / self.tire_rows[:, 6]
            self._xi0[1] += (after[1] - before[1]) / self.tire_rows[:, 7]

    def force_residuals(self, thetas: np.ndarray, rows, steady_tires: bool = False) -> np.ndarray:
        """(M(z; theta) z_ddot - Q(z, z_dot; theta))[rows] at the solver's state for each parameter set theta of ``thetas``
        (k, 5) in the layout of :attr:`parameters` (k, 2: mass and friction, the tire scales the model's), without the force
        correction (N, N m; (k, len(rows))).  ``steady_tires``: the tires' steady-state forces (the deflections relaxed)
        instead of those at the end of the current step.  The model keeps its own parameters and records
        (:func:`.reduced_kernels.force_residuals`)."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        if thetas.shape[1] == 2:
            thetas = np.column_stack([thetas, np.broadcast_to(self.tire_scales, (len(thetas), 3))])
        sprung = self.sprung_mass + (thetas[:, 0] - self.total_mass_kg)
        if not np.all(sprung > 0.0) or not np.all(thetas[:, 1:] > 0.0):
            raise ValueError(f"vehicle parameters {thetas.tolist()} leave no sprung mass, no friction or no tire stiffness")
        s = self.solver
        self._position(s.q)  # the road below the wheel centres
        inputs = self._inputs.copy()
        inputs[kern.IN_TIRE_DT] = 1.0 if steady_tires else max(s.t - self._t0, 1e-9)  # as accumulate
        return kern.force_residuals(thetas, np.asarray(rows, dtype=np.intp), self.total_mass_kg, s.q, s.qd, s.qdd, inputs[kern.IN_RACK], *self._splines,
                                    self.body, self._inertia, inputs, self._xi0, self._road_height, self._road_normal, self.tire.rows, self.load_terms)

    def residual_derivatives(self, position_columns, velocity_columns, tire_dt_s: float, step: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
        """Central differences of the force residual r = M(q) qdd - Q(q, qd) at the solver's state: dr/dq on
        ``position_columns`` and dr/dqd on ``velocity_columns`` ((14, k) each), with the tires answering over a step of
        ``tire_dt_s`` from their current deflections and the force correction left out (it does not depend on the state).
        These are the stiffness and damping the integrator's tangent leaves out or approximates (the turning of the tire
        forces with yaw, dM/dq qdd, the angular-velocity terms), for an observer's error transition.  Nothing of the model's
        is changed."""
        s = self.solver
        self._position(s.q)
        inputs = self._inputs.copy()
        inputs[kern.IN_TIRE_DT] = tire_dt_s
        dq, dqd = np.zeros((14, len(position_columns))), np.zeros((14, len(velocity_columns)))
        kern.residual_derivatives(self.parameters[None], self.total_mass_kg, s.q, s.qd, s.qdd, inputs[kern.IN_RACK], *self._splines, self.body,
                                  self._inertia, inputs, self._xi0, self._road_height, self._road_normal, self.tire.rows, self.load_terms,
                                  np.asarray(position_columns, dtype=np.intp), np.asarray(velocity_columns, dtype=np.intp), step, dq, dqd)
        return dq, dqd

    @property
    def road_slope(self) -> np.ndarray:
        """Gravity's east and north components (m/s^2; (2,) copy): the slope of the road under the car, which the model
        drives as level (a car on a rising road feels -g sin(grade) along it)."""
        return self.body[kern.B_GRAVITY_X : kern.B_GRAVITY_Y + 1].copy()

    def set_road_slope(self, east_m_s2: float, north_m_s2: float) -> None:
        """Set gravity's east and north components (m/s^2; :attr:`road_slope`)."""
        self.body[kern.B_GRAVITY_X], self.body[kern.B_GRAVITY_Y] = east_m_s2, north_m_s2

    def slope_forces(self) -> np.ndarray:
        """dQ/dg (14, 2): the generalised force of gravity's east and north components per m/s^2 at the solver's
        position, on every body at its centre of mass (N, N m per m/s^2; Q is linear in g)."""
        s = self.solver
        self._position(s.q)
        body = self.body.copy()
        out = np.zeros((14, 2))
        for k, offset in enumerate((kern.B_GRAVITY_X, kern.B_GRAVITY_Y)):
            body[[kern.B_GRAVITY_X, kern.B_GRAVITY_Y, kern.B_GRAVITY_Z]] = 0.0
            body[offset] = 1.0
            Q = np.zeros(14)
            kern.force_stage(s.q, s.qd, self._inputs, self._xi0, self._road_height, self._road_normal, body, self.tire_rows, self._mats, self._vecs,
                             self._ch, self._jac, kern.GRAVITY, False, Q, self._no_tangent, self._no_tangent, self._tire_out.copy(), self._geo.copy())
            out[:, k] = Q
        return out

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) (14, 14), kg and kg m^2."""
        self._position(q)
        return self._M.copy()

    def accumulate(self, q, qd, t, Q, K, C):
        """Add the generalised forces at (q, qd) and time t (N, N m; the force correction included) to Q (14,), and their
        stiffness and damping to K and C (14, 14) unless None (the force elements' protocol, :mod:`state_observer.mbs.forces`);
        the tire records (:attr:`last`, :attr:`contact`) follow."""
        self._position(q)
        self._inputs[kern.IN_TIRE_DT] = max(t - self._t0, 1e-9)  # deflections keep their state at the step start
        tangent = K is not None
        kern.force_stage(q, qd, self._inputs, self._xi0, self._road_height, self._road_normal, self.body, self.tire_rows, self._mats, self._vecs,
                         self._ch, self._jac, self.load_terms, tangent, Q, K if tangent else self._no_tangent, C if tangent else self._no_tangent,
                         self._tire_out, self._geo)
        Q += self.force_correction

    @property
    def last(self) -> TireOutput:
        """Tire output of the last evaluation (copies)."""
        return TireOutput(*self._tire_out.copy())

    def downforce_n(self, speed_m_s: float) -> float:
        """Aerodynamic downforce at a forward speed (N): 1/2 rho CzA v^2 (0 without ``downforce_area_m2``)."""
        return float(self.body[kern.B_AERO_DOWN]) * speed_m_s * speed_m_s

    @property
    def tire_forces_n(self) -> np.ndarray:
        """The four tires' forces of the last evaluation (4, 3): fx, fy, fz in each tire's frame (N); a new array."""
        return self._tire_out[:3].T.copy()

    @property
    def tire_output_array(self) -> np.ndarray:
        """The last evaluation's tire output rows (len(TireOutput._fields), 4), fields in :class:`TireOutput`'s order: the
        model's working array (read it, do not write; for compiled readers)."""
        return self._tire_out

    @property
    def contact_array(self) -> np.ndarray:
        """The last evaluation's contact rows (4, GEOMETRY_WIDTH) of :class:`Contact`: the model's working array (read it,
        do not write; for compiled readers)."""
        return self._geo

    @property
    def contact(self) -> Contact:
        """The wheels' contact geometry of the last evaluation (:class:`.wheel_loads.Contact`: named views of the
        model's working array; read them, do not write)."""
        return Contact.from_array(self._geo)

    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        d = self.detailed
        p0, Rs = d.chassis_frame(d.q_static)
        roll = math.atan2(Rs[2, 1], Rs[2, 2])
        pitch = -math.asin(Rs[2, 0])
        q = np.zeros(14)
        q[:3] = (position_m[0], position_m[1], p0[2])
        q[3:6] = (roll, pitch, yaw_rad)
        qd = np.zeros(14)
        qd[0:2] = speed_m_s * math.cos(yaw_rad), speed_m_s * math.sin(yaw_rad)
        qd[10:14] = speed_m_s / self.rD
        self._xi0[:] = 0.0
        self._t0 = t
        self._position_key = None
        self.force_correction[:] = 0.0
        self.solver = _Solver(self, self.model, q, qd, t=t, alpha=1.0, **self.solver_options)

    def set_inputs(self, steering_wheel_angle_rad: float, drive_torque_n_m, brake_torque_n_m, steering_rate_rad_s: float = 0.0) -> None:
        self.steering_wheel_angle_rad = float(steering_wheel_angle_rad)
        inputs = self._inputs
        inputs[kern.IN_RACK] = self.desc.steering.rack_travel_per_steering_wheel_rad_m * steering_wheel_angle_rad
        inputs[kern.IN_DRIVE : kern.IN_DRIVE + 4] = drive_torque_n_m
        inputs[kern.IN_BRAKE : kern.IN_BRAKE + 4] = brake_torque_n_m

    def tire_memory(self) -> tuple[np.ndarray, float]:
        """The tires' transient state (their deflections at the last step's start, (2, 4) m, and that time, s), to put back
        with :meth:`restore_tire_memory` after trial steps (the unscented filter's sigma points)."""
        return self._xi0.copy(), self._t0

    def restore_tire_memory(self, memory: tuple[np.ndarray, float]) -> None:
        self._xi0[:] = memory[0]
        self._t0 = memory[1]

    @property
    def mu(self) -> np.ndarray:
        """Tire-road friction coefficient per wheel (set a scalar or four values)."""
        return self._inputs[kern.IN_MU : kern.IN_MU + 4].copy()

    @mu.setter
    def mu(self, value) -> None:
        value = np.broadcast_to(np.asarray(value, dtype=float), (4,))
        if not np.all(value > 0.0):
            raise ValueError(f"friction coefficient must be > 0, got {value}")
        self._inputs[kern.IN_MU : kern.IN_MU + 4] = value

    @property
    def rack_m(self) -> float:
        return float(self._inputs[kern.IN_RACK])

    @property
    def drive_torque_n_m(self) -> np.ndarray:
        return self._inputs[kern.IN_DRIVE : kern.IN_DRIVE + 4].copy()

    @property
    def brake_torque_n_m(self) -> np.ndarray:
        return self._inputs[kern.IN_BRAKE : kern.IN_BRAKE + 4].copy()

    def steering_ratio(self) -> float:
        return self.detailed.steering_ratio()

    def step(self):
        if self.solver is None:
            raise RuntimeError("call start() before step()")
        return self.solver.step()

    def truth(self) -> VehicleState:
        s = self.solver
        q, qd, qdd = s.q, s.qd, s.qdd
        R = kern.euler_rotation(q[3], q[4], q[5])
        Eb, dEb_dr, dEb_dp = kern.body_rate(q[3], q[4])
        w_body = Eb @ qd[3:6]
        a_body = Eb @ qdd[3:6] + (dEb_dr * qd[3] + dEb_dp * qd[4]) @ qd[3:6]
        out = self.last
        brake = self.brake_torque_n_m * np.tanh(qd[10:14] / self.body[kern.B_BRAKE_EPS : kern.B_BRAKE_EPS + 4])
        mu = self.mu
        return VehicleState(
            t_s=s.t, position_enu_m=q[:3].copy(), orientation_wxyz=quaternion_from_matrix(R), velocity_enu_m_s=qd[:3].copy(),
            acceleration_enu_m_s2=qdd[:3].copy(), angular_velocity_body_rad_s=w_body, angular_acceleration_body_rad_s2=a_body,
            wheel_angle_rad=q[10:14].copy(), wheel_rate_rad_s=qd[10:14].copy(), wheel_torque_n_m=self.drive_torque_n_m - brake,
            steering_wheel_angle_rad=self.steering_wheel_angle_rad, suspension_travel_m=q[6:10].copy(),
            tire_force_n=np.column_stack([out.fx_n, out.fy_n, out.fz_n]), slip_ratio=out.slip_ratio.copy(), slip_angle_rad=out.slip_angle_rad.copy(),
            contact_point_base_m=(self._geo[:, 16:19] - q[:3]) @ R, mass_kg=self.total_mass_kg, friction_coefficient=float(mu.mean()),
        )


class _Loads:
    """The reduced vehicle's force element (gravity, velocity terms, springs, bars, drag, tires), with the
    integrator's stateful-element protocol for the tire deflections."""

    stiff = True
    state_dependent = True

    def __init__(self, vehicle: ReducedVehicle):
        self.vehicle = vehicle

    def accumulate(self, q, qd, t, Q, K, C):
        self.vehicle.accumulate(q, qd, t, Q, K, C)

    def start(self, q, qd, t):
        self.vehicle._xi0[:] = 0.0
        self.vehicle._t0 = t

    def commit(self, q, qd, t):
        """Keep the deflections of the last evaluation (the converged iterate, within tol of q)."""
        v = self.vehicle
        v._xi0[:] = v._tire_out[6:8]
        v._t0 = t


class _Solver(ALI3P):
    """ALI3-P whose step on a flat road is one compiled call (:func:`.reduced_kernels.trapezoidal_step`,
    the same iteration); other roads are queried in Python between the kernels by the generic step."""

    def __init__(self, vehicle: ReducedVehicle, *args, **kwargs):
        self.vehicle = vehicle
        super().__init__(*args, **kwargs)
        self._W = np.zeros((self.model.n, self.model.n))
        self._piv = np.zeros(self.model.n, dtype=np.intp)
        self._plane, self._plane_of = None, None
        self._default_solve = kwargs.get("linear_solver") is None  # a backend (accel) must be called: generic step

    def step(self) -> StepResult:
        v = self.vehicle
        road = v.road
        if not (v.compiled_step and type(road) is FlatRoad and self._default_solve):
            return super().step()
        t1 = self.t + self.dt
        v._inputs[kern.IN_TIRE_DT] = max(t1 - v._t0, 1e-9)  # as ReducedVehicle.accumulate
        if road is not self._plane_of:
            self._plane = np.concatenate([[road.height_m, road.grade_x, road.grade_y], road.normal])
            self._plane_of = road
        v._position_key = None  # the work arrays are left at the last iterate
        q, qd, qdd, it, converged, norm_dq, size = kern.trapezoidal_step(
            self.q, self.qd, self.qdd, self.dt, self.tol, self.max_iter, self.accept_unconverged, v._inputs[kern.IN_RACK], *v._splines, v.body,
            v._inertia, v._mats, v._vecs, v._ch, v._jac, v._M, self._plane, v._inputs, v._xi0, v._road_height, v._road_normal, v.tire_rows,
            v.load_terms, v.force_correction, self.Q, self.K, self.C, v._tire_out, v._geo, self._W, self._piv)
        if not converged and not (self.accept_unconverged and math.isfinite(norm_dq)):
            why = "non-finite iterate (singular tangent matrix?)" if not math.isfinite(norm_dq) else f"|dq| = {norm_dq:.3g} > tol {self.tol:.3g}"
            self.last = StepResult(False, it, f"Newton-Raphson failed at t = {t1:.6g} s after {it} iterations: {why}", math.nan, math.nan)
            return self.last
        if not math.isfinite(size):
            self.last = StepResult(False, it, f"projection produced non-finite values at t = {t1:.6g} s", math.nan, math.nan)
            return self.last
        self.t, self.q, self.qd, self.qdd = t1, q, qd, qdd
        for element in self._stateful:
            element.commit(q, qd, t1)
        self.n_steps += 1
        self.n_iterations += it
        msg = "converged" if converged else f"iteration limit {self.max_iter} reached (|dq| = {norm_dq:.3g})"
        self.last = StepResult(True, it, msg, 0.0, 0.0)
        return self.last

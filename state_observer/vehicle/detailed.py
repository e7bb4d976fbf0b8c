"""The detailed multibody vehicle model (the virtual test vehicle's truth), built on :mod:`state_observer.mbs`.

Natural coordinates (Sanjurjo 2016 §5.2): the chassis is the base_link origin p0 plus its unit axes
ex, ey, ez; chassis hardpoints are chassis-fixed points (no extra coordinates).  Each corner:

* double wishbone: lower and upper arms hinged on two chassis pivots each (their rigid-body rows are
  the revolute joints), ball joints L and U shared with the knuckle; a tie rod from the rack end (or a
  chassis point when not steered) to the knuckle's steering arm T; the spring-damper between the
  chassis and the lower arm or the knuckle;
* MacPherson: a lower arm with ball joint L; the strut tube is part of the knuckle and its axis passes
  through the chassis top mount M (two rows); a toe link from the chassis to the knuckle; the
  spring-damper acts along the strut.

Knuckles carry the wheel centre C and the axle w (unit, to the vehicle's left) and the wheel's
non-spinning mass and inertia; the spin angle th (relative to the knuckle) carries the spin inertia
(see :mod:`.wheel_loads`).  The rack is a slender bar sliding along the chassis y axis, driven by the
steering input through a rheonomic constraint (the steering is not a degree of freedom).
Degrees of freedom: 6 chassis + 4 suspension + 4 wheel spins = 14.
"""
from __future__ import annotations

import math

import numpy as np

from scipy.spatial.transform import Rotation

from ..mbs import (
    ALI3P,
    BodyPoint,
    BodyVector,
    Dot,
    DotDriver,
    Input,
    ModelBuilder,
    PointDiff,
    SpringDamper,
    SpringDampers,
    generalized_forces,
    mass_properties,
    point_velocity_field,
    solve_position,
    transform_coordinates,
    velocity_transform,
)
from .state import VehicleState
from ..errors import ModelError
from ..mbs.forces import SpringDamperSet
from .chassis_loads import AeroDrag, AntiRollBar
from ..conventions import GRAVITY_M_S2, WHEELS, quaternion_from_matrix
from .road import FlatRoad
from .tire import TireParameters
from .wheel_loads import WheelLoads, WheelSpec, cross_last_axis


def _point_mass_inertia(points: list[np.ndarray], mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Centre and inertia tensor (about it) of ``mass`` spread equally over ``points``."""
    pts = np.asarray(points, dtype=float)
    com = pts.mean(axis=0)
    d = pts - com
    inertia = (mass / len(pts)) * (np.sum(d * d) * np.eye(3) - d.T @ d)
    return com, inertia


def _link(b: ModelBuilder, name: str, inner, inner_m: np.ndarray, outer: str, outer_m: np.ndarray, mass_kg: float) -> None:
    """A uniform slender link from a chassis point to a knuckle point (its rigid row is the distance)."""
    u = outer_m - inner_m
    length = float(np.linalg.norm(u))
    u /= length
    inertia = mass_kg * length**2 / 12.0 * (np.eye(3) - np.outer(u, u))
    b.body(name, mass_kg, 0.5 * (inner_m + outer_m), inertia, {inner: inner_m, outer: outer_m})


def _project_on_plane(x, a, b, c, where: str, tol_m: float = 0.03) -> np.ndarray:
    """Project x on the plane through a, b, c (an arm is modelled as a plate); refuse far points."""
    nrm = np.cross(b - a, c - a)
    nrm /= np.linalg.norm(nrm)
    off = float((x - a) @ nrm)
    if abs(off) > tol_m:
        raise ModelError(f"{where}: point {np.round(x, 4).tolist()} is {off * 1000:.0f} mm off the arm's plane (max {tol_m * 1000:.0f} mm)")
    return x - off * nrm


class DetailedVehicle:
    """The detailed vehicle: model, integrator, inputs and truth output.

    ``set_inputs(steering_wheel_angle_rad, drive_torque_n_m, brake_torque_n_m)`` before each
    ``step()``; ``mu`` is the road friction coefficient (may change at any time).
    """

    def __init__(self, desc, road=None, mu: float | None = None, dt_s: float = 0.004, alpha: float = 1e11, tol: float = 3e-10, max_iter: int = 20,
                 linear_solver=None):
        """``linear_solver``: backend of the Newton iteration's linear solve (:func:`state_observer.accel.make_backend`);
        None for the integrator's default."""
        self.desc = desc
        self.road = road if road is not None else FlatRoad()
        self.dt_s = dt_s
        self.rack_input = Input(0.0)
        self.springs: list = []  # one SpringDamper definition per corner, fl fr rl rr
        b = ModelBuilder(dim=3, gravity=(0.0, 0.0, -GRAVITY_M_S2), name=f"{desc.name}_detailed")
        self._chassis(b)
        self._rack(b)
        specs = [self._corner(b, i, corner) for i, corner in enumerate(desc.corners)]
        b.add_force(SpringDampers(tuple(self.springs)))
        self._axle_loads(b)
        tire = TireParameters.stack([tire_parameters(c, desc.static_wheel_load_n(c)) for c in desc.corners])
        self.wheels = WheelLoads(specs, tire, self.road, "chassis", mu=desc.corners[0].tire.friction_coefficient if mu is None else mu)
        # brake torque T_b tanh(Omega/eps): with eps below T_b dt / I_spin the locking wheel's Newton
        # iterations jump between the saturated branches (Newton on tanh); this keeps its slope near the
        # inertia term's while a locked wheel still turns at only ~1 m/s of rim speed
        spin_inertia = np.array([c.wheel.spin_inertia_kg_m2 for c in desc.corners])
        max_brake = np.array([c.max_brake_torque_n_m for c in desc.corners])
        self.wheels.brake_spin_eps_rad_s = np.maximum(0.5, max_brake * dt_s / spin_inertia)
        b.add_force(self.wheels)
        self.model = b.build()
        self.spring_set = next(f for f in self.model.forces if isinstance(f, SpringDamperSet))
        self.independent = self._independent_coordinates()
        self.solver_options = dict(dt=dt_s, alpha=alpha, tol=tol, max_iter=max_iter, linear_solver=linear_solver)
        self.q_design = self.model.q_guess.copy()
        self._set_spring_preloads()
        self.solver: ALI3P | None = None

    # ----- model building --------------------------------------------------------------------
    def _chassis(self, b: ModelBuilder) -> None:
        ch = self.desc.chassis
        b.point("p0", (0.0, 0.0, 0.0))
        for name, axis in (("ex", (1.0, 0.0, 0.0)), ("ey", (0.0, 1.0, 0.0)), ("ez", (0.0, 0.0, 1.0))):
            b.vector(name, axis)
        b.body("chassis", ch.mass_kg, ch.com_m, ch.inertia_kg_m2, {"p0": (0.0, 0.0, 0.0)}, {"ex": (1, 0, 0), "ey": (0, 1, 0), "ez": (0, 0, 1)})

    def _rack(self, b: ModelBuilder) -> None:
        steered = [c for c in self.desc.corners if c.steered]
        self.has_rack = bool(steered)
        if not steered:
            return
        left = next(c for c in steered if c.name.endswith("l"))
        right = next(c for c in steered if c.name.endswith("r"))
        rl, rr = np.asarray(left.tie_rod.inner_m, float), np.asarray(right.tie_rod.inner_m, float)
        b.point("rack_l", rl)
        b.point("rack_r", rr)
        b.bar("rack", "rack_l", "rack_r", mass=self.desc.steering.rack_mass_kg)
        for end, x in (("rack_l", rl), ("rack_r", rr)):  # the rack ends stay on the chassis rack axis
            for axis in ("ex", "ez"):
                b.add_constraint(Dot(PointDiff(BodyPoint("chassis", tuple(x)), end), axis, 0.0))
        b.add_constraint(DotDriver(PointDiff(BodyPoint("chassis", tuple(rl)), "rack_l"), "ey", self.rack_input, name="steering rack travel"))

    def _corner(self, b: ModelBuilder, i: int, corner) -> WheelSpec:
        s = corner
        name = corner.name
        where = f"vehicle '{self.desc.name}', corner {name}"
        CH = lambda x: BodyPoint("chassis", tuple(np.asarray(x, float)))  # noqa: E731
        C = np.asarray(corner.wheel_centre_m, float)
        axle = np.asarray(corner.spin_axis, float)
        axle = axle / np.linalg.norm(axle) * (1.0 if axle[1] > 0 else -1.0)  # to the vehicle's left
        L = np.asarray(s.lower_arm.ball_joint_m, float)
        pc, pw, pl, pk = f"C_{name}", f"w_{name}", f"L_{name}", f"knuckle_{name}"
        b.point(pc, C)
        b.vector(pw, axle)
        b.point(pl, L)
        wheel = corner.wheel
        # knuckle + non-spinning wheel: mass at C (plus knuckle mass), inertia about C
        m_k = corner.knuckle_mass_kg + wheel.mass_kg
        I_wheel = wheel.transverse_inertia_kg_m2 * np.eye(3) + (wheel.spin_inertia_kg_m2 - wheel.transverse_inertia_kg_m2) * np.outer(axle, axle)
        I_k = np.asarray(corner.knuckle_inertia_kg_m2, float) + I_wheel
        knuckle_points = {pl: L}
        if s.suspension_type == "double_wishbone":
            U, T = np.asarray(s.upper_arm.ball_joint_m, float), np.asarray(s.tie_rod.outer_m, float)
            b.point(f"U_{name}", U)
            b.point(f"T_{name}", T)
            knuckle_points.update({f"U_{name}": U, f"T_{name}": T, pc: C})
            b.body(pk, m_k, C, I_k, knuckle_points, {pw: axle})
            for arm, joint in (("lower_arm", pl), ("upper_arm", f"U_{name}")):
                a = getattr(s, arm)
                fp, rp, bj = (np.asarray(x, float) for x in (a.front_pivot_m, a.rear_pivot_m, a.ball_joint_m))
                com, inertia = _point_mass_inertia([fp, rp, bj], a.mass_kg)
                b.body(f"{arm}_{name}", a.mass_kg, com, inertia, {CH(fp): fp, CH(rp): rp, joint: bj})
            inner = np.asarray(s.tie_rod.inner_m, float)
            if corner.steered:
                b.bar(f"tie_rod_{name}", "rack_l" if name.endswith("l") else "rack_r", f"T_{name}", mass=s.tie_rod.mass_kg)
            else:
                _link(b, f"toe_link_{name}", CH(inner), inner, f"T_{name}", T, s.tie_rod.mass_kg)
            sd = s.spring_damper
            top, seat = np.asarray(sd.chassis_m, float), np.asarray(sd.arm_m, float)
            on = getattr(sd, "on", "lower_arm")
            if on in ("lower_arm", "upper_arm"):
                arm = getattr(s, on)
                seat = _project_on_plane(seat, *(np.asarray(x, float) for x in (arm.front_pivot_m, arm.rear_pivot_m, arm.ball_joint_m)), where=f"{where}: spring_damper.arm_m")
                lower = BodyPoint(f"{on}_{name}", tuple(seat))
            else:
                lower = BodyPoint(pk, tuple(seat))
            spring = SpringDamper(CH(top), lower, sd.stiffness_n_per_m, sd.damping_n_s_per_m, float(np.linalg.norm(top - seat)))
        elif s.suspension_type == "macpherson":
            M = np.asarray(s.strut.top_mount_m, float)
            S = np.asarray(s.strut.knuckle_m, float)
            T = np.asarray(s.tie_rod.outer_m, float)
            b.point(f"S_{name}", S)
            b.point(f"T_{name}", T)
            knuckle_points.update({f"S_{name}": S, f"T_{name}": T, pc: C})
            b.body(pk, m_k + s.strut.mass_kg, C, I_k, knuckle_points, {pw: axle})
            a = s.lower_arm
            fp, rp = np.asarray(a.front_pivot_m, float), np.asarray(a.rear_pivot_m, float)
            com, inertia = _point_mass_inertia([fp, rp, L], a.mass_kg)
            b.body(f"lower_arm_{name}", a.mass_kg, com, inertia, {CH(fp): fp, CH(rp): rp, pl: L})
            d = (M - S) / np.linalg.norm(M - S)
            helper = np.eye(3)[np.argmin(np.abs(d))]
            p1 = np.cross(d, helper)
            p1 /= np.linalg.norm(p1)
            p2 = np.cross(d, p1)
            for k, p in enumerate((p1, p2)):  # the top mount stays on the strut axis
                b.add_constraint(Dot(PointDiff(f"S_{name}", CH(M)), BodyVector(pk, tuple(p)), 0.0))
            inner = np.asarray(s.tie_rod.inner_m, float)
            _link(b, f"toe_link_{name}", CH(inner), inner, f"T_{name}", T, s.tie_rod.mass_kg)
            spring = SpringDamper(CH(M), f"S_{name}", s.spring_damper.stiffness_n_per_m, s.spring_damper.damping_n_s_per_m, float(np.linalg.norm(M - S)))
        else:
            raise ModelError(f"{where}: unknown suspension type '{s.suspension_type}'")
        self.springs.append(spring)
        b.angle(f"th_{name}", 0.0, inertia=wheel.spin_inertia_kg_m2)
        return WheelSpec(name, pc, pw, f"th_{name}", pk, wheel.unloaded_radius_m, wheel.dynamic_radius_m)

    def _axle_loads(self, b: ModelBuilder) -> None:
        """Anti-roll bars (per axle, optional) and aerodynamic drag (optional)."""
        corners = self.desc.corners
        for left, right in ((0, 1), (2, 3)):
            k = corners[left].anti_roll_bar_n_per_m
            if k:
                b.add_force(AntiRollBar(f"C_{WHEELS[left]}", f"C_{WHEELS[right]}", "p0", "ez", k))
        aero = self.desc.aerodynamics
        if aero is not None:
            b.add_force(AeroDrag(BodyPoint("chassis", tuple(np.asarray(aero.centre_of_pressure_m, float))), "ex", aero.drag_area_m2, aero.air_density_kg_m3,
                                 aero.downforce_area_m2))

    def _independent_coordinates(self) -> list[str]:
        """Chassis position, yaw-like ex.y, pitch-like ex.z, roll-like ey.z; wheel-centre heights; spins."""
        return ["p0.x", "p0.y", "p0.z", "ex.y", "ex.z", "ey.z"] + [f"C_{w}.z" for w in WHEELS] + [f"th_{w}" for w in WHEELS]

    # ----- statics ---------------------------------------------------------------------------------
    def _set_spring_preloads(self) -> None:
        """Spring preloads that hold the design position under the static wheel loads (virtual work).

        With R the velocity transform for the independent coordinates, the suspension rows of
        R^T Q vanish when each spring force f satisfies f dl/dz = (R^T Q without springs)_z.
        """
        model = self.model
        q = self.q_design
        R, _ = velocity_transform(model, q, self.independent)
        loads = self.static_wheel_loads()
        n = model.n
        Q, K, Cm = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
        springs = self.spring_set
        springs.f0[:] = 0.0
        for f in model.forces:
            if f is self.wheels or f is springs:
                continue
            f.accumulate(q, np.zeros(n), 0.0, Q, K, Cm)
        # generalised force of a unit tension in each spring: -dl/dq
        _, _, direction, _ = springs.state(q, np.zeros(n))
        unit = np.zeros((len(self.springs), n))
        unit[:, springs.cols] = -np.einsum("sj,sjk->sk", direction, springs.D)
        z_rows = [self.independent.index(f"C_{w}.z") for w in WHEELS]
        for i in range(4):
            col = R[:, z_rows[i]]
            ic = model.index(f"C_{WHEELS[i]}.z")
            residual = col @ Q + loads[i] * col[ic]  # gravity of the corner + road reaction
            springs.f0[i] = -residual / (col @ unit[i])
        self.static_loads_n = loads

    def static_wheel_loads(self) -> np.ndarray:
        """Wheel loads (N) from the mass distribution: axle split by the centre of mass, equal sides."""
        mass, com = mass_properties(self.model, self.q_design)
        xf = np.mean([self.desc.corners[i].wheel_centre_m[0] for i in (0, 1)])
        xr = np.mean([self.desc.corners[i].wheel_centre_m[0] for i in (2, 3)])
        front = mass * GRAVITY_M_S2 * (com[0] - xr) / (xf - xr)
        rear = mass * GRAVITY_M_S2 - front
        self.total_mass_kg, self.com_m = float(mass), com
        return np.array([front / 2, front / 2, rear / 2, rear / 2])

    def solve_statics(self, tol_n: float = 1e-6, max_iter: int = 30) -> np.ndarray:
        """Static equilibrium at rest on the road: Newton on R^T Q = 0 for height, pitch, roll and the
        four suspension travels (position problem for every trial, finite-difference Jacobian)."""
        model = self.model
        names = ["p0.z", "ex.z", "ey.z"] + [f"C_{w}.z" for w in WHEELS]
        rows = [self.independent.index(k) for k in names]
        idx = model.indices(names)
        n = model.n
        Q, K, C = np.zeros(n), np.zeros((n, n)), np.zeros((n, n))
        zero = np.zeros(n)

        def residual(q):
            self.wheels.start(q, zero, 0.0)
            generalized_forces(model, q, zero, 0.0, Q, K, C)
            R, _ = velocity_transform(model, q, self.independent)
            return (R.T @ Q)[rows]

        q = solve_position(model, self.q_design, self.independent)
        for _ in range(max_iter):
            r = residual(q)
            if np.abs(r).max() < tol_n:
                break
            J = np.zeros((len(names), len(names)))
            for j, i in enumerate(idx):
                qp = q.copy()
                qp[i] += 1e-6
                J[:, j] = (residual(solve_position(model, qp, self.independent)) - r) / 1e-6
            dz = np.linalg.solve(J, -r)
            qn = q.copy()
            qn[idx] += dz
            q = solve_position(model, qn, self.independent)
        else:
            raise ModelError(f"vehicle '{self.desc.name}': no static equilibrium found (residual {np.abs(r).max():.3g} N)")
        self.q_static = q
        return q

    def road_wheel_angles(self, q: np.ndarray) -> np.ndarray:
        """Steer angle (rad, + left) of each wheel's heading about the chassis z axis at q."""
        m = self.model
        _, R = self.chassis_frame(q)
        out = []
        for w in WHEELS:
            i = m.index(f"w_{w}.x")
            axle = R.T @ q[i : i + 3]
            out.append(math.atan2(-axle[0], axle[1]))
        return np.array(out)

    def steering_ratio(self, q: np.ndarray | None = None) -> float:
        """Steering-wheel angle per mean steered road-wheel angle (rad/rad) at ``q``, by default the static
        position (``q_design`` gives it without solving the statics)."""
        if not self.has_rack:
            return float("inf")
        if q is None:
            q = self.q_static if hasattr(self, "q_static") else self.solve_statics()
        k = self.desc.steering.rack_travel_per_steering_wheel_rad_m
        steered = [i for i, c in enumerate(self.desc.corners) if c.steered]
        angles = []
        for sw in (-0.02, 0.02):  # steering-wheel rad
            self.rack_input.set(k * sw)
            angles.append(self.road_wheel_angles(solve_position(self.model, q, self.independent))[steered].mean())
        self.rack_input.set(0.0)
        return 0.04 / (angles[1] - angles[0])

    # ----- running ---------------------------------------------------------------------------------
    def initial_state(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
        """Static equilibrium moved to ``position_m`` (ENU x, y) heading ``yaw_rad``, driving straight at
        ``speed_m_s`` along the road with the wheels rolling freely.  The equilibrium is solved at the origin heading +x and
        lifted by the road's rise from there to ``position_m``, so on a graded plane the tires neither float nor
        sink; turned by ``yaw_rad`` it sits exactly on the road only where the road is level."""
        if not hasattr(self, "q_static"):
            self.solve_statics()
        rot = Rotation.from_euler("z", yaw_rad).as_matrix()
        road = self.road.contact(np.array([[0.0, 0.0], [position_m[0], position_m[1]]]))
        rise_m = road.height_m[1] - road.height_m[0]
        q = transform_coordinates(self.model, self.q_static, rot, np.array([position_m[0], position_m[1], rise_m]))
        along_road = np.array([rot[0, 0], rot[1, 0], road.gradient[1] @ rot[:2, 0]])  # not into it
        v = speed_m_s * along_road / np.linalg.norm(along_road)
        qd = point_velocity_field(self.model, v, np.zeros(3), np.zeros(3), q)
        for k, w in enumerate(WHEELS):
            qd[self.model.index(f"th_{w}")] = speed_m_s / self.desc.corners[k].wheel.dynamic_radius_m
        return q, qd

    def start(self, speed_m_s: float = 0.0, yaw_rad: float = 0.0, position_m=(0.0, 0.0), t: float = 0.0) -> None:
        q, qd = self.initial_state(speed_m_s, yaw_rad, position_m)
        self.solver = ALI3P(self.model, q, qd, t=t, **self.solver_options)
        self.max_position_violation = 0.0
        self.max_velocity_violation = 0.0

    def set_inputs(self, steering_wheel_angle_rad: float, drive_torque_n_m, brake_torque_n_m, steering_rate_rad_s: float = 0.0) -> None:
        """Steering-wheel angle (rad, + left), per-wheel drive torque (N m) and brake torque magnitude (N m)."""
        k = self.desc.steering.rack_travel_per_steering_wheel_rad_m
        self.steering_wheel_angle_rad = float(steering_wheel_angle_rad)
        self.rack_input.set(k * steering_wheel_angle_rad, k * steering_rate_rad_s)
        self.wheels.drive_torque_n_m = np.broadcast_to(np.asarray(drive_torque_n_m, float), (4,)).copy()
        self.wheels.brake_torque_n_m = np.broadcast_to(np.asarray(brake_torque_n_m, float), (4,)).copy()

    @property
    def mu(self):
        return self.wheels.mu

    @mu.setter
    def mu(self, value) -> None:
        self.wheels.mu = value

    def step(self):
        """One model step; also tracks the largest constraint violations seen since start()."""
        if self.solver is None:
            raise RuntimeError("call start() before step()")
        result = self.solver.step()
        if result.success:
            self.max_position_violation = max(self.max_position_violation, result.position_violation)
            self.max_velocity_violation = max(self.max_velocity_violation, result.velocity_violation)
        return result

    def chassis_frame(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """base_link origin (m) and rotation matrix [ex ey ez] (base_link -> ENU) at q."""
        m = self.model
        p0 = q[m.index("p0.x") : m.index("p0.x") + 3]
        R = np.column_stack([q[m.index(f"{a}.x") : m.index(f"{a}.x") + 3] for a in ("ex", "ey", "ez")])
        return p0, R

    def wheel_centre_heights(self, q: np.ndarray) -> np.ndarray:
        """Height of each wheel centre above the base_link origin along the chassis z axis (m)."""
        m = self.model
        p0, R = self.chassis_frame(q)
        return np.array([(q[m.index(f"C_{w}.x") : m.index(f"C_{w}.x") + 3] - p0) @ R[:, 2] for w in WHEELS])

    def truth(self) -> VehicleState:
        """The state of the vehicle after the last step (see :class:`VehicleState`)."""
        s, m = self.solver, self.model
        q, qd, qdd = s.q, s.qd, s.qdd
        p0, R = self.chassis_frame(q)
        ip = m.index("p0.x")
        axes = [m.index(f"{a}.x") for a in ("ex", "ey", "ez")]
        e = [q[i : i + 3] for i in axes]
        E = np.array(e)
        omega = 0.5 * cross_last_axis(E, np.array([qd[i : i + 3] for i in axes])).sum(axis=0)
        alpha = 0.5 * cross_last_axis(E, np.array([qdd[i : i + 3] for i in axes])).sum(axis=0)
        w, x, y, z = quaternion_from_matrix(R)
        th = np.array([m.index(f"th_{w_}") for w_ in WHEELS])
        out = self.wheels.last
        g = self.wheels.contact
        travel = self.wheel_centre_heights(q) - self.wheel_centre_heights(self.q_static)
        brake = self.wheels.brake_torque_n_m * np.tanh(qd[th] / self.wheels.brake_spin_eps_rad_s)
        mu = np.broadcast_to(np.asarray(self.wheels.mu, float), (4,))
        return VehicleState(
            t_s=s.t,
            position_enu_m=p0.copy(),
            orientation_wxyz=np.array([w, x, y, z]),
            velocity_enu_m_s=qd[ip : ip + 3].copy(),
            acceleration_enu_m_s2=qdd[ip : ip + 3].copy(),
            angular_velocity_body_rad_s=R.T @ omega,
            angular_acceleration_body_rad_s2=R.T @ alpha,
            wheel_angle_rad=q[th].copy(),
            wheel_rate_rad_s=qd[th].copy(),
            wheel_torque_n_m=self.wheels.drive_torque_n_m - brake,
            steering_wheel_angle_rad=getattr(self, "steering_wheel_angle_rad", 0.0),
            suspension_travel_m=travel,
            tire_force_n=np.column_stack([out.fx_n, out.fy_n, out.fz_n]),
            slip_ratio=out.slip_ratio.copy(),
            slip_angle_rad=out.slip_angle_rad.copy(),
            contact_point_base_m=(g["P"] - p0) @ R,
            mass_kg=self.total_mass_kg,
            friction_coefficient=float(mu.mean()),
        )


def tire_parameters(corner, static_load_n: float) -> TireParameters:
    """The tire model's parameters of one corner of a vehicle description; ``static_load_n`` (N) is the reference load of
    the load sensitivity where the file gives none."""
    t, w = corner.tire, corner.wheel
    return TireParameters(
        unloaded_radius_m=w.unloaded_radius_m,
        dynamic_radius_m=w.dynamic_radius_m,
        vertical_stiffness_n_per_m=t.vertical_stiffness_n_per_m,
        vertical_damping_n_s_per_m=t.vertical_damping_n_s_per_m,
        longitudinal_slip_stiffness=t.longitudinal_slip_stiffness,
        cornering_stiffness_per_rad=t.cornering_stiffness_per_rad,
        deflection_stiffness_x_n_per_m=t.deflection_stiffness_x_n_per_m,
        deflection_stiffness_y_n_per_m=t.deflection_stiffness_y_n_per_m,
        deflection_damping_x_n_s_per_m=t.deflection_damping_x_n_s_per_m,
        deflection_damping_y_n_s_per_m=t.deflection_damping_y_n_s_per_m,
        slip_velocity_regularisation_m_s=t.slip_velocity_regularisation_m_s,
        rolling_resistance_coefficient=t.rolling_resistance_coefficient,
        shape_factor=t.shape_factor,  # 0 for the linearised characteristic
        curvature_factor=t.curvature_factor,
        nominal_load_n=t.nominal_load_n if t.nominal_load_n is not None else static_load_n,
        load_sensitivity_stiffness=t.load_sensitivity_stiffness,
        load_sensitivity_friction=t.load_sensitivity_friction,
    )



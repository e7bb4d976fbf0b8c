"""Vehicle description: one YAML schema, validated on load, SI units with the unit in each key.

Frame: every position is in ``base_link`` at design ride height: origin on the ground below
the rear-axle centre, x forward, y left, z up (REP-103/105). Only the LEFT corner of each axle
is written (y > 0); the right corner is its mirror (y -> -y, inertia products xy and yz change
sign). ``load_vehicle`` returns a frozen :class:`VehicleDescription` whose ``corners`` are fl,
fr, rl, rr with the axle data (suspension, wheel, tire, torque limits) resolved per corner.

Sections (``config/vehicles/default.yaml`` documents every key): ``name``, ``chassis``,
``axles.front|rear`` (``steered``, ``suspension`` of type double_wishbone or macpherson,
``knuckle``, ``wheel_centre_m``, ``spin_axis``), ``steering`` (one rack), ``wheels.front|rear``,
``tire`` (one set, or ``front``/``rear``), ``drivetrain``, optional ``aerodynamics``, ``sensors``.
Rules beyond the keys: exactly one axle is steered; each suspension has exactly one of
``tie_rod`` / ``toe_link`` (same member: inner end on the rack if steered, else on the chassis);
``anti_roll_bar`` is optional. Unknown keys are errors; booleans are only true/false (so the
key ``on`` stays a string) and duplicate keys are errors.

Invalid input raises :class:`VehicleConfigError` with one line ``<file>: <key.path>: <why>``.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..conventions import GRAVITY_M_S2
from ..errors import VehicleConfigError
from .tire import BRUSH, TMEASY

CORNERS = ("fl", "fr", "rl", "rr")  # order of ``VehicleDescription.corners``
AXLES = ("front", "rear")
SUSPENSION_TYPES = ("double_wishbone", "macpherson")
DRIVEN_AXLES = ("front", "rear", "all")
_MIRROR = np.array([1.0, -1.0, 1.0])
_TOP = "(top level)"



# ---------------------------------------------------------------- records (SI units)
@dataclass(frozen=True, eq=False)
class Chassis:
    """Sprung body (with driver; without wheels, knuckles, arms, links, rack)."""

    mass_kg: float
    com_m: np.ndarray  # (3,) base_link
    inertia_kg_m2: np.ndarray  # (3, 3) tensor about the com, base_link axes


@dataclass(frozen=True, eq=False)
class Arm:
    """A-arm: revolute about the line front_pivot-rear_pivot, ball joint to the knuckle."""

    front_pivot_m: np.ndarray
    rear_pivot_m: np.ndarray
    ball_joint_m: np.ndarray
    mass_kg: float


@dataclass(frozen=True, eq=False)
class Link:
    """Tie rod (inner end on the rack) or toe link (inner end on the chassis); spherical ends."""

    inner_m: np.ndarray  # at zero rack travel
    outer_m: np.ndarray  # on the knuckle
    mass_kg: float


@dataclass(frozen=True, eq=False)
class Strut:
    """MacPherson strut: its axis through the top mount (chassis) and knuckle_m (knuckle)."""

    top_mount_m: np.ndarray
    knuckle_m: np.ndarray
    mass_kg: float


@dataclass(frozen=True, eq=False)
class SpringDamper:
    """Linear spring and damper acting along the line chassis_m - arm_m.

    ``on`` names the body that carries ``arm_m``: 'lower_arm' or 'upper_arm' (double
    wishbone), 'knuckle' (MacPherson: chassis_m is the top mount, arm_m the strut's knuckle
    point, so the force acts along the strut). The free length is not part of the
    description: the model sets the preload so that the design position is static equilibrium.
    """

    stiffness_n_per_m: float
    damping_n_s_per_m: float
    chassis_m: np.ndarray
    arm_m: np.ndarray
    on: str


@dataclass(frozen=True, eq=False)
class Wheel:
    mass_kg: float
    spin_inertia_kg_m2: float
    transverse_inertia_kg_m2: float
    unloaded_radius_m: float
    dynamic_radius_m: float


# A tire's slip stiffness grows less than its load (Pacejka 2012 §1.2; the Magic Formula's cornering stiffness peaks near
# twice the nominal load): a file that does not say gets 20 % less stiffness per unit load per unit of relative load
DEFAULT_LOAD_SENSITIVITY_STIFFNESS = 0.2
# ... and its friction grows less than its load too, by less (the Magic Formula's peak factor falls some 5-10 % per unit
# of relative load in passenger-car parameter sets, its p_Dy2; Pacejka 2012 ch. 4): a file that does not say gets 5 %
DEFAULT_LOAD_SENSITIVITY_FRICTION = 0.05


@dataclass(frozen=True, eq=False)
class Tire:
    """TMeasy (Rill) with its own rational characteristic (``characteristic: tmeasy``, the default), a linearised one
    (``characteristic: linearised``), a brush one (``characteristic: brush``) or a Magic-Formula-shaped one (``characteristic: magic_formula``;
    see :mod:`.tire`); slip stiffnesses per unit normal load.  The trailing fields are optional keys; shape and curvature
    only with magic_formula (refused with the others).  Load sensitivity applies to every characteristic: the slip
    stiffnesses and friction hold at ``nominal_load_n`` (default: each wheel's static load, so that the file's values
    are those of the car standing) and fall by ``load_sensitivity_*`` per unit of relative load above it (defaults 0.2
    for the stiffnesses, 0.05 for the friction)."""

    vertical_stiffness_n_per_m: float
    vertical_damping_n_s_per_m: float
    longitudinal_slip_stiffness: float  # dFx/dsx / Fz (-)
    cornering_stiffness_per_rad: float  # dFy/dalpha / Fz (1/rad)
    deflection_stiffness_x_n_per_m: float
    deflection_stiffness_y_n_per_m: float
    deflection_damping_x_n_s_per_m: float
    deflection_damping_y_n_s_per_m: float
    friction_coefficient: float
    slip_velocity_regularisation_m_s: float
    rolling_resistance_coefficient: float
    characteristic: str = "tmeasy"  # tmeasy | linearised | brush | magic_formula
    shape_factor: float = TMEASY  # Magic Formula C (-), 1..2; 0 = linearised, -1 = brush (tire.BRUSH), -2 = tmeasy (tire.TMEASY)
    curvature_factor: float = 0.0  # Magic Formula E (-), < 1
    nominal_load_n: float | None = None  # F_z0 of the load sensitivity (N); None: each wheel's static load
    load_sensitivity_stiffness: float = DEFAULT_LOAD_SENSITIVITY_STIFFNESS  # q_k: k(F_z) = k (1 - q_k (F_z/F_z0 - 1)) (-)
    load_sensitivity_friction: float = DEFAULT_LOAD_SENSITIVITY_FRICTION  # q_mu: mu(F_z) = mu (1 - q_mu (F_z/F_z0 - 1)) (-)


@dataclass(frozen=True, eq=False)
class Corner:
    """One corner, already mirrored for right corners (all positions in base_link).

    ``spin_axis`` points outboard (+y on left corners, -y on right corners); forward rolling
    is a positive rotation about +y, i.e. about ``side * spin_axis``.
    ``tie_rod`` is the tie rod of a steered axle (inner end moves with the rack along y) or the
    toe link of an unsteered one (inner end fixed to the chassis).
    """

    name: str  # fl, fr, rl, rr
    axle: str  # front, rear
    side: int  # +1 left, -1 right
    suspension_type: str  # double_wishbone, macpherson
    steered: bool
    driven: bool
    lower_arm: Arm
    upper_arm: Arm | None  # double wishbone only
    strut: Strut | None  # macpherson only
    tie_rod: Link
    spring_damper: SpringDamper
    anti_roll_bar_n_per_m: float | None  # per m of left-right wheel travel difference
    knuckle_mass_kg: float
    knuckle_inertia_kg_m2: np.ndarray  # (3, 3) about the wheel centre, base_link axes
    wheel_centre_m: np.ndarray
    spin_axis: np.ndarray
    wheel: Wheel
    tire: Tire
    max_drive_torque_n_m: float  # 0 on undriven wheels
    max_brake_torque_n_m: float

    @property
    def parts_mass_kg(self) -> float:
        """Wheel, knuckle, arms, strut and tie rod (or toe link) of this corner."""
        parts = [self.lower_arm, self.upper_arm, self.strut, self.tie_rod]
        return self.wheel.mass_kg + self.knuckle_mass_kg + sum(p.mass_kg for p in parts if p)


@dataclass(frozen=True, eq=False)
class Steering:
    steered_axle: str
    rack_travel_per_steering_wheel_rad_m: float  # + = rack to the left per + (left) steering-wheel angle
    rack_centre_m: np.ndarray
    rack_mass_kg: float
    max_steering_wheel_angle_rad: float


@dataclass(frozen=True, eq=False)
class Drivetrain:
    driven_axle: str  # front, rear, all
    max_drive_torque_per_wheel_n_m: float
    max_brake_torque_front_n_m: float  # per wheel
    max_brake_torque_rear_n_m: float


@dataclass(frozen=True, eq=False)
class Aerodynamics:
    drag_area_m2: float  # Cd * A
    air_density_kg_m3: float
    centre_of_pressure_m: np.ndarray
    downforce_area_m2: float = 0.0  # Cz * A: downforce 1/2 rho CzA v_x^2 along -z of the chassis at the centre of pressure


@dataclass(frozen=True, eq=False)
class Sensors:
    imu_frame_id: str
    imu_position_m: np.ndarray
    imu_orientation_rpy_rad: np.ndarray  # roll, pitch, yaw of the IMU frame in base_link
    gnss_frame_id: str
    gnss_antenna_position_m: np.ndarray
    encoder_counts_per_revolution: int
    steering_frame_id: str


@dataclass(frozen=True, eq=False)
class VehicleDescription:
    name: str
    source: str  # file it came from
    chassis: Chassis
    corners: tuple[Corner, ...]  # fl, fr, rl, rr
    steering: Steering
    drivetrain: Drivetrain
    aerodynamics: Aerodynamics | None
    sensors: Sensors

    def corner(self, name: str) -> Corner:
        return self.corners[CORNERS.index(name)]

    @property
    def total_mass_kg(self) -> float:
        """Chassis, rack and every corner part."""
        return self.chassis.mass_kg + self.steering.rack_mass_kg + sum(c.parts_mass_kg for c in self.corners)

    def static_wheel_load_n(self, corner: Corner) -> float:
        """Static load of ``corner``'s wheel (N): the axle's share of the weight by the centre of mass, half to each side
        (the tires' default reference load F_z0)."""
        front, rear = self.corners[0].wheel_centre_m[0], self.corners[2].wheel_centre_m[0]
        share_front = (self.com_m[0] - rear) / (front - rear)
        share = share_front if corner.axle == "front" else 1.0 - share_front
        return float(0.5 * share * self.total_mass_kg * GRAVITY_M_S2)

    @property
    def com_m(self) -> np.ndarray:
        """Centre of mass of the whole vehicle at design, (3,), of the :meth:`lumped_masses`."""
        m, points = self.lumped_masses()
        return (m[:, None] * points).sum(axis=0) / m.sum()

    def lumped_masses(self) -> tuple[np.ndarray, np.ndarray]:
        """Every body as a point mass at design: masses (n,) kg and positions (n, 3) m, chassis first.

        Corner parts are lumped: wheel and knuckle at the wheel centre, an arm at the mean of
        its three points, links and struts at their midpoints; the rack at its centre.
        """
        masses = [self.chassis.mass_kg, self.steering.rack_mass_kg]
        points = [self.chassis.com_m, self.steering.rack_centre_m]
        for c in self.corners:
            masses.append(c.wheel.mass_kg + c.knuckle_mass_kg)
            points.append(c.wheel_centre_m)
            for arm in (c.lower_arm, c.upper_arm):
                if arm is not None:
                    masses.append(arm.mass_kg)
                    points.append((arm.front_pivot_m + arm.rear_pivot_m + arm.ball_joint_m) / 3.0)
            masses.append(c.tie_rod.mass_kg)
            points.append((c.tie_rod.inner_m + c.tie_rod.outer_m) / 2.0)
            if c.strut is not None:
                masses.append(c.strut.mass_kg)
                points.append((c.strut.top_mount_m + c.strut.knuckle_m) / 2.0)
        return np.array(masses), np.array(points)

    @property
    def wheelbase_m(self) -> float:
        return float(self.corners[0].wheel_centre_m[0] - self.corners[2].wheel_centre_m[0])

    @property
    def track_m(self) -> tuple[float, float]:
        """(front, rear) distance between the left and right wheel centres."""
        return (2.0 * float(self.corners[0].wheel_centre_m[1]), 2.0 * float(self.corners[2].wheel_centre_m[1]))


# ---------------------------------------------------------------- YAML loading
_BOOL = "tag:yaml.org,2002:bool"
_FLOAT = "tag:yaml.org,2002:float"


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars and no duplicate keys.

    Only true/false are booleans (YAML 1.1 would read the key ``on:`` as True), ``1e5`` is a
    float (PyYAML would read a string), and a repeated key is an error instead of the last
    one silently winning.
    """

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(_FLOAT, re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def load_vehicle(path: str | Path) -> VehicleDescription:
    """Read and validate a vehicle YAML file; raises :class:`VehicleConfigError`."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VehicleConfigError(f"{source}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else _TOP
        problem = getattr(exc, "problem", None) or str(exc)
        raise VehicleConfigError(f"{source}: {where}: invalid YAML: {' '.join(str(problem).split())}") from None
    return load_vehicle_dict(data, source)


def load_vehicle_dict(data: Any, source: str = "<dict>") -> VehicleDescription:
    """Validate an already parsed description (a dict as read from the YAML)."""
    root = _Node(data, "", source, ("name", "chassis", "axles", "steering", "wheels", "tire",
                                    "drivetrain", "sensors"), ("aerodynamics",))
    name = root.text("name")
    chassis = _chassis(root.node("chassis", ("mass_kg", "com_m", "inertia_kg_m2")))
    axles_node = root.node("axles", AXLES)
    wheels_node = root.node("wheels", AXLES)
    tires = _tires(root)
    drive = _drivetrain(root.node("drivetrain", ("driven_axle", "max_drive_torque_per_wheel_n_m",
                                                   "max_brake_torque_n_m")))
    left, link_paths = {}, {}
    for axle in AXLES:
        wheel = _wheel(wheels_node.node(axle, _WHEEL_KEYS))
        driven = drive.driven_axle in (axle, "all")
        brake = drive.max_brake_torque_front_n_m if axle == "front" else drive.max_brake_torque_rear_n_m
        left[axle], link_paths[axle] = _corner(
            axles_node.node(axle, ("steered", "suspension", "knuckle", "wheel_centre_m", "spin_axis")),
            axle, wheel, tires[axle], driven, drive.max_drive_torque_per_wheel_n_m if driven else 0.0, brake)
    x_front, x_rear = left["front"].wheel_centre_m[0], left["rear"].wheel_centre_m[0]
    if x_front < x_rear + 0.5:
        raise axles_node.error(f"x = {_fmt(x_front)} m must be at least 0.5 m ahead of the rear wheel centre "
                               f"(x = {_fmt(x_rear)} m)", "front.wheel_centre_m")
    com = chassis.com_m
    if not x_rear < com[0] < x_front:
        raise root.error(f"x = {_fmt(com[0])} m is outside the wheelbase ({_fmt(x_rear)} .. {_fmt(x_front)} m)",
                         "chassis.com_m")
    if abs(com[1]) > 0.5 * left["rear"].wheel_centre_m[1] or not 0.1 < com[2] < 2.0:
        raise root.error(f"{_fmt_vec(com)} m is not inside the body (|y| <= track/4, z in (0.1, 2) m)",
                         "chassis.com_m")
    steering = _steering(root.node("steering", ("rack_travel_per_steering_wheel_rad_m", "rack",
                                                "max_steering_wheel_angle_rad")), left, link_paths)
    aero = None
    if root.has("aerodynamics"):
        node = root.node("aerodynamics", ("drag_area_m2", "air_density_kg_m3", "centre_of_pressure_m"), ("downforce_area_m2",))
        aero = Aerodynamics(node.num("drag_area_m2", 0.0, 20.0), node.num("air_density_kg_m3", 0.5, 1.5),
                            node.vec3("centre_of_pressure_m"), node.num("downforce_area_m2", 0.0, 20.0, lo_incl=True, default=0.0))
    sensors = _sensors(root.node("sensors", ("imu", "gnss", "wheel_encoders", "steering")))
    corners = []
    for name_ in CORNERS:
        base = left["front" if name_[0] == "f" else "rear"]
        corner = base if name_[1] == "l" else _mirrored(base)
        corners.append(dataclasses.replace(corner, name=name_, side=1 if name_[1] == "l" else -1))
    return VehicleDescription(name, source, chassis, tuple(corners), steering, drive, aero, sensors)


# ---------------------------------------------------------------- sections
def _chassis(node: _Node) -> Chassis:
    mass = node.num("mass_kg", 50.0, 20000.0, hints=_G)
    com = node.vec3("com_m")
    inertia = node.node("inertia_kg_m2", ("xx", "yy", "zz"), ("xy", "xz", "yz"))
    j = np.zeros((3, 3))
    for i, axis in enumerate("xyz"):
        j[i, i] = inertia.num(axis * 2, 0.0, 1e5)
    for (i, k), key in (((0, 1), "xy"), ((0, 2), "xz"), ((1, 2), "yz")):
        j[i, k] = j[k, i] = inertia.num(key, default=0.0)
    _check_inertia(node, "inertia_kg_m2", j)
    return Chassis(mass, com, _frozen(j))


def _check_inertia(node: _Node, key: str, j: np.ndarray) -> None:
    """Positive definite and principal moments obeying the triangle inequality."""
    moments = np.linalg.eigvalsh(j)
    if moments[0] <= 0.0:
        raise node.error(f"not positive definite (principal moments {_fmt_vec(moments)} kg m^2)", key)
    if moments[2] > moments[0] + moments[1] + 1e-9 * moments[2]:
        raise node.error(f"violates the triangle inequality: principal moments {_fmt_vec(moments)} kg m^2, "
                         "the largest exceeds the sum of the other two", key)


def _tires(root: _Node) -> dict[str, Tire]:
    data = root.get("tire")
    if isinstance(data, dict) and set(data) == set(AXLES):
        tire_node = root.node("tire", AXLES)
        return {axle: _tire(tire_node.node(axle, _TIRE_KEYS, _TIRE_OPTIONAL)) for axle in AXLES}
    one_set = "for one set of tire parameters; per axle use front and rear"
    tire = _tire(root.node("tire", _TIRE_KEYS, _TIRE_OPTIONAL, context=one_set))
    return {axle: tire for axle in AXLES}


_TIRE_KEYS = tuple(f.name for f in dataclasses.fields(Tire) if f.default is dataclasses.MISSING)
_TIRE_OPTIONAL = tuple(f.name for f in dataclasses.fields(Tire) if f.default is not dataclasses.MISSING)
TIRE_CHARACTERISTICS = ("tmeasy", "linearised", "brush", "magic_formula")
_MAGIC_FORMULA_KEYS = ("shape_factor", "curvature_factor")
_WHEEL_KEYS = tuple(f.name for f in dataclasses.fields(Wheel))


def _tire(node: _Node) -> Tire:
    characteristic = node.text("characteristic", TIRE_CHARACTERISTICS) if node.has("characteristic") else "tmeasy"
    if characteristic != "magic_formula":
        for key in _MAGIC_FORMULA_KEYS:
            if node.has(key):
                raise node.error(f"only with characteristic: magic_formula (the {characteristic} characteristic "
                                 "has no shape or curvature factor)", key)
        shape = dict(shape_factor={"brush": BRUSH, "tmeasy": TMEASY}.get(characteristic, 0.0))
    else:
        shape = dict(shape_factor=node.num("shape_factor", 1.0, 2.0, lo_incl=True, default=1.3),
                     curvature_factor=node.num("curvature_factor", -10.0, 1.0, lo_incl=True, default=0.0))
        if shape["curvature_factor"] >= 1.0:
            raise node.error(f"must be < 1 (got {_fmt(shape['curvature_factor'])})", "curvature_factor")
    shape.update(nominal_load_n=node.num("nominal_load_n", 100.0, 1e5, hints=(("kN", 1e3),)) if node.has("nominal_load_n") else None,
                 load_sensitivity_stiffness=node.num("load_sensitivity_stiffness", 0.0, 1.0, lo_incl=True,
                                                     default=DEFAULT_LOAD_SENSITIVITY_STIFFNESS),
                 load_sensitivity_friction=node.num("load_sensitivity_friction", 0.0, 1.0, lo_incl=True,
                                                    default=DEFAULT_LOAD_SENSITIVITY_FRICTION))
    return Tire(
        node.num("vertical_stiffness_n_per_m", 2e4, 5e6, hints=_KN),
        node.num("vertical_damping_n_s_per_m", 0.0, 1e5, lo_incl=True),
        node.num("longitudinal_slip_stiffness", 1.0, 100.0),
        node.num("cornering_stiffness_per_rad", 1.0, 100.0, hints=(("per degree", 180.0 / math.pi),)),
        node.num("deflection_stiffness_x_n_per_m", 1e3, 5e6, hints=_KN),
        node.num("deflection_stiffness_y_n_per_m", 1e3, 5e6, hints=_KN),
        node.num("deflection_damping_x_n_s_per_m", 0.0, 1e5, lo_incl=True),
        node.num("deflection_damping_y_n_s_per_m", 0.0, 1e5, lo_incl=True),
        node.num("friction_coefficient", 0.0, 2.0),
        node.num("slip_velocity_regularisation_m_s", 0.0, 1.0),
        node.num("rolling_resistance_coefficient", 0.0, 0.1, lo_incl=True, hints=(("percent", 0.01),)),
        characteristic, **shape,
    )


def _wheel(node: _Node) -> Wheel:
    wheel = Wheel(node.num("mass_kg", 0.0, 200.0, hints=_G),
                  node.num("spin_inertia_kg_m2", 0.0, 20.0),
                  node.num("transverse_inertia_kg_m2", 0.0, 20.0),
                  node.num("unloaded_radius_m", 0.15, 0.6, hints=_MM),
                  node.num("dynamic_radius_m", 0.15, 0.6, hints=_MM))
    if wheel.dynamic_radius_m > wheel.unloaded_radius_m:
        raise node.error(f"must not exceed unloaded_radius_m ({_fmt(wheel.dynamic_radius_m)} > "
                         f"{_fmt(wheel.unloaded_radius_m)} m)", "dynamic_radius_m")
    if wheel.spin_inertia_kg_m2 > wheel.mass_kg * wheel.unloaded_radius_m ** 2:
        raise node.error(f"{_fmt(wheel.spin_inertia_kg_m2)} kg m^2 exceeds mass_kg * unloaded_radius_m^2 = "
                         f"{_fmt(wheel.mass_kg * wheel.unloaded_radius_m ** 2)} (no mass lies outside the tire)",
                         "spin_inertia_kg_m2")
    if wheel.spin_inertia_kg_m2 > 2.0 * wheel.transverse_inertia_kg_m2:
        raise node.error("violates the triangle inequality: spin inertia exceeds twice the transverse inertia "
                         f"({_fmt(wheel.spin_inertia_kg_m2)} > 2 * {_fmt(wheel.transverse_inertia_kg_m2)})",
                         "spin_inertia_kg_m2")
    return wheel


def _drivetrain(node: _Node) -> Drivetrain:
    brake = node.node("max_brake_torque_n_m", AXLES)
    return Drivetrain(node.text("driven_axle", DRIVEN_AXLES),
                      node.num("max_drive_torque_per_wheel_n_m", 0.0, 2e4),
                      brake.num("front", 0.0, 2e4), brake.num("rear", 0.0, 2e4))


def _corner(node: _Node, axle: str, wheel: Wheel, tire: Tire, driven: bool,
            drive_n_m: float, brake_n_m: float) -> tuple[Corner, str]:
    """The left corner of one axle, and the key path of its tie rod or toe link."""
    steered = node.flag("steered")
    susp = node.node("suspension", ("type",), ("lower_arm", "upper_arm", "strut", "spring_damper",
                                               "tie_rod", "toe_link", "anti_roll_bar"))
    kind = susp.text("type", SUSPENSION_TYPES)
    link_keys = [k for k in ("tie_rod", "toe_link") if susp.has(k)]
    if len(link_keys) != 1:
        raise susp.error("needs exactly one of tie_rod or toe_link (the link that fixes the steer angle; "
                         "its inner end is on the rack if the axle is steered, else on the chassis)")
    link_key = link_keys[0]
    own = ("upper_arm",) if kind == "double_wishbone" else ("strut",)
    susp.check_keys(("type", "lower_arm", "spring_damper", link_key) + own, ("anti_roll_bar",), f"for type {kind}")
    lower = _arm(susp, "lower_arm")
    upper = strut = None
    if kind == "double_wishbone":
        upper, spring = _double_wishbone(susp, lower)
    else:
        strut, spring = _macpherson(susp, lower)
    link = _link(susp, link_key)
    arb = None
    if susp.has("anti_roll_bar"):
        arb = susp.node("anti_roll_bar", ("stiffness_n_per_m",)).num("stiffness_n_per_m", 0.0, 1e6, hints=_KN)
    kn = node.node("knuckle", ("mass_kg", "inertia_kg_m2"))
    knuckle_mass = kn.num("mass_kg", 0.0, 200.0, hints=_G)
    moments = kn.vec3("inertia_kg_m2", bound=None)
    if np.any(moments <= 0.0) or np.any(moments > 50.0):
        raise kn.error(f"each must be in (0, 50] kg m^2 (got {_fmt_vec(moments)})", "inertia_kg_m2")
    _check_inertia(kn, "inertia_kg_m2", np.diag(moments))
    centre = node.vec3("wheel_centre_m", left=True)
    r0 = wheel.unloaded_radius_m
    if not 0.9 * r0 <= centre[2] < r0:
        raise node.error(f"z = {_fmt(centre[2])} m must be in [{_fmt(0.9 * r0)}, {_fmt(r0)}) m: below "
                         f"wheels.{axle}.unloaded_radius_m (tire compressed at design), by at most 10 %",
                         "wheel_centre_m")
    axis = node.vec3("spin_axis", bound=None)
    if abs(np.linalg.norm(axis) - 1.0) > 1e-3:
        raise node.error(f"must be a unit vector (norm {_fmt(np.linalg.norm(axis))})", "spin_axis")
    axis = axis / np.linalg.norm(axis)
    if axis[1] < 0.9:
        raise node.error(f"must point outboard to the left, y > 0.9 (got {_fmt_vec(axis)})", "spin_axis")
    corner = Corner(
        name=axle[0] + "l", axle=axle, side=1, suspension_type=kind, steered=steered, driven=driven,
        lower_arm=lower, upper_arm=upper, strut=strut, tie_rod=link, spring_damper=spring,
        anti_roll_bar_n_per_m=arb, knuckle_mass_kg=knuckle_mass, knuckle_inertia_kg_m2=_frozen(np.diag(moments)),
        wheel_centre_m=centre, spin_axis=_frozen(axis), wheel=wheel, tire=tire,
        max_drive_torque_n_m=drive_n_m, max_brake_torque_n_m=brake_n_m)
    return corner, f"{susp.path}.{link_key}"


def _double_wishbone(susp: _Node, lower: Arm) -> tuple[Arm, SpringDamper]:
    upper = _arm(susp, "upper_arm")
    if upper.ball_joint_m[2] < lower.ball_joint_m[2] + 0.05:
        raise susp.error(f"must be at least 0.05 m above the lower ball joint (z {_fmt(upper.ball_joint_m[2])} "
                         f"vs {_fmt(lower.ball_joint_m[2])} m)", "upper_arm.ball_joint_m")
    sd = susp.node("spring_damper", ("chassis_m", "arm_m", "on", "stiffness_n_per_m", "damping_n_s_per_m"))
    on = sd.text("on", ("lower_arm", "upper_arm"))
    spring = SpringDamper(sd.num("stiffness_n_per_m", 1e3, 1e6, hints=_KN), sd.num("damping_n_s_per_m", 10.0, 1e5),
                          sd.vec3("chassis_m", left=True), sd.vec3("arm_m", left=True), on)
    if np.linalg.norm(spring.chassis_m - spring.arm_m) < 0.05:
        raise sd.error("is less than 0.05 m from chassis_m", "arm_m")
    arm = lower if on == "lower_arm" else upper
    if _distance_to_line(spring.arm_m, arm.front_pivot_m, arm.rear_pivot_m) < 0.02:
        raise sd.error(f"lies on the {on} pivot axis: the spring would not move", "arm_m")
    return upper, spring


def _macpherson(susp: _Node, lower: Arm) -> tuple[Strut, SpringDamper]:
    st = susp.node("strut", ("top_mount_m", "knuckle_m", "mass_kg"))
    strut = Strut(st.vec3("top_mount_m", left=True), st.vec3("knuckle_m", left=True),
                  st.num("mass_kg", 0.0, 100.0, hints=_G))
    if strut.top_mount_m[2] < strut.knuckle_m[2] + 0.1:
        raise st.error(f"must be at least 0.1 m above knuckle_m (z {_fmt(strut.top_mount_m[2])} vs "
                       f"{_fmt(strut.knuckle_m[2])} m)", "top_mount_m")
    if strut.top_mount_m[2] < lower.ball_joint_m[2] + 0.1:
        raise st.error("must be at least 0.1 m above lower_arm.ball_joint_m", "top_mount_m")
    sd = susp.node("spring_damper", ("stiffness_n_per_m", "damping_n_s_per_m"))
    spring = SpringDamper(sd.num("stiffness_n_per_m", 1e3, 1e6, hints=_KN), sd.num("damping_n_s_per_m", 10.0, 1e5),
                          strut.top_mount_m, strut.knuckle_m, "knuckle")
    return strut, spring


def _link(susp: _Node, key: str) -> Link:
    node = susp.node(key, ("inner_m", "outer_m", "mass_kg"))
    link = Link(node.vec3("inner_m", left=True), node.vec3("outer_m", left=True),
                node.num("mass_kg", 0.0, 100.0, hints=_G))
    if link.inner_m[1] >= link.outer_m[1]:
        raise node.error(f"y = {_fmt(link.inner_m[1])} m must be inboard of outer_m "
                         f"(y = {_fmt(link.outer_m[1])} m)", "inner_m")
    if np.linalg.norm(link.outer_m - link.inner_m) < 0.05:
        raise node.error("is less than 0.05 m from inner_m", "outer_m")
    return link


def _arm(susp: _Node, key: str) -> Arm:
    node = susp.node(key, ("front_pivot_m", "rear_pivot_m", "ball_joint_m", "mass_kg"))
    arm = Arm(node.vec3("front_pivot_m", left=True), node.vec3("rear_pivot_m", left=True),
              node.vec3("ball_joint_m", left=True), node.num("mass_kg", 0.0, 100.0, hints=_G))
    if np.linalg.norm(arm.front_pivot_m - arm.rear_pivot_m) < 0.05:
        raise node.error("coincides with rear_pivot_m (less than 0.05 m apart: no pivot axis)", "front_pivot_m")
    if arm.ball_joint_m[1] <= max(arm.front_pivot_m[1], arm.rear_pivot_m[1]):
        raise node.error(f"y = {_fmt(arm.ball_joint_m[1])} m is not outboard of the pivots", "ball_joint_m")
    if _distance_to_line(arm.ball_joint_m, arm.front_pivot_m, arm.rear_pivot_m) < 0.1:
        raise node.error("is less than 0.1 m from the pivot axis", "ball_joint_m")
    return arm


def _steering(node: _Node, left: dict[str, Corner], link_paths: dict[str, str]) -> Steering:
    steered = [axle for axle in AXLES if left[axle].steered]
    if len(steered) != 1:
        raise VehicleConfigError(f"{node.source}: axles: exactly one axle must be steered (there is one rack); "
                                 f"steered: {', '.join(steered) or 'none'}")
    gain_key = "rack_travel_per_steering_wheel_rad_m"
    gain = node.num(gain_key, -0.05, 0.05, hints=_MM)
    rack = node.node("rack", ("centre_m", "mass_kg"))
    centre = rack.vec3("centre_m")
    steering = Steering(steered[0], gain, centre, rack.num("mass_kg", 0.0, 100.0, hints=_G),
                        node.num("max_steering_wheel_angle_rad", 0.0, 15.0, hints=_DEG))
    if abs(gain) < 1e-3:
        raise node.error(f"|value| must be >= 0.001 m/rad (got {_fmt(gain)})", gain_key)
    if abs(centre[1]) > 0.05:
        raise rack.error(f"y = {_fmt(centre[1])} m: the rack must be centred (|y| <= 0.05 m)", "centre_m")
    corner = left[steered[0]]
    link = link_paths[steered[0]]
    off_axis = math.hypot(*(corner.tie_rod.inner_m - centre)[[0, 2]])
    if off_axis > 0.05:
        raise VehicleConfigError(f"{node.source}: {link}.inner_m: is {_fmt(off_axis)} m from the rack axis "
                                 "(the line through steering.rack.centre_m along y); it must be on the rack "
                                 "(<= 0.05 m)")
    rate = _steer_rate_rad_per_m(corner)
    if abs(rate) < 1.0:
        raise VehicleConfigError(f"{node.source}: {link}.outer_m: the steering arm has no lever about the "
                                 f"steering axis ({_fmt(rate)} rad of steer per m of rack travel)")
    ratio = 1.0 / (gain * rate)
    if ratio < 0:
        raise node.error(f"sign gives a right turn for a positive (left) steering-wheel angle: the tie rods are "
                         f"{'ahead of' if rate > 0 else 'behind'} the steering axis, so a left turn needs "
                         f"{'positive' if rate > 0 else 'negative'} rack travel", gain_key)
    if not 5.0 <= ratio <= 40.0:
        raise node.error(f"gives an overall steering ratio of {_fmt(ratio)} (expected 5..40)", gain_key)
    return steering


def _steer_rate_rad_per_m(c: Corner) -> float:
    """Approximate steer angle (rad, + left) per rack travel (m, + left) at design.

    The knuckle turns about the steering axis k (lower ball joint to the upper ball joint or
    strut top mount); the tie rod t keeps its length: t . (w k x r) = t_y, r = outer - axis.
    """
    top = c.upper_arm.ball_joint_m if c.upper_arm is not None else c.strut.top_mount_m
    k = (top - c.lower_arm.ball_joint_m) / np.linalg.norm(top - c.lower_arm.ball_joint_m)
    r = c.tie_rod.outer_m - c.lower_arm.ball_joint_m
    t = c.tie_rod.outer_m - c.tie_rod.inner_m
    lever = float(t @ np.cross(k, r))
    return float(t[1] / lever * k[2]) if abs(lever) > 1e-9 else 0.0


def _sensors(node: _Node) -> Sensors:
    imu = node.node("imu", ("frame_id", "position_m", "orientation_rpy_rad"))
    rpy = imu.vec3("orientation_rpy_rad", bound=None)
    if np.any(np.abs(rpy) > math.pi):
        hint = "; looks like degrees" if np.all(np.abs(rpy) <= 360.0) else ""
        raise imu.error(f"each angle must be in [-pi, pi] rad (got {_fmt_vec(rpy)}){hint}", "orientation_rpy_rad")
    gnss = node.node("gnss", ("frame_id", "antenna_position_m"))
    enc = node.node("wheel_encoders", ("counts_per_revolution",))
    counts = enc.get("counts_per_revolution")
    if isinstance(counts, bool) or not isinstance(counts, int) or not 0 < counts <= 1_000_000:
        raise enc.error(f"must be an integer in 1..1000000 (got {_show(counts)})", "counts_per_revolution")
    steer = node.node("steering", ("frame_id",))
    return Sensors(imu.text("frame_id"), imu.vec3("position_m"), rpy, gnss.text("frame_id"),
                   gnss.vec3("antenna_position_m"), counts, steer.text("frame_id"))


# ---------------------------------------------------------------- helpers
_MM = (("mm", 1e-3), ("cm", 1e-2))
_G = (("g", 1e-3),)
_KN = (("N/mm or kN/m", 1e3),)
_DEG = (("degrees", math.pi / 180.0),)


class _Node:
    """One mapping of the description, with its dotted key path, for checked reads."""

    def __init__(self, data: Any, path: str, source: str, required: tuple, optional: tuple = (),
                 context: str = ""):
        self.data, self.path, self.source = data, path, source
        if not isinstance(data, dict):
            raise self.error(f"must be a mapping with keys {', '.join(required)} (got {_show(data)})")
        for key in data:
            if not isinstance(key, str):
                hint = ""
                if isinstance(key, bool):
                    hint = " (YAML 1.1 reads on/off/yes/no as booleans: quote the key)"
                raise self.error(f"key {key!r} is not a string{hint}")
        self.check_keys(required, optional, context)

    def check_keys(self, required: tuple, optional: tuple = (), context: str = "") -> None:
        allowed = tuple(required) + tuple(optional)
        unknown = [k for k in self.data if k not in allowed]
        if unknown:
            raise self.error(f"unknown key '{unknown[0]}'{' ' + context if context else ''} "
                             f"(allowed: {', '.join(allowed)})")
        for key in required:
            if key not in self.data:
                raise self.error("missing" + (f" ({context})" if context else ""), key)

    def error(self, why: str, key: str | None = None) -> VehicleConfigError:
        path = ".".join(p for p in (self.path, key) if p) or _TOP
        return VehicleConfigError(f"{self.source}: {path}: {why}")

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise self.error("missing", key)
        return self.data[key]

    def node(self, key: str, required: tuple, optional: tuple = (), context: str = "") -> _Node:
        path = ".".join(p for p in (self.path, key) if p)
        return _Node(self.get(key), path, self.source, required, optional, context)

    def text(self, key: str, choices: tuple | None = None) -> str:
        value = self.get(key)
        if choices is not None and value not in choices:
            raise self.error(f"must be one of {', '.join(choices)} (got {_show(value)})", key)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"must be a non-empty string (got {_show(value)})", key)
        return value

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise self.error(f"must be true or false (got {_show(value)})", key)
        return value

    def num(self, key: str, lo: float | None = None, hi: float | None = None, *, lo_incl: bool = False,
            hints: tuple = (), default: float | None = None) -> float:
        """A finite number; lo < value <= hi (lo <= value with lo_incl). Hints name likely unit slips."""
        if default is not None and key not in self.data:
            return default
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"must be a number (got {_show(value)})", key)
        value = float(value)
        if not math.isfinite(value):
            raise self.error(f"must be finite (got {value})", key)
        if not _in_range(value, lo, hi, lo_incl):
            raise self.error(_range_why(value, lo, hi, lo_incl, hints), key)
        return value

    def vec3(self, key: str, *, left: bool = False, bound: float | None = 10.0) -> np.ndarray:
        """Three finite numbers; each |coordinate| <= bound (m); with left, y > 0."""
        value = self.get(key)
        if (not isinstance(value, (list, tuple)) or len(value) != 3
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)):
            raise self.error(f"must be a list of 3 numbers (got {_show(value)})", key)
        vec = np.array(value, dtype=float)
        if not np.all(np.isfinite(vec)):
            raise self.error(f"must be finite (got {_fmt_vec(vec)})", key)
        if bound is not None and np.any(np.abs(vec) > bound):
            hint = "; looks like mm" if np.all(np.abs(vec) <= 1000.0 * bound) else ""
            raise self.error(f"coordinates must be within +-{_fmt(bound)} m (got {_fmt_vec(vec)}){hint}", key)
        if left and vec[1] <= 0.0:
            raise self.error(f"y = {_fmt(vec[1])} m must be > 0: only left corners are written "
                             "(right corners are their mirror)", key)
        return _frozen(vec)


def _in_range(value: float, lo: float | None, hi: float | None, lo_incl: bool) -> bool:
    above = lo is None or (value >= lo if lo_incl else value > lo)
    return above and (hi is None or value <= hi)


def _range_why(value: float, lo: float | None, hi: float | None, lo_incl: bool, hints: tuple) -> str:
    if hi is None:
        why = f"must be {'>=' if lo_incl else '>'} {_fmt(lo)} (got {_fmt(value)})"
    elif lo is None:
        why = f"must be <= {_fmt(hi)} (got {_fmt(value)})"
    else:
        why = f"must be in {'[' if lo_incl else '('}{_fmt(lo)}, {_fmt(hi)}] (got {_fmt(value)})"
    for unit, factor in hints:
        if _in_range(value * factor, lo, hi, lo_incl):
            return f"{why}; looks like {unit}"
    return why


def _distance_to_line(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    u = (b - a) / max(np.linalg.norm(b - a), 1e-12)
    return float(np.linalg.norm(np.cross(p - a, u)))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _mirrored(obj: Any) -> Any:
    """Mirror y -> -y: vectors flip y, 3x3 tensors flip their xy and yz products."""
    if isinstance(obj, np.ndarray):
        if obj.shape == (3,):
            return _frozen(obj * _MIRROR)
        return _frozen(_MIRROR[:, None] * obj * _MIRROR[None, :])
    if dataclasses.is_dataclass(obj):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        changed = {name: _mirrored(value) for name, value in fields.items()}
        if all(changed[name] is value for name, value in fields.items()):
            return obj  # nothing side-dependent (wheel, tire): share it
        return dataclasses.replace(obj, **changed)
    return obj


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _fmt_vec(v: np.ndarray) -> str:
    return "[" + ", ".join(_fmt(x) for x in v) + "]"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

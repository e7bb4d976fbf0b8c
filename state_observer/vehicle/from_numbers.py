"""A complete vehicle description from the ten numbers most teams have (``state-observer vehicle new``).

The template is the default car (``config/vehicles/default.yaml``). Its geometry is scaled to the
new wheelbase, tracks and wheel size, its part masses to the new mass. Its ride frequencies, damping
ratios, roll gradient, front share of roll stiffness and yaw index are the targets unless the user
gives them. Every derived number comes from a hand calculation (docstrings below) and is listed, with
the rule used, in the header comment of the written file. So the default car's own numbers give the
default car back (test/test_vehicle_new.py checks this).

Symbols: m total mass (kg), L wheelbase, a / b horizontal distance of the total CG behind the front
axle / ahead of the rear axle (m), h CG height (m), t track (m), r0 unloaded tire radius (m),
g = 9.81 m/s^2; a trailing 0 marks the template's value (m0, L0, ...).

Errors are :class:`CarNumbersError` with one line ``--option: why``. No rclpy, no sim/ imports here.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..mbs import solve_position
from .description import (DRIVEN_AXLES, SUSPENSION_TYPES, Corner, VehicleConfigError, VehicleDescription,
                          load_vehicle, load_vehicle_dict)
from ..conventions import GRAVITY_M_S2 as G
from .detailed import DetailedVehicle
from ..errors import CarNumbersError

__all__ = ["CarNumbers", "CarNumbersError", "Characteristics", "characteristics", "generate", "new_command",
           "write_vehicle", "REQUIRED"]



def option(field: str) -> str:
    """The command-line option of a :class:`CarNumbers` field: cg_height -> --cg-height."""
    return "--" + field.replace("_", "-")


@dataclass(frozen=True)
class CarNumbers:
    """What a team knows about its car; None means: derive it. Field names are the option names.

    mass kg (as driven, with the driver); wheelbase, front_track, rear_track (between the wheel
    centres), cg_to_front_axle (horizontal, a), cg_height (above the ground, h) and wheel_radius
    (unloaded) in m; tire_size like '215/55R16'; cornering_stiffness and rear_cornering_stiffness
    in N/rad per tire at its static load; yaw_inertia kg m^2 (whole car about its CG);
    steering_ratio (steering-wheel angle per road-wheel angle); front/rear_ride_frequency Hz;
    roll_gradient deg/g; driven_axle front|rear|all; front/rear_suspension double_wishbone|macpherson;
    drag_area and downforce_area (Cd A, Cz A) m^2, aero_balance the front axle's share of the downforce.
    """

    mass: float | None = None
    wheelbase: float | None = None
    front_track: float | None = None
    rear_track: float | None = None
    cg_to_front_axle: float | None = None
    cg_height: float | None = None
    driven_axle: str | None = None
    tire_size: str | None = None
    wheel_radius: float | None = None
    cornering_stiffness: float | None = None
    rear_cornering_stiffness: float | None = None
    yaw_inertia: float | None = None
    steering_ratio: float | None = None
    front_suspension: str | None = None
    rear_suspension: str | None = None
    front_ride_frequency: float | None = None
    rear_ride_frequency: float | None = None
    roll_gradient: float | None = None
    drag_area: float | None = None
    downforce_area: float | None = None
    aero_balance: float | None = None
    name: str | None = None


REQUIRED = ("mass", "wheelbase", "front_track", "rear_track", "cg_to_front_axle", "cg_height", "driven_axle")

# (lowest, highest, unit): the range in which scaling the template sedan stays meaningful
_RANGES = {
    "mass": (300.0, 5000.0, "kg"),
    "wheelbase": (1.8, 4.0, "m"),
    "front_track": (1.1, 2.0, "m"),
    "rear_track": (1.1, 2.0, "m"),
    "cg_height": (0.25, 1.2, "m"),
    "wheel_radius": (0.22, 0.5, "m"),
    "cornering_stiffness": (5e3, 5e5, "N/rad"),
    "rear_cornering_stiffness": (5e3, 5e5, "N/rad"),
    "yaw_inertia": (100.0, 2e4, "kg m^2"),
    "steering_ratio": (8.0, 30.0, ""),
    "front_ride_frequency": (0.8, 3.0, "Hz"),
    "rear_ride_frequency": (0.8, 3.0, "Hz"),
    "roll_gradient": (1.0, 12.0, "deg/g"),
    "drag_area": (0.1, 3.0, "m^2"),
    "downforce_area": (0.0, 10.0, "m^2"),
    "aero_balance": (0.0, 1.0, ""),
}
DEFAULT_TIRE_WIDTH_M = 0.215  # section width of the default car's 215/55 R16 (its wheels comment)
_CORNERING_COEFFICIENT_RANGE = (5.0, 40.0)  # cornering stiffness per unit load, 1/rad (0.09 .. 0.7 per deg)
_TIRE_SIZE = re.compile(r"^P?(\d{3})\s*/\s*(\d{2,3})\s*Z?R\s*(\d{2}(?:\.\d)?)$", re.IGNORECASE)


def _refuse(field: str, why: str) -> CarNumbersError:
    return CarNumbersError(f"{option(field)}: {why}")


def _validated(n: CarNumbers) -> CarNumbers:
    """The numbers checked: required ones present, each finite and in range, choices known."""
    missing = [option(f) for f in REQUIRED if getattr(n, f) is None]
    if n.tire_size is None and n.wheel_radius is None:
        missing.append("--tire-size (or --wheel-radius)")
    if missing:
        raise CarNumbersError(f"missing required option{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    for field, (lo, hi, unit) in _RANGES.items():
        value = getattr(n, field)
        if value is None:
            continue
        if not math.isfinite(value) or not lo <= value <= hi:
            unit = f" {unit}" if unit else ""
            raise _refuse(field, f"{value:g}{unit} is outside {lo:g} .. {hi:g}{unit}")
    a, L = n.cg_to_front_axle, n.wheelbase
    if not 0.2 * L <= a <= 0.8 * L:
        where = "ahead of the front axle" if a < 0 else "behind the rear axle" if a > L else "too close to an axle"
        raise _refuse("cg_to_front_axle", f"{a:g} m puts the CG {where} (wheelbase {L:g} m); it must be within "
                                          f"{0.2 * L:.3g} .. {0.8 * L:.3g} m (20 .. 80 % of the wheelbase)")
    if n.cg_height > 0.5 * min(n.front_track, n.rear_track):
        raise _refuse("cg_height", f"{n.cg_height:g} m is more than half the narrower track "
                                   f"({min(n.front_track, n.rear_track):g} m): the car would roll over before it slides")
    for field, choices in (("driven_axle", DRIVEN_AXLES), ("front_suspension", SUSPENSION_TYPES),
                           ("rear_suspension", SUSPENSION_TYPES)):
        value = getattr(n, field)
        if value is not None and value not in choices:
            raise _refuse(field, f"{value!r} is not one of {', '.join(choices)}")
    if n.front_suspension == "macpherson":  # DetailedVehicle fixes a strut corner's link to the chassis
        raise _refuse("front_suspension", "macpherson is not available on the steered axle: the detailed model "
                                          "does not connect a strut corner's tie rod to the rack (use double_wishbone)")
    if n.tire_size is not None and n.wheel_radius is not None:
        raise _refuse("wheel_radius", "give --tire-size or --wheel-radius, not both")
    if n.tire_size is not None and _TIRE_SIZE.match(n.tire_size.strip()) is None:
        raise _refuse("tire_size", f"{n.tire_size!r} is not a tire size like 215/55R16 (width mm / aspect % R rim inch)")
    if n.tire_size is None and n.cornering_stiffness is None:
        raise _refuse("cornering_stiffness", "is needed with --wheel-radius (without a --tire-size there is no "
                                             "tire width to derive it from)")
    if n.rear_cornering_stiffness is not None and n.cornering_stiffness is None:
        raise _refuse("rear_cornering_stiffness", "needs --cornering-stiffness (the front value) as well")
    if n.name is not None and not n.name.strip():
        raise _refuse("name", "must not be empty")
    return n


def tire_size_m(text: str) -> tuple[float, float, float]:
    """(section width m, aspect ratio -, unloaded radius m) of an ETRTO size 'W/AR R D':
    r0 = D 25.4 mm / 2 + W AR / 100."""
    width_mm, aspect_pct, rim_in = _TIRE_SIZE.match(text.strip()).groups()
    width_m, aspect = float(width_mm) / 1000.0, float(aspect_pct) / 100.0
    return width_m, aspect, float(rim_in) * 0.0254 / 2.0 + width_m * aspect


# ---------------------------------------------------------------- characteristics of a car
@dataclass(frozen=True)
class Characteristics:
    """The hand-calculated ride, roll and mass figures of a description (per axle: index 0 front, 1 rear).

    Quarter car per axle: sprung mass per corner m_c = m_s s / 2 (s the axle's share of the sprung
    mass, from the chassis CG), wheel rate k_w = k MR^2 (MR spring travel per wheel travel), ride rate
    k_r = k_w k_t / (k_w + k_t) (tire k_t in series), f = sqrt(k_r / m_c) / (2 pi), damping ratio
    zeta = c MR^2 / (2 sqrt(k_r m_c)). Roll (rigid tires): spring roll stiffness k_w t^2 / 2, bar k_bar t^2
    (the bar's stiffness is per m of left-right wheel travel difference), roll axis through the
    front-view roll centres, sprung CG h' above it; gradient phi / a_y = m_s h' / (K - m_s g h').
    """

    mass_kg: float
    a_m: float  # total CG behind the front axle
    b_m: float  # total CG ahead of the rear axle
    cg_height_m: float
    static_wheel_load_n: tuple  # front, rear (per wheel): m g b / (2 L), m g a / (2 L)
    sprung_mass_kg: float
    corner_sprung_mass_kg: tuple
    motion_ratio: tuple
    ride_rate_n_per_m: tuple
    ride_frequency_hz: tuple
    damping_ratio: tuple
    roll_centre_m: tuple
    roll_lever_m: float  # h': sprung CG above the roll axis
    spring_roll_stiffness_n_m_per_rad: tuple
    bar_roll_stiffness_n_m_per_rad: tuple
    roll_gradient_deg_per_g: float
    front_roll_share: float
    yaw_inertia_kg_m2: float
    yaw_index: float  # Izz / (m a b)
    steering_ratio: float
    roll_gyration_m: float  # sprung body radii of gyration sqrt(I / m_s)
    pitch_gyration_m: float


def motion_ratios(vehicle: DetailedVehicle, travel_m: float = 1e-4) -> np.ndarray:
    """Spring travel per wheel travel at design (-), per corner fl fr rl rr: central difference of the
    spring lengths with that wheel centre moved +-travel_m along z (chassis held, constraints solved)."""
    model, springs = vehicle.model, vehicle.spring_set
    still = np.zeros(model.n)
    ratios = np.zeros(4)
    for i, corner in enumerate(vehicle.desc.corners):
        lengths = []
        for dz in (travel_m, -travel_m):
            q = vehicle.q_design.copy()
            q[model.index(f"C_{corner.name}.z")] += dz
            lengths.append(springs.state(solve_position(model, q, vehicle.independent), still)[0][i])
        ratios[i] = (lengths[1] - lengths[0]) / (2.0 * travel_m)  # compression per bump
    return ratios


def roll_centre_height_m(c: Corner) -> float:
    """Front-view roll centre height (m) of a left corner (Milliken ch. 17; pivot axes along x).

    The instant centre IC is where the lower-arm line (pivot axis to ball joint) meets the upper-arm
    line, or for a strut the normal to the strut axis through the top mount. The line from the
    contact patch (y_w, 0) through IC crosses the centre plane at z_rc = z_ic y_w / (y_w - y_ic).
    """
    def yz(p):
        return np.array([p[1], p[2]])

    def arm_line(arm):
        pivot = yz((arm.front_pivot_m + arm.rear_pivot_m) / 2.0)
        return pivot, yz(arm.ball_joint_m) - pivot

    p0, d0 = arm_line(c.lower_arm)
    if c.upper_arm is not None:
        p1, d1 = arm_line(c.upper_arm)
    else:
        axis = yz(c.strut.top_mount_m - c.strut.knuckle_m)
        p1, d1 = yz(c.strut.top_mount_m), np.array([axis[1], -axis[0]])
    s = np.linalg.solve(np.column_stack([d0, -d1]), p1 - p0)[0]
    y_ic, z_ic = p0 + s * d0
    y_w = float(c.wheel_centre_m[1])
    return float(z_ic * y_w / (y_w - y_ic))


def yaw_inertia_kg_m2(desc: VehicleDescription) -> float:
    """Whole-car yaw inertia about the vertical through the total CG (kg m^2): the chassis' own Izz, the
    lumped point masses m_i ((x_i - x_g)^2 + (y_i - y_g)^2), and the knuckles' and wheels' own Izz."""
    masses, points = desc.lumped_masses()
    arm = points[:, :2] - desc.com_m[:2]
    own = sum(c.knuckle_inertia_kg_m2[2, 2] + c.wheel.transverse_inertia_kg_m2 for c in desc.corners)
    return float(desc.chassis.inertia_kg_m2[2, 2] + masses @ np.sum(arm ** 2, axis=1) + own)


def characteristics(desc: VehicleDescription, vehicle: DetailedVehicle | None = None) -> Characteristics:
    """The figures of :class:`Characteristics` for ``desc`` (its detailed model gives the motion ratios and
    the steering ratio at design; pass one already built for ``desc`` to save building it)."""
    vehicle = vehicle or DetailedVehicle(desc)
    m, g_xyz = desc.total_mass_kg, desc.com_m
    L = desc.wheelbase_m
    x_rear = float(desc.corners[2].wheel_centre_m[0])
    b = float(g_xyz[0]) - x_rear
    a = L - b
    ch = desc.chassis
    sprung_front = (ch.com_m[0] - x_rear) / L
    left = (desc.corner("fl"), desc.corner("rl"))
    mr = motion_ratios(vehicle)[[0, 2]]
    tracks = desc.track_m
    corner_mass, ride_rate, freq, zeta, k_spring_roll, k_bar_roll, rc = [], [], [], [], [], [], []
    for i, c in enumerate(left):
        m_c = ch.mass_kg * (sprung_front if i == 0 else 1.0 - sprung_front) / 2.0
        k_w = c.spring_damper.stiffness_n_per_m * mr[i] ** 2
        k_t = c.tire.vertical_stiffness_n_per_m
        k_r = k_w * k_t / (k_w + k_t)
        corner_mass.append(m_c)
        ride_rate.append(k_r)
        freq.append(math.sqrt(k_r / m_c) / (2.0 * math.pi))
        zeta.append(c.spring_damper.damping_n_s_per_m * mr[i] ** 2 / (2.0 * math.sqrt(k_r * m_c)))
        k_spring_roll.append(k_w * tracks[i] ** 2 / 2.0)
        k_bar_roll.append((c.anti_roll_bar_n_per_m or 0.0) * tracks[i] ** 2)
        rc.append(roll_centre_height_m(c))
    roll_axis_m = rc[1] + (rc[0] - rc[1]) * sprung_front  # at the sprung CG's x
    lever = float(ch.com_m[2]) - roll_axis_m
    k_roll = sum(k_spring_roll) + sum(k_bar_roll)
    gradient = ch.mass_kg * lever / (k_roll - ch.mass_kg * G * lever)  # rad per m/s^2
    izz = yaw_inertia_kg_m2(desc)
    return Characteristics(
        mass_kg=m, a_m=a, b_m=b, cg_height_m=float(g_xyz[2]),
        static_wheel_load_n=(m * G * b / (2.0 * L), m * G * a / (2.0 * L)),
        sprung_mass_kg=ch.mass_kg, corner_sprung_mass_kg=tuple(corner_mass), motion_ratio=tuple(float(x) for x in mr),
        ride_rate_n_per_m=tuple(ride_rate), ride_frequency_hz=tuple(freq), damping_ratio=tuple(zeta),
        roll_centre_m=tuple(rc), roll_lever_m=lever, spring_roll_stiffness_n_m_per_rad=tuple(k_spring_roll),
        bar_roll_stiffness_n_m_per_rad=tuple(k_bar_roll), roll_gradient_deg_per_g=math.degrees(gradient * G),
        front_roll_share=(k_spring_roll[0] + k_bar_roll[0]) / k_roll,
        yaw_inertia_kg_m2=izz, yaw_index=izz / (m * a * b), steering_ratio=vehicle.steering_ratio(vehicle.q_design),
        roll_gyration_m=math.sqrt(ch.inertia_kg_m2[0, 0] / ch.mass_kg),
        pitch_gyration_m=math.sqrt(ch.inertia_kg_m2[1, 1] / ch.mass_kg))


# ---------------------------------------------------------------- geometry
class _AxleMap:
    """p' = c' + diag(sx, sy, sz) (p - c): a template corner (wheel centre c) onto a new one (centre c').

    sy = t' / t0 (so the vehicle centre plane y = 0 stays put and arm lengths follow the track);
    sx = sz = r0' / r0 (fore-aft offsets and heights follow the wheel size). Lines, planes and
    pivot axes along x are kept, so the spring seat stays on its arm.
    """

    def __init__(self, centre_from: np.ndarray, centre_to: np.ndarray, size_scale: float, track_scale: float):
        self.c0, self.c1 = np.asarray(centre_from, float), np.asarray(centre_to, float)
        self.scale = np.array([size_scale, track_scale, size_scale])

    def __call__(self, p) -> list:
        return [float(v) for v in self.c1 + self.scale * (np.asarray(p, float) - self.c0)]


def _suspension(template: Corner, to: _AxleMap, steered: bool, mass_scale: float) -> dict:
    """The suspension section of a new left corner from a template corner (springs filled in later)."""
    def arm(a):
        return {"front_pivot_m": to(a.front_pivot_m), "rear_pivot_m": to(a.rear_pivot_m),
                "ball_joint_m": to(a.ball_joint_m), "mass_kg": a.mass_kg * mass_scale}

    sd = template.spring_damper
    out = {"type": template.suspension_type, "lower_arm": arm(template.lower_arm)}
    if template.suspension_type == "double_wishbone":
        out["upper_arm"] = arm(template.upper_arm)
        out["spring_damper"] = {"chassis_m": to(sd.chassis_m), "arm_m": to(sd.arm_m), "on": sd.on}
    else:
        out["strut"] = {"top_mount_m": to(template.strut.top_mount_m), "knuckle_m": to(template.strut.knuckle_m),
                        "mass_kg": template.strut.mass_kg * mass_scale}
        out["spring_damper"] = {}
    out["spring_damper"].update(stiffness_n_per_m=sd.stiffness_n_per_m, damping_n_s_per_m=sd.damping_n_s_per_m)
    link = template.tie_rod
    out["tie_rod" if steered else "toe_link"] = {"inner_m": to(link.inner_m), "outer_m": to(link.outer_m),
                                                 "mass_kg": link.mass_kg * mass_scale}
    return out


def _rack_sign(suspension: dict) -> float:
    """+1 when the tie rod's outer end is ahead of the steering axis (rack to the left turns the wheels
    left), -1 when behind; the axis runs from the lower ball joint to the upper one or the strut top."""
    bottom = np.array(suspension["lower_arm"]["ball_joint_m"])
    top = np.array(suspension["upper_arm"]["ball_joint_m"] if "upper_arm" in suspension
                   else suspension["strut"]["top_mount_m"])
    outer = np.array(suspension["tie_rod"]["outer_m"])
    axis_x = bottom[0] + (top[0] - bottom[0]) * (outer[2] - bottom[2]) / (top[2] - bottom[2])
    return 1.0 if outer[0] > axis_x else -1.0


# ---------------------------------------------------------------- the generator
@dataclass(frozen=True)
class Generated:
    """A generated car: the description dict (as written), the header comment lines and its figures."""

    data: dict
    header: list
    figures: Characteristics
    template_figures: Characteristics


def generate(numbers: CarNumbers, template: VehicleDescription | None = None,
             template_tire_width_m: float = DEFAULT_TIRE_WIDTH_M) -> Generated:
    """Scale ``template`` (default: the default car, whose tires are ``template_tire_width_m`` wide; the
    schema has no tire width) to ``numbers`` (see the module docstring)."""
    n = _validated(numbers)
    if template is None:
        from ..paths import default_vehicle_path

        template = load_vehicle(default_vehicle_path())
    ref = characteristics(template)
    notes: dict[str, str] = {}
    m, L, a, h = n.mass, n.wheelbase, n.cg_to_front_axle, n.cg_height
    b = L - a
    tracks = (n.front_track, n.rear_track)
    kinds = (n.front_suspension or template.corner("fl").suspension_type,
             n.rear_suspension or template.corner("rl").suspension_type)
    notes["front_suspension"] = "given" if n.front_suspension else "template's"
    notes["rear_suspension"] = "given" if n.rear_suspension else "template's"

    # --- tire size, loads, wheel centres
    tpl_fl = template.corner("fl")
    r0_tpl = tpl_fl.wheel.unloaded_radius_m
    width_tpl = template_tire_width_m
    if n.tire_size is not None:
        width_m, _, r0 = tire_size_m(n.tire_size)
        notes["wheel_radius"] = "from --tire-size: rim diameter / 2 + width x aspect ratio"
    else:
        width_m, r0 = None, n.wheel_radius
        notes["wheel_radius"] = "given"
    mass_scale, size_scale = m / template.total_mass_kg, r0 / r0_tpl
    wheel_load = (m * G * b / (2.0 * L), m * G * a / (2.0 * L))
    k_tire = tpl_fl.tire.vertical_stiffness_n_per_m * mass_scale  # same mean static deflection as the template
    centre_z = [r0 - load / k_tire for load in wheel_load]
    centres = (np.array([L, tracks[0] / 2.0, centre_z[0]]), np.array([0.0, tracks[1] / 2.0, centre_z[1]]))

    # --- corners: template of the chosen type, moved onto the new wheel centre
    axles, wheels = {}, {}
    template_track = {"front": template.track_m[0], "rear": template.track_m[1]}
    steered_axle = template.steering.steered_axle
    for i, axle in enumerate(("front", "rear")):
        own = template.corner(axle[0] + "l")
        source = own if own.suspension_type == kinds[i] else _corner_of_type(template, kinds[i])
        to = _AxleMap(source.wheel_centre_m, centres[i], size_scale, tracks[i] / template_track[source.axle])
        axles[axle] = {
            "steered": axle == steered_axle,
            "suspension": _suspension(source, to, axle == steered_axle, mass_scale),
            "knuckle": {"mass_kg": own.knuckle_mass_kg * mass_scale,
                        "inertia_kg_m2": [float(v) for v in np.diag(own.knuckle_inertia_kg_m2) * mass_scale * size_scale ** 2]},
            "wheel_centre_m": [float(v) for v in centres[i]],
            "spin_axis": [float(v) for v in own.spin_axis],
        }
        w = own.wheel
        wheels[axle] = {
            "mass_kg": w.mass_kg * mass_scale,
            "spin_inertia_kg_m2": w.spin_inertia_kg_m2 * mass_scale * size_scale ** 2,  # I = m r^2 x template's I/(m r^2)
            "transverse_inertia_kg_m2": w.transverse_inertia_kg_m2 * mass_scale * size_scale ** 2,
            "unloaded_radius_m": r0,
            "dynamic_radius_m": (2.0 * r0 + centre_z[i]) / 3.0,  # (2 r0 + r_static) / 3 [Rill]
        }
    front_link = axles[steered_axle]["suspension"]["tie_rod"]
    rack_centre = [front_link["inner_m"][0], 0.0, front_link["inner_m"][2]]
    rack_sign = _rack_sign(axles[steered_axle]["suspension"])
    ratio_target = n.steering_ratio or ref.steering_ratio
    notes["steering_ratio"] = "given" if n.steering_ratio else f"template's ({ref.steering_ratio:.2f})"
    gain0 = rack_sign * abs(template.steering.rack_travel_per_steering_wheel_rad_m) * size_scale * ref.steering_ratio / ratio_target
    data = {
        "name": n.name or "my_car",
        "chassis": {"mass_kg": 0.0, "com_m": [L - a, 0.0, h], "inertia_kg_m2": {}},
        "axles": axles,
        "steering": {"rack_travel_per_steering_wheel_rad_m": gain0,
                     "rack": {"centre_m": rack_centre, "mass_kg": template.steering.rack_mass_kg * mass_scale},
                     "max_steering_wheel_angle_rad": template.steering.max_steering_wheel_angle_rad},
        "wheels": wheels,
        "tire": None,
        "drivetrain": None,
        "aerodynamics": None,
        "sensors": None,
    }
    data["tire"] = _tire(template, n, width_m, width_tpl, r0, k_tire, wheel_load, notes)

    # --- masses: parts scaled, the chassis (sprung mass) is the rest, its CG puts the total CG at (L - a, 0, h)
    data["chassis"].update(mass_kg=m - data["steering"]["rack"]["mass_kg"] - _parts_mass_kg(axles, wheels),
                           inertia_kg_m2=_inertia_dict(template.chassis.inertia_kg_m2))
    data["drivetrain"] = _drivetrain(template, ref, n, m, a, b, h, L, wheels)
    data["aerodynamics"], data["sensors"] = _aero_and_sensors(template, ref, L, h, tracks, n, notes)
    trial = _load(data)
    masses, points = trial.lumped_masses()
    m_s = float(masses[0])
    if m_s < 0.5 * m:
        raise _refuse("mass", f"{m:g} kg leaves {m_s:.0f} kg of sprung mass after the scaled parts: too light")
    parts_moment = masses[1:] @ points[1:]
    target_cg = np.array([L - a, 0.0, h])
    sprung_cg = (m * target_cg - parts_moment) / m_s
    data["chassis"]["com_m"] = [float(v) for v in sprung_cg]

    # --- springs, dampers and bars from the targets, on the motion ratios of this geometry
    vehicle = DetailedVehicle(_load(data))
    mr = motion_ratios(vehicle)[[0, 2]]
    sprung_front = sprung_cg[0] / L  # the rear axle is at x = 0
    ride = (n.front_ride_frequency or ref.ride_frequency_hz[0], n.rear_ride_frequency or ref.ride_frequency_hz[1])
    for field, i in (("front_ride_frequency", 0), ("rear_ride_frequency", 1)):
        notes[field] = "given" if getattr(n, field) else f"template's ({ref.ride_frequency_hz[i]:.3f} Hz)"
    spring_roll = []
    for i, axle in enumerate(("front", "rear")):
        m_c = m_s * (sprung_front if i == 0 else 1.0 - sprung_front) / 2.0
        k_r = m_c * (2.0 * math.pi * ride[i]) ** 2  # ride rate
        if k_r >= 0.5 * k_tire:
            raise _refuse(f"{axle}_ride_frequency", f"{ride[i]:g} Hz needs a ride rate of {k_r / 1e3:.0f} kN/m, too "
                                                    f"close to the tire's {k_tire / 1e3:.0f} kN/m")
        k_w = k_r * k_tire / (k_tire - k_r)  # wheel rate: k_r = k_w k_t / (k_w + k_t) solved for k_w
        sd = axles[axle]["suspension"]["spring_damper"]
        sd["stiffness_n_per_m"] = k_w / mr[i] ** 2
        sd["damping_n_s_per_m"] = 2.0 * ref.damping_ratio[i] * math.sqrt(k_r * m_c) / mr[i] ** 2
        spring_roll.append(k_w * tracks[i] ** 2 / 2.0)
    rc = [roll_centre_height_m(vehicle.desc.corner(c)) for c in ("fl", "rl")]
    lever = sprung_cg[2] - (rc[1] + (rc[0] - rc[1]) * sprung_front)  # h': sprung CG above the roll axis
    gradient_deg_g = n.roll_gradient or ref.roll_gradient_deg_per_g
    notes["roll_gradient"] = "given" if n.roll_gradient else f"template's ({ref.roll_gradient_deg_per_g:.2f} deg/g)"
    gradient = math.radians(gradient_deg_g) / G  # rad per m/s^2
    k_roll = m_s * lever * (1.0 / gradient + G)  # phi / a_y = m_s h' / (K - m_s g h') solved for K
    bars = []
    for i, axle in enumerate(("front", "rear")):
        share = ref.front_roll_share if i == 0 else 1.0 - ref.front_roll_share
        k_bar = (share * k_roll - spring_roll[i]) / tracks[i] ** 2
        bars.append(k_bar)
        if k_bar > 0.01 * spring_roll[i] / tracks[i] ** 2:
            axles[axle]["suspension"]["anti_roll_bar"] = {"stiffness_n_per_m": k_bar}

    # --- steering gain: measured ratio 1 / (gain x steer rate) corrected to the target (exact: linear in 1 / gain)
    ratio_now = vehicle.steering_ratio(vehicle.q_design)
    gain = gain0 * ratio_now / ratio_target
    rack_max = abs(template.steering.max_steering_wheel_angle_rad * template.steering.rack_travel_per_steering_wheel_rad_m) * size_scale
    data["steering"]["rack_travel_per_steering_wheel_rad_m"] = gain
    data["steering"]["max_steering_wheel_angle_rad"] = min(15.0, rack_max / abs(gain))

    # --- inertias: roll and pitch from the template's radii of gyration, yaw from the index or the input
    t_mean, t_mean_tpl = sum(tracks) / 2.0, sum(template.track_m) / 2.0
    ixx = m_s * (ref.roll_gyration_m * t_mean / t_mean_tpl) ** 2
    iyy = m_s * (ref.pitch_gyration_m * L / template.wheelbase_m) ** 2
    yaw_target = n.yaw_inertia or ref.yaw_index * m * a * b
    notes["yaw_inertia"] = "given" if n.yaw_inertia else f"yaw index Izz / (m a b) = {ref.yaw_index:.3f} (template's)"
    izz_trial = max(ixx, iyy)  # any value the loader accepts: the result is linear in it
    data["chassis"]["inertia_kg_m2"] = _inertia_dict(np.diag([ixx, iyy, izz_trial]))
    izz_chassis = yaw_target - (yaw_inertia_kg_m2(_load(data)) - izz_trial)
    if not abs(ixx - iyy) < izz_chassis < ixx + iyy:
        lo = yaw_target - izz_chassis + abs(ixx - iyy)
        hi = yaw_target - izz_chassis + ixx + iyy
        raise _refuse("yaw_inertia", f"{yaw_target:.0f} kg m^2 is outside what this car can have ({lo:.0f} .. {hi:.0f} "
                                     f"kg m^2, with the body's roll and pitch inertia {ixx:.0f} / {iyy:.0f} kg m^2)")
    j0 = template.chassis.inertia_kg_m2
    ixz = j0[0, 2] * (izz_chassis - ixx) / (j0[2, 2] - j0[0, 0])  # keeps the principal roll axis tilt
    data["chassis"]["inertia_kg_m2"] = _inertia_dict(np.array([[ixx, 0.0, ixz], [0.0, iyy, 0.0], [ixz, 0.0, izz_chassis]]))

    data = _rounded({k: v for k, v in data.items() if v is not None})
    desc = _load(data)
    figures = characteristics(desc)
    derived = dict(m_s=m_s, mr=mr, rc=rc, lever=lever, k_roll=k_roll, spring_roll=spring_roll, bars=bars,
                   k_tire=k_tire, size_scale=size_scale, mass_scale=mass_scale, gain=gain, width_m=width_m,
                   ratio_target=ratio_target, ride=ride, gradient_deg_g=gradient_deg_g, yaw_target=yaw_target,
                   tracks=tracks, kinds=kinds)
    header = _header(n, template, ref, figures, desc, derived, notes)
    return Generated(data, header, figures, ref)


def _corner_of_type(template: VehicleDescription, kind: str) -> Corner:
    for c in template.corners:
        if c.suspension_type == kind and c.side == 1:
            return c
    raise CarNumbersError(f"the template car has no {kind} corner to scale")


def _parts_mass_kg(axles: dict, wheels: dict) -> float:
    """Wheel, knuckle, arms, strut and link of the four corners (kg)."""
    total = 0.0
    for axle, spec in axles.items():
        susp = spec["suspension"]
        parts = [susp[k]["mass_kg"] for k in ("lower_arm", "upper_arm", "strut", "tie_rod", "toe_link") if k in susp]
        total += 2.0 * (sum(parts) + spec["knuckle"]["mass_kg"] + wheels[axle]["mass_kg"])
    return total


def _tire(template, n: CarNumbers, width_m, width_tpl, r0, k_tire, wheel_load, notes) -> dict:
    """Tire parameters: vertical, tread and damping rates x m / m0 (same static deflection); slip stiffnesses
    per unit load from the given cornering stiffness C / F_z, or by the brush model from the width.

    Brush model (Pacejka 2012 §3.2): C_alpha = 2 c_p a^2 with the tread stiffness c_p proportional to the
    width w and the contact half-length a^2 ~ 2 r0 delta, delta = F_z / k_t; so C_alpha / F_z ~ w r0 / k_t
    and the template's coefficient is multiplied by (w r0 / k_t) / (w0 r00 / k_t0). The longitudinal
    slip stiffness keeps its ratio to the cornering stiffness (both are 2 c_p a^2 in the brush model).
    """
    t0 = template.corner("fl").tire
    k_scale = k_tire / t0.vertical_stiffness_n_per_m
    # optional keys only where they differ from their defaults (a linearised tire refuses the Magic-Formula ones)
    base = {f.name: getattr(t0, f.name) for f in dataclasses.fields(t0) if getattr(t0, f.name) != f.default}
    for key in ("vertical_stiffness_n_per_m", "vertical_damping_n_s_per_m", "deflection_stiffness_x_n_per_m",
                "deflection_stiffness_y_n_per_m", "deflection_damping_x_n_s_per_m", "deflection_damping_y_n_s_per_m"):
        base[key] = base[key] * k_scale
    r0_tpl = template.corner("fl").wheel.unloaded_radius_m
    if n.cornering_stiffness is None:
        factor = (width_m * r0 / k_tire) / (width_tpl * r0_tpl / t0.vertical_stiffness_n_per_m)
        coefficients = [t0.cornering_stiffness_per_rad * factor] * 2
        notes["cornering_stiffness"] = "brush model from the tire width (Tire, below)"
    else:
        given = (n.cornering_stiffness, n.rear_cornering_stiffness or n.cornering_stiffness)
        coefficients = [given[i] / wheel_load[i] for i in range(2)]
        for i, axle in enumerate(("front", "rear")):
            lo, hi = _CORNERING_COEFFICIENT_RANGE
            if not lo <= coefficients[i] <= hi:
                field = "cornering_stiffness" if i == 0 or n.rear_cornering_stiffness is None else "rear_cornering_stiffness"
                raise _refuse(field, f"{given[i]:g} N/rad is {coefficients[i]:.1f} per rad per unit load on the {axle} "
                                     f"tires ({wheel_load[i]:.0f} N); expected {lo:g} .. {hi:g}")
        notes["cornering_stiffness"] = "given" + ("" if n.rear_cornering_stiffness else " (both axles)")
    sets = []
    for c in coefficients:
        tire = dict(base)
        tire["cornering_stiffness_per_rad"] = c
        tire["longitudinal_slip_stiffness"] = t0.longitudinal_slip_stiffness * c / t0.cornering_stiffness_per_rad
        sets.append(tire)
    return sets[0] if sets[0] == sets[1] else {"front": sets[0], "rear": sets[1]}


def _drivetrain(template, ref: Characteristics, n: CarNumbers, m, a, b, h, L, wheels) -> dict:
    """Drive: the template's total wheel torque x (m / m0) (r_dyn / r_dyn0) (the same acceleration),
    shared by the driven wheels. Brakes per wheel: the template's margin over a 1 g stop, where a 1 g
    stop needs F_front = m g (b + h) / (2 L) and F_rear = m g (a - h) / (2 L) per wheel (load transfer),
    times r_dyn; the rear load is kept at least a tenth of its static value."""
    tpl = template.drivetrain
    r_tpl = [template.corner(c).wheel.dynamic_radius_m for c in ("fl", "rl")]
    r_new = [wheels[axle]["dynamic_radius_m"] for axle in ("front", "rear")]
    driven_tpl = sum(c.driven for c in template.corners)
    total = tpl.max_drive_torque_per_wheel_n_m * driven_tpl * (m / template.total_mass_kg) * (r_new[0] / r_tpl[0])
    driven = 4 if n.driven_axle == "all" else 2

    def stop_1g(mass, a_, b_, h_, L_, radii):
        return (mass * G * (b_ + h_) / (2.0 * L_) * radii[0],
                mass * G * max(a_ - h_, 0.1 * a_) / (2.0 * L_) * radii[1])

    need_tpl = stop_1g(ref.mass_kg, ref.a_m, ref.b_m, ref.cg_height_m, template.wheelbase_m, r_tpl)
    need = stop_1g(m, a, b, h, L, r_new)
    return {"driven_axle": n.driven_axle, "max_drive_torque_per_wheel_n_m": total / driven,
            "max_brake_torque_n_m": {"front": tpl.max_brake_torque_front_n_m * need[0] / need_tpl[0],
                                     "rear": tpl.max_brake_torque_rear_n_m * need[1] / need_tpl[1]}}


def _aero_and_sensors(template, ref: Characteristics, L, h, tracks, n: CarNumbers, notes: dict) -> tuple:
    """Drag area x (t / t0)(h / h0) (frontal area ~ width x height) unless given; centre of pressure, IMU and GNSS
    antenna with x x L / L0 and z x h / h0 (the roof follows the CG height); with a downforce area the centre of pressure
    lies where the axles share the downforce by ``aero_balance`` (default: as they share the weight); frame names and
    encoder counts kept."""
    sx, sz = L / template.wheelbase_m, h / ref.cg_height_m
    width_scale = sum(tracks) / sum(template.track_m)

    def moved(p):
        return [float(p[0] * sx), float(p[1] * width_scale), float(p[2] * sz)]

    aero = None
    if template.aerodynamics is not None:
        t = template.aerodynamics
        aero = {"drag_area_m2": n.drag_area or t.drag_area_m2 * width_scale * sz, "air_density_kg_m3": t.air_density_kg_m3,
                "centre_of_pressure_m": moved(t.centre_of_pressure_m)}
        notes["drag_area"] = "given" if n.drag_area else "template's, scaled by track and CG height"
        if n.downforce_area:
            x_rear = moved(template.corner("rl").wheel_centre_m)[0]
            balance = n.aero_balance if n.aero_balance is not None else (L - n.cg_to_front_axle) / L
            aero["downforce_area_m2"] = n.downforce_area
            aero["centre_of_pressure_m"][0] = x_rear + balance * L
            notes["aero_balance"] = "given" if n.aero_balance is not None else "the weight's (CG position)"
    s = template.sensors
    sensors = {"imu": {"frame_id": s.imu_frame_id, "position_m": moved(s.imu_position_m),
                       "orientation_rpy_rad": [float(v) for v in s.imu_orientation_rpy_rad]},
               "gnss": {"frame_id": s.gnss_frame_id, "antenna_position_m": moved(s.gnss_antenna_position_m)},
               "wheel_encoders": {"counts_per_revolution": s.encoder_counts_per_revolution},
               "steering": {"frame_id": s.steering_frame_id}}
    return aero, sensors


def _inertia_dict(j: np.ndarray) -> dict:
    return {"xx": float(j[0, 0]), "yy": float(j[1, 1]), "zz": float(j[2, 2]),
            "xy": float(j[0, 1]), "xz": float(j[0, 2]), "yz": float(j[1, 2])}


def _aero_rows(desc: VehicleDescription, notes: dict) -> list:
    """Header rows of the aerodynamics: drag and downforce areas, the front axle's share of the downforce."""
    aero = desc.aerodynamics
    if aero is None:
        return []
    x_front, x_rear = desc.corner("fl").wheel_centre_m[0], desc.corner("rl").wheel_centre_m[0]
    balance = (aero.centre_of_pressure_m[0] - x_rear) / (x_front - x_rear)
    return [("drag_area", f"{aero.drag_area_m2:.3f} m^2", notes.get("drag_area", "template's")),
            ("downforce_area", f"{aero.downforce_area_m2:.3f} m^2", "given" if aero.downforce_area_m2 else "none"),
            ("aero_balance", f"{balance:.3f}" if aero.downforce_area_m2 else "-", notes.get("aero_balance", "no downforce"))]


def _load(data: dict) -> VehicleDescription:
    """Validate a generated dict; a failure here is a bug of the generator or an extreme input."""
    clean = {k: v for k, v in data.items() if v is not None}
    try:
        return load_vehicle_dict(clean, "<generated>")
    except VehicleConfigError as exc:
        raise CarNumbersError(f"the numbers give an invalid car: {exc}") from None


def _rounded(obj):
    """Floats to 6 significant digits (0.1 mm on a 3 m car), as plain Python numbers."""
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        value = float(f"{float(obj):.6g}")
        return 0.0 if abs(value) < 1e-12 else value  # no -0.0 and no round-off residue on y = 0
    return obj


# ---------------------------------------------------------------- the header comment
def _header(n: CarNumbers, template, ref: Characteristics, fig: Characteristics, desc: VehicleDescription,
            d: dict, notes: dict) -> list:
    """The header comment: inputs (given or how derived), each derivation with its equation, the result."""
    from .. import __version__

    L, a, h, m = n.wheelbase, n.cg_to_front_axle, n.cg_height, n.mass
    fl, rl = desc.corner("fl"), desc.corner("rl")
    rows = [
        ("mass", f"{m:g} kg", "given (total as driven, with the driver)"),
        ("wheelbase", f"{L:g} m", "given"),
        ("front_track", f"{n.front_track:g} m", "given"),
        ("rear_track", f"{n.rear_track:g} m", "given"),
        ("cg_to_front_axle", f"{a:g} m", f"given (b = L - a = {L - a:.4g} m, {100 * (L - a) / L:.1f} % front)"),
        ("cg_height", f"{h:g} m", "given"),
        ("driven_axle", n.driven_axle, "given"),
        ("tire_size", n.tire_size or "-", "given" if n.tire_size else "not given"),
        ("wheel_radius", f"{fl.wheel.unloaded_radius_m:.4f} m", notes["wheel_radius"]),
        ("cornering_stiffness", f"{fl.tire.cornering_stiffness_per_rad * fig.static_wheel_load_n[0]:.0f} / "
                                f"{rl.tire.cornering_stiffness_per_rad * fig.static_wheel_load_n[1]:.0f} N/rad",
         f"per tire at its static load, front / rear: {notes['cornering_stiffness']}"),
        ("yaw_inertia", f"{d['yaw_target']:.0f} kg m^2", notes["yaw_inertia"]),
        ("steering_ratio", f"{d['ratio_target']:.2f}", notes["steering_ratio"]),
        ("front_suspension", d["kinds"][0], notes["front_suspension"]),
        ("rear_suspension", d["kinds"][1], notes["rear_suspension"]),
        ("front_ride_frequency", f"{d['ride'][0]:.3f} Hz", notes["front_ride_frequency"]),
        ("rear_ride_frequency", f"{d['ride'][1]:.3f} Hz", notes["rear_ride_frequency"]),
        ("roll_gradient", f"{d['gradient_deg_g']:.2f} deg/g", notes["roll_gradient"]),
        *_aero_rows(desc, notes),
    ]
    wide = max(len(option(r[0])) for r in rows)
    sd_f, sd_r = fl.spring_damper, rl.spring_damper
    kt = fl.tire.vertical_stiffness_n_per_m
    dt = desc.drivetrain
    lines = [
        f"{desc.name}: generated by `state-observer vehicle new` (state_observer {__version__}) from the numbers below.",
        f"Template: '{template.name}' ({Path(template.source).name}), {template.total_mass_kg:.0f} kg, L0 = "
        f"{template.wheelbase_m:g} m, r00 = {template.corner('fl').wheel.unloaded_radius_m:g} m. Its geometry is scaled "
        "and its ride and roll targets kept unless given.",
        "This is an ordinary vehicle file: edit any key (the detailed description is the expert path, see",
        "config/vehicles/default.yaml for every key); `vehicle new --force` regenerates it from scratch.",
        "Symbols: m mass, L wheelbase, a / b CG behind the front / ahead of the rear axle, h CG height, t track,",
        "r0 unloaded tire radius, g = 9.81 m/s^2; a trailing 0 marks the template's value.",
        "",
        "Inputs",
        *[f"  {option(k):<{wide}}  {v:<20} {how}" for k, v, how in rows],
        "",
        "Derivation",
        f"  Static wheel loads: front m g b / (2 L) = {fig.static_wheel_load_n[0]:.0f} N, rear m g a / (2 L) = "
        f"{fig.static_wheel_load_n[1]:.0f} N.",
        f"  Geometry: each corner is the template's {d['kinds'][0]} / {d['kinds'][1]} corner mapped p' = c' + diag(sx, sy, sz)(p - c)",
        f"    about its wheel centre c: sx = sz = r0 / r00 = {d['size_scale']:.4f} (fore-aft offsets and heights follow the",
        f"    wheel), sy = t / t0 = {d['tracks'][0] / template.track_m[0]:.4f} front, {d['tracks'][1] / template.track_m[1]:.4f}"
        " rear (arm lengths follow the track). Static camber and toe are the template's.",
        f"  Masses: every part (wheels, knuckles, arms, links, struts, rack) x m / m0 = {d['mass_scale']:.4f}: unsprung "
        f"{fl.parts_mass_kg:.1f} kg front, {rl.parts_mass_kg:.1f} kg rear corner;",
        f"    chassis (sprung, with the driver) m_s = m - parts = {desc.chassis.mass_kg:.1f} kg, its CG "
        f"({desc.chassis.com_m[0]:.4f}, 0, {desc.chassis.com_m[2]:.4f}) m puts the car's at (L - a, 0, h).",
        f"  Tire: k_t = k_t0 m / m0 = {kt / 1e3:.1f} kN/m (the template's mean static deflection); wheel centre z = r0 - "
        f"F_z / k_t = {fl.wheel_centre_m[2]:.4f} / {rl.wheel_centre_m[2]:.4f} m;",
        f"    dynamic radius (2 r0 + z) / 3 [Rill] = {fl.wheel.dynamic_radius_m:.4f} / {rl.wheel.dynamic_radius_m:.4f} m;"
        " tread stiffness and damping x m / m0.",
        f"    Cornering stiffness per unit load {fl.tire.cornering_stiffness_per_rad:.2f} / "
        f"{rl.tire.cornering_stiffness_per_rad:.2f} 1/rad: C / F_z, or by the brush model C = 2 c_p a^2 with",
        "    c_p ~ width and a^2 ~ 2 r0 F_z / k_t, i.e. the template's x (w r0 / k_t) / (w0 r00 / k_t0); the longitudinal",
        f"    slip stiffness keeps the template's ratio to it ({fl.tire.longitudinal_slip_stiffness:.2f} / "
        f"{rl.tire.longitudinal_slip_stiffness:.2f}).",
        f"  Springs: motion ratio MR (spring per wheel travel, on the detailed model) {d['mr'][0]:.4f} / {d['mr'][1]:.4f};",
        f"    corner sprung mass m_c = m_s x axle share / 2 = {fig.corner_sprung_mass_kg[0]:.1f} / {fig.corner_sprung_mass_kg[1]:.1f} kg;"
        " ride rate k_r = m_c (2 pi f)^2;",
        f"    wheel rate k_w = k_r k_t / (k_t - k_r); spring k = k_w / MR^2 = {sd_f.stiffness_n_per_m:.0f} / "
        f"{sd_r.stiffness_n_per_m:.0f} N/m.",
        f"  Dampers: c = 2 zeta sqrt(k_r m_c) / MR^2 with the template's zeta {ref.damping_ratio[0]:.3f} / "
        f"{ref.damping_ratio[1]:.3f}: {sd_f.damping_n_s_per_m:.0f} / {sd_r.damping_n_s_per_m:.0f} N s/m.",
        f"  Roll (rigid tires): front-view roll centres {d['rc'][0]:.4f} / {d['rc'][1]:.4f} m; sprung CG h' = "
        f"{d['lever']:.4f} m above the roll axis;",
        f"    phi / a_y = m_s h' / (K - m_s g h') gives K = m_s h' (1 / G + g) = {d['k_roll'] / 1e3:.2f} kN m/rad;"
        f" springs k_w t^2 / 2 = {d['spring_roll'][0] / 1e3:.2f} / {d['spring_roll'][1] / 1e3:.2f} kN m/rad;",
        f"    bars k_bar t^2 = (share x K - springs), front share {ref.front_roll_share:.3f} (template's): k_bar = "
        f"{max(d['bars'][0], 0):.0f} / {max(d['bars'][1], 0):.0f} N/m"
        + (" (a bar under 1 % of the springs is left out)." if min(d["bars"]) < 0.01 * max(d["bars"]) else "."),
        f"  Inertia (sprung body): roll m_s (k_x0 t / t0)^2 = {desc.chassis.inertia_kg_m2[0, 0]:.0f}, pitch m_s (k_y0 L / L0)^2"
        f" = {desc.chassis.inertia_kg_m2[1, 1]:.0f} kg m^2 (k_x0 {ref.roll_gyration_m:.3f}, k_y0 {ref.pitch_gyration_m:.3f} m);",
        f"    yaw: the body's Izz = {desc.chassis.inertia_kg_m2[2, 2]:.0f} kg m^2 makes the whole car's (parts as point masses) "
        f"{fig.yaw_inertia_kg_m2:.0f} kg m^2; xz keeps the template's principal-axis tilt.",
        f"  Steering: rack travel per steering-wheel rad {desc.steering.rack_travel_per_steering_wheel_rad_m * 1e3:.4f} mm/rad so that"
        f" the detailed model's ratio at design is {fig.steering_ratio:.2f};",
        f"    lock: the template's rack travel x sx, +-{desc.steering.max_steering_wheel_angle_rad:.2f} rad at the wheel.",
        f"  Drive: the template's total wheel torque x (m / m0)(r_dyn / r_dyn0) over the driven wheels: "
        f"{dt.max_drive_torque_per_wheel_n_m:.0f} N m per wheel.",
        f"  Brakes: the template's margin over a 1 g stop, which needs m g (b + h) / (2 L) r_dyn front, m g (a - h) / (2 L) r_dyn"
        f" rear: {dt.max_brake_torque_front_n_m:.0f} / {dt.max_brake_torque_rear_n_m:.0f} N m.",
        "  Aerodynamics and sensors: drag area x (t / t0)(h / h0) (frontal area ~ width x height); centre of pressure, IMU",
        "    and GNSS antenna at x L / L0, y t / t0, z h / h0. Put in the real sensor mounts if you know them.",
        "",
        "Result (computed from this file)",
        f"  total {fig.mass_kg:.1f} kg, CG a = {fig.a_m:.4f} m, h = {fig.cg_height_m:.4f} m; static wheel loads "
        f"{fig.static_wheel_load_n[0]:.0f} / {fig.static_wheel_load_n[1]:.0f} N;",
        f"  ride {fig.ride_frequency_hz[0]:.3f} / {fig.ride_frequency_hz[1]:.3f} Hz, damping ratio "
        f"{fig.damping_ratio[0]:.3f} / {fig.damping_ratio[1]:.3f}; roll gradient {fig.roll_gradient_deg_per_g:.2f} deg/g, "
        f"front roll share {fig.front_roll_share:.3f};",
        f"  yaw inertia {fig.yaw_inertia_kg_m2:.0f} kg m^2 (index {fig.yaw_index:.3f}); steering ratio {fig.steering_ratio:.2f}.",
    ]
    return lines


def write_vehicle(numbers: CarNumbers, out: str | Path, *, force: bool = False) -> Generated:
    """Generate the car and write it to ``out`` (YAML with the header comment); refuses to replace an
    existing file unless ``force``. The text is loaded back with :func:`load_vehicle` before it replaces
    anything, so a written file always loads."""
    out = Path(out)
    if out.exists() and not force:
        raise CarNumbersError(f"--out: {out} exists; not overwriting it (use --force)")
    if out.is_dir():
        raise CarNumbersError(f"--out: {out} is a directory")
    if numbers.name is None:
        numbers = dataclasses.replace(numbers, name=out.stem or "my_car")
    car = generate(numbers)
    body = yaml.safe_dump(car.data, sort_keys=False, default_flow_style=None, width=120)
    text = "".join(f"# {line}".rstrip() + "\n" for line in car.header) + "\n" + body
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        load_vehicle(tmp)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return car


def new_command(numbers: CarNumbers, out: str | Path, *, force: bool = False, stdout=None, stderr=None) -> int:
    """Body of ``state-observer vehicle new``: 0 when written (the inputs, derived ones included, and the
    resulting figures printed), 2 on input it refuses and 1 when the file cannot be written (one line)."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:
        car = write_vehicle(numbers, out, force=force)
    except CarNumbersError as exc:
        print(f"state-observer vehicle new: {exc}", file=stderr)
        return 2
    except OSError as exc:
        print(f"state-observer vehicle new: {out}: cannot write: {exc.strerror or exc}", file=stderr)
        return 1
    inputs = car.header.index("Inputs")
    shown = car.header[inputs:car.header.index("", inputs)] + [""] + car.header[car.header.index("Result (computed from this file)"):]
    print("\n".join(shown), file=stdout)
    print(f"vehicle new: wrote {out} (the header comment lists every derivation)", file=stdout)
    return 0

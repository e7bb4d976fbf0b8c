"""Vehicle description: the default car loads and is plausible, bad files fail with one line,
and the default hardpoints give sensible kinematics (checked with an independent solver)."""
from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from state_observer.vehicle.description import (
    CORNERS, VehicleConfigError, load_vehicle, load_vehicle_dict)
from state_observer.vehicle.detailed import tire_parameters

DEFAULT = Path(__file__).resolve().parents[1] / "config" / "vehicles" / "default.yaml"
SRC = "cfg/x.yaml"
G = 9.81


def raw() -> dict:
    """The default file as a plain dict, as yaml.safe_load gives it, with the key ``on`` repaired
    (YAML 1.1 reads it as True; load_vehicle's own loader does not)."""
    data = yaml.safe_load(DEFAULT.read_text())
    for axle in data["axles"].values():
        spring = axle["suspension"]["spring_damper"]
        if True in spring:
            spring["on"] = spring.pop(True)
    return data


@pytest.fixture(scope="module")
def vehicle():
    return load_vehicle(DEFAULT)


# ---------------------------------------------------------------- the default car
def test_default_is_a_plausible_midsize_car(vehicle):
    v = vehicle
    assert v.name == "default_sedan" and v.source == str(DEFAULT)
    assert 1400.0 <= v.total_mass_kg <= 1600.0
    assert [c.name for c in v.corners] == list(CORNERS)
    assert v.wheelbase_m == pytest.approx(2.70)
    assert v.track_m == pytest.approx((1.58, 1.56))
    front_share = v.com_m[0] / v.wheelbase_m
    assert 0.53 <= front_share <= 0.62  # front-wheel drive, front heavy
    assert 0.50 <= v.com_m[2] <= 0.55
    # parts add up: chassis + rack + 4 corners (wheel, knuckle, arms, strut, link)
    fl, rl = v.corner("fl"), v.corner("rl")
    assert fl.parts_mass_kg == pytest.approx(23.0 + 12.0 + 4.0 + 2.0 + 1.0)
    assert rl.parts_mass_kg == pytest.approx(21.0 + 10.0 + 3.5 + 6.0 + 0.8)
    assert v.total_mass_kg == pytest.approx(1330.0 + 4.0 + 2 * (42.0 + 41.3))
    assert [c.driven for c in v.corners] == [True, True, False, False]
    assert [c.max_drive_torque_n_m for c in v.corners] == [1700.0, 1700.0, 0.0, 0.0]
    assert fl.steered and not rl.steered and v.steering.steered_axle == "front"
    assert fl.spring_damper.on == "lower_arm"  # YAML 1.1 would have read the key `on` as True
    assert rl.spring_damper.on == "knuckle" and rl.anti_roll_bar_n_per_m is None
    assert fl.anti_roll_bar_n_per_m == 8000.0
    assert v.aerodynamics is not None and v.aerodynamics.drag_area_m2 == 0.64 and v.aerodynamics.downforce_area_m2 == 0.0
    assert v.sensors.encoder_counts_per_revolution == 48 and v.sensors.imu_frame_id == "imu_link"
    # the chassis tensor is the one written (xz entry) and is symmetric
    j = v.chassis.inertia_kg_m2
    assert j[0, 2] == j[2, 0] == 50.0 and np.allclose(j, j.T)


def test_default_is_frozen(vehicle):
    with pytest.raises(dataclasses.FrozenInstanceError):
        vehicle.chassis.mass_kg = 1.0
    with pytest.raises(ValueError):
        vehicle.corners[0].wheel_centre_m[1] = 0.0


def test_whole_car_yaw_inertia_is_typical(vehicle):
    """Yaw index Izz / (m a b) of the whole car near 1 (typical of sedans)."""
    v = vehicle
    g = v.com_m
    izz = v.chassis.inertia_kg_m2[2, 2] + v.chassis.mass_kg * np.sum((v.chassis.com_m - g)[:2] ** 2)
    for c in v.corners:
        izz += (c.wheel.mass_kg + c.knuckle_mass_kg) * np.sum((c.wheel_centre_m - g)[:2] ** 2)
    a, b = v.wheelbase_m - g[0], g[0]
    assert 0.85 <= izz / (v.total_mass_kg * a * b) <= 1.15


def test_right_corners_mirror_the_left(vehicle):
    flip = np.array([1.0, -1.0, 1.0])
    for left, right in (("fl", "fr"), ("rl", "rr")):
        lc, rc = vehicle.corner(left), vehicle.corner(right)
        assert (lc.side, rc.side) == (1, -1)
        for path in ("wheel_centre_m", "spin_axis", "lower_arm.ball_joint_m", "lower_arm.front_pivot_m",
                     "tie_rod.inner_m", "tie_rod.outer_m", "spring_damper.chassis_m", "spring_damper.arm_m"):
            lv, rv = _attr(lc, path), _attr(rc, path)
            assert rv[1] < 0.0 < lv[1], path
            np.testing.assert_array_equal(rv, lv * flip)
        m = np.diag(flip)
        np.testing.assert_array_equal(rc.knuckle_inertia_kg_m2, m @ lc.knuckle_inertia_kg_m2 @ m)
        assert rc.wheel is lc.wheel and rc.tire is lc.tire
        assert rc.spring_damper.stiffness_n_per_m == lc.spring_damper.stiffness_n_per_m
    np.testing.assert_array_equal(vehicle.corner("fr").upper_arm.ball_joint_m,
                                  vehicle.corner("fl").upper_arm.ball_joint_m * flip)
    np.testing.assert_array_equal(vehicle.corner("rr").strut.top_mount_m,
                                  vehicle.corner("rl").strut.top_mount_m * flip)


def _attr(obj, path):
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def test_tire_compression_at_design_matches_static_load(vehicle):
    """Wheel centre heights are consistent with the static axle loads and the tire stiffness."""
    v = vehicle
    front_share = v.com_m[0] / v.wheelbase_m
    for c in v.corners:
        share = front_share if c.axle == "front" else 1.0 - front_share
        load_n = v.total_mass_kg * G * share / 2.0
        compression_m = c.wheel.unloaded_radius_m - c.wheel_centre_m[2]
        assert compression_m == pytest.approx(load_n / c.tire.vertical_stiffness_n_per_m, abs=1.5e-3)
        assert c.wheel_centre_m[2] < c.wheel.dynamic_radius_m < c.wheel.unloaded_radius_m


# ---------------------------------------------------------------- independent kinematics
def knuckle_pose(c, dz_m: float, rack_m: float = 0.0):
    """Knuckle displacement with the chassis fixed and the wheel centre raised by dz_m.

    Unknowns: rotation vector and translation of the knuckle about the design wheel centre.
    Equations: each arm keeps its ball joint's distances to its two pivots; a strut's axis
    (fixed in the knuckle) passes through the top mount; the tie rod or toe link keeps its length
    (inner end moved by rack_m along y on a steered axle); the wheel-centre height is set.
    Returns (R, d): p -> R (p - w0) + w0 + d.
    """
    w0 = c.wheel_centre_m
    inner = c.tie_rod.inner_m + np.array([0.0, rack_m if c.steered else 0.0, 0.0])
    arms = [a for a in (c.lower_arm, c.upper_arm) if a is not None]

    def place(x, p):
        return Rotation.from_rotvec(x[:3]).apply(p - w0) + w0 + x[3:]

    def residual(x):
        res = []
        for arm in arms:
            bj = place(x, arm.ball_joint_m)
            for pivot in (arm.front_pivot_m, arm.rear_pivot_m):
                res.append(np.linalg.norm(bj - pivot) - np.linalg.norm(arm.ball_joint_m - pivot))
        if c.strut is not None:
            top, k0 = c.strut.top_mount_m, c.strut.knuckle_m
            u = Rotation.from_rotvec(x[:3]).apply((top - k0) / np.linalg.norm(top - k0))
            res.extend(np.cross(top - place(x, k0), u))
        res.append(np.linalg.norm(place(x, c.tie_rod.outer_m) - inner)
                   - np.linalg.norm(c.tie_rod.outer_m - c.tie_rod.inner_m))
        res.append(place(x, w0)[2] - w0[2] - dz_m)
        return np.array(res)

    sol = least_squares(residual, np.zeros(6), xtol=1e-15, ftol=1e-15, gtol=1e-15)
    assert np.max(np.abs(sol.fun)) < 1e-10
    return Rotation.from_rotvec(sol.x[:3]).as_matrix(), sol.x[3:]


def camber_toe_deg(c, R):
    """Camber (+ top outward) and toe (+ toe-in) of the wheel after the knuckle rotation R."""
    a = R @ c.spin_axis  # points outboard
    return -math.degrees(math.asin(a[2])), math.degrees(math.atan2(a[0], c.side * a[1]))


def spring_length_m(c, R, d):
    """Spring length: along the strut, or chassis_m to arm_m with the arm turned about its pivots."""
    sd, w0 = c.spring_damper, c.wheel_centre_m
    if sd.on == "knuckle":
        u = R @ (sd.chassis_m - sd.arm_m) / np.linalg.norm(sd.chassis_m - sd.arm_m)
        return float((sd.chassis_m - (R @ (sd.arm_m - w0) + w0 + d)) @ u)
    arm = c.lower_arm if sd.on == "lower_arm" else c.upper_arm
    p = arm.front_pivot_m
    axis = (arm.rear_pivot_m - p) / np.linalg.norm(arm.rear_pivot_m - p)
    v0 = arm.ball_joint_m - p
    v1 = R @ (arm.ball_joint_m - w0) + w0 + d - p
    v0, v1 = v0 - (v0 @ axis) * axis, v1 - (v1 @ axis) * axis
    angle = math.atan2(np.cross(v0, v1) @ axis, v0 @ v1)
    mount = Rotation.from_rotvec(angle * axis).apply(sd.arm_m - p) + p
    return float(np.linalg.norm(mount - sd.chassis_m))


def kinematics(c, h=1e-4):
    """Gradients over +-3 cm of wheel travel, roll centre and motion ratio at design."""
    w0 = c.wheel_centre_m
    (cm, tm), (c0, t0), (cp, tp) = (camber_toe_deg(c, knuckle_pose(c, dz)[0]) for dz in (-0.03, 0.0, 0.03))
    out = {"camber_deg": c0, "toe_deg": t0, "camber_deg_per_cm": (cp - cm) / 6.0,
           "toe_deg_per_cm": (tp - tm) / 6.0, "toe_excursion_deg": max(abs(tp - t0), abs(tm - t0))}
    # front-view roll centre: the contact point (fixed to the knuckle) moves perpendicular to the
    # line from it to the instant centre; that line meets the vehicle centre plane at the roll centre.
    contact = np.array([w0[0], w0[1], 0.0])
    (rp, dp), (rm, dm) = knuckle_pose(c, h), knuckle_pose(c, -h)
    up, down = rp @ (contact - w0) + w0 + dp, rm @ (contact - w0) + w0 + dm
    out["roll_centre_m"] = abs(w0[1]) * c.side * (up[1] - down[1]) / (up[2] - down[2])
    out["motion_ratio"] = (spring_length_m(c, rm, dm) - spring_length_m(c, rp, dp)) / (2 * h)
    if c.steered:
        def steer(R):
            forward = c.side * np.cross(R @ c.spin_axis, [0.0, 0.0, 1.0])
            return math.atan2(forward[1], forward[0])
        out["steer_rad_per_m_rack"] = (steer(knuckle_pose(c, 0.0, rack_m=h)[0])
                                       - steer(knuckle_pose(c, 0.0, rack_m=-h)[0])) / (2 * h)
    return out


@pytest.fixture(scope="module")
def kin(vehicle):
    return {c.name: kinematics(c) for c in vehicle.corners}


def test_kinematics_of_the_default_are_sensible(vehicle, kin):
    for name, k in kin.items():
        print(name, {key: round(val, 4) for key, val in k.items()})
        assert -0.5 <= k["camber_deg_per_cm"] <= -0.1, name  # top inward in bump, a few tenths per cm
        assert abs(k["toe_deg_per_cm"]) <= 0.05, name  # bump steer (rack fixed) well under 0.1 deg/cm
        assert k["toe_excursion_deg"] <= 0.1, name
        assert 0.5 <= k["motion_ratio"] <= 1.0, name
    for side in "lr":
        assert 0.03 <= kin["f" + side]["roll_centre_m"] <= 0.10
        assert 0.05 <= kin["r" + side]["roll_centre_m"] <= 0.15
    # static alignment from the spin axes
    assert kin["fl"]["camber_deg"] == pytest.approx(-0.5, abs=0.01)
    assert kin["fl"]["toe_deg"] == pytest.approx(0.05, abs=0.01)
    assert kin["rl"]["camber_deg"] == pytest.approx(-1.0, abs=0.01)
    assert kin["rl"]["toe_deg"] == pytest.approx(0.15, abs=0.01)
    # mirrored corners behave identically
    for key in kin["fl"]:
        assert kin["fr"][key] == pytest.approx(kin["fl"][key], abs=1e-6)
    for key in kin["rl"]:
        assert kin["rr"][key] == pytest.approx(kin["rl"][key], abs=1e-6)
    # positive steering-wheel angle turns both front wheels left; overall ratio typical
    for name in ("fl", "fr"):
        ratio = 1.0 / (vehicle.steering.rack_travel_per_steering_wheel_rad_m * kin[name]["steer_rad_per_m_rack"])
        assert 13.0 <= ratio <= 18.0


def _front_view_instant_centre(c):
    """Instant centre (y, z) by hand: intersect the front-view lines of the arms (pivot axes along x),
    or for a strut the lower-arm line and the normal to the strut axis through the top mount."""
    def line(p, q):  # a y + b z = d through two (y, z) points
        a, b = q[1] - p[1], p[0] - q[0]
        return np.array([a, b]), a * p[0] + b * p[1]
    lower = line(c.lower_arm.front_pivot_m[1:], c.lower_arm.ball_joint_m[1:])
    if c.upper_arm is not None:
        other = line(c.upper_arm.front_pivot_m[1:], c.upper_arm.ball_joint_m[1:])
    else:
        top, axis = c.strut.top_mount_m[1:], (c.strut.top_mount_m - c.strut.knuckle_m)[1:]
        other = axis, axis @ top
    return np.linalg.solve(np.array([lower[0], other[0]]), [lower[1], other[1]])


def test_solver_agrees_with_the_front_view_instant_centre(vehicle, kin):
    """Cross-check of the solver: roll centre and camber gain from the hand-drawn instant centre."""
    for name in ("fl", "rl"):
        c = vehicle.corner(name)
        for arm in (c.lower_arm, c.upper_arm):
            if arm is not None:  # the construction assumes pivot axes along x
                np.testing.assert_allclose(arm.front_pivot_m[1:], arm.rear_pivot_m[1:])
        y_ic, z_ic = _front_view_instant_centre(c)
        swing_m = c.wheel_centre_m[1] - y_ic  # from the contact patch to the instant centre
        assert kin[name]["roll_centre_m"] == pytest.approx(z_ic * c.wheel_centre_m[1] / swing_m, abs=1e-3)
        assert kin[name]["camber_deg_per_cm"] == pytest.approx(-math.degrees(0.01 / swing_m), abs=0.01)


def test_ride_frequencies_and_damping_are_typical(vehicle, kin):
    """Ride frequency 1.2-1.5 Hz (rear above front) and damping ratio 0.25-0.35."""
    v = vehicle
    sprung_share = {"front": v.chassis.com_m[0] / v.wheelbase_m}
    sprung_share["rear"] = 1.0 - sprung_share["front"]
    freq = {}
    for name in ("fl", "rl"):
        c = v.corner(name)
        mass_kg = v.chassis.mass_kg * sprung_share[c.axle] / 2.0
        wheel_rate = c.spring_damper.stiffness_n_per_m * kin[name]["motion_ratio"] ** 2
        kt = c.tire.vertical_stiffness_n_per_m
        ride_rate = wheel_rate * kt / (wheel_rate + kt)
        freq[c.axle] = math.sqrt(ride_rate / mass_kg) / (2 * math.pi)
        zeta = c.spring_damper.damping_n_s_per_m * kin[name]["motion_ratio"] ** 2 / (
            2 * math.sqrt(ride_rate * mass_kg))
        assert 1.2 <= freq[c.axle] <= 1.5, name
        assert 0.25 <= zeta <= 0.35, name
    assert freq["rear"] > freq["front"]


# ---------------------------------------------------------------- valid variants
def test_double_wishbone_rear_per_axle_tire_all_wheel_drive_loads():
    data = raw()
    rear = data["axles"]["rear"]
    susp = copy.deepcopy(data["axles"]["front"]["suspension"])
    for part in susp.values():
        if isinstance(part, dict):
            for key, value in part.items():
                if isinstance(value, list):
                    part[key] = [value[0] - 2.70, value[1], value[2]]
    susp.pop("anti_roll_bar")
    rear["suspension"] = susp  # tie_rod with steered: false -> inner end on the chassis
    data.pop("aerodynamics")
    data["tire"] = {"front": dict(data["tire"]), "rear": dict(data["tire"], friction_coefficient=0.8)}
    data["drivetrain"]["driven_axle"] = "all"
    v = load_vehicle_dict(data)
    assert v.source == "<dict>" and v.aerodynamics is None
    rl = v.corner("rl")
    assert rl.suspension_type == "double_wishbone" and rl.strut is None and not rl.steered
    assert rl.upper_arm.ball_joint_m[0] == pytest.approx(2.67 - 2.70)
    assert [c.tire.friction_coefficient for c in v.corners] == [1.0, 1.0, 0.8, 0.8]
    assert all(c.driven and c.max_drive_torque_n_m == 1700.0 for c in v.corners)
    k = kinematics(rl)
    assert abs(k["toe_deg_per_cm"]) < 0.3 and 0.0 < k["roll_centre_m"] < 0.15


def test_steered_macpherson_front_needs_the_matching_rack_sign():
    """A front strut copied from the rear: tie rods behind the steering axis need negative rack travel."""
    data = raw()
    susp = copy.deepcopy(data["axles"]["rear"]["suspension"])
    for part in susp.values():
        if isinstance(part, dict):
            for key, value in part.items():
                if isinstance(value, list):
                    part[key] = [value[0] + 2.70, value[1], value[2]]
    susp["tie_rod"] = susp.pop("toe_link")
    data["axles"]["front"]["suspension"] = susp
    data["steering"]["rack"]["centre_m"] = [2.55, 0.0, 0.221]
    with pytest.raises(VehicleConfigError) as err:
        load_vehicle_dict(data, SRC)
    key = "steering.rack_travel_per_steering_wheel_rad_m"
    assert str(err.value).startswith(f"{SRC}: {key}: sign gives a right turn")
    data["steering"]["rack_travel_per_steering_wheel_rad_m"] = -0.0088
    fl = load_vehicle_dict(data).corner("fl")
    assert fl.suspension_type == "macpherson" and fl.steered
    assert kinematics(fl)["steer_rad_per_m_rack"] < 0.0  # rack to the left turns the wheels right


def test_file_with_yaml_1_2_scalars(tmp_path):
    text = DEFAULT.read_text().replace("stiffness_n_per_m: 60000.0", "stiffness_n_per_m: 6e4")
    assert "6e4" in text  # PyYAML alone would read the string '6e4'
    path = tmp_path / "car.yaml"
    path.write_text(text)
    assert load_vehicle(path).corner("fl").spring_damper.stiffness_n_per_m == 60000.0


TIRE_HEAD = ("tire:                             # TMeasy [Rill]; one set for all four wheels\n"
             "  characteristic: tmeasy                    # TMeasy's rational curve: the force peaks at twice the slip where the\n"
             "                                            # cornering stiffness would reach it, typical of passenger-car tires [Rill]\n")


def test_magic_formula_tire_file_loads_and_linearised_refuses_its_keys(tmp_path, vehicle):
    text = DEFAULT.read_text()
    assert TIRE_HEAD in text
    path = tmp_path / "mf.yaml"
    path.write_text(text.replace(TIRE_HEAD, "tire:\n  characteristic: magic_formula\n  curvature_factor: -0.3\n"))
    v = load_vehicle(path)
    t = v.corner("fl").tire
    assert all(c.tire is t for c in v.corners)
    assert (t.characteristic, t.shape_factor, t.curvature_factor, t.nominal_load_n, t.load_sensitivity_stiffness,
            t.load_sensitivity_friction) == ("magic_formula", 1.3, -0.3, None, 0.2, 0.05)  # defaults where not given
    assert t.cornering_stiffness_per_rad == vehicle.corner("fl").tire.cornering_stiffness_per_rad
    p = tire_parameters(v.corner("rr"), 3100.0)  # no nominal load in the file: the wheel's static load
    assert (p.shape_factor, p.curvature_factor, p.nominal_load_n, p.load_sensitivity_stiffness,
            p.load_sensitivity_friction) == (1.3, -0.3, 3100.0, 0.2, 0.05)
    # the default file: TMeasy's characteristic, and the tire model gets shape_factor -2
    d = vehicle.corner("fl").tire
    assert d.characteristic == "tmeasy" and d.shape_factor == -2.0 and d.load_sensitivity_stiffness == 0.2 and d.nominal_load_n is None
    assert d.load_sensitivity_friction == 0.05
    assert tire_parameters(vehicle.corner("fl"), 4000.0).shape_factor == -2.0
    # a file without the keys has TMeasy's characteristic and the schema's load sensitivities (the default file gives
    # both sensitivities, so the assertions above read the file's)
    plain = tmp_path / "plain.yaml"
    lines = [line for line in text.replace(TIRE_HEAD, "tire:\n").splitlines(keepends=True) if "load_sensitivity_" not in line]
    plain.write_text("".join(lines))
    bare = load_vehicle(plain).corner("rl").tire
    assert (bare.characteristic, bare.load_sensitivity_stiffness, bare.load_sensitivity_friction) == ("tmeasy", 0.2, 0.05)
    # Magic-Formula shape keys with another characteristic (linearised, or TMeasy by default) are refused, naming the key;
    # load sensitivity is every characteristic's
    sensitive = tmp_path / "sensitive.yaml"
    sensitive.write_text(text.replace(TIRE_HEAD, "tire:\n  characteristic: linearised\n  nominal_load_n: 3500\n")
                         .replace("load_sensitivity_friction: 0.05", "load_sensitivity_friction: 0.1"))
    t = load_vehicle(sensitive).corner("rl").tire
    assert (t.load_sensitivity_friction, t.nominal_load_n, tire_parameters(load_vehicle(sensitive).corner("rl"), 1.0).nominal_load_n) == (0.1, 3500.0, 3500.0)
    for head, key in (("  characteristic: linearised\n  shape_factor: 1.3\n", "shape_factor"),
                      ("  curvature_factor: 0.1\n", "curvature_factor")):
        bad = tmp_path / f"{key}.yaml"
        bad.write_text(text.replace(TIRE_HEAD, "tire:\n" + head))
        with pytest.raises(VehicleConfigError) as err:
            load_vehicle(bad)
        msg = str(err.value)
        assert msg.startswith(f"{bad}: tire.{key}: only with characteristic: magic_formula") and "\n" not in msg, msg

    # the brush characteristic: shape_factor -1 for the tire model, and no Magic-Formula keys either
    brush = tmp_path / "brush.yaml"
    brush.write_text(text.replace(TIRE_HEAD, "tire:\n  characteristic: brush\n"))
    b = load_vehicle(brush)
    assert b.corner("fl").tire.characteristic == "brush" and tire_parameters(b.corner("rl"), 4000.0).shape_factor == -1.0
    tmeasy = tmp_path / "tmeasy.yaml"
    tmeasy.write_text(text.replace(TIRE_HEAD, "tire:\n  characteristic: tmeasy\n"))
    assert tire_parameters(load_vehicle(tmeasy).corner("fr"), 4000.0).shape_factor == -2.0
    brush.write_text(text.replace(TIRE_HEAD, "tire:\n  characteristic: brush\n  shape_factor: 1.3\n"))
    with pytest.raises(VehicleConfigError, match="only with characteristic: magic_formula .the brush characteristic"):
        load_vehicle(brush)


# ---------------------------------------------------------------- errors: one line, file and key
def _set(path: str, value):
    def edit(data):
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return edit


def _rename(path: str, new: str):
    def edit(data):
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[new] = node.pop(last)
    return edit


_DELETE = object()
FA = "axles.front"
FS = "axles.front.suspension"
RS = "axles.rear.suspension"

ERRORS = [
    # missing / unknown keys
    (_set("chassis.mass_kg", _DELETE), "chassis.mass_kg", "missing"),
    (_set("tire", _DELETE), "tire", "missing"),
    (_set(f"{RS}.strut", _DELETE), f"{RS}.strut", "missing (for type macpherson)"),
    (_rename(f"{FS}.lower_arm.mass_kg", "mas_kg"), f"{FS}.lower_arm",
     "unknown key 'mas_kg' (allowed: front_pivot_m, rear_pivot_m, ball_joint_m, mass_kg)"),
    (_set("tyre", {}), "(top level)", "unknown key 'tyre'"),
    (_set(f"{FS}.strut", {}), FS, "unknown key 'strut' for type double_wishbone"),
    (_set(f"{RS}.tie_rod", {}), RS, "exactly one of tie_rod or toe_link"),
    (_rename("tire.friction_coefficient", "mu"), "tire",
     "unknown key 'mu' for one set of tire parameters; per axle use front and rear"),
    (lambda d: d.update(tire={"front": dict(d["tire"]), "rear": {"mu": 1.0}}), "tire.rear", "unknown key 'mu'"),
    (_set("tire.shape_factor", 1.3), "tire.shape_factor", "only with characteristic: magic_formula"),
    (lambda d: d.update(tire={"front": dict(d["tire"]), "rear": dict(d["tire"], characteristic="linearised",
                                                                   curvature_factor=0.2)}),
     "tire.rear.curvature_factor", "only with characteristic: magic_formula"),
    (_set("tire.characteristic", "pacejka"), "tire.characteristic", "must be one of tmeasy, linearised, brush, magic_formula"),
    (lambda d: d["tire"].update(characteristic="magic_formula", shape_factor=0.0), "tire.shape_factor",
     "must be in [1, 2] (got 0)"),
    (lambda d: d["tire"].update(characteristic="magic_formula", curvature_factor=1.0), "tire.curvature_factor",
     "must be < 1 (got 1)"),
    (lambda d: d["tire"].update(characteristic="magic_formula", nominal_load_n=4.0), "tire.nominal_load_n",
     "looks like kN"),
    (lambda d: d["tire"].update(characteristic="magic_formula", load_sensitivity_friction=-0.1),
     "tire.load_sensitivity_friction", "must be in [0, 1]"),
    # wrong type or shape
    (_set("chassis.com_m", "1.5, 0, 0.5"), "chassis.com_m", "must be a list of 3 numbers"),
    (_set("chassis.com_m", [1.5, 0.5]), "chassis.com_m", "must be a list of 3 numbers"),
    (_set("chassis.mass_kg", "heavy"), "chassis.mass_kg", "must be a number (got 'heavy')"),
    (_set("chassis.mass_kg", True), "chassis.mass_kg", "must be a number"),
    (_set(f"{FA}.steered", "yes"), f"{FA}.steered", "must be true or false"),
    (_set(f"{FS}.type", "multilink"), f"{FS}.type", "must be one of double_wishbone, macpherson"),
    (_set("drivetrain.driven_axle", "both"), "drivetrain.driven_axle", "must be one of front, rear, all"),
    (_set("sensors.wheel_encoders.counts_per_revolution", 48.5), "sensors.wheel_encoders.counts_per_revolution",
     "must be an integer"),
    (_set("chassis", [1330.0]), "chassis", "must be a mapping"),
    # non-finite
    (_set("chassis.mass_kg", float("nan")), "chassis.mass_kg", "must be finite"),
    (_set(f"{FA}.wheel_centre_m", [2.7, float("inf"), 0.3]), f"{FA}.wheel_centre_m", "must be finite"),
    # out of range
    (_set(f"{FS}.lower_arm.mass_kg", -1), f"{FS}.lower_arm.mass_kg", "must be in (0, 100] (got -1)"),
    (_set("tire.friction_coefficient", 2.5), "tire.friction_coefficient", "must be in (0, 2] (got 2.5)"),
    (_set("wheels.rear.unloaded_radius_m", 0.1), "wheels.rear.unloaded_radius_m", "must be in (0.15, 0.6]"),
    (_set(f"{FS}.spring_damper.damping_n_s_per_m", 0.0), f"{FS}.spring_damper.damping_n_s_per_m", "(10, 100000]"),
    # unit mistakes
    (_set("wheels.front.unloaded_radius_m", 320), "wheels.front.unloaded_radius_m", "looks like mm"),
    (_set("chassis.mass_kg", 1330000.0), "chassis.mass_kg", "looks like g"),
    (_set(f"{FS}.spring_damper.stiffness_n_per_m", 60.0), f"{FS}.spring_damper.stiffness_n_per_m",
     "looks like N/mm or kN/m"),
    (_set("tire.cornering_stiffness_per_rad", 0.24), "tire.cornering_stiffness_per_rad", "looks like per degree"),
    (_set("tire.rolling_resistance_coefficient", 1.2), "tire.rolling_resistance_coefficient",
     "looks like percent"),
    (_set(f"{FA}.wheel_centre_m", [2700, 790, 302]), f"{FA}.wheel_centre_m", "looks like mm"),
    (_set("steering.max_steering_wheel_angle_rad", 480), "steering.max_steering_wheel_angle_rad",
     "looks like degrees"),
    (_set("steering.rack_travel_per_steering_wheel_rad_m", 8.8), "steering.rack_travel_per_steering_wheel_rad_m",
     "looks like mm"),
    (_set("sensors.imu.orientation_rpy_rad", [0, 0, 90]), "sensors.imu.orientation_rpy_rad", "looks like degrees"),
    # right-hand data in a left corner
    (_set(f"{FA}.wheel_centre_m", [2.7, -0.79, 0.302]), f"{FA}.wheel_centre_m", "only left corners are written"),
    (_set(f"{RS}.strut.top_mount_m", [-0.03, -0.58, 0.86]), f"{RS}.strut.top_mount_m", "must be > 0"),
    # inconsistent geometry
    (_set(f"{FS}.lower_arm.rear_pivot_m", [2.92, 0.35, 0.148]), f"{FS}.lower_arm.front_pivot_m",
     "coincides with rear_pivot_m"),
    (_set(f"{FS}.upper_arm.ball_joint_m", [2.67, 0.40, 0.60]), f"{FS}.upper_arm.ball_joint_m",
     "not outboard of the pivots"),
    (_set(f"{FS}.upper_arm.ball_joint_m", [2.67, 0.64, 0.15]), f"{FS}.upper_arm.ball_joint_m",
     "above the lower ball joint"),
    (_set(f"{FS}.tie_rod.inner_m", [2.83, 0.80, 0.24]), f"{FS}.tie_rod.inner_m", "must be inboard of outer_m"),
    (_set(f"{RS}.strut.knuckle_m", [-0.03, 0.58, 0.80]), f"{RS}.strut.top_mount_m", "above knuckle_m"),
    (_set(f"{FS}.spring_damper.arm_m", [2.60, 0.35, 0.148]), f"{FS}.spring_damper.arm_m", "pivot axis"),
    (_set("wheels.front.dynamic_radius_m", 0.33), "wheels.front.dynamic_radius_m", "must not exceed unloaded"),
    (_set("wheels.front.spin_inertia_kg_m2", 3.0), "wheels.front.spin_inertia_kg_m2", "exceeds mass_kg"),
    (_set(f"{FA}.spin_axis", [0.0, 2.0, 0.0]), f"{FA}.spin_axis", "must be a unit vector"),
    (_set(f"{FA}.spin_axis", [1.0, 0.0, 0.0]), f"{FA}.spin_axis", "must point outboard"),
    (_set(f"{FA}.wheel_centre_m", [2.7, 0.79, 0.33]), f"{FA}.wheel_centre_m", "tire compressed at design"),
    (_set("chassis.com_m", [3.0, 0.0, 0.55]), "chassis.com_m", "outside the wheelbase"),
    (_set("chassis.inertia_kg_m2.xx", 100.0), "chassis.inertia_kg_m2", "triangle inequality"),
    (_set("chassis.inertia_kg_m2.xz", 2000.0), "chassis.inertia_kg_m2", "not positive definite"),
    (_set(f"{FA}.knuckle.inertia_kg_m2", [0.01, 0.08, 0.10]), f"{FA}.knuckle.inertia_kg_m2", "triangle"),
    (_set("axles.rear.steered", True), "axles", "exactly one axle must be steered"),
    (_set("axles.front.steered", False), "axles", "steered: none"),
    (_set("steering.rack_travel_per_steering_wheel_rad_m", -0.0088),
     "steering.rack_travel_per_steering_wheel_rad_m", "right turn"),
    (_set("steering.rack_travel_per_steering_wheel_rad_m", 0.03),
     "steering.rack_travel_per_steering_wheel_rad_m", "overall steering ratio"),
    (_set("steering.rack.centre_m", [2.83, 0.0, 0.50]), f"{FS}.tie_rod.inner_m", "must be on the rack"),
]


@pytest.mark.parametrize("edit, key, why", ERRORS, ids=[f"{e[1]}:{e[2][:28]}" for e in ERRORS])
def test_invalid_description_fails_with_one_line(edit, key, why):
    data = raw()
    edit(data)
    with pytest.raises(VehicleConfigError) as err:
        load_vehicle_dict(data, SRC)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{SRC}: {key}: "), msg
    assert why in msg, msg
    assert isinstance(err.value, ValueError)


def test_errors_from_files_name_the_file(tmp_path):
    text = DEFAULT.read_text()
    cases = {
        "mm.yaml": (text.replace("unloaded_radius_m: 0.321      # [ETRTO]", "unloaded_radius_m: 321  # [ETRTO]"),
                    "wheels.front.unloaded_radius_m: must be in (0.15, 0.6] (got 321); looks like mm"),
        "dup.yaml": (text.replace("  mass_kg: 1330.0", "  mass_kg: 1330.0\n  mass_kg: 1.0"),
                     "invalid YAML: duplicate key 'mass_kg'"),
        "broken.yaml": ("chassis: [1, 2\n", "invalid YAML"),
        "empty.yaml": ("", "(top level): must be a mapping"),
    }
    for name, (content, why) in cases.items():
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(VehicleConfigError) as err:
            load_vehicle(path)
        msg = str(err.value)
        assert msg.startswith(f"{path}: ") and why in msg and "\n" not in msg, msg
    dup_line = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("  mass_kg: 1330.0")) + 1
    with pytest.raises(VehicleConfigError, match=f"line {dup_line}: "):
        load_vehicle(tmp_path / "dup.yaml")
    with pytest.raises(VehicleConfigError, match="cannot read"):
        load_vehicle(tmp_path / "missing.yaml")


def test_yaml_1_1_boolean_key_is_explained():
    """A dict from yaml.safe_load has the key True for `on:`: say so instead of failing obscurely."""
    data = yaml.safe_load(DEFAULT.read_text())
    with pytest.raises(VehicleConfigError) as err:
        load_vehicle_dict(data, SRC)
    assert str(err.value).startswith(f"{SRC}: {FS}.spring_damper: key True is not a string")
    assert "quote the key" in str(err.value)


def test_downforce_is_read_and_checked():
    data = raw()
    data["aerodynamics"]["downforce_area_m2"] = 3.1  # a race car's Cz A
    assert load_vehicle_dict(data).aerodynamics.downforce_area_m2 == 3.1
    data["aerodynamics"]["downforce_area_m2"] = -1.0
    with pytest.raises(VehicleConfigError, match="aerodynamics.downforce_area_m2"):
        load_vehicle_dict(data)

"""The observer's parameters: one table for the node (declared with descriptions and ranges) and for
``state-observer process`` (read from the same ``config/observer.yaml``), so both run the same
configuration.  No rclpy here.

A parameters file is ROS 2's: ``observer_node: ros__parameters: {name: value}`` with nested keys
flattened by dots (``rates.odometry_hz``).  Every value is checked against its entry; a wrong one is
one ``ValueError`` naming the parameter (and the file).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from ..accel import BACKENDS
from ..errors import ConfigError, ParameterError
from ..estimation.online import OBSERVERS, OnlineSettings
from .convert import OUTPUT_TOPICS, SENSOR_TOPICS, JointNames

NODE_NAME = "observer_node"


class Parameter(NamedTuple):
    name: str
    default: Any
    description: str
    low: float | None = None  # numbers: inclusive range
    high: float | None = None
    choices: tuple = ()  # strings: allowed values


_T = "topic of the {} stream"
PARAMETERS: tuple[Parameter, ...] = (
    Parameter("vehicle_file", "", "vehicle YAML (empty: the package's config/vehicles/default.yaml)"),
    Parameter("observer", "spi_reduced", "observer configuration: 14-DOF errorEKF-FE with the mass/friction filter, without it, or the errorEKF on the detailed model", choices=OBSERVERS),
    Parameter("dt_s", 0.004, "model step on sensor time (s)", 0.0005, 0.02),
    Parameter("solver_backend", "numpy", "linear solver of the model's Newton iteration (FPGA variant: pynq)", choices=BACKENDS),
    Parameter("backend_fallback", False, "when the solver backend is unavailable (no FPGA board or overlay), use the C model instead of refusing to start"),
    Parameter("odom_frame", "odom", "frame of the pose (REP-105 odom, or map)"),
    Parameter("base_frame", "base_link", "vehicle frame of the twist and the tire forces"),
    Parameter("publish_tf", True, "publish /tf (odom_frame -> base_frame with every odometry) and /tf_static (base_frame -> IMU, GNSS antenna, wheels)"),
    Parameter("datum.use", False, "use the datum below as the local ENU origin (else the first good GNSS fix)"),
    Parameter("datum.latitude_deg", 0.0, "datum latitude (deg, WGS84)", -90.0, 90.0),
    Parameter("datum.longitude_deg", 0.0, "datum longitude (deg, WGS84)", -180.0, 180.0),
    Parameter("datum.altitude_m", 0.0, "datum ellipsoidal height (m)", -1000.0, 10000.0),
    Parameter("start.mode", "gnss", "start from the first good GNSS fixes (heading from GNSS course or motion) or from the pose below", choices=("gnss", "pose")),
    Parameter("start.x_m", 0.0, "start position east of the datum (m)", -1e6, 1e6),
    Parameter("start.y_m", 0.0, "start position north of the datum (m)", -1e6, 1e6),
    Parameter("start.yaw_rad", 0.0, "start heading, counter-clockwise from east (rad)", -2 * math.pi, 2 * math.pi),
    Parameter("start.speed_m_s", 0.0, "start speed (m/s) when the wheel speeds do not give it", 0.0, 100.0),
    Parameter("start.speed_from_wheels", True, "start.mode pose: start at the speed of the first wheel sample (waited for up to 0.5 s)"),
    Parameter("start.min_speed_m_s", 2.0, "GNSS course is taken as the heading above this speed (m/s)", 0.1, 50.0),
    Parameter("start.min_distance_m", 15.0, "without GNSS velocity: two fixes this far apart give the heading (m)", 1.0, 1000.0),
    Parameter("model.initial_mass_kg", 0.0, "model mass at the start (kg; 0: the vehicle file's)", 0.0, 1e5),
    Parameter("model.initial_friction", 0.0, "tire-road friction coefficient at the start (-); 0: the vehicle file's", 0.0, 1.5),
    Parameter("model.steering_offset_rad", 0.0, "the steering-wheel angle the steering sensor reads with the wheels straight ahead "
              "(rad; subtracted from every sample; `state-observer check` measures it on a bag with GNSS velocity)", -0.5, 0.5),
    Parameter("model.road_slope", False, "errorEKF-FE: learn the road's slope under the car (grade and cross slope; the model drives a level "
              "road): for hilly roads and tracks; on level roads with a biased accelerometer it costs a little (docs/accuracy.md)"),
    Parameter("model.parameters_after_s", 10.0, "spi_reduced: parameter estimation (mass, friction, cornering stiffness) starts this long after the observer (s)", 0.0, 3600.0),
    Parameter("noise.use_message_covariance", True, "use the covariances in the messages where they are given (else always the sigmas below)"),
    Parameter("noise.gnss_horizontal_sigma_m", 1.8, "GNSS position 1-sigma east/north when a fix has no covariance (m)", 1e-3, 100.0),
    Parameter("noise.gnss_vertical_sigma_m", 2.6, "GNSS position 1-sigma up when a fix has no covariance (m)", 1e-3, 100.0),
    Parameter("noise.gnss_velocity_sigma_m_s", 0.1, "GNSS velocity 1-sigma when a message has no covariance (m/s)", 1e-4, 10.0),
    Parameter("noise.gyro_sigma_rad_s", 0.0035, "gyroscope 1-sigma per sample when the message has none (rad/s)", 1e-6, 1.0),
    Parameter("noise.accel_sigma_m_s2", 0.025, "accelerometer 1-sigma per sample when the message has none (m/s^2)", 1e-5, 10.0),
    Parameter("noise.wheel_rate_sigma_rad_s", 0.05, "wheel-speed 1-sigma (rad/s)", 1e-4, 10.0),
    Parameter("sensors.imu", True, "use the IMU"),
    Parameter("sensors.gnss_fix", True, "use GNSS fixes"),
    Parameter("sensors.gnss_velocity", True, "use GNSS velocity"),
    Parameter("sensors.wheels", True, "use wheel speeds"),
    Parameter("sensors.standstill", True, "zero-velocity updates while the four wheel speeds say the car stands still (0.5 s mean below 0.05 rad/s)"),
    Parameter("timing.max_delay_s", 0.3, "samples stamped further behind the model time are dropped (s)", 0.001, 5.0),
    Parameter("timing.time_jump_s", 1.0, "samples stamped this far behind (a looping bag) or ahead (a clock step, a long silence) of "
              "the model are dropped; three in a row reset the observer (s)", 0.01, 3600.0),
    Parameter("timing.reorder_window_s", 0.0, "the model stays this far behind the newest stamp so that streams delivered late (a deep "
              "QoS queue, a bag written out of order) are applied in stamp order; delays every output by as much (s)", 0.0, 5.0),
    *(Parameter(f"topics.{kind}", topic, _T.format(kind)) for kind, topic in SENSOR_TOPICS.items()),
    *(Parameter(f"joints.wheel_{w}", name, f"JointState name of the {where} wheel on the wheels topic")
      for w, name, where in zip(("fl", "fr", "rl", "rr"), JointNames().wheels, ("front-left", "front-right", "rear-left", "rear-right"))),
    Parameter("joints.steering", JointNames().steering, "JointState name of the steering wheel on the steering topic (position: steering-wheel angle, rad)"),
    Parameter("rates.odometry_hz", 0.0, "odometry rate (Hz; 0: after every message that advanced the model)", 0.0, 1000.0),
    Parameter("rates.tire_forces_hz", 50.0, "tire-force rate (Hz; 0: every model step)", 0.0, 1000.0),
    Parameter("rates.parameters_hz", 10.0, "mass/friction rate (Hz)", 0.0, 1000.0),
    Parameter("rates.state_hz", 50.0, "observer-state rate (Hz)", 0.0, 1000.0),
    Parameter("rates.markers_hz", 10.0, "RViz marker rate (Hz)", 0.0, 1000.0),
    Parameter("rates.path_hz", 1.0, "path rate (Hz; the path message grows with path_length)", 0.0, 100.0),
    Parameter("rates.diagnostics_hz", 1.0, "diagnostics rate (Hz, wall clock in the node)", 0.1, 100.0),
    Parameter("path_length", 1000, "poses kept in the published path (at 1 Hz: the last 17 min)", 1, 100000),
    Parameter("qos_depth", 50, "queue depth of the sensor subscriptions", 1, 10000),
)
BY_NAME = {p.name: p for p in PARAMETERS}
OUTPUT_KINDS = tuple(OUTPUT_TOPICS)


def check(name: str, value: Any) -> Any:
    """``value`` converted to the parameter's type, or ValueError naming the parameter."""
    p = BY_NAME.get(name)
    if p is None:
        import difflib

        close = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.6) or difflib.get_close_matches(
            name.split(".")[-1], [n.split(".")[-1] for n in BY_NAME], n=1, cutoff=0.6)
        hint = ""
        if close:
            full = close[0] if close[0] in BY_NAME else next(n for n in BY_NAME if n.split(".")[-1] == close[0])
            hint = f"; did you mean {full!r}?"
        raise ParameterError(f"unknown parameter {name!r}{hint} (all: `ros2 param list /{NODE_NAME}`, config/observer.yaml)", key=name)
    kind = type(p.default)
    if kind is bool:
        if not isinstance(value, bool):
            raise ParameterError(f"parameter {name}: must be true or false, got {value!r}", key=name)
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
            raise ParameterError(f"parameter {name}: must be {'an integer' if kind is int else 'a number'}, got {value!r}", key=name)
        value = kind(value)
        if not math.isfinite(value) or (p.low is not None and value < p.low) or (p.high is not None and value > p.high):
            raise ParameterError(f"parameter {name}: must be within {p.low:g} .. {p.high:g}, got {value!r}", key=name)
        return value
    if not isinstance(value, str):
        raise ParameterError(f"parameter {name}: must be a string, got {value!r}", key=name)
    if p.choices and value not in p.choices:
        raise ParameterError(f"parameter {name}: must be one of {', '.join(p.choices)}, got {value!r}", key=name)
    if name.startswith("topics.") and not value.startswith("/") and value:
        value = "/" + value
    return value


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def load_file(path: str | Path, node: str = NODE_NAME) -> dict:
    """Checked ``{name: value}`` of ``node``'s section of a ROS 2 parameters file (missing names: defaults)."""
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read parameters: {exc}") from None
    section = None
    for key in (node, f"/{node}", "/**"):
        if isinstance(tree, dict) and isinstance(tree.get(key), dict) and "ros__parameters" in tree[key]:
            section = tree[key]["ros__parameters"] or {}
            break
    if section is None:
        raise ConfigError(f"{path}: no '{node}: ros__parameters:' section")
    values = {p.name: p.default for p in PARAMETERS}
    for name, value in _flatten(section).items():
        if name == "use_sim_time":
            continue
        try:
            values[name] = check(name, value)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}", key=getattr(exc, "key", None)) from None
    return values


def params_file_sections(path: str | Path) -> list[str]:
    """The node keys of a ROS 2 parameters file (``ValueError`` naming the file when it is unreadable)."""
    try:
        tree = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read parameters: {exc}") from None
    return [str(k) for k, v in tree.items() if isinstance(v, dict) and "ros__parameters" in v] if isinstance(tree, dict) else []


def applies_to(section: str, node: str = NODE_NAME) -> bool:
    """Whether a parameters-file key (``observer_node``, ``/ns/observer_node``, ``/**``, ``/**/observer_node``) names ``node``."""
    return section.split("/")[-1] in (node, "**", "*")


def defaults() -> dict:
    return {p.name: p.default for p in PARAMETERS}


@dataclass
class ObserverConfig:
    """The node's configuration, built from checked parameter values."""

    settings: OnlineSettings
    vehicle_file: str
    rates: dict  # output kind -> Hz
    topics: dict  # sensor kind -> topic
    odom_frame: str
    base_frame: str
    publish_tf: bool
    path_length: int
    qos_depth: int
    solver_backend: str
    backend_fallback: bool
    joints: JointNames = JointNames()


def parameter_of(setting: str) -> str:
    """The parameter that sets :class:`OnlineSettings` field ``setting`` (``initial_mass_kg`` -> ``model.initial_mass_kg``)."""
    names = [p.name for p in PARAMETERS]
    special = {"standstill_updates": "sensors.standstill", "start_pose": "start.*", "datum": "datum.*", "sensors": "sensors.*"}
    if setting in special:
        return special[setting]
    for name in (setting, setting.replace("_", ".", 1)):
        if name in names:
            return name
    return next((name for name in names if name.endswith("." + setting)), setting)


def setting_error(exc: ConfigError) -> ParameterError:
    """``exc`` about :class:`OnlineSettings` field ``exc.key`` ("initial_mass_kg: ...") as the error of its parameter."""
    name = parameter_of(exc.key)
    text = str(exc)
    return ParameterError(f"parameter {name}{text[len(exc.key):] if text.startswith(exc.key) else ': ' + text}", key=name)


def config_from(values: dict) -> ObserverConfig:
    """:class:`ObserverConfig` of checked parameter values; ValueError naming the parameter when they disagree."""
    v = values
    datum = (v["datum.latitude_deg"], v["datum.longitude_deg"], v["datum.altitude_m"]) if v["datum.use"] else None
    try:
        settings = OnlineSettings(
            observer=v["observer"], dt_s=v["dt_s"], datum=datum, start_mode=v["start.mode"],
            start_pose=(v["start.x_m"], v["start.y_m"], v["start.yaw_rad"], v["start.speed_m_s"]),
            start_min_speed_m_s=v["start.min_speed_m_s"], start_min_distance_m=v["start.min_distance_m"],
            start_speed_from_wheels=v["start.speed_from_wheels"],
            initial_mass_kg=v["model.initial_mass_kg"], initial_friction=v["model.initial_friction"],
            parameters_after_s=v["model.parameters_after_s"], steering_offset_rad=v["model.steering_offset_rad"], road_slope=v["model.road_slope"],
            use_message_covariance=v["noise.use_message_covariance"], gnss_horizontal_sigma_m=v["noise.gnss_horizontal_sigma_m"],
            gnss_vertical_sigma_m=v["noise.gnss_vertical_sigma_m"], gnss_velocity_sigma_m_s=v["noise.gnss_velocity_sigma_m_s"],
            gyro_sigma_rad_s=v["noise.gyro_sigma_rad_s"], accel_sigma_m_s2=v["noise.accel_sigma_m_s2"],
            wheel_rate_sigma_rad_s=v["noise.wheel_rate_sigma_rad_s"],
            sensors=tuple(k for k in ("imu", "gnss_fix", "gnss_velocity", "wheels") if v[f"sensors.{k}"]),
            standstill_updates=v["sensors.standstill"],
            max_delay_s=v["timing.max_delay_s"], time_jump_s=v["timing.time_jump_s"], reorder_window_s=v["timing.reorder_window_s"])
    except ConfigError as exc:
        raise setting_error(exc) from None
    if not v["odom_frame"] or not v["base_frame"] or v["odom_frame"] == v["base_frame"]:
        raise ParameterError(f"parameters odom_frame / base_frame: must be two different non-empty frames, got {v['odom_frame']!r}, {v['base_frame']!r}", key="odom_frame / base_frame")
    topics = {kind: v[f"topics.{kind}"] for kind in SENSOR_TOPICS}
    if len(set(topics.values())) < len(topics) or any(not t for t in topics.values()):
        raise ParameterError(f"parameters topics.*: every sensor stream needs its own non-empty topic, got {topics}", key="topics.*")
    joints = JointNames(tuple(v[f"joints.wheel_{w}"] for w in ("fl", "fr", "rl", "rr")), v["joints.steering"])
    if len(set(joints.wheels)) < 4 or not all(joints.wheels) or not joints.steering:
        raise ParameterError(f"parameters joints.*: four different non-empty wheel joint names and a steering joint name, got {joints}", key="joints.*")
    return ObserverConfig(
        joints=joints, settings=settings, vehicle_file=v["vehicle_file"], rates={k: v[f"rates.{k}_hz"] for k in OUTPUT_KINDS},
        topics=topics, odom_frame=v["odom_frame"], base_frame=v["base_frame"], publish_tf=v["publish_tf"],
        path_length=v["path_length"], qos_depth=v["qos_depth"], solver_backend=v["solver_backend"],
        backend_fallback=v["backend_fallback"])


def load_config(params_file: str | Path | None = None, **overrides) -> ObserverConfig:
    """The configuration of a parameters file (default: the package's config/observer.yaml) with ``overrides`` by
    parameter name (e.g. ``vehicle_file=...``); ValueError naming the file or parameter."""
    from ..paths import find_data_file

    values = load_file(params_file or find_data_file("config/observer.yaml"))
    for name, value in overrides.items():
        values[name] = check(name, value)
    return config_from(values)


YAML_HEADER = """\
# Parameters of the observer node (ros2 run state_observer observer_node --ros-args --params-file FILE)
# and of `state-observer process BAG --params FILE`. Ranges and meaning: state_observer/io/params.py
# (or `ros2 param describe /observer_node NAME`). Units are in the names.
"""


def yaml_text() -> str:
    """``config/observer.yaml`` as generated from :data:`PARAMETERS` (defaults with their descriptions; ungrouped names
    first, then each group in table order).  Regenerate with ``python -m state_observer.io.params > config/observer.yaml``."""

    def value(v):
        return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else repr(v)

    lines = [f"{NODE_NAME}:", "  ros__parameters:"]
    lines += [f"    {p.name}: {value(p.default)}  # {p.description}" for p in PARAMETERS if "." not in p.name]
    groups = dict.fromkeys(p.name.split(".")[0] for p in PARAMETERS if "." in p.name)
    for group in groups:
        lines.append(f"    {group}:")
        lines += [f"      {p.name.split('.', 1)[1]}: {value(p.default)}  # {p.description}"
                  for p in PARAMETERS if p.name.startswith(group + ".")]
    return YAML_HEADER + "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(yaml_text(), end="")

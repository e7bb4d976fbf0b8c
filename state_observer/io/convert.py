"""Conversion between core records and ROS 2 messages, on rosbags' own message classes.

One place for every sample <-> message mapping of the package, used by the bag writer and
reader (and usable by anything that needs messages without rclpy). No rclpy import: message
classes come from a rosbags ``Typestore`` for a current ROS 2 distribution with this package's
interfaces (``msg/*.msg``) registered from their definition files.

Time is integer nanoseconds. ``header.stamp`` carries a record's ``stamp_ns``; the bag's log
time carries ``receive_ns`` (see ``state_observer.io.bag``).

Conventions (REP-103/105/145; design notes, peers-and-ros-conventions.md):

``sensor_msgs/Imu`` (``/imu/data``)
    No orientation: ``orientation`` = identity, ``orientation_covariance[0] = -1`` ("not
    provided", REP-145). Rate and specific-force covariances diag(sigma^2), row-major 3x3.
``sensor_msgs/NavSatFix`` (``/gps/fix``)
    ``status.service = SERVICE_GPS``; ``position_covariance`` = ENU 3x3 row-major (m^2), type
    DIAGONAL_KNOWN when the off-diagonal terms are zero, else KNOWN.
``geometry_msgs/TwistWithCovarianceStamped`` (``/gps/vel``)
    ``twist.linear`` = antenna velocity in ENU, ``twist.angular`` = 0. 6x6 row-major
    covariance over (vx vy vz wx wy wz): the linear block is the velocity covariance; the
    angular rate is not measured, marked as in REP-145 and the u-blox driver by
    ``covariance[21]`` (element 0 of the angular block) = -1, the rest of that block and the
    cross terms 0. No large "unknown" variance (1e6 or max double), which consumers turn into
    overflow/NaN.
``sensor_msgs/JointState`` (``/wheel_states``, ``/steering_state``)
    Wheels: names ``WHEEL_JOINTS``, position = encoder angle (rad), velocity = rate (rad/s),
    effort = applied drive-minus-brake torque (N m); an array that is NaN for every wheel is
    sent empty (JointState's "not available"). Steering: one joint ``STEERING_JOINT``,
    position = steering-wheel angle (rad), velocity and effort empty.

Reading back: covariances that are all zeros ("unknown", REP-145) give NaN sigmas/matrices;
element 0 = -1 ("not provided") gives NaN values and NaN sigmas; a sigma of 0 or NaN is
written as all zeros. JointState joints are matched by name (any order, extra joints ignored;
a missing wheel or empty array gives NaN); the joint names are parameters (``JointNames``, default
``WHEEL_JOINTS`` and ``STEERING_JOINT``).

Ground truth (``/truth/...``, one message of each per model step):
``/truth/odometry`` nav_msgs/Odometry, pose in ``odom`` (the local ENU frame), twist in
``base_link`` (linear = R^T v_enu, angular = body rates), covariances 0 (exact);
``/truth/tire_forces`` state_observer/TireForces (sigmas 0); ``/truth/parameters``
state_observer/VehicleParameters (sigmas 0, converged, estimator "truth");
``/truth/state`` state_observer/ObserverState (sideslip, roll, pitch, yaw rate, speed,
suspension travel, wheel speeds, body acceleration; no NIS).
"""
from __future__ import annotations

import functools
import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple

import numpy as np
from rosbags.typesys import Stores, TypesysError, get_typestore, get_types_from_msg

from state_observer import paths
from state_observer.conventions import sideslip_rad
from state_observer.sensors.samples import (
    STEERING_JOINT,
    WHEEL_JOINTS,
    STREAM_OF,
    WHEELS,
    GnssFix,
    GnssVelocity,
    ImuSample,
    SteeringSample,
    WheelSample,
)
from state_observer.conventions import quaternion_from_matrix, quaternion_to_matrix  # noqa: F401  (quaternion_to_matrix: also part of this module's API)
from state_observer.vehicle.state import VehicleState
from state_observer.errors import IoError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

# Kilted is what the PyPI wheels of this project provide; the definitions and RIHS01 hashes of
# every standard type used here are identical in Humble, Jazzy, Kilted and Lyrical (checked in
# test/test_bag_io.py), so the bags read the same on all of them. Older rosbags: Jazzy.
STORE = getattr(Stores, "ROS2_KILTED", Stores.ROS2_JAZZY)

PACKAGE = paths.PACKAGE
CUSTOM_TYPES = tuple(f"{PACKAGE}/msg/{name}" for name in paths.MESSAGE_NAMES)

IMU = "sensor_msgs/msg/Imu"
NAV_SAT_FIX = "sensor_msgs/msg/NavSatFix"
TWIST_WITH_COVARIANCE_STAMPED = "geometry_msgs/msg/TwistWithCovarianceStamped"
JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"
TIRE_FORCES = f"{PACKAGE}/msg/TireForces"
WHEEL_FORCE = f"{PACKAGE}/msg/WheelForce"
VEHICLE_PARAMETERS = f"{PACKAGE}/msg/VehicleParameters"
OBSERVER_STATE = f"{PACKAGE}/msg/ObserverState"

# Sensor streams: record type -> kind (sensors.samples.STREAM_OF) -> (message type, default topic; ARCHITECTURE.md 4).
SENSOR_MSGTYPES: dict[str, str] = {
    "imu": IMU,
    "gnss_fix": NAV_SAT_FIX,
    "gnss_velocity": TWIST_WITH_COVARIANCE_STAMPED,
    "wheels": JOINT_STATE,
    "steering": JOINT_STATE,
}
SENSOR_TOPICS: dict[str, str] = {
    "imu": "/imu/data",
    "gnss_fix": "/gps/fix",
    "gnss_velocity": "/gps/vel",
    "wheels": "/wheel_states",
    "steering": "/steering_state",
}
TRUTH_MSGTYPES: dict[str, str] = {
    "odometry": ODOMETRY,
    "tire_forces": TIRE_FORCES,
    "parameters": VEHICLE_PARAMETERS,
    "state": OBSERVER_STATE,
}
TRUTH_TOPICS: dict[str, str] = {kind: f"/truth/{kind}" for kind in TRUTH_MSGTYPES}

MARKER_ARRAY = "visualization_msgs/msg/MarkerArray"
DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"
PATH = "nav_msgs/msg/Path"
# What the observer publishes (ARCHITECTURE.md 4): kind -> message type, default topic. The
# observer node, `state-observer process` (its output bag) and rviz/state_observer.rviz use these.
OUTPUT_MSGTYPES: dict[str, str] = {
    "odometry": ODOMETRY,
    "tire_forces": TIRE_FORCES,
    "parameters": VEHICLE_PARAMETERS,
    "state": OBSERVER_STATE,
    "path": PATH,
    "markers": MARKER_ARRAY,
    "diagnostics": DIAGNOSTIC_ARRAY,
}
OUTPUT_TOPICS: dict[str, str] = {
    **{kind: f"/state_observer/{kind}" for kind in OUTPUT_MSGTYPES},
    "diagnostics": "/diagnostics",
}

ODOM_FRAME = "odom"
BASE_FRAME = "base_link"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
TF_TOPIC, TF_STATIC_TOPIC = "/tf", "/tf_static"  # odom -> base_link; base_link -> the sensors and the wheels
WHEEL_FRAMES = tuple(f"wheel_{w}_link" for w in WHEELS)  # the wheel centres' frames on /tf_static

_NS = 1_000_000_000
_ANGULAR_NOT_PROVIDED = 3 * 6 + 3  # TwistWithCovariance.covariance index of (wx, wx)



# --- type store ------------------------------------------------------------------------

def make_typestore(msg_files: Mapping[str, Path] | None = None, distro: str | None = None) -> Typestore:
    """A new rosbags typestore (``STORE``) with this package's interfaces registered.

    Parameters
    ----------
    msg_files
        ``{"TireForces": path, ...}`` for every name of ``paths.MESSAGE_NAMES``; default: the
        installed definitions found by ``state_observer.paths``.
    distro
        ROS 2 distribution whose standard definitions to use (e.g. ``"humble"``; the node passes
        ``$ROS_DISTRO`` so that what it serialises matches the running ROS); default ``STORE``.
    """
    store = get_typestore(getattr(Stores, f"ROS2_{distro.upper()}", STORE) if distro else STORE)
    for name in paths.MESSAGE_NAMES:  # dependency order: WheelForce before TireForces
        path = Path(msg_files[name]) if msg_files is not None else paths.message_definition(name)
        typename = f"{PACKAGE}/msg/{name}"
        try:
            text = path.read_text(encoding="utf-8")
            store.register(get_types_from_msg(text, typename))
            store.hash_rihs01(typename)  # resolves every field type now, not when first used
        except (OSError, TypesysError) as exc:
            raise IoError(f"{path}: cannot register message type {typename}: {exc}") from None
        except KeyError as exc:
            raise IoError(f"{path}: message type {typename} uses unknown type {exc}") from None
    return store


@functools.lru_cache(maxsize=1)
def typestore() -> Typestore:
    """The shared typestore of the process (``make_typestore()``, built once)."""
    return make_typestore()


# --- small helpers ---------------------------------------------------------------------

def stamp_to_ns(stamp: Any) -> int:
    """builtin_interfaces/Time -> int ns."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def _time(store: Typestore, t_ns: int) -> Any:
    sec, nanosec = divmod(int(t_ns), _NS)
    if not -2**31 <= sec < 2**31:
        raise IoError(f"time {t_ns} ns does not fit builtin_interfaces/Time (int32 seconds)")
    return store.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _header(store: Typestore, t_ns: int, frame_id: str) -> Any:
    return store.types["std_msgs/msg/Header"](stamp=_time(store, t_ns), frame_id=frame_id)


def _array(value: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.shape != shape:
        raise IoError(f"{what}: expected shape {shape}, got {array.shape}")
    return array


def _vector3(store: Typestore, value: Any, what: str) -> Any:
    x, y, z = _array(value, (3,), what)
    return store.types["geometry_msgs/msg/Vector3"](x=float(x), y=float(y), z=float(z))


def _xyz(msg: Any) -> np.ndarray:
    return np.array([msg.x, msg.y, msg.z], dtype=np.float64)


def _diag_covariance(sigma) -> np.ndarray:
    """3x3 row-major diag(sigma^2) from one sigma or one per axis; all zeros ("unknown") where no sigma is finite and
    positive; an axis without one gets the variance -1 (that axis not measured)."""
    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (3,))
    usable = np.isfinite(sigma) & (sigma > 0.0)
    if not usable.any():
        return np.zeros(9)
    return np.diag(np.where(usable, sigma * sigma, -1.0)).ravel()


def _sigma_from_covariance(covariance) -> np.ndarray:
    """Per-axis 1-sigma (3,) of a 3x3 row-major covariance: NaN everywhere when it is unknown (all zeros) or not provided
    (REP-145: -1 first), and NaN on an axis whose variance is not finite or not positive (the observer then takes its
    configured sigma there, or treats the axis as missing: :func:`msg_to_imu`).  Plain floats: it runs per IMU message."""
    c = [float(v) for v in covariance]
    if not any(v != 0.0 for v in c) or all(_missing_axes(c)):
        return np.full(3, math.nan)
    return np.array([math.sqrt(d) if math.isfinite(d) and d > 0.0 else math.nan for d in (c[0], c[4], c[8])])


def _missing_axes(covariance) -> np.ndarray:
    """Axes a sensor says it does not measure: the whole vector when covariance[0] is -1 (REP-145), else an axis whose
    variance is NaN or negative (a yaw-rate-only gyroscope gives -1 on x and y)."""
    c0, c4, c8 = float(covariance[0]), float(covariance[4]), float(covariance[8])
    if c0 == -1.0 and c4 == 0.0 and c8 == 0.0:
        return np.ones(3, dtype=bool)
    return np.array([not math.isfinite(d) or d < 0.0 for d in (c0, c4, c8)])


# --- sensor samples -> messages --------------------------------------------------------

def imu_to_msg(sample: ImuSample, store: Typestore) -> Any:
    """ImuSample -> sensor_msgs/Imu (no orientation; covariances diag sigma^2)."""
    types = store.types
    orientation_covariance = np.zeros(9)
    orientation_covariance[0] = -1.0  # REP-145: orientation not provided
    return types[IMU](
        header=_header(store, sample.stamp_ns, sample.frame_id),
        orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=orientation_covariance,
        angular_velocity=_vector3(store, sample.angular_velocity_rad_s, "ImuSample.angular_velocity_rad_s"),
        angular_velocity_covariance=_diag_covariance(sample.angular_velocity_sigma),
        linear_acceleration=_vector3(store, sample.linear_acceleration_m_s2,
                                     "ImuSample.linear_acceleration_m_s2"),
        linear_acceleration_covariance=_diag_covariance(sample.linear_acceleration_sigma),
    )


def gnss_fix_to_msg(sample: GnssFix, store: Typestore) -> Any:
    """GnssFix -> sensor_msgs/NavSatFix (ENU covariance, row-major)."""
    types = store.types
    fix_type = types[NAV_SAT_FIX]
    covariance = _array(sample.position_covariance_enu_m2, (3, 3), "GnssFix.position_covariance_enu_m2")
    if not np.isfinite(covariance).all():
        covariance_type = fix_type.COVARIANCE_TYPE_UNKNOWN
        covariance = np.zeros((3, 3))
    elif np.count_nonzero(covariance - np.diag(np.diag(covariance))) == 0:
        covariance_type = fix_type.COVARIANCE_TYPE_DIAGONAL_KNOWN
    else:
        covariance_type = fix_type.COVARIANCE_TYPE_KNOWN
    status_type = types["sensor_msgs/msg/NavSatStatus"]
    return fix_type(
        header=_header(store, sample.stamp_ns, sample.frame_id),
        status=status_type(status=int(sample.status), service=status_type.SERVICE_GPS),
        latitude=float(sample.latitude_deg),
        longitude=float(sample.longitude_deg),
        altitude=float(sample.altitude_m),
        position_covariance=covariance.ravel().copy(),
        position_covariance_type=covariance_type,
    )


def gnss_velocity_to_msg(sample: GnssVelocity, store: Typestore) -> Any:
    """GnssVelocity -> geometry_msgs/TwistWithCovarianceStamped (ENU; angular not provided)."""
    types = store.types
    covariance = np.zeros((6, 6))
    velocity_covariance = _array(sample.covariance_m2_s2, (3, 3), "GnssVelocity.covariance_m2_s2")
    if np.isfinite(velocity_covariance).all():
        covariance[:3, :3] = velocity_covariance
    covariance = covariance.ravel()
    covariance[_ANGULAR_NOT_PROVIDED] = -1.0
    return types[TWIST_WITH_COVARIANCE_STAMPED](
        header=_header(store, sample.stamp_ns, sample.frame_id),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](
            twist=types["geometry_msgs/msg/Twist"](
                linear=_vector3(store, sample.velocity_enu_m_s, "GnssVelocity.velocity_enu_m_s"),
                angular=_vector3(store, np.zeros(3), "angular"),
            ),
            covariance=covariance,
        ),
    )


def _joint_array(values: np.ndarray) -> np.ndarray:
    return np.zeros(0) if np.isnan(values).all() else values.copy()


def wheels_to_msg(sample: WheelSample, store: Typestore) -> Any:
    """WheelSample -> sensor_msgs/JointState over ``WHEEL_JOINTS``."""
    n = len(WHEEL_JOINTS)
    return store.types[JOINT_STATE](
        header=_header(store, sample.stamp_ns, ""),
        name=list(WHEEL_JOINTS),
        position=_joint_array(_array(sample.angle_rad, (n,), "WheelSample.angle_rad")),
        velocity=_joint_array(_array(sample.rate_rad_s, (n,), "WheelSample.rate_rad_s")),
        effort=_joint_array(_array(sample.torque_n_m, (n,), "WheelSample.torque_n_m")),
    )


def steering_to_msg(sample: SteeringSample, store: Typestore) -> Any:
    """SteeringSample -> sensor_msgs/JointState with the one joint ``STEERING_JOINT``."""
    return store.types[JOINT_STATE](
        header=_header(store, sample.stamp_ns, ""),
        name=[STEERING_JOINT],
        position=np.array([float(sample.steering_wheel_angle_rad)]),
        velocity=np.zeros(0),
        effort=np.zeros(0),
    )


_TO_MSG: dict[str, Callable[[Any, Typestore], Any]] = {
    "imu": imu_to_msg,
    "gnss_fix": gnss_fix_to_msg,
    "gnss_velocity": gnss_velocity_to_msg,
    "wheels": wheels_to_msg,
    "steering": steering_to_msg,
}


def sample_kind(sample: Any) -> str:
    """"imu", "gnss_fix", "gnss_velocity", "wheels" or "steering" for a sample record."""
    try:
        return STREAM_OF[type(sample)]
    except KeyError:
        raise IoError(f"not a sensor sample record: {type(sample).__name__}") from None


def sample_to_msg(sample: Any, store: Typestore | None = None) -> tuple[str, Any]:
    """Sensor sample record -> (message type name, rosbags message)."""
    kind = sample_kind(sample)
    return SENSOR_MSGTYPES[kind], _TO_MSG[kind](sample, store or typestore())


# --- messages -> sensor samples --------------------------------------------------------

def msg_to_imu(msg: Any, receive_ns: int) -> ImuSample:
    """sensor_msgs/Imu -> ImuSample: per-axis sigmas; NaN values on the axes a covariance says are not measured."""
    rate = _xyz(msg.angular_velocity)
    accel = _xyz(msg.linear_acceleration)
    rate_cov = np.asarray(msg.angular_velocity_covariance, dtype=np.float64)
    accel_cov = np.asarray(msg.linear_acceleration_covariance, dtype=np.float64)
    rate[_missing_axes(rate_cov)] = np.nan
    accel[_missing_axes(accel_cov)] = np.nan
    return ImuSample(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        receive_ns=int(receive_ns),
        frame_id=msg.header.frame_id,
        angular_velocity_rad_s=rate,
        linear_acceleration_m_s2=accel,
        angular_velocity_sigma=_sigma_from_covariance(rate_cov),
        linear_acceleration_sigma=_sigma_from_covariance(accel_cov),
    )


def msg_to_gnss_fix(msg: Any, receive_ns: int) -> GnssFix:
    """sensor_msgs/NavSatFix -> GnssFix (covariance NaN when its type is UNKNOWN)."""
    covariance = np.asarray(msg.position_covariance, dtype=np.float64).reshape(3, 3).copy()
    if msg.position_covariance_type == 0:  # COVARIANCE_TYPE_UNKNOWN
        covariance[:] = np.nan
    return GnssFix(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        receive_ns=int(receive_ns),
        frame_id=msg.header.frame_id,
        latitude_deg=float(msg.latitude),
        longitude_deg=float(msg.longitude),
        altitude_m=float(msg.altitude),
        status=int(msg.status.status),
        position_covariance_enu_m2=covariance,
    )


def msg_to_gnss_velocity(msg: Any, receive_ns: int) -> GnssVelocity:
    """geometry_msgs/TwistWithCovarianceStamped -> GnssVelocity (linear part only)."""
    velocity = _xyz(msg.twist.twist.linear)
    covariance = np.asarray(msg.twist.covariance, dtype=np.float64).reshape(6, 6)[:3, :3].copy()
    if covariance[0, 0] == -1.0:  # velocity not provided
        velocity[:] = np.nan
        covariance[:] = np.nan
    elif not covariance.any():  # unknown
        covariance[:] = np.nan
    return GnssVelocity(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        receive_ns=int(receive_ns),
        frame_id=msg.header.frame_id,
        velocity_enu_m_s=velocity,
        covariance_m2_s2=covariance,
    )


def _joint_values(msg: Any, field: str, joints: tuple[str, ...]) -> np.ndarray:
    """Values of ``field`` for ``joints`` by name; NaN for missing joints or an empty array."""
    values = np.asarray(getattr(msg, field), dtype=np.float64)
    out = np.full(len(joints), np.nan)
    if values.size == 0:
        return out
    names = list(msg.name)
    if values.size != len(names):
        raise IoError(f"JointState.{field} has {values.size} values for {len(names)} joints")
    for i, joint in enumerate(joints):
        if joint in names:
            out[i] = values[names.index(joint)]
    return out


def msg_to_wheels(msg: Any, receive_ns: int, joints: tuple[str, ...] = WHEEL_JOINTS) -> WheelSample:
    """sensor_msgs/JointState -> WheelSample (``joints`` fl fr rl rr by name, NaN where absent)."""
    if not set(joints) & set(msg.name):
        raise IoError(f"JointState has none of the wheel joints {', '.join(joints)} "
                      f"(joints found: {', '.join(msg.name) or 'none'})")
    return WheelSample(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        receive_ns=int(receive_ns),
        angle_rad=_joint_values(msg, "position", joints),
        rate_rad_s=_joint_values(msg, "velocity", joints),
        torque_n_m=_joint_values(msg, "effort", joints),
    )


def msg_to_steering(msg: Any, receive_ns: int, joint: str = STEERING_JOINT) -> SteeringSample:
    """sensor_msgs/JointState -> SteeringSample (position of ``joint``)."""
    if joint not in msg.name:
        raise IoError(f"JointState has no steering joint {joint} (joints found: {', '.join(msg.name) or 'none'})")
    angle = _joint_values(msg, "position", (joint,))[0]
    if math.isnan(angle):
        raise IoError(f"JointState has no position for the steering joint {joint}")
    return SteeringSample(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        receive_ns=int(receive_ns),
        steering_wheel_angle_rad=float(angle),
    )


_FROM_MSG: dict[str, Callable[[Any, int], Any]] = {
    "imu": msg_to_imu,
    "gnss_fix": msg_to_gnss_fix,
    "gnss_velocity": msg_to_gnss_velocity,
    "wheels": msg_to_wheels,
    "steering": msg_to_steering,
}


class JointNames(NamedTuple):
    """JointState names of the wheels (fl, fr, rl, rr) and of the steering wheel (parameters ``joints.*``)."""

    wheels: tuple[str, ...] = WHEEL_JOINTS
    steering: str = STEERING_JOINT


def msg_to_sample(kind: str, msg: Any, receive_ns: int, joints: JointNames = JointNames()) -> Any:
    """Message of sensor stream ``kind`` (see ``SENSOR_MSGTYPES``) -> sample record; JointStates by ``joints``."""
    if kind == "wheels":
        return msg_to_wheels(msg, receive_ns, tuple(joints.wheels))
    if kind == "steering":
        return msg_to_steering(msg, receive_ns, joints.steering)
    try:
        convert = _FROM_MSG[kind]
    except KeyError:
        raise IoError(f"unknown sensor stream {kind!r}; known: {', '.join(_FROM_MSG)}") from None
    return convert(msg, receive_ns)


# --- ground truth -> messages ----------------------------------------------------------

class TruthFrames(NamedTuple):
    """Frame ids of the truth topics (REP-105)."""

    odom: str = ODOM_FRAME  # the local ENU frame of the simulation
    base: str = BASE_FRAME


def truth_stamp_ns(truth: VehicleState, epoch_ns: int = 0) -> int:
    """Stamp of a truth sample: ``epoch_ns + round(t_s * 1e9)``."""
    return int(epoch_ns) + int(round(float(truth.t_s) * _NS))


class Uncertainty(NamedTuple):
    """What an estimate adds to a state record in its messages (the truth has none: zeros)."""

    pose_covariance: np.ndarray  # (6, 6) nav_msgs/Odometry pose covariance (ENU x y z, rotation about x y z)
    twist_covariance: np.ndarray  # (6, 6) base_link linear and angular velocity
    tire_force_sigma_n: np.ndarray  # (4, 3)
    mass_sigma_kg: float
    friction_sigma: float
    converged: bool
    estimator: str
    nis: Mapping[str, float]  # sensor -> latest NIS
    parameters: Mapping | None = None  # spi_reduced's parameter report (VehicleSPI.parameter_report): status, bounds, lower bound


TRUTH_UNCERTAINTY = Uncertainty(np.zeros((6, 6)), np.zeros((6, 6)), np.zeros((4, 3)), 0.0, 0.0, True, "truth", {})
PARAMETER_CONVERGED, PARAMETER_NOT_OBSERVABLE = 2, 0  # VehicleParameters status constants (state_observer.estimation.spi)


def _parameter_fields(truth: VehicleState, u: Uncertainty) -> dict:
    """The VehicleParameters fields beyond mass and friction: statuses, bounds, the friction's proven lower bound and the
    cornering stiffness scales (the truth and estimators without a report: converged at their value, scales 1)."""
    mass, mu = float(truth.mass_kg), float(truth.friction_coefficient)
    r = u.parameters
    if r is None:
        status = PARAMETER_CONVERGED if u.estimator == "truth" else PARAMETER_NOT_OBSERVABLE
        return dict(mass_status=status, mass_min_kg=mass, mass_max_kg=mass, friction_status=status, friction_lower_bound=0.0,
                    friction_min=mu, friction_max=mu, cornering_stiffness_scale_front=1.0, cornering_stiffness_scale_front_sigma=0.0,
                    cornering_stiffness_front_status=status, cornering_stiffness_scale_rear=1.0, cornering_stiffness_scale_rear_sigma=0.0,
                    cornering_stiffness_rear_status=status)
    front, rear = r["cornering_front"], r["cornering_rear"]
    return dict(mass_status=int(r["mass"]["status"]), mass_min_kg=float(r["mass"]["bounds"][0]), mass_max_kg=float(r["mass"]["bounds"][1]),
                friction_status=int(r["friction"]["status"]), friction_lower_bound=float(r["friction"]["lower_bound"]),
                friction_min=float(r["friction"]["bounds"][0]), friction_max=float(r["friction"]["bounds"][1]),
                cornering_stiffness_scale_front=float(front["value"]), cornering_stiffness_scale_front_sigma=float(front["sigma"]),
                cornering_stiffness_front_status=int(front["status"]), cornering_stiffness_scale_rear=float(rear["value"]),
                cornering_stiffness_scale_rear_sigma=float(rear["sigma"]), cornering_stiffness_rear_status=int(rear["status"]))


def _quaternion_msg(store: Typestore, q_wxyz) -> Any:
    return store.types["geometry_msgs/msg/Quaternion"](x=float(q_wxyz[1]), y=float(q_wxyz[2]), z=float(q_wxyz[3]), w=float(q_wxyz[0]))


def _pose_msg(store: Typestore, position, q_wxyz) -> Any:
    types = store.types
    return types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](x=float(position[0]), y=float(position[1]), z=float(position[2])),
        orientation=_quaternion_msg(store, q_wxyz))


def odometry_msg(position, q_wxyz, v_body, omega_body, stamp_ns: int, store: Typestore, frames: TruthFrames = TruthFrames(),
                 pose_covariance=None, twist_covariance=None) -> Any:
    """nav_msgs/Odometry: pose (position (3,), quaternion wxyz) in ``frames.odom``, twist (linear and angular
    velocity, (3,) each) in ``frames.base``, 6x6 covariances (default zeros) row-major (REP-103/105)."""
    types = store.types
    q = q_wxyz
    return types[ODOMETRY](
        header=_header(store, stamp_ns, frames.odom),
        child_frame_id=frames.base,
        pose=types["geometry_msgs/msg/PoseWithCovariance"](
            pose=_pose_msg(store, position, q),
            covariance=np.zeros(36) if pose_covariance is None else _array(pose_covariance, (6, 6), "pose covariance").reshape(36).copy(),
        ),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](
            twist=types["geometry_msgs/msg/Twist"](
                linear=_vector3(store, v_body, "twist.linear"),
                angular=_vector3(store, omega_body, "twist.angular")),
            covariance=np.zeros(36) if twist_covariance is None else _array(twist_covariance, (6, 6), "twist covariance").reshape(36).copy(),
        ),
    )


def _string_layout(fmt: list[str], offset: int, texts) -> tuple[int, list[bytes]]:
    """Append the CDR layout of strings (uint32 length with the NUL, the bytes, each length aligned to 4) at payload
    ``offset`` to the ``struct`` format parts ``fmt``; returns the payload offset after them and the encoded strings."""
    strings = []
    for text in texts:
        data = text.encode() + b"\0"
        pad = -offset % 4
        fmt.append(f"{pad}xI{len(data)}s")
        offset += pad + 4 + len(data)
        strings.append(data)
    return offset, strings


class OdometryEncoder:
    """nav_msgs/Odometry straight to CDR bytes (little endian, XCDR1, as rosbags and rclpy write it) for one pair
    of frame ids: a precomputed ``struct`` layout, ~20 times faster than building and serialising the message
    (the observer publishes one per IMU message).  Tested byte for byte against rosbags."""

    def __init__(self, frames: TruthFrames = TruthFrames()):
        fmt = ["<4siI"]  # encapsulation header; stamp at payload offset 0
        offset, self._strings = _string_layout(fmt, 8, (frames.odom, frames.base))
        fmt.append(f"{-offset % 8}x85d")  # pose 7, covariance 36, twist 6, covariance 36 (doubles aligned to 8)
        self._struct = struct.Struct("".join(fmt))

    def encode(self, stamp_ns: int, position, q_wxyz, v_body, w_body, pose_covariance, twist_covariance) -> bytes:
        sec, nanosec = divmod(int(stamp_ns), _NS)
        odom, base = self._strings
        values = np.concatenate([position, (q_wxyz[1], q_wxyz[2], q_wxyz[3], q_wxyz[0]), np.ravel(pose_covariance),
                                 v_body, w_body, np.ravel(twist_covariance)])
        return self._struct.pack(b"\x00\x01\x00\x00", sec, nanosec, len(odom), odom, len(base), base, *values.tolist())


class TransformEncoder:
    """tf2_msgs/TFMessage of one transform, parent -> child, straight to CDR bytes (as :class:`OdometryEncoder`; the
    observer publishes /tf with every odometry message).  Tested byte for byte against rosbags."""

    def __init__(self, parent: str, child: str):
        fmt = ["<4sIiI"]  # encapsulation header, one transform, its stamp
        offset, self._strings = _string_layout(fmt, 12, (parent, child))
        fmt.append(f"{-offset % 8}x7d")  # translation, rotation xyzw (doubles aligned to 8)
        self._struct = struct.Struct("".join(fmt))

    def encode(self, stamp_ns: int, translation, q_wxyz) -> bytes:
        sec, nanosec = divmod(int(stamp_ns), _NS)
        parent, child = self._strings
        x, y, z = (float(v) for v in translation)
        w, qx, qy, qz = (float(v) for v in q_wxyz)
        return self._struct.pack(b"\x00\x01\x00\x00", 1, sec, nanosec, len(parent), parent, len(child), child, x, y, z, qx, qy, qz, w)


def truth_to_msgs(truth: VehicleState, stamp_ns: int, store: Typestore | None = None,
                  frames: TruthFrames = TruthFrames(), uncertainty: Uncertainty = TRUTH_UNCERTAINTY,
                  kinds: Iterable[str] = tuple(TRUTH_MSGTYPES)) -> dict[str, tuple[str, Any]]:
    """One state record -> ``{kind: (message type, message)}`` for the ``kinds`` of ``TRUTH_TOPICS`` (default
    all): the ground truth, or with ``uncertainty`` an observer estimate (the observer's topics carry the same
    types)."""
    store = store or typestore()
    u = uncertainty
    sigma = _array(u.tire_force_sigma_n, (4, 3), "Uncertainty.tire_force_sigma_n")
    types = store.types
    header_base = _header(store, stamp_ns, frames.base)
    q = _array(truth.orientation_wxyz, (4,), "VehicleState.orientation_wxyz")
    rotation = quaternion_to_matrix(q)  # base_link -> ENU
    v_enu = _array(truth.velocity_enu_m_s, (3,), "VehicleState.velocity_enu_m_s")
    v_body = rotation.T @ v_enu
    omega = _array(truth.angular_velocity_body_rad_s, (3,), "VehicleState.angular_velocity_body_rad_s")
    position = _array(truth.position_enu_m, (3,), "VehicleState.position_enu_m")

    out = {}
    if "odometry" in kinds:
        out["odometry"] = (ODOMETRY, odometry_msg(position, q, v_body, omega, stamp_ns, store, frames, u.pose_covariance, u.twist_covariance))
    if "tire_forces" in kinds:
        forces = _array(truth.tire_force_n, (4, 3), "VehicleState.tire_force_n")
        contacts = _array(truth.contact_point_base_m, (4, 3), "VehicleState.contact_point_base_m")
        slip_ratio = _array(truth.slip_ratio, (4,), "VehicleState.slip_ratio")
        slip_angle = _array(truth.slip_angle_rad, (4,), "VehicleState.slip_angle_rad")
        wheel_force = types[WHEEL_FORCE]
        point = types["geometry_msgs/msg/Point"]
        tire_forces = types[TIRE_FORCES](
            header=header_base,
            wheels=[
                wheel_force(
                    name=name,
                    fx_n=float(forces[i, 0]), fy_n=float(forces[i, 1]), fz_n=float(forces[i, 2]),
                    slip_ratio=float(slip_ratio[i]), slip_angle_rad=float(slip_angle[i]),
                    contact_point=point(x=float(contacts[i, 0]), y=float(contacts[i, 1]),
                                        z=float(contacts[i, 2])),
                    fx_sigma_n=float(sigma[i, 0]), fy_sigma_n=float(sigma[i, 1]), fz_sigma_n=float(sigma[i, 2]),
                )
                for i, name in enumerate(WHEELS)
            ],
        )
        out["tire_forces"] = (TIRE_FORCES, tire_forces)
    if "parameters" in kinds:
        parameters = types[VEHICLE_PARAMETERS](
            header=header_base,
            mass_kg=float(truth.mass_kg), mass_sigma_kg=float(u.mass_sigma_kg),
            friction_coefficient=float(truth.friction_coefficient), friction_sigma=float(u.friction_sigma),
            converged=bool(u.converged), estimator=str(u.estimator), **_parameter_fields(truth, u),
        )
        out["parameters"] = (VEHICLE_PARAMETERS, parameters)
    if "state" in kinds:
        # ZYX (yaw-pitch-roll) angles of base_link w.r.t. ENU.
        pitch = math.asin(max(-1.0, min(1.0, -rotation[2, 0])))
        roll = math.atan2(rotation[2, 1], rotation[2, 2])
        state = types[OBSERVER_STATE](
            header=header_base,
            sideslip_rad=sideslip_rad(float(v_body[0]), float(v_body[1])),
            roll_rad=roll,
            pitch_rad=pitch,
            yaw_rate_rad_s=float(omega[2]),
            speed_m_s=float(math.hypot(v_enu[0], v_enu[1])),
            suspension_travel_m=_array(truth.suspension_travel_m, (4,), "VehicleState.suspension_travel_m").copy(),
            wheel_speed_rad_s=_array(truth.wheel_rate_rad_s, (4,), "VehicleState.wheel_rate_rad_s").copy(),
            body_acceleration_m_s2=_vector3(
                store, rotation.T @ _array(truth.acceleration_enu_m_s2, (3,), "VehicleState.acceleration_enu_m_s2"),
                "body_acceleration"),
            nis_sensor_names=list(u.nis),
            nis=np.array([float(v) for v in u.nis.values()], dtype=np.float64),
        )
        out["state"] = (OBSERVER_STATE, state)
    return out


# --- visualisation and diagnostics -----------------------------------------------------

_MARKER_ADD, _MARKER_CUBE, _MARKER_CYLINDER, _MARKER_ARROW = 0, 1, 3, 0
FORCE_ARROW_M_PER_N = 1.0 / 2000.0  # marker arrow length per tire force (1 m per 2 kN)


def markers_msg(state: VehicleState, stamp_ns: int, store: Typestore | None = None, frames: TruthFrames = TruthFrames(),
                wheel_radius_m: float = 0.3) -> Any:
    """visualization_msgs/MarkerArray in the odom frame: the body (box over the wheelbase), the four wheels
    (cylinders at the contact points) and per wheel the horizontal tire force (fx, fy; base_link axes, the
    steer angle is not drawn) and the normal load as arrows of ``FORCE_ARROW_M_PER_N``."""
    store = store or typestore()
    types = store.types
    header = _header(store, stamp_ns, frames.odom)
    q = _array(state.orientation_wxyz, (4,), "orientation_wxyz")
    R = quaternion_to_matrix(q)
    p = _array(state.position_enu_m, (3,), "position_enu_m")
    contacts = _array(state.contact_point_base_m, (4, 3), "contact_point_base_m")
    forces = _array(state.tire_force_n, (4, 3), "tire_force_n")
    point = types["geometry_msgs/msg/Point"]
    vector3 = types["geometry_msgs/msg/Vector3"]
    color = types["std_msgs/msg/ColorRGBA"]
    lifetime = types["builtin_interfaces/msg/Duration"](sec=0, nanosec=500_000_000)

    marker_type = types["visualization_msgs/msg/Marker"]
    fields = set(marker_type.__dataclass_fields__)
    empty = dict(colors=[], uv_coordinates=[], text="", mesh_resource="", texture_resource="", mesh_use_embedded_materials=False)
    if "texture" in fields:  # Iron and later (Humble's Marker has no texture or mesh_file)
        empty["texture"] = types["sensor_msgs/msg/CompressedImage"](header=_header(store, 0, ""), format="", data=np.zeros(0, np.uint8))
    if "mesh_file" in fields:
        empty["mesh_file"] = types["visualization_msgs/msg/MeshFile"](filename="", data=np.zeros(0, np.uint8))

    def marker(ns, mid, kind, pose, scale, rgba, points=()):
        return marker_type(
            header=header, ns=ns, id=mid, type=kind, action=_MARKER_ADD, pose=pose, scale=vector3(x=scale[0], y=scale[1], z=scale[2]),
            color=color(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3]), lifetime=lifetime, frame_locked=False, points=list(points),
            **{k: v for k, v in empty.items() if k in fields})

    wheelbase = float(np.ptp(contacts[:, 0])) or 2.6
    track = float(np.ptp(contacts[:, 1])) or 1.5
    centre = np.array([contacts[:, 0].mean(), contacts[:, 1].mean(), 0.8])
    out = [marker("body", 0, _MARKER_CUBE, _pose_msg(store, p + R @ centre, q), (wheelbase + 1.6, track + 0.2, 1.0), (0.2, 0.45, 0.8, 0.6))]
    # a cylinder's axis is its z: turn it onto the wheel's y axis (roll 90 deg about base_link x)
    half = math.sqrt(0.5)
    q_wheel = np.array([q[0] * half - q[1] * half, q[1] * half + q[0] * half, q[2] * half + q[3] * half, q[3] * half - q[2] * half])
    for i in range(4):
        centre_w = p + R @ (contacts[i] + np.array([0.0, 0.0, wheel_radius_m]))
        out.append(marker("wheels", i, _MARKER_CYLINDER, _pose_msg(store, centre_w, q_wheel), (2 * wheel_radius_m, 2 * wheel_radius_m, 0.22), (0.1, 0.1, 0.1, 0.9)))
        base = p + R @ contacts[i]
        tip_h = base + R @ (np.array([forces[i, 0], forces[i, 1], 0.0]) * FORCE_ARROW_M_PER_N)
        tip_v = base + R @ (np.array([0.0, 0.0, forces[i, 2]]) * FORCE_ARROW_M_PER_N)
        identity = _pose_msg(store, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
        out.append(marker("tire_force_horizontal", i, _MARKER_ARROW, identity, (0.06, 0.12, 0.15), (0.9, 0.3, 0.1, 1.0),
                          [point(x=float(a[0]), y=float(a[1]), z=float(a[2])) for a in (base, tip_h)]))
        out.append(marker("tire_load", i, _MARKER_ARROW, identity, (0.06, 0.12, 0.15), (0.2, 0.8, 0.2, 1.0),
                          [point(x=float(a[0]), y=float(a[1]), z=float(a[2])) for a in (base, tip_v)]))
    return types[MARKER_ARRAY](markers=out)


def tf_msg(transforms: Iterable[tuple[int, str, str, Any, Any]], store: Typestore | None = None) -> Any:
    """tf2_msgs/TFMessage of ``(stamp_ns, parent frame, child frame, translation (3,) m, rotation wxyz)`` tuples."""
    store = store or typestore()
    t = store.types
    return t[TF_MESSAGE](transforms=[t["geometry_msgs/msg/TransformStamped"](
        header=_header(store, stamp_ns, parent), child_frame_id=child,
        transform=t["geometry_msgs/msg/Transform"](translation=_vector3(store, translation, f"{child} translation"),
                                                   rotation=_quaternion_msg(store, q)))
        for stamp_ns, parent, child, translation, q in transforms])


def mount_transforms(mounts, stamp_ns: int, base: str = BASE_FRAME) -> list[tuple[int, str, str, Any, Any]]:
    """base -> the IMU (at its mounting rotation) and base -> the GNSS antenna (unrotated) of a
    :class:`~state_observer.sensors.mounts.SensorMounts`, in its frames, as :func:`tf_msg` tuples."""
    return [(stamp_ns, base, mounts.imu_frame_id, mounts.imu_position_m, quaternion_from_matrix(np.asarray(mounts.imu_rotation, float))),
            (stamp_ns, base, mounts.gnss_frame_id, mounts.gnss_position_m, (1.0, 0.0, 0.0, 0.0))]


def pose_stamped_msg(stamp_ns: int, position, q_wxyz, store: Typestore | None = None, frame: str = ODOM_FRAME) -> Any:
    """geometry_msgs/PoseStamped."""
    store = store or typestore()
    return store.types["geometry_msgs/msg/PoseStamped"](header=_header(store, stamp_ns, frame), pose=_pose_msg(store, position, q_wxyz))


def path_msg(poses: list, stamp_ns: int, store: Typestore | None = None, frame: str = ODOM_FRAME) -> Any:
    """nav_msgs/Path of ``poses`` (geometry_msgs/PoseStamped messages, see :func:`pose_stamped_msg`) in ``frame``."""
    store = store or typestore()
    return store.types[PATH](header=_header(store, stamp_ns, frame), poses=poses)


DIAGNOSTIC_LEVELS = {"OK": 0, "WARN": 1, "ERROR": 2, "STALE": 3}


def diagnostics_msg(statuses: list, stamp_ns: int, store: Typestore | None = None, hardware_id: str = PACKAGE) -> Any:
    """diagnostic_msgs/DiagnosticArray of ``statuses`` = [(name, level "OK"/"WARN"/"ERROR"/"STALE", message,
    {key: value}), ...]."""
    store = store or typestore()
    types = store.types
    key_value = types["diagnostic_msgs/msg/KeyValue"]
    return types[DIAGNOSTIC_ARRAY](header=_header(store, stamp_ns, ""), status=[
        types["diagnostic_msgs/msg/DiagnosticStatus"](
            level=DIAGNOSTIC_LEVELS[level], name=name, message=message, hardware_id=hardware_id,
            values=[key_value(key=str(k), value=str(v)) for k, v in values.items()])
        for name, level, message, values in statuses])

"""Bag I/O: real rosbag2 files (sqlite3 and mcap) written and read back with rosbags.

Samples and truth go through ``state_observer.io.bag`` into a bag in ``tmp_path`` and are read
back; message layouts follow ARCHITECTURE.md 4 and the ROS conventions (REP-103/105/145).
No rclpy: the io layer uses rosbags' own typestore.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from state_observer import cli, paths
from state_observer.io import bag, convert
from state_observer.io.bag import BagWriter, IoError, read_messages, read_samples, topic_statistics
from state_observer.sensors.samples import (
    STEERING_JOINT,
    WHEEL_JOINTS,
    GnssFix,
    GnssVelocity,
    ImuSample,
    SteeringSample,
    WheelSample,
)
from state_observer.vehicle.state import VehicleState

REPO = Path(__file__).resolve().parents[1]
STORAGES = ("sqlite3", "mcap")
MS = 1_000_000
EPOCH = 1_700_000_000 * 1_000_000_000  # a realistic wall-clock epoch (ns)


# --- builders ----------------------------------------------------------------------------

def imu(rng, stamp_ns, latency_ns=2 * MS):
    return ImuSample(stamp_ns, stamp_ns + latency_ns, "imu_link", rng.normal(size=3),
                     rng.normal(size=3) + [0.0, 0.0, 9.81], 0.0035, 0.025)


def gnss_fix(rng, stamp_ns, full_covariance=False):
    cov = np.diag([1.786**2, 1.786**2, 2.551**2])
    if full_covariance:
        cov[0, 1] = cov[1, 0] = 0.4
    return GnssFix(stamp_ns, stamp_ns + 80 * MS, "gnss_antenna", 43.4935695 + rng.normal() * 1e-5,
                   -8.2477616 + rng.normal() * 1e-5, 59.877 + rng.normal(), 0, cov)


def gnss_velocity(rng, stamp_ns):
    return GnssVelocity(stamp_ns, stamp_ns + 80 * MS, "gnss_antenna", rng.normal(size=3) * 10,
                        np.diag([0.05**2, 0.05**2, 0.1**2]))


def wheels(rng, stamp_ns, torque=True):
    torque_n_m = rng.normal(size=4) * 200 if torque else np.full(4, np.nan)
    return WheelSample(stamp_ns, stamp_ns + 10 * MS, rng.normal(size=4) * 30, rng.normal(size=4) * 40,
                       torque_n_m)


def steering(rng, stamp_ns):
    return SteeringSample(stamp_ns, stamp_ns + 10 * MS, float(rng.normal()))


def all_samples(seed=0, n=20):
    """Every sample type, several of each, in receive order (as the simulator yields them)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        t = EPOCH + k * 10 * MS
        out.append(imu(rng, t))
        out.append(wheels(rng, t, torque=k % 3 != 0))
        out.append(steering(rng, t))
        if k % 5 == 0:
            out.append(gnss_fix(rng, t, full_covariance=k % 10 == 0))
            out.append(gnss_velocity(rng, t))
    partial = wheels(rng, EPOCH + n * 10 * MS)
    partial.torque_n_m[1] = np.nan
    out.append(partial)
    out.sort(key=lambda s: (s.receive_ns, s.stamp_ns))
    return out


def quaternion(yaw, pitch=0.0, roll=0.0):
    """(w, x, y, z) of R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


def truth(t_s, yaw=math.pi / 2, pitch=0.02, roll=-0.03, v_enu=(0.5, 12.0, 0.1)):
    return VehicleState(
        t_s=t_s,
        position_enu_m=np.array([1.0 + t_s, 2.0, 0.3]),
        orientation_wxyz=quaternion(yaw, pitch, roll),
        velocity_enu_m_s=np.array(v_enu, dtype=float),
        acceleration_enu_m_s2=np.array([0.1, -2.0, 0.05]),
        angular_velocity_body_rad_s=np.array([0.01, -0.02, 0.3]),
        angular_acceleration_body_rad_s2=np.array([0.0, 0.0, 0.1]),
        wheel_angle_rad=np.array([1.0, 2.0, 3.0, 4.0]),
        wheel_rate_rad_s=np.array([40.0, 41.0, 39.5, 40.5]),
        wheel_torque_n_m=np.array([0.0, 0.0, 120.0, 125.0]),
        steering_wheel_angle_rad=0.5,
        suspension_travel_m=np.array([0.01, -0.01, 0.005, -0.005]),
        tire_force_n=np.array([[100.0, 2000.0, 4100.0], [110.0, 1500.0, 3900.0],
                               [300.0, 1800.0, 3600.0], [310.0, 1200.0, 3400.0]]),
        slip_ratio=np.array([0.01, 0.012, 0.03, 0.031]),
        slip_angle_rad=np.array([-0.04, -0.035, -0.03, -0.028]),
        contact_point_base_m=np.array([[2.6, 0.78, 0.0], [2.6, -0.78, 0.0],
                                       [0.0, 0.78, 0.0], [0.0, -0.78, 0.0]]),
        mass_kg=1620.0,
        friction_coefficient=0.9,
    )


def assert_same_sample(got, want):
    assert type(got) is type(want)
    for name, a, b in zip(want._fields, got, want):
        if isinstance(b, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0, equal_nan=True, err_msg=name)
        elif isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-15, abs=0) or (math.isnan(a) and math.isnan(b)), name
        else:
            assert a == b, name


def write_samples(path, samples, storage="sqlite3", **kwargs):
    with BagWriter(path, storage=storage, **kwargs) as writer:
        for sample in samples:
            writer.write_sample(sample)
    return writer


def metadata(path):
    return yaml.safe_load((Path(path) / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


# --- types -------------------------------------------------------------------------------

def test_typestore_has_the_package_types_and_a_current_distro():
    store = convert.typestore()
    for name in convert.CUSTOM_TYPES:
        assert name in store.types
    assert convert.STORE.name in {"ROS2_KILTED", "ROS2_JAZZY"}
    wheel_force = store.types[convert.WHEEL_FORCE]
    assert list(wheel_force.__dataclass_fields__)[:6] == ["name", "fx_n", "fy_n", "fz_n", "slip_ratio",
                                                          "slip_angle_rad"]


def test_standard_types_identical_in_jazzy_and_kilted():
    """Bags written with the Kilted store are the same bytes and hashes for a Jazzy reader."""
    from rosbags.typesys import Stores, get_typestore

    if not hasattr(Stores, "ROS2_KILTED"):
        pytest.skip("rosbags without a Kilted store")
    jazzy, kilted = get_typestore(Stores.ROS2_JAZZY), get_typestore(Stores.ROS2_KILTED)
    used = [convert.IMU, convert.NAV_SAT_FIX, convert.TWIST_WITH_COVARIANCE_STAMPED,
            convert.JOINT_STATE, convert.ODOMETRY, "std_msgs/msg/Header", "geometry_msgs/msg/Point",
            "geometry_msgs/msg/Vector3"]
    for name in used:
        assert jazzy.hash_rihs01(name) == kilted.hash_rihs01(name), name


def test_message_definitions_found_and_registered_in_order():
    for name in paths.MESSAGE_NAMES:
        found = paths.message_definition(name)
        assert found.read_text() == (REPO / "msg" / f"{name}.msg").read_text()
    assert paths.MESSAGE_NAMES.index("WheelForce") < paths.MESSAGE_NAMES.index("TireForces")
    with pytest.raises(ValueError, match="TireForces"):
        paths.message_definition("Nope")


def test_missing_data_file_is_one_clear_error():
    with pytest.raises(paths.DataFileNotFoundError) as info:
        paths.find_data_file("config/vehicles/no_such_vehicle.yaml")
    message = str(info.value)
    assert "config/vehicles/no_such_vehicle.yaml" in message and "searched" in message


def test_bad_message_definition_names_the_file(tmp_path):
    files = {name: REPO / "msg" / f"{name}.msg" for name in paths.MESSAGE_NAMES}
    broken = tmp_path / "TireForces.msg"
    broken.write_text("std_msgs/Header header\nNoSuchType[4] wheels\n")
    files["TireForces"] = broken
    with pytest.raises(IoError, match="TireForces.msg.*NoSuchType"):
        convert.make_typestore(files)
    broken.write_text("float64[ x\n")
    with pytest.raises(IoError, match="TireForces.msg"):
        convert.make_typestore(files)


def test_package_data_layout_of_pip_install(tmp_path):
    """setup.py's build_py puts msg/ and config/ into state_observer/_share/, and paths.py finds
    them there when neither a ROS install nor the source tree is around."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("setup.py", "MANIFEST.in", "package.xml"):
        shutil.copy(REPO / name, source / name)
    for name in ("msg", "config"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name)
    shutil.copytree(REPO / "state_observer", source / "state_observer",
                    ignore=shutil.ignore_patterns("__pycache__", "_share"))
    build = tmp_path / "lib"
    result = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)],
                            cwd=source, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in paths.MESSAGE_NAMES:
        assert (build / "state_observer" / "_share" / "msg" / f"{name}.msg").is_file()

    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(build)
    code = ("from state_observer import paths; from state_observer.io import convert; "
            "print(paths.message_definition('TireForces')); "
            "print(convert.typestore().hash_rihs01(convert.TIRE_FORCES))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    found, digest = result.stdout.split()
    assert Path(found).is_relative_to(build / "state_observer" / "_share")
    assert digest == convert.typestore().hash_rihs01(convert.TIRE_FORCES)


@pytest.mark.ros
def test_type_hashes_match_rosidl():
    """The RIHS01 hashes embedded in our bags are those rosidl computed for the installed
    interfaces, so `ros2 bag play` matches them to the built message types."""
    from ament_index_python.packages import get_package_share_directory

    store = convert.typestore()
    for package, name in [("state_observer", n) for n in paths.MESSAGE_NAMES] + [
            ("sensor_msgs", "Imu"), ("sensor_msgs", "NavSatFix"), ("sensor_msgs", "JointState"),
            ("geometry_msgs", "TwistWithCovarianceStamped"), ("nav_msgs", "Odometry")]:
        description = Path(get_package_share_directory(package)) / "msg" / f"{name}.json"
        want = json.loads(description.read_text())["type_hashes"][0]
        assert want["type_name"] == f"{package}/msg/{name}"
        assert store.hash_rihs01(want["type_name"]) == want["hash_string"], name


def test_io_layer_does_not_import_rclpy():
    code = ("import sys, state_observer.io.bag, state_observer.io.record, state_observer.paths; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- sensor samples ----------------------------------------------------------------------

@pytest.mark.parametrize("storage", STORAGES)
def test_samples_round_trip(tmp_path, storage):
    samples = all_samples()
    write_samples(tmp_path / "bag", samples, storage)
    read = list(read_samples(tmp_path / "bag"))
    assert len(read) == len(samples)
    kinds = {ImuSample: "/imu/data", GnssFix: "/gps/fix", GnssVelocity: "/gps/vel",
             WheelSample: "/wheel_states", SteeringSample: "/steering_state"}
    log_times = [log_ns for _, log_ns, _ in read]
    assert log_times == sorted(log_times)
    by_topic = {}
    for topic, log_ns, sample in read:
        assert log_ns == sample.receive_ns
        by_topic.setdefault(topic, []).append(sample)
    for record_type, topic in kinds.items():
        want = [s for s in samples if type(s) is record_type]
        got = by_topic[topic]
        assert len(got) == len(want) > 0
        for g, w in zip(sorted(got, key=lambda s: s.stamp_ns), sorted(want, key=lambda s: s.stamp_ns)):
            assert_same_sample(g, w)


def test_topic_remapping(tmp_path):
    samples = all_samples(n=5)
    write_samples(tmp_path / "bag", samples, topics={"imu": "/vehicle/imu"})
    topics = {topic for topic, _, _ in read_samples(tmp_path / "bag", topics={"imu": "/vehicle/imu"})}
    assert "/vehicle/imu" in topics and "/imu/data" not in topics


def test_sensor_message_conventions(tmp_path):
    rng = np.random.default_rng(1)
    samples = [imu(rng, EPOCH), gnss_fix(rng, EPOCH), gnss_fix(rng, EPOCH + MS, full_covariance=True),
               gnss_velocity(rng, EPOCH), wheels(rng, EPOCH, torque=False), steering(rng, EPOCH)]
    write_samples(tmp_path / "bag", samples)
    msgs = {}
    for topic, _, msg in read_messages(tmp_path / "bag"):
        msgs.setdefault(topic, []).append(msg)

    m = msgs["/imu/data"][0]
    assert m.__msgtype__ == "sensor_msgs/msg/Imu"
    assert m.header.frame_id == "imu_link"
    assert (m.header.stamp.sec, m.header.stamp.nanosec) == divmod(EPOCH, 1_000_000_000)
    assert m.orientation_covariance[0] == -1.0  # REP-145: no orientation
    np.testing.assert_array_equal(m.angular_velocity_covariance, np.diag([0.0035**2] * 3).ravel())
    np.testing.assert_array_equal(m.linear_acceleration_covariance, np.diag([0.025**2] * 3).ravel())

    diagonal, full = msgs["/gps/fix"]
    assert diagonal.__msgtype__ == "sensor_msgs/msg/NavSatFix"
    assert diagonal.status.service == 1 and diagonal.status.status == 0  # GPS, FIX
    assert diagonal.position_covariance_type == 2  # DIAGONAL_KNOWN
    assert full.position_covariance_type == 3  # KNOWN
    np.testing.assert_array_equal(full.position_covariance, samples[2].position_covariance_enu_m2.ravel())
    assert full.position_covariance[1] == full.position_covariance[3] == 0.4  # row-major E-N term

    v = msgs["/gps/vel"][0]
    assert v.__msgtype__ == "geometry_msgs/msg/TwistWithCovarianceStamped"
    np.testing.assert_array_equal([v.twist.twist.linear.x, v.twist.twist.linear.y, v.twist.twist.linear.z],
                                  samples[3].velocity_enu_m_s)
    cov = np.asarray(v.twist.covariance).reshape(6, 6)
    np.testing.assert_array_equal(cov[:3, :3], samples[3].covariance_m2_s2)
    assert cov[3, 3] == -1.0  # angular rate not provided
    assert not cov[3:, :3].any() and not cov[:3, 3:].any()
    assert not np.delete(cov[3:, 3:].ravel(), 0).any()

    w = msgs["/wheel_states"][0]
    assert w.__msgtype__ == "sensor_msgs/msg/JointState"
    assert list(w.name) == list(WHEEL_JOINTS)
    np.testing.assert_array_equal(w.velocity, samples[4].rate_rad_s)
    assert len(w.effort) == 0  # torque unknown for every wheel

    s = msgs["/steering_state"][0]
    assert list(s.name) == [STEERING_JOINT] and list(s.position) == [samples[5].steering_wheel_angle_rad]


def test_unknown_and_missing_covariances_read_as_nan(tmp_path):
    rng = np.random.default_rng(2)
    unknown_imu = imu(rng, EPOCH)._replace(angular_velocity_sigma=math.nan, linear_acceleration_sigma=0.0)
    unknown_fix = gnss_fix(rng, EPOCH)._replace(position_covariance_enu_m2=np.full((3, 3), np.nan))
    write_samples(tmp_path / "bag", [unknown_imu, unknown_fix])
    got = {type(s): s for _, _, s in read_samples(tmp_path / "bag")}
    assert np.isnan(got[ImuSample].angular_velocity_sigma).all() and got[ImuSample].angular_velocity_sigma.shape == (3,)
    assert np.isnan(got[ImuSample].linear_acceleration_sigma).all()  # all-zero covariance = unknown
    np.testing.assert_array_equal(got[ImuSample].angular_velocity_rad_s, unknown_imu.angular_velocity_rad_s)
    assert np.isnan(got[GnssFix].position_covariance_enu_m2).all()


def test_joint_states_are_matched_by_name():
    store = convert.typestore()
    joint_state = store.types[convert.JOINT_STATE]
    header = store.types["std_msgs/msg/Header"](
        stamp=store.types["builtin_interfaces/msg/Time"](sec=3, nanosec=5), frame_id="")
    msg = joint_state(header=header,
                      name=["wheel_rr_joint", "steering_wheel_joint", "wheel_fl_joint", "wheel_fr_joint"],
                      position=np.array([4.0, 0.3, 1.0, 2.0]), velocity=np.zeros(0),
                      effort=np.array([40.0, 0.0, 10.0, 20.0]))
    sample = convert.msg_to_wheels(msg, receive_ns=3_000_000_010)
    assert sample.stamp_ns == 3_000_000_005 and sample.receive_ns == 3_000_000_010
    np.testing.assert_array_equal(sample.angle_rad, [1.0, 2.0, np.nan, 4.0])
    assert np.isnan(sample.rate_rad_s).all()
    np.testing.assert_array_equal(sample.torque_n_m, [10.0, 20.0, np.nan, 40.0])
    assert convert.msg_to_steering(msg, 0).steering_wheel_angle_rad == 0.3
    with pytest.raises(IoError, match="wheel joints"):
        convert.msg_to_wheels(joint_state(header=header, name=["x"], position=np.zeros(1),
                                          velocity=np.zeros(0), effort=np.zeros(0)), 0)


def test_bad_sample_shape_is_refused(tmp_path):
    rng = np.random.default_rng(3)
    bad = imu(rng, EPOCH)._replace(angular_velocity_rad_s=np.zeros(2))
    with pytest.raises(IoError, match="angular_velocity_rad_s"):
        write_samples(tmp_path / "bag", [bad])


# --- ground truth ------------------------------------------------------------------------

@pytest.mark.parametrize("storage", STORAGES)
def test_truth_topics(tmp_path, storage):
    truths = [truth(k * 0.004) for k in range(25)]
    with BagWriter(tmp_path / "bag", storage=storage) as writer:
        for t in truths:
            writer.write_truth(t, epoch_ns=EPOCH)
    assert writer.counts == {topic: 25 for topic in convert.TRUTH_TOPICS.values()}

    got = {}
    for topic, log_ns, msg in read_messages(tmp_path / "bag"):
        got.setdefault(topic, []).append((log_ns, msg))
    assert set(got) == {"/truth/odometry", "/truth/tire_forces", "/truth/parameters", "/truth/state"}
    expected_types = {"/truth/odometry": "nav_msgs/msg/Odometry",
                      "/truth/tire_forces": "state_observer/msg/TireForces",
                      "/truth/parameters": "state_observer/msg/VehicleParameters",
                      "/truth/state": "state_observer/msg/ObserverState"}
    for topic, messages in got.items():
        assert len(messages) == 25
        for k, (log_ns, msg) in enumerate(messages):
            assert msg.__msgtype__ == expected_types[topic]
            stamp = convert.stamp_to_ns(msg.header.stamp)
            assert stamp == log_ns == EPOCH + k * 4 * MS

    t0 = truths[3]
    odom = got["/truth/odometry"][3][1]
    assert odom.header.frame_id == "odom" and odom.child_frame_id == "base_link"
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    np.testing.assert_array_equal([p.x, p.y, p.z], t0.position_enu_m)
    np.testing.assert_array_equal([q.w, q.x, q.y, q.z], t0.orientation_wxyz)  # msg order x y z w
    assert len(odom.pose.covariance) == 36 and not np.any(odom.pose.covariance)
    assert len(odom.twist.covariance) == 36 and not np.any(odom.twist.covariance)
    rotation = convert.quaternion_to_matrix(t0.orientation_wxyz)
    linear = odom.twist.twist.linear
    np.testing.assert_allclose([linear.x, linear.y, linear.z], rotation.T @ t0.velocity_enu_m_s, atol=1e-12)
    # Heading north (yaw 90 deg), nearly level: the 12 m/s northward velocity is forward in base_link.
    assert linear.x == pytest.approx(12.0, abs=0.35) and abs(linear.y) < 0.6
    angular = odom.twist.twist.angular
    np.testing.assert_array_equal([angular.x, angular.y, angular.z], t0.angular_velocity_body_rad_s)

    forces = got["/truth/tire_forces"][3][1]
    assert forces.header.frame_id == "base_link"
    assert [w.name for w in forces.wheels] == ["fl", "fr", "rl", "rr"]
    for i, w in enumerate(forces.wheels):
        np.testing.assert_array_equal([w.fx_n, w.fy_n, w.fz_n], t0.tire_force_n[i])
        assert (w.slip_ratio, w.slip_angle_rad) == (t0.slip_ratio[i], t0.slip_angle_rad[i])
        np.testing.assert_array_equal([w.contact_point.x, w.contact_point.y, w.contact_point.z],
                                      t0.contact_point_base_m[i])
        assert w.fx_sigma_n == w.fy_sigma_n == w.fz_sigma_n == 0.0

    params = got["/truth/parameters"][3][1]
    assert (params.mass_kg, params.friction_coefficient) == (1620.0, 0.9)
    assert params.mass_sigma_kg == params.friction_sigma == 0.0
    assert params.converged and params.estimator == "truth"

    state = got["/truth/state"][3][1]
    v_body = rotation.T @ t0.velocity_enu_m_s
    assert state.sideslip_rad == pytest.approx(math.atan2(v_body[1], v_body[0]), abs=1e-12)
    assert state.roll_rad == pytest.approx(-0.03, abs=1e-12)
    assert state.pitch_rad == pytest.approx(0.02, abs=1e-12)
    assert state.yaw_rate_rad_s == 0.3
    assert state.speed_m_s == pytest.approx(math.hypot(0.5, 12.0))
    np.testing.assert_array_equal(state.wheel_speed_rad_s, t0.wheel_rate_rad_s)
    np.testing.assert_array_equal(state.suspension_travel_m, t0.suspension_travel_m)
    a = state.body_acceleration_m_s2
    np.testing.assert_allclose([a.x, a.y, a.z], rotation.T @ t0.acceleration_enu_m_s2, atol=1e-12)
    assert list(state.nis_sensor_names) == [] and len(state.nis) == 0


def test_quaternion_to_matrix_matches_scipy():
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(4)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        want = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()
        np.testing.assert_allclose(convert.quaternion_to_matrix(q), want, atol=1e-14)


@pytest.mark.parametrize("storage", STORAGES)
def test_custom_types_readable_with_a_fresh_typestore(tmp_path, storage):
    """Decode our messages with nothing but rosbags and the .msg files of the repository."""
    from rosbags.rosbag2 import Reader

    with BagWriter(tmp_path / "bag", storage=storage) as writer:
        writer.write_truth(truth(0.5), epoch_ns=EPOCH)
    store = convert.make_typestore({name: REPO / "msg" / f"{name}.msg" for name in paths.MESSAGE_NAMES})
    with Reader(tmp_path / "bag") as reader:
        by_topic = {c.topic: c for c in reader.connections}
        connection = by_topic["/truth/tire_forces"]
        assert connection.msgtype == convert.TIRE_FORCES
        assert connection.digest == store.hash_rihs01(convert.TIRE_FORCES)
        assert "MSG: state_observer/WheelForce" in connection.msgdef.data  # embedded
        (_, _, raw), = reader.messages(connections=[connection])
        msg = store.deserialize_cdr(raw, convert.TIRE_FORCES)
        assert [w.name for w in msg.wheels] == ["fl", "fr", "rl", "rr"]
        assert msg.wheels[2].fz_n == 3600.0
        (_, _, raw), = reader.messages(connections=[by_topic["/truth/parameters"]])
        assert store.deserialize_cdr(raw, convert.VEHICLE_PARAMETERS).estimator == "truth"


# --- writer behaviour --------------------------------------------------------------------

def test_refuses_to_overwrite(tmp_path):
    path = tmp_path / "bag"
    samples = all_samples(n=3)
    write_samples(path, samples)
    with pytest.raises(IoError) as info:
        BagWriter(path)
    assert str(path) in str(info.value) and "--force" in str(info.value)
    assert len(list(read_samples(path))) == len(samples)  # untouched

    write_samples(path, samples[:2], overwrite=True, storage="mcap")
    assert len(list(read_samples(path))) == 2
    assert metadata(path)["storage_identifier"] == "mcap"


def test_force_never_removes_other_things(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(IoError, match="not a rosbag2 directory"):
        BagWriter(folder, overwrite=True)
    assert (folder / "notes.txt").read_text() == "keep me"
    plain_file = tmp_path / "file"
    plain_file.write_text("x")
    with pytest.raises(IoError, match="already exists"):
        BagWriter(plain_file)


@pytest.mark.parametrize("storage", STORAGES)
def test_partial_bag_is_valid_after_an_exception(tmp_path, storage):
    path = tmp_path / "bag"
    samples = all_samples(n=10)
    with pytest.raises(RuntimeError, match="solver diverged"):
        with BagWriter(path, storage=storage) as writer:
            for k, sample in enumerate(samples):
                writer.write_sample(sample)
                if k == 17:
                    raise RuntimeError("solver diverged")
    assert len(list(read_samples(path))) == 18
    assert metadata(path)["message_count"] == 18


@pytest.mark.parametrize("storage", STORAGES)
def test_metadata_lists_topics_and_counts(tmp_path, storage):
    samples = all_samples(n=10)
    with BagWriter(tmp_path / "bag", storage=storage, custom_data={"state_observer.seed": "7"}) as writer:
        for sample in samples:
            writer.write_sample(sample)
        writer.write_truth(truth(0.0), epoch_ns=EPOCH)
    info = metadata(tmp_path / "bag")
    assert info["version"] == 9
    assert info["storage_identifier"] == storage
    listed = {entry["topic_metadata"]["name"]: (entry["topic_metadata"]["type"], entry["message_count"])
              for entry in info["topics_with_message_count"]}
    expected = {
        "/imu/data": ("sensor_msgs/msg/Imu", 10), "/gps/fix": ("sensor_msgs/msg/NavSatFix", 2),
        "/gps/vel": ("geometry_msgs/msg/TwistWithCovarianceStamped", 2),
        "/wheel_states": ("sensor_msgs/msg/JointState", 11),
        "/steering_state": ("sensor_msgs/msg/JointState", 10),
        "/truth/odometry": ("nav_msgs/msg/Odometry", 1),
        "/truth/tire_forces": ("state_observer/msg/TireForces", 1),
        "/truth/parameters": ("state_observer/msg/VehicleParameters", 1),
        "/truth/state": ("state_observer/msg/ObserverState", 1),
    }
    assert listed == expected
    assert info["message_count"] == sum(count for _, count in expected.values())
    assert info["custom_data"] == {"state_observer.seed": "7"}
    for entry in info["topics_with_message_count"]:
        assert entry["topic_metadata"]["type_description_hash"].startswith("RIHS01_")
    assert writer.counts == {topic: count for topic, (_, count) in expected.items()}


def test_topic_statistics_on_a_hand_written_bag(tmp_path):
    store = convert.typestore()
    path = tmp_path / "bag"
    rng = np.random.default_rng(5)
    string = store.types["std_msgs/msg/String"]
    with BagWriter(path) as writer:
        for k in range(101):  # 100 Hz for 1 s, header stamps = log time - 2 ms
            stamp = EPOCH + k * 10 * MS
            writer.write_sample(imu(rng, stamp))
        for k, stamp_ms in enumerate([0, 200, 400, 300, 800]):  # one stamp goes back
            sample = steering(rng, EPOCH + stamp_ms * MS)
            writer.write_sample(sample._replace(receive_ns=EPOCH + k * 200 * MS + 10 * MS))
        writer.write_sample(gnss_fix(rng, EPOCH))
        for k in range(11):  # no header: log times, 20 Hz
            writer.write("/note", "std_msgs/msg/String", string(data=f"n{k}"), EPOCH + k * 50 * MS)
    stats = topic_statistics(path)
    assert set(stats) == {"/imu/data", "/steering_state", "/gps/fix", "/note"}
    count, rate, monotonic = stats["/imu/data"]
    assert count == 101 and rate == pytest.approx(100.0, rel=1e-12) and monotonic
    assert stats["/steering_state"].count == 5 and not stats["/steering_state"].monotonic_stamps
    assert stats["/gps/fix"].count == 1 and math.isnan(stats["/gps/fix"].mean_rate_hz)
    assert stats["/gps/fix"].monotonic_stamps
    assert stats["/note"] == (11, pytest.approx(20.0, rel=1e-12), True)


def test_write_type_conflict_and_closed_writer(tmp_path):
    rng = np.random.default_rng(6)
    with BagWriter(tmp_path / "bag", topics={"steering": "/wheel_states"}) as writer:
        writer.write_sample(wheels(rng, EPOCH))
        writer.write_sample(steering(rng, EPOCH))  # same type, same topic: allowed
        with pytest.raises(IoError, match="/wheel_states has type sensor_msgs/msg/JointState"):
            writer.write("/wheel_states", convert.IMU, convert.imu_to_msg(imu(rng, EPOCH), writer.store), EPOCH)
    with pytest.raises(IoError, match="not open"):
        writer.write_sample(wheels(rng, EPOCH))


# --- reading errors ----------------------------------------------------------------------

def test_reading_errors_name_the_path(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(IoError, match=str(missing)):
        list(read_samples(missing))

    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "metadata.yaml").write_text("this: [is not a bag")
    with pytest.raises(IoError, match=str(garbage)):
        list(read_samples(garbage))

    broken = tmp_path / "broken"
    write_samples(broken, all_samples(n=5))
    (broken / "broken.db3").write_bytes(b"\0" * 4096)
    with pytest.raises(IoError, match=str(broken)):
        list(read_samples(broken))

    truth_only = tmp_path / "truth_only"
    with BagWriter(truth_only) as writer:
        writer.write_truth(truth(0.0))
    with pytest.raises(IoError, match="none of the sensor topics"):
        list(read_samples(truth_only))
    with pytest.raises(IoError, match="no topic /nope"):
        list(read_messages(truth_only, ["/nope"]))


def test_sensor_topic_with_wrong_type_is_named(tmp_path):
    rng = np.random.default_rng(7)
    with BagWriter(tmp_path / "bag", topics={"wheels": "/imu/data"}) as writer:
        writer.write_sample(wheels(rng, EPOCH))
    with pytest.raises(IoError, match="/imu/data has type sensor_msgs/msg/JointState, expected sensor_msgs/msg/Imu"):
        list(read_samples(tmp_path / "bag"))


# --- the simulate command ------------------------------------------------------------------

def stub_simulator(fail_at_s=None, manoeuvres=("step_steer", "steady_circle")):
    """A stand-in for state_observer.sim.run with the contract of simulate() (for the CLI only;
    the real simulator is exercised by test_simulate_end_to_end)."""
    module = types.ModuleType("state_observer.sim.run")
    module.MANOEUVRES = manoeuvres
    module.calls = []

    def simulate(manoeuvre, vehicle_path=None, sensors_path=None, duration_s=None, seed=0, progress=None):
        module.calls.append(dict(manoeuvre=manoeuvre, vehicle_path=vehicle_path, sensors_path=sensors_path,
                                 duration_s=duration_s, seed=seed))
        total = duration_s if duration_s is not None else 0.2
        rng = np.random.default_rng(seed)
        for k in range(round(total / 0.004) + 1):
            t_s = k * 0.004
            if fail_at_s is not None and t_s >= fail_at_s:
                raise FloatingPointError("Newton iteration diverged")
            stamp = round(t_s * 1e9)
            samples = []
            if k % 2 == 0:
                samples.append(imu(rng, stamp))
            if k % 50 == 0:
                samples.append(gnss_fix(rng, stamp))
            yield truth(t_s), samples
            if progress is not None:
                progress(t_s, total)

    module.simulate = simulate
    return module


def test_simulate_command_writes_a_bag(tmp_path, monkeypatch, capsys):
    stub = stub_simulator()
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", stub)
    out = tmp_path / "run"
    assert cli.main(["simulate", "--manoeuvre", "step_steer", "--duration", "0.4", "--seed", "3",
                     "--out", str(out)]) == 0  # MCAP by default, as rosbag2 since Iron (issue 16)
    assert stub.calls == [dict(manoeuvre="step_steer", vehicle_path=None, sensors_path=None,
                               duration_s=0.4, seed=3)]
    captured = capsys.readouterr()
    summary = captured.out.strip().splitlines()
    assert len(summary) == 1 and str(out) in summary[0] and "/truth/odometry 101" in summary[0]
    assert "real-time factor" in captured.err
    info = metadata(out)
    assert info["storage_identifier"] == "mcap"
    assert info["custom_data"]["state_observer.manoeuvre"] == "step_steer"
    stats = topic_statistics(out)
    assert stats["/truth/odometry"] == (101, pytest.approx(250.0, rel=1e-9), True)
    assert stats["/imu/data"] == (51, pytest.approx(125.0, rel=1e-9), True)
    assert stats["/gps/fix"].count == 3
    # Log-time order in the file (samples held back until the truth reaches their receive time).
    log_times = [log_ns for _, log_ns, _ in read_messages(out)]
    assert log_times == sorted(log_times)


def test_simulate_command_argument_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", stub_simulator())
    out = tmp_path / "run"
    assert cli.main(["simulate", "--manoeuvre", "moonwalk", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "moonwalk" in err and "step_steer, steady_circle" in err
    assert cli.main(["simulate", "--manoeuvre", "step_steer", "--vehicle", str(tmp_path / "car.yaml"),
                     "--out", str(out)]) == 2
    assert "car.yaml" in capsys.readouterr().err
    for bad in (["--duration", "-1"], ["--duration", "nan"], ["--seed", "x"], ["--storage", "zip"]):
        with pytest.raises(SystemExit) as info:
            cli.main(["simulate", "--manoeuvre", "step_steer", "--out", str(out), *bad])
        assert info.value.code == 2
    assert not out.exists()


def test_simulate_command_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", stub_simulator())
    out = tmp_path / "run"
    args = ["simulate", "--manoeuvre", "step_steer", "--out", str(out)]
    assert cli.main(args) == 0
    capsys.readouterr()
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "--force" in err
    assert cli.main([*args, "--force", "--duration", "0.1"]) == 0
    assert topic_statistics(out)["/truth/odometry"].count == 26


def test_simulate_command_failure_keeps_the_partial_bag(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", stub_simulator(fail_at_s=0.1))
    out = tmp_path / "run"
    assert cli.main(["simulate", "--manoeuvre", "step_steer", "--duration", "1", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    error_lines = [line for line in captured.err.splitlines() if "error" in line]
    assert len(error_lines) == 1
    assert "FloatingPointError: Newton iteration diverged" in error_lines[0]
    assert "partial bag kept" in error_lines[0] and str(out) in error_lines[0]
    assert captured.out == ""
    stats = topic_statistics(out)
    assert stats["/truth/odometry"].count == 25  # t = 0 ... 0.096 s
    assert stats["/imu/data"].count == 13  # every IMU sample of those steps, none lost


def test_simulate_command_failure_before_any_message_leaves_no_bag(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", stub_simulator(fail_at_s=0.0))
    out = tmp_path / "run"
    assert cli.main(["simulate", "--manoeuvre", "step_steer", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no bag written" in err
    assert not out.exists()


def test_simulate_command_without_simulator(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "state_observer.sim.run", None)  # import fails
    assert cli.main(["simulate", "--manoeuvre", "step_steer", "--out", str(tmp_path / "run")]) == 1
    assert "state_observer.sim.run" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


SLOW_RUN = """
import signal, sys, time, types
import numpy as np
# a test runner started in the background (`make test &`) passes SIGINT on as ignored; the command's
# behaviour under Ctrl-C is what is tested, so restore Python's default
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = {path!r}
from test_bag_io import stub_simulator
stub = stub_simulator()
endless = stub.simulate
def simulate(*args, **kwargs):
    for step in endless(*args, **kwargs):
        time.sleep(0.002)
        yield step
stub.simulate = simulate
sys.modules["state_observer.sim.run"] = stub
from state_observer import cli
sys.exit(cli.main(["simulate", "--manoeuvre", "step_steer", "--duration", "1000", "--out", {out!r}]))
"""


@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_simulate_command_signal_keeps_the_partial_bag(tmp_path, signum, code, word):
    out = tmp_path / "run"
    script = SLOW_RUN.format(path=[str(Path(__file__).parent), *sys.path], out=str(out))
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        progress = child.stderr.readline()  # the first progress line: the bag is being written
        assert "real-time factor" in progress, progress
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == code, err
    last = err.strip().splitlines()[-1]
    assert word in last and "partial bag kept" in last
    stats = topic_statistics(out)
    assert stats["/truth/odometry"].count > 0 and stats["/truth/odometry"].monotonic_stamps


def configured_rates() -> dict[str, float]:
    """Topic -> rate_hz of the enabled sensors of config/sensors/default.yaml."""
    config = yaml.safe_load(paths.default_sensors_path().read_text())
    sections = {"imu": "/imu/data", "gnss_fix": "/gps/fix", "gnss_velocity": "/gps/vel",
                "wheel_encoders": "/wheel_states", "steering": "/steering_state"}
    return {topic: float(config[name]["rate_hz"]) for name, topic in sections.items()
            if config[name].get("enabled", True)}


def test_simulate_end_to_end(tmp_path, capsys):
    """A bag written by `simulate` is read back with rosbags and every topic has the
    configured rate and valid stamps (runs once state_observer.sim.run exists); /tf follows the truth's
    odometry under its own base frame, /tf_static places the sensors as the vehicle file does."""
    run = pytest.importorskip("state_observer.sim.run")
    out = tmp_path / "step_steer"
    duration_s = 1.0
    manoeuvre = "step_steer" if "step_steer" in run.MANOEUVRES else next(iter(run.MANOEUVRES))
    assert cli.main(["simulate", "--manoeuvre", manoeuvre, "--duration", str(duration_s),
                     "--out", str(out)]) == 0, capsys.readouterr().err
    stats = topic_statistics(out)
    rates = {**configured_rates(), **{topic: 250.0 for topic in (*convert.TRUTH_TOPICS.values(), "/tf")}}
    assert set(stats) == set(rates) | {"/tf_static"} and stats["/tf_static"].count == 1
    del stats["/tf_static"]
    for topic, (count, rate, monotonic) in stats.items():
        assert monotonic, topic
        assert count == pytest.approx(rates[topic] * duration_s + 1, abs=1), topic
        assert rate == pytest.approx(rates[topic], rel=1e-3), topic
    samples = list(read_samples(out))
    assert len(samples) == sum(stats[topic].count for topic in configured_rates())
    assert all(sample.receive_ns >= sample.stamp_ns for _, _, sample in samples)
    # stamps start at the default start time (2026-01-01T00:00:00Z), not at ROS time 0
    start_ns = 1767225600 * 10**9
    assert min(sample.stamp_ns for _, _, sample in samples) == start_ns
    first_truth = next(read_messages(out, ["/truth/odometry"]))
    assert first_truth[1] == start_ns
    first_tf = next(read_messages(out, ["/tf"]))[2].transforms[0]
    assert (first_tf.header.frame_id, first_tf.child_frame_id) == ("odom", "truth/base_link")
    assert first_tf.transform.translation.x == first_truth[2].pose.pose.position.x
    (_, _, static), = read_messages(out, ["/tf_static"])
    imu, gnss = static.transforms
    assert (imu.header.frame_id, imu.child_frame_id, gnss.child_frame_id) == ("base_link", "imu_link", "gnss_link")
    assert (imu.transform.translation.x, gnss.transform.translation.z) == (1.30, 1.45)  # config/vehicles/default.yaml


@pytest.mark.parametrize("odom, base", [("odom", "base_link"), ("map", "base_footprint"), ("o", "b123"), ("", "")])
def test_odometry_encoder_writes_the_bytes_rosbags_writes(odom, base):
    """The observer's direct CDR encoding of nav_msgs/Odometry equals rosbags' serialisation of the message
    (string padding and double alignment depend on the frame ids)."""
    store = convert.typestore()
    frames = convert.TruthFrames(odom, base)
    rng = np.random.default_rng(len(odom) + len(base))
    args = (1767225600_123456789, rng.normal(size=3), rng.normal(size=4), rng.normal(size=3), rng.normal(size=3),
            rng.normal(size=(6, 6)), rng.normal(size=(6, 6)))
    direct = convert.OdometryEncoder(frames).encode(*args)
    msg = convert.odometry_msg(*args[1:5], args[0], store, frames, args[5], args[6])
    assert direct == bytes(store.serialize_cdr(msg, convert.ODOMETRY))


@pytest.mark.parametrize("parent, child", [("odom", "base_link"), ("map", "base_footprint"), ("o", "b123"), ("", ""), ("odom", "truth/base_link")])
def test_transform_encoder_writes_the_bytes_rosbags_writes(parent, child):
    """The direct CDR encoding of a one-transform tf2_msgs/TFMessage (the /tf written with every odometry message)
    equals rosbags' serialisation of the message built by tf_msg."""
    store = convert.typestore()
    rng = np.random.default_rng(len(parent) + 7 * len(child))
    stamp, translation, q = 1767225600_987654321, rng.normal(size=3), rng.normal(size=4)
    direct = convert.TransformEncoder(parent, child).encode(stamp, translation, q)
    msg = convert.tf_msg([(stamp, parent, child, translation, q)], store)
    assert direct == bytes(store.serialize_cdr(msg, convert.TF_MESSAGE))


def test_a_topic_recorded_with_an_unknown_definition_is_named(tmp_path):
    """rosbag2 stores the definition of a type it does not have with encoding 'unknown'; rosbags cannot open such a
    bag (KeyError 'unknown'). The error is one line naming the topic and what to do (issue 13 item 6)."""
    import sqlite3

    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    from state_observer.io.bag import IoError, read_raw

    store = get_typestore(Stores.ROS2_HUMBLE)
    bag = tmp_path / "unknown"
    writer = Writer(bag, version=9)
    writer.open()
    writer.add_connection("/imu/data", "sensor_msgs/msg/Imu", typestore=store)
    note = writer.add_connection("/note", "std_msgs/msg/String", typestore=store)
    writer.write(note, 1000, store.serialize_cdr(store.types["std_msgs/msg/String"](data="x"), "std_msgs/msg/String"))
    writer.close()
    [db] = bag.glob("*.db3")
    with sqlite3.connect(db) as con:  # what rosbag2 writes for a type it could not find
        con.execute("UPDATE topics SET type = 'foo_msgs/msg/Bar' WHERE name = '/note'")
        con.execute("UPDATE message_definitions SET topic_type = 'foo_msgs/msg/Bar', encoding = 'unknown', "
                    "encoded_message_definition = '' WHERE topic_type = 'std_msgs/msg/String'")
    metadata = bag / "metadata.yaml"
    metadata.write_text(metadata.read_text().replace("type: std_msgs/msg/String", "type: foo_msgs/msg/Bar"))
    with pytest.raises(IoError) as info:
        list(read_raw(bag))
    text = str(info.value)
    assert "\n" not in text and "/note (foo_msgs/msg/Bar)" in text and "'unknown'" in text

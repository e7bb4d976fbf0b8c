"""bag_player and bag_recorder nodes: real bags (rosbags) through real rclpy publish/subscribe.

The bags are small synthetic ones written with ``BagWriter``; the player publishes their CDR
bytes unchanged and the subscribers (a raw listener, the recorder) must see the same bytes (up
to the zero padding DDS may add, see ``same_bytes``).
No assertion depends on how fast the machine is: timing is checked as order only.
"""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from state_observer.io import convert
from state_observer.io.bag import BagWriter, IoError, read_messages, read_raw
from state_observer.sensors.samples import GnssFix, ImuSample, SteeringSample, WheelSample

MS = 1_000_000
EPOCH = 1_700_000_000 * 1_000_000_000  # a realistic wall-clock epoch (ns)
NOTE = "bag_test_msgs/msg/Note"  # registered in a rosbags typestore only, not importable in rclpy


# --- bags --------------------------------------------------------------------------------

def samples(n=40):
    """IMU at 100 Hz, wheels and steering at 50 Hz, GNSS at 10 Hz over n * 10 ms, in receive
    order; one IMU message duplicated (same log time and bytes) and one steering stamp older
    than its predecessor's (out of order), as a real recording may have them."""
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        t = EPOCH + k * 10 * MS
        imu = ImuSample(t, t + 2 * MS, "imu_link", rng.normal(size=3), rng.normal(size=3) + [0, 0, 9.81],
                        0.0035, 0.025)
        out.append(imu)
        if k == 7:
            out.append(imu)
        if k % 2 == 0:
            out.append(WheelSample(t, t + 3 * MS, rng.normal(size=4), rng.normal(size=4) * 30,
                                   rng.normal(size=4) * 100))
            stamp = t - 30 * MS if k == 10 else t
            out.append(SteeringSample(stamp, t + 4 * MS, float(rng.normal())))
        if k % 10 == 0:
            out.append(GnssFix(t, t + 80 * MS, "gnss_antenna", 43.49 + k * 1e-6, -8.24, 59.9, 0,
                               np.diag([3.0, 3.0, 6.0])))
    return out


def write_bag(path, *, storage="sqlite3", note=False):
    """A bag of ``samples()`` plus VehicleParameters (a package type) at 20 Hz and, with
    ``note``, a topic /note of the rclpy-unknown type NOTE; returns read_raw() of it."""
    from rosbags.typesys import get_types_from_msg

    store = convert.make_typestore()
    if note:
        store.register(get_types_from_msg("string text", NOTE))
    params = store.types[convert.VEHICLE_PARAMETERS]
    header, time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    with BagWriter(path, storage=storage, store=store) as writer:
        for sample in samples():
            writer.write_sample(sample)
        for k in range(8):
            t = EPOCH + k * 50 * MS
            msg = params(header=header(stamp=time(sec=t // 10**9, nanosec=t % 10**9), frame_id="base_link"),
                         mass_kg=1600.0 + k, mass_sigma_kg=40.0, mass_status=1, mass_min_kg=800.0, mass_max_kg=3200.0, friction_coefficient=0.9,
                         friction_sigma=0.05, friction_status=0, friction_lower_bound=0.4, friction_min=0.1, friction_max=1.5,
                         cornering_stiffness_scale_front=1.0, cornering_stiffness_scale_front_sigma=0.1, cornering_stiffness_front_status=1,
                         cornering_stiffness_scale_rear=1.0, cornering_stiffness_scale_rear_sigma=0.1, cornering_stiffness_rear_status=1,
                         converged=k > 4, estimator="spi" if k % 2 else "truth")
            writer.write("/parameters", convert.VEHICLE_PARAMETERS, msg, t + MS)
            if note:
                writer.write("/note", NOTE, store.types[NOTE](text=f"note {k}"), t + 2 * MS)
    return list(read_raw(path))


def by_topic(messages):
    """{topic: [data, ...]} in bag order."""
    out = {}
    for topic, _, _, data in messages:
        out.setdefault(topic, []).append(data)
    return out


def same_bytes(received, sent):
    """{topic: [data]} ``received`` holds ``sent`` (the bag's bytes): same topics and counts, and
    each message the same bytes, or the same bytes zero-padded to a multiple of 4: Fast DDS pads
    the serialised payload between processes (not within one). The player publishes the bag's
    bytes unchanged."""
    def same(r, s):
        return r == s or r == s + b"\0" * (-len(s) % 4)

    return (received.keys() == sent.keys()
            and all(len(received[t]) == len(sent[t]) and all(map(same, received[t], sent[t]))
                    for t in sent))


# --- io: raw reading and writing (no ROS) ------------------------------------------------------

@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_read_raw_and_write_raw_keep_the_bytes(tmp_path, storage):
    messages = write_bag(tmp_path / "bag")
    log_times = [log_ns for _, _, log_ns, _ in messages]
    assert log_times == sorted(log_times)
    types = {topic: msgtype for topic, msgtype, _, _ in messages}
    assert types["/imu/data"] == convert.IMU and types["/parameters"] == convert.VEHICLE_PARAMETERS
    # The raw bytes are the CDR that read_messages decodes.
    store = convert.typestore()
    for (topic, msgtype, log_ns, data), (topic2, log_ns2, msg) in zip(messages, read_messages(tmp_path / "bag")):
        assert (topic, log_ns) == (topic2, log_ns2)
        assert store.serialize_cdr(msg, msgtype) == data

    with BagWriter(tmp_path / "copy", storage=storage) as writer:
        for topic, msgtype, log_ns, data in messages:
            writer.write_raw(topic, msgtype, data, log_ns)
    assert list(read_raw(tmp_path / "copy")) == messages
    assert writer.counts == {topic: len(data) for topic, data in by_topic(messages).items()}

    imu_only = list(read_raw(tmp_path / "copy", ["/imu/data"]))
    assert [m for m in messages if m[0] == "/imu/data"] == imu_only
    later = list(read_raw(tmp_path / "copy", start_ns=EPOCH + 200 * MS))
    assert later == [m for m in messages if m[2] >= EPOCH + 200 * MS] and later


def test_raw_io_errors(tmp_path):
    write_bag(tmp_path / "bag")
    with pytest.raises(IoError, match="no topic /nope"):
        list(read_raw(tmp_path / "bag", ["/imu/data", "/nope"]))
    with pytest.raises(IoError, match=str(tmp_path / "missing")):
        list(read_raw(tmp_path / "missing"))
    assert list(read_raw(tmp_path / "bag", [])) == []
    with BagWriter(tmp_path / "out") as writer:
        with pytest.raises(IoError, match="must be bytes"):
            writer.write_raw("/a", convert.IMU, "text", 0)
        with pytest.raises(IoError, match="cannot add topic /b"):
            writer.write_raw("/b", "no_pkg/msg/Nothing", b"\0\1\0\0", 0)
    with pytest.raises(IoError, match="not open"):
        writer.write_raw("/a", convert.IMU, b"\0\1\0\0", 0)


def test_read_raw_converts_a_ros1_bag_to_cdr(tmp_path):
    from rosbags.rosbag1 import Writer

    store = convert.typestore()
    string = store.types["std_msgs/msg/String"]
    with Writer(tmp_path / "old.bag") as writer:
        connection = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        for k in range(3):
            writer.write(connection, EPOCH + k * MS, store.serialize_ros1(string(data=f"hi {k}"),
                                                                          "std_msgs/msg/String"))
    got = list(read_raw(tmp_path / "old.bag"))
    assert got == [("/chatter", "std_msgs/msg/String", EPOCH + k * MS,
                    store.serialize_cdr(string(data=f"hi {k}"), "std_msgs/msg/String")) for k in range(3)]


# --- plain playback logic (rclpy imported, no graph) ---------------------------------------------

@pytest.mark.ros
def test_play_schedule_clock_and_loop():
    import threading

    from state_observer.ros.bag_player import play

    stream = [("/a", EPOCH, b"a0"), ("/b", EPOCH + 5 * MS, b"b0"), ("/a", EPOCH + 5 * MS, b"a1"),
              ("/a", EPOCH + 30 * MS, b"a2")]
    events = []
    stats = play(lambda: iter(stream), EPOCH, EPOCH + 40 * MS, rate=2.0,
                 publish=lambda topic, data: events.append(("msg", data)),
                 publish_clock=lambda ns: events.append(("clock", ns)), clock_period_s=0.002)
    assert [data for kind, data in events if kind == "msg"] == [b"a0", b"b0", b"a1", b"a2"]
    clock = [ns for kind, ns in events if kind == "clock"]
    assert clock[0] == EPOCH and clock[-1] == EPOCH + 30 * MS and clock == sorted(clock)
    assert len(clock) > 5  # ticks between messages (30 ms of bag at rate 2 = 15 ms, 2 ms period)
    for k, (kind, value) in enumerate(events):  # every message is preceded by its time
        if kind == "msg":
            log_ns = next(ns for topic, ns, data in stream if data == value)
            assert max(ns for kind2, ns in events[:k] if kind2 == "clock") == log_ns
    assert stats.counts == {"/a": 3, "/b": 1} and stats.passes == 1
    assert stats.bag_s == pytest.approx(0.030)

    stop = threading.Event()
    events.clear()
    stats = play(lambda: iter(stream), EPOCH, EPOCH + 40 * MS, rate=20.0, loop=True, stop=stop,
                 publish=lambda topic, data: events.append(("msg", data)),
                 publish_clock=lambda ns: events.append(("clock", ns)),
                 on_pass=lambda n: stop.set() if n == 4 else None)
    assert stats.passes == 4
    clock = [ns for kind, ns in events if kind == "clock"]
    jumps = [k for k in range(1, len(clock)) if clock[k] < clock[k - 1]]
    assert len(jumps) == 3 and all(clock[k] == EPOCH for k in jumps)
    assert [data for kind, data in events if kind == "msg"] == [b"a0", b"b0", b"a1", b"a2"] * 3


@pytest.mark.ros
def test_recorder_topic_validation():
    from state_observer.ros.bag_recorder import topic_types
    from state_observer.ros.common import ParameterError

    assert topic_types(["/a", "/b"], []) == {"/a": None, "/b": None}
    assert topic_types(["/a"], [convert.IMU]) == {"/a": convert.IMU}
    for topics, types, match in [([], [], "no topic"), (["/a", "/b"], [convert.IMU], "2 topics"),
                                 (["/a", "/a"], [], "/a given twice"), (["bad topic"], [], "bad topic"),
                                 (["/a"], ["Imu"], "not a type name")]:
        with pytest.raises(ParameterError, match=match):
            topic_types(topics, types)


# --- nodes on a private graph ------------------------------------------------------------

@pytest.fixture
def launch(ros):
    """launch(NodeClass, **parameters): a node on the test's context, spun by its executor."""
    from rclpy.parameter import Parameter

    made = []

    def make(node_class, **params):
        node = node_class(context=ros.context,
                          parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        made.append(node)
        ros.executor.add_node(node)
        return node

    yield make
    for node in made:
        ros.executor.remove_node(node)
        node.destroy_node()


class Listener:
    """Raw subscriptions to the topics of ``messages`` and to /clock, recording everything."""

    def __init__(self, node, messages):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        from state_observer.ros.common import message_class

        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.data = {}
        self.order = []  # (source timestamp ns, topic, index on the topic)
        self.clock = []
        for topic, msgtype, _, _ in messages:
            if topic not in self.data and message_class(msgtype) is not None:
                self.data[topic] = []
                node.create_subscription(message_class(msgtype), topic,
                                         lambda data, info, topic=topic: self._on(topic, data, info),
                                         qos, raw=True)
        node.create_subscription(Clock, "/clock", lambda msg: self.clock.append(
            msg.clock.sec * 10**9 + msg.clock.nanosec), qos)

    def _on(self, topic, data, info):
        self.order.append((info["source_timestamp"], topic, len(self.data[topic])))
        self.data[topic].append(data)

    @property
    def count(self):
        return sum(len(v) for v in self.data.values())


@pytest.mark.ros
def test_player_publishes_the_bag_bytes_in_order_with_clock(ros, launch, tmp_path):
    from state_observer.ros.bag_player import BagPlayer

    messages = write_bag(tmp_path / "bag")
    first, last = messages[0][2], messages[-1][2]
    listener = Listener(ros.node("listener"), messages)
    player = launch(BagPlayer, bag=str(tmp_path / "bag"), rate=10.0, wait_for_subscribers_s=15.0)
    assert ros.spin_until(lambda: player.done and listener.count == len(messages)
                          and listener.clock and listener.clock[-1] == last), \
        f"received {listener.count} of {len(messages)}, clock {listener.clock[-1:]}"
    assert player.error is None and player.skipped == {}

    # Every message, bytes unchanged, in bag order per topic (duplicates and old stamps included).
    assert any(len(data) % 4 for _, _, _, data in messages)  # some can get padded on the way
    assert same_bytes(listener.data, by_topic(messages))
    assert player.counts == {topic: len(d) for topic, d in by_topic(messages).items()}
    assert player.stats.passes == 1

    # Published in log-time order across topics (source timestamps of the publisher).
    log_times = {topic: [log_ns for t, _, log_ns, _ in messages if t == topic] for topic in listener.data}
    published = [log_times[topic][k] for _, topic, k in sorted(listener.order)]
    assert published == sorted(published)

    # /clock: bag time, monotonic, within the bag, ending at the last log time.
    assert listener.clock == sorted(listener.clock)
    assert first <= listener.clock[0] and listener.clock[-1] == last


@pytest.mark.ros
def test_player_loop_repeats_and_clock_jumps_back(ros, launch, tmp_path):
    from state_observer.ros.bag_player import BagPlayer

    messages = write_bag(tmp_path / "bag", storage="mcap")
    first, last = messages[0][2], messages[-1][2]
    listener = Listener(ros.node("listener"), messages)
    player = launch(BagPlayer, bag=str(tmp_path / "bag"), rate=10.0, loop=True,
                    wait_for_subscribers_s=15.0)
    want = by_topic(messages)

    def jumps():
        clock = listener.clock
        return [k for k in range(1, len(clock)) if clock[k] < clock[k - 1]]

    assert ros.spin_until(lambda: all(len(listener.data[t]) >= 2 * len(want[t]) + 1 for t in want)
                          and len(jumps()) >= 2)
    player.stop()
    assert player.done and player.error is None

    for topic, data in listener.data.items():  # the bag, again and again
        passes = -(-len(data) // len(want[topic]))
        assert same_bytes({topic: data}, {topic: (want[topic] * passes)[:len(data)]})
    clock = listener.clock
    assert 2 <= len(jumps()) <= player.passes - 1
    midpoint = (first + last) // 2
    for k in jumps():  # from the end of a pass back to its start, nowhere else
        assert clock[k - 1] > midpoint and clock[k] < midpoint
    assert min(clock) >= first and max(clock) <= last


@pytest.mark.ros
def test_player_start_offset_and_topic_selection(ros, launch, tmp_path):
    from state_observer.ros.bag_player import BagPlayer

    messages = write_bag(tmp_path / "bag")
    first = messages[0][2]
    chosen = [m for m in messages if m[0] in ("/imu/data", "/parameters") and m[2] >= first + 200 * MS]
    listener = Listener(ros.node("listener"), messages)
    player = launch(BagPlayer, bag=str(tmp_path / "bag"), rate=10.0, start_offset_s=0.2,
                    topics=["/imu/data", "/parameters"], wait_for_subscribers_s=15.0)
    assert ros.spin_until(lambda: player.done and listener.count == len(chosen)
                          and listener.clock and listener.clock[-1] == chosen[-1][2])
    assert same_bytes({t: d for t, d in listener.data.items() if d}, by_topic(chosen))
    assert player.origin_ns == first + 200 * MS
    assert min(listener.clock) >= player.origin_ns and listener.clock == sorted(listener.clock)


@pytest.mark.ros
def test_player_skips_a_type_rclpy_does_not_know(ros, launch, tmp_path, capfd):
    from state_observer.ros.bag_player import BagPlayer

    messages = write_bag(tmp_path / "bag", note=True)
    assert "/note" in by_topic(messages)
    listener = Listener(ros.node("listener"), messages)
    assert "/note" not in listener.data
    player = launch(BagPlayer, bag=str(tmp_path / "bag"), rate=20.0, wait_for_subscribers_s=15.0)
    played = [m for m in messages if m[0] != "/note"]
    assert ros.spin_until(lambda: player.done and listener.count == len(played))
    assert player.skipped == {"/note": NOTE}
    assert same_bytes(listener.data, by_topic(played)) and "/note" not in player.counts
    warnings = [line for line in capfd.readouterr().err.splitlines() if "/note" in line]
    assert len(warnings) == 1 and NOTE in warnings[0] and "WARN" in warnings[0]


@pytest.mark.ros
@pytest.mark.parametrize("storage, sim_time", [("sqlite3", False), ("mcap", True)])
def test_recorder_writes_what_the_player_plays(ros, launch, tmp_path, storage, sim_time):
    from state_observer.ros.bag_player import BagPlayer
    from state_observer.ros.bag_recorder import BagRecorder

    messages = write_bag(tmp_path / "bag")
    first, last = messages[0][2], messages[-1][2]
    want = by_topic(messages)
    # Types discovered from the graph: the recorder subscribes once the player's topics appear,
    # and the player waits for those subscriptions. With use_sim_time the recorder's clock is
    # the player's /clock, which only starts with the playback.
    recorder = launch(BagRecorder, output=str(tmp_path / "out"), topics=sorted(want), storage=storage,
                      use_sim_time=sim_time)
    player = launch(BagPlayer, bag=str(tmp_path / "bag"), rate=10.0, wait_for_subscribers_s=15.0,
                    publish_clock=sim_time)
    assert ros.spin_until(lambda: player.done and recorder.counts == {t: len(d) for t, d in want.items()}), \
        f"recorded {recorder.counts}"
    assert recorder.types == {topic: msgtype for topic, msgtype, _, _ in messages}
    recorder.stop()
    assert recorder.done and recorder.error is None

    recorded = list(read_raw(tmp_path / "out"))
    assert same_bytes(by_topic(recorded), want)  # as received
    log_times = [log_ns for _, _, log_ns, _ in recorded]
    assert log_times == sorted(log_times)
    if sim_time:  # receive time on /clock: bag time (0 before the first /clock arrived)
        assert first <= log_times[-1] <= last
    else:  # receive time on the system clock
        assert log_times[0] > EPOCH and log_times[-1] > last
    decoded = list(read_messages(tmp_path / "out"))
    assert len(decoded) == len(messages)
    assert {msg.__msgtype__ for _, _, msg in decoded} == set(recorder.types.values())
    info = yaml.safe_load((tmp_path / "out" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == storage and info["message_count"] == len(messages)


@pytest.mark.ros
def test_recorder_gets_a_latched_topic_published_before_it_started(ros, launch, tmp_path):
    """/tf_static is published once, transient local, often before a recorder starts: the recorder's default topics
    include /tf and /tf_static, and it subscribes transient local where the publisher offers it (as rosbag2 adapts to
    offered QoS), so the earlier message is in the bag."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from state_observer.io.convert import TF_MESSAGE, tf_msg
    from state_observer.ros.bag_recorder import BagRecorder
    from state_observer.ros.common import message_class

    publisher_node = ros.node("static_publisher")
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    publisher = publisher_node.create_publisher(message_class(TF_MESSAGE), "/tf_static", latched)
    store = convert.typestore()
    data = bytes(store.serialize_cdr(tf_msg([(EPOCH, "base_link", "imu_link", (1.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0))], store), TF_MESSAGE))
    publisher.publish(data)
    ros.spin_until(lambda: False, timeout_s=0.3)
    recorder = launch(BagRecorder, output=str(tmp_path / "out"))
    assert {"/tf", "/tf_static"} <= set(recorder.counts)
    assert ros.spin_until(lambda: recorder.counts["/tf_static"] == 1), f"recorded {recorder.counts}"
    recorder.stop()
    assert [d for topic, _, _, d in read_raw(tmp_path / "out") if topic == "/tf_static"] == [data]


# --- executables: bad input, signals ---------------------------------------------------------

def executable(name):
    from ament_index_python.packages import get_package_prefix

    return Path(get_package_prefix("state_observer")) / "lib" / "state_observer" / name


def error_lines(text, name):
    assert "Traceback" not in text
    return [line for line in text.splitlines() if line.startswith(f"{name}: error:")]


@pytest.mark.ros
def test_player_bad_input_is_one_clear_line(ros_environment, tmp_path, capfd):
    from state_observer.ros.bag_player import main

    write_bag(tmp_path / "bag")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("not a bag")
    cases = [
        ([f"bag:={tmp_path / 'missing'}"], [str(tmp_path / "missing"), "no such bag"]),
        ([f"bag:={tmp_path / 'folder'}"], [str(tmp_path / "folder"), "not a rosbag2 directory"]),
        ([f"bag:={tmp_path / 'bag'}", "topics:=[/imu/data, /nope]"], [str(tmp_path / "bag"), "no topic /nope"]),
        ([f"bag:={tmp_path / 'bag'}", "rate:=0.0"], ["parameter rate", "out of range"]),
        ([f"bag:={tmp_path / 'bag'}", "rate:=5"], ["parameter rate", "5.0"]),
        ([f"bag:={tmp_path / 'bag'}", "start_offset_s:=60.0"], ["parameter start_offset_s", "beyond"]),
        ([], ["parameter bag is required"]),
    ]
    for params, words in cases:
        args = ["bag_player", "--ros-args"] + [a for p in params for a in ("-p", p)]
        assert main(args) == 1, params
        lines = error_lines(capfd.readouterr().err, "bag_player")
        assert len(lines) == 1 and all(word in lines[0] for word in words), (params, lines)


@pytest.mark.ros
def test_recorder_bad_input_is_one_clear_line(ros_environment, tmp_path, capfd):
    from state_observer.ros.bag_recorder import main

    write_bag(tmp_path / "existing")
    cases = [
        ([f"output:={tmp_path / 'existing'}"], [str(tmp_path / "existing"), "already exists"]),
        ([f"output:={tmp_path / 'a'}", "topics:=[/x, /y]", "types:=[sensor_msgs/msg/Imu]"], ["parameter types"]),
        ([f"output:={tmp_path / 'b'}", "storage:=zip"], ["parameter storage", "zip"]),
        ([], ["parameter output is required"]),
    ]
    for params, words in cases:
        args = ["bag_recorder", "--ros-args"] + [a for p in params for a in ("-p", p)]
        assert main(args) == 1, params
        lines = error_lines(capfd.readouterr().err, "bag_recorder")
        assert len(lines) == 1 and all(word in lines[0] for word in words), (params, lines)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.ros
def test_player_executable_plays_to_the_end(ros_environment, tmp_path):
    messages = write_bag(tmp_path / "bag")
    result = subprocess.run([executable("bag_player"), "--ros-args", "-p", f"bag:={tmp_path / 'bag'}",
                             "-p", "rate:=20.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"played {len(messages)} messages in 1 pass(es)" in result.stderr + result.stdout
    result = subprocess.run([executable("bag_player"), "--ros-args", "-p", f"bag:={tmp_path / 'nope'}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert error_lines(result.stderr, "bag_player") == [f"bag_player: error: {tmp_path / 'nope'}: no such bag"]


@pytest.mark.ros
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_recorder_executable_keeps_everything_on_a_signal(ros, tmp_path, signum):
    from rclpy.duration import Duration
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from state_observer.ros.common import message_class

    messages = [m for m in write_bag(tmp_path / "bag") if m[0] == "/parameters"]
    assert any(len(data) % 4 for _, _, _, data in messages)  # some get padded between processes
    out = tmp_path / "out"
    process = subprocess.Popen([executable("bag_recorder"), "--ros-args", "-p", f"output:={out}",
                                "-p", "topics:=[/parameters]", "-p", f"types:=[{convert.VEHICLE_PARAMETERS}]",
                                "-p", "storage:=mcap"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        publisher = ros.node("source").create_publisher(
            message_class(convert.VEHICLE_PARAMETERS), "/parameters",
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        assert ros.spin_until(lambda: publisher.get_subscription_count() > 0 or process.poll() is not None)
        assert process.poll() is None
        for _, _, _, data in messages:
            publisher.publish(data)
        assert publisher.wait_for_all_acked(Duration(seconds=15))
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert same_bytes(by_topic(read_raw(out)), by_topic(messages))
    assert [msg.mass_kg for _, _, msg in read_messages(out)] == [1600.0 + k for k in range(len(messages))]
    info = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["message_count"] == len(messages)

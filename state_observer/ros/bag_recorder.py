"""``bag_recorder`` node: writes subscribed topics, as received, to a rosbag2.

    ros2 run state_observer bag_recorder --ros-args -p output:=/path/out \\
        -p topics:="['/state_observer/odometry', '/state_observer/state']"

Subscriptions are ``raw``: the received CDR bytes are stored unchanged with
``BagWriter.write_raw``, at log time = receive time on the node's clock (which follows
``/clock`` with ``-p use_sim_time:=true``; before the first ``/clock`` message that time is 0).
A topic's type comes from ``types`` or, when ``types`` is empty, from the ROS graph: the
recorder looks every ``DISCOVERY_PERIOD_S`` and subscribes once the topic appears (with the
first type the graph lists). A type without an importable rclpy package, or unknown to the
bag's typestore (``state_observer.io.convert.typestore()``), is skipped with one warning.

QoS: KEEP_LAST(``QOS_DEPTH``), VOLATILE (TRANSIENT_LOCAL where every publisher offers it, as for /tf_static);
RELIABLE with ``qos_reliable`` (does not match best-effort publishers), else BEST_EFFORT (matches every publisher,
may drop messages).  By default it records the observer's outputs with /tf and /tf_static.

On SIGINT/SIGTERM (or ``stop()``), messages already received are written and the bag is closed
with its metadata.yaml.
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.validate_topic_name import validate_topic_name

from state_observer.io.bag import DEFAULT_STORAGE, STORAGES, BagWriter, IoError
from state_observer.ros import PUBLISHERS_FOUND
from state_observer.io.convert import OUTPUT_TOPICS, TF_STATIC_TOPIC, TF_TOPIC
from state_observer.ros.common import ParameterError, declare, message_class, run

__all__ = ["DISCOVERY_PERIOD_S", "QOS_DEPTH", "BagRecorder", "main", "topic_types"]

DISCOVERY_PERIOD_S = 0.5  # graph polling period for topics of unknown type (s)
QOS_DEPTH = 1000  # KEEP_LAST depth of the subscriptions


def topic_types(topics: Sequence[str], types: Sequence[str]) -> dict[str, str | None]:
    """``{topic: type or None (discover)}``; ``ParameterError`` for bad or duplicate topics, or
    a ``types`` that is neither empty nor as long as ``topics``."""
    if not topics:
        raise ParameterError("parameter topics: no topic to record")
    if types and len(types) != len(topics):
        raise ParameterError(f"parameter types: {len(types)} types for {len(topics)} topics "
                             "(give one type per topic, or none to discover them)")
    for topic in topics:
        try:
            validate_topic_name(topic)
        except Exception as exc:  # noqa: BLE001 - InvalidTopicNameException
            raise ParameterError(f"parameter topics: {topic!r} is not a valid topic name: "
                                 f"{str(exc).splitlines()[0]}") from None
    duplicates = sorted({t for t in topics if list(topics).count(t) > 1})
    if duplicates:
        raise ParameterError(f"parameter topics: {', '.join(duplicates)} given twice")
    for msgtype in types:
        if msgtype.count("/") != 2:
            raise ParameterError(f"parameter types: {msgtype!r} is not a type name "
                                 "like sensor_msgs/msg/Imu")
    return {topic: (types[i] if types else None) for i, topic in enumerate(topics)}


class BagRecorder(Node):
    """Records ``topics`` to the bag ``output`` (parameters below).

    ``counts``: messages written per topic; ``types``: the type subscribed per topic;
    ``skipped``: topics not recorded (topic -> type); ``done``: stopped (``stop()``, or an
    error in ``error``). Bad parameters or an existing ``output`` raise ``ParameterError`` /
    ``IoError`` from the constructor.
    """

    def __init__(self, **node_kwargs) -> None:
        super().__init__("bag_recorder", **node_kwargs)
        output = declare(self, "output", "", "Bag directory to create (required)")
        topics = declare(self, "topics", [*OUTPUT_TOPICS.values(), TF_TOPIC, TF_STATIC_TOPIC], "Topics to record")
        types = declare(self, "types", Parameter.Type.STRING_ARRAY,
                        "Message type per topic (e.g. sensor_msgs/msg/Imu); "
                        "empty: discovered from the graph")
        storage = declare(self, "storage", DEFAULT_STORAGE, "Bag storage: mcap (rosbag2's default since Iron) or sqlite3")
        overwrite = declare(self, "overwrite", False, "Replace an existing bag at output")
        reliable = declare(self, "qos_reliable", True,
                           "RELIABLE subscriptions (else BEST_EFFORT)")
        if not output:
            raise ParameterError("parameter output is required (-p output:=/path/out)")
        if storage not in STORAGES:
            raise ParameterError(f"parameter storage: {storage!r}; use one of {', '.join(STORAGES)}")
        pending = topic_types(list(topics), types)

        self.output = output
        self.counts: dict[str, int] = {topic: 0 for topic in pending}
        self.types: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        self.error: str | None = None
        self._qos = QoSProfile(depth=QOS_DEPTH, history=HistoryPolicy.KEEP_LAST,
                               durability=DurabilityPolicy.VOLATILE,
                               reliability=ReliabilityPolicy.RELIABLE if reliable
                               else ReliabilityPolicy.BEST_EFFORT)
        self._writer: BagWriter | None = BagWriter(output, overwrite=overwrite, storage=storage).open()
        self._pending = [topic for topic, msgtype in pending.items() if msgtype is None]
        for topic, msgtype in pending.items():
            if msgtype is not None:
                self._subscribe(topic, msgtype)
        self._timer = None
        if self._pending:
            # On the steady clock: with use_sim_time, ROS time stands still until /clock comes.
            self._timer = self.create_timer(DISCOVERY_PERIOD_S, self._discover,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
            self._discover()
        self.get_logger().info(f"recording {len(pending)} topic(s) to {output} ({storage})")
        # one line once every recorded topic has a publisher in the graph: a caller that starts the data only then
        # (the demo) loses nothing to discovery
        self._all_topics = list(pending)
        self._publisher_watch = self.create_timer(DISCOVERY_PERIOD_S, self._watch_publishers,
                                                  clock=Clock(clock_type=ClockType.STEADY_TIME))

    @property
    def done(self) -> bool:
        return self._writer is None

    def _subscribe(self, topic: str, msgtype: str) -> None:
        cls = message_class(msgtype)
        if cls is None or msgtype not in self._writer.store.types:
            why = "not available in this ROS installation" if cls is None else \
                "unknown to the bag's typestore"
            self.get_logger().warning(f"skipping {topic}: message type {msgtype} is {why}")
            self.skipped[topic] = msgtype
            return
        self.create_subscription(cls, topic, partial(self._on_message, topic, msgtype), self._qos_for(topic), raw=True)
        self.types[topic] = msgtype

    def _qos_for(self, topic: str) -> QoSProfile:
        """``qos_reliable``'s profile, transient local where every publisher offers it (latched topics such as
        /tf_static: their last message reaches a recorder started later), as rosbag2 adapts to offered QoS."""
        offered = self.get_publishers_info_by_topic(topic)
        if not offered or any(p.qos_profile.durability != DurabilityPolicy.TRANSIENT_LOCAL for p in offered):
            return self._qos
        return QoSProfile(depth=self._qos.depth, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                          reliability=self._qos.reliability)

    def _discover(self) -> None:
        graph = dict(self.get_topic_names_and_types())
        for topic in [t for t in self._pending if graph.get(t)]:
            self._pending.remove(topic)
            if len(graph[topic]) > 1:
                self.get_logger().warning(f"{topic} has several types {graph[topic]}; "
                                          f"recording {graph[topic][0]}")
            self._subscribe(topic, graph[topic][0])
        if not self._pending and self._timer is not None:
            self._timer.cancel()

    def _watch_publishers(self) -> None:
        recorded = [t for t in self._all_topics if t not in self.skipped]
        if recorded and all(self.count_publishers(t) > 0 for t in recorded):
            self.get_logger().info(f"{PUBLISHERS_FOUND} {len(recorded)} recorded topic(s)")
            self._publisher_watch.cancel()

    def _on_message(self, topic: str, msgtype: str, data: bytes) -> None:
        if self._writer is None:
            return
        try:
            self._writer.write_raw(topic, msgtype, data, self.get_clock().now().nanoseconds)
        except IoError as exc:
            self.error = str(exc)
            self.get_logger().error(self.error)
            self.stop()
            return
        self.counts[topic] += 1

    def drain(self, executor, idle_s: float = 0.05) -> None:
        """Handle what has been received already: spin until ``idle_s`` passes without one."""
        while self._writer is not None:
            before = sum(self.counts.values())
            executor.spin_once(timeout_sec=idle_s)
            if sum(self.counts.values()) == before:
                return

    def stop(self) -> None:
        """Stop recording and close the bag (metadata.yaml); idempotent."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        try:
            writer.close()
        except IoError as exc:
            self.error = self.error or str(exc)
            self.get_logger().error(str(exc))
        counts = ", ".join(f"{topic} {n}" for topic, n in self.counts.items())
        self.get_logger().info(f"recorded {sum(self.counts.values())} messages to "
                               f"{self.output}: {counts}")

    def destroy_node(self) -> None:
        self.stop()
        super().destroy_node()


def main(args: Sequence[str] | None = None) -> int:
    """``bag_recorder`` executable; 0 after SIGINT/SIGTERM, 1 on bad input or a write error."""
    return run(BagRecorder, "bag_recorder", args)


if __name__ == "__main__":
    raise SystemExit(main())

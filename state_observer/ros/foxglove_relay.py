"""``foxglove_relay``: the live observer's topics served over the Foxglove WebSocket protocol (foxglove-sdk), for a
machine whose ROS 2 has no ``foxglove_bridge`` (the PyPI setup; a headless car computer watched from a laptop).

Every output topic of the observer (``io.convert.OUTPUT_TOPICS``: odometry, tire forces, parameters, state, path,
markers, diagnostics) and its ``/tf`` and ``/tf_static`` (or ``topics``) becomes one channel with message encoding
``cdr`` and the message type's ROS 2 definition (dependencies included, from the package's type store) as a ``ros2msg``
schema, as ``state-observer foxglove BAG`` serves a bag; each message is forwarded as the serialised bytes it arrived
in, logged at its arrival time.  ``/tf_static`` is latched as in ROS: a client that subscribes to it later gets the last
one again (the shipped layout's 3D panel follows base_link and draws the wheels and sensors from it).  Parameters:
``host`` (default 127.0.0.1: this machine only; 0.0.0.0 to be seen from others), ``port`` (8765, the app's default;
0: any free port, in :attr:`FoxgloveRelay.port`), ``topics``.
"""
from __future__ import annotations

import os
from collections import Counter
from functools import partial
from typing import Sequence

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from state_observer.errors import InputError
from state_observer.foxglove_view import ros_channel, sdk
from state_observer.io.convert import OUTPUT_MSGTYPES, OUTPUT_TOPICS, TF_MESSAGE, TF_STATIC_TOPIC, TF_TOPIC, make_typestore
from state_observer.paths import foxglove_layout_path
from state_observer.ros.common import TF_STATIC_QOS, ParameterError, declare, message_class, run

QOS_DEPTH = 100


class FoxgloveRelay(Node):
    """The relay of the module docstring. ``sent``: messages forwarded per topic; ``port``: the port it listens on."""

    def __init__(self, **node_kwargs) -> None:
        super().__init__("foxglove_relay", **node_kwargs)
        host = declare(self, "host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface)")
        port = declare(self, "port", 8765, "Port (0: any free port)")
        types = {**{topic: OUTPUT_MSGTYPES[kind] for kind, topic in OUTPUT_TOPICS.items()}, TF_TOPIC: TF_MESSAGE, TF_STATIC_TOPIC: TF_MESSAGE}
        topics = declare(self, "topics", list(types), "Output topics to serve")
        unknown = [t for t in topics if t not in types]
        if unknown:
            raise ParameterError(f"parameter topics: {', '.join(unknown)} not among the observer's outputs ({', '.join(types)})")
        try:
            foxglove = sdk()
        except InputError as exc:
            raise ParameterError(str(exc)) from None
        store = make_typestore(distro=os.environ.get("ROS_DISTRO") or None)
        self.done, self.error = False, None  # runs until shut down (ros/common.run)
        self.sent: Counter = Counter()
        self._static: tuple | None = None  # (channel, last /tf_static payload): sent again to each new subscriber
        self._foxglove_context = context = foxglove.Context()  # this server's channels only (the default context is the process's); kept alive with the node
        try:
            self.server = foxglove.start_server(name="state_observer live", host=host, port=int(port), context=context,
                                                server_listener=_Latch(self))
        except Exception as exc:  # noqa: BLE001 - port in use, bad address (the SDK raises its own errors)
            raise ParameterError(f"cannot serve on {host}:{port}: {exc}") from None
        self.port = self.server.port
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self.channels: list = []
        for topic in topics:
            msgtype = types[topic]
            cls = message_class(msgtype)
            if cls is None:
                raise ParameterError(f"parameter topics: the message type {msgtype} of {topic} is not importable (is the package built and sourced?)")
            channel = ros_channel(foxglove, context, topic, msgtype, store.generate_msgdef(msgtype, ros_version=2)[0])
            self.channels.append(channel)
            self.create_subscription(cls, topic, partial(self._forward, topic, channel), TF_STATIC_QOS if topic == TF_STATIC_TOPIC else qos, raw=True)
        self.get_logger().info(f"serving {len(self.channels)} topics on ws://{host}:{self.port} (Foxglove: Open connection -> "
                               f"Foxglove WebSocket; layout: {foxglove_layout_path()})")

    def _forward(self, topic: str, channel, data: bytes) -> None:
        if topic == TF_STATIC_TOPIC:
            self._static = (channel, bytes(data))
        channel.log(data, log_time=self.get_clock().now().nanoseconds)
        self.sent[topic] += 1

    def resend_static(self, channel_id: int) -> None:
        """The last /tf_static again, when a client subscribes to its channel (called from the server's thread)."""
        static = self._static
        if static is not None and static[0].id() == channel_id:
            static[0].log(static[1], log_time=self.get_clock().now().nanoseconds)
            self.sent[TF_STATIC_TOPIC] += 1

    def destroy_node(self) -> None:
        for channel in self.channels:
            channel.close()
        self.server.stop()
        super().destroy_node()


class _Latch:
    """The server listener that makes /tf_static latched (:meth:`FoxgloveRelay.resend_static`)."""

    def __init__(self, relay: FoxgloveRelay):
        self.relay = relay

    def on_subscribe(self, client, channel) -> None:
        self.relay.resend_static(channel.id)


def main(args: Sequence[str] | None = None) -> int:
    """``foxglove_relay`` executable; 0 after SIGINT/SIGTERM, 1 on bad parameters."""
    return run(FoxgloveRelay, "foxglove_relay", args)


if __name__ == "__main__":
    raise SystemExit(main())

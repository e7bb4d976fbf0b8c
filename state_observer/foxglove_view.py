"""``state-observer foxglove BAG``: serve a rosbag2 over the Foxglove WebSocket protocol (foxglove-sdk), so that the
Foxglove app can watch a drive and the observer's outputs without ROS 2 installed.

Every topic of the bag becomes one channel with message encoding ``cdr`` and the topic's ROS 2 message definition as a
``ros2msg`` schema (its dependencies included, as rosbag2 stores them), so Foxglove decodes the messages as it does those
of a ROS 2 bag; the payloads are the bag's own serialised bytes. Messages go out in log-time order, paced at ``rate``
times real time (0: as fast as the socket takes them), with their log time. Playback starts once a client has
subscribed and no further subscription has come for ``SETTLE_S`` (the app subscribes to its panels' topics one by one),
so no message is sent before anyone listens. The live node's topics are served the same way by the node
``foxglove_relay`` (:mod:`state_observer.ros.foxglove_relay`), or by the ROS package ``foxglove_bridge``.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

from .conventions import WHEELS
from .errors import InputError
from .io.bag import message_definitions, read_raw

SETTLE_S = 0.3  # s without a new subscription before playback starts
SCHEMA_ENCODING = "ros2msg"
MESSAGE_ENCODING = "cdr"


def sdk():
    """The foxglove-sdk module, or one InputError saying how to install it."""
    try:
        import foxglove
    except ImportError:
        raise InputError("state-observer foxglove needs the foxglove-sdk package: pip install foxglove-sdk") from None
    return foxglove


def serve_bag(bag: str | Path, *, host: str = "127.0.0.1", port: int = 8765, rate: float = 1.0, loop: bool = False,
              topics: Iterable[str] | None = None, on_listening: Callable[[int], None] | None = None,
              on_played: Callable[[Counter], None] | None = None, stop: threading.Event | None = None) -> Counter:
    """Serve ``bag`` (module docstring) on ``host``:``port`` (0: any free port, given to ``on_listening``) until ``stop``
    is set (or Ctrl-C); returns the messages sent per topic. ``loop`` plays the bag again and again; otherwise, once it
    is played (``on_played`` gets the counts), the server stays up, so that the app keeps its view and no message still
    on its way is cut off."""
    if rate < 0:
        raise InputError(f"--rate must be >= 0 (0: as fast as possible), got {rate}")
    foxglove = sdk()
    schemas = message_definitions(bag, topics)
    stop = stop or threading.Event()
    subscribed = _subscription_listener(foxglove)
    context = foxglove.Context()  # this server's channels only (the SDK's default context is the process's)
    server = foxglove.start_server(name=f"state_observer: {Path(bag).name}", host=host, port=port, server_listener=subscribed, context=context)
    sent: Counter = Counter()
    channels = {}
    try:
        channels = {topic: ros_channel(foxglove, context, topic, msgtype, text) for topic, (msgtype, text) in schemas.items()}
        if on_listening is not None:
            on_listening(server.port)
        if not subscribed.settled(stop):
            return sent
        while not stop.is_set():
            start_wall, start_log = time.monotonic(), None
            for topic, _, log_ns, raw in read_raw(bag, list(channels)):
                if stop.is_set():
                    break
                start_log = log_ns if start_log is None else start_log
                if rate > 0:
                    delay = start_wall + (log_ns - start_log) * 1e-9 / rate - time.monotonic()
                    if delay > 0:
                        stop.wait(delay)
                channels[topic].log(raw, log_time=log_ns)
                sent[topic] += 1
            if not loop:
                if on_played is not None:
                    on_played(sent)
                while not stop.wait(0.5):
                    pass
                break
    finally:
        for channel in channels.values():
            channel.close()
        server.stop()
    return sent


def ros_channel(foxglove, context, topic: str, msgtype: str, definition: str):
    """A channel of ``context`` for CDR messages of ``msgtype`` (``pkg/msg/Name``) with its ROS 2 definition
    (dependencies included) as the ros2msg schema."""
    schema = foxglove.Schema(name=msgtype, encoding=SCHEMA_ENCODING, data=definition.encode())
    return foxglove.Channel(topic, message_encoding=MESSAGE_ENCODING, schema=schema, context=context)


def _subscription_listener(foxglove):
    """A foxglove.ServerListener that records when clients subscribe, with ``settled(stop)``: wait for a first
    subscription, then for SETTLE_S without another; False if ``stop`` came first."""

    class SubscriptionListener(foxglove.ServerListener):
        def __init__(self):
            self.first = threading.Event()
            self.last = 0.0

        def on_subscribe(self, client, channel) -> None:
            self.last = time.monotonic()
            self.first.set()

        def settled(self, stop: threading.Event) -> bool:
            while not self.first.wait(0.1):
                if stop.is_set():
                    return False
            while time.monotonic() - self.last < SETTLE_S:
                if stop.wait(0.05):
                    return False
            return True

    return SubscriptionListener()


# ----- the shipped layout ---------------------------------------------------------------------------------------------


def layout():
    """The Foxglove layout shipped as ``config/foxglove/state_observer_layout.json`` (``foxglove.layouts.Layout``): the
    car in 3D following base_link (path and markers), the tire forces per wheel (lateral and normal), sideslip and yaw
    rate, mass and friction with their 1-sigma and the friction's proven lower bound, the filter's state message (NIS per
    sensor) and /diagnostics.  Topics and field paths are those of the observer's outputs (``io.convert.OUTPUT_TOPICS``)."""
    from foxglove import layouts as fl

    from .io.convert import BASE_FRAME, ODOM_FRAME, OUTPUT_TOPICS

    t = OUTPUT_TOPICS

    def plot(title: str, series: list[tuple[str, str]]):
        return fl.PlotPanel(title=title, config=fl.PlotConfig(paths=[fl.PlotSeries(value=path, label=label, timestamp_method="headerStamp")
                                                                     for path, label in series], show_legend=True))

    forces = fl.TabContainer(tabs=[
        fl.TabItem(title=f"F{axis}", content=plot(f"tire force {axis} (N)", [(f"{t['tire_forces']}.wheels[{i}].f{axis}_n", w) for i, w in enumerate(WHEELS)]))
        for axis in ("y", "z", "x")])
    motion = plot("sideslip (rad), yaw rate (rad/s)", [(f"{t['state']}.sideslip_rad", "sideslip"), (f"{t['state']}.yaw_rate_rad_s", "yaw rate")])
    p = t["parameters"]
    mass = plot("mass (kg)", [(f"{p}.mass_kg", "mass"), (f"{p}.mass_sigma_kg", "1-sigma")])
    friction = plot("friction (-)", [(f"{p}.friction_coefficient", "mu"), (f"{p}.friction_lower_bound", "proven lower bound"),
                                     (f"{p}.friction_sigma", "1-sigma")])
    scene = fl.ThreeDeePanel(title="car", config=fl.ThreeDeeConfig(
        follow_tf=BASE_FRAME, fixed_frame=ODOM_FRAME,
        topics={t["path"]: fl.BaseRendererPosesTopicSettings(visible=True, type="line", line_width=0.1),
                t["markers"]: fl.BaseRendererRosMarkerTopicSettings(visible=True)}))
    right = fl.SplitContainer(direction="column", items=[
        fl.SplitItem(content=forces), fl.SplitItem(content=motion),
        fl.SplitItem(content=fl.SplitContainer(direction="row", items=[fl.SplitItem(content=mass), fl.SplitItem(content=friction)]))])
    bottom = fl.SplitContainer(direction="row", items=[
        fl.SplitItem(content=fl.RawMessagesPanel(title="filter state (NIS per sensor)", config=fl.RawMessagesConfig(topic_path=t["state"]))),
        fl.SplitItem(content=fl.DiagnosticsSummaryPanel(title="diagnostics"))])
    left = fl.SplitContainer(direction="column", items=[fl.SplitItem(proportion=2, content=scene), fl.SplitItem(content=bottom)])
    return fl.Layout(content=fl.SplitContainer(direction="row", items=[fl.SplitItem(content=left), fl.SplitItem(content=right)]))

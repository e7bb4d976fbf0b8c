"""``state-observer foxglove BAG``: serve a rosbag2 over the Foxglove WebSocket protocol (foxglove-sdk), so that the
Foxglove app can watch a drive and the observer's outputs without ROS 2 installed.

Every topic of the bag becomes one channel with message encoding ``cdr`` and the topic's ROS 2 message definition as a
``ros2msg`` schema (its dependencies included, as rosbag2 stores them), so Foxglove decodes the messages as it does those
of a ROS 2 bag; the payloads are the bag's own serialised bytes. Messages go out in log-time order, paced at ``rate``
times real time (0: as fast as the socket takes them), with their log time. Playback starts once a client has
subscribed and no further subscription has come for ``SETTLE_S`` (the app subscribes to its panels' topics one by one),
so no message is sent before anyone listens. On a ROS 2 install, the live node's topics are served by the ROS
package ``foxglove_bridge`` instead.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

from .errors import InputError
from .io.bag import message_definitions, read_raw

SETTLE_S = 0.3  # s without a new subscription before playback starts
SCHEMA_ENCODING = "ros2msg"
MESSAGE_ENCODING = "cdr"


def _sdk():
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
    foxglove = _sdk()
    schemas = message_definitions(bag, topics)
    stop = stop or threading.Event()
    subscribed = _subscription_listener(foxglove)
    server = foxglove.start_server(name=f"state_observer: {Path(bag).name}", host=host, port=port, server_listener=subscribed)
    sent: Counter = Counter()
    try:
        channels = {topic: foxglove.Channel(topic, message_encoding=MESSAGE_ENCODING,
                                            schema=foxglove.Schema(name=msgtype, encoding=SCHEMA_ENCODING, data=text.encode()))
                    for topic, (msgtype, text) in schemas.items()}
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
        server.stop()
    return sent


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

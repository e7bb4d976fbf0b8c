"""``bag_player`` node: publishes a rosbag2's messages, as recorded, with ``/clock``.

    ros2 run state_observer bag_player --ros-args -p bag:=/path/to/bag -p rate:=1.0

The serialised (CDR) bytes of the bag are published unchanged, without decoding. Message k
is published ``(log_ns_k - origin_ns) / rate`` wall seconds after the start, where
``origin_ns`` is the bag's first log time plus ``start_offset_s``; the schedule is kept
against the start instant (sleep-based, in a thread of its own), so delays do not accumulate.
Messages are published in log-time order as recorded: out-of-order stamps or duplicates in
the bag are not corrected.

``/clock`` (rosgraph_msgs/Clock, RELIABLE, KEEP_LAST 1) carries the bag time: at
``clock_rate_hz`` the time interpolated from the wall clock (never beyond the next message's
log time), and before each message whose log time is past the last clock value, so
``use_sim_time`` consumers see the time of each message before the message. The clock ends
at the last log time played.

With ``loop``, playback restarts ``LOOP_GAP_S`` after the bag's last log time is reached:
``/clock`` then jumps back to ``origin_ns`` and the messages repeat with their recorded
stamps. Consumers must handle that backwards jump of time and stamps (e.g. reset on it; rclpy
offers time jump callbacks); the observer node has to.

Sensor topics are published RELIABLE, VOLATILE, KEEP_LAST(``qos_depth``): they match
reliable and best-effort volatile subscribers (not TRANSIENT_LOCAL ones). A topic whose
message type has no importable rclpy package is skipped with one warning.
"""
from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from state_observer.io import bag as bagio
from state_observer.io.bag import IoError, read_raw
from state_observer.ros.common import ParameterError, declare, message_class, run

__all__ = ["LOOP_GAP_S", "BagInfo", "BagPlayer", "PlayStats", "inspect_bag", "main", "play"]

LOOP_GAP_S = 0.01  # wall time between the end of one pass and the start of the next (s)
CLOCK_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.VOLATILE)
_NS = 1_000_000_000


# --- plain functions (no rclpy calls) ----------------------------------------------------------

class BagInfo(NamedTuple):
    """What playback needs to know before reading the messages."""

    topics: dict[str, str]  # topic -> message type, of the topics to play
    start_ns: int  # first log time of the bag (all topics)
    end_ns: int  # last log time of the bag (all topics)
    message_count: int  # messages on the topics to play


def inspect_bag(path: str, topics: Sequence[str] = ()) -> BagInfo:
    """Topics, types and time span of a bag, for ``topics`` (empty: all). ``IoError`` for a
    missing path, a directory that is not a bag, a topic the bag lacks, or no messages."""
    if not path:
        raise ParameterError("parameter bag is required (-p bag:=/path/to/bag)")
    if Path(path).is_dir() and not (Path(path) / "metadata.yaml").is_file():
        raise IoError(f"{path}: not a rosbag2 directory (no metadata.yaml)")
    info = bagio.bag_info(path)
    types = {topic: msgtype for topic, (msgtype, _) in info.topics.items()}
    missing = sorted(set(topics) - set(types))
    if missing:
        raise IoError(f"{path}: no topic {', '.join(missing)} "
                      f"(topics: {', '.join(sorted(types)) or 'none'})")
    wanted = {t: types[t] for t in sorted(topics or types)}
    count = sum(info.topics[t][1] for t in wanted)
    if count == 0:
        raise IoError(f"{path}: no messages to play")
    return BagInfo(wanted, info.start_ns, info.end_ns, count)


class PlayStats(NamedTuple):
    """Result of ``play``."""

    counts: dict[str, int]  # messages published per topic
    passes: int  # passes started (1 without loop)
    wall_s: float  # from the start to the last publication (s)
    bag_s: float  # bag time played, summed over passes (s)
    max_late_s: float  # largest delay of a publication behind its schedule (s)


def play(read: Callable[[], Iterable[tuple[str, int, bytes]]], origin_ns: int, end_ns: int, *,
         rate: float, publish: Callable[[str, bytes], None],
         publish_clock: Callable[[int], None] | None = None, clock_period_s: float = 0.01,
         loop: bool = False, stop: threading.Event | None = None,
         on_pass: Callable[[int], None] | None = None) -> PlayStats:
    """Publish ``read()``'s (topic, log_ns, data) on the wall-clock schedule of the bag.

    Message k is due ``(log_ns - origin_ns) / rate`` s after the start of its pass (monotonic
    clock); pass n+1 starts ``(end_ns - origin_ns) / rate + LOOP_GAP_S`` after pass n, with
    a new ``read()``. ``publish_clock(ns)`` gets the bag time: ``origin_ns`` at the start of
    each pass, every ``clock_period_s`` the interpolated time (at most the next message's
    log time) and each message's log time before the message, if later than the last value.
    Returns when the messages end (no ``loop``) or ``stop`` is set.
    """
    stop = stop or threading.Event()
    counts: dict[str, int] = {}
    start = t0 = last_publish = 0.0
    clock_ns = origin_ns
    next_tick = 0.0
    passes = 0
    bag_s = 0.0
    max_late = 0.0

    def wait_until(due: float, cap_ns: int) -> bool:
        """Sleep until ``due`` with clock ticks on the way; False if stopped."""
        nonlocal clock_ns, next_tick
        while not stop.is_set():
            now = time.monotonic()
            if publish_clock is not None and now >= next_tick:
                value = min(origin_ns + round((now - start) * rate * _NS), cap_ns)
                if value > clock_ns:
                    publish_clock(value)
                    clock_ns = value
                # Next tick on the grid start + k * period; missed ticks are skipped.
                next_tick += (math.floor((now - next_tick) / clock_period_s) + 1) * clock_period_s
                continue
            if now >= due:
                return True
            stop.wait(min(due, next_tick) - now if publish_clock is not None else due - now)
        return False

    while not stop.is_set():
        messages = iter(read())
        pending = next(messages, None)  # opens the bag before the pass starts
        if passes == 0:
            start = t0 = last_publish = time.monotonic()
            next_tick = start + clock_period_s
        elif not wait_until(start, end_ns):
            break
        passes += 1
        if on_pass is not None:
            on_pass(passes)
        if publish_clock is not None:
            publish_clock(origin_ns)  # also the jump back of a new pass
        clock_ns = last_ns = origin_ns
        while pending is not None:
            topic, log_ns, data = pending
            due = start + (log_ns - origin_ns) / _NS / rate
            if not wait_until(due, log_ns):
                break
            if publish_clock is not None and log_ns > clock_ns:
                publish_clock(log_ns)
                clock_ns = log_ns
            publish(topic, data)
            last_publish = time.monotonic()
            max_late = max(max_late, last_publish - due)
            counts[topic] = counts.get(topic, 0) + 1
            last_ns = log_ns
            pending = next(messages, None)
        bag_s += (last_ns - origin_ns) / _NS
        if not loop:
            break
        start += (end_ns - origin_ns) / _NS / rate + LOOP_GAP_S
    return PlayStats(counts, passes, last_publish - t0, bag_s, max_late)


def summary(stats: PlayStats, rate: float) -> str:
    """One line: passes, messages per topic, wall time and achieved rate."""
    achieved = stats.bag_s / stats.wall_s if stats.wall_s > 0 else float("nan")
    per_topic = ", ".join(f"{topic} {n}" for topic, n in sorted(stats.counts.items()))
    return (f"played {sum(stats.counts.values())} messages in {stats.passes} pass(es), "
            f"{stats.wall_s:.3f} s wall, rate {achieved:.3g} (requested {rate:g}), "
            f"max lateness {stats.max_late_s * 1e3:.2f} ms: {per_topic or 'none'}")


# --- the node ----------------------------------------------------------------------------

class BagPlayer(Node):
    """Publishes a bag (parameters below) from a thread started by the constructor.

    ``done`` is true when playback has ended (end of bag without loop, ``stop()`` or an
    error in ``error``); ``counts`` are the messages published per topic, ``skipped`` the
    topics not played for lack of a message class (topic -> type), ``passes`` the passes
    started. Bad parameters or bag raise ``ParameterError`` / ``IoError`` from the constructor.
    """

    def __init__(self, **node_kwargs) -> None:
        super().__init__("bag_player", **node_kwargs)
        self.bag = declare(self, "bag", "", "Path of the rosbag2 directory to play (required)")
        self.rate = declare(self, "rate", 1.0, "Playback speed factor (1 = real time)",
                            min_value=1e-3, max_value=1e6)
        self.loop = declare(self, "loop", False, "Restart from the beginning at the end; "
                            "/clock jumps back")
        self.start_offset_s = declare(self, "start_offset_s", 0.0,
                                      "Skip the first seconds of the bag (s of bag time)",
                                      min_value=0.0, max_value=1e9)
        topics = declare(self, "topics", Parameter.Type.STRING_ARRAY,
                         "Topics to play; empty: all")
        self.publish_clock = declare(self, "publish_clock", True,
                                     "Publish the bag time on /clock")
        self.clock_rate_hz = declare(self, "clock_rate_hz", 100.0,
                                     "Rate of /clock between messages (Hz, wall clock)",
                                     min_value=0.1, max_value=10000.0)
        self.wait_for_subscribers_s = declare(
            self, "wait_for_subscribers_s", 0.0,
            "Before playing, wait up to this long until every played topic has a subscriber (s)",
            min_value=0.0, max_value=3600.0)
        qos_depth = declare(self, "qos_depth", 100, "KEEP_LAST depth of the topic publishers",
                            min_value=1, max_value=100000)

        self.info = inspect_bag(self.bag, list(topics))
        offset_ns = round(self.start_offset_s * _NS)
        if offset_ns > self.info.end_ns - self.info.start_ns:
            raise ParameterError(f"parameter start_offset_s: {self.start_offset_s:g} s is beyond "
                                 f"the end of {self.bag} "
                                 f"({(self.info.end_ns - self.info.start_ns) / _NS:g} s long)")
        self.origin_ns = self.info.start_ns + offset_ns

        qos = QoSProfile(depth=qos_depth, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.skipped: dict[str, str] = {}
        self._publishers_by_topic = {}
        for topic, msgtype in self.info.topics.items():
            cls = message_class(msgtype)
            if cls is None:
                self.get_logger().warning(f"skipping {topic}: message type {msgtype} "
                                          "is not available in this ROS installation")
                self.skipped[topic] = msgtype
                continue
            self._publishers_by_topic[topic] = self.create_publisher(cls, topic, qos)
        self._clock_publisher = None
        if self.publish_clock:
            self._clock_publisher = self.create_publisher(Clock, "/clock", CLOCK_QOS)

        self.counts: dict[str, int] = {}
        self.passes = 0
        self.stats: PlayStats | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bag_player", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def stop(self) -> None:
        """Stop playback and wait for the playing thread (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def destroy_node(self) -> None:
        self.stop()
        super().destroy_node()

    # --- playing thread ----------------------------------------------------------------

    def _messages(self) -> Iterator[tuple[str, int, bytes]]:
        for topic, _, log_ns, data in read_raw(self.bag, list(self._publishers_by_topic),
                                               start_ns=self.origin_ns):
            yield topic, log_ns, data

    def _publish(self, topic: str, data: bytes) -> None:
        self._publishers_by_topic[topic].publish(data)
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def _publish_clock(self, t_ns: int) -> None:
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(t_ns, _NS)
        self._clock_publisher.publish(msg)

    def _on_pass(self, n: int) -> None:
        self.passes = n
        if n > 1:
            self.get_logger().info(f"pass {n}: restarting; /clock jumps back to "
                                   f"{self.origin_ns / _NS:.9f} s")

    def _wait_for_subscribers(self) -> None:
        deadline = time.monotonic() + self.wait_for_subscribers_s
        while True:
            waiting = [t for t, p in self._publishers_by_topic.items()
                       if p.get_subscription_count() == 0]
            if not waiting or self._stop.is_set():
                return
            if time.monotonic() >= deadline:
                break
            self._stop.wait(0.01)
        if self.wait_for_subscribers_s > 0:
            self.get_logger().warning(f"no subscriber after {self.wait_for_subscribers_s:g} s "
                                      f"on {', '.join(waiting)}; playing anyway")

    def _run(self) -> None:
        try:
            if self._publishers_by_topic:
                self._wait_for_subscribers()
                if self._stop.is_set():
                    return
            self.get_logger().info(
                f"playing {self.bag}: {self.info.message_count} messages on "
                f"{len(self._publishers_by_topic)} topic(s) at rate {self.rate:g}"
                f"{', looped' if self.loop else ''}")
            messages = self._messages if self._publishers_by_topic else (lambda: ())
            self.stats = play(
                messages, self.origin_ns, self.info.end_ns, rate=self.rate,
                publish=self._publish,
                publish_clock=self._publish_clock if self._clock_publisher is not None else None,
                clock_period_s=1.0 / self.clock_rate_hz, loop=self.loop, stop=self._stop,
                on_pass=self._on_pass)
            self.get_logger().info(summary(self.stats, self.rate))
        except IoError as exc:
            self.error = str(exc)
            self.get_logger().error(self.error)
        except Exception as exc:  # noqa: BLE001 - publishing after shutdown (Ctrl-C) is no error
            if self.context.ok() and not self._stop.is_set():
                self.error = f"playback failed: {type(exc).__name__}: {exc}"
                self.get_logger().error(self.error)
        finally:
            self._done.set()


def main(args: Sequence[str] | None = None) -> int:
    """``bag_player`` executable; 0 at the end of the bag or on SIGINT/SIGTERM, 1 on bad input."""
    return run(BagPlayer, "bag_player", args)


if __name__ == "__main__":
    raise SystemExit(main())

"""rosbag2 writing and reading with rosbags (pure Python, sqlite3 and mcap; no rclpy).

Bags are rosbag2 format version 9 (``ros2 bag`` of Jazzy and Kilted, Foxglove) with every
message definition and RIHS01 type hash embedded, including this package's own types, so a
reader needs nothing installed to decode them. Time is integer nanoseconds: the log time of a
sensor message is its record's ``receive_ns`` and ``header.stamp`` its ``stamp_ns``; truth
messages are logged at their stamp.

- ``BagWriter``: context manager; writes samples, truth and any rosbags message; refuses to
  replace an existing path unless ``overwrite=True`` (the CLI's ``--force``); on an exception
  inside the ``with`` block the bag written so far is closed normally and stays readable.
- ``read_samples``: sensor topics back into sample records; ``read_messages``: any topic as
  rosbags messages; ``read_raw``: any topic as serialised CDR bytes; ``topic_statistics``:
  count, mean rate and stamp order per topic.

Every failure raises ``IoError`` with the bag path (and topic) in the message.
"""
from __future__ import annotations

import shutil
import sqlite3
import struct
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, NamedTuple

from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.rosbag2 import ReaderError, Writer, WriterError
from rosbags.rosbag2.enums import StoragePlugin
from rosbags.serde import SerdeError
from rosbags.typesys import TypesysError

from state_observer.io.convert import (
    SENSOR_MSGTYPES,
    SENSOR_TOPICS,
    TRUTH_TOPICS,
    IoError,
    JointNames,
    TruthFrames,
    msg_to_sample,
    sample_kind,
    sample_to_msg,
    stamp_to_ns,
    truth_stamp_ns,
    truth_to_msgs,
    typestore,
)

if TYPE_CHECKING:
    from rosbags.interfaces import Connection
    from rosbags.typesys.store import Typestore

    from state_observer.vehicle.state import VehicleState

__all__ = [
    "STORAGES",
    "BagWriter",
    "IoError",
    "TopicStatistics",
    "BAG_VERSION",
    "DEFAULT_STORAGE",
    "message_definitions",
    "read_messages",
    "read_raw",
    "read_samples",
    "topic_statistics",
]

STORAGES: dict[str, StoragePlugin] = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
DEFAULT_STORAGE = "mcap"  # rosbag2's default since Iron
BAG_VERSION = 9
BAG_VERSIONS = (8, 9)  # 8: for Humble's rosbag2 (offered_qos_profiles as a YAML string)

# Files a rosbag2 directory may hold; --force removes a directory only if it has nothing else.
_BAG_FILE_SUFFIXES = (".db3", ".mcap", ".db3-shm", ".db3-wal", ".db3-journal", ".zstd")

# What reading a damaged or foreign bag can raise inside rosbags (wrapped into IoError).
_READ_ERRORS = (AnyReaderError, ReaderError, SerdeError, TypesysError, OSError, sqlite3.Error,
                struct.error, EOFError, ValueError, KeyError, IndexError, AssertionError)


def _is_bag_directory(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir():
        return False
    return all(entry.is_file() and not entry.is_symlink()
               and (entry.name == "metadata.yaml" or entry.name.endswith(_BAG_FILE_SUFFIXES))
               for entry in path.iterdir())


class BagWriter:
    """Write a rosbag2 (sqlite3 or mcap) of sensor samples, ground truth and other messages.

    Use as a context manager. Topics are created on their first message. On leaving the
    ``with`` block, normally or by an exception, the bag is closed and its metadata.yaml
    written, so everything written before a failure stays readable.

    Parameters
    ----------
    path
        Bag directory to create (parents are created).
    overwrite
        Replace ``path`` if it exists; only a rosbag2 directory (metadata.yaml, .db3, .mcap
        files) is ever removed. Without it an existing path is an ``IoError``.
    storage
        ``"mcap"`` (rosbag2's default since Iron) or ``"sqlite3"``.
    version
        rosbag2 metadata version: 9 (Jazzy and later), or 8 for older readers (Humble's rosbag2 reads
        ``offered_qos_profiles`` as a YAML string, which version 8 writes).
    topics
        Sensor topic per stream kind, overriding ``SENSOR_TOPICS`` (e.g. ``{"imu": "/imu"}``).
    truth_topics, truth_frames
        Topics and frame ids of the truth messages (defaults ``TRUTH_TOPICS``, odom/base_link).
    custom_data
        Strings stored in metadata.yaml ``custom_data`` (provenance of the run).
    store
        Typestore with every type to be written; default ``convert.typestore()``.
    """

    def __init__(self, path: str | Path, overwrite: bool = False, storage: str = DEFAULT_STORAGE, *,
                 topics: Mapping[str, str] | None = None,
                 truth_topics: Mapping[str, str] | None = None,
                 truth_frames: TruthFrames = TruthFrames(),
                 custom_data: Mapping[str, str] | None = None,
                 store: Typestore | None = None, version: int = BAG_VERSION) -> None:
        self.path = Path(path)
        if version not in BAG_VERSIONS:
            raise IoError(f"{self.path}: bag version {version!r}; use one of {', '.join(map(str, BAG_VERSIONS))}")
        self.version = version
        if storage not in STORAGES:
            raise IoError(f"{self.path}: unknown storage {storage!r}; use one of {', '.join(STORAGES)}")
        self.storage = storage
        self.overwrite = bool(overwrite)
        self.topics = {**SENSOR_TOPICS, **(topics or {})}
        self.truth_topics = {**TRUTH_TOPICS, **(truth_topics or {})}
        self.truth_frames = truth_frames
        self.store = store if store is not None else typestore()
        self._custom_data = dict(custom_data or {})
        self._writer: Writer | None = None
        self._connections: dict[str, Connection] = {}
        self._counts: dict[str, int] = {}
        self._closed = False
        self._check_target()

    # --- life cycle --------------------------------------------------------------------

    def _check_target(self) -> None:
        path = self.path
        if not (path.exists() or path.is_symlink()):
            return
        if not self.overwrite:
            raise IoError(f"{path}: already exists; not overwriting it (use --force to replace it)")
        if not _is_bag_directory(path):
            raise IoError(f"{path}: exists and is not a rosbag2 directory; not removing it, "
                          "even with --force")

    def open(self) -> BagWriter:
        """Create the bag (removing an old one if ``overwrite``). Called by ``__enter__``."""
        if self._writer is not None or self._closed:
            raise IoError(f"{self.path}: bag writer already opened")
        self._check_target()
        try:
            if self.path.exists():
                shutil.rmtree(self.path)
            writer = Writer(self.path, version=self.version, storage_plugin=STORAGES[self.storage])
            for key, value in self._custom_data.items():
                writer.set_custom_data(str(key), str(value))
            writer.open()
        except (WriterError, OSError, sqlite3.Error) as exc:
            raise IoError(f"{self.path}: cannot create bag: {exc}") from None
        self._writer = writer
        return self

    def close(self) -> None:
        """Close the bag and write metadata.yaml; does nothing if already closed."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._closed = True
        try:
            writer.close()
        except (WriterError, OSError, sqlite3.Error) as exc:
            # No abort(): on sqlite3 it would roll back every message written.
            raise IoError(f"{self.path}: cannot finish bag: {exc}") from None

    def __enter__(self) -> BagWriter:
        return self.open()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        # Also on an exception: close normally, so that what was written stays readable.
        self.close()
        return False

    # --- writing -----------------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        """Messages written per topic, in the order the topics were created."""
        return dict(self._counts)

    @property
    def message_count(self) -> int:
        return sum(self._counts.values())

    def write(self, topic: str, msgtype: str, msg: Any, log_ns: int) -> None:
        """Serialise a rosbags message of type ``msgtype`` and write it at log time ``log_ns``."""
        connection = self._connection(topic, msgtype)
        try:
            data = self.store.serialize_cdr(msg, msgtype)
        except (SerdeError, TypesysError, KeyError, ValueError, TypeError, AttributeError,
                struct.error) as exc:
            raise IoError(f"{self.path}: topic {topic}: cannot serialise {msgtype}: {exc}") from None
        self._write(connection, topic, data, log_ns)

    def write_raw(self, topic: str, msgtype: str, data: bytes, log_ns: int) -> None:
        """Write an already serialised CDR message (with its 4-byte encapsulation header, as
        rclpy's ``raw`` subscriptions deliver it) of type ``msgtype`` at log time ``log_ns``.

        The bytes are stored unchanged; the topic's definition comes from the typestore, as
        for ``write``, so ``msgtype`` must be known to it.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise IoError(f"{self.path}: topic {topic}: raw message must be bytes, "
                          f"got {type(data).__name__}")
        connection = self._connection(topic, msgtype)
        self._write(connection, topic, bytes(data), log_ns)

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare ``topic`` (a topic is otherwise added with its first message): a bag may hold a topic without messages."""
        self._connection(topic, msgtype)

    def _connection(self, topic: str, msgtype: str) -> Connection:
        """The connection of ``topic``, created on first use; a type conflict is an IoError."""
        if self._writer is None:
            raise IoError(f"{self.path}: bag is not open (use `with BagWriter(...)`)")
        connection = self._connections.get(topic)
        if connection is None:
            try:
                connection = self._writer.add_connection(topic, msgtype, typestore=self.store)
            except (WriterError, TypesysError, KeyError) as exc:
                raise IoError(f"{self.path}: cannot add topic {topic} ({msgtype}): {exc}") from None
            self._connections[topic] = connection
            self._counts[topic] = 0
        elif connection.msgtype != msgtype:
            raise IoError(f"{self.path}: topic {topic} has type {connection.msgtype}, "
                          f"cannot write a {msgtype}")
        return connection

    def _write(self, connection: Connection, topic: str, data: bytes, log_ns: int) -> None:
        try:
            self._writer.write(connection, int(log_ns), data)
        except (WriterError, OSError, sqlite3.Error, OverflowError) as exc:
            raise IoError(f"{self.path}: topic {topic}: cannot write message: {exc}") from None
        self._counts[topic] += 1

    def write_sample(self, sample: Any) -> str:
        """Write a sensor sample record on its topic at log time ``receive_ns``; the topic."""
        topic = self.topics[sample_kind(sample)]
        msgtype, msg = sample_to_msg(sample, self.store)
        self.write(topic, msgtype, msg, sample.receive_ns)
        return topic

    def write_truth(self, truth: VehicleState, epoch_ns: int = 0) -> None:
        """Write the truth topics of one model step, stamped and logged at
        ``epoch_ns + round(t_s * 1e9)``."""
        stamp_ns = truth_stamp_ns(truth, epoch_ns)
        for kind, (msgtype, msg) in truth_to_msgs(truth, stamp_ns, self.store, self.truth_frames).items():
            self.write(self.truth_topics[kind], msgtype, msg, stamp_ns)


# --- reading ---------------------------------------------------------------------------

@contextmanager
def _reading(path: str | Path) -> Iterator[AnyReader]:
    """An open AnyReader on ``path``; any rosbags/storage error becomes one IoError."""
    path = Path(path)
    if not path.exists():
        raise IoError(f"{path}: no such bag")
    try:
        reader = AnyReader([path], default_typestore=typestore())
        reader.open()
    except _READ_ERRORS as exc:
        unknown = _unknown_definitions(path) if isinstance(exc, KeyError) and exc.args == ("unknown",) else []
        if unknown:
            raise IoError(f"{path}: cannot read bag: rosbag2 recorded the message definition of {', '.join(unknown)} as "
                          "'unknown' (the type was not installed where it was recorded) and rosbags cannot open such a bag; "
                          "`ros2 bag convert` it without those topics, or record where the type is installed") from None
        raise IoError(f"{path}: cannot read bag: {exc}") from None
    try:
        yield reader
    finally:
        try:
            reader.close()
        except _READ_ERRORS:
            pass


def _unknown_definitions(path: Path) -> list[str]:
    """'topic (type)' of each topic of a sqlite3 rosbag2 bag whose message definition is stored with encoding 'unknown'."""
    found = []
    for db in sorted(path.glob("*.db3")) if path.is_dir() else []:
        try:
            with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as con:
                found += [f"{topic} ({msgtype})" for topic, msgtype in con.execute(
                    "SELECT t.name, t.type FROM topics t JOIN message_definitions d ON d.topic_type = t.type WHERE d.encoding = 'unknown'")]
        except sqlite3.Error:
            continue
    return sorted(set(found))


def _messages(path: Path, reader: AnyReader, connections: list) -> Iterator[tuple[Any, int, Any]]:
    """(connection, log_ns, message) in log-time order, errors named with path and topic."""
    stream = reader.messages(connections=connections)
    while True:
        try:
            connection, log_ns, raw = next(stream)
        except StopIteration:
            return
        except _READ_ERRORS as exc:
            raise IoError(f"{path}: cannot read bag: {exc}") from None
        try:
            msg = reader.deserialize(raw, connection.msgtype)
        except _READ_ERRORS as exc:
            raise IoError(f"{path}: {connection.topic} at {log_ns} ns: cannot decode "
                          f"{connection.msgtype}: {exc}") from None
        yield connection, log_ns, msg


def read_messages(path: str | Path, topics: Iterable[str] | None = None
                  ) -> Iterator[tuple[str, int, Any]]:
    """(topic, log_ns, message) of ``topics`` (default: all) in log-time order.

    Messages are rosbags dataclasses decoded with the definitions stored in the bag.
    A requested topic that is not in the bag is an ``IoError``.
    """
    path = Path(path)
    with _reading(path) as reader:
        available = {connection.topic for connection in reader.connections}
        if topics is None:
            wanted = available
        else:
            wanted = set(topics)
            missing = sorted(wanted - available)
            if missing:
                raise IoError(f"{path}: no topic {', '.join(missing)} "
                              f"(topics: {', '.join(sorted(available)) or 'none'})")
        connections = [c for c in reader.connections if c.topic in wanted]
        for connection, log_ns, msg in _messages(path, reader, connections):
            yield connection.topic, log_ns, msg


def read_raw(path: str | Path, topics: Iterable[str] | None = None, *,
             start_ns: int | None = None) -> Iterator[tuple[str, str, int, bytes]]:
    """(topic, msgtype, log_ns, CDR bytes) of ``topics`` (default: all) in log-time order.

    The serialised messages are yielded as stored (rosbag2), without decoding; messages of
    a ROS 1 bag are converted to CDR. ``start_ns`` skips messages logged before it (ns).
    Streams the bag. A requested topic that is not in the bag is an ``IoError``.
    """
    path = Path(path)
    with _reading(path) as reader:
        available = {connection.topic for connection in reader.connections}
        wanted = available if topics is None else set(topics)
        missing = sorted(wanted - available)
        if missing:
            raise IoError(f"{path}: no topic {', '.join(missing)} "
                          f"(topics: {', '.join(sorted(available)) or 'none'})")
        connections = [c for c in reader.connections if c.topic in wanted]
        if not connections:  # an empty filter would mean "all" to rosbags
            return
        stream = reader.messages(connections=connections, start=start_ns)
        while True:
            try:
                connection, log_ns, raw = next(stream)
                if not reader.is2:
                    raw = reader.typestore.ros1_to_cdr(raw, connection.msgtype)
            except StopIteration:
                return
            except _READ_ERRORS as exc:
                raise IoError(f"{path}: cannot read bag: {exc}") from None
            yield connection.topic, connection.msgtype, log_ns, bytes(raw)


def message_definitions(path: str | Path, topics: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
    """topic -> (message type, ROS 2 message definition with its dependencies, as rosbag2 stores it) of ``topics``
    (default: all) of the bag at ``path``."""
    path = Path(path)
    wanted = None if topics is None else set(topics)
    with _reading(path) as reader:
        return {c.topic: (c.msgtype, reader.typestore.generate_msgdef(c.msgtype, ros_version=2)[0])
                for c in reader.connections if wanted is None or c.topic in wanted}


def read_samples(path: str | Path, topics: Mapping[str, str] | None = None, joints: JointNames = JointNames()
                 ) -> Iterator[tuple[str, int, Any]]:
    """(topic, log_ns, sample record) of the sensor topics in log-time order.

    ``topics`` overrides ``SENSOR_TOPICS`` per stream kind (``{"imu": "/imu", ...}``); ``joints``: the
    JointState names of wheels and steering.
    Records get ``receive_ns`` = log time and ``stamp_ns`` = header stamp. Sensor topics
    missing from the bag are skipped; a bag with none of them, or a sensor topic of the wrong
    message type, is an ``IoError``.
    """
    path = Path(path)
    kinds = {topic: kind for kind, topic in {**SENSOR_TOPICS, **(topics or {})}.items()}
    with _reading(path) as reader:
        connections = [c for c in reader.connections if c.topic in kinds]
        if not connections:
            present = sorted({c.topic for c in reader.connections})
            raise IoError(f"{path}: none of the sensor topics {', '.join(kinds)} "
                          f"(topics: {', '.join(present) or 'none'})")
        for connection in connections:
            expected = SENSOR_MSGTYPES[kinds[connection.topic]]
            if connection.msgtype != expected:
                raise IoError(f"{path}: topic {connection.topic} has type {connection.msgtype}, "
                              f"expected {expected}")
        for connection, log_ns, msg in _messages(path, reader, connections):
            try:
                sample = msg_to_sample(kinds[connection.topic], msg, log_ns, joints)
            except IoError as exc:
                raise IoError(f"{path}: {connection.topic} at {log_ns} ns: {exc}") from None
            yield connection.topic, log_ns, sample


class TopicStatistics(NamedTuple):
    """Per-topic figures of ``topic_statistics``."""

    count: int
    mean_rate_hz: float  # (count - 1) / (last - first stamp); NaN below 2 messages
    monotonic_stamps: bool  # stamps strictly increase in log-time (playback) order


def topic_statistics(path: str | Path) -> dict[str, TopicStatistics]:
    """``{topic: (count, mean_rate_hz, monotonic_stamps)}`` of every topic of a bag.

    Stamps are ``header.stamp`` for messages with a header, else the log time.
    """
    path = Path(path)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    counts: dict[str, int] = {}
    monotonic: dict[str, bool] = {}
    with _reading(path) as reader:
        for connection in reader.connections:
            counts.setdefault(connection.topic, 0)
            monotonic.setdefault(connection.topic, True)
        for connection, log_ns, msg in _messages(path, reader, list(reader.connections)):
            topic = connection.topic
            header = getattr(msg, "header", None)
            stamp = stamp_to_ns(header.stamp) if header is not None else log_ns
            if counts[topic] == 0:
                first[topic] = stamp
            elif stamp <= last[topic]:
                monotonic[topic] = False
            last[topic] = stamp
            counts[topic] += 1
    stats = {}
    for topic, count in counts.items():
        span_s = (last[topic] - first[topic]) * 1e-9 if count >= 2 else 0.0
        rate = (count - 1) / span_s if span_s > 0 else float("nan")
        stats[topic] = TopicStatistics(count, rate, monotonic[topic])
    return stats


class BagInfo(NamedTuple):
    """What a bag's metadata says, without decoding a message."""

    topics: dict  # topic -> (message type, message count)
    start_ns: int  # first log time
    end_ns: int  # last log time

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) * 1e-9


def bag_info(path: str | Path) -> BagInfo:
    """Topics, types, counts and log-time span of a bag (``IoError`` naming the path if unreadable)."""
    with _reading(path) as reader:
        topics: dict[str, tuple[str, int]] = {}
        for c in reader.connections:
            msgtype, count = topics.get(c.topic, (c.msgtype, 0))
            topics[c.topic] = (msgtype, count + c.msgcount)
        if not topics or not any(count for _, count in topics.values()):  # rosbags' times of an empty bag are sentinels
            return BagInfo(topics, 0, 0)
        return BagInfo(topics, int(reader.start_time), int(reader.end_time) - 1)  # rosbags' end is last + 1 ns


def custom_data(path: str | Path) -> dict[str, str]:
    """The ``custom_data`` strings of a rosbag2's metadata.yaml (empty when it has none)."""
    import yaml

    meta = Path(path) / "metadata.yaml"
    try:
        info = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise IoError(f"{meta}: cannot read bag metadata: {exc}") from None
    return {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}

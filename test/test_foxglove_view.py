"""``state-observer foxglove``: a bag served over the Foxglove WebSocket protocol by foxglove-sdk, received by a real
WebSocket client speaking the protocol (websockets): every channel advertised with a ros2msg schema, every message
received once with its log time, and each payload decodable with the advertised schema alone."""
import asyncio
import json
import struct
import threading

import numpy as np
import pytest
import websockets

from state_observer.io.bag import BagWriter, read_raw
from state_observer.vehicle.state import VehicleState

EPOCH = 1_767_225_600_000_000_000
N = 40


def state(t_s: float) -> VehicleState:
    z3, z4 = np.zeros(3), np.zeros(4)
    return VehicleState(t_s, np.array([t_s * 10.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0, 0.0]), np.array([10.0, 0.0, 0.0]), z3, z3, z3,
                        z4, np.full(4, 33.0), z4, 0.0, z4, np.tile([10.0, 20.0, 3000.0], (4, 1)), z4, z4, np.zeros((4, 3)), 1500.0, 0.9)


@pytest.fixture
def bag(tmp_path):
    path = tmp_path / "bag"
    with BagWriter(path) as writer:
        for k in range(N):
            writer.write_truth(state(k * 0.01), epoch_ns=EPOCH)
    return path


async def client(port: int, expected, timeout_s: float = 30.0, subscribed: threading.Event | None = None, channels_wanted: int = 1):
    """Connect, subscribe to every advertised channel, collect messages until ``expected`` (a number, or a callable
    giving it once known, else None) arrived; ``subscribed`` is set once ``channels_wanted`` channels are subscribed."""
    async with websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1", "foxglove.websocket.v1"]) as ws:
        channels, received = {}, []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            want = expected() if callable(expected) else expected
            if want is not None and len(received) >= want:
                break
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=0.2)
            except asyncio.TimeoutError:
                continue
            if isinstance(frame, str):
                op = json.loads(frame)
                if op["op"] == "advertise":
                    new = {c["id"]: c for c in op["channels"]}
                    channels.update(new)
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": cid, "channelId": cid} for cid in new]}))
                    if subscribed is not None and len(channels) >= channels_wanted:
                        subscribed.set()
            elif frame[0] == 0x01:  # message data: opcode, subscription id u32, log time u64, payload
                subscription, log_ns = struct.unpack_from("<IQ", frame, 1)
                received.append((subscription, log_ns, bytes(frame[13:])))
        return channels, received


def decode_with_schema(channel: dict, payload: bytes):
    """The payload decoded with the channel's advertised ros2msg schema alone (as the Foxglove app does)."""
    from rosbags.typesys import get_types_from_msg
    from rosbags.typesys.store import Typestore

    store = Typestore()
    name, text = channel["schemaName"], channel["schema"]
    parts = text.split("=" * 80 + "\n")
    types = get_types_from_msg(parts[0], name)
    for part in parts[1:]:
        header, _, body = part.partition("\n")
        sub = header.removeprefix("MSG: ")
        types.update(get_types_from_msg(body, sub if "/msg/" in sub else sub.replace("/", "/msg/")))
    store.register(types)
    return store.deserialize_cdr(payload, name)


def test_every_message_of_the_bag_reaches_a_protocol_client_decodable(bag):
    from state_observer.foxglove_view import serve_bag

    expected = list(read_raw(bag))
    port, stop, result = [], threading.Event(), {}
    ready = threading.Event()

    def run():  # serves until stop is set: the whole bag goes out at once (rate 0), then the server waits
        result["sent"] = serve_bag(bag, port=0, rate=0.0, on_listening=lambda p: (port.append(p), ready.set()),
                                   on_played=lambda sent: result.setdefault("played", sum(sent.values())), stop=stop)

    server = threading.Thread(target=run, daemon=True)
    server.start()
    assert ready.wait(20.0)
    try:
        channels, received = asyncio.run(client(port[0], len(expected)))
    finally:
        stop.set()
        server.join(20.0)
    assert sorted(c["topic"] for c in channels.values()) == sorted({topic for topic, *_ in expected})
    assert all(c["encoding"] == "cdr" and c["schemaEncoding"] == "ros2msg" for c in channels.values())
    assert not server.is_alive()
    assert len(received) == len(expected) == sum(result["sent"].values()) == result["played"]
    by_topic = {}
    for subscription, log_ns, payload in received:
        by_topic.setdefault(channels[subscription]["topic"], []).append((log_ns, payload))
    for topic in by_topic:
        assert by_topic[topic] == [(log_ns, raw) for t, _, log_ns, raw in expected if t == topic]
    # the advertised schema alone decodes the payloads (as the Foxglove app does)
    for channel in channels.values():
        assert decode_with_schema(channel, by_topic[channel["topic"]][0][1]).__msgtype__ == channel["schemaName"]


def test_a_bag_that_is_not_there_is_one_error(tmp_path):
    from state_observer.errors import InputError
    from state_observer.foxglove_view import serve_bag

    with pytest.raises(InputError, match="no such bag"):
        serve_bag(tmp_path / "missing", port=0)


def _fields(msgtype: str) -> dict:
    """Field name -> type of one of the package's messages, from its .msg file."""
    from state_observer.paths import message_definition

    fields = {}
    for line in message_definition(msgtype.rsplit("/", 1)[-1]).read_text().splitlines():
        words = line.split("#")[0].split()
        if len(words) == 2 and "=" not in line.split("#")[0]:
            fields[words[1]] = words[0]
    return fields


def _resolve(path: str) -> str:
    """The type a Foxglove message path (``/topic.field[i].field``) of the observer's outputs names; fails if it names nothing."""
    from state_observer.io.convert import OUTPUT_MSGTYPES, OUTPUT_TOPICS

    topics = {topic: OUTPUT_MSGTYPES[kind] for kind, topic in OUTPUT_TOPICS.items()}
    topic, _, rest = path.partition(".")
    assert topic in topics, f"{path}: {topic} is not an output topic"
    kind = topics[topic]
    for part in filter(None, rest.split(".")):
        name = part.split("[")[0]
        fields = _fields(kind)
        assert name in fields, f"{path}: {kind} has no field {name}"
        kind = fields[name].split("[")[0]
    return kind


def test_the_shipped_layout_is_the_generated_one_and_names_real_fields():
    """config/foxglove/state_observer_layout.json is what foxglove_view.layout() builds (it cannot drift), and every topic
    and message path in it names an output topic and a field of its message (the plots are numbers)."""
    from state_observer.foxglove_view import layout
    from state_observer.io.convert import OUTPUT_TOPICS
    from state_observer.paths import foxglove_layout_path

    shipped = json.loads(foxglove_layout_path().read_text())
    assert shipped == json.loads(layout().to_json())
    panels, values = [], []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "panel":
                panels.append(node)
            for key, value in node.items():
                if key in ("value", "topicPath") and isinstance(value, str):
                    values.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(shipped)
    assert {p["panelType"] for p in panels} >= {"ThreeDee", "Plot", "RawMessages", "DiagnosticsSummary"}
    assert len(values) >= 12
    for value in values:
        kind = _resolve(value)
        assert kind == "float64" or value == OUTPUT_TOPICS["state"], (value, kind)
    scene = next(p for p in panels if p["panelType"] == "ThreeDee")
    assert set(scene["config"]["topics"]) <= set(OUTPUT_TOPICS.values())
    assert scene["config"]["followTf"] == "base_link"

"""``state-observer soak``: a long drive through the observer node, watched for leaks, stalls and confident wrong output.

The simulator drives ``handling_drive`` (a circle of 50 m with the speed cycling 10-16 m/s every 40 s) for
``--minutes`` into a bag. An :class:`~state_observer.ros.observer_node.ObserverNode` (real rclpy, publishing
through DDS on localhost in a private domain) takes the bag's messages in log-time order through its own
message callback, as fast as it handles them (no player: nothing is lost to pacing, so every loss is the node's),
with its timers (diagnostics) spun between messages. Every simulated minute it records:

- the process's resident memory (``VmRSS``, MiB): flat when nothing accumulates;
- the messages published per output topic in that minute: the output rates must not drift;
- each learnt parameter (mass, friction, cornering-stiffness scales) against the truth with its status:
  a parameter published as *converged* that is more than 3 sigma and more than its tolerance from the truth is
  confident wrong output (``confident_wrong_minutes``), the defect issue 13 item 12 names.

The figures go to stdout and, with ``--json``, into the benchmark JSON (``soak_*`` names).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TOLERANCE = {"mass": 0.03, "friction": 0.05, "cornering_front": 0.10, "cornering_rear": 0.10}  # relative (mass,
# cornering) or absolute (friction) error beyond which a converged parameter is wrong


def rss_mib() -> float:
    """Resident memory of this process (MiB) from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def soak(minutes: float, workdir: Path, progress=print) -> dict:
    """Run the soak (module docstring) in ``workdir``; the figures and the per-minute records."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from .estimation.spi import CONVERGED, STATUS_NAMES
    from .io.bag import read_raw
    from .io.convert import SENSOR_TOPICS
    from .io.record import simulate_command
    from .paths import default_vehicle_path
    from .ros.observer_node import ObserverNode
    from .vehicle.description import load_vehicle

    bag = workdir / "drive"
    started = time.monotonic()
    with open(os.devnull, "w") as quiet:
        if simulate_command("handling_drive", bag, duration_s=minutes * 60.0, seed=0, stdout=quiet, stderr=sys.stderr) != 0:
            raise RuntimeError("soak: could not simulate the drive")
    progress(f"soak: {minutes:g} min simulated in {time.monotonic() - started:.0f} s")
    truth = {"mass": load_vehicle(default_vehicle_path()).total_mass_kg, "friction": None}

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID") or 150 + (os.getpid() + 7) % 80))
    executor = SingleThreadedExecutor(context=context)
    minutes_log: list[dict] = []
    try:
        node = ObserverNode(context=context)
        executor.add_node(node)
        published: Counter = Counter()
        for kind, publisher in node.output_publishers.items():
            def counting(msg, _publish=publisher.publish, _kind=kind):
                published[_kind] += 1
                _publish(msg)
            publisher.publish = counting
        kind_of_topic = {topic: kind for kind, topic in node.config.topics.items()}
        first_ns = next_ns = None
        wall = time.monotonic()
        rss0 = rss_mib()
        for i, (topic, _msgtype, log_ns, data) in enumerate(read_raw(bag, topics=[SENSOR_TOPICS[k] for k in SENSOR_TOPICS])):
            if first_ns is None:
                first_ns, next_ns = log_ns, log_ns + 60_000_000_000
            node.on_message(kind_of_topic[topic], data)
            if i % 200 == 0:
                executor.spin_once(timeout_sec=0.0)
            if log_ns >= next_ns:
                next_ns += 60_000_000_000
                minutes_log.append(_minute(node, published, truth, rss_mib(), CONVERGED, STATUS_NAMES))
                published.clear()
                m = minutes_log[-1]
                progress(f"soak: minute {len(minutes_log)}: RSS {m['rss_mib']:.1f} MiB, odometry {m['odometry_hz']:.1f} Hz, "
                         f"mass {m['mass']['value']:.0f} kg ({m['mass']['status']}), friction {m['friction']['value']:.2f} "
                         f"({m['friction']['status']}), {time.monotonic() - wall:.0f} s")
        wall = time.monotonic() - wall
        counters = {k: dict(v) for k, v in node.pipeline.observer.counters.items()}
        resets = node.pipeline.observer.n_resets
        executor.remove_node(node)
        node.destroy_node()
    finally:
        executor.shutdown()
        rclpy.shutdown(context=context)
    if len(minutes_log) < 2:
        raise RuntimeError("soak: the drive is shorter than two minutes")
    later = minutes_log[1:]  # the first minute holds the start and the parameter filter's settling
    odometry = [m["odometry_hz"] for m in later]
    rss = [m["rss_mib"] for m in later]
    hours = len(later) / 60.0
    return {
        "soak_minutes": len(minutes_log),
        "soak_rtf": round(len(minutes_log) * 60.0 / wall, 1),
        "soak_rss_start_mib": round(rss0, 1),
        "soak_rss_growth_mib_per_h": round((rss[-1] - rss[0]) / max(hours, 1e-9), 1),
        "soak_odometry_hz_min": round(min(odometry), 2), "soak_odometry_hz_max": round(max(odometry), 2),
        "soak_resets": resets,
        "soak_dropped_or_rejected": sum(n for c in counters.values() for k, n in c.items() if k.startswith(("dropped", "rejected"))),
        "soak_confident_wrong_minutes": sum(1 for m in later if m["confident_wrong"]),
        "soak_mass_error_pct_last": round(100.0 * (later[-1]["mass"]["value"] / truth["mass"] - 1.0), 2),
        "soak_mass_error_pct_max": round(max(abs(100.0 * (m["mass"]["value"] / truth["mass"] - 1.0)) for m in later), 2),
    }, minutes_log


def _minute(node, published: Counter, truth: dict, rss: float, converged: int, status_names) -> dict:
    """One simulated minute's record: memory, output rates, each parameter with its status and verdict."""
    observer = node.pipeline.observer
    report = observer.filter.parameter_report() if observer.started and hasattr(observer.filter, "parameter_report") else {}
    record = {"rss_mib": rss, "odometry_hz": published["odometry"] / 60.0, "published": dict(published), "confident_wrong": []}
    for name, p in report.items():
        record[name] = {"value": p["value"], "sigma": p["sigma"], "status": status_names[p["status"]]}
        reference = truth.get(name)
        if reference is None or name not in TOLERANCE:
            continue
        error = p["value"] - reference
        allowed = TOLERANCE[name] * (abs(reference) if name != "friction" else 1.0)
        if p["status"] == converged and abs(error) > max(3.0 * p["sigma"], allowed):
            record["confident_wrong"].append(name)
    for name in ("mass", "friction"):
        record.setdefault(name, {"value": float("nan"), "sigma": float("nan"), "status": "not started"})
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="state-observer soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="simulated drive length (default 60)")
    parser.add_argument("--json", metavar="PATH", help="merge the figures into this JSON file (as `bench --json`)")
    parser.add_argument("--log", metavar="PATH", help="write the per-minute records (JSON lines)")
    args = parser.parse_args(argv)
    if args.minutes < 2:
        parser.error("--minutes: at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        figures, minutes_log = soak(args.minutes, Path(tmp), progress=lambda line: print(line, file=sys.stderr, flush=True))
    for key, value in figures.items():
        print(f"{key}  {value}")
    if args.log:
        Path(args.log).write_text("".join(json.dumps(m) + "\n" for m in minutes_log))
    if args.json:
        from .bench import write_json

        write_json(Path(args.json), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

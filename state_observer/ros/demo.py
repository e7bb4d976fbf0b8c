"""``state-observer demo`` (``make demo``): the observer on a simulated drive, through real ROS 2 transport.

1. Simulates a manoeuvre of the virtual vehicle into ``OUT/input`` (sensor topics and ground truth),
   unless that bag exists.
2. Writes ``OUT/params.yaml``: the package's observer parameters with the simulator's datum and a model
   mass 15 % above the true one (so that the mass estimation has something to do).
3. Starts three processes on a private ROS domain, localhost only: ``bag_recorder`` (the observer's
   topics into ``OUT/output_bag``), ``observer_node`` (with ``params.yaml``) and ``bag_player``
   (plays the input's sensor topics at ``--rate`` times real time), and stops them when the bag has played.
4. Runs ``state-observer process`` on the same bag with the same parameters into ``OUT/processed``
   (the report: ``OUT/processed/report.html``), and compares the node's recorded odometry with it.
5. Prints the accuracy of the node's output against the ground truth.
"""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from state_observer.io.bag import custom_data, read_messages
from state_observer.io.convert import OUTPUT_MSGTYPES, OUTPUT_TOPICS, SENSOR_TOPICS, TF_MESSAGE, TF_STATIC_TOPIC, TF_TOPIC
from state_observer.io.record import DATUM_KEY, simulate_command
from state_observer.ros import PUBLISHERS_FOUND

MASS_ERROR = 0.15


def _node(module: str, ros_args: list[str], env: dict, log: Path) -> subprocess.Popen:
    # cwd: the log folder, so that `-m` imports the installed package (with its messages), not a source tree
    return subprocess.Popen([sys.executable, "-m", f"state_observer.ros.{module}", "--ros-args", *ros_args],
                            env=env, cwd=log.parent, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen, timeout_s: float = 20.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
    return proc.returncode


def _write_params(path: Path, bag: Path) -> None:
    from state_observer.paths import default_vehicle_path, find_data_file
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    tree = yaml.safe_load(find_data_file("config/observer.yaml").read_text())
    params = tree["observer_node"]["ros__parameters"]
    lat, lon, alt = (float(v) for v in custom_data(bag)[DATUM_KEY].split())
    params["datum"] = {"use": True, "latitude_deg": lat, "longitude_deg": lon, "altitude_m": alt}
    true_mass = ReducedVehicle(load_vehicle(default_vehicle_path())).total_mass_kg
    params["model"]["initial_mass_kg"] = round(true_mass * (1 + MASS_ERROR), 1)
    path.write_text("# written by `state-observer demo`: config/observer.yaml with the simulator's datum and a model mass\n"
                    f"# {100 * MASS_ERROR:.0f} % above the true {true_mass:.1f} kg\n" + yaml.safe_dump(tree, sort_keys=False))


def _stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def node_accuracy(output_bag: Path, input_bag: Path, skip_s: float) -> dict:
    """Position RMSE and final mass error of the node's recorded output against the bag's truth."""
    truth = {_stamp(m): m for _, _, m in read_messages(input_bag, ["/truth/odometry"])}
    t0 = min(truth)
    errors = []
    for _, _, m in read_messages(output_bag, [OUTPUT_TOPICS["odometry"]]):
        x = truth.get(_stamp(m))
        if x is not None and (_stamp(m) - t0) * 1e-9 >= skip_s:
            errors.append(math.hypot(m.pose.pose.position.x - x.pose.pose.position.x, m.pose.pose.position.y - x.pose.pose.position.y))
    true_mass = next(m.mass_kg for _, _, m in read_messages(input_bag, ["/truth/parameters"]))
    masses = [m.mass_kg for _, _, m in read_messages(output_bag, [OUTPUT_TOPICS["parameters"]])]
    return {"odometry messages compared": len(errors),
            "position_rmse_m": float(np.sqrt(np.mean(np.square(errors)))) if errors else float("nan"),
            "mass_error_pct": 100 * abs(masses[-1] - true_mass) / true_mass if masses else float("nan")}


def compare_with_process(output_bag: Path, processed_bag: Path) -> dict:
    """How the node's recorded odometry compares with ``process`` on the same bag (same stamps)."""
    topic = OUTPUT_TOPICS["odometry"]
    offline = {_stamp(m): m for _, _, m in read_messages(processed_bag, [topic])}
    diffs, missing = [], 0
    for _, _, m in read_messages(output_bag, [topic]):
        o = offline.get(_stamp(m))
        if o is None:
            missing += 1
            continue
        diffs.append(math.hypot(m.pose.pose.position.x - o.pose.pose.position.x, m.pose.pose.position.y - o.pose.pose.position.y))
    return {"node odometry messages": len(diffs) + missing, "process odometry messages": len(offline),
            "stamps only in the node's output": missing, "rms position difference m": float(np.sqrt(np.mean(np.square(diffs)))) if diffs else float("nan"),
            "max position difference m": max(diffs) if diffs else float("nan")}


HEADROOM = 4.0  # the node gets this share of the offline speed: it shares 2 cores with player and recorder, and DDS costs
MIN_ODOMETRY_SHARE = 0.9  # of process's odometry messages the node must publish
POSITION_TOLERANCE_M = 0.1  # the node's position RMSE may exceed process's by this much (late samples differ)


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen, what: str, timeout_s: float) -> float:
    """Wait while ``proc`` lives until ``text`` is in ``log``; a line every 10 s; seconds waited.
    Raises RuntimeError naming the cause (process exited, or no such line after ``timeout_s``)."""
    start = time.monotonic()
    next_line = start + 10.0
    while True:
        if text in log.read_text(errors="replace"):
            return time.monotonic() - start
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before it was ready; see {log}")
        now = time.monotonic()
        if now - start > timeout_s:
            raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s; see {log}")
        if now >= next_line:
            next_line = now + 10.0
            print(f"demo: waiting for {what}: {now - start:.0f} s", flush=True)
        time.sleep(0.1)


def _replay(out: Path, bag: Path, params: Path, rate: float, duration_s: float) -> dict:
    """bag_player -> observer_node -> bag_recorder on a private domain (module docstring, step 3); timings.
    Raises RuntimeError naming the node that failed."""
    from state_observer.progress import bar

    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(102 + os.getpid() % 100))  # private: not the default domain 0
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    output_bag = out / "output_bag"
    topics = [*OUTPUT_TOPICS.values(), TF_TOPIC, TF_STATIC_TOPIC]
    types = [*(OUTPUT_MSGTYPES[k] for k in OUTPUT_TOPICS), TF_MESSAGE, TF_MESSAGE]
    print(f"demo: ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}: bag_player -> observer_node -> bag_recorder (logs: {logs})", flush=True)
    procs = {}
    try:
        procs["bag_recorder"] = _node("bag_recorder", ["-p", f"output:={output_bag}", "-p", "overwrite:=true", "-p", f"topics:={topics}",
                                                       "-p", f"types:={types}"], env, logs / "bag_recorder.log")
        start = time.monotonic()
        procs["observer_node"] = _node("observer_node", ["--params-file", str(params)], env, logs / "observer_node.log")
        # no fixed wait: the node may compile its kernels (a fresh install without `state-observer prepare`)
        _wait_for_line(logs / "bag_recorder.log", "recording", procs["bag_recorder"], "bag_recorder", 600.0)
        _wait_for_line(logs / "observer_node.log", "listening on", procs["observer_node"], "observer_node", 1800.0)
        node_start_s = time.monotonic() - start
        print(f"demo: observer_node ready after {node_start_s:.1f} s", flush=True)
        # the recorder must see the node's publishers before the data starts, or the first outputs are lost (a fresh
        # machine's discovery took 3.6 s once, and the demo counted 92 % of process's odometry)
        _wait_for_line(logs / "bag_recorder.log", PUBLISHERS_FOUND, procs["bag_recorder"], "bag_recorder (the node's publishers)", 120.0)
        play_start = time.monotonic()
        procs["bag_player"] = _node("bag_player", ["-p", f"bag:={bag}", "-p", f"rate:={rate}", "-p", "wait_for_subscribers_s:=60.0",
                                                   "-p", f"topics:={list(SENSOR_TOPICS.values())}"], env, logs / "bag_player.log")
        deadline = play_start + duration_s / rate + 120.0
        with bar("demo: replay", round(duration_s, 1), unit="s",
                 bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s of the bag [{elapsed}<{remaining}]") as progress:  # bag seconds, from the wall clock and the rate
            while procs["bag_player"].poll() is None and procs["observer_node"].poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                progress.update(max(0.0, min(duration_s, (time.monotonic() - play_start) * rate) - progress.n))
            if procs["bag_player"].poll() == 0:
                progress.update(max(0.0, duration_s - progress.n))
        if procs["observer_node"].poll() is not None:
            raise RuntimeError(f"observer_node exited with code {procs['observer_node'].returncode} during the replay; see {logs}")
        if procs["bag_player"].poll() is None:
            raise RuntimeError(f"bag_player did not finish within {duration_s / rate + 120.0:.0f} s; see {logs}")
        if procs["bag_player"].returncode != 0:
            raise RuntimeError(f"bag_player exited with code {procs['bag_player'].returncode}; see {logs}")
        replay_s = time.monotonic() - play_start
        time.sleep(1.0)  # the last estimates reach the recorder
    finally:
        codes = {name: _stop(proc, timeout_s=60.0) for name, proc in reversed(procs.items())}
    if codes.get("observer_node", 0) != 0 or codes.get("bag_recorder", 0) != 0:
        raise RuntimeError(f"a node exited with an error on SIGINT ({', '.join(f'{k} {v}' for k, v in codes.items())}); see {logs}")
    if not (output_bag / "metadata.yaml").exists():
        raise RuntimeError(f"bag_recorder wrote no bag at {output_bag}; see {logs / 'bag_recorder.log'}")
    return {"node_start_s": round(node_start_s, 2), "replay_wall_s": round(replay_s, 2)}


def _write_json(path: Path, record: dict) -> None:
    import json

    path.write_text(json.dumps(record, indent=2, default=lambda v: None) + "\n")


def run_demo(out: Path, manoeuvre: str = "handling_drive", duration_s: float = 40.0, rate: float = 2.0, force: bool = False,
             bench_json: Path | None = None) -> int:
    """The demo (module docstring); 0 on PASS. The last line printed says PASS or FAIL and why."""
    from state_observer.process import load_config, process_bag
    from state_observer.progress import TimeProgress

    wall_start = time.monotonic()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    bag = out / "input"
    record: dict = {"manoeuvre": manoeuvre, "duration_s": duration_s, "requested_rate": rate}

    def fail(cause: str) -> int:
        record["verdict"] = f"FAIL: {cause}"
        _write_json(out / "demo.json", record)
        print(f"demo: FAIL: {cause}", file=sys.stderr, flush=True)
        return 1

    if force or not (bag / "metadata.yaml").exists():
        print(f"demo: [1/4] simulating {duration_s:.0f} s of {manoeuvre} into {bag}", flush=True)
        if simulate_command(manoeuvre, bag, duration_s=duration_s, force=True) != 0:
            return fail(f"the simulation of {manoeuvre} failed (message above)")
    else:
        print(f"demo: [1/4] using the simulated drive in {bag} (--force simulates it again)", flush=True)
    params = out / "params.yaml"
    _write_params(params, bag)

    print(f"demo: [2/4] state-observer process {bag} (offline, the node's code path) -> {out / 'processed'}", flush=True)
    progress = TimeProgress(sys.stderr, "demo: process")
    summary = process_bag(bag, out / "processed", load_config(params), overwrite=True, progress=progress)
    progress.finish()
    offline_rtf = float(summary["timing"]["real-time factor"] or 0.0)
    playback = min(rate, max(0.1, round(offline_rtf / HEADROOM, 1)))
    record.update(process_rtf=offline_rtf, rate=playback)
    why = "as asked" if playback == rate else f"process ran at {offline_rtf:.1f}x real time here; the node gets 1/{HEADROOM:g} of that"
    print(f"demo: [3/4] replaying the bag through the ROS 2 nodes at {playback:g}x real time ({why})", flush=True)
    try:
        record.update(_replay(out, bag, params, playback, duration_s))
    except RuntimeError as exc:
        return fail(str(exc))

    print("demo: [4/4] comparing the node's output with process and with the truth", flush=True)
    output_bag = out / "output_bag"
    same = compare_with_process(output_bag, out / "processed" / "bag")
    node = node_accuracy(output_bag, bag, skip_s=20.0)
    offline = summary.get("accuracy against truth", {})
    record.update(node_vs_process=same, node_accuracy=node, process_accuracy=offline)
    print("demo: node vs `state-observer process` on the same bag: " + ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in same.items())
        + " (process reads the topics in log order; DDS delivers each topic on its own, so late samples differ)")
    print("demo: the node's output against the truth (after 20 s): " + ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in node.items()))
    for key, value in offline.items():
        print(f"demo: process accuracy: {key} = {value:.4g}")
    print(f"demo: report {out / 'processed' / 'report.html'}; the node's output bag {output_bag} "
          f"(ros2 bag play {output_bag}, or open it in Foxglove)")
    record["demo_wall_s"] = round(time.monotonic() - wall_start, 1)
    if bench_json is not None:
        from state_observer.bench import write_json

        write_json(bench_json, {"demo_wall_s": record["demo_wall_s"], "demo_node_start_s": record["node_start_s"]})

    share = same["node odometry messages"] / max(1, same["process odometry messages"])
    if share < MIN_ODOMETRY_SHARE:
        return fail(f"the node published {same['node odometry messages']} odometry messages where process wrote "
                    f"{same['process odometry messages']} ({100 * share:.0f} % < {100 * MIN_ODOMETRY_SHARE:.0f} %): it fell behind "
                    f"the {playback:g}x replay or lost messages; see {out / 'logs'}")
    process_rmse = next((v for k, v in offline.items() if k.startswith("position") and "rmse" in k.lower()), float("nan"))
    if not node["position_rmse_m"] <= (process_rmse if math.isfinite(process_rmse) else 0.25) + POSITION_TOLERANCE_M:
        return fail(f"the node's position RMSE {node['position_rmse_m']:.3g} m exceeds process's {process_rmse:.3g} m "
                    f"by more than {POSITION_TOLERANCE_M} m")
    record["verdict"] = "PASS"
    _write_json(out / "demo.json", record)
    print(f"demo: PASS in {record['demo_wall_s']:.0f} s: the node published {100 * share:.0f} % of process's odometry at "
          f"{playback:g}x real time, position RMSE {node['position_rmse_m']:.3f} m against the truth (process "
          f"{process_rmse:.3f} m); report {out / 'processed' / 'report.html'}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="state-observer demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/demo", help="output directory (default results/demo)")
    parser.add_argument("--manoeuvre", default="handling_drive")
    parser.add_argument("--duration", type=float, default=40.0, help="simulated seconds (default 40)")
    parser.add_argument("--rate", type=float, default=2.0, help="playback rate (default 2 x real time)")
    parser.add_argument("--force", action="store_true", help="simulate the input bag again")
    parser.add_argument("--bench-json", metavar="PATH", help="merge demo_wall_s into this benchmark JSON")
    args = parser.parse_args(argv)
    return run_demo(Path(args.out), args.manoeuvre, args.duration, args.rate, args.force,
                    Path(args.bench_json) if args.bench_json else None)

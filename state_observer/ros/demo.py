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
from state_observer.io.convert import OUTPUT_MSGTYPES, OUTPUT_TOPICS, SENSOR_TOPICS
from state_observer.io.record import DATUM_KEY, simulate_command

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


def run_demo(out: Path, manoeuvre: str = "steady_circle", duration_s: float = 40.0, rate: float = 2.0, force: bool = False) -> int:
    from state_observer.process import load_config, process_bag

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    bag = out / "input"
    if force or not (bag / "metadata.yaml").exists():
        print(f"demo: simulating {duration_s:.0f} s of {manoeuvre} into {bag}", flush=True)
        if simulate_command(manoeuvre, bag, duration_s=duration_s, force=True) != 0:
            return 1
    params = out / "params.yaml"
    _write_params(params, bag)
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(102 + os.getpid() % 100))  # private: not the default domain 0
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    output_bag = out / "output_bag"
    topics = list(OUTPUT_TOPICS.values())
    types = [OUTPUT_MSGTYPES[k] for k in OUTPUT_TOPICS]
    print(f"demo: ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}: bag_player -> observer_node -> bag_recorder (logs: {logs})", flush=True)
    recorder = _node("bag_recorder", ["-p", f"output:={output_bag}", "-p", "overwrite:=true", "-p", f"topics:={topics}", "-p", f"types:={types}"],
                     env, logs / "bag_recorder.log")
    node = _node("observer_node", ["--params-file", str(params)], env, logs / "observer_node.log")
    time.sleep(3.0)  # imports and discovery of the recorder and the node
    start = time.monotonic()
    player = _node("bag_player", ["-p", f"bag:={bag}", "-p", f"rate:={rate}", "-p", "wait_for_subscribers_s:=60.0",
                                  "-p", f"topics:={list(SENSOR_TOPICS.values())}"], env, logs / "bag_player.log")
    deadline = time.monotonic() + duration_s / rate + 120.0
    while player.poll() is None and node.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    code = _stop(player)
    time.sleep(1.0)  # the last estimates reach the recorder
    node_code, recorder_code = _stop(node), _stop(recorder)
    wall = time.monotonic() - start
    if code != 0 or node_code != 0 or recorder_code != 0 or not (output_bag / "metadata.yaml").exists():
        print(f"demo: a node failed (player {code}, observer {node_code}, recorder {recorder_code}); see {logs}", file=sys.stderr)
        return 1
    print(f"demo: replayed {duration_s:.0f} s at rate {rate:g} in {wall:.1f} s; node output: {output_bag}", flush=True)

    config = load_config(params)
    summary = process_bag(bag, out / "processed", config, overwrite=True)
    same = compare_with_process(output_bag, out / "processed" / "bag")
    accuracy = node_accuracy(output_bag, bag, skip_s=20.0)
    print("demo: node vs `state-observer process` on the same bag: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in same.items())
          + " (process reads the topics in log order; DDS delivers each topic on its own, so late samples differ)")
    print("demo: accuracy of the node's output against the truth (after 20 s): " + ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in accuracy.items()))
    for key, value in summary.get("accuracy against truth", {}).items():
        print(f"demo: process accuracy: {key} = {value:.4g}")
    print(f"demo: report {out / 'processed' / 'report.html'}")
    if same["node odometry messages"] < 0.5 * same["process odometry messages"]:  # gross loss only: under load, fewer IMU messages advance the model
        print(f"demo: error: the node published {same['node odometry messages']} odometry messages where process wrote "
              f"{same['process odometry messages']}; see {logs}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="state-observer demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/demo", help="output directory (default results/demo)")
    parser.add_argument("--manoeuvre", default="steady_circle")
    parser.add_argument("--duration", type=float, default=40.0, help="simulated seconds (default 40)")
    parser.add_argument("--rate", type=float, default=2.0, help="playback rate (default 2 x real time)")
    parser.add_argument("--force", action="store_true", help="simulate the input bag again")
    args = parser.parse_args(argv)
    return run_demo(Path(args.out), args.manoeuvre, args.duration, args.rate, args.force)

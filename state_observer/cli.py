"""The ``state-observer`` command line: argument parsing only.

Each subcommand imports its implementation late and returns its exit code.
Never imports rclpy.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# The models' matrices are small: BLAS threads only add latency (an n = 270 factorisation took
# 16 ms with OpenBLAS threads on 2 busy cores and 1.8 ms with one). Set before NumPy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from state_observer import __version__


def _bench(args: argparse.Namespace) -> int:
    from state_observer import bench

    argv: list[str] = []
    if args.json is not None:
        argv += ["--json", args.json]
    if args.quick:
        argv.append("--quick")
    return bench.main(argv)


def _soak(args: argparse.Namespace) -> int:
    from state_observer import soak

    argv = ["--minutes", str(args.minutes)] + (["--json", args.json] if args.json else []) + (["--log", args.log] if args.log else [])
    return soak.main(argv)


def _simulate(args: argparse.Namespace) -> int:
    from state_observer.io import record

    return record.simulate_command(
        args.manoeuvre, args.out, vehicle=args.vehicle, sensors=args.sensors,
        duration_s=args.duration, seed=args.seed, force=args.force, storage=args.storage, bag_version=args.bag_version,
        start_time_s=args.start_time)


def _process(args: argparse.Namespace) -> int:
    from state_observer.process import process_command

    return process_command(args.bag, args.out, params=args.params, vehicle=args.vehicle, observer=args.observer,
                           force=args.force, report=not args.no_report, allow_dropped=args.allow_dropped, check=args.check,
                           storage=args.storage, bag_version=args.bag_version, jobs=args.jobs, cluster=args.cluster)


def _check(args: argparse.Namespace) -> int:
    from state_observer.io.check import check_command

    return check_command(args.bag, params=args.params, vehicle=args.vehicle)


def _foxglove(args: argparse.Namespace) -> int:
    from state_observer.errors import StateObserverError
    from state_observer.foxglove_view import serve_bag
    from state_observer.paths import foxglove_layout_path

    def listening(port: int) -> None:
        print(f"foxglove: serving {args.bag} on ws://{args.host}:{port} (Foxglove: Open connection -> Foxglove WebSocket); "
              f"the observer's layout: {foxglove_layout_path()} (Layouts -> Import from file); "
              "playback starts when a client subscribes; Ctrl-C stops", flush=True)

    def played(sent) -> None:
        print(f"foxglove: played {sum(sent.values())} messages on {len(sent)} topics; still serving (Ctrl-C stops)", flush=True)

    try:
        serve_bag(args.bag, host=args.host, port=args.port, rate=args.rate, loop=args.loop, topics=args.topic,
                  on_listening=listening, on_played=played)
    except KeyboardInterrupt:
        return 0
    except (StateObserverError, OSError, RuntimeError) as exc:  # bad bag, port in use
        print(f"state-observer foxglove: {exc}", file=sys.stderr)
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    try:
        from state_observer.ros.demo import run_demo
    except ImportError as exc:
        raise SystemExit(f"state-observer demo: needs ROS 2 (rclpy): {exc}; run `make demo`") from None
    return run_demo(Path(args.out), args.manoeuvre, args.duration, args.rate, args.force,
                    Path(args.bench_json) if args.bench_json else None)


def _prepare(args: argparse.Namespace) -> int:
    from state_observer import prepare

    return prepare.main(["--cache-root", args.cache_root] if args.cache_root else [])


def _evaluate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from state_observer.errors import StateObserverError
    from state_observer.sim import harness

    try:
        results = harness.evaluate(args.manoeuvre or None, seeds=tuple(args.seed or harness.SEEDS), cache_dir=Path(args.cache) if args.cache else None,
                                   observers=tuple(args.observer or ("spi_reduced",)), jobs=args.jobs, cluster=args.cluster,
                                   vehicle_file=args.vehicle, sensors_file=args.sensors)
    except (ValueError, StateObserverError) as exc:
        raise SystemExit(f"state-observer evaluate: {exc}") from None
    summary = harness.summarise(results)
    print(harness.format_table(summary))
    verdicts = harness.targets(summary)
    print(harness.format_targets(verdicts))
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")

        def finite(value):  # NaN (an undefined metric) becomes null: strict JSON; seeds become strings
            if isinstance(value, dict):
                return {str(k): finite(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [finite(v) for v in value]
            return None if isinstance(value, float) and value != value else value

        payload = {"median_over_seeds": summary, "targets": verdicts, "per_seed": results}
        tmp.write_text(json.dumps(finite(payload), indent=2, sort_keys=True, allow_nan=False) + "\n")
        tmp.replace(path)
        print(f"evaluate: results written to {path}")
    return 0


def _linkage_study(args: argparse.Namespace) -> int:
    from state_observer.estimation import linkage

    grid = dict(mechanisms=tuple(args.mechanism or ("four_bar", "five_bar")), sensors=tuple(args.sensor or linkage.SENSOR_KINDS),
                rates=tuple(args.rate or linkage.RATES_HZ), errors=tuple(args.error or ("low", "high")),
                filters=tuple(args.filter or linkage.FILTERS), seed=args.seed)
    linkage.study_grid(**grid)
    return 0


def _vehicle_new(args: argparse.Namespace) -> int:
    from state_observer.vehicle.from_numbers import CarNumbers, new_command

    fields = {name: getattr(args, name) for name in CarNumbers.__dataclass_fields__}
    return new_command(CarNumbers(**fields), args.out, force=args.force)


class _OneLineParser(argparse.ArgumentParser):
    """A subcommand parser whose refusals are one line (no usage block), naming the option."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")


def _number(text: str) -> float:
    """A finite float; the range is checked by the command, which names the option."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _add_vehicle_commands(commands) -> None:
    vehicle = commands.add_parser("vehicle", help="vehicle description tools (vehicle new: a car from ten numbers)")
    sub = vehicle.add_subparsers(dest="vehicle_command", metavar="COMMAND", required=True, parser_class=_OneLineParser)
    new = sub.add_parser(
        "new", help="write a complete vehicle YAML from mass, wheelbase, tracks, CG, tires, ...",
        description="Scale the default car to your numbers and write a complete vehicle description (the file's header "
                    "comment lists each input and how everything else was derived). Required: --mass, --wheelbase, "
                    "--front-track, --rear-track, --cg-to-front-axle, --cg-height, --driven-axle and --tire-size (or "
                    "--wheel-radius with --cornering-stiffness). The rest defaults to the default car's own figures.")
    new.add_argument("--out", required=True, metavar="FILE", help="vehicle YAML to write")
    new.add_argument("--force", action="store_true", help="replace an existing FILE")
    new.add_argument("--name", metavar="NAME", help="vehicle name (default: the file name)")
    numbers = (
        ("mass", "KG", "total mass as driven, with the driver"),
        ("wheelbase", "M", "front to rear axle"),
        ("front-track", "M", "between the front wheel centres"),
        ("rear-track", "M", "between the rear wheel centres"),
        ("cg-to-front-axle", "M", "horizontal distance from the front axle back to the centre of gravity"),
        ("cg-height", "M", "centre of gravity above the ground"),
        ("wheel-radius", "M", "unloaded tire radius (instead of --tire-size)"),
        ("cornering-stiffness", "N_PER_RAD", "per tire at its static load (default: from the tire width)"),
        ("rear-cornering-stiffness", "N_PER_RAD", "rear tires, if not the --cornering-stiffness"),
        ("yaw-inertia", "KG_M2", "whole car about its CG (default: the default car's Izz / (m a b))"),
        ("steering-ratio", "RATIO", "steering-wheel angle per road-wheel angle (default: the default car's)"),
        ("front-ride-frequency", "HZ", "default: the default car's"),
        ("rear-ride-frequency", "HZ", "default: the default car's"),
        ("roll-gradient", "DEG_PER_G", "body roll per lateral acceleration (default: the default car's)"),
        ("drag-area", "M2", "drag coefficient x frontal area, Cd A (default: the default car's, scaled)"),
        ("downforce-area", "M2", "downforce coefficient x area, Cz A, of a car with wings (default: none)"),
        ("aero-balance", "SHARE", "front axle's share of the downforce, 0..1 (default: as the axles share the weight)"),
    )
    for name, metavar, help_text in numbers:
        new.add_argument(f"--{name}", type=_number, metavar=metavar, help=help_text)
    new.add_argument("--tire-size", metavar="W/ARrD", help="ETRTO tire size, e.g. 215/55R16")
    new.add_argument("--driven-axle", metavar="AXLE", help="front, rear or all")
    new.add_argument("--front-suspension", metavar="TYPE", help="double_wishbone (the detailed model steers no strut yet)")
    new.add_argument("--rear-suspension", metavar="TYPE", help="double_wishbone or macpherson (default: macpherson)")
    new.set_defaults(func=_vehicle_new)


def _checked(kind, accept, requirement: str):
    """An argparse type: parse with ``kind``, then refuse values ``accept`` rejects."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{requirement}: {text!r}")
        return value

    return parse


_positive_seconds = _checked(float, lambda v: 0.0 < v < float("inf"), "must be a positive number of seconds")
_start_time = _checked(float, lambda v: 0.0 <= v < 4e9, "must be seconds since the Unix epoch (0 to 4e9)")
_seed = _checked(int, lambda v: v >= 0, "must be >= 0")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="state-observer",
        description="Vehicle state, tire-force and parameter observer.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench = commands.add_parser("bench", help="print real-time factors and latencies")
    bench.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    bench.add_argument("--quick", action="store_true", help="short run (smoke test)")
    bench.set_defaults(func=_bench)

    soak = commands.add_parser("soak", help="a long simulated drive through the observer node: memory, output rates, parameters")
    soak.add_argument("--minutes", type=float, default=60.0, help="simulated drive length (default 60)")
    soak.add_argument("--json", metavar="PATH", help="merge the soak_* figures into this benchmark JSON")
    soak.add_argument("--log", metavar="PATH", help="write the per-minute records (JSON lines)")
    soak.set_defaults(func=_soak)

    simulate = commands.add_parser(
        "simulate", help="write a rosbag2 of a manoeuvre of the virtual vehicle",
        description="Simulate a manoeuvre and write a rosbag2 with the sensor topics "
                    "(/imu/data, /gps/fix, /gps/vel, /wheel_states, /steering_state) and the "
                    "ground truth (/truth/odometry, /truth/tire_forces, /truth/parameters, "
                    "/truth/state) every model step.")
    simulate.add_argument("--manoeuvre", required=True, metavar="NAME",
                          help="manoeuvre, e.g. step_steer or steady_circle "
                               "(an unknown name lists the valid ones)")
    simulate.add_argument("--vehicle", metavar="FILE",
                          help="vehicle YAML (default: config/vehicles/default.yaml)")
    simulate.add_argument("--sensors", metavar="FILE",
                          help="sensor YAML (default: config/sensors/default.yaml)")
    simulate.add_argument("--duration", type=_positive_seconds, metavar="S",
                          help="simulated time in seconds (default: the manoeuvre's own)")
    simulate.add_argument("--seed", type=_seed, default=0, metavar="N",
                          help="seed of the sensor noise (default: 0)")
    simulate.add_argument("--out", required=True, metavar="BAG", help="bag directory to create")
    simulate.add_argument("--force", action="store_true", help="replace an existing bag at BAG")
    simulate.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                          help="rosbag2 storage format (default: mcap, rosbag2's default since Iron)")
    simulate.add_argument("--bag-version", type=int, choices=(8, 9), default=9,
                          help="rosbag2 metadata version (default 9; 8 for Humble's ros2 bag)")
    simulate.add_argument("--start-time", type=_start_time, default=1767225600.0, metavar="S",
                          help="time of the first sample, seconds since the Unix epoch (default: 2026-01-01T00:00:00Z)")
    simulate.set_defaults(func=_simulate)

    process = commands.add_parser(
        "process", help="run the observer on a rosbag2 offline (the node's code path, as fast as possible)",
        description="Feed the sensor topics of BAG through the observer, as the observer node would, and write "
                    "OUT/bag (everything the node publishes), CSV files, summary.json and report.html.")
    process.add_argument("bag", metavar="BAG", nargs="+",
                         help="rosbag2 directory (sqlite3 or mcap), or a folder of them; several: a fleet, OUT/<bag name>/ "
                              "each and OUT/fleet.csv across them")
    process.add_argument("--out", required=True, metavar="DIR", help="output directory")
    process.add_argument("--jobs", type=int, metavar="N", help="bags of a fleet processed at a time (default: one per core)")
    process.add_argument("--cluster", metavar="ADDRESS",
                         help="process a fleet on this Dask cluster (tcp://host:8786; every worker sees the same paths)")
    process.add_argument("--params", metavar="FILE", help="node parameters file (default: config/observer.yaml)")
    process.add_argument("--vehicle", metavar="FILE", help="vehicle YAML (overrides the parameter vehicle_file)")
    process.add_argument("--observer", metavar="NAME", help="observer configuration (spi_reduced, errorekf_fe_reduced, errorekf_detailed)")
    process.add_argument("--force", action="store_true", help="write into a non-empty OUT")
    process.add_argument("--no-report", action="store_true", help="skip the CSV/HTML report (bag and summary.json only)")
    process.add_argument("--allow-dropped", action="store_true",
                         help="exit 0 even when a sensor stream was wholly dropped (a warning line instead of an error)")
    process.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                         help="storage of the output bag (default: mcap, rosbag2's default since Iron)")
    process.add_argument("--bag-version", type=int, choices=(8, 9), default=9,
                         help="rosbag2 metadata version of the output bag (default 9; 8 for Humble's ros2 bag)")
    process.add_argument("--check", action="store_true", help="run `state-observer check` on BAG first and stop if it fails")
    process.set_defaults(func=_process)

    check = commands.add_parser(
        "check", help="inspect a rosbag2's sensor streams before processing it (no filter run)",
        description="Read the sensor topics of BAG through the observer's own conversion and per-message rules and print, "
                    "per stream: type, count and rate, frame ids and joint names found against the expected ones, covariances, "
                    "stamp order, header stamp to log time, GNSS fix status, non-finite fields, and what will be used and "
                    "what dropped and why; then a verdict. Exit 1 when a stream the observer reads would be wholly dropped.")
    check.add_argument("bag", metavar="BAG", help="rosbag2 directory (sqlite3 or mcap)")
    check.add_argument("--params", metavar="FILE", help="node parameters file (default: config/observer.yaml)")
    check.add_argument("--vehicle", metavar="FILE", help="vehicle YAML (overrides the parameter vehicle_file)")
    check.set_defaults(func=_check)

    foxglove = commands.add_parser(
        "foxglove", help="serve a rosbag2 to the Foxglove app over its WebSocket protocol (no ROS 2 needed)",
        description="Serve every topic of BAG (or --topic ones) as a Foxglove channel (CDR messages, ros2msg schemas from "
                    "the bag), paced at --rate times real time, once the Foxglove app (Open connection -> Foxglove WebSocket, "
                    "ws://HOST:PORT) has subscribed. Needs the foxglove-sdk package. For the live node on a ROS 2 install, "
                    "run the node foxglove_relay beside it (or the ROS package foxglove_bridge).")
    foxglove.add_argument("bag", metavar="BAG", help="rosbag2 directory (sqlite3 or mcap), e.g. results/demo/output_bag")
    foxglove.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    foxglove.add_argument("--port", type=int, default=8765, help="port (default: 8765, the app's default; 0: any free port)")
    foxglove.add_argument("--rate", type=float, default=1.0, metavar="X", help="playback rate (default: 1 = real time; 0: as fast as possible)")
    foxglove.add_argument("--loop", action="store_true", help="play the bag again and again until Ctrl-C")
    foxglove.add_argument("--topic", action="append", metavar="TOPIC", help="serve only this topic (repeatable)")
    foxglove.set_defaults(func=_foxglove)

    demo = commands.add_parser(
        "demo", help="simulate a drive, replay it through bag_player -> observer_node -> bag_recorder, report",
        description="The main job of `make demo`: simulate a manoeuvre into OUT/input, replay it in real ROS 2 transport "
                    "through the observer node (private domain, localhost), record OUT/output_bag, process the same "
                    "bag offline into OUT/processed (report.html) and print the accuracy against the truth.")
    demo.add_argument("--out", default="results/demo", metavar="DIR", help="output directory (default: results/demo)")
    demo.add_argument("--manoeuvre", default="handling_drive", metavar="NAME", help="manoeuvre to simulate (default: handling_drive)")
    demo.add_argument("--duration", type=_positive_seconds, default=40.0, metavar="S", help="simulated seconds (default: 40)")
    demo.add_argument("--rate", type=_positive_seconds, default=2.0, metavar="X", help="highest playback rate (default: 2 x real time; lower when process runs slowly here)")
    demo.add_argument("--force", action="store_true", help="simulate the input bag again even if it exists")
    demo.add_argument("--bench-json", metavar="PATH", help="merge demo_wall_s (and the node's start time) into this benchmark JSON")
    demo.set_defaults(func=_demo)

    prepare = commands.add_parser(
        "prepare", help="compile the kernels and sweep the default vehicle's kinematics (the build does this)",
        description="Fill the caches a first run would fill: numba's compiled kernels beside the installed modules and "
                    "the default vehicle's suspension kinematics under the package's data root. scripts/bootstrap.sh "
                    "runs it after every build, so that the first node start takes seconds.")
    prepare.add_argument("--cache-root", metavar="DIR", help="where the kinematics entry goes (default: <data root>/cache)")
    prepare.set_defaults(func=_prepare)

    evaluate = commands.add_parser(
        "evaluate", help="accuracy harness: the observer on a car it was not built from, beside its baselines",
        description="For each manoeuvre and seed, simulate a truth car that differs from the vehicle file (Magic-Formula tires, "
                    "perturbed mass, centre of mass, inertia, tire stiffness, springs; IMU biases, scale factors and mounting "
                    "error; noisier GNSS with an outage), run the observer on the vehicle file through the same code path as the "
                    "node and process (with and without GNSS), and its baselines on the same samples (open loop, a "
                    "robot_localization-style kinematic EKF, the linear single-track model, zero sideslip, raw GNSS). Prints the "
                    "median over seeds and the targets met.")
    evaluate.add_argument("--manoeuvre", action="append", metavar="NAME",
                          help="manoeuvre to run (repeatable; default: every manoeuvre of the harness, listed in docs/accuracy.md)")
    evaluate.add_argument("--vehicle", metavar="FILE",
                          help="your car's vehicle file (e.g. from `state-observer vehicle new`): the truth is that car changed by the "
                               "mismatch, the observer runs on the file (default: the harness's cars; with it, the race car's "
                               "manoeuvres only by --manoeuvre)")
    evaluate.add_argument("--sensors", metavar="FILE",
                          help="your sensor suite (rates, latencies, noise; the schema of config/sensors/default.yaml): the samples are "
                               "drawn from it, the mismatch's biases and GNSS noise on top (default: the package's suite)")
    evaluate.add_argument("--seed", action="append", type=_seed, metavar="N", help="mismatch and noise seed (repeatable; default: 0 1 2)")
    evaluate.add_argument("--observer", action="append", metavar="NAME", help="observer configuration (repeatable; default: spi_reduced)")
    evaluate.add_argument("--jobs", type=int, default=2, metavar="N", help="scenarios run in parallel (default: 2)")
    evaluate.add_argument("--cluster", metavar="ADDRESS", help="run the scenarios on this Dask cluster (tcp://host:8786)")
    evaluate.add_argument("--cache", metavar="DIR", help="keep the simulated truths here and reuse them (for development)")
    evaluate.add_argument("--json", metavar="PATH", help="write the medians, the targets and every seed's metrics to PATH")
    evaluate.set_defaults(func=_evaluate)

    _add_vehicle_commands(commands)

    study = commands.add_parser(
        "linkage-study", help="errorEKF, DEKF and UKF on the four-bar and five-bar (Sanjurjo 2016 ch. 4)",
        description="Run the planar-linkage observer study and print one row per run: crank-angle RMSE of the "
                    "filter and of the raw sensor, crank-rate RMSE and the filter's real-time factor. The whole "
                    "grid takes ~12 minutes; the options pick a part of it (each may be repeated).")
    study.add_argument("--mechanism", action="append", choices=("four_bar", "five_bar"))
    study.add_argument("--sensor", action="append", choices=("crank_encoder", "coupler_gyro", "crank_gyro"))
    study.add_argument("--rate", action="append", type=float, metavar="HZ", help="sensor rate (default: 200 100 50 20 10)")
    study.add_argument("--error", action="append", choices=("low", "high"))
    study.add_argument("--filter", action="append", choices=("errorekf", "dekf", "ukf"))
    study.add_argument("--seed", type=_seed, default=0, metavar="N")
    study.set_defaults(func=_linkage_study)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())

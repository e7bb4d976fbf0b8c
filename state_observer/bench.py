"""``state-observer bench``: real-time factors and step latencies, measured side by side in one run.

Every figure goes into one flat JSON object of named numbers (``--json PATH``); figures already
in that file from other benchmarks are kept and the ones measured here are replaced.
Real-time factor (rtf) = simulated seconds per wall-clock second, model only, one core.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable


def _time_steps(make_solver: Callable, sim_seconds: float, repeats: int) -> dict:
    """Run a fresh solver ``repeats`` times; median rtf, per-step p99 latency and iterations."""
    rtfs, step_us, iterations = [], [], []
    for _ in range(repeats):
        solver = make_solver()
        steps = round(sim_seconds / solver.dt)
        clock = time.perf_counter
        start = clock()
        for _ in range(steps):
            t0 = clock()
            result = solver.step()
            step_us.append((clock() - t0) * 1e6)
            if not result.success:
                raise RuntimeError(result.message)
        rtfs.append(sim_seconds / (clock() - start))
        iterations.append(solver.n_iterations / solver.n_steps)
    step_us.sort()
    return {
        "rtf": statistics.median(rtfs),
        "step_p99_us": step_us[int(0.99 * (len(step_us) - 1))],
        "iterations_per_step": statistics.mean(iterations),
    }


def linkage_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """ALI3-P on the four-bar and five-bar (Sanjurjo 2016 ch. 4), 10 s of free fall at dt = 5 ms."""
    from state_observer.mbs import ALI3P
    from state_observer.mbs.linkages import five_bar, four_bar

    out = {}
    for key, make in (("fourbar", four_bar), ("fivebar", five_bar)):
        link = make()
        figures = _time_steps(lambda: ALI3P(link.model, link.q0, dt=5e-3), min(sim_seconds, 10.0), repeats)
        out[f"{key}_ali3p_rtf_5ms"] = round(figures["rtf"], 1)
        out[f"{key}_ali3p_step_p99_us"] = round(figures["step_p99_us"], 1)
        out[f"{key}_ali3p_iterations_per_step"] = round(figures["iterations_per_step"], 3)
    return out


def detailed_vehicle_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """The detailed vehicle (truth model) and the 14-DOF reduced model (dt = 4 ms) on the double lane change.

    ``*_model_*``: the model alone (set the inputs, step), both models replaying the inputs the driver
    applied to the detailed model, so they do the same work.  ``*_run_rtf_4ms``: the simulator's loop
    (driver, model, truth record per step; sensor synthesis and bag writing excluded)."""
    from state_observer.paths import default_vehicle_path
    from state_observer.sim.manoeuvres import make_manoeuvre
    from state_observer.sim.run import run, start_on_path
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.detailed import DetailedVehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    desc = load_vehicle(default_vehicle_path())
    duration = min(12.0, sim_seconds)
    manoeuvre = make_manoeuvre("double_lane_change", duration_s=duration)
    out = {}
    inputs: list = []
    for key, make in (("detailed", lambda: DetailedVehicle(desc)), ("reduced", lambda: ReducedVehicle(desc))):
        vehicle = make()  # statics, kinematic fit and compilation are not part of the stepping cost
        steps = run(vehicle, manoeuvre, inputs_log=inputs if key == "detailed" else None)
        next(steps)
        start = time.perf_counter()
        for _ in steps:
            pass
        out[f"{key}_run_rtf_4ms"] = round(duration / (time.perf_counter() - start), 2)
        rtfs, step_us, iterations = [], [], []
        for _ in range(repeats):
            start_on_path(vehicle, manoeuvre)
            clock = time.perf_counter
            begin = clock()
            for applied in inputs:
                before = clock()
                vehicle.set_inputs(applied.steering_wheel_rad, applied.drive_torque_n_m, applied.brake_torque_n_m, steering_rate_rad_s=applied.steering_rate_rad_s)
                if not vehicle.step().success:
                    raise RuntimeError(f"bench: the {key} model failed on the replayed lane change")
                step_us.append((clock() - before) * 1e6)
            rtfs.append(duration / (clock() - begin))
            iterations.append(vehicle.solver.n_iterations / vehicle.solver.n_steps)
        step_us.sort()
        out[f"{key}_model_rtf_4ms"] = round(statistics.median(rtfs), 2)
        out[f"{key}_model_step_p99_us"] = round(step_us[int(0.99 * (len(step_us) - 1))], 1)
        out[f"{key}_model_iterations_per_step"] = round(statistics.mean(iterations), 3)
        out[f"{key}_model_coordinates"] = vehicle.model.n
    out["detailed_model_constraints"] = DetailedVehicle(desc).model.m
    out["reduced_vs_detailed_speedup"] = round(out["reduced_model_rtf_4ms"] / out["detailed_model_rtf_4ms"], 2)
    return out


def observer_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """errorEKF-FE, SPI, DEKF and UKF on the 14-DOF model and the errorEKF on the detailed model (dt = 4 ms) over
    synthesised circle_mu08 measurements: model step, covariance propagation, every measurement update and
    the feedback (truth simulation not timed; SPI's parameter updates from the first step on)."""
    from state_observer.estimation.errorekf import ErrorEkfSettings, detailed_settings
    from state_observer.estimation.spi import SpiSettings
    from state_observer.paths import default_sensors_path, default_vehicle_path
    from state_observer.sim import evaluate
    from state_observer.sim.sensors import load_sensor_config
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.kinematic_fit import fit_vehicle_kinematics

    desc = load_vehicle(default_vehicle_path())
    config = load_sensor_config(default_sensors_path())
    kinematics = fit_vehicle_kinematics(desc)
    duration = min(10.0, sim_seconds)
    manoeuvre = evaluate.SCENARIOS["circle_mu08"]()
    manoeuvre.duration_s = duration
    truths, samples = evaluate.simulate_truth(desc, config, manoeuvre)
    steps = len(truths) - 1
    evaluate.run_model(desc, manoeuvre, samples, config, 10, ErrorEkfSettings(), kinematics)  # warm-up
    out = {}
    from state_observer.estimation.vehicle_filters import VehicleDEKF, VehicleUKF, dekf_settings, ukf_settings

    ukf_steps = min(steps, 500)  # 57 model steps per step: 2 s are enough to time it
    configurations = (("errorekf_fe_reduced_rtf_4ms", ErrorEkfSettings(), None, "reduced", None, steps),
                      ("spi_reduced_rtf_4ms", ErrorEkfSettings(), SpiSettings(start_after_s=0.0), "reduced", None, steps),
                      ("errorekf_detailed_rtf_4ms", detailed_settings(), None, "detailed", None, steps),
                      ("dekf_reduced_rtf_4ms", dekf_settings(), None, "reduced", VehicleDEKF, steps),
                      ("ukf_reduced_rtf_4ms", ukf_settings(), None, "reduced", VehicleUKF, ukf_steps))
    for key, settings, spi, model, cls, n in configurations:
        rtfs = []
        for _ in range(repeats if n == steps else 1):
            timing: dict = {}
            evaluate.run_model(desc, manoeuvre, samples, config, n, settings, kinematics, timing, spi=spi, model=model, filter_class=cls)
            rtfs.append(n * 0.004 / timing["loop_s"])
        out[key] = round(statistics.median(rtfs), 2)
    return out


def linkage_filter_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """errorEKF, DEKF and UKF-TR on the four-bar (Sanjurjo 2016 §4.7.3): crank encoder at 200 Hz, "high"
    model error, min(sim_seconds, 10) s at dt = 5 ms; median rtf of the filter loop (truth and sensor
    synthesis not timed)."""
    from state_observer.estimation.linkage import run_study

    duration = min(sim_seconds, 10.0)
    out = {}
    for name in ("errorekf", "dekf", "ukf"):
        rtfs = []
        for _ in range(repeats):
            result = run_study("four_bar", name, "crank_encoder", 200, "high", seed=0, duration_s=duration)
            if result.failed:
                raise RuntimeError(f"bench: the four-bar {name} failed: {result.message}")
            rtfs.append(result.rtf)
        out[f"fourbar_{name}_rtf_200hz"] = round(statistics.median(rtfs), 2)
    return out


def road_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """Triangle-mesh road: build time of a 200 m x 200 m grid at 1 m and one contact query for four wheels."""
    import numpy as np

    from state_observer.vehicle.road import MeshRoad

    start = time.perf_counter()
    mesh = MeshRoad.grid((0.0, 200.0), (0.0, 200.0), 1.0, lambda x, y: 0.3 * np.sin(x / 4.0) + 0.2 * np.cos(y / 3.0) + 0.01 * x)
    build_s = time.perf_counter() - start
    xy = np.random.default_rng(0).uniform(1.0, 199.0, (4, 2))
    mesh.contact(xy)
    n, best = 2000, float("inf")
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        for _ in range(n):
            mesh.contact(xy)
        best = min(best, (time.perf_counter() - start) / n)
    return {"mesh_road_build_ms_200m_1m": round(build_s * 1e3, 1), "mesh_road_contact_us_4_wheels": round(best * 1e6, 1)}


def product_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """The ROS product on a simulated steady circle (20 s; 3 s with --quick): ``process_rtf``, offline
    processing by ``state-observer process`` (reading the bag, the observer, building and writing every
    output message; model set-up and report excluded), ``node_latency_p99_ms``, the observer node's
    time from taking an IMU message to having published its estimate, with the bag played in real time
    (200 Hz IMU) through rclpy/DDS on localhost in a private domain, and ``node_cold_start_s``
    (:func:`_node_cold_start`).  Without rclpy only the first."""
    import tempfile

    from state_observer.io.record import simulate_command
    from state_observer.process import load_config, process_bag

    duration = 20.0 if sim_seconds >= 10.0 else 3.0
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        bag = Path(tmp) / "circle"
        with open(os.devnull, "w") as quiet:
            if simulate_command("steady_circle", bag, duration_s=duration, seed=0, stdout=quiet, stderr=quiet) != 0:
                raise RuntimeError("bench: could not simulate the bag")
        summary = process_bag(bag, Path(tmp) / "processed", load_config(), report=False)
        out["process_rtf"] = round(summary["timing"]["real-time factor"], 1)
        out.update(_process_whole(bag, Path(tmp) / "whole", summary["input"]["duration_s"]))
        try:
            import rclpy  # noqa: F401

            from state_observer.ros.observer_node import ObserverNode  # noqa: F401
        except ImportError as exc:
            print(f"bench: no rclpy ({exc}): node latency not measured", file=sys.stderr)
            return out
        out.update(_node_latency(bag))
    out["node_cold_start_s"] = _node_cold_start()
    return out


def fleet_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """Fleets of bags (issue 17): four simulated 15 s drives (two of 3 s with --quick) through
    :func:`state_observer.process.process_fleet` without reports, one bag at a time and then on two local worker
    processes, side by side: ``batch_speedup_2_workers`` = wall(one) / wall(two); with Dask's ``distributed``,
    ``batch_speedup_2_workers_dask`` on a two-worker ``LocalCluster`` (its start-up and its workers' first run, which
    imports the package and loads the kernels, not timed: a cluster's workers outlive a fleet)."""
    import tempfile

    from state_observer.io.record import simulate_command
    from state_observer.process import load_config, process_fleet

    count, duration = (4, 15.0) if sim_seconds >= 10.0 else (2, 3.0)
    config = load_config()
    with tempfile.TemporaryDirectory() as tmp:
        bags = [Path(tmp) / "drives" / f"drive_{seed}" for seed in range(count)]
        with open(os.devnull, "w") as quiet:
            for seed, bag in enumerate(bags):
                if simulate_command("steady_circle", bag, duration_s=duration, seed=seed, stdout=quiet, stderr=quiet) != 0:
                    raise RuntimeError("bench: could not simulate the fleet's bags")

        def wall(name: str, **where) -> float:
            start = time.perf_counter()
            rows = process_fleet(bags, Path(tmp) / name, config, report=False, **where)
            if any(r["status"] != "ok" for r in rows):
                raise RuntimeError(f"bench: a bag of the fleet failed: {rows}")
            return time.perf_counter() - start

        one = wall("one", jobs=1)
        out = {"batch_wall_s_1_worker": round(one, 2), "batch_speedup_2_workers": round(one / wall("two", jobs=2), 2)}
        try:
            from distributed import LocalCluster
        except ImportError:
            return out
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None) as cluster:
            wall("dask_warm_up", cluster=cluster.scheduler_address)
            out["batch_speedup_2_workers_dask"] = round(one / wall("dask", cluster=cluster.scheduler_address), 2)
    return out


def _process_whole(bag: Path, out: Path, duration_s: float) -> dict:
    """``process_whole_rtf``: the bag's duration over the wall time of the whole ``state-observer process`` command, a
    new interpreter with imports, model set-up, the report and exit included, as a user runs it; ``process_report_s``
    the report's share."""
    import subprocess

    start = time.perf_counter()
    # run from the output's folder: `python -m` puts the working directory first on sys.path, and from the repository
    # it imported the source tree instead of the installed package, whose kernels the build compiled (the first bench
    # after an edit then measured a minute of numba compiling: process_whole_rtf 0.43 against 3.7)
    result = subprocess.run([sys.executable, "-m", "state_observer.cli", "process", str(Path(bag).resolve()), "--out", str(Path(out).resolve())],
                            capture_output=True, text=True, cwd=Path(out).resolve().parent)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"bench: state-observer process failed: {result.stderr[-2000:]}")
    figures = {"process_whole_rtf": round(duration_s / wall, 2)}
    for line in result.stdout.splitlines():
        if line.startswith("timing: report s = "):
            figures["process_report_s"] = float(line.rsplit("=", 1)[1])
    return figures


def _node_cold_start(timeout_s: float = 900.0) -> float:
    """Seconds from starting ``observer_node`` (its own process, default parameters) to its subscriptions, with an
    empty user cache (``$HOME``, ``$XDG_CACHE_HOME``, ``$STATE_OBSERVER_CACHE`` in a new folder): what a user meets
    at the first start after ``make``, the build having prepared the kernels and the default vehicle."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, XDG_CACHE_HOME=f"{home}/.cache", STATE_OBSERVER_CACHE=f"{home}/.cache/state_observer",
                   ROS_LOG_DIR=f"{home}/ros_log", ROS_DOMAIN_ID=str(150 + (os.getpid() + 40) % 80), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        log = Path(home) / "node.log"
        start = time.monotonic()
        with log.open("w") as sink:  # cwd: not a source tree, so the installed package (with its messages) is imported
            node = subprocess.Popen([sys.executable, "-m", "state_observer.ros.observer_node"], cwd=home, env=env,
                                    stdout=sink, stderr=subprocess.STDOUT)
        try:
            while "listening on" not in log.read_text(errors="replace"):
                if node.poll() is not None or time.monotonic() - start > timeout_s:
                    raise RuntimeError(f"bench: observer_node did not start (exit {node.poll()}): {log.read_text()[-2000:]}")
                time.sleep(0.05)
            return round(time.monotonic() - start, 2)
        finally:
            node.terminate()
            node.wait(30)


def _node_latency(bag: Path) -> dict:
    """Play ``bag`` in real time into an observer node (both in this process, one executor thread for the
    node, the player's own thread); the node's IMU-to-estimate latency statistics."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from state_observer.ros.bag_player import BagPlayer
    from state_observer.ros.observer_node import ObserverNode

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=150 + os.getpid() % 80)
    executor = SingleThreadedExecutor(context=context)
    try:
        node = ObserverNode(context=context)
        executor.add_node(node)
        player = BagPlayer(context=context, parameter_overrides=[
            Parameter("bag", value=str(bag)), Parameter("rate", value=1.0), Parameter("wait_for_subscribers_s", value=10.0),
            Parameter("topics", value=["/imu/data", "/gps/fix", "/gps/vel", "/wheel_states", "/steering_state"])])
        executor.add_node(player)
        while not player.done:
            executor.spin_once(timeout_sec=0.05)
        for _ in range(20):
            executor.spin_once(timeout_sec=0.01)
        stats = node.latency_statistics()
        for n in (player, node):
            executor.remove_node(n)
            n.destroy_node()
    finally:
        executor.shutdown()
        rclpy.shutdown(context=context)
    return {"node_latency_p50_ms": round(stats["p50_ms"], 3), "node_latency_p99_ms": round(stats["p99_ms"], 3),
            "node_latency_max_ms": round(stats["max_ms"], 3), "node_latency_imu_messages": stats["count"]}


def _per_call_us(call: Callable, make_arguments: Callable[[], list], repeats: int) -> float:
    """Best over ``repeats`` (at least 3) of the mean wall time of ``call(*a)`` for a in ``make_arguments()`` (us)."""
    best = float("inf")
    for _ in range(max(repeats, 3)):
        arguments = make_arguments()
        start = time.perf_counter()
        for a in arguments:
            call(*a)
        best = min(best, (time.perf_counter() - start) / len(arguments))
    return best * 1e6


def accel_benchmarks(sim_seconds: float, repeats: int) -> dict:
    """Linear-solver backends (:mod:`state_observer.accel`) on the detailed model (n = 82) and the 14-DOF
    model (n = 14), replaying the inputs of the double lane change (dt = 4 ms, at most 4 s).

    ``gauss_jordan_solve_us_n{n}_{backend}``: one Newton iteration's linear algebra, factor + solve, on a
    tangent matrix the integrator factored (``_resolve_us_``: one more right-hand side with the same
    factors, as the projections do); ``gauss_jordan_c_vs_numpy_speedup`` (detailed n, ``_n14``: reduced):
    numpy time / C-model time.  ``linear_solve_share_{model}``: fraction of the model step's wall time in
    factor + solve (numpy backend; ``_c``: C model).  ``newton_iterations_per_step_{precision}``: the
    detailed model with the C model in each precision (``_refined``: plus float64 iterative refinement, 2
    steps float32, 1 fixed; ``_reduced_``: the 14-DOF model); ``detailed_position_deviation_m_{precision}``:
    largest distance of the chassis origin from the double-precision run."""
    import numpy as np

    from state_observer.accel import BuildError, GaussJordanC, make_backend
    from state_observer.accel.timing import TimedSolver
    from state_observer.paths import default_vehicle_path
    from state_observer.sim.manoeuvres import make_manoeuvre
    from state_observer.sim.run import run, start_on_path
    from state_observer.vehicle.description import load_vehicle
    from state_observer.vehicle.detailed import DetailedVehicle
    from state_observer.vehicle.reduced import ReducedVehicle

    try:
        make_backend("c")
    except BuildError as exc:
        print(f"{exc} (accel figures skipped)", file=sys.stderr)
        return {}
    desc = load_vehicle(default_vehicle_path())
    manoeuvre = make_manoeuvre("double_lane_change", duration_s=min(4.0, sim_seconds))
    detailed = DetailedVehicle(desc)
    inputs: list = []
    for _ in run(detailed, manoeuvre, inputs_log=inputs):
        pass
    reduced = ReducedVehicle(desc, detailed=DetailedVehicle(desc))

    def replay(vehicle, backend):
        """Wall time (s), iterations per step and chassis origins (m) of the replayed inputs with ``backend``."""
        vehicle.solver_options["linear_solver"] = backend
        start_on_path(vehicle, manoeuvre)
        positions = []
        begin = time.perf_counter()
        for applied in inputs:
            vehicle.set_inputs(applied.steering_wheel_rad, applied.drive_torque_n_m, applied.brake_torque_n_m, steering_rate_rad_s=applied.steering_rate_rad_s)
            if not vehicle.step().success:
                raise RuntimeError(f"bench: the model failed with the {backend.name} backend at t = {vehicle.solver.t:.3f} s")
            positions.append(vehicle.solver.q[:3].copy())
        wall = time.perf_counter() - begin
        return wall, vehicle.solver.n_iterations / vehicle.solver.n_steps, np.array(positions)

    out = {}
    systems = {}
    for model, vehicle in (("detailed", detailed), ("reduced", reduced)):
        recorder = TimedSolver(make_backend("numpy"), keep=400)
        replay(vehicle, recorder)  # warm-up, and the systems this model's integrator factors
        systems[model] = recorder.systems[len(recorder.systems) // 2]
        for backend_name, suffix in (("numpy", ""), ("c", "_c")):
            shares = []
            for _ in range(max(repeats, 1)):
                timed = TimedSolver(make_backend(backend_name))
                wall = replay(vehicle, timed)[0]
                shares.append(timed.seconds / wall)
            out[f"linear_solve_share_{model}{suffix}"] = round(statistics.median(shares), 3)
    for model, (A, rhs) in systems.items():
        n = A.shape[0]
        per = {}
        for backend_name in ("numpy", "c", "c-float32", "c-fixed"):
            backend = make_backend(backend_name, n)
            count = 200 if n > 50 else 1000
            per[backend_name] = _per_call_us(lambda a: backend.solve(backend.factor(a), rhs[0]), lambda: [(A.copy(),) for _ in range(count)], repeats)
            handle = backend.factor(A.copy())
            backend.solve(handle, rhs[0])
            key = backend_name.replace("-", "_")
            out[f"gauss_jordan_solve_us_n{n}_{key}"] = round(per[backend_name], 1)
            out[f"gauss_jordan_resolve_us_n{n}_{key}"] = round(_per_call_us(lambda: backend.solve(handle, rhs[-1]), lambda: [()] * 1000, repeats), 2)
        out["gauss_jordan_c_vs_numpy_speedup" + ("" if model == "detailed" else f"_n{n}")] = round(per["numpy"] / per["c"], 3)
    precisions = (("double", lambda: make_backend("c")), ("float32", lambda: make_backend("c-float32")), ("fixed", lambda: make_backend("c-fixed")),
                  ("float32_refined", lambda: GaussJordanC("float32", refine=2)), ("fixed_refined", lambda: GaussJordanC("fixed", refine=1)))
    reference = None
    for label, make in precisions:
        try:
            _, iterations, positions = replay(detailed, make())
        except RuntimeError as exc:
            print(f"{exc} (precision {label}: no figure)", file=sys.stderr)
            continue
        out[f"newton_iterations_per_step_{label}"] = round(iterations, 3)
        if reference is None:
            reference = positions
        else:
            out[f"detailed_position_deviation_m_{label}"] = float(f"{np.linalg.norm(positions - reference, axis=1).max():.3g}")
        if label in ("double", "float32", "fixed"):
            out[f"newton_iterations_per_step_reduced_{label}"] = round(replay(reduced, make())[1], 3)
    return out


BENCHMARKS: dict[str, Callable[[float, int], dict]] = {"linkages": linkage_benchmarks, "detailed_vehicle": detailed_vehicle_benchmarks,
                                                       "observers": observer_benchmarks, "linkage_filters": linkage_filter_benchmarks,
                                                       "road": road_benchmarks, "accel": accel_benchmarks, "product": product_benchmarks,
                                                       "fleet": fleet_benchmarks}


def run(quick: bool = False) -> dict:
    sim_seconds, repeats = (1.0, 1) if quick else (12.0, 3)  # each benchmark caps it to its own run
    figures = {}
    for name, bench in BENCHMARKS.items():
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        figures.update(bench(sim_seconds, repeats))
    return figures


def print_table(figures: dict) -> None:
    width = max(len(k) for k in figures)
    print(f"{'figure':<{width}}  value")
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")


def write_json(path: Path, figures: dict) -> None:
    """Merge ``figures`` into the flat JSON object at ``path`` (written atomically)."""
    merged = {}
    if path.exists():
        try:
            merged = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SystemExit(f"state-observer bench: {path}: not valid JSON ({exc}); move it away and rerun") from None
        if not isinstance(merged, dict):
            raise SystemExit(f"state-observer bench: {path}: expected one JSON object of named numbers")
    merged.update(figures)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="state-observer bench", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="merge the figures into this JSON file")
    parser.add_argument("--quick", action="store_true", help="1 s simulations, one repeat (smoke test)")
    args = parser.parse_args(argv)
    figures = run(quick=args.quick)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print_table(figures)
    if args.json:
        write_json(Path(args.json), figures)
        print(f"bench: figures written to {args.json}", file=sys.stderr)
    return 0

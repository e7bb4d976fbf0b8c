"""Recording a simulated run into a rosbag2: the body of ``state-observer simulate``.

``record_run`` writes what ``state_observer.sim.run.simulate`` yields: the truth topics every
model step and every sensor sample at its receive time, with ``/tf`` (odom -> :data:`TRUTH_BASE_FRAME`, the truth's
pose, every model step) and ``/tf_static`` (base_link -> the IMU and the GNSS antenna of the vehicle file, once).
``simulate_command`` adds argument checks, a progress bar on stderr, the one-line summary on stdout and one-line
errors, and returns the exit code. The partial bag is kept (and readable) on any failure or interrupt.
"""
from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable

from state_observer.io.bag import BAG_VERSION, DEFAULT_STORAGE, BagWriter, IoError
from state_observer.io.convert import TF_MESSAGE, TF_STATIC_TOPIC, TF_TOPIC, mount_transforms, tf_msg, truth_stamp_ns
from state_observer.progress import TimeProgress

if TYPE_CHECKING:
    from state_observer.vehicle.state import VehicleState

PROG = "state-observer simulate"
# Simulated bags start at 2026-01-01T00:00:00Z, not at ROS time 0 (which tf2 and rviz read as "latest").
DEFAULT_START_TIME_S = 1767225600.0


# The truth's base frame on /tf: not base_link, so that a simulated bag played beside the observer node (which
# broadcasts odom -> base_link) shows the truth as a second car instead of fighting over one transform.
TRUTH_BASE_FRAME = "truth/base_link"
DATUM_KEY = "state_observer.datum"  # custom_data: "latitude_deg longitude_deg altitude_m" of the truth's ENU frame


def record_run(run: Iterable[tuple[VehicleState, list]], writer: BagWriter,
               truth_epoch_ns: int = 0, on_step: Callable[[float], None] | None = None, mounts=None) -> float:
    """Write each step of ``run`` to an open ``writer``; returns the last simulated time (s).

    ``/tf`` holds odom -> :data:`TRUTH_BASE_FRAME` at every truth step; with ``mounts`` (a
    :class:`~state_observer.sensors.mounts.SensorMounts`), ``/tf_static`` holds base_link -> the sensors, with the first step.

    Truth is stamped and logged at ``truth_epoch_ns + round(t_s * 1e9)``; sample records (which
    sim/sensors.py stamps from the same origin, t = 0) are shifted by the same epoch and logged at
    their ``receive_ns``.
    Samples are held back until the truth time reaches their receive time, so the bag is
    written in log-time order; on a failure the held-back samples are still written.
    """
    pending: list[tuple[int, int, Any]] = []  # heap of (receive_ns, sequence, sample)
    sequence = itertools.count()
    t_s = math.nan

    def flush(until_ns: int | None) -> None:
        while pending and (until_ns is None or pending[0][0] <= until_ns):
            writer.write_sample(heapq.heappop(pending)[2])

    store, frames = writer.store, writer.truth_frames
    try:
        for truth, samples in run:
            t_s = float(truth.t_s)
            stamp_ns = truth_stamp_ns(truth, truth_epoch_ns)
            if mounts is not None:  # with the first step: a run that fails before it leaves no bag
                writer.write(TF_STATIC_TOPIC, TF_MESSAGE, tf_msg(mount_transforms(mounts, stamp_ns, frames.base), store), stamp_ns)
                mounts = None
            writer.write_truth(truth, truth_epoch_ns)
            writer.write(TF_TOPIC, TF_MESSAGE, tf_msg([(stamp_ns, frames.odom, TRUTH_BASE_FRAME, truth.position_enu_m, truth.orientation_wxyz)], store), stamp_ns)
            for sample in samples:
                if truth_epoch_ns:
                    sample = sample._replace(stamp_ns=sample.stamp_ns + truth_epoch_ns, receive_ns=sample.receive_ns + truth_epoch_ns)
                heapq.heappush(pending, (int(sample.receive_ns), next(sequence), sample))
            flush(truth_stamp_ns(truth, truth_epoch_ns))
            if on_step is not None:
                on_step(t_s)
    except BaseException:
        with contextlib.suppress(Exception):
            flush(None)
        raise
    flush(None)
    return t_s


class _Terminated(BaseException):
    """SIGTERM during recording: unwinds like Ctrl-C so that the bag is closed."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def simulate_command(manoeuvre: str, out: str | Path, *, vehicle: str | Path | None = None,
                     sensors: str | Path | None = None, duration_s: float | None = None,
                     seed: int = 0, force: bool = False, storage: str = DEFAULT_STORAGE, bag_version: int = BAG_VERSION,
                     start_time_s: float = DEFAULT_START_TIME_S,
                     stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Simulate ``manoeuvre`` and record it to the bag ``out``; the process exit code.

    0 on success (summary on stdout); 1 on a failure, 2 on a bad argument, 130/143 on
    SIGINT/SIGTERM, each with one line on stderr. A partial bag is closed and kept.
    Set STATE_OBSERVER_TRACEBACK=1 to also print the traceback of a failure.
    """
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr

    def fail(message: str, code: int = 1) -> int:
        print(f"{PROG}: error: {message}", file=stderr)
        return code

    try:
        from state_observer.sim.run import MANOEUVRES, simulate
    except ImportError as exc:
        return fail(f"the simulator (state_observer.sim.run) is not available: {exc}")
    if manoeuvre not in MANOEUVRES:
        return fail(f"unknown manoeuvre {manoeuvre!r}; valid: {', '.join(MANOEUVRES)}", 2)
    for what, path in (("vehicle", vehicle), ("sensors", sensors)):
        if path is not None and not Path(path).is_file():
            return fail(f"{path}: no such {what} file", 2)
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        return fail(f"--duration must be a positive number of seconds, got {duration_s}", 2)

    from state_observer import __version__

    provenance = {
        "state_observer.version": __version__,
        "state_observer.command": "simulate",
        "state_observer.manoeuvre": manoeuvre,
        "state_observer.vehicle": str(vehicle) if vehicle is not None else "default",
        "state_observer.sensors": str(sensors) if sensors is not None else "default",
        "state_observer.duration_s": "default" if duration_s is None else repr(float(duration_s)),
        "state_observer.seed": str(seed),
        "state_observer.start_time_s": repr(float(start_time_s)),
    }
    try:  # the local ENU origin of the /truth topics, so that estimates can be compared in the same frame
        from state_observer.paths import default_sensors_path
        from state_observer.sim.sensors import load_sensor_config

        sensor_config = load_sensor_config(sensors or default_sensors_path())
        datum = sensor_config.gnss_fix.datum
        provenance[DATUM_KEY] = f"{datum.latitude_deg!r} {datum.longitude_deg!r} {datum.altitude_m!r}"
    except (OSError, ValueError) as exc:
        return fail(f"{sensors or 'default sensors'}: {exc}", 2)
    try:  # where the sensors sit, for /tf_static (the frames the sensor messages name)
        from state_observer.paths import default_vehicle_path
        from state_observer.sensors.mounts import mounts_from_vehicle
        from state_observer.vehicle.description import load_vehicle

        mounts = mounts_from_vehicle(load_vehicle(vehicle or default_vehicle_path()))
        mounts = dataclasses.replace(mounts, imu_frame_id=sensor_config.imu.frame_id or mounts.imu_frame_id,
                                     gnss_frame_id=sensor_config.gnss_fix.frame_id or mounts.gnss_frame_id)
    except (OSError, ValueError) as exc:
        return fail(f"{vehicle or 'default vehicle'}: {exc}", 2)
    try:
        writer = BagWriter(out, overwrite=force, storage=storage, custom_data=provenance, version=bag_version)
    except IoError as exc:
        return fail(str(exc))

    progress = TimeProgress(stderr, f"simulate {manoeuvre}")
    last_t = [math.nan]
    start = time.monotonic()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    code = 0
    message = ""
    try:
        with writer:
            run = simulate(manoeuvre, vehicle_path=vehicle, sensors_path=sensors,
                           duration_s=duration_s, seed=seed, progress=progress)
            record_run(run, writer, truth_epoch_ns=int(round(start_time_s * 1e9)), on_step=lambda t: last_t.__setitem__(0, t), mounts=mounts)
    except KeyboardInterrupt:
        code, message = 130, "interrupted"
    except _Terminated:
        code, message = 143, "terminated"
    except Exception as exc:  # noqa: BLE001 - the command's one-line report of any failure
        if os.environ.get("STATE_OBSERVER_TRACEBACK") == "1":
            import traceback

            traceback.print_exc(file=stderr)
        code, message = 1, (str(exc) if isinstance(exc, IoError) else f"{type(exc).__name__}: {exc}")
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        progress.finish()
    wall_s = time.monotonic() - start
    t_s = last_t[0]

    if code:
        where = f" at t = {t_s:.3f} s" if math.isfinite(t_s) else ""
        if writer.message_count == 0 and writer.path.exists():
            shutil.rmtree(writer.path, ignore_errors=True)  # our own empty bag: nothing to keep
            kept = "; no bag written"
        else:
            kept = f"; partial bag kept: {writer.path} ({writer.message_count} messages)"
        print(f"{PROG}: {'error: ' if code == 1 else ''}{message}{where}{kept}", file=stderr)
        return code

    counts = writer.counts
    rtf = t_s / wall_s if wall_s > 0 and math.isfinite(t_s) else math.nan
    per_topic = ", ".join(f"{topic} {count}" for topic, count in counts.items())
    print(f"wrote {writer.path} ({storage}): {len(counts)} topics, {writer.message_count} messages, "
          f"{t_s:.3f} s simulated in {wall_s:.1f} s (real-time factor {rtf:.2f}); {per_topic}",
          file=stdout)
    return 0

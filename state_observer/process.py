"""``state-observer process BAG``: the observer node's code path offline, as fast as possible.

Reads the sensor topics of a rosbag2 in log-time order (the order a recorder received them), feeds
them through the same :class:`~state_observer.io.pipeline.ObserverPipeline` as the node, and writes into
the output directory:

- ``bag/``: a rosbag2 with every message the node would publish (logged at the receive time of the
  sensor message that produced it) and its diagnostics once per second of sensor time;
- ``estimate.csv``, ``gnss.csv``, ``innovations.csv`` (+ ``truth.csv`` when the bag has the simulator's
  ``/truth/...`` topics), ``summary.json`` and ``report.html`` with its PNG plots (:mod:`state_observer.report`).

One evaluation window, ``t >= min(skip_s, a third of the run)`` (summary "evaluation window"), serves the
summary and the whole report.  With ground truth in the bag (truth sampled at the estimate's instants), the
summary holds the accuracy in that window (the harness' metrics, :func:`state_observer.sim.evaluate.error_metrics`:
position, heading, sideslip and yaw-rate RMSE, tire-force RMSE per component over the peak truth value, mean
mass and friction errors) and the same metrics of three baselines on the same samples: the observer's model run
open loop (:class:`~state_observer.estimation.online.OpenLoop`, stepped alongside; only with the report), the
GNSS fixes alone and zero sideslip.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import struct
import sys
import time
from array import array
from pathlib import Path

import numpy as np

from .conventions import WHEELS, sideslip_rad, yaw_rad
from .errors import StateObserverError
from .estimation.intake import StreamLoss, stream_losses
from .estimation.online import OpenLoop
from .estimation.smoother import smooth_since_start
from .io.bag import BAG_VERSION, DEFAULT_STORAGE, BagWriter, IoError, bag_info, custom_data, read_messages, read_raw
from .io.convert import OUTPUT_TOPICS, SENSOR_MSGTYPES, TF_MESSAGE, TF_STATIC_TOPIC, TF_TOPIC, typestore
from .io.record import DATUM_KEY
from .io.params import ObserverConfig, load_config
from .io.pipeline import ObserverPipeline, loss_line

_NS = 1_000_000_000
REPORT_PERIOD_NS = 20_000_000  # one report row every 20 ms of sensor time (when tire forces are published: with each)
FORCE_COLUMNS = [f"f{c}_{w}_n" for c in "xyz" for w in WHEELS]
SIGMA_COLUMNS = [f"f{c}_sigma_{w}_n" for c in "xyz" for w in WHEELS]
ROW_COLUMNS = ["t_s", "x_m", "y_m", "z_m", "roll_rad", "pitch_rad", "yaw_rad", "speed_m_s", "yaw_rate_rad_s", "sideslip_rad",
               *FORCE_COLUMNS, "mass_kg", "friction"]
ESTIMATE_COLUMNS = [*ROW_COLUMNS, "x_sigma_m", "y_sigma_m", "yaw_sigma_rad", *SIGMA_COLUMNS, "mass_sigma_kg", "friction_sigma",
                    "sideslip_sigma_rad"]
TRUTH_TOPICS = ("/truth/odometry", "/truth/tire_forces", "/truth/parameters")


def _angles(q_wxyz) -> tuple[float, float, float]:
    """ZYX roll, pitch, yaw (rad) of a quaternion (w, x, y, z)."""
    w, x, y, z = q_wxyz
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    return roll, pitch, yaw_rad(q_wxyz)


def _row(t_s, position, q_wxyz, v_body, yaw_rate, forces, mass, friction) -> list:
    roll, pitch, yaw = _angles(q_wxyz)
    speed = math.hypot(v_body[0], v_body[1])
    sideslip = sideslip_rad(float(v_body[0]), float(v_body[1]))
    return [t_s, *position, roll, pitch, yaw, speed, yaw_rate, sideslip, *np.asarray(forces).T.ravel(), mass, friction]


def _state_row(t_ns: int, s, t0_ns: int) -> list:
    """Report row (ROW_COLUMNS) of a model state (VehicleState) at ``t_ns``."""
    from .conventions import quaternion_to_matrix

    v_body = quaternion_to_matrix(s.orientation_wxyz).T @ s.velocity_enu_m_s
    return _row((t_ns - t0_ns) * 1e-9, s.position_enu_m, s.orientation_wxyz, v_body, s.angular_velocity_body_rad_s[2], s.tire_force_n,
                s.mass_kg, s.friction_coefficient)


def _estimate_row(e, t0_ns: int) -> list:
    from .conventions import quaternion_to_matrix

    row = _state_row(e.stamp_ns, e.state, t0_ns)
    v_body = quaternion_to_matrix(e.state.orientation_wxyz).T @ e.state.velocity_enu_m_s
    P = e.pose_covariance
    return row + [math.sqrt(P[0, 0]), math.sqrt(P[1, 1]), math.sqrt(P[5, 5]), *np.asarray(e.tire_force_sigma_n).T.ravel(),
                  e.mass_sigma_kg, e.friction_sigma, _sideslip_sigma(v_body, e.twist_covariance)]


def _sideslip_sigma(v_body, twist_covariance) -> float:
    """1-sigma (rad) of beta = atan2(v_y, v_x) from the base_link velocity covariance, to first order:
    J C J^T with J = (-v_y, v_x) / (v_x^2 + v_y^2); NaN below 0.5 m/s, where beta is set to 0."""
    vx, vy = float(v_body[0]), float(v_body[1])
    s2 = vx * vx + vy * vy
    if s2 <= 0.25:
        return float("nan")
    C = twist_covariance
    return math.sqrt(max(vy * vy * C[0, 0] - 2 * vx * vy * C[0, 1] + vx * vx * C[1, 1], 0.0)) / s2


_CDR_STAMP = struct.Struct("<iI")  # builtin_interfaces/Time at the start of a stamped message's payload


def truth_rows(bag: Path, topics_in_bag, t0_ns: int, spool: Path, at_s=None) -> dict | None:
    """Report columns of the simulator's ``/truth/...`` topics, or None without them: every 20 ms, or with
    ``at_s`` (s after ``t0_ns``, sorted) the first truth stamped at or after each of those instants (the estimate's
    times: truth and estimate on the same samples).  The rows go through the file ``spool`` (:class:`RowSpool`).
    The messages are read raw and only those of a row are decoded (the odometry's stamp is read from its CDR header);
    ``topics_in_bag``: the bag's topics (:func:`bag_info`)."""
    topics = TRUTH_TOPICS
    wanted = None if at_s is None else t0_ns + np.round(np.asarray(at_s, dtype=float) * 1e9).astype(np.int64)
    k = 0
    if not all(t in topics_in_bag for t in topics):
        return None
    store = typestore()
    latest: dict[str, tuple[str, bytes]] = {}
    rows = RowSpool(spool, ROW_COLUMNS)
    next_ns = None
    for topic, msgtype, _, raw in read_raw(bag, topics):
        latest[topic] = (msgtype, raw)
        if topic != "/truth/parameters" or len(latest) < 3:
            continue
        sec, nanosec = _CDR_STAMP.unpack_from(latest["/truth/odometry"][1], 4)  # after the encapsulation header
        stamp = sec * _NS + nanosec
        if wanted is not None:
            if k == len(wanted) or stamp < wanted[k] - 1000:  # 1 us: rounding of the seconds
                continue
            while k < len(wanted) and wanted[k] <= stamp + 1000:
                k += 1
        elif next_ns is not None and stamp < next_ns:
            continue
        else:
            next_ns = stamp + REPORT_PERIOD_NS
        odo, tires, par = (store.deserialize_cdr(latest[t][1], latest[t][0]) for t in ("/truth/odometry", "/truth/tire_forces", "/truth/parameters"))
        pose, twist = odo.pose.pose, odo.twist.twist
        forces = np.array([[w.fx_n, w.fy_n, w.fz_n] for w in tires.wheels])
        rows.append(_row((stamp - t0_ns) * 1e-9, (pose.position.x, pose.position.y, pose.position.z),
                         (pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z),
                         (twist.linear.x, twist.linear.y), twist.angular.z, forces, par.mass_kg, par.friction_coefficient))
    return rows.columns() if len(rows) else None


def smoothed_columns(estimate: dict, observer, t0_ns: int) -> dict:
    """The offline smoothed track (:func:`~state_observer.estimation.smoother.smooth_since_start`: every fix, those after
    each instant too) as report columns ``x_smoothed_m``, ``y_smoothed_m``, ``xy_smoothed_sigma_m`` (the larger axis'
    1-sigma); NaN before the observer's latest start (a reset breaks the track)."""
    track = smooth_since_start(estimate["t_s"], np.column_stack([estimate["x_m"], estimate["y_m"]]), estimate["yaw_rad"],
                               np.column_stack([estimate["x_sigma_m"], estimate["y_sigma_m"]]), observer.gnss_log,
                               observer.mounts.gnss_position_m, None if observer.started_from is None else observer.started_from[0], t0_ns)
    return dict(zip(("x_smoothed_m", "y_smoothed_m", "xy_smoothed_sigma_m"), track.T))


def smoothed_accuracy(estimate: dict, truth: dict, skip_s: float) -> dict:
    """``position_smoothed_rmse_m``: the smoothed track's horizontal RMSE after ``skip_s`` (truth at the nearest earlier
    instant; :func:`state_observer.sim.evaluate.error_metrics`), where it has one."""
    from .sim.evaluate import error_metrics

    t = np.asarray(estimate["t_s"], dtype=float)
    smoothed = np.column_stack([estimate["x_smoothed_m"], estimate["y_smoothed_m"]])
    has = np.isfinite(smoothed).all(axis=1) & (t >= skip_s)
    if not has.any():
        return {}
    k = _earlier(truth["t_s"], t[has])
    true_xy = np.column_stack([truth["x_m"][k], truth["y_m"][k]])
    return {"position_smoothed_rmse_m": error_metrics(t[has], {"position": true_xy}, {"position": smoothed[has]}, skip_s)["position_rmse_m"]}


def _columns(rows: list, names: list) -> dict:
    data = np.asarray(rows, dtype=float).reshape(-1, len(names))
    return {name: data[:, i] for i, name in enumerate(names)}


class RowSpool:
    """Rows of floats written to ``path`` as they come, so that memory stays flat however long the bag (issue 17:
    lists of rows grew by ~0.3 MiB per second of bag); :meth:`columns` maps the file back, an array per column."""

    CHUNK_VALUES = 1 << 16

    def __init__(self, path: Path, names: list[str]):
        self.path, self.names, self.n = path, list(names), 0
        self._buffer = array("d")
        self._file = path.open("wb")

    def __len__(self) -> int:
        return self.n

    def append(self, row) -> None:
        self._buffer.extend(row)
        self.n += 1
        if len(self._buffer) >= self.CHUNK_VALUES:
            self._flush()

    def _flush(self) -> None:
        self._buffer.tofile(self._file)
        del self._buffer[:]

    def columns(self) -> dict:
        """{name: (n,) array}, read-only views of the file (the spool takes no more rows)."""
        if not self._file.closed:
            self._flush()
            self._file.close()
        shape = (self.n, len(self.names))
        data = np.memmap(self.path, dtype=np.float64, mode="r", shape=shape) if self.n else np.zeros(shape)
        return {name: data[:, i] for i, name in enumerate(self.names)}


def _arrays(columns: dict, rows) -> dict:
    """The arrays of :func:`state_observer.sim.evaluate.error_metrics` from report columns (rows: index or slice)."""
    return dict(position=np.column_stack([columns["x_m"][rows], columns["y_m"][rows]]), yaw=columns["yaw_rad"][rows],
                sideslip=columns["sideslip_rad"][rows], yaw_rate=columns["yaw_rate_rad_s"][rows], mass=columns["mass_kg"][rows],
                friction=columns["friction"][rows],
                tire_force=np.stack([[columns[f"f{c}_{w}_n"][rows] for c in "xyz"] for w in WHEELS]).transpose(2, 0, 1))


def _earlier(t_ref: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the latest t_ref <= t (+1 us) for each t (the first one before it)."""
    return np.clip(np.searchsorted(t_ref, t + 1e-6) - 1, 0, len(t_ref) - 1)


def accuracy(estimate: dict, truth: dict, skip_s: float) -> dict:
    """The harness metrics (:func:`state_observer.sim.evaluate.error_metrics`) of report columns after ``skip_s``
    (mass and friction too: one window); truth taken at the nearest earlier instant."""
    from .sim.evaluate import error_metrics

    t = estimate["t_s"]
    if not (t >= skip_s).any():
        return {}
    out = error_metrics(t, _arrays(truth, _earlier(truth["t_s"], t)), _arrays(estimate, slice(None)), skip_s, final_s=None)
    out["evaluated_after_s"] = float(skip_s)
    return out


def baselines(estimate: dict, truth: dict, gnss: dict, open_loop: dict | None, gnss_lever_arm_m, skip_s: float) -> dict:
    """The same metrics as :func:`accuracy`, on the estimate's samples after ``skip_s``, of three baselines:
    ``open loop`` (report columns of :class:`~state_observer.estimation.online.OpenLoop`, taken at the nearest
    earlier instant), ``zero sideslip`` (beta = 0) and ``GNSS alone`` (each fix against the true antenna position,
    base_link + R(roll, pitch, yaw) lever arm, fixes after ``skip_s``)."""
    from .sim.evaluate import error_metrics

    t = estimate["t_s"]
    if not (t >= skip_s).any():
        return {}
    true_at_t = _arrays(truth, _earlier(truth["t_s"], t))
    out: dict = {}
    if open_loop is not None and len(open_loop["t_s"]):
        ran = t <= open_loop["t_s"][-1] + 0.1  # a model that failed: its metrics over the part it ran
        out["open loop"] = {}
        if (t[ran] >= skip_s).any():
            ol = _arrays(open_loop, _earlier(open_loop["t_s"], t[ran]))
            out["open loop"] = error_metrics(t[ran], {k: v[ran] for k, v in true_at_t.items()}, ol, skip_s, final_s=None)
    out["zero sideslip"] = error_metrics(t, {"sideslip": true_at_t["sideslip"]}, {"sideslip": np.zeros(len(t))}, skip_s)
    tg = np.asarray(gnss.get("t_s", []), dtype=float)
    if (tg >= skip_s).any():
        k = _earlier(truth["t_s"], tg)
        r, p, y = truth["roll_rad"][k], truth["pitch_rad"][k], truth["yaw_rad"][k]
        a = np.asarray(gnss_lever_arm_m, dtype=float)
        cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
        antenna = np.column_stack([  # rows x, y of Rz(yaw) Ry(pitch) Rx(roll) a, added to base_link
            truth["x_m"][k] + cy * cp * a[0] + (cy * sp * sr - sy * cr) * a[1] + (cy * sp * cr + sy * sr) * a[2],
            truth["y_m"][k] + sy * cp * a[0] + (sy * sp * sr + cy * cr) * a[1] + (sy * sp * cr - cy * sr) * a[2]])
        fixes = np.column_stack([gnss["x_m"], gnss["y_m"]])
        out["GNSS alone"] = error_metrics(tg, {"position": antenna}, {"position": fixes}, skip_s)
    return out


def _refuse_occupied(out_dir: Path, overwrite: bool) -> None:
    """``IoError`` unless ``out_dir`` is absent, an empty folder, or (``overwrite``) any folder."""
    if out_dir.exists() and (not out_dir.is_dir() or (not overwrite and any(out_dir.iterdir()))):
        raise IoError(f"{out_dir}: exists and is not an empty folder; not overwriting it (use --force)" if out_dir.is_dir()
                      else f"{out_dir}: exists and is not a folder")


def process_bag(bag: str | Path, out_dir: str | Path, config: ObserverConfig | None = None, *, overwrite: bool = False,
                report: bool = True, skip_s: float = 20.0, progress=None, say=None, storage: str = DEFAULT_STORAGE,
                bag_version: int = BAG_VERSION, report_workers: int | None = None) -> dict:
    """Run the observer over ``bag`` and write ``out_dir`` (module docstring); returns the summary.
    ``progress(t_s, duration_s)`` follows the bag; ``say(text)`` is told each other phase (the command prints them);
    with ``say`` the kernels are also loaded (or, on a fresh install, compiled) before the bag is read.

    The run is written into ``OUT.partial`` beside ``out_dir`` and replaces ``out_dir`` (with ``overwrite``, an
    earlier run there) only when it has completed; a failed run leaves ``OUT.partial`` as it got (its bag readable)
    and ``out_dir`` untouched. The output folder may not be, hold or lie inside the input bag.  The report's figures are
    drawn by ``report_workers`` processes started with the bag's loop (:class:`~state_observer.report.pool.FigurePool`;
    default two where more than one CPU is free, 0: in this process)."""
    bag, out_dir = Path(bag), Path(out_dir)
    config = config or load_config()
    info = bag_info(bag)
    wanted = {kind: topic for kind, topic in config.topics.items() if topic in info.topics}
    if not wanted:
        raise IoError(f"{bag}: none of the sensor topics {', '.join(config.topics.values())} "
                      f"(topics: {', '.join(sorted(info.topics)) or 'none'})")
    for kind, topic in wanted.items():
        if info.topics[topic][0] != SENSOR_MSGTYPES[kind]:
            raise IoError(f"{bag}: topic {topic} has type {info.topics[topic][0]}, expected {SENSOR_MSGTYPES[kind]}")
    source, target = bag.resolve(), out_dir.resolve()
    if target == source or source in target.parents or target in source.parents:
        raise IoError(f"{out_dir}: the output folder must not be, hold or lie inside the input bag {bag}; choose another --out")
    _refuse_occupied(out_dir, overwrite)
    stage = target.with_name(target.name + ".partial")
    if stage.exists():
        shutil.rmtree(stage)  # what a failed earlier run left
    stage.mkdir(parents=True)
    from .report.pool import FigurePool

    pool = FigurePool.if_useful(report_workers, start=False) if report else None  # started once the model is built
    try:
        summary = _process_into(bag, stage, target, info, wanted, config, report=report, skip_s=skip_s, progress=progress, say=say,
                                storage=storage, bag_version=bag_version, figure_pool=pool)
    finally:
        if pool is not None:
            pool.close()
    if target.exists():
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
        stage.rename(target)
        shutil.rmtree(old)
    else:
        stage.rename(target)
    return summary


def _process_into(bag: Path, out_dir: Path, final_dir: Path, info, wanted: dict, config: ObserverConfig, *, report: bool,
                  skip_s: float, progress, say, storage: str = DEFAULT_STORAGE, bag_version: int = BAG_VERSION, figure_pool=None) -> dict:
    """The body of :func:`process_bag`: the run written into the (new, empty) folder ``out_dir``, which becomes
    ``final_dir`` when it has completed (the summary and report name that)."""
    datum_note = "configured" if config.settings.datum is not None else "first good fix"
    bag_datum = custom_data(bag).get(DATUM_KEY)
    if config.settings.datum is None and bag_datum:  # a simulated bag: estimate in its truth's frame
        config = dataclasses.replace(config, settings=dataclasses.replace(config.settings, datum=tuple(float(v) for v in bag_datum.split())))
        datum_note = f"from the bag's metadata ({DATUM_KEY}: {bag_datum})"
    build_start = time.perf_counter()
    if say is not None:
        say(f"building the observer model of {config.vehicle_file or 'the default vehicle'} (a new vehicle's suspension "
            "kinematics are swept once: ~20 s)")
    pipeline = ObserverPipeline(config)
    observer = pipeline.observer
    if say is not None:
        say("loading the compiled kernels (compiling them takes ~1-2 min once after an install without `state-observer prepare`)")
        observer.warm_up()
    observer.record_gnss = True
    build_s = time.perf_counter() - build_start
    if figure_pool is not None:
        figure_pool.start()  # its workers import matplotlib while the bag runs
    duration_s, first_ns = info.duration_s, info.start_ns
    spools = out_dir / "spool"  # rows on disk while the bag runs, removed at the end
    spools.mkdir()
    rows = RowSpool(spools / "estimate", ESTIMATE_COLUMNS)
    innovations = RowSpool(spools / "innovations", ["t_s", "sensor_index", "nis", "accepted"])
    stats = observer.filter.stats  # per sensor; the filter keeps this dict for its lifetime
    sensor_names = list(stats)
    seen = {name: 0 for name in sensor_names}
    checked_t_ns = None
    next_row_ns = next_diag_ns = None
    rows_with_tire_forces = 20.0 <= config.rates["tire_forces"] <= 100.0  # then a row with each (the same estimate)
    open_loop_rows = RowSpool(spools / "open_loop", ROW_COLUMNS)  # the report's baseline: the observer's model without corrections (bags with truth)
    open_loop = (OpenLoop(observer, lambda t_ns, x: open_loop_rows.append(_state_row(t_ns, x, first_ns)), REPORT_PERIOD_NS)
                 if report and all(t in info.topics for t in TRUTH_TOPICS) else None)  # not in bench timings
    n_in = 0
    static_tf_due = config.publish_tf  # /tf_static once, with the first outputs (the observer has started)
    start = time.perf_counter()
    with BagWriter(out_dir / "bag", overwrite=True, storage=storage, version=bag_version, custom_data={"source": str(bag), "tool": "state-observer process"}) as writer:
        kinds = {topic: kind for kind, topic in wanted.items()}
        for topic, log_ns, msg in read_messages(bag, kinds):
            n_in += 1
            sample = pipeline.sample(kinds[topic], msg, log_ns)
            if sample is None:
                continue
            row_due = False
            for out in pipeline.feed(sample):
                if static_tf_due:
                    static_tf_due = False
                    writer.write_raw(TF_STATIC_TOPIC, TF_MESSAGE, pipeline.tf_static(out.stamp_ns), log_ns)
                writer.write_raw(OUTPUT_TOPICS[out.kind], out.msgtype, out.cdr(pipeline.store), log_ns)
                if out.kind == "odometry" and config.publish_tf:  # odom -> base_link with every odometry (/tf)
                    writer.write_raw(TF_TOPIC, TF_MESSAGE, pipeline.tf(out.stamp_ns), log_ns)
                row_due |= out.kind == "tire_forces"
            if open_loop is not None:
                open_loop.feed(sample)
            if not observer.started:
                continue
            t_ns = observer.t_ns
            if t_ns != checked_t_ns:  # updates happen only in model steps
                checked_t_ns = t_ns
                for i, name in enumerate(sensor_names):
                    st = stats[name]
                    n = st.accepted + st.rejected
                    if n != seen[name]:
                        seen[name] = n
                        if st.dof and math.isfinite(st.last_nis):
                            innovations.append([(t_ns - first_ns) * 1e-9, i, st.last_nis, float(st.consecutive_rejections == 0)])
            if (row_due if rows_with_tire_forces else next_row_ns is None or t_ns >= next_row_ns):
                next_row_ns = t_ns + REPORT_PERIOD_NS
                rows.append(_estimate_row(observer.estimate(), first_ns))
            if next_diag_ns is None or t_ns >= next_diag_ns:
                next_diag_ns = t_ns + _NS
                out = pipeline.diagnostics(t_ns, now_ns=log_ns)  # silence is judged on receive (log) times
                writer.write(OUTPUT_TOPICS["diagnostics"], out.msgtype, out.msg, log_ns)
            if progress is not None and n_in % 2000 == 0:
                progress((log_ns - first_ns) * 1e-9, duration_s)
        if n_in:
            for out in pipeline.flush():  # what timing.reorder_window_s still held
                writer.write_raw(OUTPUT_TOPICS[out.kind], out.msgtype, out.cdr(pipeline.store), log_ns)
        counts = writer.counts
    wall_s = time.perf_counter() - start
    estimate = rows.columns()
    gnss = _columns([[(f.stamp_ns - first_ns) * 1e-9, f.east_m, f.north_m, float(f.accepted)] for f in observer.gnss_log], ["t_s", "x_m", "y_m", "accepted"])
    estimate = {**estimate, **smoothed_columns(estimate, observer, first_ns)}
    innov = innovations.columns()
    used = [i for i, n in enumerate(sensor_names) if stats[n].dof]  # sensors that had updates
    renumber = np.full(len(sensor_names), -1.0)
    renumber[used] = np.arange(len(used))
    innov["sensor_index"] = renumber[innov["sensor_index"].astype(int)]
    innov["sensor_names"] = [sensor_names[i] for i in used]
    innov["dof"] = [int(stats[sensor_names[i]].dof) for i in used]
    truth = truth_rows(bag, info.topics, first_ns, spools / "truth", estimate["t_s"])
    summary = {
        "output folder": str(final_dir),
        "input": {"bag": str(bag), "duration_s": round(duration_s, 3), "sensor messages": n_in,
                  **{f"topic {topic}": info.topics[topic][1] for topic in wanted.values()}},
        "observer": {"configuration": config.settings.observer, "datum": datum_note, "vehicle": config.vehicle_file or "default",
                     "events": "; ".join(observer.events[:6]), "final mass kg": round(float(observer.vehicle.total_mass_kg), 1),
                     "final friction": round(float(np.mean(observer.vehicle.mu)), 3)},
        "timing": {"processing wall s": round(wall_s, 3), "real-time factor": round(duration_s / wall_s, 2) if wall_s > 0 else None,
                   "model set-up s": round(build_s, 3)},
        "sensors": {f"{kind} {key}": n for kind, c in observer.counters.items() for key, n in c.items()},
        "output": {f"topic {t}": n for t, n in counts.items()},
        "dropped": {wanted[kind]: {**loss._asdict(), "share": round(loss.share, 4)} for kind, loss in stream_losses(observer.counters).items() if kind in wanted and loss.dropped and (kind == "steering" or kind in config.settings.sensors)},
    }
    t_end = float(estimate["t_s"][-1]) if len(estimate["t_s"]) else 0.0
    skip = round(min(skip_s, t_end / 3), 1)  # one evaluation window for the summary and the whole report
    summary["evaluation window"] = {"from_s": skip, "to_s": round(t_end, 3), "settling_s": skip_s}
    if truth is not None and len(estimate["t_s"]):
        summary["accuracy against truth"] = accuracy(estimate, truth, skip)
        summary["accuracy against truth"].update(smoothed_accuracy(estimate, truth, skip))
        ol = open_loop_rows.columns() if open_loop is not None and len(open_loop_rows) else None
        summary["baselines against truth"] = base = baselines(estimate, truth, gnss, ol, observer.mounts.gnss_position_m, skip)
        if ol is not None and "open loop" in base:
            base["open loop"].update({"model mass kg": float(ol["mass_kg"][0]), "model friction": float(ol["friction"][0]),
                                      "failed": open_loop.failed})
            summary["timing"]["open-loop baseline s"] = round(open_loop.wall_s, 3)
    if progress is not None:
        progress(duration_s, duration_s)
    if report:
        from .report import write_run

        if say is not None:
            say("drawing the report")
        report_start = time.perf_counter()
        write_run(out_dir, estimate, gnss, innov, truth, summary, title=f"state_observer: {bag.name}", figure_pool=figure_pool)
        summary["timing"]["report s"] = round(time.perf_counter() - report_start, 3)  # returned and printed only
    else:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    shutil.rmtree(spools)
    return summary


def dropped_lines(summary: dict) -> tuple[list[str], list[str]]:
    """(warnings, errors) of a run's summary: a line per stream more than half dropped, and per stream wholly dropped."""
    warnings, errors = [], []
    for topic, d in summary.get("dropped", {}).items():
        loss = StreamLoss(d["kind"], d["received"], d["dropped"], d["reason"])
        if loss.received and loss.dropped == loss.received:
            errors.append(loss_line(topic, loss))
        elif loss.share > 0.5:
            warnings.append(loss_line(topic, loss))
    return warnings, errors


def never_started(summary: dict, config: ObserverConfig) -> str:
    """Why a run produced no estimate, in a clause (from the summary's per-stream counts)."""
    if config.settings.start_mode == "pose":
        return "no sample could start it from the configured pose (start.pose); see the dropped streams below"
    fixes = summary["sensors"].get("gnss_fix received", 0)
    topic = config.topics["gnss_fix"]
    if fixes == 0:
        return (f"no GNSS fix on {topic}: it starts from GNSS fixes (start.mode gnss); give it the fixes "
                "(topics.gnss_fix) or a start pose (start.mode pose, start.pose.*)")
    used = summary["sensors"].get("gnss_fix used to start", 0)
    return (f"{fixes} GNSS fixes on {topic}, {used} usable, and no heading: it needs the GNSS course above "
            f"{config.settings.start_min_speed_m_s:g} m/s ({config.topics['gnss_velocity']}) or two fixes "
            f"{config.settings.start_min_distance_m:g} m apart")


def process_command(bags: list[str] | str, out: str, params: str | None = None, vehicle: str | None = None, observer: str | None = None,
                    force: bool = False, report: bool = True, allow_dropped: bool = False, check: bool = False,
                    storage: str = DEFAULT_STORAGE, bag_version: int = BAG_VERSION, jobs: int | None = None,
                    cluster: str | None = None) -> int:
    """CLI body: one line on bad input, a summary table otherwise; a warning line per stream more than half dropped,
    and exit 1 with one line per stream wholly dropped (the outputs stay) unless ``allow_dropped``.  ``check``: run
    ``state-observer check`` first and stop if it fails.  Several bags, or a folder of them: a fleet
    (:func:`process_fleet`, ``jobs`` local processes, default one per core, or the Dask ``cluster``)."""
    overrides = {k: v for k, v in (("vehicle_file", vehicle), ("observer", observer)) if v}
    bags = [bags] if isinstance(bags, (str, Path)) else list(bags)
    try:
        config = load_config(params, **overrides)
        found = find_bags(bags)
    except (IoError, ValueError, FileNotFoundError) as exc:
        print(f"state-observer process: {exc}", file=sys.stderr)
        return 1
    if len(bags) > 1 or len(found) > 1 or found[0] != Path(bags[0]):
        return _fleet_command(found, Path(out), config, jobs=jobs, cluster=cluster, overwrite=force, report=report,
                              allow_dropped=allow_dropped, check=check, storage=storage, bag_version=bag_version)
    return _single_command(found[0], out, config, force=force, report=report, allow_dropped=allow_dropped, check=check,
                           storage=storage, bag_version=bag_version)


def _fleet_command(bags: list[Path], out: Path, config: ObserverConfig, *, jobs: int | None, cluster: str | None, **options) -> int:
    """A fleet from the command line: a line per bag as it finishes, the table, exit 1 if any bag failed."""
    import os

    jobs = jobs or os.cpu_count() or 1
    where = f"on the Dask cluster {cluster}" if cluster else f"{min(jobs, len(bags))} at a time"
    print(f"process: {len(bags)} bags into {out}, {where}", file=sys.stderr, flush=True)
    finished = []

    def done(row: dict) -> None:
        finished.append(row)
        print(f"process: [{len(finished)}/{len(bags)}] {Path(row['bag']).name}: {row['status']}", file=sys.stderr, flush=True)

    try:
        rows = process_fleet(bags, out, config, jobs=jobs, cluster=cluster, on_done=done, **options)
    except (StateObserverError, OSError) as exc:
        print(f"state-observer process: {exc}", file=sys.stderr)
        return 1
    print(format_fleet(rows))
    failed = [r for r in rows if r["status"] != "ok"]
    print(f"process: wrote {out / 'fleet.csv'}, {out / 'fleet.json'} and a folder per bag; {len(rows) - len(failed)} of {len(rows)} ok")
    return 1 if failed else 0


def _single_command(bag: Path, out: str, config: ObserverConfig, *, force: bool, report: bool, allow_dropped: bool, check: bool,
                    storage: str, bag_version: int) -> int:
    """One bag from the command line (:func:`process_command`)."""
    from .accel import AcceleratorUnavailable, BuildError
    from .progress import TimeProgress

    try:
        if check:
            from .io.check import check_bag

            result = check_bag(bag, config)
            print(result.text())
            if not result.ok and not allow_dropped:
                print(f"state-observer process: {bag}: the check failed ({result.verdict}); not processing (--allow-dropped to go on)",
                      file=sys.stderr)
                return 1
        line = TimeProgress(sys.stderr, "process")

        def say(text: str) -> None:
            line.finish()
            print(f"process: {text}", file=sys.stderr, flush=True)

        summary = process_bag(bag, out, config, overwrite=force, report=report, progress=line, say=say, storage=storage, bag_version=bag_version)
        line.finish()
    except (IoError, ValueError, FileNotFoundError, AcceleratorUnavailable, BuildError) as exc:
        print(f"state-observer process: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the output: read-only, full, too long a name, a file in the way
        partial = Path(out).resolve().with_name(Path(out).resolve().name + ".partial")
        try:
            kept = f"; what was written is in {partial}" if partial.exists() else ""
        except OSError:
            kept = ""
        print(f"state-observer process: cannot write {exc.filename or out}: {exc.strerror or exc}{kept}", file=sys.stderr)
        return 1
    for section in ("timing", "accuracy against truth"):
        for key, value in summary.get(section, {}).items():
            print(f"{section}: {key} = {value:.4g}" if isinstance(value, float) else f"{section}: {key} = {value}")
    print(f"process: wrote {Path(out) / 'bag'}" + (f" and {Path(out) / 'report.html'}" if report else ""))
    if "started at" not in summary["observer"]["events"]:  # the cause first: every stream is then "dropped: before start"
        print(f"state-observer process: the observer never started: {never_started(summary, config)} (outputs kept in {out})",
              file=sys.stderr)
        return 1
    warnings, errors = dropped_lines(summary)
    for text in warnings + (errors if allow_dropped else []):
        print(f"state-observer process: warning: {text}", file=sys.stderr)
    if errors and not allow_dropped:
        for text in errors:
            print(f"state-observer process: {text} (outputs kept in {out}; --allow-dropped accepts this)", file=sys.stderr)
        return 1
    return 0


# ----- fleets of bags (issue 17) --------------------------------------------------------------------------
FLEET_COLUMNS = ("bag", "status", "duration_s", "real-time factor", "final mass kg", "final friction", "position_rmse_m",
                 "yaw_rmse_deg", "sideslip_rmse_deg", "tire_force_nrmse_lat", "mass_error_pct", "friction_abs_error", "error")


def find_bags(paths) -> list[Path]:
    """The rosbag2 folders (with a metadata.yaml) among ``paths``: each path a bag, or a folder whose subfolders
    are (sorted by name).  ``IoError`` naming a path that is neither, and two bags of the same name (their outputs
    would collide)."""
    bags: list[Path] = []
    for path in map(Path, paths):
        if (path / "metadata.yaml").is_file():
            bags.append(path)
            continue
        inside = sorted(p for p in path.iterdir() if (p / "metadata.yaml").is_file()) if path.is_dir() else []
        if not inside:
            raise IoError(f"{path}: not a rosbag2 folder (no metadata.yaml) nor a folder of them")
        bags += inside
    names: dict[str, Path] = {}
    for bag in bags:
        if bag.name in names and names[bag.name].resolve() != bag.resolve():
            raise IoError(f"two bags named {bag.name} ({names[bag.name]}, {bag}): their outputs would collide; rename one")
        names[bag.name] = bag
    return list({bag.resolve(): bag for bag in bags}.values())


def process_one(bag: Path, out_dir: Path, config: ObserverConfig, overwrite: bool, report: bool, allow_dropped: bool,
                check: bool, storage: str, bag_version: int) -> dict:
    """One bag of a fleet, quietly: its row of the fleet table (:data:`FLEET_COLUMNS`; its summary is in its folder).  A
    failure is the row's status and error, never an exception: the other bags go on.  ``check``: `state-observer check`
    first; a bag it fails is not processed (unless ``allow_dropped``)."""
    row: dict = {"bag": str(bag)}
    try:
        if check:
            from .io.check import check_bag

            result = check_bag(bag, config)
            if not result.ok and not allow_dropped:
                return {**row, "status": "failed", "error": f"the check failed ({result.verdict}); not processed"}
        summary = process_bag(bag, out_dir, config, overwrite=overwrite, report=report, storage=storage, bag_version=bag_version,
                              report_workers=0)  # the fleet's bags already share the CPUs
    except Exception as exc:  # noqa: BLE001  (a fleet outlives one bag's fault; the error names it)
        message = str(exc) if isinstance(exc, (StateObserverError, OSError)) else f"{type(exc).__name__}: {exc}"
        return {**row, "status": "failed", "error": message}
    warnings, errors = dropped_lines(summary)
    if "started at" not in summary["observer"]["events"]:
        status, error = "failed", f"the observer never started: {never_started(summary, config)}"
    elif errors and not allow_dropped:
        status, error = "failed", "; ".join(errors)
    else:
        status, error = "ok", "; ".join(warnings + errors)
    row.update({"status": status, "error": error, "duration_s": summary["input"]["duration_s"],
                "real-time factor": summary["timing"]["real-time factor"]},
               **{k: summary["observer"][k] for k in ("final mass kg", "final friction")},
               **{k: v for k, v in summary.get("accuracy against truth", {}).items() if k in FLEET_COLUMNS})
    return row


def process_fleet(bags: list[Path], out: Path, config: ObserverConfig, *, jobs: int = 1, cluster: str | None = None,
                  overwrite: bool = False, report: bool = True, allow_dropped: bool = False, check: bool = False,
                  storage: str = DEFAULT_STORAGE, bag_version: int = BAG_VERSION, on_done=None) -> list[dict]:
    """Every bag into ``out/<bag name>/`` (as :func:`process_bag`), ``jobs`` at a time or on the Dask ``cluster``
    (:func:`state_observer.batch.run_all`); then ``out/fleet.csv`` and ``out/fleet.json``, a row per bag in the
    given order.  ``on_done(row)`` as each bag finishes.  Returns the rows."""
    from .batch import run_all

    out = Path(out)
    _refuse_occupied(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    items = [(bag, out / bag.name, config, overwrite, report, allow_dropped, check, storage, bag_version) for bag in bags]
    rows = run_all(process_one, items, jobs=jobs, cluster=cluster, on_done=None if on_done is None else lambda i, row: on_done(row))
    _write_fleet_table(out, rows)
    return rows


def _write_fleet_table(out: Path, rows: list[dict]) -> None:
    import csv

    with (out / "fleet.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, FLEET_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "fleet.json").write_text(json.dumps(rows, indent=2) + "\n")


def format_fleet(rows: list[dict]) -> str:
    """The fleet table as text: a line per bag (status, duration, real-time factor, final mass and friction, and
    position and sideslip RMSE where the bag had truth), failures with their error below."""
    lines = [f"{'bag':<28} {'status':<7} {'s':>7} {'x RT':>6} {'mass kg':>8} {'mu':>5} {'pos m':>6} {'beta deg':>8}"]
    for r in rows:
        def cell(key, fmt, width):
            value = r.get(key)
            return f"{value:{width}{fmt}}" if isinstance(value, (int, float)) else f"{'-':>{width}}"

        lines.append(f"{Path(r['bag']).name[:28]:<28} {r['status']:<7} {cell('duration_s', '.1f', 7)} {cell('real-time factor', '.1f', 6)} "
                     f"{cell('final mass kg', '.0f', 8)} {cell('final friction', '.2f', 5)} {cell('position_rmse_m', '.2f', 6)} "
                     f"{cell('sideslip_rmse_deg', '.2f', 8)}")
    lines += [f"{Path(r['bag']).name}: {r['error']}" for r in rows if r.get("error")]
    return "\n".join(lines)

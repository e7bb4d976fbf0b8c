"""The observer's message pipeline, shared by the observer node and ``state-observer process``: sensor
samples in, the messages that are due out (rosbags message objects, stamped on sensor time).

Odometry follows every sample that advanced the model (``rates.odometry_hz`` 0) or its own rate; the
other outputs their rates on sensor time; diagnostics are asked for by the caller (the node on a wall
timer, so that a silent sensor shows as stale).  A reset of the observer (time jump, service call) also
clears the path and the rate schedules.
"""
from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any, Iterator, NamedTuple

import numpy as np

from ..errors import ConfigError, VehicleConfigError
from ..estimation.intake import STREAMS, StreamLoss, stream_losses
from ..estimation.online import OnlineObserver
from ..estimation.spi import AT_BOUND, STATUS_NAMES
from .convert import (
    OUTPUT_MSGTYPES,
    TF_MESSAGE,
    WHEEL_FRAMES,
    IoError,
    JointNames,
    OdometryEncoder,
    TransformEncoder,
    TruthFrames,
    Uncertainty,
    diagnostics_msg,
    markers_msg,
    mount_transforms,
    msg_to_sample,
    path_msg,
    pose_stamped_msg,
    tf_msg,
    truth_to_msgs,
    typestore,
)
from .params import ObserverConfig, setting_error

_NS = 1_000_000_000
ESTIMATE_KINDS = ("tire_forces", "parameters", "state")  # built from the full estimate


class Output(NamedTuple):
    kind: str  # key of OUTPUT_TOPICS
    msgtype: str
    msg: Any  # rosbags message, or None when ``data`` holds it already serialised
    stamp_ns: int
    data: bytes | None = None  # CDR bytes (odometry: encoded directly, see convert.OdometryEncoder)

    def cdr(self, store) -> bytes:
        """The message as CDR bytes."""
        return self.data if self.data is not None else bytes(store.serialize_cdr(self.msg, self.msgtype))


def to_sample(kind: str, msg: Any, receive_ns: int, joints: JointNames, counters: dict[str, Counter]):
    """The sample record of a message of sensor stream ``kind`` (:func:`~state_observer.io.convert.msg_to_sample`, wheels
    and steering by ``joints``), or None when it has none: then counted in ``counters[kind]`` as received and
    "dropped: <why>", as the observer counts its own drops (the node, ``process`` and ``check`` convert here)."""
    try:
        return msg_to_sample(kind, msg, receive_ns, joints)
    except IoError as exc:  # e.g. a JointState without the configured joints
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - a malformed message is dropped, never fatal
        reason = f"cannot convert ({type(exc).__name__}: {exc})"
    counters[kind]["received"] += 1
    counters[kind][f"dropped: {reason}"] += 1
    return None


def loss_line(topic: str, loss: StreamLoss) -> str:
    """One line on a stream's dropped messages: topic, share and the commonest reason."""
    if loss.dropped == loss.received:
        return f"{topic} ({loss.kind}): all {loss.received} messages dropped: {loss.reason}"
    return f"{topic} ({loss.kind}): {loss.dropped} of {loss.received} messages dropped ({100 * loss.share:.0f} %), mostly: {loss.reason}"


class DropWatch:
    """Streams losing most of their messages, each reported once: over windows of at least ``min_messages`` received
    messages of a stream, one that dropped more than ``share`` of them gives a :func:`loss_line` (the node logs it at
    WARN; /diagnostics has the counters)."""

    def __init__(self, topics: dict[str, str], min_messages: int = 20, share: float = 0.5):
        self.topics, self.min_messages, self.share = topics, min_messages, share
        self._start: dict[str, Counter] = {}
        self.reported: set[str] = set()

    def poll(self, counters: dict[str, Counter]) -> list[str]:
        """Lines for streams newly found losing more than ``share`` of a window (``counters``: the observer's)."""
        lines = []
        for kind, count in counters.items():
            window = count - self._start.get(kind, Counter())
            if window["received"] < self.min_messages:
                continue
            self._start[kind] = count.copy()
            loss = stream_losses({kind: window})[kind]
            if loss.share > self.share and kind not in self.reported:
                self.reported.add(kind)
                lines.append(loss_line(self.topics.get(kind, kind), loss))
        return lines


def load_observer(config: ObserverConfig) -> OnlineObserver:
    """The :class:`OnlineObserver` of a configuration (vehicle file, its sensor mounts, settings)."""
    from ..paths import default_vehicle_path
    from ..sensors.mounts import mounts_from_vehicle
    from ..vehicle.description import load_vehicle

    desc = load_vehicle(config.vehicle_file or default_vehicle_path())
    try:
        observer = OnlineObserver(desc, mounts_from_vehicle(desc), config.settings)
    except ConfigError as exc:
        if exc.key is None or isinstance(exc, VehicleConfigError):
            raise
        raise setting_error(exc) from None  # a setting the vehicle file makes invalid (initial mass below the wheels')
    if config.solver_backend != "numpy":  # the FPGA variant and its C model (issue 7), sized for this model
        from ..accel import make_backend

        vehicle = observer.vehicle
        vehicle.solver_options["linear_solver"] = make_backend(config.solver_backend, vehicle.model.n, fallback=config.backend_fallback)
    return observer



class ObserverPipeline:
    """:class:`OnlineObserver` plus output scheduling and message building (module docstring)."""

    def __init__(self, config: ObserverConfig, observer: OnlineObserver | None = None, store=None):
        self.config = config
        self.observer = observer if observer is not None else load_observer(config)
        self.store = store if store is not None else typestore()
        self.frames = TruthFrames(config.odom_frame, config.base_frame)
        self._odometry_encoder = OdometryEncoder(self.frames)
        self._tf_encoder = TransformEncoder(self.frames.odom, self.frames.base)
        self.wheel_radius_m = float(np.mean(getattr(self.observer.vehicle, "rD", 0.3)))
        self._period_ns = {k: (round(_NS / hz) if hz > 0 else 0) for k, hz in config.rates.items()}
        self._clear()

    def _clear(self) -> None:
        self._due_ns: dict[str, int] = {}
        self.path: deque = deque(maxlen=self.config.path_length)
        self._resets_seen = self.observer.n_resets

    def _due(self, kind: str, stamp_ns: int) -> bool:
        period = self._period_ns[kind]
        due = self._due_ns.get(kind)
        if due is not None and stamp_ns < due:
            return False
        # next instant on the rate's grid: a late sample does not make the schedule drift
        self._due_ns[kind] = stamp_ns + period if due is None or period == 0 else max(due + period, stamp_ns - stamp_ns % period + period)
        return True

    def sample(self, kind: str, msg: Any, receive_ns: int):
        """:func:`to_sample` with the configured joint names, drops counted in the observer's counters."""
        return to_sample(kind, msg, receive_ns, self.config.joints, self.observer.counters)

    def feed(self, sample) -> Iterator[Output]:
        """Give a sensor sample to the observer; the outputs due after the model steps it completed, built as
        they are taken (odometry first: the node publishes it before the others are built).  Consume the
        iterator before the next call."""
        return self._after(self.observer.feed(sample))

    def flush(self) -> Iterator[Output]:
        """At the end of the data: the outputs of the samples the observer still held (:meth:`OnlineObserver.flush`)."""
        return self._after(self.observer.flush())

    def _after(self, steps: list[int]) -> Iterator[Output]:
        """The outputs due after the model steps ``steps`` of one call to the observer."""
        if self.observer.n_resets != self._resets_seen:
            self._clear()
        # nothing to publish when a step of this advance failed (the observer reset itself and waits to start again)
        return self.outputs(steps[-1]) if steps and self.observer.started else iter(())

    def outputs(self, stamp_ns: int) -> Iterator[Output]:
        """The outputs due at model time ``stamp_ns`` (the observer's current time), odometry first."""
        obs = self.observer
        due = [k for k in ("odometry", "path", *ESTIMATE_KINDS, "markers") if self._due(k, stamp_ns)]
        if "odometry" in due:
            o = obs.odometry()
            yield Output("odometry", OUTPUT_MSGTYPES["odometry"], None, stamp_ns, self._odometry_encoder.encode(
                stamp_ns, o.position_m, o.orientation_wxyz, o.velocity_body_m_s, o.angular_velocity_body_rad_s, o.pose_covariance,
                o.twist_covariance))
        if "path" in due:
            o = obs.odometry()
            self.path.append(pose_stamped_msg(stamp_ns, o.position_m, o.orientation_wxyz, self.store, self.frames.odom))
            yield Output("path", OUTPUT_MSGTYPES["path"], path_msg(list(self.path), stamp_ns, self.store, self.frames.odom), stamp_ns)
        kinds = [k for k in ESTIMATE_KINDS if k in due]
        if kinds or "markers" in due:
            e = obs.estimate()
            if kinds:
                u = Uncertainty(e.pose_covariance, e.twist_covariance, e.tire_force_sigma_n, e.mass_sigma_kg, e.friction_sigma,
                                e.parameters_converged, e.estimator, e.nis, e.parameters)
                msgs = truth_to_msgs(e.state, stamp_ns, self.store, self.frames, u, kinds)
                for k in kinds:
                    yield Output(k, *msgs[k], stamp_ns)
            if "markers" in due:
                yield Output("markers", OUTPUT_MSGTYPES["markers"], markers_msg(e.state, stamp_ns, self.store, self.frames, self.wheel_radius_m), stamp_ns)

    def tf(self, stamp_ns: int) -> bytes:
        """/tf at ``stamp_ns``: odom -> base_link of the current odometry (tf2_msgs/TFMessage, CDR)."""
        o = self.observer.odometry()
        return self._tf_encoder.encode(stamp_ns, o.position_m, o.orientation_wxyz)

    def tf_static(self, stamp_ns: int) -> bytes:
        """/tf_static: base_link -> the IMU and the GNSS antenna (the vehicle file's mounts) and the four wheel centres
        (:data:`~.convert.WHEEL_FRAMES`, where the model has them now, unrotated), as tf2_msgs/TFMessage (CDR).  Asked
        for once the observer has started (the node: latched on a transient-local publisher; ``process``: once per bag)."""
        base, identity = self.frames.base, (1.0, 0.0, 0.0, 0.0)
        contacts = np.asarray(self.observer.estimate().state.contact_point_base_m, float)
        wheels = [(stamp_ns, base, frame, contacts[i] + (0.0, 0.0, self.wheel_radius_m), identity) for i, frame in enumerate(WHEEL_FRAMES)]
        msg = tf_msg([*mount_transforms(self.observer.mounts, stamp_ns, base), *wheels], self.store)
        return bytes(self.store.serialize_cdr(msg, TF_MESSAGE))

    def diagnostics(self, stamp_ns: int, extra: list | None = None, now_ns: int | None = None) -> Output:
        """diagnostic_msgs/DiagnosticArray of the observer's health (see :func:`health`) plus ``extra`` statuses."""
        return Output("diagnostics", OUTPUT_MSGTYPES["diagnostics"], diagnostics_msg(health(self.observer, stamp_ns if now_ns is None else now_ns) + list(extra or ()), stamp_ns, self.store), stamp_ns)


SILENT_AFTER_S = 2.0  # a stream that had messages and then none for this long is reported (GNSS: 20 periods at 10 Hz)
DISAGREE_NIS_FACTOR = 5.0  # a sensor whose recent mean NIS exceeds this times its dimension makes the status WARN


def _disagreeing_sensors(f) -> list[str]:
    """Sensors whose recent innovations the estimate cannot explain: rejected by the gate many times in a row (10 GNSS
    messages, 2 s at 5 Hz; 25 of the others) or accepted with a recent mean NIS above DISAGREE_NIS_FACTOR times their
    dimension (a consistent filter averages 1 times)."""
    out = []
    for name, st in getattr(f, "stats", {}).items():
        if st.consecutive_rejections >= (10 if name.startswith("gnss") else 25):
            out.append(f"{name} ({st.consecutive_rejections} rejected in a row)")
        elif st.accepted > 50 and st.dof and st.nis_mean_recent > DISAGREE_NIS_FACTOR * st.dof:
            out.append(f"{name} (recent mean NIS {st.nis_mean_recent:.0f} for {st.dof} dof)")
    return out


def health(observer: OnlineObserver, now_ns: int | None = None) -> list[tuple[str, str, str, dict]]:
    """Diagnostic statuses (name, level, message, values): one for the observer, one per sensor stream with
    its counters (everything dropped or rejected is named there).  ``now_ns``, on the clock of the samples'
    receive times: a stream silent for ``SILENT_AFTER_S`` is WARN (every stream silent: the observer too)."""
    f = observer.filter
    values = {"started": observer.started, "resets": observer.n_resets, "model time s": f"{(observer.t_ns or 0) * 1e-9:.3f}"}
    report = f.parameter_report() if observer.started and hasattr(f, "parameter_report") else None
    if observer.started:
        values.update({"datum": repr(observer.datum), "GNSS re-acquisitions": f.n_resets, "sensor relocks": f.n_relocks,
                       "mass kg": f"{observer.vehicle.total_mass_kg:.1f}", "friction": f"{float(np.mean(observer.vehicle.mu)):.3f}"})
        if getattr(f, "gyro_bias_col", -1) >= 0:  # what the filter learnt of the IMU: a mounting or a part to check
            values.update({"gyroscope bias deg/s (x y z)": " ".join(f"{v:+.3f}" for v in np.degrees(f.imu_bias[:3])),
                           "accelerometer bias m/s^2 (x y z)": " ".join(f"{v:+.3f}" for v in f.imu_bias[3:]),
                           "gyroscope z scale factor %": f"{100.0 * f.gyro_scale:+.2f}",
                           "IMU tilt beyond its mounting deg (about x y)": " ".join(f"{v:+.2f}" for v in np.degrees(f.imu_tilt))})
        if hasattr(f, "road_rate_allowance") and f.settings.gyro_road_rate_gain > 0.0:  # a crest or a dip the model's level road has not
            values["road roll and pitch rate allowed deg/s (about x y)"] = " ".join(f"{v:.3f}" for v in np.degrees(f.road_rate_allowance()))
        if getattr(f, "wheel_scale_col", -1) >= 0:  # the tires' rolling radius against the vehicle file's
            values["wheel rolling radius scale % (front rear)"] = " ".join(f"{100.0 * v:+.2f}" for v in f.wheel_scale)
        if getattr(f, "slope_col", -1) >= 0:  # the road under the car, which the model drives level
            grade, cross = f.road_grade()
            values["road grade % (uphill +), cross slope % (falling to the left +)"] = f"{100.0 * grade:+.2f} {100.0 * cross:+.2f}"
    if report is not None:
        for name, r in report.items():
            values[f"{name} status"] = STATUS_NAMES[r["status"]]
        values["friction lower bound"] = f"{report['friction']['lower_bound']:.3f}"
        values["cornering stiffness scales"] = f"{report['cornering_front']['value']:.3f} front, {report['cornering_rear']['value']:.3f} rear"
    if observer.events:
        values["last event"] = observer.events[-1]
    if not observer.started:
        level, message = "WARN", "waiting for GNSS fixes and a heading to start" if observer.settings.start_mode == "gnss" else "waiting for the first sample"
    elif getattr(f, "diverged", False):
        level, message = "ERROR", "diverged: innovations far beyond their covariance"
    elif disagreeing := _disagreeing_sensors(f):
        level, message = "WARN", f"running; the estimate disagrees with {', '.join(disagreeing)}"
    elif report is not None and any(r["status"] == AT_BOUND for r in report.values()):
        bound = [name for name, r in report.items() if r["status"] == AT_BOUND]
        level, message = "WARN", f"running; {', '.join(bound)} held at a bound of its estimate (the model cannot explain the data there)"
    else:
        level, message = "OK", "running"
    silent = {kind: (now_ns - last) * 1e-9 for kind, last in observer.last_received_ns.items()
              if now_ns is not None and now_ns - last > SILENT_AFTER_S * 1e9}
    if silent and len(silent) == len(observer.last_received_ns) and level == "OK":
        level, message = "WARN", f"every sensor silent for {min(silent.values()):.1f} s: the estimate is not updated"
    statuses = [("state_observer: observer", level, message, values)]
    missing = observer.gaps.missing
    for kind in STREAMS:
        counts = observer.counters[kind]
        received = counts.get("received", 0)
        lost = sum(n for key, n in counts.items() if key.startswith("dropped") or key.startswith("rejected"))
        if received == 0:
            level, message = "STALE", "no messages"
        elif kind in silent:
            level, message = "WARN", f"silent for {silent[kind]:.1f} s ({received} messages before)"
        elif missing.get(kind, 0) > 0.1 * received:
            level, message = "WARN", (f"{missing[kind]} messages missing (gaps in the stamps: lost by the sensor, DDS or a "
                                      f"starved node) against {received} received")
        elif lost > 0.2 * received:
            level, message = "WARN", f"{lost} of {received} messages dropped or rejected"
        else:
            level, message = "OK", f"{received} messages"
        values = {**counts, "missing (gaps in the stamps)": missing.get(kind, 0)} if kind in missing else dict(counts)
        factors = f.imu_noise_excess() if kind == "imu" and hasattr(f, "imu_noise_excess") else {}
        noisier = {name: k for name, k in factors.items() if k > 1.0}
        if noisier:  # the filter widened the IMU's noise to what it measured and its innovations show (ErrorEkfSettings.imu_noise_meter_samples, imu_noise_adaptation_updates)
            values.update({f"{name} noise x (sigma)": f"{k:.2f}" for name, k in noisier.items()})
            if max(noisier.values()) > 2.0:
                message += "; noisier than its covariance says (" + ", ".join(f"{name} x{k:.1f}" for name, k in noisier.items()) + " in sigma, taken into account)"
        statuses.append((f"state_observer: {kind}", level, message, values))
    return statuses

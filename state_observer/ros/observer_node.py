"""``observer_node``: the observer on live topics (ARCHITECTURE.md 4).

Thin: every sensor message is decoded (rosbags, the definitions of ``$ROS_DISTRO``), turned into a
sample record, given to :class:`state_observer.io.pipeline.ObserverPipeline` (the code path of
``state-observer process``), and the messages it returns are serialised and published unchanged.
Subscriptions use the sensor-data QoS (best effort, keep last ``qos_depth``), publishers are reliable.
Parameters: :mod:`state_observer.io.params` (declared read-only, each with its description and range;
an invalid one stops the node at start with one line naming it).  Services: ``~/reset``
(state_observer/srv/Reset).  A sensor stream that loses more than half of its messages is logged once at WARN
with the commonest reason (:class:`~state_observer.io.pipeline.DropWatch`).  Publishes ``/tf`` (odom -> base_link with every
odometry message) and ``/tf_static`` (base_link -> IMU, GNSS antenna and wheels, once, latched) with the QoS of tf2_ros'
broadcasters and the messages ``process`` writes into its bags (:meth:`ObserverPipeline.tf`, :meth:`~ObserverPipeline.tf_static`).
"""
from __future__ import annotations

import math
import os
import time
import traceback
from collections import deque
from functools import partial
from typing import Sequence

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from state_observer.conventions import yaw_rad
from state_observer.io.convert import OUTPUT_MSGTYPES, OUTPUT_TOPICS, SENSOR_MSGTYPES, TF_MESSAGE, TF_STATIC_TOPIC, TF_TOPIC, make_typestore
from state_observer.io.params import NODE_NAME, PARAMETERS, applies_to, check, config_from, params_file_sections
from state_observer.io.pipeline import DropWatch, ObserverPipeline, load_observer
from state_observer.ros.common import TF_QOS, TF_STATIC_QOS, ParameterError, message_class, run

LATENCY_WINDOW = 20000  # IMU-to-estimate latencies kept for the statistics


class ObserverNode(Node):
    """The observer node (module docstring)."""

    def __init__(self, *, context=None, parameter_overrides: list | None = None):
        super().__init__(NODE_NAME, context=context, parameter_overrides=parameter_overrides)
        self.done = False  # the node runs until shut down (ros/common.run)
        self.error = None
        values = self._declare_parameters()
        try:
            self.config = config_from(values)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        self.add_on_set_parameters_callback(lambda params: SetParametersResult(
            successful=False, reason="the observer's parameters are read at start; restart the node to change them"))
        self.store = make_typestore(distro=os.environ.get("ROS_DISTRO") or None)
        try:
            observer = load_observer(self.config)
        except ParameterError:
            raise
        except (OSError, ValueError) as exc:
            raise ParameterError(f"parameter vehicle_file: {exc}", key="vehicle_file") from None
        except RuntimeError as exc:  # accel: AcceleratorUnavailable (no board or overlay), BuildError (no compiler)
            hint = "" if self.config.backend_fallback else " (backend_fallback: true uses the C model of the kernel instead)"
            raise ParameterError(f"parameter solver_backend {self.config.solver_backend!r}: {exc}{hint}") from None
        self.get_logger().info("loading the compiled kernels (`state-observer prepare`, run by the build, compiled them; "
                               "without it the first start compiles them: ~1-2 min)")
        started = time.monotonic()

        def warm_up_step(done: int, total: int) -> None:
            if time.monotonic() - started > 2.0:
                self.get_logger().info(f"compiling the kernels: step {done} of {total}, {time.monotonic() - started:.0f} s")

        observer.warm_up(on_step=warm_up_step)
        self.pipeline = ObserverPipeline(self.config, observer, store=self.store)
        self.latencies_ns: deque = deque(maxlen=LATENCY_WINDOW)
        self.drop_watch = DropWatch(self.config.topics)  # a stream losing most of its messages: one WARN line
        self._errors_logged = 0

        reliable = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._output_publishers = {}
        for kind, topic in OUTPUT_TOPICS.items():
            cls = message_class(OUTPUT_MSGTYPES[kind])
            if cls is None:
                raise ParameterError(f"message type {OUTPUT_MSGTYPES[kind]} of {topic} is not importable (is the package built and sourced?)")
            self._output_publishers[kind] = self.create_publisher(cls, topic, reliable)
        sensor_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.config.qos_depth,
                                reliability=qos_profile_sensor_data.reliability, durability=qos_profile_sensor_data.durability)
        for kind, topic in self.config.topics.items():
            cls = message_class(SENSOR_MSGTYPES[kind])
            self.create_subscription(cls, topic, partial(self.on_message, kind), sensor_qos, raw=True)
        reset_type = message_class("state_observer/srv/Reset")
        if reset_type is not None:
            self.create_service(reset_type, "~/reset", self._on_reset)
        else:
            self.get_logger().warning("state_observer/srv/Reset is not importable: no ~/reset service")
        pose_type = message_class("geometry_msgs/msg/PoseWithCovarianceStamped")
        self.create_subscription(pose_type, "set_pose", self._on_set_pose, reliable)  # robot_localization's name
        self.create_timer(1.0 / self.pipeline.config.rates["diagnostics"], self._publish_diagnostics)
        self._tf = self._tf_static = None
        if self.config.publish_tf:
            tf_type = message_class(TF_MESSAGE)
            if tf_type is None:
                self.get_logger().warning(f"{TF_MESSAGE} is not importable: no {TF_TOPIC} and {TF_STATIC_TOPIC} "
                                          f"(the same pose is on {OUTPUT_TOPICS['odometry']})")
            else:
                self._tf = self.create_publisher(tf_type, TF_TOPIC, TF_QOS)
                self._tf_static = self.create_publisher(tf_type, TF_STATIC_TOPIC, TF_STATIC_QOS)
        self._tf_static_due = self._tf_static is not None
        self.get_logger().info(
            f"observer {self.config.settings.observer}, vehicle {self.config.vehicle_file or 'default'}, "
            f"listening on {', '.join(self.config.topics.values())}; start: {self.config.settings.start_mode}")

    # ----- parameters -----------------------------------------------------------------------------------
    def _declare_parameters(self) -> dict:
        """Declare every parameter of the table (read-only, with description and range) and check its value."""
        values = {}
        for p in PARAMETERS:
            constraint = f"range {p.low:g} .. {p.high:g}" if p.low is not None else (f"one of {', '.join(p.choices)}" if p.choices else "")
            descriptor = ParameterDescriptor(description=p.description, additional_constraints=constraint, read_only=True,
                                             dynamic_typing=True)  # an integer for a double is accepted, then checked
            try:
                self.declare_parameter(p.name, p.default, descriptor)
                value = self.get_parameter(p.name).value
                values[p.name] = check(p.name, value)
            except ValueError as exc:
                raise ParameterError(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - rclpy's parameter exceptions
                raise ParameterError(f"parameter {p.name}: {exc}") from None
        # a misspelt name (params file or -p) would otherwise be ignored in silence: refuse it, naming the closest
        builtin = ("use_sim_time", "start_type_description_service")
        for name in sorted(self._parameter_overrides):
            if name not in values and name not in builtin and not name.startswith("qos_overrides."):
                try:
                    check(name, self._parameter_overrides[name].value)
                except ValueError as exc:
                    raise ParameterError(str(exc)) from None
        return values

    # ----- input ------------------------------------------------------------------------------------------
    def on_message(self, kind: str, data: bytes) -> None:
        """One serialised (CDR) message of sensor stream ``kind`` (a key of ``config.topics``), as its subscription gives it."""
        start = time.perf_counter_ns()
        observer = self.pipeline.observer
        try:
            msg = self.store.deserialize_cdr(data, SENSOR_MSGTYPES[kind])
        except Exception as exc:  # noqa: BLE001 - a malformed message must not stop the node
            observer.counters[kind]["received"] += 1
            observer.counters[kind][f"dropped: cannot decode ({type(exc).__name__})"] += 1
            return
        sample = self.pipeline.sample(kind, msg, self.get_clock().now().nanoseconds)  # None: dropped and counted
        if sample is None:
            return
        try:
            for out in self.pipeline.feed(sample):  # built as taken: the odometry is published before the rest is built
                self._output_publishers[out.kind].publish(out.cdr(self.store))
                if out.kind == "odometry":
                    if kind == "imu":
                        self.latencies_ns.append(time.perf_counter_ns() - start)
                    if self._tf is not None:
                        self._tf.publish(self.pipeline.tf(out.stamp_ns))
                    if self._tf_static_due:  # once the observer has started: the wheels are where the model has them
                        self._tf_static_due = False
                        self._tf_static.publish(self.pipeline.tf_static(out.stamp_ns))
        except Exception as exc:  # noqa: BLE001 - never crash on data; say so once, then count
            observer.counters[kind][f"dropped: internal error {type(exc).__name__}: {exc}"] += 1
            if self._errors_logged < 5:
                self._errors_logged += 1
                self.get_logger().error(f"{kind} sample at {sample.stamp_ns} ns: {traceback.format_exc()}")

    def _on_set_pose(self, msg) -> None:
        """set_pose (geometry_msgs/PoseWithCovarianceStamped in the odom frame): the observer starts again there."""
        frame = msg.header.frame_id
        if frame and frame != self.config.odom_frame:
            self.get_logger().warning(f"set_pose in frame {frame!r} ignored: poses are taken in {self.config.odom_frame!r}")
            return
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        yaw = yaw_rad((q.w, q.x, q.y, q.z))
        try:
            self.pipeline.observer.set_pose(p.x, p.y, yaw)
        except ValueError as exc:
            self.get_logger().warning(str(exc))
            return
        self.get_logger().info(f"set_pose: starting again at x {p.x:.2f} m, y {p.y:.2f} m, yaw {math.degrees(yaw):.1f} deg")

    def _on_reset(self, request, response):
        self.pipeline.observer.reset("reset service call")
        response.success, response.message = True, "observer reset; it starts again from the next good GNSS fixes or the configured pose"
        self.get_logger().info(response.message)
        return response

    @property
    def output_publishers(self) -> dict:
        """The output publishers by kind (keys of io.convert.OUTPUT_TOPICS)."""
        return self._output_publishers

    # ----- diagnostics --------------------------------------------------------------------------------------
    def latency_statistics(self) -> dict:
        """IMU message in -> its estimate published (ms): count, p50, p99, max."""
        values = sorted(self.latencies_ns)
        if not values:
            return {}

        def pct(p):
            return values[min(len(values) - 1, int(math.ceil(p * len(values))) - 1)] * 1e-6

        return {"count": len(values), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": values[-1] * 1e-6}

    def _publish_diagnostics(self) -> None:
        for line in self.drop_watch.poll(self.pipeline.observer.counters):
            self.get_logger().warning(f"{line} (counters on /diagnostics)")
        stamp = self.get_clock().now().nanoseconds
        latency = {f"imu-to-estimate {k}": (f"{v:.3f}" if isinstance(v, float) else v) for k, v in self.latency_statistics().items()}
        out = self.pipeline.diagnostics(stamp, [("state_observer: node", "OK", "running", latency)])
        self._output_publishers["diagnostics"].publish(out.cdr(self.store))


def params_files_for_other_nodes(args: Sequence[str]) -> str | None:
    """One line naming a ``--params-file`` of ``args`` with no section for this node (ROS would ignore it in silence)."""
    for flag, path in zip(args, args[1:]):
        if flag == "--params-file":
            try:
                sections = params_file_sections(path)
            except ValueError as exc:
                return str(exc)
            if not any(applies_to(section) for section in sections):
                return (f"{path}: no section for {NODE_NAME} (it has {', '.join(sections) or 'none'}); "
                        f"key the parameters as '{NODE_NAME}: ros__parameters:' or '/**: ros__parameters:'")
    return None


def main(args: Sequence[str] | None = None) -> int:
    import sys

    problem = params_files_for_other_nodes(list(args) if args is not None else sys.argv)
    if problem:
        print(f"{NODE_NAME}: error: {problem}", file=sys.stderr)
        return 1
    return run(ObserverNode, NODE_NAME, args)



if __name__ == "__main__":
    raise SystemExit(main())

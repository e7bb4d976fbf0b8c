"""Helpers shared by the nodes: parameters, message classes by type name, the /tf QoS profiles, ``main`` loop."""
from __future__ import annotations

import importlib
import signal
import sys
import threading
from typing import Any, Callable, Sequence

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from state_observer.io.convert import IoError
from state_observer.errors import ParameterError

__all__ = ["TF_QOS", "TF_STATIC_QOS", "ParameterError", "declare", "message_class", "run"]

# tf2_ros' TransformBroadcaster and StaticTransformBroadcaster: what RViz, Foxglove and tf2 listeners expect
TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
TF_STATIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)


def declare(node: Node, name: str, default: Any, description: str, *,
            min_value: float | None = None, max_value: float | None = None) -> Any:
    """Declare a read-only parameter and return its value.

    ``default`` is the value, or a ``Parameter.Type`` for a parameter without one (an empty
    array). ``min_value``/``max_value`` give the descriptor's range (both or neither).
    Any rclpy parameter error (wrong type, out of range) becomes a ``ParameterError``.
    """
    descriptor = ParameterDescriptor(description=description, read_only=True)
    if min_value is not None:
        if isinstance(default, int) and not isinstance(default, bool):
            descriptor.integer_range = [IntegerRange(from_value=int(min_value),
                                                     to_value=int(max_value), step=0)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(min_value), to_value=float(max_value), step=0.0)]
    try:
        node.declare_parameter(name, default, descriptor)
        if isinstance(default, Parameter.Type):
            return node.get_parameter_or(name, Parameter(name, default, [])).value
        return node.get_parameter(name).value
    except ParameterException as exc:
        text = str(exc).rsplit(": ", 1)[0] if str(exc).endswith(f": {name}") else str(exc)
        if "of type 'INTEGER', expecting type 'DOUBLE'" in text:
            text += " (write a double with a decimal point, e.g. 5.0)"
        raise ParameterError(f"parameter {name}: {text}") from None


def message_class(msgtype: str) -> type | None:
    """The rclpy message class of ``"pkg/msg/Name"``; None if it cannot be imported."""
    try:
        package, kind, name = msgtype.split("/")
        cls = getattr(importlib.import_module(f"{package}.{kind}"), name)
        cls.__class__.__import_type_support__()  # fails here, not in create_publisher
    except Exception:  # noqa: BLE001 - ImportError, AttributeError, ValueError, typesupport
        return None
    return cls


def run(node_factory: Callable[..., Node], name: str, args: Sequence[str] | None) -> int:
    """``main`` of a node: init, spin until the node is ``done`` or SIGINT/SIGTERM, clean up.

    The node gets its own context (``node_factory(context=...)``). A ``ParameterError`` or
    ``IoError`` from the node (bad input) prints one line ``<name>: error: ...`` to stderr and
    gives exit code 1, as does a node that ends with ``node.error`` set. A signal stops the
    loop; a node with ``drain(executor)`` then handles what it has already received. A second
    signal raises KeyboardInterrupt. Exit code 0 on a normal end or a signal.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():  # else signal.signal() fails
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    context = rclpy.Context()
    node = None
    code = 0
    try:
        try:
            rclpy.init(args=list(args) if args is not None else sys.argv, context=context,
                       signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # noqa: BLE001 - e.g. malformed --ros-args (RCLError)
            raise ParameterError(f"cannot initialise ROS: {exc}".strip()) from None
        node = node_factory(context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        while not stop.is_set() and not node.done and context.ok():
            executor.spin_once(timeout_sec=0.1)
        if stop.is_set() and hasattr(node, "drain"):
            node.drain(executor)
    except (ParameterError, IoError) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        code = 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        try:
            if node is not None:
                node.destroy_node()
        finally:
            context.try_shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if node is not None and node.error:
        print(f"{name}: error: {node.error}", file=sys.stderr)
        code = 1
    return code

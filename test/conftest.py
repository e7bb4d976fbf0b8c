"""Shared pytest setup.

Tests marked ``ros`` need rclpy and the built interfaces (``state_observer.msg``).
``make test`` sets STATE_OBSERVER_REQUIRE_ROS=1: there a missing ROS stops the run
with an error. Otherwise those tests are skipped, so that core tests also run from
the source tree: ``PYTHONPATH=. .venv/bin/pytest test/test_mbs_*.py``.

Nothing here imports rclpy at module level.
"""

from __future__ import annotations

import os

# One BLAS thread, as the command line does: the models' matrices are small and threads only add
# latency (an 82x82 least-squares solve took 11 ms with two OpenBLAS threads, 1 ms with one).
# Before anything imports NumPy.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402
from typing import Callable, Iterator  # noqa: E402

import pytest  # noqa: E402

REQUIRE_ROS = os.environ.get("STATE_OBSERVER_REQUIRE_ROS") == "1"

# One ROS domain per test session, so parallel sessions on one machine do not talk.
DOMAIN_ID = 1 + os.getpid() % 101


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ros: needs rclpy and the built state_observer.msg")
    # the modules that simulate or process whole drives (about four fifths of the suite's time): `make test
    # ARGS='-m "not slow"'` leaves them out for a quick round while changing code; CI runs everything
    config.addinivalue_line("markers", "slow: simulates or processes whole drives")
    # lark (used by rosidl's parser inside rclpy) imports the deprecated sre_* modules.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:lark.utils")


def _ros_unavailable() -> str | None:
    try:
        import rclpy  # noqa: F401
        import state_observer.msg  # noqa: F401
    except ImportError as exc:
        return f"ROS 2 not available: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ros_items = [item for item in items if item.get_closest_marker("ros")]
    reason = _ros_unavailable() if ros_items else None
    if reason is None:
        return
    if REQUIRE_ROS:
        pytest.exit(f"{reason} (STATE_OBSERVER_REQUIRE_ROS=1: run `make test`, "
                    "which bootstraps and builds first)", returncode=1)
    for item in ros_items:
        item.add_marker(pytest.mark.skip(reason=reason))


class RosHarness:
    """Nodes on one private rclpy context, spun by one executor."""

    def __init__(self, context) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.context = context
        self.executor = SingleThreadedExecutor(context=context)
        self._nodes: list = []

    def node(self, name: str):
        """Create a node on the harness's context and add it to the executor."""
        from rclpy.node import Node

        node = Node(name, context=self.context)
        self.executor.add_node(node)
        self._nodes.append(node)
        return node

    def spin_until(self, predicate: Callable[[], bool], timeout_s: float = 20.0) -> bool:
        """Spin until ``predicate()`` is true; False after ``timeout_s``.

        The timeout only keeps a broken test from hanging; tests assert on the
        returned flag, never on how long it took.
        """
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                return False
            self.executor.spin_once(timeout_sec=0.05)
        return True

    def close(self) -> None:
        for node in self._nodes:
            self.executor.remove_node(node)
            node.destroy_node()
        self._nodes.clear()
        self.executor.shutdown()


@pytest.fixture(scope="session")
def ros_environment() -> Iterator[int]:
    """Private DDS domain and localhost-only discovery, set before any rclpy.init."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # Jazzy and later
        if os.environ.get("ROS_DISTRO") == "humble":
            patch.setenv("ROS_LOCALHOST_ONLY", "1")
        yield DOMAIN_ID


@pytest.fixture
def ros(ros_environment: int) -> Iterator[RosHarness]:
    """A fresh rclpy context for one test; nodes and context are torn down after it."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_environment)
    harness = RosHarness(context)
    try:
        yield harness
    finally:
        harness.close()
        rclpy.shutdown(context=context)

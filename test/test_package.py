"""Packaging: package.xml, setup.py and the bootstrap requirements agree with the code,
and the colcon build installed what it should (under ``make test``, the tests themselves
run against that installed copy)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_PACKAGE = REPO / "state_observer"

# Top-level Python module -> rosdep key in package.xml. A module not listed here is
# taken to be a ROS 2 package of the same name (rclpy, sensor_msgs, ...).
PYTHON_MODULE_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "numba": "python3-numba",
    "matplotlib": "python3-matplotlib",
    "rosbags": "python3-rosbags-pip",
    "tqdm": "python3-tqdm",
    "transforms3d": "python3-transforms3d",
}
# Optional Python modules with no rosdep key (rosdistro's python.yaml has none): not in package.xml, but a setup.py
# extra (module -> pip distribution) and in scripts/requirements.txt, so the bootstrap installs them. On a ROS 2 install,
# `pip install foxglove-sdk` adds `state-observer foxglove`; the live node's topics go through the ROS package foxglove_bridge.
OPTIONAL_PIP_ONLY = {"foxglove": "foxglove-sdk", "distributed": "distributed"}  # distributed: Dask's cluster client
# ROS packages of real installs only (no PyPI wheels, ARCHITECTURE.md 2): the launch files and RViz need them;
# checked only where a ROS 2 distribution is sourced.
INSTALL_ONLY = {"launch", "launch_ros", "rviz2"}
# rosdep key -> pip distribution (setup.py install_requires, scripts/requirements.txt).
PIP_NAMES = {
    "python3-numpy": "numpy",
    "python3-scipy": "scipy",
    "python3-numba": "numba",
    "python3-yaml": "pyyaml",
    "python3-matplotlib": "matplotlib",
    "python3-rosbags-pip": "rosbags",
    "python3-tqdm": "tqdm",
    "python3-transforms3d": "transforms3d",
}


def manifest():
    from catkin_pkg.package import parse_package

    return parse_package(str(REPO / "package.xml"))


def names(deps) -> set[str]:
    return {dep.name for dep in deps}


def imported_modules() -> set[str]:
    """Top-level modules imported anywhere in state_observer/ (source tree)."""
    found = set()
    for path in SOURCE_PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"state_observer", "__future__"}


def requirement_names(path: Path) -> set[str]:
    """Distribution names in a pip requirements file (no versions, extras or -r lines)."""
    out = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            out.add(re.split(r"[\[<>=!~; ]", line)[0].lower())
    return out


def setup_install_requires() -> set[str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "INSTALL_REQUIRES":
            return {name.lower() for name in ast.literal_eval(node.value)}
    raise AssertionError("setup.py has no INSTALL_REQUIRES list")


def test_manifest():
    pkg = manifest()
    pkg.validate()
    assert pkg.name == "state_observer"
    assert pkg.package_format == 3
    assert pkg.get_build_type() == "ament_cmake"
    assert pkg.licenses == ["Apache-2.0"]
    assert names(pkg.member_of_groups) == {"rosidl_interface_packages"}
    assert {"ament_cmake", "ament_cmake_python", "rosidl_default_generators"} <= names(
        pkg.buildtool_depends)
    assert "rosidl_default_runtime" in names(pkg.exec_depends)
    assert "python3-pytest" in names(pkg.test_depends)


def test_manifest_declares_every_import():
    run_keys = names(manifest().exec_depends)
    missing = {module: PYTHON_MODULE_KEYS.get(module, module)
               for module in imported_modules() - set(OPTIONAL_PIP_ONLY)
               if PYTHON_MODULE_KEYS.get(module, module) not in run_keys}
    assert not missing, f"imported by state_observer/ but not an exec_depend in package.xml: {missing}"


def test_message_dependencies_are_build_dependencies():
    """Packages whose types msg/*.msg use must be found when building (build_depend)."""
    pkg = manifest()
    used = set()
    for path in (REPO / "msg").glob("*.msg"):
        used.update(re.findall(r"^\s*(\w+)/\w+", path.read_text(), flags=re.M))
    assert used <= names(pkg.build_depends)
    assert used <= names(pkg.exec_depends)


def test_subpackages_have_init():
    """setup.py's find_packages() (pip install .) only sees folders with __init__.py."""
    folders = {path.parent for path in SOURCE_PACKAGE.rglob("*.py")}
    missing = sorted(str(folder.relative_to(REPO)) for folder in folders
                     if not (folder / "__init__.py").is_file())
    assert not missing, f"no __init__.py (pip install . would leave them out): {missing}"


def test_versions_agree():
    import state_observer

    setup_version = re.search(r'version="([^"]+)"', (REPO / "setup.py").read_text()).group(1)
    assert manifest().version == setup_version == state_observer.__version__


def test_python_dependencies_agree():
    """setup.py, scripts/requirements.txt and package.xml name the same core libraries."""
    install_requires = setup_install_requires()
    manifest_pip = {PIP_NAMES[key] for key in names(manifest().exec_depends) if key in PIP_NAMES}
    assert install_requires == manifest_pip
    assert install_requires <= requirement_names(REPO / "scripts" / "requirements.txt")
    wheels = REPO / "scripts" / "requirements-ros-wheels.txt"
    assert "-r requirements.txt" in wheels.read_text()


def test_optional_dependencies_are_setup_extras_installed_by_the_bootstrap():
    tree = ast.parse((REPO / "setup.py").read_text())
    extras = next(ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign) and node.targets[0].id == "EXTRAS_REQUIRE")
    in_extras = {name.lower() for names_ in extras.values() for name in names_}
    assert set(OPTIONAL_PIP_ONLY.values()) <= in_extras
    assert set(OPTIONAL_PIP_ONLY.values()) <= requirement_names(REPO / "scripts" / "requirements.txt")
    assert set(OPTIONAL_PIP_ONLY) <= imported_modules()  # none is left over


def test_ros_wheels_cover_runtime_dependencies():
    """Every ROS package the node code may need at run time is in the wheel list (or, for those, is pulled in by a
    listed wheel; checked on the built env below), or is built by the bootstrap beside the package (scripts/<name>,
    in the install: tf2_msgs, which has no wheel)."""
    wheels = requirement_names(REPO / "scripts" / "requirements-ros-wheels.txt")
    transitive = {"builtin_interfaces", "rosidl_default_runtime"}
    built_here = {p.parent.name for p in (REPO / "scripts").glob("*/package.xml")}
    assert built_here == {"tf2_msgs"}
    ros_runtime = {key for key in names(manifest().exec_depends)
                   if not key.startswith("python3-")} - transitive - INSTALL_ONLY
    missing = {key for key in ros_runtime if "ros-" + key.replace("_", "-") not in wheels} - built_here
    assert not missing


@pytest.mark.ros
def test_the_bootstraps_tf2_msgs_is_the_distributions_message():
    """The TFMessage the bootstrap builds (scripts/tf2_msgs) is the one of ROS 2: the same type hash as Jazzy's and
    Kilted's tf2_msgs (as `ros2 topic info -v /tf` prints it and rosidl's golden-hash tests hold it), and what rosbags
    serialises with Kilted's definition rclpy reads, and the other way round."""
    import json

    from ament_index_python.packages import get_package_share_directory
    from rclpy.serialization import deserialize_message, serialize_message
    from tf2_msgs.msg import TFMessage

    from state_observer.io.convert import TF_MESSAGE, make_typestore, tf_msg

    path = Path(get_package_share_directory("tf2_msgs")) / "msg" / "TFMessage.json"
    if not path.exists():
        pytest.skip("no type descriptions before Jazzy (Humble)")
    description = json.loads(path.read_text())
    assert description["type_hashes"][0] == {"type_name": TF_MESSAGE,
                                             "hash_string": "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"}
    assert TFMessage.get_fields_and_field_types() == {"transforms": "sequence<geometry_msgs/TransformStamped>"}
    store = make_typestore(distro="kilted")
    data = bytes(store.serialize_cdr(tf_msg([(5_000_000_123, "odom", "base_link", (1.0, 2.0, 3.0), (0.5, 0.5, 0.5, 0.5))], store), TF_MESSAGE))
    (t,) = deserialize_message(data, TFMessage).transforms
    assert (t.header.frame_id, t.child_frame_id, t.header.stamp.nanosec, t.transform.translation.y) == ("odom", "base_link", 123, 2.0)
    back = store.deserialize_cdr(serialize_message(deserialize_message(data, TFMessage)), TF_MESSAGE).transforms[0]  # and back
    assert (back.child_frame_id, back.header.stamp.sec, back.transform.rotation.w) == ("base_link", 5, 0.5)


def test_cli_help():
    from state_observer import cli

    parser = cli.build_parser()
    assert parser.prog == "state-observer"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0


def test_cli_does_not_import_ros():
    code = ("import sys, state_observer.cli as c; c.build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'state_observer')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['state_observer', 'state_observer.cli']"


# --- the built package (make test) ---------------------------------------------------

@pytest.mark.ros
def test_imports_come_from_install():
    import state_observer
    import state_observer.cli
    import state_observer.msg as msg

    installed = REPO / "install"
    assert Path(state_observer.__file__).resolve().is_relative_to(installed), state_observer.__file__
    assert Path(state_observer.cli.__file__).resolve().is_relative_to(installed)
    assert Path(msg.__file__).parent.parent == Path(state_observer.__file__).parent
    for name in ("TireForces", "WheelForce", "VehicleParameters", "ObserverState"):
        assert hasattr(msg, name), name


@pytest.mark.ros
def test_ros_runtime_dependencies_installed():
    from ament_index_python.packages import get_package_share_directory

    real_install = bool(os.environ.get("ROS_DISTRO"))
    for key in names(manifest().exec_depends):
        if not key.startswith("python3-") and (real_install or key not in INSTALL_ONLY):
            get_package_share_directory(key)  # raises if the package is not installed


@pytest.mark.ros
def test_installed_layout():
    from ament_index_python.packages import get_package_prefix

    prefix = Path(get_package_prefix("state_observer"))
    assert prefix.resolve().is_relative_to(REPO / "install")
    share = prefix / "share" / "state_observer"
    assert (share / "package.xml").is_file()
    for name in ("TireForces", "WheelForce", "VehicleParameters", "ObserverState"):
        assert (share / "msg" / f"{name}.msg").is_file()

    executable = prefix / "lib" / "state_observer" / "state-observer"
    assert os.access(executable, os.X_OK)
    interpreter = executable.read_text().splitlines()[0].removeprefix("#!")
    assert Path(interpreter).name.startswith("python")
    on_path = shutil.which("state-observer")
    assert on_path and Path(on_path).resolve().is_relative_to(prefix.resolve())

    result = subprocess.run([str(executable), "bench", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "--json" in result.stdout
    # a process spawned by Dask's nanny or multiprocessing imports the main script as __mp_main__: it must not run
    # the command again (it did: `make bench` ran twice over and its local cluster never started)
    for script in (executable, prefix / "lib" / "state_observer" / "observer_node"):
        code = f"import runpy; runpy.run_path({str(script)!r}, run_name='__mp_main__'); print('imported')"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and result.stdout == "imported\n", (script, result.stdout, result.stderr)


def test_colcon_test_runs_the_pytest_suite(tmp_path):
    """`colcon test` runs CTest in the package's build folder; CMakeLists.txt registers the pytest suite there (issue
    16). Run that registration with one test selected, the way colcon does, and read the JUnit file it must leave."""
    build = REPO / "build" / "state_observer"
    if not (build / "CTestTestfile.cmake").is_file() or shutil.which("ctest") is None:
        pytest.skip("no colcon build folder (make bootstrap makes one) or no ctest")
    env = dict(os.environ, PYTEST_ADDOPTS="-k test_versions_agree -p no:cacheprovider")
    result = subprocess.run(["ctest", "--test-dir", str(build), "-R", "^pytest$", "--output-on-failure"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    [junit] = (build / "test_results" / "state_observer").glob("pytest*.xml")
    assert 'tests="1"' in junit.read_text() and 'failures="0"' in junit.read_text()

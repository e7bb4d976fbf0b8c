"""Launch files (launch/*.launch.py), checked by parsing them: `launch` and `launch_ros` are
not installed here, so nothing is imported or run.

Checked: each file defines generate_launch_description; every Node names an installed
executable (ours: CMakeLists.txt's node list and setup.py's NODES; others: rviz2); every
file named through FindPackageShare("state_observer") exists and is installed; every
declared argument is used and every used one is declared (or passed by an including file);
every launch argument passed to an included file is one that file takes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
LAUNCH_DIR = REPO / "launch"
PACKAGE = "state_observer"
LAUNCH_FILES = ("observer.launch.py", "replay.launch.py", "observer_fpga.launch.py")
# Executables of other packages a launch file may start: package -> executables.
EXTERNAL_EXECUTABLES = {"rviz2": {"rviz2"}}


def cmake_text() -> str:
    return (REPO / "CMakeLists.txt").read_text()


def cmake_executables() -> set[str]:
    match = re.search(r"foreach\(node\s+([^)]*)\)", cmake_text())
    assert match, "CMakeLists.txt: no foreach(node ...) list of node executables"
    return set(match.group(1).split())


def cmake_share_dirs() -> set[str]:
    """Folders installed by install(DIRECTORY ... DESTINATION share/${PROJECT_NAME})."""
    found = set()
    for match in re.finditer(r"install\(DIRECTORY\s+([^)]*?)\s+DESTINATION\s+"
                             r"share/\$\{PROJECT_NAME\}", cmake_text()):
        found.update(word.rstrip("/") for word in match.group(1).split())
    return found


def setup_nodes() -> set[str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "NODES" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("setup.py defines no NODES")


# --- reading a launch file ------------------------------------------------------------------


@dataclass
class LaunchInfo:
    has_generate: bool = False
    declared: dict[str, bool] = field(default_factory=dict)  # name -> has a default value
    described: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)  # LaunchConfiguration names
    nodes: list[dict] = field(default_factory=list)  # constant keywords of each Node(...)
    share_paths: list[tuple[str, ...]] = field(default_factory=list)  # under share/<PACKAGE>
    other_shares: list[str] = field(default_factory=list)  # FindPackageShare of other packages
    includes: list[tuple[str, dict]] = field(default_factory=list)  # (file name, launch args)
    problems: list[str] = field(default_factory=list)


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _const(node) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _keyword(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _first_str_arg(call: ast.Call, keyword: str) -> str | None:
    node = call.args[0] if call.args else _keyword(call, keyword)
    value = _const(node)
    return value if isinstance(value, str) else None


def _resolve(node, assigned: dict[str, ast.AST]):
    """Follow a plain variable to the expression assigned to it (e.g. share = FindPackageShare(...))."""
    while isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    return node


def _share_path(call: ast.Call, assigned) -> tuple[str, tuple[str, ...]] | None:
    """PathJoinSubstitution([FindPackageShare("pkg"), "a", "b"]) -> ("pkg", ("a", "b"))."""
    if not call.args or not isinstance(call.args[0], (ast.List, ast.Tuple)):
        return None
    parts = [_resolve(element, assigned) for element in call.args[0].elts]
    if not parts or not (isinstance(parts[0], ast.Call) and _name(parts[0]) == "FindPackageShare"):
        return None
    package = _first_str_arg(parts[0], "package")
    rest = [_const(part) for part in parts[1:]]
    if package is None or not all(isinstance(part, str) for part in rest):
        return None
    return package, tuple(rest)


def read_launch(text: str, filename: str = "<launch>") -> LaunchInfo:
    info = LaunchInfo()
    tree = ast.parse(text, filename=filename)
    info.has_generate = any(isinstance(node, ast.FunctionDef)
                            and node.name == "generate_launch_description" for node in tree.body)
    assigned = {target.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        kind = _name(call)
        if kind == "DeclareLaunchArgument":
            name = _first_str_arg(call, "name")
            if name is None:
                info.problems.append(f"{filename}: DeclareLaunchArgument without a literal name")
            elif name in info.declared:
                info.problems.append(f"{filename}: argument {name!r} declared twice")
            else:
                info.declared[name] = _keyword(call, "default_value") is not None
                if _const(_keyword(call, "description")):
                    info.described.add(name)
        elif kind == "LaunchConfiguration":
            name = _first_str_arg(call, "variable_name")
            if name is None:
                info.problems.append(f"{filename}: LaunchConfiguration without a literal name")
            else:
                info.used.add(name)
        elif kind == "Node":
            info.nodes.append({kw.arg: _const(kw.value) for kw in call.keywords if kw.arg})
        elif kind == "PathJoinSubstitution":
            found = _share_path(call, assigned)
            if found and found[0] == PACKAGE:
                info.share_paths.append(found[1])
            elif found:
                info.other_shares.append(found[0])
        elif kind == "IncludeLaunchDescription":
            info.includes.append(_include(call, assigned, filename, info))
    return info


def _include(call: ast.Call, assigned, filename: str, info: LaunchInfo) -> tuple[str, dict]:
    """(included file name, {launch argument: constant value or None})."""
    included = ""
    for node in ast.walk(call):
        if isinstance(node, ast.Call) and _name(node) == "PathJoinSubstitution":
            found = _share_path(node, assigned)
            if found and found[0] == PACKAGE and found[1][:1] == ("launch",):
                included = found[1][-1]
    if not included:
        info.problems.append(f"{filename}: IncludeLaunchDescription of no launch/ file of "
                             f"{PACKAGE} (expected FindPackageShare path)")
    arguments = {}
    node = _keyword(call, "launch_arguments")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "items" and isinstance(node.func.value, ast.Dict):
        node = node.func.value
        for key, value in zip(node.keys, node.values):
            arguments[_const(key)] = _const(value)
    elif node is not None:
        info.problems.append(f"{filename}: launch_arguments must be a literal {{...}}.items()")
    return included, arguments


# --- checks over a set of launch files ------------------------------------------------------


def check_launch_files(infos: dict[str, LaunchInfo]) -> list[str]:
    """Problems of launch files {file name: info}, except missing files (see share_files)."""
    problems = [p for info in infos.values() for p in info.problems]
    executables = cmake_executables() & setup_nodes()
    share_dirs = cmake_share_dirs()
    passed_to: dict[str, set[str]] = {}
    for filename, info in infos.items():
        for included, arguments in info.includes:
            passed_to.setdefault(included, set()).update(arguments)
            if included and included not in infos:
                problems.append(f"{filename}: includes unknown launch file {included}")
                continue
            if not included:
                continue
            target = infos[included]
            for name in arguments:
                if name not in target.declared and name not in target.used:
                    problems.append(f"{filename}: passes {name!r} to {included}, "
                                    "which does not use it")
            for name, has_default in target.declared.items():
                if not has_default and name not in arguments:
                    problems.append(f"{filename}: does not pass required argument {name!r} "
                                    f"of {included}")
    for filename, info in infos.items():
        if not info.has_generate:
            problems.append(f"{filename}: no generate_launch_description()")
        for name in sorted(set(info.declared) - info.used):
            problems.append(f"{filename}: argument {name!r} declared but never used")
        for name in sorted(info.declared.keys() - info.described):
            problems.append(f"{filename}: argument {name!r} has no description")
        for name in sorted(info.used - set(info.declared) - passed_to.get(filename, set())):
            problems.append(f"{filename}: LaunchConfiguration {name!r} is neither declared "
                            "nor passed by an including file")
        for node in info.nodes:
            package, executable = node.get("package"), node.get("executable")
            if package == PACKAGE:
                if executable not in executables:
                    problems.append(f"{filename}: executable {executable!r} is not installed "
                                    f"by CMakeLists.txt and setup.py NODES ({sorted(executables)})")
            elif executable not in EXTERNAL_EXECUTABLES.get(package, ()):
                problems.append(f"{filename}: Node(package={package!r}, "
                                f"executable={executable!r}) is not a known executable")
        for parts in info.share_paths:
            if not parts or parts[0] not in share_dirs:
                problems.append(f"{filename}: share/{PACKAGE}/{'/'.join(parts)} is not in a "
                                f"folder installed by CMakeLists.txt ({sorted(share_dirs)})")
        for package in info.other_shares:
            problems.append(f"{filename}: FindPackageShare({package!r}) of another package")
    return problems


def load_infos() -> dict[str, LaunchInfo]:
    return {name: read_launch((LAUNCH_DIR / name).read_text(), name)
            for name in LAUNCH_FILES if (LAUNCH_DIR / name).is_file()}


def share_files() -> list[str]:
    """Every file under share/<PACKAGE> the launch files name, as repo-relative paths."""
    return sorted({"/".join(parts) for info in load_infos().values()
                   for parts in info.share_paths})


# --- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_launch_file_parses_and_defines_generate_launch_description(name):
    path = LAUNCH_DIR / name
    assert path.is_file(), f"missing {path}"
    assert read_launch(path.read_text(), name).has_generate, name


def test_launch_files_are_consistent():
    assert check_launch_files(load_infos()) == []


@pytest.mark.parametrize("relative", share_files())
def test_named_share_file_exists(relative):
    path = REPO / relative
    assert path.is_file(), (f"{path} does not exist; the launch files use it as "
                            f"share/{PACKAGE}/{relative}")


def test_expected_arguments():
    infos = load_infos()
    assert infos["observer.launch.py"].declared == {
        "params_file": True, "vehicle": True, "use_sim_time": True, "rviz": True, "namespace": True, "log_level": True}
    assert infos["replay.launch.py"].declared == {
        "bag": False, "rate": True, "loop": True, "params_file": True, "vehicle": True,
        "rviz": True, "namespace": True}
    assert infos["observer_fpga.launch.py"].declared == {"backend": True, "backend_fallback": True}
    # replay runs the observer on the bag's clock
    [(included, arguments)] = infos["replay.launch.py"].includes
    assert included == "observer.launch.py" and arguments["use_sim_time"] == "true"
    [(included, arguments)] = infos["observer_fpga.launch.py"].includes
    assert included == "observer.launch.py"
    assert set(arguments) == {"solver_backend", "backend_fallback"}


def test_observer_node_name_matches_params_file():
    """The params file is keyed by node name: a different name silently loses the parameters."""
    [node] = [n for n in load_infos()["observer.launch.py"].nodes
              if n.get("executable") == "observer_node"]
    assert node["name"] == "observer_node"
    params = REPO / "config" / "observer.yaml"
    if params.is_file():
        assert "ros__parameters" in yaml.safe_load(params.read_text())["observer_node"]


BAD_LAUNCH = '''
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare("state_observer")
    return LaunchDescription([
        DeclareLaunchArgument("unused", default_value="1", description="never used"),
        DeclareLaunchArgument("undescribed", default_value="x"),
        Node(package="state_observer", executable="no_such_node",
             parameters=[LaunchConfiguration("undeclared"), LaunchConfiguration("undescribed")]),
        Node(package="rviz2", executable="rqt"),
        Node(package="state_observer", executable="observer_node",
             arguments=["-d", PathJoinSubstitution([share, "maps", "x.yaml"])]),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([share, "launch", "replay.launch.py"])),
            launch_arguments={"rate": "2.0", "speed": "2.0"}.items()),
    ])
'''


def test_checker_rejects_a_bad_launch_file():
    infos = {"replay.launch.py": read_launch((LAUNCH_DIR / "replay.launch.py").read_text()),
             "bad.launch.py": read_launch(BAD_LAUNCH, "bad.launch.py")}
    problems = "\n".join(check_launch_files(infos))
    for expected in ("argument 'unused' declared but never used",
                     "argument 'undescribed' has no description",
                     "LaunchConfiguration 'undeclared' is neither declared",
                     "executable 'no_such_node' is not installed",
                     "Node(package='rviz2', executable='rqt') is not a known executable",
                     "share/state_observer/maps/x.yaml is not in a folder installed",
                     "passes 'speed' to replay.launch.py, which does not use it",
                     "does not pass required argument 'bag' of replay.launch.py"):
        assert expected in problems, f"checker missed: {expected}\n{problems}"
    assert "'rate'" not in problems  # a real argument of replay.launch.py
    assert "no generate_launch_description" not in problems
    assert "no generate_launch_description" in "\n".join(
        check_launch_files({"empty.launch.py": read_launch("x = 1", "empty.launch.py")}))


def _default(launch_file: str, argument: str) -> str:
    tree = ast.parse((LAUNCH_DIR / launch_file).read_text())
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "DeclareLaunchArgument"
                and isinstance(call.args[0], ast.Constant) and call.args[0].value == argument):
            return ast.literal_eval(_keyword(call, "default_value"))
    raise AssertionError(f"{launch_file}: no argument {argument}")


def test_defaults_fit_a_car_computer():
    """Headless by default; the FPGA launch falls back to the C model rather than refusing to start (issue 16)."""
    assert _default("observer.launch.py", "rviz") == "false"
    assert _default("observer.launch.py", "namespace") == "" and _default("observer.launch.py", "log_level") == "info"
    assert _default("observer_fpga.launch.py", "backend_fallback") == "true"

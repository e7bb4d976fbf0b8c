"""The layers of ARCHITECTURE.md section 3, checked on the source: the core (mbs/, vehicle/, sensors/, estimation/) and
the ground floor (conventions, errors, paths) import neither the simulator (sim/) nor rclpy or the generated messages,
not even inside a function."""
import ast
from pathlib import Path

import pytest

import state_observer

PACKAGE = Path(state_observer.__file__).parent
CORE = ("mbs", "vehicle", "sensors", "estimation")
GROUND = ("conventions.py", "errors.py", "paths.py")
FORBIDDEN = ("state_observer.sim", "state_observer.ros", "state_observer.msg", "rclpy")


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module a file imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def core_files():
    files = [p for layer in CORE for p in sorted((PACKAGE / layer).rglob("*.py"))]
    return files + [PACKAGE / name for name in GROUND]


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_imports_neither_the_simulator_nor_ros(path):
    bad = sorted(m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_check_sees_relative_imports():
    """The scan resolves ``from ..sim.x import y`` in a core module to state_observer.sim.x (it would have caught the
    imports this test was written against)."""
    probe = PACKAGE / "estimation" / "online.py"
    assert "state_observer.vehicle.state.VehicleState" in imported_modules(probe)
    assert "state_observer.conventions.quaternion_to_matrix" in imported_modules(probe)

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
    probe = PACKAGE / "estimation" / "outputs.py"
    assert "state_observer.vehicle.state.VehicleState" in imported_modules(probe)
    assert "state_observer.conventions.quaternion_to_matrix" in imported_modules(probe)


NAMEDTUPLE_API = {"_replace", "_fields", "_asdict", "_make", "_field_defaults"}


def private_reads(path: Path) -> list[str]:
    """``x._name`` reads in a file where x is not self or cls and ``_name`` is neither namedtuple API nor defined in the
    same file (a def, class, assignment or attribute assignment): a private attribute of another module's object; and
``from <a module of the package> import _name``."""
    tree = ast.parse(path.read_text(), str(path))
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
    reads = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and node.attr not in NAMEDTUPLE_API and node.attr not in defined
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            reads.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("state_observer")):
            reads += [f"line {node.lineno}: import {alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return reads


def package_files():
    """The package's own modules (not those rosidl generates into msg/ and srv/)."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] not in ("msg", "srv")]


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reads_another_modules_private_attributes(path):
    reads = private_reads(path)
    assert not reads, f"{path.relative_to(PACKAGE)} reads private attributes defined elsewhere: {reads}"

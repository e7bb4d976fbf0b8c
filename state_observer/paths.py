"""Where the package's data files are: message definitions and default configuration.

The same relative layout is looked up under three roots, in this order:

1. ``share/state_observer/`` of a ROS 2 install (colcon build or a sourced distro package),
   found with ``ament_index_python`` when it is importable and the package is on
   ``AMENT_PREFIX_PATH``. rosidl installs ``msg/*.msg`` there, CMakeLists.txt ``config/``.
2. ``state_observer/_share/``: package data of ``pip install .`` (setup.py copies ``msg/`` and
   ``config/`` there when it builds the package).
3. The repository itself (running from the source tree or an editable install): the folder
   holding ``package.xml`` next to this package.

A relative path is resolved under the first root that has the file, so a ROS install built
before a config file existed still finds that file in the source tree. Nothing here imports
rclpy; ``ament_index_python`` is optional.
"""
from __future__ import annotations

from pathlib import Path

from .errors import DataFileNotFoundError

PACKAGE = "state_observer"
MESSAGE_NAMES = ("WheelForce", "TireForces", "VehicleParameters", "ObserverState")
"""The package's own interfaces, in dependency order (WheelForce is used by TireForces)."""

DEFAULT_VEHICLE = "config/vehicles/default.yaml"
DEFAULT_SENSORS = "config/sensors/default.yaml"
FOXGLOVE_LAYOUT = "config/foxglove/state_observer_layout.json"



def _ament_share() -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(PACKAGE))
    except (LookupError, OSError, ValueError):  # not on AMENT_PREFIX_PATH, or it is unset
        return None


def _source_root() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    manifest = root / "package.xml"
    try:
        if manifest.is_file() and f"<name>{PACKAGE}</name>" in manifest.read_text():
            return root
    except OSError:
        return None
    return None


def search_roots() -> list[tuple[str, Path]]:
    """The roots that exist, in lookup order, each with a short label ("ament share", ...)."""
    roots: list[tuple[str, Path]] = []
    share = _ament_share()
    if share is not None:
        roots.append(("ament share", share))
    package_data = Path(__file__).resolve().parent / "_share"
    if package_data.is_dir():
        roots.append(("package data", package_data))
    source = _source_root()
    if source is not None:
        roots.append(("source tree", source))
    return roots


def find_data_file(relative: str | Path) -> Path:
    """Absolute path of a package data file, e.g. ``"msg/TireForces.msg"``.

    Raises
    ------
    DataFileNotFoundError
        If no root has it; the message names the file and every place searched.
    """
    relative = Path(relative)
    roots = search_roots()
    for _, root in roots:
        candidate = root / relative
        if candidate.is_file():
            return candidate
    searched = ", ".join(f"{label} {root}" for label, root in roots) or "no root found"
    raise DataFileNotFoundError(
        f"{relative}: data file of {PACKAGE} not found (searched: {searched}); "
        "build with colcon, `pip install .`, or run from the source tree")


def package_cache_dirs(kind: str) -> list[Path]:
    """``cache/<kind>`` under each root (lookup order): caches filled when the package was built
    (``state-observer prepare``, run by scripts/bootstrap.sh), read when the user's cache lacks an entry."""
    return [root / "cache" / kind for _, root in search_roots()]


def message_definition(name: str) -> Path:
    """``.msg`` file of one of this package's interfaces (``name`` as in ``MESSAGE_NAMES``)."""
    if name not in MESSAGE_NAMES:
        raise ValueError(f"unknown message {name!r}; this package defines {', '.join(MESSAGE_NAMES)}")
    return find_data_file(Path("msg") / f"{name}.msg")


def default_vehicle_path() -> Path:
    """The default vehicle description, ``config/vehicles/default.yaml``."""
    return find_data_file(DEFAULT_VEHICLE)


def default_sensors_path() -> Path:
    """The default sensor configuration, ``config/sensors/default.yaml``."""
    return find_data_file(DEFAULT_SENSORS)


def foxglove_layout_path() -> Path:
    """The Foxglove layout of the observer's outputs (:func:`state_observer.foxglove_view.layout`)."""
    return find_data_file(FOXGLOVE_LAYOUT)

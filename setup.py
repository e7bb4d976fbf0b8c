"""Library mode: ``pip install .`` installs the ``state_observer`` Python package and the
``state-observer`` command, without ROS 2 and without the custom message classes
(``state_observer.msg`` exists only in a colcon build); the message definitions and
config files are package data (``state_observer/_share/``) for rosbags and the defaults.

In a ROS 2 workspace colcon builds this package with CMakeLists.txt: package.xml declares
build_type ament_cmake, which takes precedence over this file.
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent

# Same list as scripts/requirements.txt (checked by test/test_package.py).
INSTALL_REQUIRES = ["numpy", "scipy", "numba", "pyyaml", "rosbags", "transforms3d", "matplotlib", "tqdm"]
# optional: `state-observer foxglove` and fleets on a Dask cluster (`process --cluster`, `evaluate --cluster`);
# neither has a rosdep key, so they are not in package.xml
EXTRAS_REQUIRE = {"foxglove": ["foxglove-sdk"], "cluster": ["distributed"]}


# Node executables (state_observer/ros/<node>.py, also installed by CMakeLists.txt).
NODES = ("observer_node", "bag_player", "bag_recorder", "foxglove_relay")


class BuildPyWithShare(build_py):
    """Also copy msg/*.msg and config/ into state_observer/_share/ of the built package:
    the layout of a ROS install's share/state_observer/, where state_observer.paths looks
    when there is no ROS install (MANIFEST.in puts them into the sdist)."""

    def run(self):
        super().run()
        share = Path(self.build_lib) / "state_observer" / "_share"
        sources = sorted((HERE / "msg").glob("*.msg"))
        if (HERE / "config").is_dir():
            sources += sorted(p for p in (HERE / "config").rglob("*")
                              if p.is_file() and "__pycache__" not in p.parts)
        for source in sources:
            self.mkpath(str((share / source.relative_to(HERE)).parent))
            self.copy_file(str(source), str(share / source.relative_to(HERE)))


setup(
    name="state_observer",
    version="0.1.0",  # same as package.xml and state_observer/__init__.py (tested)
    description="Vehicle state, tire-force and parameter observer (multibody model + errorEKF)",
    license="Apache-2.0",
    packages=find_packages(include=["state_observer", "state_observer.*"]),
    # the Gauss-Jordan kernel's C++/HLS sources: the C backend compiles them at first use
    package_data={"state_observer.accel": ["hls/*.cpp", "hls/*.h", "hls/*.tcl"]},
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": [
        "state-observer = state_observer.cli:main",
        # rclpy nodes (need a ROS 2 install; ``ros2 run`` uses the colcon build's copies)
        *(f"{node} = state_observer.ros.{node}:main" for node in NODES),
    ]},
    cmdclass={"build_py": BuildPyWithShare},
)

"""Library mode: ``pip install .`` installs the ``state_observer`` Python package and the
``state-observer`` command, without ROS 2 and without the custom messages
(``state_observer.msg`` exists only in a colcon build).

In a ROS 2 workspace colcon builds this package with CMakeLists.txt: package.xml declares
build_type ament_cmake, which takes precedence over this file.
"""

from setuptools import find_packages, setup

# Same list as scripts/requirements.txt (checked by test/test_package.py).
INSTALL_REQUIRES = ["numpy", "scipy", "pyyaml", "rosbags", "transforms3d", "matplotlib"]

setup(
    name="state_observer",
    version="0.1.0",  # same as package.xml and state_observer/__init__.py (tested)
    description="Vehicle state, tire-force and parameter observer (multibody model + errorEKF)",
    license="Apache-2.0",
    packages=find_packages(include=["state_observer", "state_observer.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    entry_points={"console_scripts": ["state-observer = state_observer.cli:main"]},
)

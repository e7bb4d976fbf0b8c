"""Run the state observer with its filter solver on an FPGA (PYNQ overlay) or another backend.

    ros2 launch state_observer observer_fpga.launch.py
    ros2 launch state_observer observer_fpga.launch.py backend:=c
    ros2 launch state_observer observer_fpga.launch.py backend_fallback:=false

Includes observer.launch.py, so its arguments (params_file, vehicle, use_sim_time, rviz,
namespace, log_level)
apply here too, and passes the node parameters solver_backend and backend_fallback.
By default (backend_fallback:=true) a node that finds no FPGA board or overlay uses the C model
of the same kernel and says so; with backend_fallback:=false it refuses to start instead.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare("state_observer")
    return LaunchDescription([
        DeclareLaunchArgument(
            "backend",
            default_value="pynq",
            choices=["pynq", "c", "numpy"],
            description="Filter solver backend: pynq (FPGA overlay), c (C model) or numpy.",
        ),
        DeclareLaunchArgument(
            "backend_fallback",
            default_value="true",
            choices=["true", "false"],
            description="When no FPGA board or overlay exists: false = refuse to start, "
                        "true = use the C model.",
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([share, "launch", "observer.launch.py"])),
            launch_arguments={
                "solver_backend": LaunchConfiguration("backend"),
                "backend_fallback": LaunchConfiguration("backend_fallback"),
            }.items(),
        ),
    ])

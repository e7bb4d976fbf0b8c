"""Replay a rosbag2 through the state observer.

    ros2 launch state_observer replay.launch.py bag:=/path/to/bag rate:=2.0 loop:=true

bag_player publishes the bag's topics and /clock (on wall time itself); the observer
(observer.launch.py, included with use_sim_time:=true) and RViz run on the bag's clock.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare("state_observer")
    return LaunchDescription([
        DeclareLaunchArgument(
            "bag",
            description="rosbag2 to replay (folder or storage file).",
        ),
        DeclareLaunchArgument(
            "rate",
            default_value="1.0",
            description="Playback rate (1.0 = real time).",
        ),
        DeclareLaunchArgument(
            "loop",
            default_value="false",
            choices=["true", "false"],
            description="Restart the bag when it ends.",
        ),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([share, "config", "observer.yaml"]),
            description="Parameter file of the observer node (top-level key observer_node).",
        ),
        DeclareLaunchArgument(
            "vehicle",
            default_value="",
            description="Vehicle description YAML; overrides the params file's vehicle_file "
                        "when not empty.",
        ),
        DeclareLaunchArgument(
            "rviz",
            default_value="true",
            choices=["true", "false"],
            description="Start RViz with rviz/state_observer.rviz (replaying is a desktop task).",
        ),
        DeclareLaunchArgument(
            "namespace",
            default_value="",
            description="Namespace of the player, the observer and their topics (empty: none).",
        ),
        Node(
            package="state_observer",
            executable="bag_player",
            name="bag_player",
            namespace=LaunchConfiguration("namespace"),
            output="screen",
            parameters=[{
                # Typed: a bag named "2024" is still a string, rate "2" still a double.
                "bag": ParameterValue(LaunchConfiguration("bag"), value_type=str),
                "rate": ParameterValue(LaunchConfiguration("rate"), value_type=float),
                "loop": ParameterValue(LaunchConfiguration("loop"), value_type=bool),
                "publish_clock": True,
                "use_sim_time": False,  # the player makes the clock
            }],
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([share, "launch", "observer.launch.py"])),
            launch_arguments={
                "params_file": LaunchConfiguration("params_file"),
                "vehicle": LaunchConfiguration("vehicle"),
                "rviz": LaunchConfiguration("rviz"),
                "namespace": LaunchConfiguration("namespace"),
                "use_sim_time": "true",
            }.items(),
        ),
    ])

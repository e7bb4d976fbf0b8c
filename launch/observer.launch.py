"""Run the state observer node, optionally with RViz.

    ros2 launch state_observer observer.launch.py
    ros2 launch state_observer observer.launch.py vehicle:=/path/to/vehicle.yaml rviz:=true
    ros2 launch state_observer observer.launch.py namespace:=car1 log_level:=debug

RViz is off by default (a car computer is headless); ``rviz:=true`` starts it. ``namespace``
puts the node and its topics under ``/<namespace>`` (several cars on one network);
``log_level`` is the node's logger level (debug, info, warn, error, fatal).

The node reads its parameters from ``params_file`` (default: the installed
config/observer.yaml, key ``observer_node``). ``vehicle`` overrides that file's
``vehicle_file`` only when it is not empty; otherwise the file's value (or the node's
default vehicle, for "") stays.

Included by replay.launch.py (use_sim_time:=true) and observer_fpga.launch.py, which
passes ``solver_backend`` and ``backend_fallback``: when these are set, they become node
parameters of the same names; launched on its own, this file sets neither.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def _observer_node(context):
    """The observer node; built at launch time so that optional parameters are only
    passed when given (a parameter passed here overrides params_file)."""
    parameters = [
        LaunchConfiguration("params_file"),
        {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)},
    ]
    vehicle = LaunchConfiguration("vehicle").perform(context)
    if vehicle:
        parameters.append({"vehicle_file": vehicle})
    backend = LaunchConfiguration("solver_backend", default="").perform(context)
    if backend:
        fallback = LaunchConfiguration("backend_fallback", default="false").perform(context)
        parameters.append({
            "solver_backend": backend,
            "backend_fallback": fallback.strip().lower() in ("true", "1"),
        })
    return [Node(
        package="state_observer",
        executable="observer_node",
        name="observer_node",  # the key in config/observer.yaml
        namespace=LaunchConfiguration("namespace"),
        output="screen",
        parameters=parameters,
        arguments=["--ros-args", "--log-level", LaunchConfiguration("log_level")],
    )]


def generate_launch_description():
    share = FindPackageShare("state_observer")
    return LaunchDescription([
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
            "use_sim_time",
            default_value="false",
            choices=["true", "false"],
            description="Use /clock (true when replaying a bag).",
        ),
        DeclareLaunchArgument(
            "rviz",
            default_value="false",
            choices=["true", "false"],
            description="Start RViz with rviz/state_observer.rviz (off: a car computer is headless).",
        ),
        DeclareLaunchArgument(
            "namespace",
            default_value="",
            description="Namespace of the node and its topics (empty: none).",
        ),
        DeclareLaunchArgument(
            "log_level",
            default_value="info",
            choices=["debug", "info", "warn", "error", "fatal"],
            description="Logger level of the observer node.",
        ),
        OpaqueFunction(function=_observer_node),
        Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            namespace=LaunchConfiguration("namespace"),
            output="log",
            arguments=["-d", PathJoinSubstitution([share, "rviz", "state_observer.rviz"])],
            parameters=[{
                "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
            }],
            condition=IfCondition(LaunchConfiguration("rviz")),
        ),
    ])

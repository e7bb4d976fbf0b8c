"""rclpy nodes: thin adapters between ROS 2 messages and the core (ARCHITECTURE.md 3-4).

- ``observer_node``: sensor topics in, odometry / tire forces / parameters / state / markers /
  diagnostics out, through :class:`state_observer.estimation.online.OnlineObserver`.
- ``bag_player``: publishes a rosbag2 (read with rosbags) with ``/clock``, optionally looped.
- ``bag_recorder``: writes subscribed topics to a rosbag2 (used by ``make demo``).

Only this subpackage imports rclpy.
"""

# bag_recorder logs this once every recorded topic has a publisher; ros/demo waits for it before playing the bag
PUBLISHERS_FOUND = "publishers found on all"

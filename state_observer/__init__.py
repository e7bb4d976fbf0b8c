"""Vehicle state observer: multibody model + error-state EKF (see ARCHITECTURE.md).

Importing the package stays cheap: subpackages are imported where they are used.
In a colcon build the generated interfaces live in ``state_observer.msg``.
"""

__version__ = "0.1.0"

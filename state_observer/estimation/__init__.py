"""Observers: Kalman building blocks and the errorEKF(-FE) of the vehicle (no rclpy)."""

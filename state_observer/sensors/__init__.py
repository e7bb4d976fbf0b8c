"""Measurement models with analytic Jacobians, sample records and geodesy. No ROS imports."""

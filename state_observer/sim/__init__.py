"""The virtual test vehicle: manoeuvres, drivers, sensor synthesis and run records. No ROS imports."""

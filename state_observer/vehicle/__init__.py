"""Vehicle description, tires, road and the multibody vehicle models. No ROS imports."""

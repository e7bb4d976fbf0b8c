"""rosbag2 reading and writing (rosbags), CSV export, conversion between samples and message dicts."""

"""rviz/state_observer.rviz: a well-formed RViz 2 config whose displays show what the observer
node publishes (state_observer.io.convert.OUTPUT_TOPICS), each with a display class that
fits the topic's message type. rviz2 itself is not installed here: the file is parsed."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from state_observer.io.convert import (
    OUTPUT_MSGTYPES,
    OUTPUT_TOPICS,
    TRUTH_MSGTYPES,
    TRUTH_TOPICS,
)

RVIZ = Path(__file__).resolve().parents[1] / "rviz" / "state_observer.rviz"

# Display class -> the message type it subscribes to.
DISPLAY_MSGTYPES = {
    "rviz_default_plugins/Odometry": "nav_msgs/msg/Odometry",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
}
PUBLISHED = {OUTPUT_TOPICS[kind]: OUTPUT_MSGTYPES[kind] for kind in OUTPUT_TOPICS}
# Shown by disabled displays only: ground truth exists in replays of simulated bags.
TRUTH = {TRUTH_TOPICS["odometry"]: TRUTH_MSGTYPES["odometry"]}
QOS_KEYS = {"Value", "Depth", "Durability Policy", "History Policy", "Reliability Policy"}


def load() -> dict:
    return yaml.safe_load(RVIZ.read_text())


def displays(config: dict) -> list[dict]:
    """All displays, including those inside display groups."""
    found, todo = [], list(config["Visualization Manager"]["Displays"])
    while todo:
        display = todo.pop(0)
        found.append(display)
        todo.extend(display.get("Displays") or [])
    return found


def display_problems(config: dict) -> list[str]:
    problems = []
    for display in displays(config):
        if "Topic" not in display:
            continue
        name, cls = display.get("Name"), display.get("Class")
        topic = display["Topic"]
        if not isinstance(topic, dict) or not QOS_KEYS <= topic.keys():
            problems.append(f"{name}: Topic must be a mapping with {sorted(QOS_KEYS)}")
            continue
        enabled = display.get("Enabled") is True
        known = PUBLISHED if enabled else {**PUBLISHED, **TRUTH}
        msgtype = known.get(topic["Value"])
        if msgtype is None:
            note = " (ground truth: only in a disabled display)" if topic["Value"] in TRUTH else ""
            problems.append(f"{name}: topic {topic['Value']} is not published by the "
                            f"observer{note}")
        elif cls not in DISPLAY_MSGTYPES:
            problems.append(f"{name}: unknown display class {cls} for topic {topic['Value']}")
        elif DISPLAY_MSGTYPES[cls] != msgtype:
            problems.append(f"{name}: {cls} shows {DISPLAY_MSGTYPES[cls]}, but "
                            f"{topic['Value']} is {msgtype}")
    return problems


def by_topic(config: dict, topic: str) -> dict:
    [display] = [d for d in displays(config)
                 if isinstance(d.get("Topic"), dict) and d["Topic"].get("Value") == topic]
    return display


def test_structure():
    config = load()
    assert {"Panels", "Visualization Manager", "Window Geometry"} <= config.keys()
    manager = config["Visualization Manager"]
    assert manager["Class"] == ""
    assert {"Displays", "Global Options", "Tools", "Views"} <= manager.keys()
    assert manager["Global Options"]["Fixed Frame"] == "odom"
    view = manager["Views"]["Current"]
    assert view["Class"] in ("rviz_default_plugins/ThirdPersonFollower",
                             "rviz_default_plugins/Orbit")
    assert view["Target Frame"] == "base_link"


def test_displays_show_published_topics_with_matching_classes():
    assert display_problems(load()) == []


def test_expected_displays():
    config = load()
    classes = {d["Class"] for d in displays(config) if d.get("Enabled")}
    assert {"rviz_default_plugins/Grid", "rviz_default_plugins/TF"} <= classes
    [tf] = [d for d in displays(config) if d["Class"] == "rviz_default_plugins/TF"]
    assert tf["Frames"]["odom"]["Value"] and tf["Frames"]["base_link"]["Value"]
    odometry = by_topic(config, OUTPUT_TOPICS["odometry"])
    assert odometry["Enabled"] and odometry["Covariance"]["Value"]
    assert by_topic(config, OUTPUT_TOPICS["path"])["Enabled"]
    assert by_topic(config, OUTPUT_TOPICS["markers"])["Enabled"]
    assert by_topic(config, TRUTH_TOPICS["odometry"])["Enabled"] is False


def test_checker_rejects_mismatched_displays():
    bad = copy.deepcopy(load())
    by_topic(bad, OUTPUT_TOPICS["path"])["Class"] = "rviz_default_plugins/Odometry"
    by_topic(bad, TRUTH_TOPICS["odometry"])["Enabled"] = True
    by_topic(bad, OUTPUT_TOPICS["markers"])["Topic"]["Value"] = "/state_observer/marker"
    problems = "\n".join(display_problems(bad))
    assert ("rviz_default_plugins/Odometry shows nav_msgs/msg/Odometry, but "
            "/state_observer/path is nav_msgs/msg/Path") in problems
    assert "topic /truth/odometry is not published by the observer" in problems
    assert "topic /state_observer/marker is not published" in problems
    assert len(display_problems(bad)) == 3

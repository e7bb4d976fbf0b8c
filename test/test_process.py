"""``state-observer process``: the node's code path offline, its outputs, and its errors on bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def short_bag(tmp_path_factory) -> Path:
    from state_observer.io.record import simulate_command

    out = tmp_path_factory.mktemp("bags") / "circle"
    assert simulate_command("steady_circle", out, duration_s=6.0, seed=1) == 0
    return out


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "state_observer.cli", "process", *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_process_writes_bag_csv_report_and_accuracy(short_bag, tmp_path):
    from state_observer.io.bag import bag_info

    out = tmp_path / "run"
    result = _cli(short_bag, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "accuracy against truth: position_rmse_m" in result.stdout
    info = bag_info(out / "bag")
    for topic in ("/state_observer/odometry", "/state_observer/tire_forces", "/state_observer/parameters", "/state_observer/state",
                  "/state_observer/markers", "/state_observer/path", "/diagnostics"):
        assert info.topics[topic][1] > 0, topic
    assert info.topics["/state_observer/odometry"][1] > 1000  # one per IMU message once started (200 Hz)
    # RViz and Foxglove follow the car in the bag (issue 16): odom -> base_link with every odometry, the sensors once
    assert info.topics["/tf"] == ("tf2_msgs/msg/TFMessage", info.topics["/state_observer/odometry"][1])
    assert info.topics["/tf_static"] == ("tf2_msgs/msg/TFMessage", 1)
    from state_observer.io.bag import read_messages

    [(_, _, static)] = list(read_messages(out / "bag", ["/tf_static"]))
    wheels = [f"wheel_{w}_link" for w in ("fl", "fr", "rl", "rr")]
    assert {(t.header.frame_id, t.child_frame_id) for t in static.transforms} == {("base_link", c) for c in ["imu_link", "gnss_link", *wheels]}
    at = {t.child_frame_id: t.transform.translation for t in static.transforms}
    fl, fr, rl, rr = (at[w] for w in wheels)  # base_link: on the ground below the rear axle's centre (REP-105 axes)
    assert 2.0 < fl.x == pytest.approx(fr.x, abs=0.05) and abs(rl.x) < 0.1 and abs(rr.x) < 0.1
    assert fl.y > 0.5 and fr.y < -0.5 and rl.y > 0.5 and rr.y < -0.5 and all(0.2 < w.z < 0.5 for w in (fl, fr, rl, rr))
    odometry = [m for _, _, m in read_messages(out / "bag", ["/state_observer/odometry"])][-1]
    tf = [m for _, _, m in read_messages(out / "bag", ["/tf"])][-1].transforms[0]
    assert (tf.header.frame_id, tf.child_frame_id) == ("odom", "base_link") and tf.header.stamp == odometry.header.stamp
    assert (tf.transform.translation.x, tf.transform.translation.y) == (odometry.pose.pose.position.x, odometry.pose.pose.position.y)
    summary = json.loads((out / "summary.json").read_text())
    accuracy = summary["accuracy against truth"]
    assert accuracy["position_rmse_m"] < 2.0 and accuracy["yaw_rate_rmse_dps"] < 1.0
    assert "from the bag's metadata" in summary["observer"]["datum"]
    header = (out / "estimate.csv").read_text().splitlines()[0].split(",")
    assert {"t_s", "x_m", "fz_rr_n", "fz_sigma_rr_n", "mass_sigma_kg", "x_smoothed_m", "y_smoothed_m", "xy_smoothed_sigma_m"} <= set(header)
    # the offline smoothed track: every fix, those after each instant too; finite from the start, its sigma below the
    # causal one's at the start (the fixes after it place it)
    table = np.genfromtxt(out / "estimate.csv", delimiter=",", names=True)
    assert np.isfinite(table["x_smoothed_m"]).all() and np.isfinite(table["xy_smoothed_sigma_m"]).all()
    assert table["xy_smoothed_sigma_m"][0] < 0.8 * max(table["x_sigma_m"][0], table["y_sigma_m"][0])
    assert accuracy["position_smoothed_rmse_m"] < 2.0
    html = (out / "report.html").read_text()
    assert "position offline, smoothed" in html
    assert "tire_forces.png" in html and (out / "tire_forces.png").stat().st_size > 1000
    assert list((out / "bag").glob("*.mcap")) and not list((out / "bag").glob("*.db3"))  # MCAP by default (issue 16)


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_process_writes_the_storage_asked_for(short_bag, tmp_path):
    out = tmp_path / "run"
    result = _cli(short_bag, "--out", out, "--storage", "sqlite3", "--no-report")
    assert result.returncode == 0, result.stderr
    assert list((out / "bag").glob("*.db3")) and not list((out / "bag").glob("*.mcap"))


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_process_refuses_bad_input_with_one_line(short_bag, tmp_path):
    missing = _cli(tmp_path / "nothing", "--out", tmp_path / "a")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "nothing" in missing.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    refused = _cli(short_bag, "--out", busy)
    assert refused.returncode == 1 and "not overwriting" in refused.stderr and (busy / "keep.txt").read_text() == "mine"
    params = tmp_path / "params.yaml"
    params.write_text("observer_node:\n  ros__parameters:\n    dt_s: 5.0\n")
    bad = _cli(short_bag, "--out", tmp_path / "b", "--params", params)
    assert bad.returncode == 1 and "dt_s" in bad.stderr and str(params) in bad.stderr and bad.stderr.count("\n") == 1
    unknown = _cli(short_bag, "--out", tmp_path / "c", "--observer", "magic")
    assert unknown.returncode == 1 and "observer" in unknown.stderr


def test_process_rejects_a_bag_without_sensor_topics(tmp_path):
    from state_observer.io.bag import BagWriter
    from state_observer.io.convert import typestore

    store = typestore()
    bag = tmp_path / "other"
    with BagWriter(bag) as writer:
        writer.write("/chatter", "std_msgs/msg/String", store.types["std_msgs/msg/String"](data="hi"), 1)
    result = _cli(bag, "--out", tmp_path / "out")
    assert result.returncode == 1 and "none of the sensor topics" in result.stderr and "/chatter" in result.stderr


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_a_version_8_bag_for_humble_readers(short_bag, tmp_path):
    """--bag-version 8 (issue 16): metadata version 8 with offered_qos_profiles as a YAML string, as Humble's rosbag2
    reads it (version 9 writes a list); the bag reads back."""
    import yaml

    from state_observer.io.bag import bag_info

    out = tmp_path / "run"
    result = _cli(short_bag, "--out", out, "--bag-version", "8", "--no-report")
    assert result.returncode == 0, result.stderr
    info = yaml.safe_load((out / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["version"] == 8 and info["storage_identifier"] == "mcap"
    assert all(isinstance(t["topic_metadata"]["offered_qos_profiles"], str) for t in info["topics_with_message_count"])
    assert bag_info(out / "bag").topics["/state_observer/odometry"][1] > 500


def test_rows_spooled_to_disk_come_back_as_columns(tmp_path, monkeypatch):
    import numpy as np

    from state_observer.process import RowSpool

    monkeypatch.setattr(RowSpool, "CHUNK_VALUES", 7)  # many flushes, one mid-row
    rows = np.random.default_rng(0).normal(size=(1001, 3))
    spool = RowSpool(tmp_path / "rows", ["a", "b", "c"])
    for row in rows:
        spool.append(row.tolist())
    columns = spool.columns()
    assert len(spool) == 1001 and (tmp_path / "rows").stat().st_size == rows.nbytes
    assert all(np.array_equal(columns[name], rows[:, i]) for i, name in enumerate("abc"))
    assert RowSpool(tmp_path / "none", ["a"]).columns()["a"].shape == (0,)


def test_a_run_leaves_no_spool_behind(short_bag, tmp_path):
    from state_observer.process import process_bag

    process_bag(short_bag, tmp_path / "run", report=False)
    assert not (tmp_path / "run" / "spool").exists() and (tmp_path / "run" / "summary.json").is_file()


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_bags_decode_with_the_mcap_projects_own_ros2_reader(short_bag, tmp_path):
    """Issue 16: what we write opens with mcap-ros2-support (Foxglove's reader: schemas from the bag, no ROS install),
    every message of every topic, the simulated input and the processed output."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from state_observer.io.bag import bag_info
    from state_observer.process import process_bag

    process_bag(short_bag, tmp_path / "run", report=False)
    for bag in (short_bag, tmp_path / "run" / "bag"):
        (path,) = bag.glob("*.mcap")
        decoded = {}
        with path.open("rb") as f:
            for _, channel, _, message in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
                decoded[channel.topic] = decoded.get(channel.topic, 0) + 1
                assert message is not None
        assert decoded == {topic: count for topic, (_, count) in bag_info(bag).topics.items() if count}, bag
    assert decoded["/tf"] == decoded["/state_observer/odometry"] > 0 and decoded["/tf_static"] == 1

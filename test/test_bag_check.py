"""Data preparation that cannot fail silently: ``state-observer check``, the dropped-stream warning and error of
``process``, joint names as parameters, and the node's drop watch (its log line: test_observer_node.py)."""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from state_observer import cli

CUSTOM_JOINTS = {"wheel_fl_joint": "fl_hub", "wheel_fr_joint": "fr_hub", "wheel_rl_joint": "rl_hub",
                 "wheel_rr_joint": "rr_hub", "steering_wheel_joint": "steer"}


def rewrite(src: Path, dst: Path, edit) -> Path:
    """Copy the sensor topics of bag ``src`` (and its metadata custom_data) to ``dst``, each message through
    ``edit(topic, index in its topic, msg)``."""
    from state_observer.io.bag import BagWriter, custom_data, read_raw
    from state_observer.io.convert import SENSOR_TOPICS, typestore

    store = typestore()
    index = Counter()
    with BagWriter(dst, custom_data=custom_data(src)) as writer:
        for topic, msgtype, log_ns, raw in read_raw(src, list(SENSOR_TOPICS.values())):
            msg = edit(topic, index[topic], store.deserialize_cdr(raw, msgtype))
            index[topic] += 1
            writer.write(topic, msgtype, msg, log_ns)
    return dst


def _imu_frame(share_of_five: int):
    """An edit that names the IMU frame 'imu' in ``share_of_five`` of every five IMU messages."""
    def edit(topic, i, msg):
        if topic == "/imu/data" and i % 5 < share_of_five:
            msg.header.frame_id = "imu"
        return msg
    return edit


def _rename_joints(topic, i, msg):
    if topic in ("/wheel_states", "/steering_state"):
        msg.name = [CUSTOM_JOINTS.get(n, n) for n in msg.name]
    return msg


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    """6 s of the steady circle from the simulator, and copies of its sensor topics: the IMU frame renamed 'imu' in
    every message ("imu_frame") and in 60 % of them ("imu_60"), the joints renamed ("joints")."""
    from state_observer.io.record import simulate_command

    root = tmp_path_factory.mktemp("bags")
    good = root / "good"
    assert simulate_command("steady_circle", good, duration_s=6.0, seed=1) == 0
    return {"good": good, "imu_frame": rewrite(good, root / "imu_frame", _imu_frame(5)),
            "imu_60": rewrite(good, root / "imu_60", _imu_frame(3)), "joints": rewrite(good, root / "joints", _rename_joints)}


@pytest.fixture(scope="module")
def joint_params(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("params") / "joints.yaml"
    path.write_text("observer_node:\n  ros__parameters:\n    joints:\n"
                    + "".join(f"      {key}: {CUSTOM_JOINTS[name]}\n" for key, name in
                              (("wheel_fl", "wheel_fl_joint"), ("wheel_fr", "wheel_fr_joint"), ("wheel_rl", "wheel_rl_joint"),
                               ("wheel_rr", "wheel_rr_joint"), ("steering", "steering_wheel_joint"))))
    return path


def _run(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_on_a_good_bag_says_everything_will_be_used(bags, capsys):
    code, out, err = _run(capsys, "check", bags["good"])
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "verdict: OK: every message of the 5 sensor streams will be used"
    for topic in ("/imu/data", "/gps/fix", "/gps/vel", "/wheel_states", "/steering_state"):
        block = out.split(f"\n{topic} (")[1].split("\n\n")[0]
        assert "will drop" not in block and "(100 %)" in block.split("will use:")[1], block
    assert "frame_id: 'imu_link' x1201; expected 'imu_link'" in out  # 200 Hz for 6 s
    assert "fix status: FIX 100 %" in out and "non-finite fields: none" in out
    code, out, err = _run(capsys, "check", bags["good"].parent / "no_such_bag")
    assert code == 1 and out == "" and err.count("\n") == 1 and "no_such_bag: no such bag" in err


def test_renamed_imu_frame_fails_process_and_check_naming_both_frames(bags, tmp_path, capsys):
    code, out, err = _run(capsys, "check", bags["imu_frame"])
    assert code == 1
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("verdict: FAIL: /imu/data (imu): all 1201 messages dropped")
    assert "'imu'" in verdict and "'imu_link'" in verdict
    assert "will drop: 1201 (100 %): frame 'imu' is not the vehicle's IMU frame 'imu_link'" in out

    code, out, err = _run(capsys, "process", bags["imu_frame"], "--out", tmp_path / "run", "--no-report")
    assert code == 1
    [line] = [line for line in err.splitlines() if "/imu/data" in line]
    assert "all 1201 messages dropped" in line and "frame 'imu'" in line and "'imu_link'" in line
    assert not [line for line in err.splitlines() if "/gps" in line or "/wheel" in line or "/steering" in line]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # nothing written is lost
    assert summary["dropped"]["/imu/data"]["dropped"] == 1201
    from state_observer.io.bag import bag_info

    assert bag_info(tmp_path / "run" / "bag").topics["/state_observer/odometry"][1] > 0

    code, out, err = _run(capsys, "process", bags["imu_frame"], "--out", tmp_path / "allowed", "--no-report", "--allow-dropped")
    assert code == 0 and "warning: /imu/data (imu): all 1201 messages dropped" in err

    code, out, err = _run(capsys, "process", bags["imu_frame"], "--out", tmp_path / "checked", "--check")
    assert code == 1 and "verdict: FAIL" in out and "the check failed" in err
    assert not (tmp_path / "checked").exists()  # stopped before processing


def test_a_stream_60_percent_dropped_warns(bags, tmp_path, capsys):
    code, out, err = _run(capsys, "process", bags["imu_60"], "--out", tmp_path / "run", "--no-report")
    assert code == 0, err
    [line] = [line for line in err.splitlines() if "/imu/data" in line]
    assert line.startswith("state-observer process: warning: /imu/data (imu): ")
    dropped = json.loads((tmp_path / "run" / "summary.json").read_text())["dropped"]["/imu/data"]
    assert 0.59 < dropped["share"] < 0.62  # 60 % by frame, and a few before the start
    assert f"{dropped['dropped']} of 1201 messages dropped ({100 * dropped['share']:.0f} %)" in line
    assert "mostly: frame 'imu' is not the vehicle's IMU frame 'imu_link'" in line

    code, out, err = _run(capsys, "check", bags["imu_60"])
    assert code == 0 and "verdict: OK with warnings: /imu/data (imu): 721 of 1201 messages dropped (60 %)" in out


def test_custom_joint_names_via_parameters_end_to_end(bags, joint_params, tmp_path, capsys):
    code, out, err = _run(capsys, "check", bags["joints"])
    assert code == 1
    assert ("JointState has none of the wheel joints wheel_fl_joint, wheel_fr_joint, wheel_rl_joint, wheel_rr_joint "
            "(joints found: fl_hub, fr_hub, rl_hub, rr_hub)") in out
    assert "JointState has no steering joint steering_wheel_joint (joints found: steer)" in out
    assert "missing: wheel_fl_joint, wheel_fr_joint, wheel_rl_joint, wheel_rr_joint" in out

    code, out, err = _run(capsys, "check", bags["joints"], "--params", joint_params)
    assert code == 0 and out.strip().endswith("verdict: OK: every message of the 5 sensor streams will be used"), out

    code, out, err = _run(capsys, "process", bags["joints"], "--out", tmp_path / "run", "--no-report", "--params", joint_params)
    assert code == 0, err
    sensors = json.loads((tmp_path / "run" / "summary.json").read_text())["sensors"]
    assert sensors["wheels applied"] > 500 and not any(k.startswith("steering dropped") for k in sensors)

    code, out, err = _run(capsys, "process", bags["joints"], "--out", tmp_path / "default", "--no-report")
    assert code == 1
    lines = err.strip().splitlines()
    assert any(line.startswith("state-observer process: /wheel_states (wheels): all 601 messages dropped: JointState has none")
               for line in lines)
    assert any("/steering_state (steering): all 601 messages dropped: JointState has no steering joint steering_wheel_joint "
               "(joints found: steer)" in line for line in lines)


def test_check_measures_the_steering_sensors_zero_and_says_what_to_set(tmp_path, capsys):
    """A steering sensor zeroed 1.5 deg off centre: check measures its reading on the straight stretch by the GNSS
    course (before the step steer, 1.6 s at 22 m/s), warns naming the value to set, and is quiet once
    model.steering_offset_rad says it; a sensor zeroed right is measured at zero and not warned of."""
    from state_observer.io.record import simulate_command

    good = tmp_path / "step"
    assert simulate_command("step_steer", good, duration_s=8.0, seed=1) == 0
    offset = math.radians(1.5)

    def biased(topic, i, msg):
        if topic == "/steering_state":
            msg.position = msg.position + offset
        return msg

    off = rewrite(good, tmp_path / "off_centre", biased)
    code, out, err = _run(capsys, "check", good)
    assert code == 0 and out.strip().splitlines()[-1].startswith("verdict: OK: every message"), out
    line = next(x for x in out.splitlines() if "straight ahead:" in x)
    assert abs(float(line.split("reads ")[1].split(" deg")[0])) <= 0.1, line
    code, out, err = _run(capsys, "check", off)
    assert code == 0
    verdict = out.strip().splitlines()[-1]
    assert "/steering_state (steering) reads +1.5" in verdict and "set model.steering_offset_rad: 0.02" in verdict, verdict
    measured = float(verdict.split("set model.steering_offset_rad: ")[1].split()[0])
    assert measured == pytest.approx(offset, abs=math.radians(0.1))
    params = tmp_path / "offset.yaml"
    params.write_text(f"observer_node:\n  ros__parameters:\n    model:\n      steering_offset_rad: {measured}\n")
    code, out, err = _run(capsys, "check", off, "--params", params)
    assert code == 0 and out.strip().splitlines()[-1].startswith("verdict: OK: every message"), out
    assert f"model.steering_offset_rad is {measured:.4f} rad" in out


def test_straight_ahead_steering_is_not_measured_without_gnss_velocity_or_straight_driving():
    from state_observer.io.check import straight_ahead_steering

    steering = [(k * 10_000_000, 0.01) for k in range(500)]
    assert straight_ahead_steering([], steering) is None
    turning = [(k * 100_000_000, 20.0 * math.cos(0.3 * k * 0.1), 20.0 * math.sin(0.3 * k * 0.1)) for k in range(50)]  # 17 deg/s
    assert straight_ahead_steering(turning, steering) is None
    straight = [(k * 100_000_000, 20.0, 0.0) for k in range(50)]
    result = straight_ahead_steering(straight, steering)
    assert result is not None and result.offset_rad == pytest.approx(0.01) and result.samples >= 400


def test_joint_names_are_parameters_of_the_generated_yaml():
    from state_observer.io import params
    from state_observer.paths import find_data_file

    assert find_data_file("config/observer.yaml").read_text() == params.yaml_text()  # regenerated from the table
    config = params.config_from({**params.defaults(), "joints.wheel_rr": "hub_4", "joints.steering": "sw"})
    assert config.joints.wheels == ("wheel_fl_joint", "wheel_fr_joint", "wheel_rl_joint", "hub_4") and config.joints.steering == "sw"
    with pytest.raises(ValueError, match="joints"):
        params.config_from({**params.defaults(), "joints.wheel_rr": "wheel_fl_joint"})


def test_the_road_slope_parameter_reaches_the_filter():
    """model.road_slope (off by default) gives the 14-DOF filter its road-slope states; a non-boolean is refused by name."""
    from state_observer.estimation.online import make_filter
    from state_observer.io import params
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle.description import load_vehicle

    desc = load_vehicle(default_vehicle_path())
    for value in (False, True):
        s = params.config_from({**params.defaults(), "model.road_slope": value}).settings
        assert s.road_slope is value
        f = make_filter(desc, mounts_from_vehicle(desc), "spi_reduced", road_slope=s.road_slope)
        assert (f.slope_col >= 0) is value and f.settings.road_slope is value
    with pytest.raises(ValueError, match="model.road_slope: must be true or false"):
        params.load_config(**{"model.road_slope": "yes"})


def test_drop_watch_reports_a_stream_once_per_window_share():
    from state_observer.io.pipeline import DropWatch

    watch = DropWatch({"imu": "/imu/data", "wheels": "/wheel_states"}, min_messages=20)
    counters = {"imu": Counter(received=10, **{"dropped: frame 'imu' is not the vehicle's IMU frame 'imu_link'": 10}),
                "wheels": Counter(received=30, applied=20, **{"dropped: late": 10})}
    assert watch.poll(counters) == []  # imu: too few messages yet; wheels: a third dropped
    counters["imu"].update({"received": 15, "dropped: frame 'imu' is not the vehicle's IMU frame 'imu_link'": 15})
    assert watch.poll(counters) == ["/imu/data (imu): all 25 messages dropped: frame 'imu' is not the vehicle's IMU frame 'imu_link'"]
    counters["imu"].update({"received": 40, "dropped: frame 'imu' is not the vehicle's IMU frame 'imu_link'": 40})
    counters["wheels"].update({"received": 40, "dropped: late": 30, "applied": 10})
    assert watch.poll(counters) == ["/wheel_states (wheels): 30 of 40 messages dropped (75 %), mostly: late"]  # imu: said once
    assert watch.poll(counters) == []


def test_screen_replaces_an_indefinite_gnss_covariance():
    from state_observer.estimation.intake import InputLimits, SampleScreen
    from state_observer.estimation.online import OnlineSettings
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.samples import GnssFix
    from state_observer.vehicle.description import load_vehicle

    screen = SampleScreen(OnlineSettings(), "imu_link", InputLimits.of(load_vehicle(default_vehicle_path())))
    indefinite = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # eigenvalue -1
    fix = screen.take("gnss_fix", GnssFix(10, 10, "gnss_link", 43.0, -8.0, 50.0, 0, indefinite))
    np.testing.assert_array_equal(fix.position_covariance_enu_m2, np.diag([1.8**2, 1.8**2, 2.6**2]))
    assert screen.counters["gnss_fix"]["covariance replaced by the configured sigma"] == 1
    assert screen.take("gnss_fix", fix) is None and screen.counters["gnss_fix"]["dropped: duplicate stamp"] == 1

"""The online observer (no ROS): start from GNSS, configured pose, late and jumping stamps."""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness import simulated_scenario


@pytest.fixture(scope="module")
def scenario():
    desc, config, manoeuvre, truths, samples = simulated_scenario("circle_mu08", 8.0, seed=2)
    samples.sort(key=lambda s: s.receive_ns)  # the order a recorder received them
    return desc, config, truths, samples


def _observer(desc, config, **settings):
    from state_observer.estimation.online import OnlineObserver, OnlineSettings
    from state_observer.sim.sensors import mounts_from_vehicle

    d = config.gnss_fix.datum
    return OnlineObserver(desc, mounts_from_vehicle(desc), OnlineSettings(datum=(d.latitude_deg, d.longitude_deg, d.altitude_m), **settings))


def test_starts_from_gnss_motion_without_gnss_velocity(scenario):
    from state_observer.sensors.samples import GnssVelocity

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, observer="errorekf_fe_reduced")
    for s in samples:
        if not isinstance(s, GnssVelocity):
            obs.feed(s)
        if obs.started:
            break
    assert obs.started
    truth = min(truths, key=lambda x: abs(x.t_s - obs.t_ns * 1e-9))
    true_yaw = math.atan2(truth.velocity_enu_m_s[1], truth.velocity_enu_m_s[0])
    _, _, yaw = obs.vehicle.solver.q[3:6]
    # two noisy fixes (1.8 m) at least 15 m apart on a 50 m circle: the chord's direction, within ~15 deg
    assert abs(math.remainder(yaw - true_yaw, 2 * math.pi)) < math.radians(20)
    assert "started" in obs.events[-1]


def test_gnss_start_tracks_the_truth_and_counts_everything(scenario):
    desc, config, truths, samples = scenario
    obs = _observer(desc, config)
    for s in samples:
        obs.feed(s)
    assert obs.started and obs.t_ns * 1e-9 > 7.9
    e = obs.estimate()
    truth = min(truths, key=lambda x: abs(x.t_s - e.stamp_ns * 1e-9))
    assert np.hypot(*(e.state.position_enu_m[:2] - truth.position_enu_m[:2])) < 1.5
    assert abs(e.state.angular_velocity_body_rad_s[2] - truth.angular_velocity_body_rad_s[2]) < 0.02
    counts = obs.counters
    # every received sample is accounted for: applied, used to start, rejected by the gate, or dropped for a named reason
    for kind in ("imu", "gnss_fix", "gnss_velocity", "wheels"):
        c = counts[kind]
        outcomes = sum(n for k, n in c.items() if k in ("applied", "used to start") or k.startswith(("dropped", "rejected")))
        assert c["received"] == outcomes + obs.pending()[kind], (kind, dict(c))
    assert counts["imu"]["applied"] > 0.9 * counts["imu"]["received"]
    assert counts["gnss_fix"]["applied"] >= counts["gnss_fix"]["received"] - 3
    P = e.pose_covariance
    assert np.all(np.linalg.eigvalsh(P) > 0) and np.all(e.tire_force_sigma_n >= 0)


def test_pose_start_late_samples_and_time_jump(scenario):
    from state_observer.sensors.samples import ImuSample

    desc, config, truths, samples = scenario
    obs = _observer(desc, config, start_mode="pose", start_pose=(1.0, -50.0, 0.0, 15.0))
    imus = [s for s in samples if isinstance(s, ImuSample)]
    obs.feed(imus[1])
    assert obs.started and abs(obs.vehicle.solver.q[0] - 1.0) < 1e-9 and obs.t_ns == imus[1].stamp_ns
    for s in imus[2:400]:
        obs.feed(s)
    t = obs.t_ns
    late = imus[100]._replace(stamp_ns=t - 500_000_000)  # 0.5 s behind: beyond max_delay_s (0.3)
    assert obs.feed(late) == [] and obs.counters["imu"]["dropped: late"] == 1
    # the bag loops: stamps 1.9 s back; three in a row reset the observer, which starts again at once
    for s in imus[2:5]:
        obs.feed(s)
    assert obs.n_resets == 1 and obs.started and obs.t_ns <= imus[4].stamp_ns + obs.dt_ns
    assert obs.counters["imu"]["dropped: late"] == 3  # the late one and the first two of the loop

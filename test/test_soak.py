"""The soak (issue 13 item 12's 'Done when'): a drive through the real observer node, every simulated minute
recorded. Two minutes here (`make soak` drives an hour): the output rate is the configured one throughout, the
parameters are never published converged and wrong, nothing resets."""
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]  # a whole drive (see conftest.py)


def test_a_two_minute_soak_through_the_node(tmp_path, ros_environment):
    from state_observer.io.params import load_config
    from state_observer.soak import soak

    figures, minutes = soak(2.0, tmp_path, progress=lambda line: None)
    tire_forces_hz = load_config().rates["tire_forces"]  # odometry: after every IMU message (rate 0), ~200 Hz here
    assert figures["soak_minutes"] == len(minutes) == 2
    assert all(abs(m["published"]["tire_forces"] / 60.0 - tire_forces_hz) < 0.02 * tire_forces_hz for m in minutes), minutes
    assert figures["soak_odometry_hz_min"] > 0.98 * figures["soak_odometry_hz_max"] > 150.0
    assert all(m["published"].get("diagnostics", 0) > 0 for m in minutes)  # the node's timers ran between messages
    assert figures["soak_resets"] == 0 and figures["soak_confident_wrong_minutes"] == 0
    assert abs(figures["soak_mass_error_pct_last"]) < 3.0 and minutes[-1]["mass"]["status"] in ("converging", "converged")
    assert figures["soak_rss_start_mib"] > 0

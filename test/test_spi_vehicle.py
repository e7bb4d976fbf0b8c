"""spi_reduced's parameter estimators through the online observer (the node's and process's path): the mass moves only
with torque-driven longitudinal excitation and then converges from a +15 % start; friction keeps a lower bound that the
data proves and is estimated where tires saturate; every parameter carries a status."""
import numpy as np
import pytest

from state_observer.estimation.spi import AT_BOUND, CONVERGED, CONVERGING, NOT_OBSERVABLE
from state_observer.sim import harness as h
from state_observer.sim import mismatch as mm

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)


def run(manoeuvre: str, initial_mass_factor: float, seed: int = 0, keep=lambda sample: True, mismatch=None):
    """The online spi_reduced observer on a nominal truth (the vehicle file itself; or ``mismatch``'s) started with a wrong
    mass, fed the samples ``keep`` keeps; returns (truth mass, estimate times, masses, frictions, final parameter report,
    the observer)."""
    from state_observer.estimation.online import OnlineObserver, OnlineSettings
    from state_observer.sim.run import path_start
    from state_observer.sensors.mounts import mounts_from_vehicle

    desc, config, _, truths, samples = h.simulate(manoeuvre, seed, mismatch=mismatch or mm.nominal(seed))
    speed, yaw, xy = path_start(h.MANOEUVRES[manoeuvre]())
    d = config.gnss_fix.datum
    settings = OnlineSettings(observer="spi_reduced", start_mode="pose", start_pose=(xy[0], xy[1], yaw, speed),
                              datum=(d.latitude_deg, d.longitude_deg, d.altitude_m), initial_mass_kg=initial_mass_factor * desc.total_mass_kg)
    obs = OnlineObserver(desc, mounts_from_vehicle(desc), settings)
    t, mass, mu = [], [], []
    for sample in filter(keep, samples):
        if obs.feed(sample) and obs.started:
            t.append(obs.t_ns * 1e-9)
            mass.append(obs.vehicle.total_mass_kg)
            mu.append(float(np.mean(obs.vehicle.mu)))
    return truths[0].mass_kg, np.array(t), np.array(mass), np.array(mu), obs.estimate().parameters, obs


@pytest.fixture(scope="module")
def speed_changes():
    return run("speed_changes", 1.15)


def test_mass_converges_with_longitudinal_excitation(speed_changes):
    true_mass, t, mass, mu, report, obs = speed_changes
    assert abs(mass[-1] - true_mass) < 0.03 * true_mass, (mass[-1], true_mass)
    assert report["mass"]["status"] in (CONVERGED, CONVERGING)
    assert report["mass"]["sigma"] < 0.05 * true_mass
    lo, hi = report["mass"]["bounds"]
    assert lo < true_mass < hi
    assert not obs.filter.diverged


def test_friction_keeps_a_lower_bound_below_the_road_without_saturation(speed_changes):
    true_mass, t, mass, mu, report, obs = speed_changes
    friction = report["friction"]
    assert 0.2 < friction["lower_bound"] <= 1.0  # the accelerations proved some grip, never more than the road has
    assert friction["status"] == NOT_OBSERVABLE  # no tire saturated: nothing but the bound is known
    assert np.all(np.abs(mu - 1.0) < 1e-9)  # the vehicle file's friction (1.0) is kept


def test_friction_follows_a_step_once_the_front_tires_saturate():
    """The harness' friction step on a truth car with Magic-Formula tires and perturbed stiffnesses (tuning seed): on
    0.8 the circle (0.59 g) leaves the tires short of saturation, so the friction stays at the vehicle file's 1.0 with a
    bound below the road; on 0.6 the front axle saturates and the estimate comes within 0.05 of the road within 5 s."""
    seed = 100
    step_s = h.FRICTION_STEP_S
    true_mass, t, mass, mu, report, obs = run("friction_step", 1.0, seed, mismatch=mm.draw(seed, h.MANOEUVRES["friction_step"]().duration_s))
    t_rel = t - t[0]
    before = (t_rel > 12.0) & (t_rel < step_s)
    assert np.all(mu[before] == 1.0), mu[before].min()  # no saturation seen on the grippier road
    after = t_rel > step_s + 5.0
    assert np.all(np.abs(mu[after] - 0.6) <= 0.05), (mu[after].min(), mu[after].max())
    friction = report["friction"]
    assert friction["status"] in (CONVERGING, CONVERGED) and friction["lower_bound"] <= 0.6 + 1e-9


@pytest.mark.parametrize("sensors", ["full", "speed only"])
def test_friction_follows_a_step_while_the_car_slides_steadily(sensors):
    """Tuning seed 108 of the friction step, where on 0.6 the front axle slides while the driver winds on steering: the
    model, still on the vehicle file's 1.0, asks for more yaw than the car makes, and its yaw acceleration (which the
    gyroscope corrects away each step) read 0.1-0.4 rad/s^2 throughout; taken as "not turning steadily" it hid the
    saturation, the friction stayed at 1.0 and the sideslip ran 5 deg off.  Steadiness is now the estimated yaw rate's
    change: the friction comes within 0.05 of the road within 5 s, with GNSS and with only a race car's recording (no
    GNSS, no torques, yaw rate and horizontal accelerations, one speed), where it was found on 2 of 10 tuning seeds."""
    seed = 108
    manoeuvre = h.MANOEUVRES["friction_step"]()
    desc, config, mismatch, truths, samples = h.simulate("friction_step", seed, mismatch=mm.draw(seed, manoeuvre.duration_s))
    if sensors == "speed only":
        samples = h.speed_only(samples, desc)
    est, _ = h.run_observer(desc, config, manoeuvre, samples, gnss=sensors == "full")
    t_rel = est.t - est.t[0]
    mu = est.values["friction"]
    assert np.all(mu[(t_rel > 12.0) & (t_rel < h.FRICTION_STEP_S)] == 1.0)  # 0.8 under a 0.59 g circle: no saturation
    after = t_rel > h.FRICTION_STEP_S + 5.0
    assert np.all(np.abs(mu[after] - 0.6) <= 0.05), (mu[after].min(), mu[after].max())


def test_the_capacity_ratio_is_the_load_weighted_peak_friction_of_the_tires():
    """What the car carries at friction mu over mu times its weight, by hand: lam_i = 1 - q (F_z,i / F_z0 - 1) per tire,
    sum lam_i F_z,i / sum F_z,i; without load sensitivity 1, and lam floored at 0.2 (a tire loaded far beyond F_z0)."""
    from types import SimpleNamespace

    from state_observer.estimation.spi import FZ_ROW, LOAD_SENSITIVITY_FRICTION_COLUMN, NOMINAL_LOAD_COLUMN, VehicleSPI

    def ratio(fz, q, fz0=4000.0):
        rows = np.zeros((4, 17))
        rows[:, NOMINAL_LOAD_COLUMN], rows[:, LOAD_SENSITIVITY_FRICTION_COLUMN] = fz0, q
        out = np.zeros((20, 4))
        out[FZ_ROW] = fz
        return VehicleSPI._capacity_ratio(SimpleNamespace(vehicle=SimpleNamespace(tire_rows=rows, tire_output_array=out)))

    loads = np.array([5000.0, 3000.0, 4500.0, 2500.0])  # a turn to the right: the left tires carry more
    lam = [1 - 0.15 * 0.25, 1 + 0.15 * 0.25, 1 - 0.15 * 0.125, 1 + 0.15 * 0.375]
    assert ratio(loads, 0.15) == pytest.approx((5000 * lam[0] + 3000 * lam[1] + 4500 * lam[2] + 2500 * lam[3]) / 15000.0, rel=1e-12)
    assert ratio(loads, 0.15) == pytest.approx(14981.25 / 15000.0, rel=1e-12)
    assert ratio(loads, 0.0) == 1.0
    assert ratio(np.array([40000.0, 0.0, 0.0, 0.0]), 0.15) == pytest.approx(0.2)  # 1 - 0.15 * 9 < 0.2
    assert ratio(np.zeros(4), 0.15) == 1.0  # airborne: nothing to scale


def test_mass_is_left_alone_without_longitudinal_excitation():
    true_mass, t, mass, mu, report, obs = run("steady_circle", 1.10)
    assert np.all(np.abs(mass - 1.10 * true_mass) < 0.005 * true_mass)  # a circle at constant speed says nothing of it
    assert report["mass"]["status"] == NOT_OBSERVABLE
    assert report["cornering_front"]["status"] in (CONVERGING, CONVERGED, AT_BOUND)  # lateral excitation shows the tires


def test_mass_is_left_alone_in_a_turn_at_constant_speed():
    """A step steer held at constant speed on a truth car with Magic-Formula tires whose front axle is 25 % stiffer and
    rear 20 % softer than the vehicle file's (tuning seed otherwise): along the heading the centre of mass accelerates
    by -v_y r, which only the sideslip sets; taken as excitation it let the mass absorb the sideslip's error (here
    1501 -> 1081 kg).  The cornering stiffness scales see the two axles' difference."""
    import dataclasses

    seed = 100
    mismatch = dataclasses.replace(mm.draw(seed, h.MANOEUVRES["step_steer"]().duration_s), cornering_stiffness=(1.25, 0.8))
    true_mass, t, mass, mu, report, obs = run("step_steer", 1.0, seed, mismatch=mismatch)
    assert np.all(np.abs(mass - mass[0]) < 0.005 * mass[0]), (mass.min(), mass.max())
    assert report["mass"]["status"] == NOT_OBSERVABLE
    # the same drive sets the axles' stiffnesses apart the right way (the slip angles' difference, which the sideslip's
    # error does not move), but only from the ~0.3 s of turning in, while the force correction is still moving: front
    # 1.03-1.11 (force_walk_smoothing_s; 1.03 with the steering carried over its latency), rear 0.80-0.84: the rear within
    # issue 15's 10 %, for the front the sigma, not a band, is what must hold
    front, rear = report["cornering_front"]["value"], report["cornering_rear"]["value"]
    assert front > 1.0 and abs(rear - 0.8) < 0.1 * 0.8 and front - rear > 0.15, (front, rear)
    for name, truth in (("cornering_front", 1.25), ("cornering_rear", 0.8)):
        assert abs(report[name]["value"] - truth) < 2.0 * report[name]["sigma"], (name, report[name])  # the sigma is honest


def test_a_turn_in_alone_does_not_make_the_cornering_stiffness_converged():
    """A step steer into a turn beyond the linear range (tuning seed 103's truth: Magic-Formula tires, front x0.92, rear
    x1.22): the axles pass the linear range only while turning in, ~0.3 s of windows whose errors (the state's sideslip
    and force correction, which move on the filter's time scale) are one error, not eight.  Counted as independent, the
    rear scale read 0.93 +- 0.08, "converged" (SpiSettings.cornering_error_time_s).  Now each stays "converging" with a
    sigma near 0.1 (the rear's error, 0.98 against 1.22, is still 2.1 of them)."""
    seed = 103
    mismatch = mm.draw(seed, h.MANOEUVRES["step_steer"]().duration_s)
    true_mass, t, mass, mu, report, obs = run("step_steer", 1.0, seed, mismatch=mismatch)
    for name in ("cornering_front", "cornering_rear"):
        assert report[name]["status"] == CONVERGING, (name, report[name])
        assert report[name]["sigma"] > 0.09, (name, report[name])  # front 0.096, rear 0.111


def test_status_names_cover_every_status():
    from state_observer.estimation.spi import STATUS_NAMES

    assert len(STATUS_NAMES) == 4 and len({NOT_OBSERVABLE, CONVERGING, CONVERGED, AT_BOUND}) == 4


def _brake_to_standstill():
    from state_observer.sim.manoeuvres import Manoeuvre, Path

    return Manoeuvre("brake_to_standstill", 45.0, 15.0, speed=lambda t: 15.0 if t < 8.0 else max(0.0, 15.0 - 3.0 * (t - 8.0)),
                     path=Path.straight(400.0), description="8 s at 15 m/s, braking at 3 m/s^2 to a stop, 32 s standing")


def _full_throttle_then_full_brake():
    from state_observer.sim.manoeuvres import Manoeuvre, Path

    def pedal(t, v):  # through the car's traction control and ABS (the simulator's driver)
        return (1.0, 0.0) if 10.0 <= t < 13.0 else (0.0, 1.0) if t >= 13.0 else (0.0, 0.0)

    return Manoeuvre("full_throttle_then_full_brake", 20.0, 18.0, pedal=pedal, path=Path.straight(600.0),
                     description="10 s coasting from 18 m/s, 3 s full throttle, full brake to a stop")


def test_a_full_brake_with_abs_does_not_take_the_mass_away(monkeypatch):
    """The first 0.2 s of a full brake break the torque balance (the body pitches, ABS cycles the wheels): before the mass
    held still through them, a full brake took it from 1555 to 1206 kg for a car of 1501 and left it there, converged.
    (At a constant acceleration, the throttle phase, the mass and the resistance cannot be told apart: the braking
    does that.)"""
    monkeypatch.setitem(h.MANOEUVRES, "full_throttle_then_full_brake", _full_throttle_then_full_brake)
    true_mass, t, mass, mu, report, obs = run("full_throttle_then_full_brake", 1.10)
    braking = (t - t[0]) > 13.5  # from half a second after the brake is applied (estimation starts at 10 s)
    assert np.all(np.abs(mass[braking] - true_mass) < 0.05 * true_mass), (mass[braking].min(), mass[braking].max(), true_mass)
    assert abs(mass[-1] - true_mass) < 0.03 * true_mass, (mass[-1], true_mass)
    assert report["mass"]["status"] in (CONVERGING, CONVERGED)  # never a bound
    assert not obs.filter.diverged


def test_standstill_leaves_the_parameters_alone(monkeypatch):
    """Through half a minute standing still (brakes on) there is nothing the parameters could learn from: the mass keeps
    the value the braking taught it, at no bound; friction does not move."""
    monkeypatch.setitem(h.MANOEUVRES, "brake_to_standstill", _brake_to_standstill)
    true_mass, t, mass, mu, report, obs = run("brake_to_standstill", 1.10)
    t_rel = t - t[0]
    standing = t_rel > 15.0
    assert standing.sum() > 100
    at_stop = mass[np.flatnonzero(standing)[0]]
    assert np.all(np.abs(mass[standing] - at_stop) < 0.005 * at_stop), (mass[standing].min(), mass[standing].max(), at_stop)
    assert report["mass"]["status"] in (NOT_OBSERVABLE, CONVERGING, CONVERGED)  # what the braking showed, never a bound
    assert report["friction"]["status"] != AT_BOUND and np.all(np.abs(mu[standing] - mu[standing][0]) < 1e-9)
    assert not obs.filter.diverged and obs.n_resets == 0
    speed = np.linalg.norm(obs.estimate().state.velocity_enu_m_s)
    assert speed < 0.1, speed


def test_a_standing_car_holds_its_pose_through_a_gnss_outage(monkeypatch):
    """Zero-velocity updates (issue 13 item 8): from just before the stop GNSS is silent for 30 s; the wheels say the car
    stands, so neither the position nor the heading drifts (without them: 1.0 m and 0.9 deg in 25 s)."""
    from state_observer.sensors.samples import GnssFix, GnssVelocity

    monkeypatch.setitem(h.MANOEUVRES, "brake_to_standstill", _brake_to_standstill)
    first = []

    def keep(sample):
        first.append(first[0] if first else sample.stamp_ns)
        return not (isinstance(sample, (GnssFix, GnssVelocity)) and sample.stamp_ns - first[0] > 15e9)

    poses = []
    import state_observer.estimation.online as online

    feed = online.OnlineObserver.feed

    def recording_feed(self, sample):
        out = feed(self, sample)
        if out and self.started and sample.stamp_ns - first[0] > 20e9:  # the car has stood still for 5 s
            e = self.estimate().state
            w, x, y, z = e.orientation_wxyz
            poses.append((*e.position_enu_m[:2], np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))))
        return out

    monkeypatch.setattr(online.OnlineObserver, "feed", recording_feed)
    *_, obs = run("brake_to_standstill", 1.0, keep=keep)
    poses = np.array(poses)
    assert len(poses) > 1000
    assert np.linalg.norm(poses[-1, :2] - poses[0, :2]) < 0.05, poses[[0, -1]]
    assert abs(poses[-1, 2] - poses[0, 2]) < np.radians(0.1)  # the yaw-rate part has taught the gyroscope's bias
    assert obs.counters["wheels"]["zero-velocity update"] > 2000  # 100 Hz for ~30 s
    assert np.linalg.norm(obs.estimate().state.velocity_enu_m_s) < 0.02


@pytest.mark.parametrize("excited", [False, True])
def test_a_window_without_excitation_updates_the_resistance_alone(excited):
    """A window without longitudinal excitation (0.1 m/s^2) updates the resistance and leaves the mass where it is, even
    with the two correlated (a Schmidt update: the Kalman gain would move the mass through the correlation, as it did by
    8 kg on the harness' race circle); an excited one (0.8 m/s^2) moves both.  The covariance stays symmetric and
    positive, and the mass's variance is kept without excitation."""
    from state_observer.estimation.online import make_filter
    from state_observer.estimation.spi import W_MASS, W_MASS_N
    from state_observer.paths import default_vehicle_path
    from state_observer.sensors.mounts import mounts_from_vehicle
    from state_observer.vehicle.description import load_vehicle

    desc = load_vehicle(default_vehicle_path())
    f = make_filter(desc, mounts_from_vehicle(desc), "spi_reduced")
    f.start(speed_m_s=20.0)
    f.P_mass[:] = [[100.0**2, -0.8 * 100.0 * 300.0], [-0.8 * 100.0 * 300.0, 300.0**2]]
    mass0, resistance0 = f.mass.copy()
    a = 0.8 if excited else 0.1
    n = 10
    f._window.sums[W_MASS : W_MASS_N] = n * np.array([a, mass0 * a + resistance0 + 200.0, 0.0, 2.0 * mass0 * a + 100.0, 0.0])
    f._window.sums[W_MASS_N] = n
    f._last_window_a = a
    p_mm = f.P_mass[0, 0]
    f.update_parameters()
    assert f.mass[1] > resistance0 + 10.0  # the 200 N the balance misses: the resistance takes a share
    if excited:
        assert abs(f.mass[0] - mass0) > 1.0
    else:
        assert f.mass[0] == mass0
        assert f.P_mass[0, 0] == pytest.approx(p_mm + f.spi.mass_walk_kg_per_sqrt_s**2 * f.spi.every_steps * f.vehicle.dt_s)
    assert f.P_mass[0, 1] == pytest.approx(f.P_mass[1, 0])
    assert np.all(np.linalg.eigvalsh(f.P_mass) > 0.0)

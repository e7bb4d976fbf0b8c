"""The three-simulation harness' inputs for the observer tests: one scenario, shortened, simulated on the
detailed model with the default vehicle and sensors."""
from state_observer.sim import evaluate as ev


def simulated_scenario(name: str, duration_s: float, seed: int):
    """(description, sensor config, manoeuvre, truth records, samples sorted by stamp)."""
    from state_observer.paths import default_sensors_path, default_vehicle_path
    from state_observer.sim.sensors import load_sensor_config
    from state_observer.vehicle.description import load_vehicle

    desc = load_vehicle(default_vehicle_path())
    config = load_sensor_config(default_sensors_path())
    manoeuvre = ev.SCENARIOS[name]()
    manoeuvre.duration_s = duration_s
    truths, samples = ev.simulate_truth(desc, config, manoeuvre, seed=seed)
    return desc, config, manoeuvre, truths, samples


def odometry_pose(observer) -> tuple[float, float, float, float]:
    """(x m, y m, yaw rad, forward speed m/s) of a started OnlineObserver's odometry."""
    from state_observer.conventions import yaw_rad

    o = observer.odometry()
    return float(o.position_m[0]), float(o.position_m[1]), yaw_rad(o.orientation_wxyz), float(o.velocity_body_m_s[0])

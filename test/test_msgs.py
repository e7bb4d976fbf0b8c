"""The package's own messages go through real rclpy publish/subscribe unchanged."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


def plain(value):
    """Message -> nested dict/list of Python values (arrays become lists)."""
    if hasattr(value, "get_fields_and_field_types"):
        return {name: plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if isinstance(value, (str, bytes)):
        return value
    try:
        return [plain(item) for item in value]
    except TypeError:
        return value


def leaves(tree, path=""):
    """Flatten plain() output into {"a.b[2].c": value}."""
    if isinstance(tree, dict):
        out = {}
        for key, sub in tree.items():
            out.update(leaves(sub, f"{path}.{key}" if path else key))
        return out
    if isinstance(tree, list):
        out = {}
        for i, sub in enumerate(tree):
            out.update(leaves(sub, f"{path}[{i}]"))
        return out
    return {path: tree}


def stamped(msg, sec: int, frame_id: str = "base_link"):
    msg.header.stamp.sec = sec
    msg.header.stamp.nanosec = 123_456_789
    msg.header.frame_id = frame_id
    return msg


def tire_forces():
    from state_observer.msg import TireForces, WheelForce
    from geometry_msgs.msg import Point

    wheels = []
    for i, name in enumerate(("fl", "fr", "rl", "rr")):
        x = 1.35 if i < 2 else -1.25
        y = 0.78 if i % 2 == 0 else -0.78
        wheels.append(WheelForce(
            name=name,
            fx_n=1500.5 + i, fy_n=-820.25 - i, fz_n=4100.0 + 10 * i,
            slip_ratio=0.031 + i / 100, slip_angle_rad=-0.042 - i / 100,
            contact_point=Point(x=x, y=y, z=-0.31),
            fx_sigma_n=55.0 + i, fy_sigma_n=61.5 + i, fz_sigma_n=120.0 + i,
        ))
    return stamped(TireForces(wheels=wheels), sec=11)


def vehicle_parameters():
    from state_observer.msg import VehicleParameters

    return stamped(VehicleParameters(
        mass_kg=1612.5, mass_sigma_kg=42.25, mass_status=VehicleParameters.CONVERGING, mass_min_kg=806.25, mass_max_kg=3225.0,
        friction_coefficient=0.83, friction_sigma=0.07, friction_status=VehicleParameters.AT_BOUND, friction_lower_bound=0.61,
        friction_min=0.1, friction_max=1.5, cornering_stiffness_scale_front=0.93, cornering_stiffness_scale_front_sigma=0.04,
        cornering_stiffness_front_status=VehicleParameters.CONVERGED, cornering_stiffness_scale_rear=1.07,
        cornering_stiffness_scale_rear_sigma=0.05, cornering_stiffness_rear_status=VehicleParameters.CONVERGING,
        converged=True, estimator="spi",
    ), sec=12)


def observer_state():
    from state_observer.msg import ObserverState
    from geometry_msgs.msg import Vector3

    return stamped(ObserverState(
        sideslip_rad=0.021, roll_rad=-0.034, pitch_rad=0.012,
        yaw_rate_rad_s=0.41, speed_m_s=17.5,
        suspension_travel_m=[0.011, -0.012, 0.013, -0.014],
        wheel_speed_rad_s=[55.1, 55.2, 55.3, 55.4],
        body_acceleration_m_s2=Vector3(x=0.5, y=3.9, z=-0.2),
        nis_sensor_names=["imu", "gnss", "wheels"],
        nis=[2.5, 1.75, 4.125],
    ), sec=13)


@pytest.mark.parametrize("make_msg", [tire_forces, vehicle_parameters, observer_state])
def test_round_trip(ros, make_msg):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    sent = make_msg()
    msg_type = type(sent)

    # The sample differs from a default message in every field that has a default.
    default = leaves(plain(msg_type()))
    for path, value in leaves(plain(sent)).items():
        if path in default:
            assert value != default[path], f"{msg_type.__name__}.{path} left at its default"

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    topic = f"/test/{msg_type.__name__}"
    publisher = ros.node("publisher").create_publisher(msg_type, topic, qos)
    received = []
    ros.node("subscriber").create_subscription(msg_type, topic, received.append, qos)

    def arrived() -> bool:
        if not received:
            publisher.publish(sent)  # again until discovery has matched the endpoints
        return bool(received)

    assert ros.spin_until(arrived), f"no {msg_type.__name__} received on {topic}"
    assert plain(received[0]) == plain(sent)
    assert received[0] == sent

"""The planar four-bar and five-bar linkages of Sanjurjo 2016 chapter 4 (Tables 4.1 and 4.2).

Uniform slender bars in natural coordinates plus the crank angles as relative
coordinates, gravity along -y.  The coordinate order follows the thesis:
four-bar q = [x1 y1 x2 y2 theta], five-bar q = [x1 y1 x2 y2 x3 y3 theta1 theta2].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constraints import AngleDef, PointDiff
from .kinematics import solve_position
from .model import Model, ModelBuilder


@dataclass(frozen=True)
class Linkage:
    model: Model
    q0: np.ndarray  # assembled initial coordinates
    independent: tuple  # names of the independent coordinates (crank angles)
    lengths: dict  # bar lengths (m)
    masses: dict  # bar masses (kg)


FOUR_BAR_BARS = {"crank": (2.0, 2.0), "coupler": (8.0, 8.0), "rocker": (5.0, 5.0)}  # name: (mass kg, length m)
FIVE_BAR_BARS = {
    "left_crank": (3.0, 0.5),
    "left_coupler": (1.0, 2.062),
    "right_coupler": (2.0, 3.202),
    "right_crank": (3.0, 0.5),
}


def four_bar(gravity: float = -10.0, theta0: float = np.pi / 3) -> Linkage:
    """Four-bar: ground A = (0, 0), B = (10, 0); crank A-P1, coupler P1-P2, rocker P2-B (Table 4.1)."""
    b = ModelBuilder(dim=2, gravity=(0.0, gravity), name="four_bar")
    b.fixed_point("A", (0.0, 0.0))
    b.fixed_point("B", (10.0, 0.0))
    b.point("P1", (2.0 * np.cos(theta0), 2.0 * np.sin(theta0)))
    b.point("P2", (10.0, 5.0))  # rough guess: the position problem assembles it
    b.angle("theta", theta0)
    ends = {"crank": ("A", "P1"), "coupler": ("P1", "P2"), "rocker": ("P2", "B")}
    for name, (mass, length) in FOUR_BAR_BARS.items():
        b.bar(name, *ends[name], mass=mass, length=length)
    b.add_constraint(AngleDef("theta", PointDiff("A", "P1"), (1.0, 0.0), (0.0, 1.0)))
    model = b.build()
    q0 = solve_position(model, model.q_guess, ["theta"])
    return Linkage(model, q0, ("theta",), {k: v[1] for k, v in FOUR_BAR_BARS.items()}, {k: v[0] for k, v in FOUR_BAR_BARS.items()})


def five_bar(gravity: float = -10.0, theta1: float = 0.0, theta2: float = np.pi) -> Linkage:
    """Five-bar: ground A = (0, 0), B = (3, 0); A-P1-P2-P3-B with cranks A-P1 and B-P3 (Table 4.2)."""
    b = ModelBuilder(dim=2, gravity=(0.0, gravity), name="five_bar")
    b.fixed_point("A", (0.0, 0.0))
    b.fixed_point("B", (3.0, 0.0))
    b.point("P1", (0.5 * np.cos(theta1), 0.5 * np.sin(theta1)))
    b.point("P2", (0.0, 2.0))
    b.point("P3", (3.0 + 0.5 * np.cos(theta2), 0.5 * np.sin(theta2)))
    b.angle("theta1", theta1)
    b.angle("theta2", theta2)
    ends = {"left_crank": ("A", "P1"), "left_coupler": ("P1", "P2"), "right_coupler": ("P2", "P3"), "right_crank": ("P3", "B")}
    for name, (mass, length) in FIVE_BAR_BARS.items():
        b.bar(name, *ends[name], mass=mass, length=length)
    b.add_constraint(AngleDef("theta1", PointDiff("A", "P1"), (1.0, 0.0), (0.0, 1.0)))
    b.add_constraint(AngleDef("theta2", PointDiff("B", "P3"), (1.0, 0.0), (0.0, 1.0)))
    model = b.build()
    q0 = solve_position(model, model.q_guess, ["theta1", "theta2"])
    return Linkage(model, q0, ("theta1", "theta2"), {k: v[1] for k, v in FIVE_BAR_BARS.items()}, {k: v[0] for k, v in FIVE_BAR_BARS.items()})

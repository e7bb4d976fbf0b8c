"""Model-agnostic multibody engine: natural coordinates, constraints, forces, ALI3-P integrator.

Nothing here imports ROS, the vehicle or the estimators.
"""
from .constraints import (
    AngleDef,
    BodyPoint,
    BodyVector,
    Coincident,
    Constant,
    Distance,
    DistanceDef,
    Dot,
    DotDriver,
    Driver,
    Function,
    Input,
    PointDiff,
    Prismatic,
    Revolute,
    Signal,
    Spherical,
)
from ..errors import ModelError, SolverError
from .forces import BodyTorque, CoordinateForce, PointForce, SpringDamper, SpringDampers, generalized_forces
from .integrators import ALI3P, SOLVERS, DenseLU, SparseLU, StepResult, default_linear_solver, initial_accelerations, make_solver, mechanical_energy
from .kinematics import constraint_violation, solve_acceleration, solve_position, solve_velocity, velocity_transform
from .model import MinimalModel, Model, ModelBuilder, mass_properties, point_velocity_field, transform_coordinates

__all__ = [name for name in dir() if not name.startswith("_")]

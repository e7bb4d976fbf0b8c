"""Every error the package raises on purpose, in one place.

``StateObserverError`` is the base: ``except StateObserverError`` catches anything the package says with
one line, and anything else is a bug. Each class also derives from the built-in exception its callers
caught before (``ValueError``, ``RuntimeError``, ...), so existing ``except`` clauses keep working.

Three families:

- :class:`ConfigError`: a value the user wrote is wrong (vehicle file, sensor file, node parameter,
  command-line option). ``key`` names it (``"model.initial_mass_kg"``, ``"chassis.mass_kg"``), so
  a front end can say *which* value (the node prefixes ``parameter <key>:``).
- :class:`InputError`: data the package was given is unusable (a bag, a message, a road file).
- :class:`SolverError`: the computation failed (a model step, a kinematic fit, a filter, a kernel build).
"""
from __future__ import annotations

__all__ = [
    "StateObserverError", "ConfigError", "InputError", "SolverError",
    "VehicleConfigError", "SensorConfigError", "CarNumbersError", "ParameterError", "ModelError",
    "IoError", "RoadError", "DataFileNotFoundError",
    "SimulationError", "KinematicsError", "FilterDivergence", "BuildError", "AcceleratorUnavailable",
    "AcceleratorError",
]


class StateObserverError(Exception):
    """Base of every error the package raises on purpose; the message is one line."""


class ConfigError(StateObserverError, ValueError):
    """A configuration value is invalid; ``key`` names it (dotted path or parameter name; None: the whole file)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


class InputError(StateObserverError, ValueError):
    """Input data is unusable; the message names the file, topic or field at fault."""


class SolverError(StateObserverError, RuntimeError):
    """A computation cannot be carried out (singular, inconsistent, not converged, diverged)."""


# ---- configuration -------------------------------------------------------------------------------
class VehicleConfigError(ConfigError):
    """A vehicle description is invalid; the message is ``<file>: <key.path>: <why>``."""


class SensorConfigError(ConfigError):
    """The sensor configuration is invalid. The message is one line: ``<file>: <key.path>: <why>``."""


class CarNumbersError(ConfigError):
    """Input that cannot make a car; the message is one line naming the option (``--cg-height: ...``)."""


class ParameterError(ConfigError):
    """A missing or invalid node or ``process`` parameter; the message names the parameter."""


class ModelError(ConfigError):
    """A multibody model definition is malformed; the message names the item at fault."""


# ---- input data ----------------------------------------------------------------------------------
class IoError(InputError):
    """Any failure of the io layer; the message names the file, topic or field at fault."""


class RoadError(InputError):
    """Invalid road data, a bad road file, or a query off the road mesh."""


class DataFileNotFoundError(StateObserverError, FileNotFoundError):
    """A data file of the package was found under none of the roots (message lists them)."""


# ---- computation ---------------------------------------------------------------------------------
class SimulationError(SolverError):
    """The vehicle model failed (the message says when and why)."""


class KinematicsError(SolverError):
    """A kinematic sweep or fit cannot be made (the corner does not assemble, too few nodes, ...)."""


class FilterDivergence(SolverError):
    """The filter state became non-finite or its multibody model could not be solved."""


class BuildError(SolverError):
    """The C model could not be built (no compiler, or the compiler failed); the message is one line."""


class AcceleratorUnavailable(StateObserverError, RuntimeError):
    """The FPGA backend cannot run here (no pynq, no overlay, no IP, wrong kernel); one-line message."""


class AcceleratorError(SolverError):
    """The IP did not answer (ap_done never set within the timeout)."""

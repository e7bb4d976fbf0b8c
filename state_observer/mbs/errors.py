"""Errors raised by the multibody engine."""
from __future__ import annotations


class ModelError(ValueError):
    """A model definition is malformed; the message names the item at fault."""


class SolverError(RuntimeError):
    """A kinematic problem cannot be solved (singular, inconsistent or not converged)."""

"""Position, velocity and acceleration problems and the velocity transform R (Sanjurjo 2016 §3.3.1-3.3.3).

With a chosen set of independent coordinates z = D q (D selects entries of q):

* position:     Phi(q, t) = 0 with the entries z held, Newton-Raphson        (eq. 3.38)
* velocity:     [Phi_q; D] qd  = [-Phi_t; zd]                                 (eq. 3.39)
* acceleration: [Phi_q; D] qdd = [-gamma; zdd],  gamma = dPhi_q/dt qd + dPhi_t/dt  (eq. 3.40)
* [Phi_q; D]^-1 = [S R]: qd = -S Phi_t + R zd                                 (eqs. 3.52-3.54)

The systems are solved in the least-squares sense, so consistent redundant
constraints are accepted; a set of independent coordinates that does not
determine the mechanism (rank < n) raises :class:`SolverError` naming the rank.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.linalg

from ..errors import SolverError


def _indices(model, independent) -> np.ndarray:
    if len(independent) and isinstance(independent[0], str):
        return model.indices(independent)
    return np.asarray(independent, dtype=np.intp)


def _augmented(model, ind: np.ndarray) -> np.ndarray:
    cs = model.constraints
    D = np.zeros((len(ind), model.n))
    D[np.arange(len(ind)), ind] = 1.0
    return np.vstack([cs.jac, D])


def _lstsq(A: np.ndarray, b: np.ndarray, what: str, ind_names) -> np.ndarray:
    x, _, rank, _ = scipy.linalg.lstsq(A, b, lapack_driver="gelsd", check_finite=False)
    if rank < A.shape[1]:
        raise SolverError(
            f"{what}: the constraints and the independent coordinates {list(ind_names)} do not determine "
            f"the mechanism here (rank {rank} < {A.shape[1]} coordinates); choose other independent coordinates"
        )
    return x


def solve_position(model, q_guess: np.ndarray, independent: Sequence, t: float = 0.0, tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
    """Assemble the mechanism: Newton-Raphson on Phi(q, t) = 0 with the independent entries held fixed."""
    cs = model.constraints
    ind = _indices(model, independent)
    names = [model.coord_names[i] for i in ind]
    q = np.array(q_guess, dtype=float)
    z = q[ind].copy()
    for _ in range(max_iter):
        cs.evaluate(q, t)
        res = np.concatenate([cs.phi, q[ind] - z])
        dq = _lstsq(_augmented(model, ind), -res, "position problem", names)
        q += dq
        if not np.all(np.isfinite(q)):
            break
        if np.linalg.norm(dq) <= tol * (1.0 + np.linalg.norm(q)):
            cs.evaluate(q, t)
            if np.abs(cs.phi).max(initial=0.0) <= 1e-8:
                return q
    cs.evaluate(q, t) if np.all(np.isfinite(q)) else None
    worst = int(np.argmax(np.abs(cs.phi))) if cs.m else 0
    raise SolverError(
        f"position problem did not converge in {max_iter} iterations: constraint '{cs.names[worst]}' "
        f"is violated by {abs(cs.phi[worst]):.3g} (inconsistent constraints or an unreachable configuration?)"
    )


def solve_velocity(model, q: np.ndarray, independent: Sequence, zd: np.ndarray, t: float = 0.0) -> np.ndarray:
    """Dependent velocities from the independent ones (eq. 3.39)."""
    cs = model.constraints
    ind = _indices(model, independent)
    cs.evaluate(q, t)
    rhs = np.concatenate([-cs.phi_t, np.asarray(zd, float)])
    return _lstsq(_augmented(model, ind), rhs, "velocity problem", [model.coord_names[i] for i in ind])


def solve_acceleration(model, q: np.ndarray, qd: np.ndarray, independent: Sequence, zdd: np.ndarray, t: float = 0.0) -> np.ndarray:
    """Dependent accelerations from the independent ones (eq. 3.40)."""
    cs = model.constraints
    ind = _indices(model, independent)
    cs.evaluate(q, t)
    rhs = np.concatenate([-cs.gamma(q, qd), np.asarray(zdd, float)])
    return _lstsq(_augmented(model, ind), rhs, "acceleration problem", [model.coord_names[i] for i in ind])


def velocity_transform(model, q: np.ndarray, independent: Sequence, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """R (n, g) and S (n, m) with [Phi_q; D]^+ = [S R], so that qd = -S Phi_t + R zd (eq. 3.54).

    Column i of R is the velocity of every coordinate for a unit velocity of the i-th
    independent coordinate and zero for the others.
    """
    cs = model.constraints
    ind = _indices(model, independent)
    cs.evaluate(q, t)
    A = _augmented(model, ind)
    inv = _lstsq(A, np.eye(A.shape[0]), "velocity transform", [model.coord_names[i] for i in ind])
    return inv[:, cs.m:], inv[:, : cs.m]


def constraint_violation(model, q: np.ndarray, qd: np.ndarray | None = None, t: float = 0.0) -> tuple[float, float]:
    """max |Phi| and max |Phi_q qd + Phi_t| at (q, qd, t)."""
    cs = model.constraints
    cs.evaluate(q, t)
    pos = float(np.abs(cs.phi).max(initial=0.0))
    vel = 0.0 if qd is None else float(np.abs(cs.jac @ qd + cs.phi_t).max(initial=0.0))
    return pos, vel

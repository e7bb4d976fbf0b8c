"""Index-3 augmented Lagrangian with velocity and acceleration projections (ALI3-P).

Sanjurjo 2016 §3.3.2 (eqs. 3.41-3.51), Rodriguez 2020 §3.2 (eqs. 3.33-3.55):

    M qdd + Phi_q^T alpha Phi + Phi_q^T lambda* = Q,    lambda*_{i+1} = lambda*_i + alpha Phi_{i+1}

integrated with the trapezoidal rule

    qd_{k+1}  = 2/dt q_{k+1} + qd_hat,   qd_hat  = -(2/dt q_k + qd_k)
    qdd_{k+1} = 4/dt^2 q_{k+1} + qdd_hat, qdd_hat = -(4/dt^2 q_k + 4/dt qd_k + qdd_k)

and Newton-Raphson on the residual scaled by dt^2/4

    f(q) = dt^2/4 (M qdd + Phi_q^T (alpha Phi + lambda*) - Q)
    A    = M + dt/2 C + dt^2/4 (Phi_q^T alpha Phi_q + K)        (approximate tangent)

After convergence the velocities and accelerations are projected onto the
constraint manifold with the same (already factorised) matrix A and
W = M + dt/2 C + dt^2/4 K:

    A qd  = W qd*  - dt^2/4 Phi_q^T alpha Phi_t
    A qdd = W qdd* - dt^2/4 Phi_q^T alpha gamma

Like scipy's ``OdeSolver``, ``step()`` returns a :class:`StepResult` and does not
raise when a step fails; the state is left at the last good step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
import scipy.sparse
import scipy.sparse.linalg

from .forces import generalized_forces
from .kinematics import solve_position, solve_velocity


@dataclass
class StepResult:
    success: bool
    iterations: int
    message: str
    position_violation: float  # max |Phi| after the step (linearised from the last iterate, error O(|dq|^2))
    velocity_violation: float  # max |Phi_q qd + Phi_t| after the step, with the last iterate's Phi_q


class DenseLU:
    """Reference linear-solver backend: LAPACK LU (getrf/getrs), factor once, solve several right-hand sides.

    ``factor`` may overwrite A.  A singular matrix gives a handle whose solves are non-finite,
    which the integrator reports as a failed step.
    """

    name = "numpy"
    _getrf, _getrs = scipy.linalg.lapack.dgetrf, scipy.linalg.lapack.dgetrs

    def factor(self, A: np.ndarray):
        lu, piv, info = self._getrf(A, overwrite_a=True)
        return lu, piv, info

    def solve(self, handle, b: np.ndarray) -> np.ndarray:
        lu, piv, info = handle
        if info > 0:
            return np.full_like(b, np.nan)
        return self._getrs(lu, piv, b)[0]


class SparseLU:
    """SuperLU backend (scipy.sparse.linalg.splu) for large models with sparse Jacobians.

    Pays off above about 300 coordinates on one core.  Measured on spatial pendulum chains (ALI3-P
    steps of 4 ms, one BLAS thread), real-time factor dense / sparse: n = 135: 4.3 / 1.6,
    n = 270: 0.79 / 0.80, n = 450: 0.14 / 0.38.
    """

    name = "superlu"
    sparse = True

    def factor(self, A):
        return scipy.sparse.linalg.splu(A.tocsc(), permc_spec="MMD_AT_PLUS_A")

    def solve(self, handle, b: np.ndarray) -> np.ndarray:
        return handle.solve(b)


def default_linear_solver(n: int):
    """Dense LAPACK LU below 300 coordinates, SuperLU from there on (see :class:`SparseLU`)."""
    return SparseLU() if n >= 300 else DenseLU()


class ALI3P:
    """ALI3-P integrator (trapezoidal rule, Newton-Raphson, projections) with a fixed step.

    Parameters
    ----------
    model : Model
    q, qd : (n,) initial coordinates and velocities. With ``independent`` given they
        are first made consistent (position and velocity problems keep those entries).
    t : initial time (s).  dt : step (s).
    alpha : penalty factor, scalar or (m,) (Sanjurjo 2016 App. A: 1e7-1e9).
    tol : Newton-Raphson tolerance on the error left in q (2-norm, MBDE: 1e-10): |dq| of the last
        iteration, or theta/(1 - theta) |dq| once the contraction rate theta is seen to be below 1/2.
        Iterations that stop contracting (theta > 0.9) within 10 tol max(1, |q|_inf) are at the
        round-off floor of the penalty system (it grows with the size of the coordinates, e.g. a car
        1 km from the origin) and are accepted.
    max_iter : iteration cap per step.
    accept_unconverged : for real time: take the iterate reached at the cap as the step
        (success is still True, the message says so).
    linear_solver : object with ``factor(A)`` and ``solve(handle, b)`` (see :mod:`state_observer.accel`).

    Attributes: t, q, qd, qdd, lam (multipliers), n_steps, n_iterations (total),
    last (the last :class:`StepResult`).
    """

    def __init__(
        self,
        model,
        q,
        qd=None,
        t: float = 0.0,
        dt: float = 5e-3,
        alpha: float | Sequence[float] = 1e9,
        tol: float = 1e-10,
        max_iter: int = 25,
        independent: Sequence | None = None,
        accept_unconverged: bool = False,
        linear_solver=None,
    ):
        if not dt > 0.0:
            raise ValueError(f"dt must be positive, got {dt}")
        if not tol > 0.0 or max_iter < 1:
            raise ValueError("tol must be positive and max_iter at least 1")
        n, m = model.n, model.m
        q = np.array(q, dtype=float)
        qd = np.zeros(n) if qd is None else np.array(qd, dtype=float)
        if q.shape != (n,) or qd.shape != (n,) or not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            raise ValueError(f"q and qd must be finite arrays of shape ({n},)")
        alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (m,)).copy()
        if np.any(alpha <= 0.0):
            raise ValueError("alpha must be positive")
        self.model, self.dt, self.alpha, self.tol, self.max_iter = model, float(dt), alpha, float(tol), int(max_iter)
        self.accept_unconverged = accept_unconverged
        self.linear_solver = linear_solver or default_linear_solver(n)
        self._sparse = getattr(self.linear_solver, "sparse", False)
        if self._sparse and callable(getattr(model, "mass_matrix", None)):
            raise ValueError("the sparse linear solver needs a constant mass matrix")
        self._mass_sparse = scipy.sparse.csr_matrix(model.mass) if self._sparse else None
        if independent is not None:
            q = solve_position(model, q, independent, t)
            qd = solve_velocity(model, q, independent, qd[model.indices(independent) if isinstance(independent[0], str) else np.asarray(independent)], t)
        self.t, self.q, self.qd = float(t), q, qd
        # workspace, allocated once
        self.Q = np.zeros(n)
        self.K = np.zeros((n, n))
        self.C = np.zeros((n, n))
        self._state_forces = any(getattr(f, "state_dependent", True) for f in model.forces)
        mass_at = getattr(model, "mass_matrix", None)
        self._mass_at = mass_at if callable(mass_at) else None
        self._stiff = any(getattr(f, "stiff", True) for f in model.forces)
        self._h_alpha = 0.25 * self.dt**2 * alpha
        self._rheonomic = bool(model.constraints.drivers)
        self._constrained = m > 0  # minimal-coordinate models skip every constraint term
        # force elements with internal states (e.g. tire deflections) advance them on accepted steps
        self._stateful = [f for f in model.forces if hasattr(f, "commit")]
        for element in self._stateful:
            element.start(q, qd, self.t)
        self.qdd, self.lam = initial_accelerations(model, q, qd, t, self.Q, self.K, self.C)
        self.n_steps = 0
        self.n_iterations = 0
        self.last: StepResult | None = None

    def step(self) -> StepResult:
        """Advance one step of dt; see the module docstring for the equations."""
        model, dt = self.model, self.dt
        cs = model.constraints
        mass_at = self._mass_at  # configuration-dependent mass matrix (minimal-coordinate models) or None
        Q, K, C = self.Q, self.K, self.C
        t1 = self.t + dt
        c1, c2 = 2.0 / dt, 4.0 / dt**2
        h = dt * dt / 4.0
        qd_hat = -(c1 * self.q + self.qd)
        qdd_hat = -(c2 * self.q + (4.0 / dt) * self.qd + self.qdd)
        q = self.q + dt * self.qd + 0.5 * dt * dt * self.qdd
        M = model.mass if mass_at is None else mass_at(q)
        h_lam = h * self.lam  # multipliers scaled by dt^2/4, as they enter the residual
        ha = self._h_alpha
        solver = self.linear_solver
        state_forces = self._state_forces
        force_tangent = None  # dt/2 C + dt^2/4 K of the forces, from the first iterate of the step
        W = M  # M + force_tangent
        if not state_forces:
            generalized_forces(model, q, self.qd, t1, Q, K, C)
        h_qdd_hat = h * qdd_hat
        # h (M qdd - Q) = M (q + h qdd_hat) - h Q since h c2 = 1
        f_const = M @ h_qdd_hat - h * Q
        converged = False
        it = 0
        norm_dq = math.inf
        constrained = self._constrained
        while it < self.max_iter:
            it += 1
            if constrained:
                cs.evaluate(q, t1)
                J = cs.jac
                h_alpha_phi = ha * cs.phi
                if it > 1:  # lambda*_{i+1} = lambda*_i + alpha Phi(q_{i+1}) (eq. 3.43), not with the predictor's Phi
                    h_lam += h_alpha_phi
            if mass_at is not None and it > 1:
                M = mass_at(q)  # the tangent keeps M(q) and drops dM/dq qdd
            if state_forces:
                # force stiffness and damping enter the tangent from the first iterate of the step only:
                # they change little within a step and cost more than the forces themselves
                first = it == 1
                generalized_forces(model, q, c1 * q + qd_hat, t1, Q, K if first else None, C if first else None)
                if self._stiff and first:
                    force_tangent = (0.5 * dt) * C + h * K
            if state_forces or mass_at is not None:
                f_const = M @ h_qdd_hat - h * Q
                W = M if force_tangent is None else M + force_tangent
            f = M @ q + f_const
            if constrained:
                f += J.T @ (h_alpha_phi + h_lam)
            lu = solver.factor(self._tangent(W, J) if constrained else np.array(W))
            dq = solver.solve(lu, f)
            q = q - dq
            previous, norm_dq = norm_dq, math.sqrt(dq @ dq)
            # error left after this iterate, from the observed contraction rate (Hairer & Wanner
            # IV.8): theta/(1 - theta) |dq| with theta = |dq_i| / |dq_i-1|; plain |dq| at first
            rate = norm_dq / previous if it > 1 else 1.0
            left = norm_dq * rate / (1.0 - rate) if rate < 0.5 else norm_dq
            if left <= self.tol or (rate > 0.9 and norm_dq <= 10.0 * self.tol * max(1.0, abs(q).max())):
                # the second case: iterations stagnate at the round-off floor just above tol
                converged = True
                break
            if not math.isfinite(norm_dq):
                break
        if not converged and not (self.accept_unconverged and math.isfinite(norm_dq)):
            why = "non-finite iterate (singular tangent matrix?)" if not math.isfinite(norm_dq) else f"|dq| = {norm_dq:.3g} > tol {self.tol:.3g}"
            self.last = StepResult(False, it, f"Newton-Raphson failed at t = {t1:.6g} s after {it} iterations: {why}", math.nan, math.nan)
            return self.last
        # multiplier update with Phi at the accepted iterate (eq. 3.43), linearised: Phi is quadratic, so
        # Phi(q) = Phi_last - Phi_q dq up to O(|dq|^2). Without it a step that converges in one
        # iteration never updates lambda* and the constraints drift by (lambda - lambda*) / alpha.
        if constrained:
            phi_final = cs.phi - J @ dq
            h_lam += ha * phi_final
        # projections with the factorised tangent (eqs. 3.50-3.51). They must use the Phi_q that is
        # inside the factorised A: mixing in Phi_q of the final iterate leaks dt^2/4 alpha dPhi_q terms,
        # O(1e7) times larger than the step, into the free directions.
        rhs = W @ (c1 * q + qd_hat)
        if constrained and self._rheonomic:
            rhs -= J.T @ (ha * cs.phi_t)
        qd = solver.solve(lu, rhs)
        rhs = W @ (c2 * q + qdd_hat)
        if constrained:
            rhs -= J.T @ (ha * cs.gamma(q, qd))
        qdd = solver.solve(lu, rhs)
        if not math.isfinite(qd @ qd + qdd @ qdd):
            self.last = StepResult(False, it, f"projection produced non-finite values at t = {t1:.6g} s", math.nan, math.nan)
            return self.last
        self.t, self.q, self.qd, self.qdd, self.lam = t1, q, qd, qdd, h_lam / h
        for element in self._stateful:
            element.commit(q, qd, t1)
        self.n_steps += 1
        self.n_iterations += it
        pos = float(abs(phi_final).max(initial=0.0)) if constrained else 0.0
        vel = float(abs(J @ qd + cs.phi_t).max(initial=0.0)) if constrained else 0.0
        msg = "converged" if converged else f"iteration limit {self.max_iter} reached (|dq| = {norm_dq:.3g})"
        self.last = StepResult(True, it, msg, pos, vel)
        return self.last


    def _tangent(self, W: np.ndarray, J: np.ndarray):
        """A = W + dt^2/4 Phi_q^T alpha Phi_q, dense or sparse as the linear solver wants."""
        if not self._sparse:
            return W + (J.T * self._h_alpha) @ J
        Js = scipy.sparse.csr_matrix(J)
        Ws = self._mass_sparse if W is self.model.mass else scipy.sparse.csr_matrix(W)
        return Ws + Js.T @ scipy.sparse.diags(self._h_alpha) @ Js


def mass_matrix(model, q: np.ndarray) -> np.ndarray:
    """The model's mass matrix at q: constant for natural-coordinate models, ``model.mass_matrix(q)``
    for models in minimal coordinates that provide it."""
    mass_at = getattr(model, "mass_matrix", None)
    return mass_at(q) if callable(mass_at) else model.mass


def initial_accelerations(model, q, qd, t, Q=None, K=None, C=None) -> tuple[np.ndarray, np.ndarray]:
    """qdd and multipliers lambda from the KKT system [[M, Phi_q^T], [Phi_q, 0]] [qdd; lambda] = [Q; -gamma]."""
    n, m = model.n, model.m
    Q = np.zeros(n) if Q is None else Q
    K = np.zeros((n, n)) if K is None else K
    C = np.zeros((n, n)) if C is None else C
    cs = model.constraints
    cs.evaluate(q, t)
    generalized_forces(model, q, qd, t, Q, K, C)
    J = cs.jac
    kkt = np.block([[mass_matrix(model, q), J.T], [J, np.zeros((m, m))]])
    rhs = np.concatenate([Q, -cs.gamma(q, qd)])
    sol = scipy.linalg.lstsq(kkt, rhs, lapack_driver="gelsd", check_finite=False)[0]
    return sol[:n], sol[n:]


def mechanical_energy(model, q: np.ndarray, qd: np.ndarray) -> float:
    """Kinetic energy 1/2 qd^T M(q) qd plus potential energy of gravity and springs (J)."""
    energy = 0.5 * qd @ mass_matrix(model, q) @ qd
    for f in model.forces:
        potential = getattr(f, "potential", None)
        if potential is None:
            raise ValueError(f"force element {type(f).__name__} has no potential energy")
        energy += potential(q)
    return float(energy)


SOLVERS: dict[str, Callable] = {"ali3p": ALI3P}


def make_solver(name: str, model, q, qd=None, **options):
    """Create an integrator by name (like ``scipy.integrate.solve_ivp(method=...)``)."""
    try:
        cls = SOLVERS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown integrator '{name}', choose one of {sorted(SOLVERS)}") from None
    return cls(model, q, qd, **options)

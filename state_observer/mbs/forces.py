"""Force elements: generalised forces Q(q, qd, t) with stiffness K = -dQ/dq and damping C = -dQ/dqd.

Each definition is compiled against the model into an object with
``accumulate(q, qd, t, Q, K, C)`` that adds its contribution in place (K and C are
(n, n) arrays, or both None when only Q is wanted).  The signs make K and C positive for a stabilising spring-damper,
as they enter the tangent matrix M + dt/2 C + dt^2/4 (Phi_q^T alpha Phi_q + K)
(Sanjurjo 2016 eq. 3.49).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .model import body_point

_ROT90 = np.array([[0.0, -1.0], [1.0, 0.0]])


def _value(f, t: float):
    return f(t) if callable(f) else f


# ----- gravity -------------------------------------------------------------------------
class Gravity:
    """Weight of every body, Q = sum_b m_b B_G^T g (added automatically when gravity != 0)."""

    def compile(self, ctx):
        Q = np.zeros(ctx.n)
        for body in ctx.b.bodies.values():
            Q += body.mass * body_point(body, body.com).B.T @ ctx.b.gravity
        return _ConstantForce(Q)


class _ConstantForce:
    stiff = False
    state_dependent = False

    def __init__(self, Q: np.ndarray):
        self.Q = Q

    def accumulate(self, q, qd, t, Q, K, C):
        Q += self.Q

    def potential(self, q):
        return -float(self.Q @ q)


# ----- spring-damper between two points ---------------------------------------------------
@dataclass(frozen=True)
class SpringDamper:
    """Linear spring-damper between points a and b.

    Tension f = k (l - l0) + c dl/dt + preload (N) pulls the points together.
    stiffness k (N/m), damping c (N s/m), free_length l0 (m), preload (N).
    """

    a: object
    b: object
    stiffness: float
    damping: float = 0.0
    free_length: float = 0.0
    preload: float = 0.0

    def compile(self, ctx):
        for key in ("stiffness", "damping", "free_length"):
            v = getattr(self, key)
            if not np.isfinite(v) or v < 0.0:
                raise ModelError(f"{ctx.where()}: spring-damper {self.a}-{self.b}: {key} must be finite and >= 0, got {v}")
        d = ctx.point(self.b) - ctx.point(self.a)
        return _SpringDamper(d.homogeneous, self.stiffness, self.damping, self.free_length, self.preload)


class _SpringDamper:
    stiff = True
    state_dependent = True

    def __init__(self, Dh, k, c, l0, f0):
        self.Dh, self.G = Dh, Dh[:, :-1]
        self.k, self.c, self.l0, self.f0 = k, c, l0, f0
        self.cols = np.flatnonzero(np.any(self.G != 0.0, axis=0))
        self.Gc = self.G[:, self.cols]
        self.GG = self.Gc.T @ self.Gc
        self.ix = np.ix_(self.cols, self.cols)
        self._x = np.ones(Dh.shape[1])

    def state(self, q, qd):
        """Length l (m), rate dl/dt (m/s), unit direction n, d, ddot."""
        self._x[:-1] = q
        d = self.Dh @ self._x
        dd = self.Gc @ qd[self.cols]
        length = math.sqrt(d @ d)
        if length < 1e-12:
            raise FloatingPointError("spring-damper endpoints coincide; direction undefined")
        n = d / length
        return length, n @ dd, n, d, dd

    def potential(self, q):
        length = self.state(q, np.zeros_like(q))[0]
        return 0.5 * self.k * (length - self.l0) ** 2 + self.f0 * length

    def accumulate(self, q, qd, t, Q, K, C):
        length, rate, n, d, dd = self.state(q, qd)
        f = self.k * (length - self.l0) + self.c * rate + self.f0
        J = n @ self.Gc  # dl/dq on the touched columns
        Q[self.cols] -= f * J
        if K is None:
            return
        # with P = (I - n n^T) / l:  d2l/dq2 = Gc^T P Gc,  d(rate)/dq = dd^T P Gc
        drate_dq = (dd @ self.Gc - (dd @ n) * J) / length
        JJ = np.outer(J, J)
        K[self.ix] += np.outer(J, self.k * J + self.c * drate_dq) + (f / length) * (self.GG - JJ)
        C[self.ix] += self.c * JJ


@dataclass(frozen=True)
class SpringDampers:
    """Several :class:`SpringDamper` evaluated together (vectorised); ``f0`` of the compiled set is an array."""

    springs: tuple

    def compile(self, ctx):
        parts = [sd.compile(ctx) for sd in self.springs]
        return SpringDamperSet(parts)


class SpringDamperSet:
    """:class:`SpringDampers` compiled into a model: lengths, rates and tensions of all its springs at once."""

    stiff = True
    state_dependent = True

    def __init__(self, parts: list):
        self.cols = np.unique(np.concatenate([p.cols for p in parts]))
        n1 = parts[0].Dh.shape[1]
        self.D = np.array([p.Dh[:, self.cols] for p in parts])  # (S, 3, k)
        self.dc = np.array([p.Dh[:, n1 - 1] for p in parts])  # (S, 3)
        self.GG = np.einsum("sjk,sjl->skl", self.D, self.D)
        self.k = np.array([p.k for p in parts])
        self.c = np.array([p.c for p in parts])
        self.l0 = np.array([p.l0 for p in parts])
        self.f0 = np.array([p.f0 for p in parts], dtype=float)
        self.ix = np.ix_(self.cols, self.cols)

    def state(self, q, qd):
        """Lengths (S,), rates (S,), unit directions (S, 3), rate vectors (S, 3)."""
        d = np.einsum("sjk,k->sj", self.D, q[self.cols]) + self.dc
        dd = np.einsum("sjk,k->sj", self.D, qd[self.cols])
        length = np.sqrt(np.einsum("sj,sj->s", d, d))
        if length.min() < 1e-12:
            raise FloatingPointError("spring-damper endpoints coincide; direction undefined")
        n = d / length[:, None]
        return length, np.einsum("sj,sj->s", n, dd), n, dd

    def forces(self, q, qd) -> np.ndarray:
        """Tension of each spring-damper (N)."""
        length, rate, _, _ = self.state(q, qd)
        return self.k * (length - self.l0) + self.c * rate + self.f0

    def potential(self, q):
        length = self.state(q, np.zeros_like(q))[0]
        return float(np.sum(0.5 * self.k * (length - self.l0) ** 2 + self.f0 * length))

    def accumulate(self, q, qd, t, Q, K, C):
        length, rate, n, dd = self.state(q, qd)
        f = self.k * (length - self.l0) + self.c * rate + self.f0
        J = np.einsum("sj,sjk->sk", n, self.D)  # dl/dq (S, k)
        Q[self.cols] -= f @ J
        if K is None:
            return
        drate = (np.einsum("sj,sjk->sk", dd, self.D) - np.einsum("sj,sj->s", dd, n)[:, None] * J) / length[:, None]
        g = f / length
        K[self.ix] += J.T @ (self.k[:, None] * J + self.c[:, None] * drate) + np.einsum("s,skl->kl", g, self.GG) - (J.T * g) @ J
        C[self.ix] += (J.T * self.c) @ J


# ----- applied loads -------------------------------------------------------------------------
@dataclass(frozen=True)
class PointForce:
    """Force (N, global axes) applied at a point; ``force`` is a vector or a callable of t."""

    point: object
    force: object

    def compile(self, ctx):
        B = ctx.point(self.point).B
        f0 = np.asarray(_value(self.force, 0.0), float)
        if f0.shape != (ctx.dim,):
            raise ModelError(f"{ctx.where()}: force at {self.point} needs {ctx.dim} components")
        return _PointForce(B.T.copy(), self.force)


class _PointForce:
    stiff = False
    state_dependent = False

    def __init__(self, BT, force):
        self.BT, self.force = BT, force

    def accumulate(self, q, qd, t, Q, K, C):
        Q += self.BT @ np.asarray(_value(self.force, t), float)


@dataclass(frozen=True)
class BodyTorque:
    """Torque (N m, global axes; a scalar about z for planar models) applied to a body.

    Virtual rotation of a body with basis e_k: dtheta = 1/2 sum_k e^k x de_k, with the
    reciprocal vectors e^k = sum_l G^-1_kl e_l (G = Xbar^T Xbar, constant for a rigid
    body), so Q = 1/2 sum_kl G^-1_kl B_k^T (T x e_l), linear in q.
    """

    body: str
    torque: object

    def compile(self, ctx):
        body = ctx.body(self.body)
        X = body.basis_local
        if X.shape[1] != ctx.dim:
            raise ModelError(f"{ctx.where()}: torque on body '{self.body}' needs a full basis of points/vectors")
        Ginv = np.linalg.inv(X.T @ X)
        return _BodyTorque([e.B for e in body.basis], [e.c for e in body.basis], Ginv, ctx.dim, self.torque)


class _BodyTorque:
    stiff = True
    state_dependent = True

    def __init__(self, Bs, cs, Ginv, dim, torque):
        self.Bs, self.cs, self.Ginv, self.dim, self.torque = Bs, cs, Ginv, dim, torque

    def _cross(self, t):
        T = np.asarray(_value(self.torque, t), float)
        if self.dim == 2:
            return float(T) * _ROT90
        return np.array([[0.0, -T[2], T[1]], [T[2], 0.0, -T[0]], [-T[1], T[0], 0.0]])

    def accumulate(self, q, qd, t, Q, K, C):
        S = self._cross(t)
        for k, Bk in enumerate(self.Bs):
            for l, Bl in enumerate(self.Bs):
                g = 0.5 * self.Ginv[k, l]
                if g == 0.0:
                    continue
                Q += g * Bk.T @ (S @ (Bl @ q + self.cs[l]))
                if K is not None:
                    K -= g * Bk.T @ S @ Bl


@dataclass(frozen=True)
class CoordinateForce:
    """Generalised force on a scalar coordinate (N or N m): f(t) - k (q - rest) - c qd.

    A rotational spring-damper or an applied torque on a relative angle, or a force on a
    relative distance.
    """

    coordinate: str
    force: object = 0.0
    stiffness: float = 0.0
    damping: float = 0.0
    rest: float = 0.0

    def compile(self, ctx):
        return _CoordinateForce(ctx.scalar(self.coordinate), self.force, self.stiffness, self.damping, self.rest)


class _CoordinateForce:
    stiff = True
    state_dependent = True

    def __init__(self, i, force, k, c, rest):
        self.i, self.force, self.k, self.c, self.rest = i, force, k, c, rest

    def potential(self, q):
        if callable(self.force):
            raise ValueError("a time-dependent coordinate force has no potential energy")
        dq = q[self.i] - self.rest
        return 0.5 * self.k * dq * dq - float(self.force) * q[self.i]

    def accumulate(self, q, qd, t, Q, K, C):
        i = self.i
        Q[i] += float(_value(self.force, t)) - self.k * (q[i] - self.rest) - self.c * qd[i]
        if K is None:
            return
        K[i, i] += self.k
        C[i, i] += self.c


def generalized_forces(model, q: np.ndarray, qd: np.ndarray, t: float, Q: np.ndarray, K: np.ndarray | None, C: np.ndarray | None) -> None:
    """Fill Q (n,), K (n, n) and C (n, n) with the sum over the model's force elements.

    With K and C None only Q is computed (elements skip their tangent terms)."""
    Q[:] = 0.0
    if K is not None:
        K[:] = 0.0
        C[:] = 0.0
    for f in model.forces:
        f.accumulate(q, qd, t, Q, K, C)

"""Anti-roll bar and aerodynamic drag, as multibody force elements (compile against a model with ``ctx``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _columns(*maps: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.any(np.vstack(maps) != 0.0, axis=0))


@dataclass(frozen=True)
class AntiRollBar:
    """Force k (t_L - t_R) opposing the difference of the wheel-centre travels t = (C - p0) . ez.

    ``left``, ``right``: wheel-centre points; ``origin``: chassis point p0; ``up``: chassis unit
    vector ez; stiffness in N per m of travel difference (the YAML's anti_roll_bar.stiffness_n_per_m).
    Potential 1/2 k (dt_L - dt_R)^2 with dt the travel from the design position.
    """

    left: str
    right: str
    origin: str
    up: str
    stiffness_n_per_m: float

    def compile(self, ctx):
        return _AntiRollBar(ctx.point(self.left), ctx.point(self.right), ctx.point(self.origin), ctx.vector(self.up), self.stiffness_n_per_m, ctx)


class _AntiRollBar:
    stiff = True
    state_dependent = True

    def __init__(self, left, right, origin, up, k, ctx):
        self.k = k
        self.cols = _columns(left.B, right.B, origin.B, up.B)
        c = self.cols
        self.DL = (left.B - origin.B)[:, c], left.c - origin.c
        self.DR = (right.B - origin.B)[:, c], right.c - origin.c
        self.E = up.B[:, c], up.c
        q0 = np.concatenate([np.asarray(v.guess, float) for v in ctx.b.coords.values()])
        self.delta0 = self._delta(q0[c])[0]

    def _delta(self, qc):
        (BL, cL), (BR, cR), (BE, cE) = self.DL, self.DR, self.E
        dL, dR, e = BL @ qc + cL, BR @ qc + cR, BE @ qc + cE
        delta = (dL - dR) @ e
        grad = (BL - BR).T @ e + BE.T @ (dL - dR)
        return delta, grad

    def accumulate(self, q, qd, t, Q, K, C):
        c = self.cols
        delta, grad = self._delta(q[c])
        f = self.k * (delta - self.delta0)
        Q[c] -= f * grad
        if K is None:
            return
        (BL, _), (BR, _), (BE, _) = self.DL, self.DR, self.E
        H = (BL - BR).T @ BE
        K[np.ix_(c, c)] += self.k * np.outer(grad, grad) + f * (H + H.T)

    def potential(self, q):
        delta = self._delta(q[self.cols])[0]
        return 0.5 * self.k * (delta - self.delta0) ** 2


@dataclass(frozen=True)
class AeroDrag:
    """Drag -1/2 rho CdA |v_x| v_x along the chassis x axis and downforce -1/2 rho CzA v_x^2 along its z axis, both at the
    centre of pressure (still air)."""

    point: object  # centre of pressure (a chassis-fixed point)
    forward: str  # chassis unit vector ex
    drag_area_m2: float
    air_density_kg_m3: float
    downforce_area_m2: float = 0.0
    up: str = "ez"  # chassis unit vector ez

    def compile(self, ctx):
        half_rho = 0.5 * self.air_density_kg_m3
        return _AeroDrag(ctx.point(self.point), ctx.vector(self.forward), ctx.vector(self.up), half_rho * self.drag_area_m2,
                         half_rho * self.downforce_area_m2)


class _AeroDrag:
    stiff = True
    state_dependent = True

    def __init__(self, point, forward, up, half_rho_cda, half_rho_cza):
        self.cols = _columns(point.B, forward.B, up.B)
        self.BP = point.B[:, self.cols]
        self.BX, self.cX = forward.B[:, self.cols], forward.c
        self.BZ, self.cZ = up.B[:, self.cols], up.c
        self.coef, self.down = half_rho_cda, half_rho_cza

    def accumulate(self, q, qd, t, Q, K, C):
        c = self.cols
        ex = self.BX @ q[c] + self.cX
        v = self.BP @ qd[c]
        vx = ex @ v
        f = -self.coef * abs(vx) * vx
        Q[c] += self.BP.T @ (f * ex)
        if self.down:
            ez = self.BZ @ q[c] + self.cZ
            Q[c] -= self.BP.T @ (self.down * vx * vx * ez)
        if C is None:
            return
        g = ex @ self.BP  # d vx / d qd
        C[np.ix_(c, c)] += 2.0 * self.coef * abs(vx) * np.outer(g, g)
        if self.down:
            C[np.ix_(c, c)] += 2.0 * self.down * vx * np.outer(self.BP.T @ ez, g)

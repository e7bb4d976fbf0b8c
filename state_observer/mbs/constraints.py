"""Constraint library and the compiled constraint set Phi(q, t) = 0.

Definitions (all Jacobians are analytic; see :mod:`.quadratic`):

* :class:`Distance`   (b - a).(b - a) - L^2 = 0                      rigid bar, constant distance
* :class:`Dot`        u.v - c = 0                                      constant angle between vectors
* :class:`Coincident` a - b = 0                                        point fixed to a body / spherical joint
* :class:`Revolute`   coincident points + (3D) parallel axes           revolute joint
* :class:`Prismatic`  sliding along an axis without relative rotation  prismatic joint
* :class:`AngleDef`   (v.y) cos(th) - (v.x) sin(th) = 0                relative angle th of v in the (x, y) plane
* :class:`DistanceDef` |b - a|^2 - s^2 = 0                             relative distance s
* :class:`Driver`     g.q - f(t) = 0                                   rheonomic driver (inputs)
* :class:`DotDriver`  u.v - f(t) = 0                                   rheonomic driver along a moving axis

Rigid-body and unit-vector constraints are generated from the bodies by the builder.
The angle definition uses the smooth form above instead of the sine/cosine switch of
Sanjurjo 2016 eq. 4.2: it is well conditioned for every angle (dPhi/dth = -|v| |x|).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import ModelError
from .quadratic import Affine, QuadraticSet, QuadRow, dot_row, linear_rows


# ----- references ---------------------------------------------------------------------
@dataclass(frozen=True)
class BodyPoint:
    """A point fixed to ``body`` at ``local`` (m, body frame)."""

    body: str
    local: tuple


@dataclass(frozen=True)
class BodyVector:
    """A vector fixed to ``body`` with local components ``local``."""

    body: str
    local: tuple


@dataclass(frozen=True)
class PointDiff:
    """The vector tip - tail between two points."""

    tail: object
    tip: object


# ----- time functions for drivers -------------------------------------------------------
class Signal:
    """A driver's time function; ``signal(t)`` returns (f, df/dt, d2f/dt2)."""

    def __call__(self, t: float) -> tuple[float, float, float]:
        raise NotImplementedError


class Constant(Signal):
    def __init__(self, value: float):
        self.value = float(value)

    def __call__(self, t):
        return self.value, 0.0, 0.0


class Function(Signal):
    """f(t) with its first and second derivatives given as callables."""

    def __init__(self, f: Callable, df: Callable, ddf: Callable):
        self.f, self.df, self.ddf = f, df, ddf

    def __call__(self, t):
        return float(self.f(t)), float(self.df(t)), float(self.ddf(t))


class Input(Signal):
    """A value set from outside (e.g. a measured steering input), held between updates."""

    def __init__(self, value: float = 0.0, rate: float = 0.0, accel: float = 0.0):
        self.set(value, rate, accel)

    def set(self, value: float, rate: float = 0.0, accel: float = 0.0) -> None:
        self.value, self.rate, self.accel = float(value), float(rate), float(accel)

    def __call__(self, t):
        return self.value, self.rate, self.accel


# ----- definitions -------------------------------------------------------------------
@dataclass(frozen=True)
class Distance:
    a: object
    b: object
    length: float

    def rows(self, ctx):
        if not self.length > 0.0:
            raise ModelError(f"{ctx.where()}: distance {self.a}-{self.b} must be positive")
        d = ctx.point(self.b) - ctx.point(self.a)
        return [dot_row(f"distance({self.a},{self.b})", d, d, self.length**2)]


@dataclass(frozen=True)
class Dot:
    u: object
    v: object
    value: float

    def rows(self, ctx):
        return [dot_row(f"dot({self.u},{self.v})", ctx.vector(self.u), ctx.vector(self.v), self.value)]


@dataclass(frozen=True)
class Coincident:
    """Two points coincide (a point fixed to a body, or a spherical joint)."""

    a: object
    b: object

    def rows(self, ctx):
        return linear_rows(f"coincident({self.a},{self.b})", ctx.point(self.a) - ctx.point(self.b))


Spherical = Coincident


def _perpendiculars(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    axis = axis / np.linalg.norm(axis)
    helper = np.eye(3)[np.argmin(np.abs(axis))]
    p1 = np.cross(axis, helper)
    p1 /= np.linalg.norm(p1)
    return p1, np.cross(axis, p1)


@dataclass(frozen=True)
class Revolute:
    """Points ``a`` and ``b`` coincide and (3D) axes ``axis_a`` and ``axis_b`` stay parallel."""

    a: BodyPoint
    b: BodyPoint
    axis_a: BodyVector | None = None
    axis_b: BodyVector | None = None

    def rows(self, ctx):
        rows = Coincident(self.a, self.b).rows(ctx)
        if ctx.dim == 3:
            if self.axis_a is None or self.axis_b is None:
                raise ModelError(f"{ctx.where()}: revolute {self.a}-{self.b} needs both axes in 3D")
            ua = ctx.vector(self.axis_a)
            for k, p in enumerate(_perpendiculars(np.asarray(self.axis_b.local, float))):
                rows.append(dot_row(f"revolute({self.a.body},{self.b.body}) axis[{k}]", ua, ctx.vector(BodyVector(self.axis_b.body, tuple(p))), 0.0))
        return rows


@dataclass(frozen=True)
class Prismatic:
    """Point ``b`` slides along ``axis_a`` through point ``a`` with no relative rotation.

    ``axis_a``/``axis_b`` are the sliding axis fixed to each body; ``ref_a``/``ref_b`` are
    vectors perpendicular to it fixed to each body that stay parallel.  Planar models use
    only ``axis_a`` and the references (2 equations); spatial models all (5 equations).
    """

    a: BodyPoint
    b: BodyPoint
    axis_a: BodyVector
    axis_b: BodyVector
    ref_a: BodyVector
    ref_b: BodyVector

    def rows(self, ctx):
        d = ctx.point(self.b) - ctx.point(self.a)
        axis_a = np.asarray(self.axis_a.local, float)
        rb = np.asarray(self.ref_b.local, float)
        name = f"prismatic({self.a.body},{self.b.body})"
        if ctx.dim == 2:
            slide = ctx.vector(BodyVector(self.axis_a.body, (-axis_a[1], axis_a[0])))
            ref_b_perp = ctx.vector(BodyVector(self.ref_b.body, (-rb[1], rb[0])))
            return [dot_row(f"{name} slide", d, slide, 0.0), dot_row(f"{name} rotation", ctx.vector(self.ref_a), ref_b_perp, 0.0)]
        rows = []
        for k, p in enumerate(_perpendiculars(axis_a)):
            rows.append(dot_row(f"{name} slide[{k}]", d, ctx.vector(BodyVector(self.axis_a.body, tuple(p))), 0.0))
        ua = ctx.vector(self.axis_a)
        axis_b = np.asarray(self.axis_b.local, float)
        for k, p in enumerate(_perpendiculars(axis_b)):
            rows.append(dot_row(f"{name} axis[{k}]", ua, ctx.vector(BodyVector(self.axis_b.body, tuple(p))), 0.0))
        w = np.cross(axis_b, rb)
        rows.append(dot_row(f"{name} rotation", ctx.vector(self.ref_a), ctx.vector(BodyVector(self.ref_b.body, tuple(w))), 0.0))
        return rows


@dataclass(frozen=True)
class AngleDef:
    """Angle coordinate ``angle`` of vector ``v`` measured from ``x`` towards ``y`` (rad)."""

    angle: str
    v: object
    x: object
    y: object


@dataclass(frozen=True)
class DistanceDef:
    """Distance coordinate ``distance`` = |b - a| (m)."""

    distance: str
    a: object
    b: object

    def rows(self, ctx):
        d = ctx.point(self.b) - ctx.point(self.a)
        row = dot_row(f"distance_def({self.distance})", d, d, 0.0)
        i = ctx.scalar(self.distance)
        row.add(i, i, -2.0)
        return [row]


@dataclass(frozen=True)
class Driver:
    """Rheonomic driver sum_j coeffs[j] q[coords[j]] - signal(t) = 0."""

    coords: Sequence[str]
    signal: Signal
    coeffs: Sequence[float] | None = None
    name: str = ""


@dataclass(frozen=True)
class DotDriver:
    """Rheonomic driver u(q) . v(q) - signal(t) = 0, e.g. a slider's travel along a moving body axis."""

    u: object
    v: object
    signal: Signal
    name: str = ""


# ----- compiled set ----------------------------------------------------------------------
class ConstraintSet:
    """Phi(q, t) with Jacobian Phi_q, Phi_t and gamma = dPhi_q/dt qd + dPhi_t/dt.

    Row order: natural-coordinate rows and drivers first, then angle definitions.
    After ``evaluate(q, t)``: ``phi`` (m,), ``jac`` (m, n), ``phi_t`` (m,).
    ``gamma(q, qd, t)`` (after ``evaluate`` at the same q, t) gives the acceleration
    term so that the acceleration constraints read Phi_q qdd + gamma = 0.
    """

    def __init__(self, n: int, rows: list[QuadRow], angles: list, drivers: list):
        self.n = n
        self.nq = len(rows)
        self.na = len(angles)
        self.m = self.nq + self.na
        # one quadratic set: the constraint rows, then (v.x, v.y) of every angle definition
        self.quad = QuadraticSet(rows + [r for a in angles for r in a[1:]], n, pair_from=len(rows))
        self.angle_theta = np.array([a[0] for a in angles], dtype=np.intp)
        self._angle_flat = (self.nq + np.arange(self.na)) * n + self.angle_theta  # (row, theta) in jac
        self._rot = np.ones(self.na, dtype=np.complex128)  # exp(-i theta) at the last evaluation
        self.names = [r.name for r in rows] + [a[1].name.replace(" x-part", "") for a in angles]
        self.drivers = drivers  # list of (row index, signal)
        self.driver_rows = np.array([d[0] for d in drivers], dtype=np.intp)
        self.phi = np.zeros(self.m)
        self.jac = np.zeros((self.m, n))
        self.phi_t = np.zeros(self.m)
        self._x = np.ones(n + 1)
        self._ddf = np.zeros(len(drivers))

    def touched_columns(self) -> np.ndarray:
        cols = set(self.quad.tj[self.quad.tj < self.n].tolist()) | set(self.angle_theta.tolist())
        return np.array(sorted(cols), dtype=np.intp)

    def evaluate(self, q: np.ndarray, t: float = 0.0) -> None:
        x = self._x
        x[:-1] = q
        nq = self.nq
        quad = self.quad
        quad.evaluate(x)
        self.phi[:nq] = quad.value[:nq]
        self.jac[:nq] = quad.jac[:nq]
        for k, (row, signal) in enumerate(self.drivers):
            f, df, ddf = signal(t)
            self.phi[row] -= f
            self.phi_t[row] = -df
            self._ddf[k] = ddf
        if self.na:
            # with s = v.x + i v.y:  Phi = Im(exp(-i th) s),  dPhi/dth = -Re(exp(-i th) s)
            rot = self._rot = np.exp(-1j * q[self.angle_theta])
            w = rot * quad.value_pairs
            self.phi[nq:] = w.imag
            self.jac[nq:] = (rot[:, None] * quad.jac_pairs).imag
            self.jac.ravel()[self._angle_flat] = -w.real

    def gamma(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """dPhi_q/dt qd + dPhi_t/dt at the last evaluated (q, t) (m,)."""
        curv = self.quad.curvature(qd)
        out = curv[: self.m].copy() if self.na else curv
        if len(self.drivers):
            out[self.driver_rows] -= self._ddf
        if self.na:
            # Phi = Im(r s), r = exp(-i th):  Phi'' - Phi_q qdd = Im(r (s_qq[qd, qd] - thd^2 s)) - 2 thd Re(r s')
            quad = self.quad
            thd = qd[self.angle_theta]
            curv_pairs = curv[self.nq :].view(np.complex128)
            s_dot = quad.jac_pairs @ qd
            rot = self._rot
            out[self.nq :] = (rot * (curv_pairs - thd**2 * quad.value_pairs)).imag - 2.0 * thd * (rot * s_dot).real
        return out


def compile_constraints(ctx, body_rows: list[QuadRow], definitions: list) -> ConstraintSet:
    """Turn definitions into one :class:`ConstraintSet`; drop duplicates, reject contradictions."""
    n = ctx.n
    rows = list(body_rows)
    angles, drivers = [], []
    driver_rows = []
    for d in definitions:
        if isinstance(d, AngleDef):
            i = ctx.scalar(d.angle)
            v = ctx.vector(d.v)
            ra = dot_row(f"angle_def({d.angle}) x-part", v, ctx.vector(d.x), 0.0)
            rb = dot_row(f"angle_def({d.angle}) y-part", v, ctx.vector(d.y), 0.0)
            if any(j == i or k == i for (j, k) in list(ra.H) + list(rb.H)):
                raise ModelError(f"{ctx.where()}: angle '{d.angle}' cannot define itself")
            angles.append((i, ra, rb))
        elif isinstance(d, Driver):
            coeffs = np.ones(len(d.coords)) if d.coeffs is None else np.asarray(d.coeffs, float)
            if len(coeffs) != len(d.coords) or not len(coeffs):
                raise ModelError(f"{ctx.where()}: driver {d.name or d.coords} needs one coefficient per coordinate")
            if not isinstance(d.signal, Signal):
                raise ModelError(f"{ctx.where()}: driver {d.name or d.coords} needs a Signal, got {type(d.signal).__name__}")
            B = np.zeros((1, n))
            for name, cf in zip(d.coords, coeffs):
                B[0, _entry_index(ctx, name)] += cf
            row = linear_rows(d.name or f"driver({','.join(d.coords)})", Affine(B, np.zeros(1)))[0]
            driver_rows.append((row, d.signal))
        elif isinstance(d, DotDriver):
            if not isinstance(d.signal, Signal):
                raise ModelError(f"{ctx.where()}: driver {d.name or (d.u, d.v)} needs a Signal, got {type(d.signal).__name__}")
            row = dot_row(d.name or f"driver({d.u}.{d.v})", ctx.vector(d.u), ctx.vector(d.v), 0.0)
            driver_rows.append((row, d.signal))
        elif hasattr(d, "rows"):
            rows += d.rows(ctx)
        else:
            raise ModelError(f"{ctx.where()}: unknown constraint definition {d!r}")
    rows = _deduplicate(ctx, rows, n)
    for row, signal in driver_rows:
        drivers.append((len(rows), signal))
        rows.append(row)
    return ConstraintSet(n, rows, angles, drivers)


def _entry_index(ctx, name: str) -> int:
    if name in ctx.b.coords and ctx.b.coords[name].size == 1:
        return ctx.b.coords[name].index
    base, _, comp = name.rpartition(".")
    c = ctx.b.coords.get(base)
    if c is None or comp not in "xyz"[: c.size] or not comp:
        raise ModelError(f"{ctx.where()}: unknown coordinate '{name}'")
    return c.index + "xyz".index(comp)


def _deduplicate(ctx, rows: list[QuadRow], n: int) -> list[QuadRow]:
    """Drop repeated rows (e.g. shared unit vectors); refuse contradictory or empty ones."""
    seen: dict = {}
    out = []
    for r in rows:
        const = r.H.get((n, n), 0.0)
        var = QuadRow(r.name, {jk: v for jk, v in r.H.items() if jk != (n, n)})
        if not var.H:
            if abs(const) > 1e-12:
                raise ModelError(f"{ctx.where()}: constraint '{r.name}' can never hold")
            continue
        key = var.key()
        if key in seen:
            other, other_const = seen[key]
            if abs(other_const - const) > 1e-9 * max(1.0, abs(const)):
                raise ModelError(f"{ctx.where()}: constraints '{other.name}' and '{r.name}' contradict each other")
            continue
        seen[key] = (r, const)
        out.append(r)
    return out

"""Model description: coordinates, rigid bodies, constraints and forces.

A model is written with :class:`ModelBuilder` and frozen by ``build()`` into a
:class:`Model`.  Coordinates are mixed natural coordinates (Sanjurjo 2016 §3.3):

* ``point``    - a basic point, ``dim`` Cartesian coordinates in m;
* ``vector``   - a unit vector, ``dim`` components;
* ``angle``    - a relative angle in rad, defined by an :class:`~.constraints.AngleDef`;
* ``distance`` - a relative distance in m, defined by a :class:`~.constraints.DistanceDef`;
* ``scalar``   - any other relative coordinate (e.g. a rack travel driven by an input).

Fixed points (ground) are constants, not coordinates.  A rigid body lists the points
and unit vectors that move with it, in its own local frame; the body's rigid-body
constraints and its constant mass matrix follow from that list (García de Jalón &
Bayo, natural coordinates): with an origin point r0 and basis vectors e_k (other
points minus r0, or unit vectors) every body point is r(x) = r0 + sum_k c_k e_k,
c = Xbar^+ (x - x0), which is linear in q.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import ModelError
from .quadratic import Affine, QuadRow, dot_row, linear_rows

KINDS = ("point", "vector", "angle", "distance", "scalar")


@dataclass(frozen=True)
class Coordinate:
    name: str
    kind: str
    index: int  # first entry in q
    size: int
    guess: tuple


@dataclass
class Body:
    """A rigid body described in its local frame.

    points:  {coordinate or fixed-point name: local position (m)}; the first is the origin.
    vectors: {unit-vector coordinate name: local direction (unit)}.
    inertia: about the centre of mass in local axes; planar: I_zz (kg m^2);
             spatial: 3x3 tensor or its 3 principal values.
    """

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    points: dict
    vectors: dict
    # filled by the builder:
    origin: str = ""
    basis_local: np.ndarray = field(default=None)  # (dim, k) local basis vectors
    basis: list = field(default_factory=list)  # list of Affine maps e_k(q)
    r0: Affine = None
    J0: np.ndarray = None  # second moment of mass about the origin, local axes (kg m^2)
    basis_parents: list = field(default_factory=list)  # per basis vector: other body it lies on, or None


class ModelBuilder:
    """Collects coordinates, bodies, constraints and forces; ``build()`` validates and freezes.

    Example (planar pendulum)::

        b = ModelBuilder(dim=2, gravity=(0, -9.81))
        b.fixed_point("O", (0, 0))
        b.point("P", (1, 0))
        b.bar("rod", "O", "P", mass=1.0)
        model = b.build()
    """

    def __init__(self, dim: int = 3, gravity: Sequence[float] | None = None, name: str = "model"):
        if dim not in (2, 3):
            raise ModelError(f"model '{name}': dim must be 2 or 3, got {dim}")
        self.dim = dim
        self.name = name
        g = np.zeros(dim) if gravity is None else np.asarray(gravity, dtype=float)
        if g.shape != (dim,):
            raise ModelError(f"model '{name}': gravity must have {dim} components, got {g.shape}")
        self.gravity = g
        self.coords: dict[str, Coordinate] = {}
        self.fixed: dict[str, np.ndarray] = {}
        self.bodies: dict[str, Body] = {}
        self.constraints: list = []
        self.forces: list = []
        self.scalar_inertia: dict[str, float] = {}
        self._n = 0

    # ----- coordinates -------------------------------------------------------------
    def _add_coord(self, name: str, kind: str, guess, inertia: float = 0.0) -> str:
        if not isinstance(name, str) or not name:
            raise ModelError(f"model '{self.name}': coordinate names must be non-empty strings, got {name!r}")
        if name in self.coords or name in self.fixed:
            raise ModelError(f"model '{self.name}': coordinate '{name}' defined twice")
        size = self.dim if kind in ("point", "vector") else 1
        guess = np.atleast_1d(np.asarray(guess, dtype=float))
        if guess.shape != (size,) or not np.all(np.isfinite(guess)):
            raise ModelError(f"model '{self.name}': {kind} '{name}' needs {size} finite values, got {guess.tolist()}")
        if not np.isfinite(inertia) or inertia < 0.0:
            raise ModelError(f"model '{self.name}': inertia of '{name}' must be finite and >= 0, got {inertia}")
        self.coords[name] = Coordinate(name, kind, self._n, size, tuple(guess))
        self.scalar_inertia[name] = float(inertia)
        self._n += size
        return name

    def point(self, name: str, guess) -> str:
        """A basic point; ``guess`` (m) is the start of the position problem."""
        return self._add_coord(name, "point", guess)

    def vector(self, name: str, guess) -> str:
        """A unit vector; its unit-norm constraint is added automatically."""
        g = np.asarray(guess, dtype=float)
        if g.shape == (self.dim,) and abs(np.linalg.norm(g) - 1.0) > 1e-6:
            raise ModelError(f"model '{self.name}': vector '{name}' guess is not a unit vector (norm {np.linalg.norm(g):.6g})")
        return self._add_coord(name, "vector", guess)

    def angle(self, name: str, guess: float, inertia: float = 0.0) -> str:
        """A relative angle (rad); ``inertia`` (kg m^2) adds 1/2 I thd^2 to the kinetic energy
        (e.g. the spin of an axisymmetric wheel about its axle)."""
        return self._add_coord(name, "angle", guess, inertia)

    def distance(self, name: str, guess: float) -> str:
        return self._add_coord(name, "distance", guess)

    def scalar(self, name: str, guess: float, inertia: float = 0.0) -> str:
        """Any other relative coordinate; ``inertia`` (kg or kg m^2) as for :meth:`angle`."""
        return self._add_coord(name, "scalar", guess, inertia)

    def fixed_point(self, name: str, position) -> str:
        if name in self.coords or name in self.fixed:
            raise ModelError(f"model '{self.name}': point '{name}' defined twice")
        p = np.asarray(position, dtype=float)
        if p.shape != (self.dim,) or not np.all(np.isfinite(p)):
            raise ModelError(f"model '{self.name}': fixed point '{name}' needs {self.dim} finite values")
        self.fixed[name] = p
        return name

    # ----- bodies ------------------------------------------------------------------
    def body(self, name: str, mass: float, com, inertia, points: dict, vectors: dict | None = None) -> str:
        """A rigid body; see :class:`Body` for the arguments (SI units, local frame)."""
        where = f"model '{self.name}', body '{name}'"
        if name in self.bodies:
            raise ModelError(f"{where}: defined twice")
        if mass is None or not np.isfinite(mass) or mass <= 0.0:
            raise ModelError(f"{where}: mass must be positive and finite, got {mass}")
        if inertia is None:
            raise ModelError(f"{where}: missing inertia")
        com = np.asarray(com, dtype=float)
        if com.shape != (self.dim,):
            raise ModelError(f"{where}: centre of mass needs {self.dim} components")
        if not points:
            raise ModelError(f"{where}: needs at least one point (its origin)")
        from .constraints import BodyPoint

        pts = {}
        for p, loc in points.items():
            if isinstance(p, BodyPoint):
                if p.body not in self.bodies:
                    raise ModelError(f"{where}: point {p} is on body '{p.body}', which must be defined before it")
            elif p not in self.fixed and (p not in self.coords or self.coords[p].kind != "point"):
                raise ModelError(f"{where}: unknown point '{p}'")
            loc = np.asarray(loc, dtype=float)
            if loc.shape != (self.dim,):
                raise ModelError(f"{where}: local position of '{p}' needs {self.dim} components")
            pts[p] = loc
        vecs = {}
        for v, loc in (vectors or {}).items():
            if v not in self.coords or self.coords[v].kind != "vector":
                raise ModelError(f"{where}: unknown unit vector '{v}'")
            loc = np.asarray(loc, dtype=float)
            if loc.shape != (self.dim,) or abs(np.linalg.norm(loc) - 1.0) > 1e-9:
                raise ModelError(f"{where}: local direction of '{v}' must be a unit {self.dim}-vector")
            vecs[v] = loc
        if all(p in self.fixed for p in pts) and not vecs:
            raise ModelError(f"{where}: all its points are fixed; ground needs no body")
        inertia = np.asarray(inertia, dtype=float)
        self.bodies[name] = Body(name, float(mass), com, inertia, pts, vecs)
        return name

    def bar(self, name: str, a: str, b: str, mass: float, length: float | None = None) -> str:
        """A uniform slender bar from point a to point b (planar or spatial)."""
        if length is None:
            pa = self.fixed.get(a, self.coords[a].guess if a in self.coords else None)
            pb = self.fixed.get(b, self.coords[b].guess if b in self.coords else None)
            if pa is None or pb is None:
                raise ModelError(f"model '{self.name}', bar '{name}': unknown point '{a if pa is None else b}'")
            length = float(np.linalg.norm(np.asarray(pb) - np.asarray(pa)))
        if not length > 0.0:
            raise ModelError(f"model '{self.name}', bar '{name}': length must be positive")
        ex = np.zeros(self.dim)
        ex[0] = length
        com = ex / 2.0
        if self.dim == 2:
            inertia = mass * length**2 / 12.0
        else:
            inertia = np.diag([0.0, mass * length**2 / 12.0, mass * length**2 / 12.0])
        return self.body(name, mass, com, inertia, {a: np.zeros(self.dim), b: ex})

    # ----- constraints and forces --------------------------------------------------
    def add_constraint(self, constraint) -> None:
        self.constraints.append(constraint)

    def add_force(self, force) -> None:
        self.forces.append(force)

    # ----- build -------------------------------------------------------------------
    def build(self):
        from .constraints import compile_constraints
        from .forces import Gravity

        if not self.coords:
            raise ModelError(f"model '{self.name}': has no coordinates")
        n = self._n
        for body in self.bodies.values():
            _setup_body(self, body, n)
        mass = np.zeros((n, n))
        for body in self.bodies.values():
            mass += body_mass_matrix(body)
        for name, inertia in self.scalar_inertia.items():
            i = self.coords[name].index
            mass[i, i] += inertia
        ctx = BuildContext(self, n)
        rows = []
        for body in self.bodies.values():
            rows += rigid_body_rows(self, body)
        for name, c in self.coords.items():
            if c.kind == "vector":
                u = ctx.vector(name)
                rows.append(dot_row(f"unit({name})", u, u, 1.0))
        cset = compile_constraints(ctx, rows, self.constraints)
        forces = list(self.forces)
        if np.any(self.gravity != 0.0):
            forces.insert(0, Gravity())
        compiled_forces = [f.compile(ctx) for f in forces]
        q0 = np.concatenate([np.asarray(c.guess, dtype=float) for c in self.coords.values()])
        model = Model(
            name=self.name,
            dim=self.dim,
            n=n,
            coords=dict(self.coords),
            coord_names=_entry_names(self.coords),
            fixed={k: v.copy() for k, v in self.fixed.items()},
            bodies=dict(self.bodies),
            gravity=self.gravity.copy(),
            mass=mass,
            constraints=cset,
            forces=compiled_forces,
            q_guess=q0,
        )
        _check_coverage(model)
        return model


def _entry_names(coords: dict) -> list[str]:
    names = []
    for c in coords.values():
        if c.size == 1:
            names.append(c.name)
        else:
            names += [f"{c.name}.{a}" for a in "xyz"[: c.size]]
    return names


class BuildContext:
    """Resolves names used in constraint and force definitions into affine maps of q."""

    def __init__(self, builder: ModelBuilder, n: int):
        self.b = builder
        self.n = n
        self.dim = builder.dim

    def where(self) -> str:
        return f"model '{self.b.name}'"

    def select(self, name: str, kinds: tuple) -> Affine:
        c = self.b.coords.get(name)
        if c is None or c.kind not in kinds:
            raise ModelError(f"{self.where()}: unknown {'/'.join(kinds)} '{name}'")
        B = np.zeros((c.size, self.n))
        B[np.arange(c.size), c.index + np.arange(c.size)] = 1.0
        return Affine(B, np.zeros(c.size))

    def point(self, ref) -> Affine:
        """A point: a name (coordinate or fixed point) or a BodyPoint."""
        from .constraints import BodyPoint

        if isinstance(ref, BodyPoint):
            return body_point(self.body(ref.body), ref.local)
        if isinstance(ref, str) and ref in self.b.fixed:
            return Affine.constant(self.b.fixed[ref], self.n)
        if isinstance(ref, str):
            return self.select(ref, ("point",))
        raise ModelError(f"{self.where()}: cannot use {ref!r} as a point")

    def vector(self, ref) -> Affine:
        """A vector: unit-vector name, BodyVector, PointDiff or a constant array."""
        from .constraints import BodyVector, PointDiff

        if isinstance(ref, BodyVector):
            return body_vector(self.body(ref.body), ref.local)
        if isinstance(ref, PointDiff):
            return self.point(ref.tip) - self.point(ref.tail)
        if isinstance(ref, str):
            return self.select(ref, ("vector",))
        arr = np.asarray(ref, dtype=float)
        if arr.shape == (self.dim,):
            return Affine.constant(arr, self.n)
        raise ModelError(f"{self.where()}: cannot use {ref!r} as a vector")

    def scalar(self, name: str) -> int:
        c = self.b.coords.get(name)
        if c is None or c.size != 1:
            raise ModelError(f"{self.where()}: unknown scalar coordinate '{name}'")
        return c.index

    def body(self, name: str) -> Body:
        if name not in self.b.bodies:
            raise ModelError(f"{self.where()}: unknown body '{name}'")
        return self.b.bodies[name]


def _setup_body(b: ModelBuilder, body: Body, n: int) -> None:
    """Choose the body's origin and independent local basis; check inertia and centre of mass."""
    ctx = BuildContext(b, n)
    where = f"model '{b.name}', body '{body.name}'"
    names = list(body.points)
    body.origin = names[0]
    x0 = body.points[names[0]]
    origin_parent = _parent(names[0])
    # (affine map, local vector, parent body when both ends lie on one other body)
    # unit vectors first: their unit-norm row then doubles as a basis row instead of adding a redundant one
    cand = [(ctx.vector(v), loc, None) for v, loc in body.vectors.items()]
    cand += [(ctx.point(p) - ctx.point(body.origin), body.points[p] - x0, origin_parent if _parent(p) == origin_parent else None) for p in names[1:]]
    basis, local, parents = [], [], []
    for aff, loc, parent in cand:
        trial = np.column_stack(local + [loc])
        if np.linalg.matrix_rank(trial, tol=1e-9 * max(1.0, np.abs(trial).max())) == len(local) + 1:
            basis.append(aff)
            local.append(loc)
            parents.append(parent)
        if len(local) == b.dim:
            break
    body.basis_parents = parents
    if b.dim == 2 and len(local) == 1:  # planar: the perpendicular vector is linear in q
        rot = np.array([[0.0, -1.0], [1.0, 0.0]])
        basis.append(basis[0].rows(rot))
        local.append(rot @ local[0])
        parents.append(parents[0])
    X = np.column_stack(local) if local else np.zeros((b.dim, 0))
    body.basis = basis
    body.basis_local = X
    body.r0 = ctx.point(body.origin)
    # inertia -> second moment of mass about the origin, J0 = int (x - x0)(x - x0)^T dm
    I = body.inertia
    if b.dim == 2:
        if I.size != 1 or not np.isfinite(I).all() or I.item() < 0.0:
            raise ModelError(f"{where}: planar inertia must be one non-negative I_zz (kg m^2)")
        JG = 0.5 * I.item() * np.eye(2)
    else:
        if I.shape == (3,):
            I = np.diag(I)
        if I.shape != (3, 3) or not np.isfinite(I).all() or not np.allclose(I, I.T):
            raise ModelError(f"{where}: inertia must be a symmetric 3x3 tensor or 3 principal values (kg m^2)")
        JG = 0.5 * np.trace(I) * np.eye(3) - I
        if np.linalg.eigvalsh(JG).min() < -1e-9 * max(1.0, np.trace(I)):
            raise ModelError(f"{where}: inertia violates the triangle inequality (not a physical rigid body)")
    d = body.com - x0
    J0 = JG + body.mass * np.outer(d, d)
    P = X @ np.linalg.pinv(X) if X.size else np.zeros((b.dim, b.dim))
    scale = max(1.0, np.abs(J0).max())
    if np.abs(P @ d - d).max() > 1e-9 * max(1.0, np.abs(d).max()) or np.abs(P @ J0 @ P - J0).max() > 1e-9 * scale:
        raise ModelError(
            f"{where}: its points and vectors span {X.shape[1]} directions, not enough to carry its "
            "centre of mass and inertia; add a point or unit vector"
        )
    body.J0 = J0


def _parent(point) -> str | None:
    """The body a point element is fixed to when it is given as a BodyPoint, else None."""
    return getattr(point, "body", None)


def body_coefficients(body: Body, local) -> np.ndarray:
    """c with r(x) = r0 + sum_k c_k e_k for the local point x."""
    local = np.asarray(local, dtype=float)
    rel = local - body.points[body.origin]
    c = np.linalg.pinv(body.basis_local) @ rel
    if np.abs(body.basis_local @ c - rel).max() > 1e-9 * max(1.0, np.abs(rel).max()):
        raise ModelError(f"body '{body.name}': local point {local.tolist()} is outside the span of its points and vectors")
    return c


def body_point(body: Body, local) -> Affine:
    """Affine map of a point fixed to the body, given in local coordinates (m)."""
    c = body_coefficients(body, local)
    out = Affine(body.r0.B.copy(), body.r0.c.copy())
    for ck, e in zip(c, body.basis):
        out = out + e.scale(ck)
    return out


def body_vector(body: Body, local) -> Affine:
    """Linear map of a vector fixed to the body, given in local axes."""
    local = np.asarray(local, dtype=float)
    c = np.linalg.pinv(body.basis_local) @ local
    if np.abs(body.basis_local @ c - local).max() > 1e-9 * max(1.0, np.abs(local).max()):
        raise ModelError(f"body '{body.name}': local vector {local.tolist()} is outside the span of its points and vectors")
    n = body.r0.B.shape[1]
    out = Affine(np.zeros((len(local), n)), np.zeros(len(local)))
    for ck, e in zip(c, body.basis):
        out = out + e.scale(ck)
    return out


def body_mass_matrix(body: Body) -> np.ndarray:
    """Constant mass matrix  M = int C^T C dm  with C = B0 + sum_k c_k B_k (natural coordinates)."""
    B0 = body.r0.B
    Bk = [e.B for e in body.basis]
    X = body.basis_local
    Xp = np.linalg.pinv(X)
    cg = Xp @ (body.com - body.points[body.origin])
    Z = Xp @ body.J0 @ Xp.T  # int c c^T dm
    M = body.mass * B0.T @ B0
    for k, B in enumerate(Bk):
        cross = B0.T @ B
        M += body.mass * cg[k] * (cross + cross.T)
        for l, B2 in enumerate(Bk):
            M += Z[k, l] * B.T @ B2
    return M


def rigid_body_rows(b: ModelBuilder, body: Body) -> list[QuadRow]:
    """Rigid-body constraints: constant dot products of the basis, other elements fixed to it."""
    rows = []
    X = body.basis_local
    synthetic = _is_synthetic(body)  # e1 = rot90(e0) satisfies its dot products identically
    parents = body.basis_parents
    for i in range(len(body.basis)):
        for j in range(i, len(body.basis)):
            if synthetic and 1 in (i, j):
                continue
            if parents[i] is not None and parents[i] == parents[j]:
                continue  # both vectors lie on one other rigid body: the product is constant already
            rows.append(dot_row(f"{body.name}: e{i}.e{j}", body.basis[i], body.basis[j], float(X[:, i] @ X[:, j])))
    ctx = BuildContext(b, body.r0.B.shape[1])
    for p, loc in list(body.points.items())[1:]:
        aff = ctx.point(p)
        fixed = body_point(body, loc)
        if _same_affine(aff, fixed):
            continue  # a basis point
        rows += linear_rows(f"{body.name}: point {p} fixed to body", aff - fixed)
    for v, loc in body.vectors.items():
        aff = ctx.vector(v)
        fixed = body_vector(body, loc)
        if _same_affine(aff, fixed):
            continue
        rows += linear_rows(f"{body.name}: vector {v} fixed to body", aff - fixed)
    return rows


def _is_synthetic(body: Body) -> bool:
    """True when the second planar basis vector is the rotated first one (added by the engine)."""
    if len(body.basis) != 2 or body.basis[0].B.shape[0] != 2:
        return False
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    return _same_affine(body.basis[1], body.basis[0].rows(rot))


def _same_affine(a: Affine, b: Affine) -> bool:
    return a.B.shape == b.B.shape and np.allclose(a.B, b.B, atol=1e-12) and np.allclose(a.c, b.c, atol=1e-12)


@dataclass(frozen=True)
class Model:
    """A frozen multibody model: no algorithm modifies it (see :class:`~.data.Data` for workspaces).

    n:         number of coordinates
    mass:      constant mass matrix (n, n), kg (or kg m^2 for rotational scalars)
    constraints: compiled constraint set (m rows)
    forces:    compiled force elements
    q_guess:   the guesses given for the coordinates (not necessarily consistent)
    """

    name: str
    dim: int
    n: int
    coords: dict
    coord_names: list
    fixed: dict
    bodies: dict
    gravity: np.ndarray
    mass: np.ndarray
    constraints: object
    forces: list
    q_guess: np.ndarray

    @property
    def m(self) -> int:
        return self.constraints.m

    def index(self, name: str) -> int:
        """Index in q of a scalar coordinate or of a component such as ``'P1.x'``."""
        try:
            return self.coord_names.index(name)
        except ValueError:
            raise ModelError(f"model '{self.name}': unknown coordinate '{name}'") from None

    def indices(self, names: Sequence[str]) -> np.ndarray:
        return np.array([self.index(s) for s in names], dtype=np.intp)


def _check_coverage(model: Model) -> None:
    """Every coordinate must carry inertia or be constrained, else the dynamics are singular."""
    cs = model.constraints
    touched = np.zeros(model.n, dtype=bool)
    touched |= np.any(model.mass != 0.0, axis=0)
    touched[cs.touched_columns()] = True
    if not touched.all():
        bad = [model.coord_names[i] for i in np.flatnonzero(~touched)]
        raise ModelError(f"model '{model.name}': coordinate '{bad[0]}' has no mass and no constraint")


def mass_properties(model: Model, q: np.ndarray) -> tuple[float, np.ndarray]:
    """Total mass (kg) and centre of mass (m) of the model's bodies at q (scalar-coordinate inertias excluded)."""
    mass, moment = 0.0, np.zeros(model.dim)
    for body in model.bodies.values():
        g = body_point(body, body.com)
        mass += body.mass
        moment += body.mass * (g.B @ q + g.c)
    return mass, moment / mass


def transform_coordinates(model: Model, q: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """q of the model moved rigidly: points -> R p + t, unit vectors -> R u, scalars unchanged.

    Valid for models without fixed points (the whole model moves, e.g. a vehicle placed on the map).
    """
    if model.fixed:
        raise ModelError(f"model '{model.name}': cannot move a model with fixed points rigidly")
    out = np.array(q, dtype=float)
    for c in model.coords.values():
        if c.kind == "point":
            out[c.index : c.index + c.size] = rotation @ q[c.index : c.index + c.size] + translation
        elif c.kind == "vector":
            out[c.index : c.index + c.size] = rotation @ q[c.index : c.index + c.size]
    return out


def point_velocity_field(model: Model, velocity: np.ndarray, omega: np.ndarray, origin: np.ndarray, q: np.ndarray) -> np.ndarray:
    """qd of a rigid motion of the whole model: points v + omega x (p - origin), vectors omega x u, scalars 0."""
    qd = np.zeros(model.n)
    for c in model.coords.values():
        if c.kind == "point":
            qd[c.index : c.index + c.size] = velocity + np.cross(omega, q[c.index : c.index + c.size] - origin)
        elif c.kind == "vector":
            qd[c.index : c.index + c.size] = np.cross(omega, q[c.index : c.index + c.size])
    return qd


class MinimalModel:
    """A model in independent coordinates only (no constraints) with a configuration-dependent mass
    matrix, for the same ALI3-P integrator (which then reduces to the trapezoidal rule with
    Newton-Raphson on M(q) qdd = Q(q, qd, t), tangent M(q) + dt/2 C + dt^2/4 K).

    mass_matrix: callable q -> (n, n).  forces: compiled force elements (``accumulate``); they must
    include the velocity-dependent inertia terms (Coriolis, centrifugal) of the kinetic energy.
    """

    def __init__(self, name: str, coord_names, mass_matrix, forces):
        from .constraints import ConstraintSet

        self.name = name
        self.coord_names = list(coord_names)
        self.n = len(self.coord_names)
        self.mass_matrix = mass_matrix
        self.forces = list(forces)
        self.constraints = ConstraintSet(self.n, [], [], [])
        self.fixed: dict = {}
        self.coords: dict = {}
        self.dim = 0

    @property
    def m(self) -> int:
        return 0

    @property
    def mass(self) -> np.ndarray:
        raise AttributeError("a minimal-coordinate model has no constant mass matrix; call mass_matrix(q)")

    def index(self, name: str) -> int:
        try:
            return self.coord_names.index(name)
        except ValueError:
            raise ModelError(f"model '{self.name}': unknown coordinate '{name}'") from None

    def indices(self, names) -> np.ndarray:
        return np.array([self.index(s) for s in names], dtype=np.intp)

"""Road surfaces for wheel contact: a flat (optionally graded) plane and a triangle mesh.

Frame and units: ENU, metres (x east, y north, z up). A road is a height field
z = f(x, y): every query is a vertical projection of the point (x, y) onto the surface.

Contact query
-------------
``road.contact(xy)`` takes the (N, 2) horizontal positions of the N wheel centres and
returns a :class:`RoadContact` with, for each point,

* ``height_m``  (N,)    road height z(x, y), m
* ``normal``    (N, 3)  unit upward normal  n = (-dz/dx, -dz/dy, 1) / sqrt(1 + |grad z|^2)
* ``gradient``  (N, 2)  (dz/dx, dz/dy), dimensionless, for Jacobians

:class:`FlatRoad` is z = h + g_x x + g_y y, :class:`RollingRoad` hills along x. :class:`MeshRoad` is a triangulated surface
(piecewise linear): height is continuous, the normal and gradient are constant on each
triangle and jump across edges. On an edge or vertex the triangle with the largest
smallest barycentric coordinate (the one the point is "most inside") is used, ties going
to the lower triangle index, so repeated queries are deterministic.

Mesh spatial index
------------------
Built once in the constructor, in local coordinates u = (x, y) - origin (origin = lower
left corner of the vertices' bounding box, which keeps georeferenced coordinates well
conditioned):

* per triangle t a 4x3 matrix C_t such that C_t [u_x, u_y, 1]^T = (l0, l1, l2, z): the
  three barycentric coordinates and the plane height, so that one matrix product per
  candidate gives both the inside test (min l_k >= -1e-9) and the height;
* a uniform grid of square cells (side ~ sqrt(mean triangle area * 2), i.e. the spacing of a
  regular mesh) whose table lists, for every cell, each triangle whose closed x-y footprint
  touches the closed cell (bounding boxes, then a separating-axis test with a small
  tolerance), padded with a sentinel triangle that contains no point, and surrounded by a
  ring of cells that repeat their neighbours (so a point just off the grid is clamped
  without a clip). Cells are found with the same ``floor(u / cell)`` in the build and the
  query, so a point inside a closed triangle always has that triangle among its cell's
  candidates (floor is monotone).

A query is a fixed sequence of about 20 NumPy calls vectorised over the N points and their
M candidates (no Python loop); for N = 4 on a 200 m x 200 m mesh at 1 m spacing (80 000
triangles, M = 8) it takes ~15 us, on a Delaunay mesh of 40 000 random points (M = 27)
~16 us. Building that index takes ~0.2 s.

Off the mesh
------------
``outside="error"`` (default): a query outside every triangle raises :class:`RoadError`
naming the point and the mesh extent: a vehicle driving off the map is an error the user
must see. ``outside="extend"``: such a point gets the plane of the nearest triangle
(nearest in x-y, through the mesh boundary edges), extrapolated to (x, y). Non-finite
queries always raise.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..errors import RoadError

OUTSIDE_MODES = ("error", "extend")

#: Barycentric tolerance of the inside test (dimensionless; ~1 nm on a 1 m triangle).
BARY_TOL = 1e-9
#: Triangles with 2 * area <= SLIVER_TOL * (longest edge)^2 are degenerate.
SLIVER_TOL = 1e-12
#: Queries are processed in chunks of this many points (bounds the temporary memory).
_CHUNK = 4096
#: The grid has at most this many cells per triangle (the cell is enlarged otherwise).
_MAX_CELLS_PER_TRIANGLE = 8



class RoadWarning(UserWarning):
    """Input points were dropped while building a mesh; the message says which and why."""


class RoadContact(NamedTuple):
    """Road surface directly below N query points (ENU, SI)."""

    height_m: np.ndarray
    """(N,) road height z at the query (x, y), m."""
    normal: np.ndarray
    """(N, 3) unit upward surface normal."""
    gradient: np.ndarray
    """(N, 2) surface slope (dz/dx, dz/dy), dimensionless."""


@runtime_checkable
class Road(Protocol):
    """Anything the wheel contact model can query."""

    def contact(self, xy: np.ndarray) -> RoadContact:
        """Road surface below the points ``xy`` (N, 2), ENU metres."""
        ...


def _as_xy(xy: np.ndarray) -> np.ndarray:
    """Query points as a finite float (N, 2) array; raise otherwise."""
    xy = np.asarray(xy, dtype=float)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise RoadError(f"road query xy must have shape (N, 2), got {xy.shape}")
    if not np.isfinite(xy).all():
        bad = int(np.flatnonzero(~np.isfinite(xy).all(axis=1))[0])
        raise RoadError(f"road query point {bad} is not finite: {xy[bad].tolist()}")
    return xy


def _unit_normals(gradient: np.ndarray) -> np.ndarray:
    """(N, 3) unit upward normals (-dz/dx, -dz/dy, 1) / sqrt(1 + |grad z|^2) of (N, 2) gradients."""
    normal = np.column_stack([-gradient, np.ones(len(gradient))])
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    return normal


def _heightfield(road: FlatRoad | RollingRoad | MeshRoad, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Heights at broadcast (x, y), any shape, via ``road.contact``."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    xy = np.stack([x.ravel(), y.ravel()], axis=1)
    return road.contact(xy).height_m.reshape(x.shape)


class FlatRoad:
    """Plane road z = height_m + grade_x * x + grade_y * y (ENU, m).

    Parameters
    ----------
    height_m : float
        Height at the ENU origin, m.
    grade_x, grade_y : float
        Constant slopes dz/dx and dz/dy (dimensionless, 0.05 = 5 % grade), for test tracks
        with a ramp or a cross slope.
    """

    def __init__(self, height_m: float = 0.0, grade_x: float = 0.0, grade_y: float = 0.0):
        values = (float(height_m), float(grade_x), float(grade_y))
        if not all(math.isfinite(v) for v in values):
            raise RoadError(f"FlatRoad height_m, grade_x, grade_y must be finite, got {values}")
        self.height_m, self.grade_x, self.grade_y = values
        self._gradient = np.array([self.grade_x, self.grade_y])
        self._normal = _unit_normals(self._gradient[None, :])[0]

    @property
    def normal(self) -> np.ndarray:
        """Unit upward normal of the plane (3,), ENU."""
        return self._normal.copy()

    def __repr__(self) -> str:
        return (f"FlatRoad(height_m={self.height_m!r}, grade_x={self.grade_x!r}, "
                f"grade_y={self.grade_y!r})")

    def contact(self, xy: np.ndarray) -> RoadContact:
        """Road surface below ``xy`` (N, 2); see :class:`RoadContact`."""
        xy = _as_xy(xy)
        n = xy.shape[0]
        height = xy @ self._gradient + self.height_m
        normal = np.empty((n, 3))
        normal[:] = self._normal
        gradient = np.empty((n, 2))
        gradient[:] = self._gradient
        return RoadContact(height, normal, gradient)

    def heightfield(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Height z (m) at ``x``, ``y`` (broadcast together, any shape)."""
        return _heightfield(self, x, y)


class RollingRoad:
    """Hills along x: z = amplitude_m (1 - cos(2 pi x / wavelength_m)) (ENU, m), level and at height 0 at x = 0.

    The steepest grade is 2 pi amplitude_m / wavelength_m (3 m every 300 m: 6.3 %), midway between crest and dip.
    For harness roads a level model does not know; the crossfall is 0 (the detailed car's statics solve only its
    heights, so it must start where the road has no crossfall).
    """

    def __init__(self, amplitude_m: float, wavelength_m: float):
        values = (float(amplitude_m), float(wavelength_m))
        if not (all(math.isfinite(v) for v in values) and values[1] > 0.0):
            raise RoadError(f"RollingRoad amplitude_m must be finite and wavelength_m positive, got {values}")
        self.amplitude_m, self.wavelength_m = values
        self._k = 2.0 * math.pi / self.wavelength_m

    def __repr__(self) -> str:
        return f"RollingRoad(amplitude_m={self.amplitude_m!r}, wavelength_m={self.wavelength_m!r})"

    def contact(self, xy: np.ndarray) -> RoadContact:
        """Road surface below ``xy`` (N, 2); see :class:`RoadContact`."""
        xy = _as_xy(xy)
        kx = self._k * xy[:, 0]
        height = self.amplitude_m * (1.0 - np.cos(kx))
        gradient = np.zeros((len(xy), 2))
        gradient[:, 0] = self.amplitude_m * self._k * np.sin(kx)
        return RoadContact(height, _unit_normals(gradient), gradient)

    def heightfield(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Height z (m) at ``x``, ``y`` (broadcast together, any shape)."""
        return _heightfield(self, x, y)


class MeshRoad:
    """Triangle-mesh road (piecewise-linear height field) with a grid index for contact.

    Parameters
    ----------
    vertices : array_like, (V, 3)
        Vertex positions (x, y, z), ENU metres.
    triangles : array_like of int, (T, 3)
        Vertex indices of each triangle. Triangles must not overlap in x-y (a height field);
        orientation is free (they are made counter-clockwise seen from above).
    outside : {"error", "extend"}
        What a query off the mesh does; see the module docstring.
    cell_m : float, optional
        Side of the index grid cells, m. Default sqrt(2 * mean triangle area), the spacing
        of a regular grid mesh.

    Attributes (read-only)
    ----------------------
    vertices : (V, 3) float;  triangles : (T, 3) int, counter-clockwise in x-y;
    extent : (x_min, x_max, y_min, y_max) of the vertices, m;  cell_m : float;
    max_candidates : int, the most triangles listed in one grid cell.
    """

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, *, outside: str = "error",
                 cell_m: float | None = None):
        vertices = np.array(vertices, dtype=float)
        if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 3:
            raise RoadError(f"mesh vertices must have shape (V >= 3, 3), got {vertices.shape}")
        finite = np.isfinite(vertices).all(axis=1)
        if not finite.all():
            k = int(np.flatnonzero(~finite)[0])
            raise RoadError(f"mesh vertex {k} is not finite: {vertices[k].tolist()}")
        triangles = np.array(triangles)
        if triangles.ndim != 2 or triangles.shape[1] != 3 or len(triangles) == 0:
            raise RoadError(f"mesh triangles must have shape (T >= 1, 3), got {triangles.shape}")
        if not np.issubdtype(triangles.dtype, np.integer):
            raise RoadError(f"mesh triangles must be integer vertex indices, got {triangles.dtype}")
        triangles = triangles.astype(np.intp)
        bad = np.flatnonzero(((triangles < 0) | (triangles >= len(vertices))).any(axis=1))
        if len(bad):
            raise RoadError(f"mesh triangle {bad[0]} {triangles[bad[0]].tolist()} refers to a "
                            f"vertex outside 0..{len(vertices) - 1}")
        if outside not in OUTSIDE_MODES:
            raise RoadError(f"outside must be one of {OUTSIDE_MODES}, got {outside!r}")
        self.outside = outside

        origin = vertices[:, :2].min(axis=0)
        local = vertices[:, :2] - origin                                # (V, 2)
        p = local[triangles]                                             # (T, 3, 2)
        e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
        area2 = e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]                # 2 * signed area
        edge2 = np.max([((p[:, (k + 1) % 3] - p[:, k]) ** 2).sum(axis=1) for k in range(3)], axis=0)
        degenerate = np.flatnonzero(np.abs(area2) <= SLIVER_TOL * edge2)
        if len(degenerate):
            t = degenerate[0]
            raise RoadError(f"mesh triangle {t} {triangles[t].tolist()} has zero area in x-y "
                            f"({len(degenerate)} such triangles): the road must be a height field")
        flip = area2 < 0
        triangles[flip] = triangles[flip][:, [0, 2, 1]]
        p[flip] = p[flip][:, [0, 2, 1]]
        area2 = np.abs(area2)
        self._boundary_edges(triangles, local)

        self._origin = origin
        self.vertices = vertices
        self.triangles = triangles
        self.extent = (float(vertices[:, 0].min()), float(vertices[:, 0].max()),
                       float(vertices[:, 1].min()), float(vertices[:, 1].max()))
        self._coef, self._attr = self._planes(p, vertices[triangles, 2], area2)
        self._build_grid(p, local.max(axis=0), area2, cell_m)
        for array in (self.vertices, self.triangles, self._coef, self._attr, self._table):
            array.flags.writeable = False

    # ----- construction -----------------------------------------------------------------
    @staticmethod
    def _planes(p: np.ndarray, z: np.ndarray, area2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-triangle query matrix C (T + 1, 4, 3) and attributes (T, 5).

        Barycentric l_k(u) = (a_k u_x + b_k u_y + c_k) / (2A) with, for the edge (i, j)
        opposite vertex k: a_k = y_i - y_j, b_k = x_j - x_i, c_k = -(a_k x_i + b_k y_i).
        Plane z(u) = g . (u - p_0) + z_0 with the gradient from the edges e1 = p_1 - p_0,
        e2 = p_2 - p_0: g = ((z_1 - z_0) perp(e2) - (z_2 - z_0) perp(e1)) / (2A),
        perp(e) = (e_y, -e_x). (These forms avoid products of absolute coordinates, which
        cancel badly in thin triangles far from the origin.)
        Attributes: (dz/dx, dz/dy, n_x, n_y, n_z). Row T is a sentinel whose barycentric
        coordinates are -1e30 everywhere.
        """
        n_tri = len(p)
        coef = np.zeros((n_tri + 1, 4, 3))
        for k in range(3):
            pi, pj = p[:, (k + 1) % 3], p[:, (k + 2) % 3]
            a, b = pi[:, 1] - pj[:, 1], pj[:, 0] - pi[:, 0]
            coef[:n_tri, k] = np.column_stack([a, b, -(a * pi[:, 0] + b * pi[:, 1])])
        coef[:n_tri, :3] /= area2[:, None, None]
        e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
        dz1, dz2 = (z[:, 1] - z[:, 0])[:, None], (z[:, 2] - z[:, 0])[:, None]
        grad = (dz1 * np.column_stack([e2[:, 1], -e2[:, 0]])
                - dz2 * np.column_stack([e1[:, 1], -e1[:, 0]])) / area2[:, None]
        coef[:n_tri, 3, :2] = grad
        coef[:n_tri, 3, 2] = z[:, 0] - (grad * p[:, 0]).sum(axis=1)
        coef[n_tri, :3, 2] = -1e30
        return coef, np.column_stack([grad, _unit_normals(grad)])

    def _build_grid(self, p: np.ndarray, top: np.ndarray, area2: np.ndarray,
                    cell_m: float | None) -> None:
        """Cell table ((nx + 2) (ny + 2), M) of candidate triangles, padded with the sentinel T.

        Row of cell (i, j), i, j = floor(u / cell_m), is (i + 1) (ny + 2) + j + 1 (the grid
        plus a ring of one cell); see :meth:`_locate`.
        """
        n_tri = len(p)
        if cell_m is None:
            cell_m = math.sqrt(float(area2.mean()))
            # Keep the grid at most a few cells per triangle (meshes with large holes).
            area_box = float((top[0] + cell_m) * (top[1] + cell_m))
            cell_m = max(cell_m, math.sqrt(area_box / (_MAX_CELLS_PER_TRIANGLE * n_tri)))
        elif not (math.isfinite(cell_m) and cell_m > 0):
            raise RoadError(f"cell_m must be a positive number of metres, got {cell_m!r}")
        inv = 1.0 / cell_m
        shape = np.floor(top * inv).astype(np.intp) + 1
        lo = np.floor(p.min(axis=1) * inv).astype(np.intp)               # (T, 2)
        hi = np.floor(p.max(axis=1) * inv).astype(np.intp)
        width = hi - lo + 1
        count = width[:, 0] * width[:, 1]
        tri = np.repeat(np.arange(n_tri), count)
        k = np.arange(len(tri)) - np.repeat(np.cumsum(count) - count, count)
        ci = lo[tri, 0] + k % width[tri, 0]
        cj = lo[tri, 1] + k // width[tri, 0]
        # Separating axis test along each edge's outward normal, tolerant (only adds
        # candidates): drop the pair when the closed cell lies wholly outside one edge.
        keep = np.ones(len(tri), dtype=bool)
        centre = np.column_stack([ci + 0.5, cj + 0.5]) * cell_m
        tol = 1e-9 * cell_m
        for e in range(3):
            a, b = p[tri, e], p[tri, (e + 1) % 3]
            normal = np.column_stack([b[:, 1] - a[:, 1], a[:, 0] - b[:, 0]])   # outward (CCW)
            length = np.hypot(normal[:, 0], normal[:, 1])
            dist = ((centre - a) * normal).sum(axis=1) / length
            reach = 0.5 * cell_m * (np.abs(normal[:, 0]) + np.abs(normal[:, 1])) / length
            keep &= dist - reach <= tol
        tri, cell = tri[keep], ci[keep] * shape[1] + cj[keep]
        order = np.lexsort((tri, cell))
        tri, cell = tri[order], cell[order]
        per_cell = np.bincount(cell, minlength=int(shape[0] * shape[1]))
        start = np.cumsum(per_cell) - per_cell
        table = np.full((len(per_cell), max(int(per_cell.max()), 1)), n_tri, dtype=np.intp)
        table[cell, np.arange(len(cell)) - start[cell]] = tri
        # A ring of cells around the grid repeats the border cells, so that a point up to
        # one cell off the grid sees the same candidates as clamping its cell would give.
        # Points farther off land on arbitrary rows (take(mode="clip")) and, being off
        # every triangle by more than the tolerance, are found outside all the same.
        table = np.pad(table.reshape(shape[0], shape[1], -1), ((1, 1), (1, 1), (0, 0)),
                       mode="edge")
        self.cell_m = float(cell_m)
        self.max_candidates = table.shape[2]
        self._table = table.reshape(-1, table.shape[2])
        self._cell_scale = np.array([inv, inv, float(shape[1] + 3)])
        self._cell_weight = np.array([float(shape[1] + 2), 1.0, 1.0])
        self._row_start = np.arange(0, _CHUNK * self.max_candidates, self.max_candidates)

    def _boundary_edges(self, triangles: np.ndarray, local: np.ndarray) -> None:
        """Store the edges used by one triangle only (x-y segments and their triangle).

        Raise if an edge is shared by more than two triangles (they overlap in x-y).
        """
        edges = np.sort(triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
        key = edges[:, 0].astype(np.int64) * len(local) + edges[:, 1]
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        if (counts > 2).any():
            edge = edges[np.flatnonzero(counts[inverse] > 2)[0]]
            raise RoadError(f"mesh edge between vertices {edge.tolist()} is shared by "
                            f"{counts.max()} triangles: the road must be a height field")
        single = counts[inverse] == 1
        self._edge_seg = local[edges[single]]                             # (E, 2, 2)
        self._edge_tri = np.repeat(np.arange(len(triangles)), 3)[single]

    @classmethod
    def from_points(cls, points_enu: np.ndarray, max_edge_m: float | None = None, *,
                    outside: str = "error", cell_m: float | None = None) -> MeshRoad:
        """Delaunay triangulation in x-y of surveyed points (K, 3), ENU metres.

        Points repeated exactly (same x, y, z) are dropped with a :class:`RoadWarning`;
        points with the same (x, y) but different z raise :class:`RoadError`. Points
        Qhull leaves out for precision and zero-area slivers are dropped with a warning.
        ``max_edge_m`` drops triangles with an x-y edge longer than that, so a concave
        survey outline (an L-shaped car park) does not get bridged across its gaps.
        """
        return _mesh_from_points(cls, np.asarray(points_enu, dtype=float), max_edge_m,
                                 outside, cell_m, lambda i: f"point {i}")

    @classmethod
    def from_file(cls, path: str | Path, max_edge_m: float | None = None, *,
                  outside: str = "error", cell_m: float | None = None) -> MeshRoad:
        """Mesh from surveyed points in a file, triangulated by :meth:`from_points`.

        ``.csv``/``.txt``: one point ``x,y,z`` per line (commas or whitespace), an optional
        header line first, ``#`` comments and blank lines ignored. ``.yaml``/``.yml``:
        ``{points: [[x, y, z], ...], max_edge_m: optional}``; the argument ``max_edge_m``,
        when given, overrides the file's. Errors name the file and the line or key.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix in (".csv", ".txt"):
            points, labels = _read_csv(path)
        elif suffix in (".yaml", ".yml"):
            points, labels, file_edge = _read_yaml(path)
            max_edge_m = file_edge if max_edge_m is None else max_edge_m
        else:
            raise RoadError(f"{path}: unknown road file type {path.suffix!r} "
                            "(use .csv, .txt, .yaml or .yml)")
        return _mesh_from_points(cls, points, max_edge_m, outside, cell_m,
                                 lambda i: f"{path} {labels[i]}")

    @classmethod
    def grid(cls, x_range: tuple[float, float], y_range: tuple[float, float],
             spacing_m: float, z_fn: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
             *, outside: str = "error") -> MeshRoad:
        """Regular test-track mesh over a rectangle, heights from ``z_fn(x, y)``.

        Vertices lie on a grid from ``x_range[0]`` to ``x_range[1]`` (likewise y) with the
        largest spacing <= ``spacing_m`` that fits whole cells; each square is split along
        its (x+, y+) diagonal. ``z_fn`` takes and returns arrays (vectorised), e.g.
        ``lambda x, y: 0.03 * y`` (3 % bank) or ``lambda x, y: 0.05 * np.sin(x)`` (bumps);
        default flat z = 0.
        """
        spacing_m = float(spacing_m)
        if not (math.isfinite(spacing_m) and spacing_m > 0):
            raise RoadError(f"grid spacing_m must be positive, got {spacing_m!r}")
        axes = []
        for name, (lo, hi) in (("x_range", x_range), ("y_range", y_range)):
            lo, hi = float(lo), float(hi)
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise RoadError(f"grid {name} must be finite (min, max) with max > min, "
                                f"got {(lo, hi)}")
            n = int(math.ceil((hi - lo) / spacing_m - 1e-9)) + 1
            axes.append(np.linspace(lo, hi, max(n, 2)))
        x, y = np.meshgrid(axes[0], axes[1], indexing="ij")
        z = np.zeros_like(x) if z_fn is None else z_fn(x, y)
        try:
            z = np.broadcast_to(np.asarray(z, dtype=float), x.shape)
        except ValueError:
            raise RoadError(f"grid z_fn must return heights of shape {x.shape}, "
                            f"got {np.shape(z)}") from None
        if not np.isfinite(z).all():
            raise RoadError("grid z_fn returned non-finite heights")
        nx, ny = x.shape
        v = np.arange(nx * ny).reshape(nx, ny)
        v00, v10, v11, v01 = v[:-1, :-1], v[1:, :-1], v[1:, 1:], v[:-1, 1:]
        tri = np.concatenate([np.stack([v00, v10, v11], axis=-1).reshape(-1, 3),
                              np.stack([v00, v11, v01], axis=-1).reshape(-1, 3)])
        vertices = np.column_stack([x.ravel(), y.ravel(), z.ravel()])
        return cls(vertices, tri, outside=outside)

    # ----- queries ----------------------------------------------------------------------
    def __repr__(self) -> str:
        x0, x1, y0, y1 = self.extent
        return (f"MeshRoad({len(self.triangles)} triangles, x {x0:.3f}..{x1:.3f} m, "
                f"y {y0:.3f}..{y1:.3f} m, outside={self.outside!r})")

    def contact(self, xy: np.ndarray) -> RoadContact:
        """Road surface below ``xy`` (N, 2); see :class:`RoadContact`.

        Raises :class:`RoadError` for a non-finite point, and for a point off the mesh
        when ``outside == "error"``.
        """
        xy = _as_xy(xy)
        if not 0 < xy.shape[0] <= _CHUNK:
            if xy.shape[0] == 0:
                return RoadContact(np.empty(0), np.empty((0, 3)), np.empty((0, 2)))
            parts = [self.contact(xy[i:i + _CHUNK]) for i in range(0, xy.shape[0], _CHUNK)]
            return RoadContact(*(np.concatenate(field) for field in zip(*parts)))
        tri, height, lmin = self._locate(xy)
        if lmin.min() < -BARY_TOL:
            tri, height = self._off_mesh(xy, tri, height, lmin >= -BARY_TOL)
        attr = self._attr.take(tri, axis=0)
        return RoadContact(height, attr[:, 2:], attr[:, :2])

    def heightfield(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Height z (m) at ``x``, ``y`` (broadcast together, any shape)."""
        return _heightfield(self, x, y)

    def locate(self, xy: np.ndarray) -> np.ndarray:
        """Index of the triangle below each point of ``xy`` (N, 2); -1 off the mesh."""
        xy = _as_xy(xy)
        out = np.empty(xy.shape[0], dtype=np.intp)
        for i in range(0, xy.shape[0], _CHUNK):
            tri, _, lmin = self._locate(xy[i:i + _CHUNK])
            out[i:i + _CHUNK] = np.where(lmin >= -BARY_TOL, tri, -1)
        return out

    def _locate(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best candidate triangle (N,), its plane height (N,) and its min barycentric (N,).

        h = [u_x, u_y, 1] with u = xy - origin. The cell row of the (edge-padded) table is
        floor(h * [1/cell, 1/cell, c]) . [ny + 2, 1, 1] (c: the padding offset, an integer).
        vals[n, m] = C[cand[n, m]] h[n] holds (l0, l1, l2, z) of candidate m; the best
        candidate maximises min_k l_k, and contains the point when that is >= -BARY_TOL.
        """
        n = xy.shape[0]
        h = np.empty((n, 3))
        h[:, 2] = 1.0
        np.subtract(xy, self._origin, out=h[:, :2])
        row = np.floor(h * self._cell_scale) @ self._cell_weight
        cand = self._table.take(row.astype(np.intp), axis=0, mode="clip")    # (N, M)
        coef = self._coef.take(cand, axis=0).reshape(n, -1, 3)              # (N, 4M, 3)
        vals = np.matmul(coef, h[:, :, None]).reshape(n, -1, 4)             # (N, M, 4)
        lmin = np.minimum(np.minimum(vals[:, :, 0], vals[:, :, 1]), vals[:, :, 2])
        best = lmin.argmax(axis=1)
        best += self._row_start[:n]                                         # flat (N, M) index
        return cand.take(best), vals[:, :, 3].take(best), lmin.take(best)

    def _off_mesh(self, xy: np.ndarray, tri: np.ndarray, height: np.ndarray,
                  inside: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points the index found on no triangle: raise, or extend the nearest plane."""
        bad = np.flatnonzero(~inside)
        if self.outside == "error":
            k = int(bad[0])
            x0, x1, y0, y1 = self.extent
            others = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise RoadError(
                f"road query point {k} at (x, y) = ({xy[k, 0]:.3f}, {xy[k, 1]:.3f}) m is off "
                f"the road mesh{others}; mesh extent x {x0:.3f}..{x1:.3f} m, "
                f"y {y0:.3f}..{y1:.3f} m. Extend the mesh, or build it with outside='extend'.")
        u = xy[bad] - self._origin                                       # (B, 2)
        a, b = self._edge_seg[:, 0], self._edge_seg[:, 1]                # (E, 2)
        d = b - a
        s = np.clip(((u[:, None] - a) * d).sum(axis=2) / (d * d).sum(axis=1), 0.0, 1.0)
        gap = u[:, None] - (a + s[..., None] * d)                        # (B, E, 2)
        near = self._edge_tri[np.argmin((gap * gap).sum(axis=2), axis=1)]
        tri, height = tri.copy(), height.copy()
        tri[bad] = near
        height[bad] = (self._coef[near, 3, :2] * u).sum(axis=1) + self._coef[near, 3, 2]
        return tri, height


# ----- building a mesh from points -----------------------------------------------------
def _mesh_from_points(cls: type[MeshRoad], points: np.ndarray, max_edge_m: float | None,
                      outside: str, cell_m: float | None,
                      label: Callable[[int], str]) -> MeshRoad:
    """Shared body of :meth:`MeshRoad.from_points` and :meth:`MeshRoad.from_file`.

    ``label(i)`` names input point i in messages (an index, or a file and line).
    """
    if points.ndim != 2 or points.shape[1] != 3:
        raise RoadError(f"road points must have shape (K, 3) = (x, y, z), got {points.shape}")
    finite = np.isfinite(points).all(axis=1)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise RoadError(f"road {label(k)} is not finite: {points[k].tolist()}")
    if max_edge_m is not None and not (math.isfinite(max_edge_m) and max_edge_m > 0):
        raise RoadError(f"max_edge_m must be a positive number of metres, got {max_edge_m!r}")

    # Repeated (x, y): drop exact repeats, refuse conflicting heights.
    order = np.lexsort((points[:, 2], points[:, 1], points[:, 0]))
    s = points[order]
    same_xy = (s[1:, 0] == s[:-1, 0]) & (s[1:, 1] == s[:-1, 1])
    conflict = np.flatnonzero(same_xy & (s[1:, 2] != s[:-1, 2]))
    if len(conflict):
        i, j = sorted((int(order[conflict[0]]), int(order[conflict[0] + 1])))
        raise RoadError(f"road {label(i)} and {label(j)} have the same (x, y) = "
                        f"({points[i, 0]}, {points[i, 1]}) m but different heights "
                        f"{points[i, 2]} and {points[j, 2]} m")
    repeat = order[1:][same_xy]
    if len(repeat):
        shown = ", ".join(label(int(i)) for i in np.sort(repeat)[:5])
        warnings.warn(f"dropped {len(repeat)} repeated road point(s) ({shown}"
                      f"{', ...' if len(repeat) > 5 else ''}): same x, y, z as an earlier point",
                      RoadWarning, stacklevel=3)
    keep = np.ones(len(points), dtype=bool)
    keep[repeat] = False
    index = np.flatnonzero(keep)                       # kept point -> input point
    pts = points[index]
    if len(pts) < 3:
        raise RoadError(f"a road mesh needs at least 3 distinct points, got {len(pts)}")

    from scipy.spatial import Delaunay, QhullError

    try:
        tri = Delaunay(pts[:, :2])
    except QhullError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RoadError(f"cannot triangulate the {len(pts)} road points: they are collinear "
                        f"or nearly so in x-y (Qhull: {first})") from None
    if len(tri.coplanar):
        left = np.unique(tri.coplanar[:, 0])
        shown = ", ".join(label(int(index[i])) for i in left[:5])
        warnings.warn(f"dropped {len(left)} road point(s) ({shown}): too close to another "
                      "point in x-y for the triangulation", RoadWarning, stacklevel=3)
    simplices = tri.simplices
    p = pts[simplices, :2]
    edge2 = np.stack([((p[:, (k + 1) % 3] - p[:, k]) ** 2).sum(axis=1) for k in range(3)], axis=1)
    e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    area2 = np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    sliver = area2 <= SLIVER_TOL * edge2.max(axis=1)
    if sliver.any():
        warnings.warn(f"dropped {int(sliver.sum())} zero-area triangle(s) from the road "
                      "triangulation (collinear points on the outline)", RoadWarning, stacklevel=3)
    keep_tri = ~sliver
    if max_edge_m is not None:
        keep_tri &= edge2.max(axis=1) <= max_edge_m ** 2
    if not keep_tri.any():
        raise RoadError(f"no road triangle left: every triangle has an x-y edge longer than "
                        f"max_edge_m = {max_edge_m} m")
    return cls(pts, simplices[keep_tri], outside=outside, cell_m=cell_m)


def _read_csv(path: Path) -> tuple[np.ndarray, list[str]]:
    """Points (K, 3) and their labels ("line 12") from a CSV/whitespace text file."""
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise RoadError(f"{path}: not a text file ({exc})") from None
    rows, labels = [], []
    first = True
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")] if "," in line else line.split()
        try:
            values = [float(f) for f in fields]
        except ValueError:
            if first:            # a header such as "x,y,z" or "east_m north_m up_m"
                first = False
                continue
            raise RoadError(f"{path} line {lineno}: expected three numbers x,y,z, "
                            f"got {raw.strip()!r}") from None
        first = False
        if len(values) != 3:
            raise RoadError(f"{path} line {lineno}: expected three numbers x,y,z, "
                            f"got {len(values)} fields: {raw.strip()!r}")
        if not all(math.isfinite(v) for v in values):
            raise RoadError(f"{path} line {lineno}: not finite: {raw.strip()!r}")
        rows.append(values)
        labels.append(f"line {lineno}")
    if not rows:
        raise RoadError(f"{path}: no points (expected lines x,y,z)")
    return np.array(rows, dtype=float), labels


def _read_yaml(path: Path) -> tuple[np.ndarray, list[str], float | None]:
    """Points (K, 3), their labels ("points[3]") and the optional max_edge_m from YAML."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc)
        raise RoadError(f"{path}{where}: not valid YAML ({what})") from None
    if not isinstance(data, dict) or "points" not in data:
        raise RoadError(f"{path}: expected a mapping with key 'points: [[x, y, z], ...]'")
    unknown = sorted(set(data) - {"points", "max_edge_m"})
    if unknown:
        raise RoadError(f"{path}: unknown key(s) {unknown}; allowed: points, max_edge_m")
    max_edge = data.get("max_edge_m")
    if max_edge is not None and (isinstance(max_edge, bool)
                                 or not isinstance(max_edge, (int, float))):
        raise RoadError(f"{path}: max_edge_m must be a number of metres, got {max_edge!r}")
    items = data["points"]
    if not isinstance(items, list) or not items:
        raise RoadError(f"{path}: points must be a non-empty list of [x, y, z]")
    for i, item in enumerate(items):
        if (not isinstance(item, (list, tuple)) or len(item) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)
                or not all(math.isfinite(v) for v in item)):
            raise RoadError(f"{path}: points[{i}] must be three finite numbers [x, y, z], "
                            f"got {item!r}")
    labels = [f"points[{i}]" for i in range(len(items))]
    return np.array(items, dtype=float), labels, None if max_edge is None else float(max_edge)

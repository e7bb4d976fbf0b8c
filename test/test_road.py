"""Road surfaces: flat plane, triangle mesh, its grid index (against brute force), files."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from state_observer.vehicle.road import (
    BARY_TOL,
    FlatRoad,
    MeshRoad,
    Road,
    RoadContact,
    RoadError,
    RoadWarning,
    RollingRoad,
)

CONFIG = Path(__file__).resolve().parents[1] / "config" / "roads"


def unit_normal(grad: np.ndarray) -> np.ndarray:
    """Upward unit normal (-gx, -gy, 1)/|.| for gradients (N, 2)."""
    n = np.column_stack([-grad, np.ones(len(grad))])
    return n / np.linalg.norm(n, axis=1, keepdims=True)


def scattered_points(rng: np.random.Generator, n: int, size_m: float, z_fn) -> np.ndarray:
    """Random survey points over a square, with its corners, heights from z_fn."""
    xy = np.vstack([rng.uniform(0.0, size_m, (n, 2)),
                    [[0, 0], [size_m, 0], [0, size_m], [size_m, size_m]]])
    return np.column_stack([xy, z_fn(xy[:, 0], xy[:, 1])])


def brute_force(mesh: MeshRoad, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Min barycentric coordinate of every point in every triangle (Q, T), and the
    barycentric coordinates (Q, T, 3), from cross products of the vertices directly."""
    v = mesh.vertices[mesh.triangles, :2]                         # (T, 3, 2)
    a, b, c = v[:, 0], v[:, 1], v[:, 2]

    def cross(p, q, r):  # z of (q - p) x (r - p), broadcast (Q, 1, 2) with (T, 2)
        return (q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1]) - \
               (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0])

    p = xy[:, None, :]
    area = cross(a, b, c)
    lam = np.stack([cross(p, b, c), cross(a, p, c), cross(a, b, p)], axis=2) / area[:, None]
    return lam.min(axis=2), lam


def brute_height(mesh: MeshRoad, lam: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """Height at points with barycentrics lam (Q, T, 3) interpolated in triangles tri (Q,)."""
    z = mesh.vertices[mesh.triangles[tri], 2]                     # (Q, 3)
    return (lam[np.arange(len(tri)), tri] * z).sum(axis=1)


def edge_and_vertex_points(mesh: MeshRoad, rng: np.random.Generator, n: int) -> np.ndarray:
    """n points on random triangle edges (and at vertices) of the mesh."""
    tri = mesh.triangles[rng.integers(0, len(mesh.triangles), n)]
    k = rng.integers(0, 3, n)
    a = mesh.vertices[tri[np.arange(n), k], :2]
    b = mesh.vertices[tri[np.arange(n), (k + 1) % 3], :2]
    t = rng.uniform(0.0, 1.0, (n, 1))
    t[: n // 5] = 0.0                                             # exactly at a vertex
    t[n // 5: n // 4] = 0.5
    return (1.0 - t) * a + t * b


# ----- flat road -------------------------------------------------------------------------
def test_flat_road_is_trivial():
    road = FlatRoad()
    assert isinstance(road, Road)
    c = road.contact(np.array([[0.0, 0.0], [12.0, -3.0], [1e4, 5e3]]))
    assert isinstance(c, RoadContact)
    np.testing.assert_array_equal(c.height_m, 0.0)
    np.testing.assert_array_equal(c.normal, [[0, 0, 1]] * 3)
    np.testing.assert_array_equal(c.gradient, 0.0)
    assert c.height_m.shape == (3,) and c.normal.shape == (3, 3) and c.gradient.shape == (3, 2)


def test_flat_road_with_grade():
    road = FlatRoad(height_m=1.5, grade_x=0.04, grade_y=-0.02)
    xy = np.random.default_rng(1).uniform(-50, 50, (20, 2))
    c = road.contact(xy)
    np.testing.assert_allclose(c.height_m, 1.5 + 0.04 * xy[:, 0] - 0.02 * xy[:, 1], atol=1e-12)
    np.testing.assert_allclose(c.gradient, np.tile([0.04, -0.02], (20, 1)), atol=0)
    np.testing.assert_allclose(c.normal, unit_normal(c.gradient), atol=1e-15)
    x, y = np.meshgrid([0.0, 10.0, 20.0], [1.0, 2.0], indexing="ij")
    np.testing.assert_allclose(road.heightfield(x, y), 1.5 + 0.04 * x - 0.02 * y)
    c.normal[0] = 0.0                                             # results are fresh arrays
    assert road.contact(xy).normal[0, 2] > 0


def test_rolling_road_heights_slopes_and_normals():
    """Hills of 3 m every 300 m: level at the origin, the crest at half a wavelength, the steepest grade 2 pi A / L midway;
    the gradient against central differences of the height, the normal the unit (-dz/dx, -dz/dy, 1)."""
    road = RollingRoad(3.0, 300.0)
    c = road.contact(np.array([[0.0, 5.0], [150.0, -2.0], [75.0, 0.0], [225.0, 1.0]]))
    np.testing.assert_allclose(c.height_m, [0.0, 6.0, 3.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(c.gradient[:, 0], [0.0, 0.0, 2 * np.pi * 3.0 / 300.0, -2 * np.pi * 3.0 / 300.0], atol=1e-12)
    xy = np.random.default_rng(2).uniform(-400, 400, (30, 2))
    c = road.contact(xy)
    h = 1e-4
    for axis in range(2):
        step = np.zeros(2)
        step[axis] = h
        numeric = (road.contact(xy + step).height_m - road.contact(xy - step).height_m) / (2 * h)
        np.testing.assert_allclose(c.gradient[:, axis], numeric, atol=1e-8)
    np.testing.assert_allclose(c.normal, unit_normal(c.gradient), atol=1e-15)
    assert isinstance(road, Road)
    with pytest.raises(RoadError, match="wavelength_m"):
        RollingRoad(3.0, 0.0)


def test_flat_road_rejects_bad_input():
    with pytest.raises(RoadError, match="shape"):
        FlatRoad().contact(np.zeros(2))
    with pytest.raises(RoadError, match="shape"):
        FlatRoad().contact(np.zeros((4, 3)))
    with pytest.raises(RoadError, match="point 1 is not finite"):
        FlatRoad().contact(np.array([[0.0, 0.0], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="finite"):
        FlatRoad(grade_x=np.inf)


# ----- mesh: exactness and interpolation -------------------------------------------------
def plane(x, y):
    return 2.0 + 0.03 * x - 0.05 * y


@pytest.mark.parametrize("kind", ["grid", "scattered"])
def test_tilted_plane_mesh_is_exact_everywhere_inside(kind):
    rng = np.random.default_rng(7)
    if kind == "grid":
        mesh = MeshRoad.grid((-20.0, 30.0), (5.0, 45.0), 1.3, plane)
    else:
        pts = scattered_points(rng, 500, 50.0, plane)
        pts[:, :2] += [-20.0, 5.0]
        pts[:, 2] = plane(pts[:, 0], pts[:, 1])
        mesh = MeshRoad.from_points(pts)
    x0, x1, y0, y1 = mesh.extent
    inner = rng.uniform([x0, y0], [x1, y1], (2000, 2))
    xy = np.vstack([inner, edge_and_vertex_points(mesh, rng, 1000), mesh.vertices[:, :2],
                    [[x0, y0], [x1, y1], [x0, y1], [x1, y0]]])
    c = mesh.contact(xy)
    np.testing.assert_allclose(c.height_m, plane(xy[:, 0], xy[:, 1]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.gradient, np.tile([0.03, -0.05], (len(xy), 1)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.normal, unit_normal(np.array([[0.03, -0.05]]))[[0] * len(xy)],
                               rtol=0, atol=1e-12)


def test_bumpy_surface_within_interpolation_error():
    amp, kx, ky = 0.08, 1 / 3.0, 1 / 5.0                          # m, 1/m, 1/m

    def bumps(x, y):
        return amp * np.sin(kx * x) * np.cos(ky * y)

    spacing = 1.0
    mesh = MeshRoad.grid((0.0, 60.0), (0.0, 40.0), spacing, bumps)
    rng = np.random.default_rng(3)
    xy = rng.uniform([0, 0], [60, 40], (20000, 2))
    c = mesh.contact(xy)
    err = np.abs(c.height_m - bumps(xy[:, 0], xy[:, 1]))
    # Linear interpolation on a triangle: |f - Lf| <= R^2 |D^2 f| / 2 (Waldron 1998), R the
    # radius of its smallest enclosing circle (h / sqrt(2) for these right triangles) and
    # |D^2 f| <= amp (kx^2 + ky^2) the largest second directional derivative.
    bound = 0.5 * (spacing ** 2 / 2) * amp * (kx ** 2 + ky ** 2)
    assert err.max() <= bound
    assert err.max() > 0.2 * bound                                # really interpolating
    np.testing.assert_allclose(mesh.contact(mesh.vertices[:, :2]).height_m,
                               mesh.vertices[:, 2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(c.normal, unit_normal(c.gradient), atol=1e-15)
    # The gradient is the derivative of the height inside each triangle.
    centres = mesh.vertices[mesh.triangles[:500], :2].mean(axis=1)
    g = mesh.contact(centres).gradient
    d = 1e-4
    for k, step in enumerate(([d, 0.0], [0.0, d])):
        ahead, behind = centres + step, centres - step
        fd = (mesh.heightfield(*ahead.T) - mesh.heightfield(*behind.T)) / (2 * d)
        np.testing.assert_allclose(g[:, k], fd, rtol=0, atol=1e-9)
    # Heightfield keeps the shape of its (broadcast) inputs.
    assert mesh.heightfield(np.ones((3, 4)) * 5.0, 7.0).shape == (3, 4)


# ----- mesh: grid index against brute force ----------------------------------------------
def hilly(x, y):
    return 0.3 * np.sin(x / 4.0) + 0.2 * np.cos(y / 3.0) + 0.01 * x


def meshes_for_index_test():
    rng = np.random.default_rng(11)
    grid = MeshRoad.grid((100.0, 130.0), (-40.0, -15.0), 1.0, hilly)
    pts = scattered_points(rng, 1500, 60.0, hilly)
    pts[:, :2] += [500.0, 200.0]
    # A pond in the middle: no survey points there, and max_edge_m keeps the triangulation
    # from bridging it, so the mesh has a hole (and a concave outline is exercised).
    pond = np.hypot(pts[:, 0] - 530.0, pts[:, 1] - 230.0) < 8.0
    holey = MeshRoad.from_points(pts[~pond], max_edge_m=5.0)
    coarse_cells = MeshRoad(holey.vertices, holey.triangles, cell_m=7.0)
    return {"grid": grid, "scattered_with_hole": holey, "coarse_cells": coarse_cells}


@pytest.mark.parametrize("name", ["grid", "scattered_with_hole", "coarse_cells"])
def test_grid_index_matches_brute_force(name):
    mesh = meshes_for_index_test()[name]
    rng = np.random.default_rng(5)
    x0, x1, y0, y1 = mesh.extent
    pad = 3.0
    queries = np.vstack([
        rng.uniform([x0 - pad, y0 - pad], [x1 + pad, y1 + pad], (3000, 2)),   # some off mesh
        edge_and_vertex_points(mesh, rng, 1500),
        mesh.vertices[rng.integers(0, len(mesh.vertices), 300), :2],
    ])
    for xy in np.array_split(queries, 10):
        lmin, lam = brute_force(mesh, xy)
        contains = lmin >= -BARY_TOL                              # (Q, T)
        on_mesh = contains.any(axis=1)
        tri = mesh.locate(xy)
        np.testing.assert_array_equal(tri >= 0, on_mesh)
        q = np.flatnonzero(on_mesh)
        # The index picks a triangle that contains the point ...
        assert contains[q, tri[q]].all()
        # ... the same one as brute force whenever only one does (interior points) ...
        unique = contains[q].sum(axis=1) == 1
        np.testing.assert_array_equal(tri[q][unique], lmin[q][unique].argmax(axis=1))
        # ... and the height is that of the surface there (continuous across edges).
        c = mesh.contact(xy[q])
        best = lmin[q].argmax(axis=1)
        np.testing.assert_allclose(c.height_m, brute_height(mesh, lam[q], best), rtol=0, atol=1e-9)
        np.testing.assert_array_equal(c.gradient, mesh.contact(xy[q]).gradient)  # deterministic


def test_every_cell_lists_every_triangle_touching_it():
    mesh = meshes_for_index_test()["scattered_with_hole"]
    rng = np.random.default_rng(8)
    # Points exactly on triangle edges, including the outline and the pond shore.
    xy = edge_and_vertex_points(mesh, rng, 5000)
    assert (mesh.locate(xy) >= 0).all()


# ----- off the mesh ----------------------------------------------------------------------
def test_query_off_the_mesh_raises_with_point_and_extent():
    mesh = MeshRoad.grid((0.0, 10.0), (-5.0, 5.0), 1.0)
    with pytest.raises(ValueError, match=r"point 1 at \(x, y\) = \(12\.000, 0\.500\) m is off "
                                         r"the road mesh; mesh extent x 0\.000\.\.10\.000 m, "
                                         r"y -5\.000\.\.5\.000 m"):
        mesh.contact(np.array([[1.0, 1.0], [12.0, 0.5], [3.0, 3.0], [4.0, 4.0]]))
    with pytest.raises(RoadError, match=r"point 0 .* \(and 1 more\)"):
        mesh.contact(np.array([[-1e6, 0.0], [5.0, 80.0]]))
    with pytest.raises(RoadError, match="point 2 is not finite"):
        mesh.contact(np.array([[1.0, 1.0], [2.0, 2.0], [np.nan, 2.0]]))
    with pytest.raises(RoadError, match="shape"):
        mesh.contact(np.array([1.0, 1.0]))
    # On the outline itself is on the mesh.
    np.testing.assert_array_equal(mesh.contact([[0.0, -5.0], [10.0, 5.0], [10.0, 0.3]]).height_m, 0)


def test_query_in_a_hole_raises():
    mesh = meshes_for_index_test()["scattered_with_hole"]
    with pytest.raises(RoadError, match=r"\(530\.000, 230\.000\) m is off the road mesh"):
        mesh.contact(np.array([[530.0, 230.0]]))


def test_extend_uses_nearest_triangle_plane():
    tilted = MeshRoad.grid((0.0, 20.0), (0.0, 10.0), 2.0, plane, outside="extend")
    xy = np.array([[-5.0, 3.0], [25.0, -4.0], [10.0, 30.0], [7.0, 7.0]])
    c = tilted.contact(xy)
    np.testing.assert_allclose(c.height_m, plane(xy[:, 0], xy[:, 1]), atol=1e-12)
    np.testing.assert_allclose(c.gradient, [[0.03, -0.05]] * 4, atol=1e-12)
    with pytest.raises(RoadError, match="not finite"):
        tilted.contact(np.array([[np.inf, 0.0]]))

    holey = meshes_for_index_test()["scattered_with_hole"]
    mesh = MeshRoad(holey.vertices, holey.triangles, outside="extend")
    rng = np.random.default_rng(2)
    x0, x1, y0, y1 = mesh.extent
    xy = np.vstack([rng.uniform([x0 - 10, y0 - 10], [x1 + 10, y1 + 10], (400, 2)),
                    rng.uniform([524, 224], [536, 236], (100, 2))])
    xy = xy[mesh.locate(xy) < 0]
    assert len(xy) > 100
    c = mesh.contact(xy)
    # Brute force: distance from each point to each triangle (all points are outside
    # every triangle, so it is the distance to the nearest of its three edges).
    v = mesh.vertices[mesh.triangles, :2]
    dist = np.full((len(xy), len(v)), np.inf)
    for k in range(3):
        a, b = v[:, k], v[:, (k + 1) % 3]
        s = np.clip(((xy[:, None] - a) * (b - a)).sum(axis=2) / ((b - a) ** 2).sum(axis=1), 0, 1)
        dist = np.minimum(dist, np.linalg.norm(xy[:, None] - (a + s[..., None] * (b - a)), axis=2))
    # Height and gradient are those of the plane of one of the nearest triangles.
    for i in range(len(xy)):
        ok = False
        for t in np.flatnonzero(dist[i] <= dist[i].min() + 1e-9):
            p0, p1, p2 = mesh.vertices[mesh.triangles[t]]
            n = np.cross(p1 - p0, p2 - p0)
            grad = -n[:2] / n[2]
            z = p0[2] + grad @ (xy[i] - p0[:2])
            ok |= abs(c.height_m[i] - z) < 1e-9 and np.allclose(c.gradient[i], grad, atol=1e-12)
        assert ok, xy[i]


# ----- construction: validation, duplicates, degenerate input ----------------------------
def test_exact_duplicate_points_are_dropped_with_a_warning():
    rng = np.random.default_rng(4)
    pts = scattered_points(rng, 60, 10.0, plane)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = MeshRoad.from_points(pts)
    with pytest.warns(RoadWarning, match=r"dropped 2 repeated .*\(point 64, point 65\)"):
        mesh = MeshRoad.from_points(np.vstack([pts, pts[[3, 10]]]))
    np.testing.assert_array_equal(mesh.vertices, clean.vertices)
    np.testing.assert_array_equal(mesh.triangles, clean.triangles)


def test_conflicting_heights_at_one_xy_raise():
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 0, 0.2]], dtype=float)
    with pytest.raises(RoadError, match=r"point 1 and point 4 have the same \(x, y\) .* "
                                        r"different heights 0\.0 and 0\.2 m"):
        MeshRoad.from_points(pts)


def test_degenerate_point_sets_raise():
    with pytest.warns(RoadWarning), pytest.raises(RoadError, match="at least 3 distinct points"):
        MeshRoad.from_points([[0, 0, 0], [1, 1, 0], [1, 1, 0]])
    with pytest.raises(RoadError, match="collinear"):
        MeshRoad.from_points([[0, 0, 0], [1, 1, 0], [2, 2, 1], [3, 3, 0]])
    with pytest.raises(RoadError, match=r"shape \(K, 3\)"):
        MeshRoad.from_points(np.zeros((5, 2)))
    with pytest.raises(RoadError, match=r"point 2 is not finite"):
        MeshRoad.from_points([[0, 0, 0], [1, 0, 0], [0, 1, np.nan]])
    with pytest.raises(RoadError, match="max_edge_m"):
        MeshRoad.from_points([[0, 0, 0], [1, 0, 0], [0, 1, 0]], max_edge_m=0.5)
    with pytest.raises(RoadError, match="max_edge_m must be a positive"):
        MeshRoad.from_points([[0, 0, 0], [1, 0, 0], [0, 1, 0]], max_edge_m=-1.0)


def test_collinear_outline_points_give_no_slivers():
    # Many points along straight outline edges: Delaunay must not leave zero-area triangles.
    x = np.linspace(0, 10, 41)
    outline = np.vstack([np.column_stack([x, 0 * x]), np.column_stack([x, 0 * x + 4])])
    pts = np.column_stack([outline, np.zeros(len(outline))])
    mesh = MeshRoad.from_points(pts)
    v = mesh.vertices[mesh.triangles, :2]
    e1, e2 = v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]
    area2 = e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]
    assert (area2 > 1e-9).all()
    assert mesh.contact([[5.0, 2.0], [0.0, 0.0], [10.0, 4.0]]).height_m.tolist() == [0, 0, 0]


def test_mesh_constructor_validates():
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [2, 2, 0]], dtype=float)
    with pytest.raises(RoadError, match="refers to a vertex outside 0..4"):
        MeshRoad(v, [[0, 1, 5]])
    with pytest.raises(RoadError, match="triangle 1 .* zero area"):
        MeshRoad(v, [[0, 1, 2], [0, 3, 4]])                       # collinear in x-y
    with pytest.raises(RoadError, match="triangle 0 .* zero area"):
        MeshRoad(v, [[0, 0, 1]])
    with pytest.raises(RoadError, match=r"vertices \[0, 1\] is shared by 3 triangles"):
        MeshRoad(np.vstack([v, [[0.5, -1, 0]]]), [[0, 1, 2], [0, 5, 1], [0, 1, 3]])
    with pytest.raises(RoadError, match="outside must be one of"):
        MeshRoad(v, [[0, 1, 2]], outside="clamp")
    with pytest.raises(RoadError, match="integer"):
        MeshRoad(v, [[0.0, 1.0, 2.0]])
    with pytest.raises(RoadError, match="cell_m"):
        MeshRoad(v, [[0, 1, 2]], cell_m=0.0)


def test_orientation_does_not_matter_and_arrays_are_read_only():
    v = np.array([[0, 0, 0], [2, 0, 1], [0, 2, 2], [2, 2, 3]], dtype=float)
    ccw = MeshRoad(v, [[0, 1, 3], [0, 3, 2]])
    cw = MeshRoad(v, [[0, 3, 1], [0, 2, 3]])
    xy = np.random.default_rng(0).uniform(0, 2, (50, 2))
    for a, b in zip(ccw.contact(xy), cw.contact(xy)):
        np.testing.assert_allclose(a, b, atol=1e-14)
    assert (cw.contact(xy).normal[:, 2] > 0).all()
    with pytest.raises(ValueError):
        cw.vertices[0, 2] = 5.0


def test_grid_builder():
    mesh = MeshRoad.grid((0.0, 10.0), (0.0, 3.0), 0.7, lambda x, y: 0.03 * y)  # 3 % bank
    xs, ys = np.unique(mesh.vertices[:, 0]), np.unique(mesh.vertices[:, 1])
    assert xs[0] == 0 and xs[-1] == 10 and ys[0] == 0 and ys[-1] == 3
    assert np.diff(xs).max() <= 0.7 and np.diff(ys).max() <= 0.7
    assert len(mesh.triangles) == 2 * (len(xs) - 1) * (len(ys) - 1)
    np.testing.assert_allclose(mesh.contact([[5.0, 2.0]]).height_m, [0.06])
    with pytest.raises(RoadError, match="spacing_m"):
        MeshRoad.grid((0, 1), (0, 1), 0.0)
    with pytest.raises(RoadError, match="x_range"):
        MeshRoad.grid((1, 0), (0, 1), 0.1)
    with pytest.raises(RoadError, match="non-finite"):
        MeshRoad.grid((0, 1), (0, 1), 0.5, lambda x, y: np.where(x > 0, 0.0, np.nan))
    with pytest.raises(RoadError, match="shape"):
        MeshRoad.grid((0, 1), (0, 1), 0.5, lambda x, y: np.zeros(7))


def test_many_and_no_points():
    mesh = MeshRoad.grid((0.0, 50.0), (0.0, 50.0), 1.0, hilly)
    xy = np.random.default_rng(9).uniform(0, 50, (10000, 2))     # more than one chunk
    c = mesh.contact(xy)
    c4 = [mesh.contact(xy[i:i + 4]) for i in range(0, 40, 4)]
    np.testing.assert_array_equal(c.height_m[:40], np.concatenate([p.height_m for p in c4]))
    assert c.normal.shape == (10000, 3) and mesh.locate(xy).min() >= 0
    empty = mesh.contact(np.empty((0, 2)))
    assert empty.height_m.shape == (0,) and empty.normal.shape == (0, 3)


# ----- files -----------------------------------------------------------------------------
def test_load_csv_and_yaml(tmp_path):
    pts = [[0, 0, 1.0], [10, 0, 1.1], [0, 10, 1.2], [10, 10, 1.3], [5, 5, 1.25]]
    csv = tmp_path / "park.csv"
    lines = [f"{x}, {y}, {z}  # p" for x, y, z in pts]
    csv.write_text("# survey\nx,y,z\n" + "\n".join(lines) + "\n\n")
    txt = tmp_path / "park.txt"
    txt.write_text("east north up\n" + "\n".join(f"{x} {y} {z}" for x, y, z in pts))
    yml = tmp_path / "park.yaml"
    items = "".join(f"  - [{x}, {y}, {z}]\n" for x, y, z in pts)
    yml.write_text("points:\n" + items)
    ref = MeshRoad.from_points(pts)
    q = np.array([[1.0, 2.0], [9.0, 9.5], [5.0, 5.0]])
    for path in (csv, txt, yml):
        np.testing.assert_array_equal(MeshRoad.from_file(path).contact(q).height_m,
                                      ref.contact(q).height_m)
    yml.write_text("max_edge_m: 10.0\npoints:\n" + items)
    assert len(MeshRoad.from_file(yml).triangles) == 4
    with pytest.raises(RoadError, match="no road triangle left"):
        MeshRoad.from_file(yml, max_edge_m=1.0)


@pytest.mark.parametrize("text, message", [
    ("x,y,z\n0,0,0\n1,0,0\n0,1,zero\n", "park.csv line 4: expected three numbers"),
    ("0,0,0\n1,0,0\n0,1\n", r"park.csv line 3: expected three numbers x,y,z, got 2 fields"),
    ("0,0,0\n1,0,nan\n0,1,0\n", "park.csv line 2: not finite"),
    ("# nothing\n\n", "park.csv: no points"),
    ("0,0,0\n1,0,0\n\n# gap\n1,0,0.5\n0,1,0\n",
     r"park.csv line 2 and .*park.csv line 5 have the same"),
])
def test_csv_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "park.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        MeshRoad.from_file(path)


@pytest.mark.parametrize("text, message", [
    ("points:\n  - [0, 0, 0]\n  - [1, 0, 0]\n  - [0, 1]\n",
     r"park.yaml: points\[2\] must be three"),
    ("points:\n  - [0, 0, 0]\n  - [1, 0, true]\n  - [0, 1, 0]\n", r"park.yaml: points\[1\]"),
    ("points: [[0, 0, 0], [1, 0, 0], [0, 1, 0]]\nmax_edge: 3\n",
     r"park.yaml: unknown key\(s\) \['max_edge'\]"),
    ("corners: []\n", "park.yaml: expected a mapping with key 'points"),
    ("points: [[0, 0, 0], [1, 0, 0]\n", r"park.yaml line 2: not valid YAML \(expected ',' or '\]'"),
    ("points: []\n", "park.yaml: points must be a non-empty list"),
    ("max_edge_m: far\npoints: [[0, 0, 0], [1, 0, 0], [0, 1, 0]]\n",
     "park.yaml: max_edge_m must be a number"),
])
def test_yaml_errors_name_file_and_key(tmp_path, text, message):
    path = tmp_path / "park.yaml"
    path.write_text(text)
    with pytest.raises(RoadError, match=message):
        MeshRoad.from_file(path)


def test_unknown_file_type(tmp_path):
    with pytest.raises(RoadError, match=r"park.obj: unknown road file type '\.obj'"):
        MeshRoad.from_file(tmp_path / "park.obj")


def test_example_car_park_loads():
    mesh = MeshRoad.from_file(CONFIG / "car_park_example.csv")
    assert mesh.extent == (0.0, 40.0, 0.0, 25.0)
    c = mesh.contact(np.array([[5.0, 5.0], [35.0, 5.0], [5.0, 20.0], [35.0, 20.0]]))
    assert np.all((c.height_m > 11.0) & (c.height_m < 12.5))
    assert np.all(np.abs(c.gradient) < 0.1) and np.all(c.normal[:, 2] > 0.99)


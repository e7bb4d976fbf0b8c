"""WGS84 / ECEF / local ENU conversions against closed forms and published values."""
from __future__ import annotations

import numpy as np
import pytest

from state_observer.sensors.geodesy import (
    WGS84_A_M,
    WGS84_B_M,
    WGS84_E2,
    LocalENU,
    ecef_to_geodetic,
    geodetic_to_ecef,
    rotation_enu_from_ecef,
)

MM = 1e-3
NANODEG = 1e-9


def test_constants():
    assert WGS84_B_M == pytest.approx(6356752.314245, abs=1e-6)
    assert WGS84_E2 == pytest.approx(6.69437999014e-3, rel=1e-11)


@pytest.mark.parametrize("lat, lon, h, ecef", [
    (0.0, 0.0, 0.0, (WGS84_A_M, 0.0, 0.0)),
    (0.0, 90.0, 0.0, (0.0, WGS84_A_M, 0.0)),
    (0.0, 180.0, 100.0, (-WGS84_A_M - 100.0, 0.0, 0.0)),
    (0.0, -90.0, -50.0, (0.0, -WGS84_A_M + 50.0, 0.0)),
    (90.0, 0.0, 0.0, (0.0, 0.0, WGS84_B_M)),
    (-90.0, 0.0, 1000.0, (0.0, 0.0, -WGS84_B_M - 1000.0)),
])
def test_equator_and_poles(lat, lon, h, ecef):
    assert geodetic_to_ecef(lat, lon, h) == pytest.approx(ecef, abs=1e-6)
    lat2, lon2, h2 = ecef_to_geodetic(ecef)
    assert lat2 == pytest.approx(lat, abs=NANODEG)
    if abs(lat) < 90.0:  # longitude is arbitrary at the poles
        assert lon2 == pytest.approx(lon, abs=NANODEG)
    assert h2 == pytest.approx(h, abs=MM)


# GeographicLib CartConvert(1) manual, EXAMPLES (values printed to 1 cm):
#   echo 33.3 44.4 6000 | CartConvert              => 3816209.60 3737108.55 3485109.57
#   echo 33.3 44.4 6000 | CartConvert -l 33 44 20  => 37288.97 33374.29 5783.64
# The exact local "up" is 5783.6466 m (checked in 80-bit extended precision with the same
# closed forms), so the manual's last figure is 6.6 mm off; compare to 1 cm there.
def test_published_geocentric():
    assert geodetic_to_ecef(33.3, 44.4, 6000.0) == pytest.approx([3816209.60, 3737108.55, 3485109.57], abs=0.005)
    lat, lon, h = ecef_to_geodetic([3816209.60, 3737108.55, 3485109.57])
    assert lat == pytest.approx(33.3, abs=1e-7)  # 5 mm of rounding is 5e-8 deg
    assert lon == pytest.approx(44.4, abs=1e-7)
    assert h == pytest.approx(6000.0, abs=0.01)


def test_published_local_cartesian():
    enu = LocalENU(33.0, 44.0, 20.0).to_enu(33.3, 44.4, 6000.0)
    assert enu == pytest.approx([37288.97, 33374.29, 5783.64], abs=0.01)
    assert enu[2] == pytest.approx(5783.6466, abs=1e-4)


def test_geodetic_round_trip_everywhere():
    rng = np.random.default_rng(1)
    n = 20000
    lat = np.concatenate([rng.uniform(-90.0, 90.0, n), [90.0, -90.0, 0.0, 89.9999999, -89.9999999]])
    lon = rng.uniform(-180.0, 180.0, lat.size)
    h = rng.uniform(-1000.0, 100e3, lat.size)
    lat2, lon2, h2 = ecef_to_geodetic(geodetic_to_ecef(lat, lon, h))
    assert np.abs(lat2 - lat).max() < NANODEG
    away_from_poles = np.abs(lat) < 89.999
    assert np.abs(lon2 - lon)[away_from_poles].max() < NANODEG
    assert np.abs(h2 - h).max() < MM


@pytest.mark.parametrize("datum", [
    (43.4935695, -8.2477616, 59.877),   # Ferrol (config/sensors/default.yaml)
    (0.0, 0.0, 0.0),
    (-33.86, 151.21, 40.0),              # southern and eastern hemisphere
    (64.84, -147.72, 150.0),             # far north, western hemisphere
    (-0.5, 179.9, 3000.0),               # next to the antimeridian
    (89.5, 45.0, 0.0),                   # 55 km from the pole
])
def test_enu_round_trip_within_50_km(datum):
    enu_frame = LocalENU(*datum)
    rng = np.random.default_rng(2)
    radius = rng.uniform(0.0, 50e3, 5000)
    bearing = rng.uniform(0.0, 2.0 * np.pi, radius.size)
    enu = np.stack([radius * np.sin(bearing), radius * np.cos(bearing), rng.uniform(-500.0, 2000.0, radius.size)], -1)
    lat, lon, h = enu_frame.to_geodetic(enu[:, 0], enu[:, 1], enu[:, 2])
    assert np.abs(enu_frame.to_enu(lat, lon, h) - enu).max() < MM


def test_datum_is_origin():
    frame = LocalENU(-33.86, 151.21, 40.0)
    assert frame.to_enu(-33.86, 151.21, 40.0) == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    lat, lon, h = frame.to_geodetic(0.0, 0.0, 0.0)
    assert (lat, lon, h) == pytest.approx((-33.86, 151.21, 40.0), abs=1e-12)


def test_earth_curvature_1_km_north_and_east():
    lat0, lon0, h0 = 43.4935695, -8.2477616, 59.877
    frame = LocalENU(lat0, lon0, h0)
    s2 = WGS84_E2 * np.sin(np.radians(lat0)) ** 2
    meridian_radius = WGS84_A_M * (1.0 - WGS84_E2) / (1.0 - s2) ** 1.5
    normal_radius = WGS84_A_M / np.sqrt(1.0 - s2)

    # 1 km of meridian arc north, same ellipsoidal height: a drop of d^2 / (2 M), about 8 cm.
    dlat = np.degrees(1000.0 / (meridian_radius + h0))
    e, n, u = frame.to_enu(lat0 + dlat, lon0, h0)
    assert e == pytest.approx(0.0, abs=1e-6)
    assert n == pytest.approx(1000.0, abs=MM)
    assert u == pytest.approx(-1000.0**2 / (2.0 * meridian_radius), abs=MM)
    assert u == pytest.approx(-0.0786, abs=0.0005)

    # The local plane's point 1 km north lies 8 cm above the ellipsoid.
    lat, lon, h = frame.to_geodetic(0.0, 1000.0, 0.0)
    assert h - h0 == pytest.approx(1000.0**2 / (2.0 * meridian_radius), abs=MM)
    assert lon == pytest.approx(lon0, abs=NANODEG)

    # East: the prime-vertical radius N applies.
    e, n, u = frame.to_enu(*frame.to_geodetic(1000.0, 0.0, 0.0)[:2], h0)
    assert e == pytest.approx(1000.0, abs=MM)
    assert u == pytest.approx(-1000.0**2 / (2.0 * normal_radius), abs=MM)


def test_rotation_matrix():
    r = rotation_enu_from_ecef(0.0, 0.0)
    assert r == pytest.approx(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]), abs=1e-15)
    r = rotation_enu_from_ecef(43.49, -8.25)
    assert r @ r.T == pytest.approx(np.eye(3), abs=1e-15)
    assert np.linalg.det(r) == pytest.approx(1.0)
    # "up" is the ellipsoid normal: a height change moves the ECEF point along it.
    d = geodetic_to_ecef(43.49, -8.25, 1.0) - geodetic_to_ecef(43.49, -8.25, 0.0)
    assert r @ d == pytest.approx([0.0, 0.0, 1.0], abs=1e-9)


def test_vectorised_shapes():
    lat = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    ecef = geodetic_to_ecef(lat, 5.0, 0.0)
    assert ecef.shape == (2, 3, 3)
    lat2, lon2, h2 = ecef_to_geodetic(ecef)
    assert lat2.shape == lon2.shape == h2.shape == (2, 3)
    frame = LocalENU(10.0, 5.0, 0.0)
    assert frame.to_enu(lat, 5.0, 0.0).shape == (2, 3, 3)
    lat3, _, _ = frame.to_geodetic(np.zeros(4), np.arange(4.0), 0.0)
    assert lat3.shape == (4,)
    scalar = frame.to_geodetic(1.0, 2.0, 3.0)
    assert all(np.ndim(v) == 0 for v in scalar)
    assert geodetic_to_ecef(0.0, 0.0, 0.0).shape == (3,)


@pytest.mark.parametrize("args, match", [
    ((91.0, 0.0, 0.0), "latitude"),
    ((0.0, 181.0, 0.0), "longitude"),
    ((float("nan"), 0.0, 0.0), "finite"),
])
def test_bad_datum(args, match):
    with pytest.raises(ValueError, match=match):
        LocalENU(*args)


def test_bad_ecef_shape():
    with pytest.raises(ValueError, match="shape"):
        ecef_to_geodetic([1.0, 2.0])

"""WGS84 geodetic, ECEF and local ENU coordinates.

Conventions (REP-103, ``sensor_msgs/NavSatFix``): latitude and longitude in degrees, longitude
positive east; height ``h_m`` above the WGS84 ellipsoid (not above mean sea level: GNSS
receivers report MSL altitude plus the geoid separation, see Sanjurjo 2016 §5.1.2).
ECEF: origin at the Earth's centre, x through (lat 0, lon 0), z through the north pole.
Local ENU: origin at a datum (lat0, lon0, h0), x east, y north, z up along the ellipsoid
normal of the datum, i.e. the tangent plane of the datum; a point on the ellipsoid 1 km north
of the datum is 8 cm below that plane.

Every function accepts scalars or arrays and broadcasts; vectors are the last axis, shape (..., 3).
"""
from __future__ import annotations

import numpy as np

WGS84_A_M = 6378137.0
"""Semi-major axis (m)."""
WGS84_F = 1.0 / 298.257223563
"""Flattening f = (a - b) / a."""
WGS84_B_M = WGS84_A_M * (1.0 - WGS84_F)
"""Semi-minor axis (m), 6356752.314245..."""
WGS84_E2 = WGS84_F * (2.0 - WGS84_F)
"""First eccentricity squared e^2 = 1 - b^2/a^2."""
WGS84_EP2 = WGS84_E2 / (1.0 - WGS84_E2)
"""Second eccentricity squared e'^2 = a^2/b^2 - 1."""

_MAX_ITERATIONS = 10
_TOLERANCE_RAD = 1e-15  # change of latitude at which the iteration stops (~6 nm on the ground)


def _out(x: np.ndarray):
    """0-d arrays become NumPy scalars; other arrays are returned unchanged."""
    return x[()] if np.ndim(x) == 0 else x


def geodetic_to_ecef(lat_deg, lon_deg, h_m) -> np.ndarray:
    """ECEF position of geodetic coordinates (exact closed form).

    x = (N + h) cos(lat) cos(lon), y = (N + h) cos(lat) sin(lon), z = (N (1 - e^2) + h) sin(lat),
    with the prime-vertical radius N = a / sqrt(1 - e^2 sin^2(lat)).

    Parameters
    ----------
    lat_deg, lon_deg, h_m : array_like, broadcast together
        Latitude and longitude (deg), ellipsoidal height (m).

    Returns
    -------
    ndarray, shape (..., 3)
        ECEF position (m).
    """
    lat = np.radians(np.asarray(lat_deg, dtype=float))
    lon = np.radians(np.asarray(lon_deg, dtype=float))
    h = np.asarray(h_m, dtype=float)
    sin_lat, cos_lat = np.sin(lat), np.cos(lat)
    n = WGS84_A_M / np.sqrt(1.0 - WGS84_E2 * sin_lat**2)
    return np.stack(np.broadcast_arrays(
        (n + h) * cos_lat * np.cos(lon),
        (n + h) * cos_lat * np.sin(lon),
        (n * (1.0 - WGS84_E2) + h) * sin_lat,
    ), axis=-1)


def ecef_to_geodetic(ecef_m) -> tuple:
    """Geodetic coordinates of an ECEF position.

    Bowring's (1976) iteration on the parametric (reduced) latitude beta::

        lat = atan2(z + e'^2 b sin^3(beta), p - e^2 a cos^3(beta)),  tan(beta) = (1 - f) tan(lat)

    with p = sqrt(x^2 + y^2), started from tan(beta) = z / ((1 - f) p). One step is within
    1e-6 m of the exact latitude up to 10 km height (1e-4 m at 100 km, 6 mm at 1000 km); the
    loop repeats until the latitude changes by less than 1e-15 rad, which takes two or three
    steps for any height from -1 km to 10 000 km. Not for points within ~43 km (e^2 a) of the
    Earth's centre, where the geodetic latitude is not unique. The height uses the form that
    is well conditioned at every latitude (poles included)::

        h = p cos(lat) + z sin(lat) - a^2 / N

    Parameters
    ----------
    ecef_m : array_like, shape (..., 3)
        ECEF position (m), not at the Earth's centre.

    Returns
    -------
    lat_deg, lon_deg, h_m : ndarray or float, shape (...)
    """
    ecef = np.asarray(ecef_m, dtype=float)
    if ecef.shape[-1:] != (3,):
        raise ValueError(f"ECEF positions must have shape (..., 3), got {ecef.shape}")
    x, y, z = ecef[..., 0], ecef[..., 1], ecef[..., 2]
    p = np.hypot(x, y)
    lon = np.arctan2(y, x)
    beta = np.arctan2(z, (1.0 - WGS84_F) * p)
    lat = np.zeros_like(p)
    for _ in range(_MAX_ITERATIONS):
        sin_b, cos_b = np.sin(beta), np.cos(beta)
        new_lat = np.arctan2(z + WGS84_EP2 * WGS84_B_M * sin_b**3, p - WGS84_E2 * WGS84_A_M * cos_b**3)
        converged = np.all(np.abs(new_lat - lat) <= _TOLERANCE_RAD)
        lat = new_lat
        if converged:
            break
        beta = np.arctan2((1.0 - WGS84_F) * np.sin(lat), np.cos(lat))
    sin_lat, cos_lat = np.sin(lat), np.cos(lat)
    n = WGS84_A_M / np.sqrt(1.0 - WGS84_E2 * sin_lat**2)
    h = p * cos_lat + z * sin_lat - WGS84_A_M**2 / n
    return _out(np.degrees(lat)), _out(np.degrees(lon)), _out(h)


def rotation_enu_from_ecef(lat_deg: float, lon_deg: float) -> np.ndarray:
    """Rotation matrix taking ECEF vector components to local ENU components.

    Rows are the east, north and up unit vectors in ECEF (Sanjurjo 2016 eqs. 5.2-5.3)::

        R = [[-sin(lon),           cos(lon),            0       ],
             [-sin(lat) cos(lon), -sin(lat) sin(lon),   cos(lat)],
             [ cos(lat) cos(lon),  cos(lat) sin(lon),   sin(lat)]]

    Returns
    -------
    ndarray, shape (3, 3)
        ``v_enu = R @ v_ecef``; its transpose takes ENU to ECEF.
    """
    lat, lon = np.radians(float(lat_deg)), np.radians(float(lon_deg))
    sl, cl, so, co = np.sin(lat), np.cos(lat), np.sin(lon), np.cos(lon)
    return np.array([
        [-so, co, 0.0],
        [-sl * co, -sl * so, cl],
        [cl * co, cl * so, sl],
    ])


class LocalENU:
    """Local east-north-up frame tangent to the WGS84 ellipsoid at a datum.

    Parameters
    ----------
    lat0_deg, lon0_deg : float
        Datum latitude in [-90, 90] and longitude in [-180, 180] (deg).
    h0_m : float
        Datum ellipsoidal height (m).

    Attributes
    ----------
    origin_ecef_m : ndarray, shape (3,)
        ECEF position of the datum.
    rotation_enu_ecef : ndarray, shape (3, 3)
        ``v_enu = rotation_enu_ecef @ v_ecef`` (read-only).
    """

    def __init__(self, lat0_deg: float, lon0_deg: float, h0_m: float = 0.0):
        values = np.array([lat0_deg, lon0_deg, h0_m], dtype=float)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"datum must be finite, got lat {lat0_deg}, lon {lon0_deg}, h {h0_m}")
        if not -90.0 <= values[0] <= 90.0:
            raise ValueError(f"datum latitude must be in [-90, 90] deg, got {lat0_deg}")
        if not -180.0 <= values[1] <= 180.0:
            raise ValueError(f"datum longitude must be in [-180, 180] deg, got {lon0_deg}")
        self.lat0_deg, self.lon0_deg, self.h0_m = (float(v) for v in values)
        self.origin_ecef_m = geodetic_to_ecef(self.lat0_deg, self.lon0_deg, self.h0_m)
        self.rotation_enu_ecef = rotation_enu_from_ecef(self.lat0_deg, self.lon0_deg)
        self.origin_ecef_m.setflags(write=False)
        self.rotation_enu_ecef.setflags(write=False)

    def __repr__(self) -> str:
        return f"LocalENU(lat0_deg={self.lat0_deg!r}, lon0_deg={self.lon0_deg!r}, h0_m={self.h0_m!r})"

    def ecef_to_enu(self, ecef_m) -> np.ndarray:
        """ENU position (..., 3) of ECEF positions (..., 3): R (r - r0)."""
        return (np.asarray(ecef_m, dtype=float) - self.origin_ecef_m) @ self.rotation_enu_ecef.T

    def enu_to_ecef(self, enu_m) -> np.ndarray:
        """ECEF position (..., 3) of ENU positions (..., 3): r0 + R^T e."""
        return self.origin_ecef_m + np.asarray(enu_m, dtype=float) @ self.rotation_enu_ecef

    def to_enu(self, lat_deg, lon_deg, h_m) -> np.ndarray:
        """ENU position (m), shape (..., 3), of geodetic coordinates (broadcast together)."""
        return self.ecef_to_enu(geodetic_to_ecef(lat_deg, lon_deg, h_m))

    def to_geodetic(self, e_m, n_m, u_m) -> tuple:
        """Geodetic coordinates (lat_deg, lon_deg, h_m) of ENU coordinates (m, broadcast together)."""
        enu = np.stack(np.broadcast_arrays(*(np.asarray(c, dtype=float) for c in (e_m, n_m, u_m))), axis=-1)
        return ecef_to_geodetic(self.enu_to_ecef(enu))

"""Offline position smoothing: each instant of a processed bag placed by every GNSS fix, those after it too.

The observer is causal: at time t its position has seen only the fixes before t, and with white fix noise of sigma
it can do no better than about sigma / sqrt(fixes so far) (the harness' position bound).  Offline (``process``,
``evaluate``) the fixes after t are known as well.  This module is a Rauch-Tung-Striebel smoother (Rauch, Tung and
Striebel 1965; Simon 2006, section 9.4) of a two-state error model on top of the observer's track:

- the observer's base_link track p(t) contains the jumps its fix updates made (:class:`FixRecord`, ``jump_m``);
  without them, D(t) = p(t) - (sum of the jumps applied by t), it is a dead-reckoned track that the fixes have not
  moved;
- its error d(t) = p_true(t) - D(t) is modelled as a random walk, d' = w, E[w w^T] = q I (m^2/s): the integrated
  velocity and heading errors;
- an accepted fix z_k of the antenna at t_k measures z_k - (D(t_k) + Rz(yaw_k) a) = d(t_k) + n_k, n_k ~ N(0, R_k)
  with R_k the fix's published covariance and a the antenna's lever arm in base_link;
- q is not a setting: it is the value of a logarithmic grid that maximises the likelihood of the fixes'
  innovations, so that a receiver, car or observer tuning we have not seen sets its own.

Rejected fixes (the observer's gate) stay out.  The smoothed track is D + d_s, with covariance P_s (2 x 2 per row).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

WALK_GRID_M2_S = tuple(10.0 ** e for e in np.arange(-6.0, 1.01, 0.25))  # candidate q (m^2/s) of the likelihood search


class FixRecord(NamedTuple):
    """One GNSS fix as the observer applied it (``OnlineObserver.gnss_log`` with ``record_gnss``)."""

    stamp_ns: int  # the fix's measurement time
    east_m: float  # antenna position in the local ENU frame
    north_m: float
    accepted: bool  # passed the observer's gate
    applied_ns: int  # model time at which the update was made
    covariance_m2: tuple[float, float, float]  # (ee, en, nn) of the fix's published covariance
    jump_m: tuple[float, float]  # base_link position change the update made (east, north)


class SmoothedTrack(NamedTuple):
    position_m: np.ndarray  # (N, 2) east, north of base_link at the rows' times
    covariance_m2: np.ndarray  # (N, 2, 2)
    walk_m2_s: float  # the random-walk intensity q the fixes chose (nan without fixes)
    fixes_used: int


def _inverse(a: float, b: float, c: float) -> tuple[float, float, float]:
    """Inverse of the symmetric 2 x 2 [[a, b], [b, c]] as (a', b', c')."""
    det = a * c - b * b
    return c / det, -b / det, a / det


def _forward(dt: np.ndarray, z: np.ndarray, R: np.ndarray, P0: tuple, q: float, keep: bool):
    """Kalman filter of d over the fixes (random walk between them).  Returns the innovations' negative
    log-likelihood (without the constant) and, with ``keep``, the filtered means (M, 2) and covariances (M, 3) and the
    predicted covariances (M, 3) at the fixes."""
    dx = dy = 0.0
    a, b, c = P0
    nll = 0.0
    means, covs, preds = (np.empty((len(dt), 2)), np.empty((len(dt), 3)), np.empty((len(dt), 3))) if keep else (None, None, None)
    for k in range(len(dt)):
        a += q * dt[k]
        c += q * dt[k]
        if keep:
            preds[k] = a, b, c
        sa, sb, sc = a + R[k, 0], b + R[k, 1], c + R[k, 2]
        ia, ib, ic = _inverse(sa, sb, sc)
        vx, vy = z[k, 0] - dx, z[k, 1] - dy
        nll += math.log(sa * sc - sb * sb) + vx * (ia * vx + ib * vy) + vy * (ib * vx + ic * vy)
        # K = P S^-1; d += K v; P -= K P (both symmetric 2 x 2)
        ka, kb, kc, kd = a * ia + b * ib, a * ib + b * ic, b * ia + c * ib, b * ib + c * ic  # rows of K
        dx += ka * vx + kb * vy
        dy += kc * vx + kd * vy
        a, b, c = a - (ka * a + kb * b), b - (ka * b + kb * c), c - (kc * b + kd * c)
        if keep:
            means[k] = dx, dy
            covs[k] = a, b, c
    return nll, means, covs, preds


def _mat(p: np.ndarray) -> np.ndarray:
    """(..., 3) symmetric entries -> (..., 2, 2)."""
    return np.stack([np.stack([p[..., 0], p[..., 1]], -1), np.stack([p[..., 1], p[..., 2]], -1)], -2)


def smooth_track(t_s: np.ndarray, position_m: np.ndarray, yaw_rad: np.ndarray, start_covariance_m2: np.ndarray,
                 fixes: list[FixRecord], antenna_m, t0_ns: int = 0) -> SmoothedTrack:
    """The smoothed base_link track at the rows' times ``t_s`` (s after ``t0_ns``; sorted) from the observer's rows
    (``position_m`` (N, 2) east, north; ``yaw_rad`` (N,)), its position covariance at the first row
    ``start_covariance_m2`` (2, 2), and the fixes it applied in that time (module docstring).  Without accepted fixes
    inside the rows' span the track is returned as it came."""
    t_s = np.asarray(t_s, dtype=float)
    p = np.asarray(position_m, dtype=float).reshape(-1, 2)
    n = len(t_s)
    P0 = np.asarray(start_covariance_m2, dtype=float)
    if n == 0:
        return SmoothedTrack(p.copy(), np.zeros((0, 2, 2)), math.nan, 0)
    # D: the rows without the fix updates' jumps (a jump applied at a row's time is in that row's position)
    applied = np.array([(f.applied_ns - t0_ns) * 1e-9 for f in fixes])
    jumps = np.array([f.jump_m for f in fixes], dtype=float).reshape(-1, 2)
    order = np.argsort(applied, kind="stable")
    applied, jumps = applied[order], jumps[order]
    cumulative = np.vstack([np.zeros((1, 2)), np.cumsum(jumps, axis=0)])[np.searchsorted(applied, t_s + 1e-9, side="left")]
    D = p - (cumulative - cumulative[0])  # D(t_0) = p(t_0): its error is the start's, P0
    used = [f for f in fixes if f.accepted and t_s[0] <= (f.stamp_ns - t0_ns) * 1e-9 <= t_s[-1]]
    if not used:
        return SmoothedTrack(p.copy(), np.broadcast_to(P0, (n, 2, 2)).copy(), math.nan, 0)
    used.sort(key=lambda f: f.stamp_ns)
    tf = np.array([(f.stamp_ns - t0_ns) * 1e-9 for f in used])
    # D and the heading at the fixes' times, linear between rows (the heading unwrapped)
    Df = np.column_stack([np.interp(tf, t_s, D[:, 0]), np.interp(tf, t_s, D[:, 1])])
    yaw_f = np.interp(tf, t_s, np.unwrap(np.asarray(yaw_rad, dtype=float)))
    a = np.asarray(antenna_m, dtype=float)[:2]
    antenna = Df + np.column_stack([np.cos(yaw_f) * a[0] - np.sin(yaw_f) * a[1], np.sin(yaw_f) * a[0] + np.cos(yaw_f) * a[1]])
    z = np.array([(f.east_m, f.north_m) for f in used]) - antenna
    R = np.array([f.covariance_m2 for f in used], dtype=float)
    dt = np.diff(np.concatenate([[t_s[0]], tf]))
    start = (float(P0[0, 0]), float(P0[0, 1]), float(P0[1, 1]))
    q = min(WALK_GRID_M2_S, key=lambda w: _forward(dt, z, R, start, w, keep=False)[0])
    _, mf, Pf, Pp = _forward(dt, z, R, start, q, keep=True)
    # RTS backwards over the fixes: C = Pf_k Pp_{k+1}^-1 (the random walk's transition is I)
    Pf_m, Pp_m = _mat(Pf), _mat(Pp)
    ms, Ps = mf.copy(), Pf_m.copy()
    for k in range(len(tf) - 2, -1, -1):
        C = Pf_m[k] @ np.linalg.inv(Pp_m[k + 1])
        ms[k] = mf[k] + C @ (ms[k + 1] - mf[k])
        Ps[k] = Pf_m[k] + C @ (Ps[k + 1] - Pp_m[k + 1]) @ C.T
    # the rows: between the filtered state before them (the start, or fix k) and the smoothed state of the next fix,
    # the same RTS step over the part of the interval; after the last fix, its smoothed (= filtered) state
    k_next = np.searchsorted(tf, t_s, side="left")  # first fix at or after each row
    prev_m = np.vstack([np.zeros((1, 2)), mf])[k_next]  # the filtered state just before the row's interval
    prev_P = np.vstack([_mat(np.array([start])), Pf_m])[k_next]
    prev_t = np.concatenate([[t_s[0]], tf])[k_next]
    inside = k_next < len(tf)
    d = np.broadcast_to(ms[-1], (n, 2)).copy()
    cov = np.broadcast_to(Ps[-1], (n, 2, 2)).copy()
    after = ~inside
    cov[after] += q * (t_s[after] - tf[-1])[:, None, None] * np.eye(2)  # the walk on from the last fix, forward only
    if inside.any():
        j = k_next[inside]
        Pt = prev_P[inside] + q * (t_s[inside] - prev_t[inside])[:, None, None] * np.eye(2)  # filtered at the row
        C = Pt @ np.linalg.inv(Pp_m[j])
        d[inside] = prev_m[inside] + np.einsum("nij,nj->ni", C, ms[j] - prev_m[inside])
        cov[inside] = Pt + C @ (Ps[j] - Pp_m[j]) @ np.transpose(C, (0, 2, 1))
    return SmoothedTrack(D + d, cov, float(q), len(used))


def smooth_since_start(t_s: np.ndarray, position_m: np.ndarray, yaw_rad: np.ndarray, sigma_xy_m: np.ndarray, fixes: list[FixRecord],
                       antenna_m, started_ns: int | None, t0_ns: int = 0) -> np.ndarray:
    """:func:`smooth_track` over the rows from the observer's latest start (``OnlineObserver.started_from[0]``; a reset
    breaks the track) with the fixes applied since, started from the diagonal of the rows' east and north 1-sigma
    ``sigma_xy_m`` (N, 2) there: (N, 3) east, north and the larger axis' 1-sigma per row (m), NaN before that start
    (``process``'s columns and ``evaluate``'s figure, one path)."""
    t_s = np.asarray(t_s, dtype=float)
    out = np.full((len(t_s), 3), np.nan)
    if started_ns is None:
        return out
    rows = np.flatnonzero(t_s >= (started_ns - t0_ns) * 1e-9 - 1e-6)
    if not len(rows):
        return out
    sigma = np.asarray(sigma_xy_m, dtype=float)[rows[0]]
    track = smooth_track(t_s[rows], np.asarray(position_m, dtype=float)[rows], np.asarray(yaw_rad, dtype=float)[rows], np.diag(sigma**2),
                         [f for f in fixes if f.applied_ns >= started_ns], antenna_m, t0_ns)
    out[rows, :2] = track.position_m
    out[rows, 2] = np.sqrt(np.maximum(track.covariance_m2[:, 0, 0], track.covariance_m2[:, 1, 1]))
    return out

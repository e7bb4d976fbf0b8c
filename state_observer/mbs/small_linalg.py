"""Loop-based products of small dense arrays for numba kernels.

Inside ``@njit`` code ``A @ B`` calls BLAS, whose call overhead (~0.5 us) dominates for 3x3 and 3x8
operands; these loops compile to a few dozen instructions instead."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def mm(A, B):
    """A @ B for 2-D arrays."""
    n, k, m = A.shape[0], A.shape[1], B.shape[1]
    out = np.zeros((n, m))
    for i in range(n):
        for p in range(k):
            a = A[i, p]
            for j in range(m):
                out[i, j] += a * B[p, j]
    return out


@njit(cache=True)
def mtm(A, B):
    """A.T @ B for 2-D arrays."""
    k, n, m = A.shape[0], A.shape[1], B.shape[1]
    out = np.zeros((n, m))
    for p in range(k):
        for i in range(n):
            a = A[p, i]
            for j in range(m):
                out[i, j] += a * B[p, j]
    return out


@njit(cache=True)
def mv(A, x):
    """A @ x."""
    out = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        s = 0.0
        for j in range(A.shape[1]):
            s += A[i, j] * x[j]
        out[i] = s
    return out


@njit(cache=True)
def mtv(A, x):
    """A.T @ x."""
    out = np.zeros(A.shape[1])
    for i in range(A.shape[0]):
        xi = x[i]
        for j in range(A.shape[1]):
            out[j] += A[i, j] * xi
    return out


@njit(cache=True)
def dot(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True)
def cross(a, b):
    return np.array((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


@njit(cache=True)
def skew(v):
    """[v]x, with skew(a) @ b = a x b."""
    return np.array(((0.0, -v[2], v[1]), (v[2], 0.0, -v[0]), (-v[1], v[0], 0.0)))


@njit(cache=True)
def lu_factor(A, piv):
    """LU with partial pivoting of the square A, in place (L unit lower, U upper; rows swapped as in
    LAPACK getrf, ``piv[k]`` the row exchanged with k).  Returns False for a zero pivot."""
    n = A.shape[0]
    for k in range(n):
        p, big = k, abs(A[k, k])
        for i in range(k + 1, n):
            if abs(A[i, k]) > big:
                p, big = i, abs(A[i, k])
        piv[k] = p
        if big == 0.0:
            return False
        if p != k:
            for j in range(n):
                A[k, j], A[p, j] = A[p, j], A[k, j]
        inv = 1.0 / A[k, k]
        for i in range(k + 1, n):
            A[i, k] *= inv
            a = A[i, k]
            if a != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= a * A[k, j]
    return True


@njit(cache=True)
def lu_solve(LU, piv, b):
    """x with A x = b from :func:`lu_factor`'s (LU, piv); b (n,) is not changed."""
    n = LU.shape[0]
    x = b.copy()
    for k in range(n):
        p = piv[k]
        if p != k:
            x[k], x[p] = x[p], x[k]
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= LU[i, j] * x[j]
        x[i] = s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * x[j]
        x[i] = s / LU[i, i]
    return x


@njit(cache=True)
def lu_solve_columns(LU, piv, B):
    """X with A X = B (n, k) from :func:`lu_factor`'s (LU, piv); B is not changed."""
    n, k = B.shape
    X = B.copy()
    for r in range(n):
        p = piv[r]
        if p != r:
            for j in range(k):
                X[r, j], X[p, j] = X[p, j], X[r, j]
    for i in range(n):
        for r in range(i):
            a = LU[i, r]
            if a != 0.0:
                for j in range(k):
                    X[i, j] -= a * X[r, j]
    for i in range(n - 1, -1, -1):
        for r in range(i + 1, n):
            a = LU[i, r]
            if a != 0.0:
                for j in range(k):
                    X[i, j] -= a * X[r, j]
        d = LU[i, i]
        for j in range(k):
            X[i, j] /= d
    return X


@njit(cache=True)
def mm_into(A, B, out):
    """out = A @ B (out must not overlap A or B)."""
    n, k, m = A.shape[0], A.shape[1], B.shape[1]
    for i in range(n):
        for j in range(m):
            out[i, j] = 0.0
        for p in range(k):
            a = A[i, p]
            for j in range(m):
                out[i, j] += a * B[p, j]


@njit(cache=True)
def mmt_into(A, B, out):
    """out = A @ B.T (out must not overlap A or B)."""
    n, k, m = A.shape[0], A.shape[1], B.shape[0]
    for i in range(n):
        for j in range(m):
            s = 0.0
            for p in range(k):
                s += A[i, p] * B[j, p]
            out[i, j] = s


@njit(cache=True)
def mv_into(A, x, out):
    """out = A @ x (out must not overlap x)."""
    for i in range(A.shape[0]):
        s = 0.0
        for j in range(A.shape[1]):
            s += A[i, j] * x[j]
        out[i] = s


# 3-vectors as tuples (values, no heap allocation inside kernels); arguments may be tuples or arrays
@njit(cache=True)
def add3(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True)
def sub3(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True)
def scale3(s, a):
    """a * s."""
    return (a[0] * s, a[1] * s, a[2] * s)


@njit(cache=True)
def cross3(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True)
def mv3(A, x):
    """A @ x for A (3, 3)."""
    return ((A[0, 0] * x[0] + A[0, 1] * x[1]) + A[0, 2] * x[2],
            (A[1, 0] * x[0] + A[1, 1] * x[1]) + A[1, 2] * x[2],
            (A[2, 0] * x[0] + A[2, 1] * x[1]) + A[2, 2] * x[2])


@njit(cache=True)
def mtv3(A, x):
    """A.T @ x for A (3, 3)."""
    return ((A[0, 0] * x[0] + A[1, 0] * x[1]) + A[2, 0] * x[2],
            (A[0, 1] * x[0] + A[1, 1] * x[1]) + A[2, 1] * x[2],
            (A[0, 2] * x[0] + A[1, 2] * x[1]) + A[2, 2] * x[2])


@njit(cache=True)
def mv3_sum(A, a, B, b, x):
    """(A a + B b) @ x for A, B (3, 3) and scalars a, b."""
    return ((((A[0, 0] * a + B[0, 0] * b) * x[0]) + (A[0, 1] * a + B[0, 1] * b) * x[1]) + (A[0, 2] * a + B[0, 2] * b) * x[2],
            (((A[1, 0] * a + B[1, 0] * b) * x[0]) + (A[1, 1] * a + B[1, 1] * b) * x[1]) + (A[1, 2] * a + B[1, 2] * b) * x[2],
            (((A[2, 0] * a + B[2, 0] * b) * x[0]) + (A[2, 1] * a + B[2, 1] * b) * x[1]) + (A[2, 2] * a + B[2, 2] * b) * x[2])

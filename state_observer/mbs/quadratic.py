"""Sets of scalar quadratic forms of the coordinates, evaluated in a vectorised way.

Every natural-coordinate constraint (constant distance, unit vector, constant dot
product, point fixed to a body, spherical, revolute, prismatic) is a quadratic
function of the coordinates q.  With the homogeneous vector x = [q; 1] each
scalar function is

    f_i(q) = 1/2 x^T H_i x                      (H_i symmetric, (n+1) x (n+1))

so its gradient is (H_i x)[:n] and its second time derivative at zero
acceleration is qd^T H_i[:n,:n] qd.  All rows of a set are stored as one list of
triplets (row, j, k, value); evaluation is a handful of ``numpy.bincount`` calls,
whatever the number of rows, and the Jacobian is exact by construction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Affine:
    """An affine map of the coordinates, ``v(q) = B q + c``; B is (d, n), c is (d,)."""

    B: np.ndarray
    c: np.ndarray

    @staticmethod
    def constant(c, n: int) -> "Affine":
        c = np.asarray(c, dtype=float)
        return Affine(np.zeros((c.size, n)), c.copy())

    def __add__(self, other: "Affine") -> "Affine":
        return Affine(self.B + other.B, self.c + other.c)

    def __sub__(self, other: "Affine") -> "Affine":
        return Affine(self.B - other.B, self.c - other.c)

    def scale(self, s: float) -> "Affine":
        return Affine(s * self.B, s * self.c)

    def rows(self, matrix: np.ndarray) -> "Affine":
        """Return ``matrix @ v(q)`` as an affine map."""
        return Affine(matrix @ self.B, matrix @ self.c)

    @property
    def homogeneous(self) -> np.ndarray:
        """[B c], the map acting on x = [q; 1]."""
        return np.hstack([self.B, self.c[:, None]])


@dataclass
class QuadRow:
    """One scalar quadratic form 1/2 x^T H x as a sparse dict of H entries."""

    name: str
    H: dict = field(default_factory=dict)  # (j, k) -> value, both orders stored

    def add(self, j: int, k: int, v: float) -> None:
        if v == 0.0:
            return
        self.H[(j, k)] = self.H.get((j, k), 0.0) + v

    def key(self, ndigits: int = 12):
        """Canonical form used to find duplicate rows (sign normalised)."""
        items = sorted((jk, round(v, ndigits)) for jk, v in self.H.items() if abs(v) > 1e-14)
        return tuple(items)


def dot_row(name: str, a: Affine, b: Affine, value: float) -> QuadRow:
    """Row for ``a(q) . b(q) - value = 0``."""
    ha, hb = a.homogeneous, b.homogeneous
    n1 = ha.shape[1]
    row = QuadRow(name)
    ca = np.flatnonzero(np.any(ha != 0.0, axis=0))
    cb = np.flatnonzero(np.any(hb != 0.0, axis=0))
    block = ha[:, ca].T @ hb[:, cb]  # d(a.b) = a^T b, H = A^T B + B^T A
    for ii, j in enumerate(ca):
        for kk, k in enumerate(cb):
            v = block[ii, kk]
            row.add(j, k, v)
            row.add(k, j, v)
    row.add(n1 - 1, n1 - 1, -2.0 * value)
    return row


def linear_rows(name: str, a: Affine) -> list[QuadRow]:
    """Rows for ``a(q) = 0`` (one row per component)."""
    ha = a.homogeneous
    n1 = ha.shape[1]
    rows = []
    for r in range(ha.shape[0]):
        row = QuadRow(f"{name}[{r}]" if ha.shape[0] > 1 else name)
        for j in np.flatnonzero(ha[r, :-1]):
            row.add(j, n1 - 1, ha[r, j])
            row.add(n1 - 1, j, ha[r, j])
        row.add(n1 - 1, n1 - 1, 2.0 * ha[r, -1])
        rows.append(row)
    return rows


class QuadraticSet:
    """Compiled, vectorised evaluation of a list of :class:`QuadRow` (m rows, n coordinates).

    ``evaluate(x)`` fills ``value`` (m,) and the dense Jacobian ``jac`` (m, n);
    ``curvature(qd)`` returns qd^T H_i qd (m,), the acceleration term of each row.

    Rows from ``pair_from`` on come in pairs (a, b) that are also read as complex numbers
    a + i b: ``value_pairs`` (p,) and ``jac_pairs`` (p, n) are complex views (no copies), and
    ``jac`` holds only the rows before ``pair_from``.
    """

    def __init__(self, rows: list[QuadRow], n: int, pair_from: int | None = None):
        self.n = n
        self.m = len(rows)
        self.names = [r.name for r in rows]
        ti, tj, tk, tv = [], [], [], []
        for i, r in enumerate(rows):
            for (j, k), v in r.H.items():
                ti.append(i)
                tj.append(j)
                tk.append(k)
                tv.append(v)
        self.ti = np.asarray(ti, dtype=np.intp)
        self.tj = np.asarray(tj, dtype=np.intp)
        self.tk = np.asarray(tk, dtype=np.intp)
        self.tv = np.asarray(tv, dtype=float)
        jac = self.tj < n
        self._jac_sel = np.flatnonzero(jac)
        self._jac_flat = self.ti[jac] * n + self.tj[jac]
        self.pair_from = self.m if pair_from is None else pair_from
        if (self.m - self.pair_from) % 2:
            raise ValueError("paired rows must come in pairs")
        self.npairs = (self.m - self.pair_from) // 2
        paired = self.ti[jac] >= self.pair_from
        k, part = divmod(self.ti[jac][paired] - self.pair_from, 2)
        # paired rows laid out as (pair, column, a|b) so that they read as complex numbers
        self._jac_flat[paired] = self.pair_from * n + (k * n + self.tj[jac][paired]) * 2 + part
        curv = jac & (self.tk < n)
        self._curv_sel = np.flatnonzero(curv)
        self._curv_i = self.ti[curv]
        self._curv_j = self.tj[curv]
        self._curv_k = self.tk[curv]
        self._curv_v = self.tv[curv]
        self.value = np.zeros(self.m)
        self.jac = np.zeros((self.m, n))
        # sparsity pattern (row, col) of the Jacobian
        flat = np.unique(self._jac_flat)
        self.pattern = (flat // max(n, 1), flat % max(n, 1))

    def evaluate(self, x: np.ndarray) -> None:
        """Values (m,) and dense Jacobian (m, n) at x = [q; 1] of length n + 1, stored in ``value`` and ``jac``."""
        w = self.tv * x[self.tk]
        self.value = 0.5 * np.bincount(self.ti, w * x[self.tj], minlength=self.m)
        flat = np.bincount(self._jac_flat, w[self._jac_sel], minlength=self.m * self.n)
        split = self.pair_from * self.n
        self.jac = flat[:split].reshape(self.pair_from, self.n)
        if self.npairs:
            self.value_pairs = self.value[self.pair_from :].view(np.complex128)
            self.jac_pairs = flat[split:].view(np.complex128).reshape(self.npairs, self.n)

    def curvature(self, qd: np.ndarray) -> np.ndarray:
        return np.bincount(self._curv_i, self._curv_v * qd[self._curv_j] * qd[self._curv_k], minlength=self.m)

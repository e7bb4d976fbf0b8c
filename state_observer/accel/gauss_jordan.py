"""Linear-solver backends on the Gauss-Jordan kernel (``hls/gauss_jordan.cpp``): the host C model here,
the FPGA in :mod:`.pynq_driver`.  Both speak the integrator's interface (``factor(A) -> handle``,
``solve(handle, b) -> x``, ``name``) and share the conversion to the kernel's number type.

``factor`` only converts A; the first ``solve`` runs the kernel's FACTOR mode (factor and solve in one
call, like the seeds' Gauss-Jordan on [A | b]), later solves with the same handle run SOLVE (O(n^2) with
the factors the kernel left in A).  A failed kernel call (singular matrix, non-finite or saturated x)
gives a non-finite x, which the integrator reports as a failed step; ``last_status`` keeps the code.

Number types: ``double``; ``float32``; ``fixed``: ap_fixed<64, I> (I = 24 integer bits by default).
For float32 and fixed point the host scales the rows of [A | b] by powers of two so that max |A_i| is
in [0.5, 1) (exact; without it the detailed model's tangent, max |A| ~ 1e7 from the penalty term, has
pivots below float32's resolution), and for fixed point b by a power of two so that max |b| is
2^-headroom_bits; the solution is scaled back.  ``refine=k``: k steps of iterative refinement in
float64 after each solve (r = b - A x on the CPU, x += solve(r) with the same factors).
"""
from __future__ import annotations

import math

import numpy as np

from .build import PRECISIONS, load_library

# the kernel's interface (gauss_jordan.h; checked against the header by the tests)
MODE_FACTOR, MODE_SOLVE, MODE_INFO = 0, 1, 2
GJ_OK, GJ_SINGULAR, GJ_RANGE, GJ_BAD_SIZE, GJ_BAD_PIVOTS, GJ_BAD_MODE = range(6)
STATUS_TEXT = {GJ_OK: "ok", GJ_SINGULAR: "singular matrix", GJ_RANGE: "non-finite or saturated solution",
               GJ_BAD_SIZE: "system size out of range", GJ_BAD_PIVOTS: "no factors for SOLVE", GJ_BAD_MODE: "unknown mode"}
INTERFACE_VERSION = 1
DTYPES = {"double": np.float64, "float32": np.float32, "fixed": np.int64}  # the kernel's words in memory
FIXED_WIDTH = 64
DEFAULT_HEADROOM_BITS = 2  # fixed point: max |b| scaled to 2^-2 (measured on the detailed model, see docs/fpga.md)


def parse_info(word: int) -> dict:
    """Fields of the INFO word: nmax, precision (name), fixed_int_bits, version."""
    code = (word >> 16) & 0xF
    names = {v: k for k, v in PRECISIONS.items()}
    return {"nmax": word & 0xFFFF, "precision": names.get(code, f"unknown ({code})"), "fixed_int_bits": (word >> 20) & 0xFF,
            "version": (word >> 28) & 0xF}


class Handle:
    """A matrix converted to the kernel's type, its row scales (float32, fixed point) and the state of its factors."""

    __slots__ = ("A", "n", "piv", "row_scale", "factored", "status", "pointers", "original")

    def __init__(self, A: np.ndarray, row_scale: np.ndarray | None, original: np.ndarray | None = None):
        self.A, self.n, self.row_scale = A, A.shape[0], row_scale
        self.original = original  # the float64 matrix, kept for iterative refinement
        self.piv = np.zeros(self.n, dtype=np.int32)
        self.factored = False
        self.status = GJ_OK
        self.pointers = None  # (A, piv) addresses for the C model, taken once


class GaussJordanBase:
    """Conversions and the FACTOR/SOLVE bookkeeping; subclasses run the kernel (``_run``)."""

    sparse = False

    def __init__(self, precision: str = "double", fixed_int_bits: int = 24, headroom_bits: int | None = None, refine: int = 0):
        if precision not in DTYPES:
            raise ValueError(f"unknown precision '{precision}', choose one of {sorted(DTYPES)}")
        self.precision = precision
        self.dtype = DTYPES[precision]
        self.fixed_int_bits = int(fixed_int_bits)
        self.frac_bits = FIXED_WIDTH - self.fixed_int_bits
        self.headroom_bits = DEFAULT_HEADROOM_BITS if headroom_bits is None else int(headroom_bits)
        self.refine = int(refine)
        self.last_status = GJ_OK
        self.n_factor = 0  # kernel calls in FACTOR and SOLVE mode
        self.n_solve = 0
        self.nmax = 0  # set by the subclass from the kernel's INFO word

    # ----- the integrator's interface ------------------------------------------------------------
    def factor(self, A) -> Handle:
        """Convert the (n, n) matrix A for the kernel (the double model may use A's own memory)."""
        A = np.asarray(A)
        n = A.shape[0]
        if A.ndim != 2 or A.shape[1] != n:
            raise ValueError(f"expected a square matrix, got shape {A.shape}")
        if n > self.nmax:
            raise ValueError(f"{self.name}: n = {n} exceeds the kernel's GJ_NMAX = {self.nmax}")
        original = np.asarray(A, dtype=np.float64) if self.refine else None
        if self.precision == "double":
            return Handle(np.array(A, dtype=np.float64) if self.refine else np.ascontiguousarray(A, dtype=np.float64), None, original)
        # rows scaled by powers of two (exact): max |A_i| in [0.5, 1)
        with np.errstate(invalid="ignore"):
            exponent = np.frexp(np.max(np.abs(A), axis=1))[1]
        scale = np.ldexp(1.0, -exponent)
        if self.precision == "float32":
            return Handle((A * scale[:, None]).astype(np.float32), scale, original)
        raw = np.rint(np.ldexp(A * scale[:, None], self.frac_bits))
        handle = Handle(_to_int64(raw), scale, original)
        if not np.all(np.isfinite(A)):
            handle.status = GJ_RANGE  # fixed point has no NaN to carry it: refuse here
        return handle

    def solve(self, handle: Handle, b) -> np.ndarray:
        """x with A x = b (float64, new array); all NaN if the kernel reports an error.  With ``refine``
        = k, k steps of iterative refinement follow: r = b - A x in float64, x += solve(r)."""
        b = np.asarray(b, dtype=np.float64)
        x = self._solve_once(handle, b)
        for _ in range(self.refine):
            if not np.all(np.isfinite(x)):
                break
            x += self._solve_once(handle, b - handle.original @ x)
        return x

    def _solve_once(self, handle: Handle, b: np.ndarray) -> np.ndarray:
        if handle.status != GJ_OK:
            self.last_status = handle.status
            return np.full_like(b, np.nan)
        if self.precision == "fixed":
            if not np.all(np.isfinite(b)):
                self.last_status = GJ_RANGE
                return np.full_like(b, np.nan)
            bs = b * handle.row_scale
            with np.errstate(invalid="ignore"):
                shift = int(np.frexp(np.max(np.abs(bs), initial=0.0))[1]) + self.headroom_bits
            x = _to_int64(np.rint(np.ldexp(bs, self.frac_bits - shift)))
        else:
            x = b if handle.row_scale is None else b * handle.row_scale
        x = self._rhs_buffer(x)  # the kernel overwrites it with the solution
        mode = MODE_SOLVE if handle.factored else MODE_FACTOR
        status = self._run(handle, x, mode)
        if mode == MODE_FACTOR:
            self.n_factor += 1
            handle.factored = status in (GJ_OK, GJ_RANGE)  # with GJ_RANGE the factors were written
            handle.status = status if status == GJ_SINGULAR else GJ_OK
        else:
            self.n_solve += 1
        self.last_status = status
        if status != GJ_OK:
            return np.full_like(b, np.nan)
        if self.precision == "fixed":
            return np.ldexp(x.astype(np.float64), shift - self.frac_bits)
        return x.astype(np.float64)  # a new array: x is the backend's buffer

    def _rhs_buffer(self, values: np.ndarray) -> np.ndarray:
        """The right-hand side in the kernel's type, in memory the kernel may overwrite."""
        return np.array(values, dtype=self.dtype)

    def _run(self, handle: Handle, x: np.ndarray, mode: int) -> int:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _to_int64(raw: np.ndarray) -> np.ndarray:
    """Round values (already in units of the LSB) to int64, saturating like AP_SAT; NaN becomes 0."""
    limit = 2.0**63 - 1024.0  # the largest double below 2^63
    return np.nan_to_num(np.clip(raw, -limit, limit), nan=0.0).astype(np.int64)


class GaussJordanC(GaussJordanBase):
    """The kernel's C model (the HLS source compiled with the system C++ compiler), called with ctypes.

    ``name``: ``c`` (double), ``c-float32`` or ``c-fixed``.  The library is built at first use
    (:mod:`.build`); without a compiler :class:`.build.BuildError` says so in one line.  One instance
    per integrator: the right-hand side goes through the instance's buffer (not for concurrent threads).
    """

    def __init__(self, precision: str = "double", fixed_int_bits: int = 24, headroom_bits: int | None = None, refine: int = 0,
                 defines: dict | None = None):
        """``defines``: extra macros for the build (e.g. ``{"GJ_PIVOT_TOL": 1}``, see gauss_jordan.h)."""
        super().__init__(precision, fixed_int_bits, headroom_bits, refine)
        self.name = "c" if precision == "double" else f"c-{precision}"
        defines = dict(defines or {})
        if precision == "fixed" and self.fixed_int_bits != 24:
            defines["GJ_FIXED_I"] = self.fixed_int_bits
        self._call = load_library(precision, defines or None).gj_call
        info = parse_info(self._call(None, None, None, 0, MODE_INFO))
        if info["version"] != INTERFACE_VERSION or info["precision"] != precision:
            raise RuntimeError(f"state_observer.accel: the built kernel reports {info}, expected {precision} version {INTERFACE_VERSION}")
        self.nmax = info["nmax"]
        # one right-hand-side buffer with its address taken once (numpy's .ctypes costs ~1 us a call)
        self._x = np.zeros(self.nmax, dtype=self.dtype)
        self._x_pointer = self._x.ctypes.data

    def _rhs_buffer(self, values: np.ndarray) -> np.ndarray:
        x = self._x[: len(values)]
        np.copyto(x, values, casting="unsafe")
        return x

    def _run(self, handle: Handle, x: np.ndarray, mode: int) -> int:
        if handle.pointers is None:
            handle.pointers = (handle.A.ctypes.data, handle.piv.ctypes.data)
        return self._call(handle.pointers[0], self._x_pointer, handle.pointers[1], handle.n, mode)


def residual(A: np.ndarray, x: np.ndarray, b: np.ndarray) -> float:
    """Relative residual |A x - b|_inf / (|A|_inf |x|_inf + |b|_inf) (dimensionless)."""
    r = np.abs(A @ x - b).max(initial=0.0)
    scale = np.abs(A).sum(axis=1).max(initial=0.0) * np.abs(x).max(initial=0.0) + np.abs(b).max(initial=0.0)
    return float(r / scale) if scale > 0.0 and math.isfinite(scale) else float("nan")

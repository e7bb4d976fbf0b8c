"""Linear-solver backends for the Newton iteration of the ALI3-P integrator, behind one interface:
``factor(A) -> handle``, ``solve(handle, b) -> x``, ``name`` (see :class:`state_observer.mbs.DenseLU`).

========== ==============================================================================
name       backend
========== ==============================================================================
numpy      LAPACK LU (:class:`state_observer.mbs.DenseLU`), the reference
c          the Gauss-Jordan kernel's C model in double (the HLS source built with g++)
c-float32  the same kernel in float32
c-fixed    the same kernel in ap_fixed<64, 24> (software emulation of ap_fixed)
pynq       the kernel on a Zynq / Kria FPGA through PYNQ (:mod:`.pynq_driver`)
========== ==============================================================================

``make_backend(name, n)`` builds one; vehicle models take it as ``linear_solver``.
"""
from __future__ import annotations

import logging

from .build import BuildError
from .gauss_jordan import GaussJordanC, residual
from .pynq_driver import AcceleratorError, AcceleratorUnavailable

BACKENDS = ("numpy", "c", "c-float32", "c-fixed", "pynq", "pynq-float32", "pynq-fixed")
_C_PRECISION = {"c": "double", "c-double": "double", "c-float32": "float32", "c-fixed": "fixed"}
_PYNQ_PRECISION = {"pynq": "double", "pynq-double": "double", "pynq-float32": "float32", "pynq-fixed": "fixed"}

log = logging.getLogger(__name__)


def make_backend(name: str, n: int | None = None, fallback: bool = False, **options):
    """The linear-solver backend ``name`` (see the module table) for systems up to ``n`` unknowns.

    ``fallback``: when the FPGA is not usable (:class:`AcceleratorUnavailable`), log one warning and
    return the C model of the same precision instead of raising.  ``options`` go to the backend
    (``overlay``, ``ip_name``, ``timeout_s`` for pynq; ``fixed_int_bits``, ``headroom_bits`` for fixed point;
    ``refine``: steps of iterative refinement in float64 after each solve, for the reduced precisions).
    """
    key = name.strip().lower()
    if key == "numpy":
        from ..mbs import DenseLU

        return DenseLU()
    if key in _C_PRECISION:
        backend = GaussJordanC(_C_PRECISION[key], **options)
    elif key in _PYNQ_PRECISION:
        from .pynq_driver import PynqGaussJordan

        c_options = {k: v for k, v in options.items() if k in ("fixed_int_bits", "headroom_bits", "refine")}
        try:
            backend = PynqGaussJordan(_PYNQ_PRECISION[key], n=n, **options)
        except AcceleratorUnavailable as exc:
            if not fallback:
                raise
            log.warning("%s; falling back to the C model of the kernel", exc)
            backend = GaussJordanC(_PYNQ_PRECISION[key], **c_options)
    else:
        raise ValueError(f"unknown linear-solver backend '{name}', choose one of {', '.join(BACKENDS)}")
    if n is not None and n > backend.nmax:
        raise ValueError(f"{backend.name}: a system of n = {n} exceeds the kernel's GJ_NMAX = {backend.nmax} (rebuild the kernel with a larger GJ_NMAX)")
    return backend


__all__ = ["BACKENDS", "AcceleratorError", "AcceleratorUnavailable", "BuildError", "GaussJordanC", "make_backend", "residual"]

"""A wrapper around any linear-solver backend that times it and can keep the systems it was given
(for the benchmark's split of time per step and for testing backends on the integrator's own matrices)."""
from __future__ import annotations

import time


class TimedSolver:
    """Forwards ``factor``/``solve`` to ``backend``; ``seconds`` is their total wall time (s).

    keep: how many factored matrices to keep (copies) in ``systems`` as ``[A, [b, ...]]`` with every
    right-hand side solved with that matrix (the Newton residual first, then the projections).
    """

    def __init__(self, backend, keep: int = 0):
        self.backend = backend
        self.name = backend.name
        self.sparse = getattr(backend, "sparse", False)
        self.keep = keep
        self.systems: list = []
        self.seconds = 0.0
        self.n_factor = 0
        self.n_solve = 0

    def factor(self, A):
        index = len(self.systems) if len(self.systems) < self.keep else None
        if index is not None:
            self.systems.append([A.copy(), []])  # before the backend may overwrite A
        start = time.perf_counter()
        handle = self.backend.factor(A)
        self.seconds += time.perf_counter() - start
        self.n_factor += 1
        return handle, index

    def solve(self, handle, b):
        inner, index = handle
        if index is not None:
            self.systems[index][1].append(b.copy())
        start = time.perf_counter()
        x = self.backend.solve(inner, b)
        self.seconds += time.perf_counter() - start
        self.n_solve += 1
        return x

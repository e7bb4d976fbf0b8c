"""Central finite differences, the oracle for every analytic Jacobian in the tests."""
import numpy as np


def jacobian_fd(fun, x, h=1e-6):
    """d fun / d x by central differences, one column per entry of x."""
    cols = []
    for j in range(len(x)):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.column_stack(cols)

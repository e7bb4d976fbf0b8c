"""Many independent runs at once (issue 17): a local process pool, or a Dask cluster given its scheduler's address.

``state-observer process`` runs a fleet of bags through :func:`run_all`, and ``state-observer evaluate`` its
scenarios and seeds.  Dask (``distributed``) rather than Ray: the runs are independent file-to-file jobs that need
neither Ray's actors nor its object store; ``distributed`` is a pure-Python wheel, a cluster is one
``dask scheduler`` and a ``dask worker ADDRESS`` per machine, and its ``LocalCluster`` runs in the tests.  On a
cluster every worker must import the same ``state_observer`` and see the same paths (a shared file system).
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence

from .errors import StateObserverError

CONNECT_TIMEOUT_S = 30.0


def run_all(function: Callable, items: Sequence[tuple], *, jobs: int = 1, cluster: str | None = None,
            on_done: Callable[[int, object], None] | None = None) -> list:
    """``[function(*item) for item in items]``, in the items' order.  ``cluster`` (``tcp://host:8786``): on that
    Dask cluster, as many at a time as it has worker threads; otherwise ``jobs`` local processes at a time (one: in
    this process).  ``on_done(index, result)`` is called as each run finishes.  A run's exception is raised here
    (``function`` should return its own failures where the other runs must go on)."""
    items = list(items)
    results: list = [None] * len(items)

    def done(i: int, result) -> None:
        results[i] = result
        if on_done is not None:
            on_done(i, result)

    if cluster:
        _on_cluster(function, items, cluster, done)
    elif jobs <= 1 or len(items) <= 1:
        for i, item in enumerate(items):
            done(i, function(*item))
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(items))) as pool:
            futures = {pool.submit(function, *item): i for i, item in enumerate(items)}
            for future in as_completed(futures):
                done(futures[future], future.result())
    return results


def _on_cluster(function: Callable, items: list, address: str, done: Callable[[int, object], None]) -> None:
    try:
        from distributed import Client, as_completed as finished
    except ImportError as exc:
        raise StateObserverError(f"--cluster {address}: needs Dask's distributed ({exc}); pip install distributed "
                                 "(the setup.py extra 'cluster')") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:  # includes the connection's TimeoutError
        raise StateObserverError(f"--cluster {address}: cannot reach the Dask scheduler there ({exc})") from None
    with client:
        futures = [client.submit(function, *item, pure=False) for item in items]
        index = {future.key: i for i, future in enumerate(futures)}
        for future in finished(futures):
            done(index[future.key], future.result())

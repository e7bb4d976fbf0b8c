"""The report's figures drawn in worker processes (issue 17: a report in two seconds).

Drawing is matplotlib's Agg rendering and PNG encoding, single-threaded, about two seconds for the six figures of a
40 s bag, and importing matplotlib costs another 0.7 s.  :class:`FigurePool` starts its workers when a run begins, so
that they import matplotlib while the bag is processed, and then draws the figures ``PLOTS[k::workers]`` in worker k
(:func:`state_observer.report.plots.write_figure`, the code :func:`~state_observer.report.plots.make_figures` runs in
one process).  The parent never imports matplotlib.

A worker is ``python -m state_observer.report.pool``, fed pickled jobs on its stdin, not a ``multiprocessing`` child:
``spawn`` and ``forkserver`` run the caller's main script again in every worker (a user's script without an
``if __name__ == "__main__"`` guard would process its bag once more in each), and ``fork`` copies a parent that may
hold threads.  A worker that fails or dies costs nothing but time: the figures are then drawn in this process.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

DEFAULT_WORKERS = 2  # six figures of similar cost: two shares of ~1 s each on a 40 s bag
STOP_TIMEOUT_S = 10.0


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class FigurePool:
    """``workers`` drawing processes, started now or at :meth:`start` (their imports overlap what the caller does next).
    Use as a context manager, or call :meth:`close`."""

    def __init__(self, workers: int = DEFAULT_WORKERS, start: bool = True):
        if workers < 1:
            raise ValueError(f"FigurePool needs at least one worker, got {workers}")
        self.workers = workers
        self._processes: list[subprocess.Popen] = []
        if start:
            self.start()

    def start(self) -> None:
        """Start the workers (once; :meth:`make_figures` starts them if nobody did)."""
        if self._processes:
            return
        package_root = str(Path(__file__).resolve().parents[2])  # the state_observer this process runs
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        self._processes = [subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                         for _ in range(self.workers)]

    @classmethod
    def if_useful(cls, workers: int | None = None, start: bool = True) -> "FigurePool | None":
        """A pool of ``workers`` (default: DEFAULT_WORKERS) when this process may use more than one CPU, else None
        (a worker sharing the one CPU would only slow the run it overlaps)."""
        workers = DEFAULT_WORKERS if workers is None else workers
        return cls(workers, start) if workers >= 1 and usable_cpus() >= 2 else None

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes]

    def make_figures(self, out: Path, estimate: dict, gnss: dict, innovations: dict, truth: dict | None,
                     window_s: float = 0.0) -> list[tuple[str | None, str, str]]:
        """As :func:`state_observer.report.plots.make_figures`, the figures shared among the workers."""
        self.start()
        n = len(self._processes)
        try:
            for k, process in enumerate(self._processes):
                pickle.dump((str(out), estimate, gnss, innovations, truth, float(window_s), n, k), process.stdin, pickle.HIGHEST_PROTOCOL)
                process.stdin.flush()
            answers = [pickle.load(process.stdout) for process in self._processes]
            failed = [text for ok, text in answers if not ok]
            if failed:
                raise RuntimeError(failed[0])
        except (OSError, EOFError, pickle.UnpicklingError, RuntimeError) as exc:  # a worker died, or its share failed
            warnings.warn(f"report: the drawing workers failed ({exc!r}); drawing here", RuntimeWarning, stacklevel=2)
            self.close()
            from .plots import make_figures

            return make_figures(out, estimate, gnss, innovations, truth, window_s)
        entries = sorted(entry for _, share in answers for entry in share)
        for _, (filename, heading, caption) in entries:
            if filename is None:
                warnings.warn(f"report: {heading}: {caption}", RuntimeWarning, stacklevel=2)
        return [entry for _, entry in entries]

    def close(self) -> None:
        """End the workers (their stdin closed; killed if they do not stop)."""
        for process in self._processes:
            try:
                process.stdin.close()
            except OSError:
                pass
        for process in self._processes:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()
        self._processes = []

    def __enter__(self) -> "FigurePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _draw_share(out: str, estimate, gnss, innovations, truth, window_s: float, shares: int, share: int) -> list:
    """(index in PLOTS, entry of :func:`~state_observer.report.plots.write_figure`) of the figures PLOTS[share::shares]
    (warnings of failed figures are given to the parent, which repeats them)."""
    from .plots import PLOTS, Run, write_figure

    run = Run(estimate, gnss, innovations, truth, window_s)
    entries = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index in range(share, len(PLOTS), shares):
            entry = write_figure(Path(out), PLOTS[index], run)
            if entry is not None:
                entries.append((index, entry))
    return entries


def _serve() -> None:
    """A worker: matplotlib imported first, then one job after another from stdin until it closes; each answer
    (True, entries) or (False, the error) on the original stdout (print() goes to stderr)."""
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from . import plots  # noqa: F401  (the import the parent's run overlaps)

    jobs = sys.stdin.buffer
    while True:
        try:
            job = pickle.load(jobs)
        except EOFError:
            return
        try:
            answer = (True, _draw_share(*job))
        except Exception as exc:  # noqa: BLE001 - the parent draws the figures itself
            answer = (False, f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, channel, pickle.HIGHEST_PROTOCOL)
        channel.flush()


if __name__ == "__main__":
    _serve()

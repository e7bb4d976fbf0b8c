"""``state-observer prepare``: fill the caches a first run would otherwise fill, once, when the package is built.

A fresh install has two slow first uses: numba compiles the model and filter kernels (about 80 CPU
seconds, ``cache=True``: the machine code is kept in ``__pycache__`` beside the installed modules) and the
default vehicle's suspension kinematics are swept on the detailed model (about 20 s,
:func:`state_observer.vehicle.kinematic_fit.fit_vehicle_kinematics`).  ``scripts/bootstrap.sh`` runs this
after every build, so that the first node start, ``simulate`` and ``process`` take seconds even with an
empty user cache.  The kinematics entry goes to ``cache/kinematics`` under the package's first data root
(``share/state_observer`` of a colcon install), which the kinematic fit reads when the user cache lacks it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path


def prepare(cache_root: Path | None = None, observers: tuple[str, ...] | None = None, stream=None) -> dict:
    """Sweep the default vehicle's kinematics into ``cache_root/kinematics`` (default: the first data root's
    ``cache``), compile every kernel of each observer configuration and of the simulator; seconds per phase."""
    from .estimation.online import OBSERVERS
    from .io.pipeline import load_observer
    from .io.record import simulate_command
    from .paths import default_vehicle_path, package_cache_dirs
    from .process import load_config
    from .progress import bar
    from .vehicle.description import load_vehicle
    from .vehicle.kinematic_fit import fit_vehicle_kinematics

    stream = stream or sys.stderr
    observers = observers or OBSERVERS
    kinematics_dir = Path(cache_root) / "kinematics" if cache_root is not None else package_cache_dirs("kinematics")[0]
    phases = [("default vehicle's suspension kinematics",
               lambda: fit_vehicle_kinematics(load_vehicle(default_vehicle_path()), cache_dir=kinematics_dir))]

    def kernels(name):  # the bar says which warm-up step it is in: one may compile for a minute
        shown = [time.monotonic()]

        def step(done, total):
            slow = time.monotonic() - shown[0] > 2.0
            progress.set_postfix_str(f"kernels of observer {name} ({done}/{total} steps)", refresh=slow)
            shown[0] = time.monotonic() if slow else shown[0]
        load_observer(load_config(observer=name)).warm_up(on_step=step)

    for name in observers:
        phases.append((f"kernels of observer {name}", lambda name=name: kernels(name)))

    def simulator():
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
            if simulate_command("step_steer", Path(tmp) / "bag", duration_s=0.2, stdout=quiet, stderr=quiet) != 0:
                raise RuntimeError("state-observer prepare: the simulator failed on a 0.2 s drive")

    phases.append(("kernels of the simulator", simulator))
    seconds = {}
    with bar("prepare", len(phases), unit="phase", stream=stream) as progress, ticking(progress):
        for label, run in phases:
            progress.set_postfix_str(label)
            start = time.perf_counter()
            run()
            seconds[label] = time.perf_counter() - start
            progress.update()
    return seconds


@contextlib.contextmanager
def ticking(progress, every_s: float = 5.0):
    """Redraw ``progress`` every ``every_s`` while the block runs: a compile of a minute shows its clock moving."""
    done = threading.Event()

    def tick():
        while not done.wait(every_s):
            progress.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="state-observer prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-root", metavar="DIR", help="where the kinematics entry goes (default: the package's data root/cache)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    seconds = prepare(Path(args.cache_root) if args.cache_root else None)
    print(f"prepare: done in {time.perf_counter() - start:.0f} s ("
          + ", ".join(f"{label} {s:.1f} s" for label, s in seconds.items()) + ")", file=sys.stderr)
    return 0

"""``state-observer prepare``: fill the caches a first run would otherwise fill, once, when the package is built.

A fresh install has two slow first uses: numba compiles the model and filter kernels (about 80 CPU
seconds, ``cache=True``: the machine code is kept in ``__pycache__`` beside the installed modules) and the
default vehicle's suspension kinematics are swept on the detailed model (about 20 s,
:func:`state_observer.vehicle.kinematic_fit.fit_vehicle_kinematics`).  ``scripts/bootstrap.sh`` runs this
after every build, so that the first node start, ``simulate`` and ``process`` take seconds even with an
empty user cache.  The kinematics entry goes to ``cache/kinematics`` under the package's first data root
(``share/state_observer`` of a colcon install), which the kinematic fit reads when the user cache lacks it.
Kernels compiled by an earlier version are deleted first (:func:`clear_stale_kernels`).
"""
from __future__ import annotations

import contextlib
import hashlib
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
    clear_stale_kernels()
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


def clear_stale_kernels(package_dir: Path | None = None) -> int:
    """Delete numba's cached machine code of the package (``*.nbi``, ``*.nbc`` under it, and under NUMBA_CACHE_DIR
    where set) when any of its source files changed since the last call; returns how many files went.  numba checks
    a cached kernel against its own source file only, so a kernel calling an edited kernel of another module would
    keep running the old one (an upgraded tire law missing from the vehicle model, without an error)."""
    package_dir = Path(package_dir) if package_dir is not None else Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes())
    stamp = package_dir / "__pycache__" / "kernels-source.sha256"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return 0
    roots = [package_dir]
    if os.environ.get("NUMBA_CACHE_DIR"):
        roots += [p for p in Path(os.environ["NUMBA_CACHE_DIR"]).rglob(package_dir.name) if p.is_dir()]
    removed = 0
    for root in roots:
        for path in [*root.rglob("*.nbi"), *root.rglob("*.nbc")]:
            path.unlink(missing_ok=True)
            removed += 1
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(digest.hexdigest())
    return removed


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

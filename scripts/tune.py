#!/usr/bin/env python3
"""Tune the observer on the harness' tuning seeds, never on the reported ones (``evaluate`` reports seeds 0-2).

    python3 scripts/tune.py [--seeds 100-104] [--mode full|no_gnss|speed_only] [--jobs 2] [--cache DIR]
                            [--set NAME=VALUE ...] [--per-seed] [--sensors FILE] [manoeuvre ...]

Runs the product (:func:`state_observer.sim.harness.run_observer`) on each manoeuvre and seed of the mismatch
harness, with filter settings changed by ``--set`` (an :class:`ErrorEkfSettings` field, ``force_walk.pitch`` for one
entry of a dict field, or ``spi.NAME`` for an :class:`SpiSettings` field; the value is a Python literal), and prints per manoeuvre the means over seeds of the
yaw rate (deg/s), sideslip (deg), tire-force nRMSE (%), mass (%) and cornering-scale (%) errors and the share of the
tire-force errors inside twice their published sigma (%), then their mean.
Run it twice, with and without a change, to compare. The truth is cached under ``--cache``.
"""
from __future__ import annotations

import argparse
import ast
import functools
import math
import os
from multiprocessing import Pool
from pathlib import Path

import numpy as np

DEFAULT_MANOEUVRES = ("steady_circle", "step_steer", "sine_with_dwell", "double_lane_change", "brake_in_turn", "friction_step")
COLUMNS = (("yaw_rate_rmse_dps", "yr", 1.0), ("sideslip_rmse_deg", "beta", 1.0), ("tire_force_nrmse_lat", "Fy%", 100.0),
           ("tire_force_nrmse_long", "Fx%", 100.0), ("tire_force_nrmse_vert", "Fz%", 100.0), ("mass_error_pct", "m%", 1.0),
           ("cornering_error_pct", "Cs%", 1.0), ("tire_force_2sigma_coverage", "F2s%", 100.0))


def seeds_of(text: str) -> list[int]:
    """'100-104' or '100,103' -> seeds."""
    if "-" in text:
        lo, hi = (int(v) for v in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(v) for v in text.split(",")]


def apply_overrides(overrides: dict) -> None:
    """Every ErrorEkfSettings / SpiSettings built in this process gets the overridden fields ("force_walk.pitch": one
    entry of a dict field)."""
    from state_observer.estimation.errorekf import ErrorEkfSettings
    from state_observer.estimation.spi import SpiSettings

    for cls, prefix in ((ErrorEkfSettings, ""), (SpiSettings, "spi.")):
        fields = {k[len(prefix):]: v for k, v in overrides.items() if k.startswith("spi.") == bool(prefix)}
        for name in fields:
            if name.split(".")[0] not in cls.__dataclass_fields__:
                raise SystemExit(f"--set {prefix}{name}: {cls.__name__} has no such field")
        if fields and not getattr(cls, "_tune_overrides", None):  # once per process (a forked worker inherits the patch)
            cls._tune_overrides = fields
            init = cls.__init__

            def patched(self, *args, _init=init, _fields=fields, **kwargs):
                _init(self, *args, **kwargs)
                for name, value in _fields.items():
                    field, _, key = name.partition(".")
                    if key:
                        getattr(self, field)[key] = value
                    else:
                        object.__setattr__(self, field, np.array(value, float) if isinstance(value, (list, tuple)) else value)
            cls.__init__ = patched


def one(job, mode, cache, sensors=None):
    """(manoeuvre, seed, metrics) of the product on one tuning scenario (settings as apply_overrides left them), with
    the sensor suite of the file ``sensors`` (default: the package's)."""
    from state_observer.sim import harness as h

    name, seed = job
    desc, config, mismatch, truths, samples = h.simulate(name, seed, cache, sensors_file=sensors)
    if mode == "speed_only":
        samples = h.speed_only(samples, desc)
    est, _ = h.run_observer(desc, config, h.MANOEUVRES[name](), samples, gnss=(mode == "full"))
    out = h.run_metrics(h.truth_run(truths), est, h.FRICTION_STEP_S if name == "friction_step" else None)
    out.update(h.cornering_metrics(est, mismatch))
    return name, seed, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("manoeuvres", nargs="*", default=list(DEFAULT_MANOEUVRES))
    p.add_argument("--seeds", default="100-104")
    p.add_argument("--mode", choices=("full", "no_gnss", "speed_only"), default="full")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--cache", default=None, help="truth cache directory (default: the user cache)")
    p.add_argument("--per-seed", action="store_true", help="a row per seed too")
    p.add_argument("--sensors", default=None, metavar="FILE", help="sensor suite YAML (default: config/sensors/default.yaml)")
    a = p.parse_args()
    overrides = {}
    for item in a.set:
        name, _, value = item.partition("=")
        overrides[name.strip()] = ast.literal_eval(value.strip())
    seeds = seeds_of(a.seeds)
    if any(s < 100 for s in seeds):
        raise SystemExit("tune on seeds 100 and above: seeds 0-99 are the reported ones")
    cache = Path(a.cache) if a.cache else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "state_observer" / "harness"
    jobs = [(m, s) for m in a.manoeuvres for s in seeds]
    work = functools.partial(one, mode=a.mode, cache=cache, sensors=a.sensors)
    apply_overrides(overrides)  # here first: a misspelt name stops the run before any worker starts
    if a.jobs > 1:
        with Pool(a.jobs, initializer=apply_overrides, initargs=(overrides,)) as pool:
            results = list(pool.imap(work, jobs))
    else:
        results = [work(j) for j in jobs]
    print(f"{'manoeuvre':20s}" + "".join(f"{short:>8s}" for _, short, _ in COLUMNS), f"  ({a.mode}, seeds {a.seeds}, {overrides or 'defaults'})")
    means = []
    for m in a.manoeuvres:
        rows = [r for name, _, r in results if name == m]
        if a.per_seed:
            for (name, seed, r) in results:
                if name == m:
                    print(f"  seed {seed:<13d}" + "".join(f"{r.get(k, math.nan) * f:8.3f}" for k, _, f in COLUMNS))
        cells = [float(np.nanmean([r.get(k, math.nan) * f for r in rows])) if any(k in r for r in rows) else math.nan for k, _, f in COLUMNS]
        means.append(cells)
        print(f"{m:20s}" + "".join(f"{c:8.3f}" for c in cells))
    print(f"{'MEAN':20s}" + "".join(f"{c:8.3f}" for c in np.nanmean(np.array(means), axis=0)))


if __name__ == "__main__":
    main()

"""Run report: CSV files of an observer run and one HTML page with PNG plots.

``write_run(out_dir, estimate, gnss, innovations, truth, summary, title)`` writes, into out_dir:

==========================  ===============================================================
``estimate.csv``            one row per published estimate; columns as given (SI, rad)
``gnss.csv``                GNSS fixes in the local ENU frame: t_s, x_m, y_m, accepted
``innovations.csv``         t_s, sensor_index, sensor (name), nis, accepted
``innovations_sensors.csv`` sensor_index, sensor, dof: all sensors, also those without rows
``truth.csv``               only with truth: simulated ground truth, columns as given
``summary.json``            only with summary: the summary dict as given
``report.json``             {"title": ...} so that the report can be rebuilt with its title
``report.html`` + ``*.png`` the report (PNG files next to it, referenced relatively)
==========================  ===============================================================

CSV: one header row of column names, comma separated, numbers printed with ``%.9g``
(9 significant digits: read back to within 5e-9 relative; NaN as ``nan``).
``write_report_from_csv(run_dir)`` reads these files back into the same dicts (``_read_run``)
and writes the report again. The two sidecars exist for that round trip:
innovations_sensors.csv gives back innovations["sensor_names"] and ["dof"] (dof empty = none),
report.json the title. A figure that fails is left out with a warning and a note in the page.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

__all__ = ["write_run", "write_report_from_csv"]

FLOAT_FORMAT = "%.9g"
_FILES = {"estimate": "estimate.csv", "gnss": "gnss.csv", "truth": "truth.csv",
          "innovations": "innovations.csv", "sensors": "innovations_sensors.csv",
          "summary": "summary.json", "meta": "report.json"}
_LISTS = ("sensor_names", "dof")  # list-valued keys of the innovations dict


def write_run(out_dir, estimate: dict, gnss: dict, innovations: dict, truth: dict | None = None,
              summary: dict | None = None, title: str = "state_observer run", figure_pool=None) -> Path:
    """Write the run's CSV files and the report into out_dir (created if missing); returns the path of report.html.
    ``figure_pool``: a :class:`~state_observer.report.pool.FigurePool` to draw the figures in (default: here)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_table(out / _FILES["estimate"], estimate)
    _write_table(out / _FILES["gnss"], gnss)
    _write_innovations(out, innovations)
    for key, value in (("truth", truth), ("summary", summary)):
        path = out / _FILES[key]
        if value is None:
            path.unlink(missing_ok=True)  # a stale file from an earlier run would come back
        elif key == "truth":
            _write_table(path, value)
        else:
            path.write_text(json.dumps(value, indent=2, default=_json_default) + "\n")
    (out / _FILES["meta"]).write_text(json.dumps({"title": title}) + "\n")
    return _report(out, estimate, gnss, innovations, truth, summary, title, figure_pool)


def write_report_from_csv(run_dir, title: str | None = None) -> Path:
    """Re-read the CSV files (and summary.json if present) that write_run wrote in run_dir and write report.html + PNGs again.

    title None: the title stored by write_run (report.json), else "state_observer run".
    """
    run = _read_run(run_dir)
    stored = run.pop("title")
    title = stored if title is None else title
    return _report(Path(run_dir), title=title, **run)


def _read_run(run_dir) -> dict:
    """The inputs of write_run read back from run_dir: dict with keys estimate, gnss, innovations,
    truth (None if absent), summary (None if absent) and title. Columns are float64 arrays."""
    run = Path(run_dir)
    meta_path = run / _FILES["meta"]
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    truth_path, summary_path = run / _FILES["truth"], run / _FILES["summary"]
    return {
        "estimate": _read_table(run / _FILES["estimate"]),
        "gnss": _read_table(run / _FILES["gnss"]) if (run / _FILES["gnss"]).is_file() else {},
        "innovations": _read_innovations(run),
        "truth": _read_table(truth_path) if truth_path.is_file() else None,
        "summary": json.loads(summary_path.read_text()) if summary_path.is_file() else None,
        "title": meta.get("title", "state_observer run"),
    }


def _report(out: Path, estimate, gnss, innovations, truth, summary, title, figure_pool=None) -> Path:
    from .page import window_of, write_page  # scipy only when a report is written, matplotlib only where it is drawn
    if figure_pool is not None:
        make_figures = figure_pool.make_figures
    else:
        from .plots import make_figures
    figures = make_figures(out, estimate, gnss, innovations, truth, window_s=window_of(summary, estimate)[0])
    return write_page(out, title, summary, figures, estimate, gnss, innovations, truth,
                      files=[name for name in _FILES.values() if (out / name).is_file()])


def _columns(table: dict, what: str) -> dict[str, np.ndarray]:
    """The 1-D array columns of table, all of one length (ValueError otherwise)."""
    cols = {str(k): np.asarray(v, dtype=float).ravel() for k, v in (table or {}).items()
            if k not in _LISTS}
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"{what}: columns of unequal length {sorted(lengths)}")
    for name in cols:
        if not name or any(c in name for c in ',"\n\r'):
            raise ValueError(f"{what}: column name {name!r} not allowed in a CSV header")
    return cols


def _write_table(path: Path, table: dict) -> None:
    cols = _columns(table, path.name)
    data = np.column_stack(list(cols.values())) if cols else np.empty((0, 0))
    np.savetxt(path, data, fmt=FLOAT_FORMAT, delimiter=",", header=",".join(cols), comments="")


def _read_table(path: Path) -> dict[str, np.ndarray]:
    with open(path) as f:
        names = [n for n in f.readline().strip().split(",") if n]
        body = f.read()
    if not body.strip():
        return {name: np.empty(0) for name in names}
    data = np.loadtxt(body.splitlines(), delimiter=",", ndmin=2)
    return {name: data[:, i].copy() for i, name in enumerate(names)}


def _write_innovations(out: Path, innovations: dict) -> None:
    innovations = innovations or {}
    names = [str(n) for n in innovations.get("sensor_names", [])]
    dof = [] if innovations.get("dof") is None else list(innovations["dof"])
    cols = _columns(innovations, "innovations")
    header = list(cols)
    text_cols = [np.char.mod(FLOAT_FORMAT, v).tolist() for v in cols.values()]
    if "sensor_index" in cols:  # a human-readable name next to the index ("" if out of range)
        index = cols["sensor_index"].astype(int)
        index = np.where((index >= 0) & (index < len(names)), index, len(names))
        pos = header.index("sensor_index") + 1
        header.insert(pos, "sensor")
        text_cols.insert(pos, np.array(names + [""], dtype=object)[index].tolist())
    with open(out / _FILES["innovations"], "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(zip(*text_cols))
    with open(out / _FILES["sensors"], "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["sensor_index", "sensor", "dof"])
        for i, name in enumerate(names):
            writer.writerow([i, name, FLOAT_FORMAT % dof[i] if i < len(dof) and dof[i] is not None else ""])


def _read_innovations(run: Path) -> dict:
    result: dict = {}
    path = run / _FILES["innovations"]
    if path.is_file():
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if rows:
            header, body = rows[0], rows[1:]
            for i, name in enumerate(header):
                if name != "sensor":
                    result[name] = np.array([float(r[i]) for r in body], dtype=float)
    names, dof = [], []
    path = run / _FILES["sensors"]
    if path.is_file():
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                names.append(row["sensor"])
                dof.append(_number(row["dof"]) if row["dof"] else None)
    result["sensor_names"] = names
    result["dof"] = dof if any(d is not None for d in dof) else []
    return result


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _json_default(value):
    """NumPy scalars and arrays in the summary become plain JSON numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"summary: {type(value).__name__} is not JSON serialisable")

"""report.html, answer first: the evaluation window, the verdict (accuracy beside its baselines and the
project's targets with ground truth, innovation consistency per sensor always), the error against truth
with its ±3σ bounds, the output bag and how to open it, the other figures, then the details."""
from __future__ import annotations

import datetime
import html
import math
from pathlib import Path

import numpy as np

from .stats import nis_stats

# The project's accuracy targets (issue 12): RMSE after the settling time; tire forces as RMSE over the
# peak truth value of each component; mass as the mean absolute error.
TARGETS = {"position_rmse_m": 0.25, "position_smoothed_rmse_m": 0.25, "sideslip_rmse_deg": 0.15, "tire_force_nrmse_long": 0.05,
           "tire_force_nrmse_lat": 0.05, "tire_force_nrmse_vert": 0.05, "mass_error_pct": 3.0}
# (metric key of sim.evaluate.error_metrics, label, unit, scale for display)
ACCURACY_ROWS = (
    ("position_rmse_m", "position (horizontal) RMSE", "m", 1.0),
    ("position_smoothed_rmse_m", "position offline, smoothed (all fixes) RMSE", "m", 1.0),
    ("yaw_rmse_deg", "heading RMSE", "deg", 1.0),
    ("yaw_rate_rmse_dps", "yaw rate RMSE", "deg/s", 1.0),
    ("sideslip_rmse_deg", "sideslip RMSE", "deg", 1.0),
    ("tire_force_nrmse_long", "tire force Fx RMSE / peak", "%", 100.0),
    ("tire_force_nrmse_lat", "tire force Fy RMSE / peak", "%", 100.0),
    ("tire_force_nrmse_vert", "tire force Fz RMSE / peak", "%", 100.0),
    ("mass_error_pct", "mass, mean |error|", "%", 1.0),
    ("friction_abs_error", "friction μ, mean |error|", "-", 1.0),
)
BASELINES = ("open loop", "GNSS alone", "zero sideslip")
VERDICT_SECTIONS = ("accuracy against truth", "baselines against truth", "evaluation window")  # not repeated in details
EXPECTED_REJECTIONS = "≈ 0.01 % (gate probability 0.9999)"

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1440px; margin: 0 auto; padding: 16px 24px 48px; line-height: 1.4; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; }
.meta { color: #666; margin-top: 0; }
.window { background: #eef3f8; border-left: 4px solid #4a7ab5; padding: 8px 12px; }
.headline { font-size: 18px; margin: 8px 0 12px; }
nav a { margin-right: 14px; }
.tables { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
table { border-collapse: collapse; font-size: 14px; margin-bottom: 10px; }
caption { font-weight: 600; text-align: left; padding: 4px 0; }
th, td { border: 1px solid #ddd; padding: 3px 9px; text-align: left; }
th { background: #f3f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { font-weight: 700; }
td.met { background: #e3f4e3; color: #17631b; font-weight: 600; }
td.notmet { background: #fbe4e4; color: #9c1c1c; font-weight: 600; }
td.warn { background: #fdf1dc; color: #8a5a00; font-weight: 600; }
.note { color: #444; font-size: 14px; max-width: 1100px; }
pre { background: #f6f8fa; padding: 8px 12px; font-size: 13px; overflow-x: auto; }
figure { margin: 18px 0; }
figure img { max-width: 100%; border: 1px solid #e3e3e3; }
figcaption { color: #444; margin-top: 6px; }
.error { color: #b00020; }
"""


def window_of(summary: dict | None, estimate: dict) -> tuple[float, float, float | None]:
    """(from s, to s, settling s or None) of the run's evaluation window: the summary's
    "evaluation window", else the whole run."""
    t = np.asarray(estimate.get("t_s", []), dtype=float)
    end = float(t[-1]) if len(t) else 0.0
    w = (summary or {}).get("evaluation window") or {}
    if "from_s" in w:
        return float(w["from_s"]), float(w.get("to_s", end)), w.get("settling_s")
    return (float(t[0]) if len(t) else 0.0), end, None


def write_page(out: Path, title: str, summary: dict | None, figures: list[tuple[str, str, str]],
               estimate: dict, gnss: dict, innovations: dict, truth: dict | None,
               files: list[str]) -> Path:
    """Write out/report.html; figures: (PNG file name or None if it failed, heading, caption), the
    first the error figure when there is truth. Returns its path."""
    esc = html.escape
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    start, end, settling = window_of(summary, estimate)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>", '<meta name="viewport" content="width=device-width">',
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">Generated {esc(now)} · {esc(_run_line(estimate, truth))}</p>',
        _window_paragraph(start, end, settling),
        '<section id="verdict"><h2>Verdict</h2>',
        *_verdict(summary, innovations, start, truth is not None),
        "</section>",
    ]
    errors = [f for f in figures if f[0] == "errors.png"]
    others = [f for f in figures if f[0] != "errors.png"]
    parts += [_figure(f) for f in errors]
    parts.append(_bag_section(Path(out), summary))
    if others:
        parts.append("<h2>Figures</h2><nav>" + "".join(
            f'<a href="#{esc(Path(f).stem)}">{esc(h)}</a>' for f, h, _ in others if f) + "</nav>")
        parts += [_figure(f) for f in others]
    tables = [_table(name, rows) for name, rows in summary_tables(
        {k: v for k, v in (summary or {}).items() if k not in VERDICT_SECTIONS})]
    parts += ['<h2 id="details">Details</h2>', '<div class="tables">', *tables,
              _table("run data", _run_rows(estimate, gnss, innovations, truth)), "</div>"]
    parts.append("<h2>Files</h2><p>" + " · ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in files)
                 + "</p></body></html>")
    path = Path(out) / "report.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def _figure(entry: tuple) -> str:
    esc = html.escape
    filename, heading, caption = entry
    if filename is None:  # a figure that failed: heading and error message
        return f'<figure><h3>{esc(heading)}</h3><p class="error">{esc(caption)}</p></figure>'
    tag = "h2" if filename == "errors.png" else "h3"
    return (f'<figure id="{esc(Path(filename).stem)}"><{tag}>{esc(heading)}</{tag}>'
            f'<img src="{esc(filename)}" alt="{esc(heading)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def _window_paragraph(start: float, end: float, settling) -> str:
    why = ("" if settling is None else
           f" The first {float(settling):g} s of a run (its first third, if that is shorter) are left out: the filter "
           "starts from the first GNSS fixes and needs that long to settle.")
    return (f'<p class="window" id="window"><b>Evaluation window: t = {start:.1f} s to {end:.1f} s</b> '
            f"(from the first message of the bag). Every number, percentage and verdict in this report is "
            f"computed over this window; the plots show the whole run, with the time before the window shaded "
            f"grey.{why}</p>")


# ------------------------------------------------------------------------------------------ verdict

def _verdict(summary: dict | None, innovations: dict, start: float, has_truth: bool) -> list[str]:
    """HTML of the verdict block: accuracy with baselines and targets (with truth), NIS per sensor."""
    summary = summary or {}
    accuracy = summary.get("accuracy against truth") or {}
    nis_rows = _nis_rows(innovations, start)
    parts = []
    if has_truth and accuracy:
        parts += _accuracy_verdict(accuracy, summary.get("baselines against truth") or {}, summary)
        parts.append("<h3>Innovation consistency per sensor</h3>")
    else:
        consistent = sum(r["verdict"] == "consistent" for r in nis_rows)
        judged = sum(r["verdict"] not in ("no updates", "no dof") for r in nis_rows)
        parts.append(
            f'<p class="headline">No ground truth in this bag: the verdict is the filter\'s consistency with its '
            f"sensors. <b>{consistent} of {judged} sensors consistent</b> (mean NIS inside its 95 % bounds).</p>")
    parts.append(_nis_table(nis_rows))
    parts.append(
        '<p class="note">NIS = innovation² / its predicted variance (normalised innovation squared) of each accepted '
        "update. For a consistent filter its mean equals the measurement's degrees of freedom (dof) and, over n "
        "updates, lies inside the 95 % bounds χ²(n·dof)/n (time-average NIS test, Bar-Shalom, Li and Kirubarajan "
        "2001, sec. 5.4.2; the bounds assume independent updates, which time-correlated sensor errors are not). "
        "Above the bounds: the filter is overconfident for that sensor (innovations larger than its covariance "
        f"says); below: too conservative. Rejections by the gate: expected {EXPECTED_REJECTIONS}.</p>")
    return parts


def _accuracy_verdict(accuracy: dict, baselines: dict, summary: dict) -> list[str]:
    esc = html.escape
    columns = [b for b in BASELINES if baselines.get(b)]
    head = ["quantity", "unit", "observer", *columns, "target", "verdict"]
    rows, met, targeted, wins, compared = [], [], 0, 0, 0
    for key, label, unit, scale in ACCURACY_ROWS:
        value = _finite(accuracy.get(key))
        others = [_finite(baselines.get(b, {}).get(key)) for b in columns]
        if value is None and all(v is None for v in others):
            continue
        present = [v for v in [value, *others] if v is not None]
        best = min(present) if present else None
        cells = [f"<th scope=\"row\">{esc(label)}</th>", f"<td>{esc(unit)}</td>"]
        for v in [value, *others]:
            cls = "num best" if v is not None and v == best and len(present) > 1 else "num"
            cells.append(f'<td class="{cls}">{_number(v, scale)}</td>')
        target = TARGETS.get(key)
        if target is None or value is None:
            cells += [f'<td class="num">{"≤ " + _number(target, scale) if target is not None else "–"}</td>', "<td>–</td>"]
        else:
            targeted += 1
            ok = value <= target
            met.append((label, ok))
            cells += [f'<td class="num">≤ {_number(target, scale)}</td>',
                      f'<td class="{"met" if ok else "notmet"}">{"met" if ok else "not met"}</td>']
        if value is not None and any(v is not None for v in others):
            compared += 1
            wins += all(value < v for v in others if v is not None)
        rows.append("<tr>" + "".join(cells) + "</tr>")
    n_met = sum(ok for _, ok in met)
    missed = ", ".join(label.split(" RMSE")[0].split(",")[0] for label, ok in met if not ok)
    headline = (f'<p class="headline">Against the simulator\'s ground truth: <b>{n_met} of {targeted} targets met</b>'
                + (f" (not met: {esc(missed)})" if missed else "")
                + f"; the observer is better than every baseline on {wins} of {compared} quantities.</p>")
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    table = (f'<table class="verdict"><caption>Accuracy in the window, observer beside its baselines on the same '
             f"samples (best of each row in bold)</caption><tr>{header}</tr>{''.join(rows)}</table>")
    return [headline, table, _baseline_note(baselines, summary)]


def _baseline_note(baselines: dict, summary: dict) -> str:
    esc = html.escape
    notes = []
    ol = baselines.get("open loop")
    if ol is not None:
        model = (f"mass {ol['model mass kg']:.1f} kg, μ {ol['model friction']:.3g}"
                 if _finite(ol.get("model mass kg")) is not None and _finite(ol.get("model friction")) is not None else "")
        cost = (summary.get("timing") or {}).get("open-loop baseline s")
        text = ("<b>open loop</b>: the observer's own model (same vehicle file, kinematics, step"
                + (f", {model}" if model else "") + "), started at the observer's start and driven by the same "
                "steering angle and wheel torques from the bag, with no corrections: what the model alone would say"
                + (f" (ran alongside, {cost:.2f} s)" if isinstance(cost, (int, float)) else "") + ".")
        if ol.get("failed"):
            text += f' <span class="error">It stopped: {esc(str(ol["failed"]))}; its figures cover the part it ran.</span>'
        notes.append(text)
    if baselines.get("GNSS alone"):
        notes.append("<b>GNSS alone</b>: each fix the observer received, against the true antenna position.")
    if baselines.get("zero sideslip"):
        notes.append("<b>zero sideslip</b>: β = 0 throughout, what a kinematic (no-slip) estimate gives.")
    return '<p class="note">Baselines: ' + " ".join(notes) + "</p>" if notes else ""


def _finite(value):
    return float(value) if isinstance(value, (int, float, np.floating)) and math.isfinite(value) else None


def _number(value, scale: float = 1.0) -> str:
    return "–" if value is None else format_value(float(value) * scale)


def _nis_rows(innovations: dict, start: float) -> list[dict]:
    """Per sensor: name, dof and nis_stats over the updates at t >= start, with a verdict."""
    innovations = innovations or {}
    names = [str(n) for n in innovations.get("sensor_names", [])]
    dofs = [] if innovations.get("dof") is None else list(innovations["dof"])
    index = np.asarray(innovations.get("sensor_index", []), dtype=float).astype(int)
    nis = np.asarray(innovations.get("nis", np.full(len(index), np.nan)), dtype=float)
    accepted = np.asarray(innovations.get("accepted", np.ones(len(index))), dtype=float)
    t = np.asarray(innovations.get("t_s", np.full(len(index), np.inf)), dtype=float)
    rows = []
    for k, name in enumerate(names):
        dof = dofs[k] if k < len(dofs) else None
        pick = (index == k) & (t >= start)
        s = nis_stats(nis[pick], accepted[pick], dof)
        if not s["updates"]:
            verdict = "no updates"
        elif not dof or s["mean_bounds"] is None:
            verdict = "no dof"
        elif s["mean_nis"] > s["mean_bounds"][1]:
            verdict = "overconfident"
        elif s["mean_nis"] < s["mean_bounds"][0]:
            verdict = "conservative"
        else:
            verdict = "consistent"
        rows.append({"sensor": name, "dof": dof, **s, "verdict": verdict})
    return rows


def _nis_table(rows: list[dict]) -> str:
    if not rows:
        return "<p>No innovation statistics in this run.</p>"
    head = ("sensor", "dof", "updates", "rejected", "mean NIS", "95 % bounds of the mean", "% single NIS inside 95 %",
            "verdict")
    body = []
    for r in rows:
        n, rej = r["updates"], r["rejected"]
        bounds = r["mean_bounds"]
        cells = [format_value(r["dof"]), format_value(n),
                 f"{rej} ({100 * rej / n:.2g} %)" if n else "–",
                 format_value(r["mean_nis"]) if n else "–",
                 f"{bounds[0]:.3g} – {bounds[1]:.3g}" if bounds else "–",
                 f"{r['inside_95_percent']:.1f}" if r["inside_95_percent"] is not None else "–"]
        verdict = r["verdict"]
        cls = {"consistent": "met", "overconfident": "notmet", "conservative": "warn"}.get(verdict)  # too wide: safe side
        body.append(f'<tr><th scope="row">{html.escape(r["sensor"])}</th>' + "".join(_cell(c) for c in cells)
                    + (f'<td class="{cls}">{verdict}</td>' if cls else f"<td>{verdict}</td>") + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (f'<table class="nis"><caption>Innovations of each sensor in the window (accepted updates)</caption>'
            f"<tr>{header}</tr>{''.join(body)}</table>")


# ---------------------------------------------------------------------------------------- output bag

def _bag_section(out: Path, summary: dict | None) -> str:
    """Link to the output bag next to the report and the commands that open it (nothing without one)."""
    bag = out / "bag"
    if not (bag / "metadata.yaml").is_file():
        return ""
    esc = html.escape
    storage = sorted(p.name for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))
    topics = [k[len("topic "):] for k in ((summary or {}).get("output") or {}) if k.startswith("topic ")]
    source = ((summary or {}).get("input") or {}).get("bag", "INPUT_BAG")
    out = Path((summary or {}).get("output folder") or out.resolve())  # where the run lives once complete
    path = str(out / "bag")
    first = f"{path}/{storage[0]}" if storage else path
    return (
        '<section id="bag"><h2>Output bag</h2>'
        f'<p><a href="bag/">bag/</a> ({esc(", ".join(storage) or "rosbag2")}, message definitions included) holds '
        f"everything the observer node publishes{': ' + esc(', '.join(topics)) if topics else ''}, "
        "logged at the receive time of the sensor message that produced it. Open it with:</p>"
        f"<pre>ros2 bag info {esc(path)}\n"
        f"ros2 bag play {esc(path)}                      # source the package first: its own message types\n"
        f"ros2 run state_observer bag_player --ros-args -p bag:={esc(path)}   # without rosbag2 (PyPI ROS 2)\n"
        "rviz2 -d rviz/state_observer.rviz               # odometry, path, car with tire-force arrows\n"
        f"state-observer process {esc(str(source))} --out {esc(str(out.resolve()))} --force   # this run again</pre>"
        f'<p class="note">Foxglove: Open local file → {esc(first)} (it reads rosbag2 sqlite3 and mcap files; the '
        "stored message definitions decode the package's own TireForces, VehicleParameters and ObserverState).</p>"
        "</section>")


# ---------------------------------------------------------------------------------------- details

def format_value(value) -> str:
    """Numbers to 4 significant digits (no exponent between 1e-3 and 1e12), ints as they are."""
    if value is None:
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v) or v == 0:
            return str(v) if v else "0"
        magnitude = abs(v)
        if 1e4 <= magnitude < 1e12:  # round to 4 significant digits, print without exponent
            return f"{round(v, 3 - math.floor(math.log10(magnitude))):.0f}"
        return f"{v:.4g}"
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        text = ", ".join(format_value(v) for v in items[:12])
        return text + (f", … ({len(items)} values)" if len(items) > 12 else "")
    return str(value)


def summary_tables(summary: dict | None) -> list[tuple[str, list[tuple[str, str]]]]:
    """(title, [(key, formatted value)]) per top-level dict of summary; top-level entries that
    are not dicts go into one table "summary"; nested dicts are flattened to "a / b" keys."""
    if not summary:
        return []
    loose = [(str(k), format_value(v)) for k, v in summary.items() if not isinstance(v, dict)]
    tables = [("summary", loose)] if loose else []
    for key, value in summary.items():
        if isinstance(value, dict):
            tables.append((str(key), _flatten(value)))
    return tables


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flatten(value, name + " / ") if value else [(name, "–")]
        else:
            rows.append((name, format_value(value)))
    return rows


def _table(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(f'<tr><th scope="row">{html.escape(k)}</th>{_cell(v)}</tr>'
                   for k, v in rows) or '<tr><td colspan="2">(empty)</td></tr>'
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


def _cell(text: str) -> str:
    """A td; numbers right-aligned."""
    try:
        float(text.replace("%", ""))
        return f'<td class="num">{html.escape(text)}</td>'
    except ValueError:
        return f"<td>{html.escape(text)}</td>"


def _time_span(t) -> float:
    return float(t[-1] - t[0]) if len(t) > 1 else 0.0


def _run_line(estimate: dict, truth: dict | None) -> str:
    t = np.asarray(estimate.get("t_s", []), dtype=float)
    text = f"{len(t)} estimates over {_time_span(t):.2f} s"
    return text + (" · with simulated ground truth" if truth is not None else " · no ground truth")


def _run_rows(estimate, gnss, innovations, truth) -> list[tuple[str, str]]:
    t = np.asarray(estimate.get("t_s", []), dtype=float)
    span = _time_span(t)
    accepted = np.asarray((gnss or {}).get("accepted", []), dtype=float) > 0.5
    rows = [("estimates", format_value(len(t))), ("duration_s", format_value(span)),
            ("estimate_rate_hz", format_value((len(t) - 1) / span) if span > 0 else "–"),
            ("gnss_fixes accepted", format_value(int(accepted.sum()))),
            ("gnss_fixes rejected", format_value(int((~accepted).sum()))),
            ("innovation updates", format_value(len((innovations or {}).get("nis", [])))),
            ("truth rows", format_value(len(truth.get("t_s", []))) if truth is not None else "none")]
    return rows

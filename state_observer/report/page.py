"""report.html: title, summary tables, run and NIS tables, then the figures with captions."""
from __future__ import annotations

import datetime
import html
import math
from pathlib import Path

import numpy as np

from .plots import nis_stats

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1440px; margin: 0 auto; padding: 16px 24px 48px; line-height: 1.4; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; }
.meta { color: #666; margin-top: 0; }
nav a { margin-right: 14px; }
.tables { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
table { border-collapse: collapse; font-size: 14px; }
caption { font-weight: 600; text-align: left; padding: 4px 0; }
th, td { border: 1px solid #ddd; padding: 3px 9px; text-align: left; }
th { background: #f3f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 24px 0; }
figure img { max-width: 100%; border: 1px solid #e3e3e3; }
figcaption { color: #444; margin-top: 6px; }
.error { color: #b00020; }
"""


def write_page(out: Path, title: str, summary: dict | None, figures: list[tuple[str, str, str]],
               estimate: dict, gnss: dict, innovations: dict, truth: dict | None,
               files: list[str]) -> Path:
    """Write out/report.html; figures: (PNG file name or None if it failed, heading, caption).
    Returns its path."""
    esc = html.escape
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>", '<meta name="viewport" content="width=device-width">',
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">Generated {esc(now)} · {esc(_run_line(estimate, truth))}</p>',
    ]
    if figures:
        parts.append("<nav>" + "".join(f'<a href="#{esc(Path(f).stem)}">{esc(h)}</a>'
                                        for f, h, _ in figures if f) + "</nav>")
    tables = [_table(name, rows) for name, rows in summary_tables(summary)]
    parts += ["<h2>Summary</h2>", '<div class="tables">', *tables,
              _table("run data", _run_rows(estimate, gnss, innovations, truth)),
              _nis_table(innovations), "</div>"]
    if figures:
        parts.append("<h2>Figures</h2>")
    for filename, heading, caption in figures:
        if filename is None:  # a figure that failed: heading and error message
            parts.append(f'<figure><h3>{esc(heading)}</h3><p class="error">{esc(caption)}</p></figure>')
            continue
        parts.append(f'<figure id="{esc(Path(filename).stem)}"><h3>{esc(heading)}</h3>'
                     f'<img src="{esc(filename)}" alt="{esc(heading)}">'
                     f"<figcaption>{esc(caption)}</figcaption></figure>")
    parts.append("<h2>Files</h2><p>" + " · ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in files)
                 + "</p></body></html>")
    path = Path(out) / "report.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


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


def _nis_table(innovations: dict) -> str:
    """One row per sensor: dof, updates, rejected, mean NIS, % inside the 95 % chi-square interval."""
    innovations = innovations or {}
    names = [str(n) for n in innovations.get("sensor_names", [])]
    dofs = [] if innovations.get("dof") is None else list(innovations["dof"])
    index = np.asarray(innovations.get("sensor_index", []), dtype=float).astype(int)
    nis = np.asarray(innovations.get("nis", np.full(len(index), np.nan)), dtype=float)
    accepted = np.asarray(innovations.get("accepted", np.ones(len(index))), dtype=float)
    if not names:
        return ""
    head = ("sensor", "dof", "updates", "rejected", "mean NIS", "% inside 95 %")
    rows = []
    for k, name in enumerate(names):
        dof = dofs[k] if k < len(dofs) else None
        s = nis_stats(nis[index == k], accepted[index == k], dof)
        cells = (format_value(dof), format_value(s["updates"]), format_value(s["rejected"]),
                 format_value(s["mean_nis"]) if s["updates"] else "–",
                 f"{s['inside_95_percent']:.1f}" if s["inside_95_percent"] is not None else "–")
        rows.append(f"<tr><th scope=\"row\">{html.escape(name)}</th>"
                    + "".join(_cell(c) for c in cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (f"<table><caption>innovation consistency of accepted updates (expected: mean NIS = dof, 95 % inside)</caption>"
            f"<tr>{header}</tr>{''.join(rows)}</table>")

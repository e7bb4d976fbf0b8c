"""PNG figures of an observer run (matplotlib Figure objects, Agg, no pyplot state).

Estimate solid blue with its ±3σ band shaded (σ from the filter's covariance), truth dashed black.
Every statistic in a title is computed over one evaluation window (``window_s`` onwards; the
part before it is shaded grey). Long runs are decimated by a constant stride to at most
MAX_POINTS samples per line (statistics use every sample). Y axes span robust percentiles of
what is drawn inside the window (ROBUST_PERCENTILES), so a start-up transient or a single
outlier does not flatten the signal; a clipped axis says so in its corner.

Layout is fixed margins (``subplots_adjust``), not constrained layout: it halves drawing time.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from .stats import chi2_interval, nis_stats

MAX_POINTS = 1500       # samples per plotted line (figures are 1200-1400 px wide)
DPI = 100               # figure widths 12-14 in -> 1200-1400 px
PNG_OPTIONS = {"compress_level": 1}  # zlib level 1: a third of the encoding time of the default 6, files ~1.5x
SIGMAS = 3.0            # band half-width in filter sigmas
EST = "tab:blue"
BAND_ALPHA = 0.22
TRUTH = {"color": "black", "linestyle": "--", "linewidth": 1.1, "label": "truth", "zorder": 5}
REJECTED = "tab:red"
BEFORE = "0.90"          # shading of the time before the evaluation window
ROBUST_PERCENTILES = (0.5, 99.5)
WHEELS = {"fl": "front left", "fr": "front right", "rl": "rear left", "rr": "rear right"}
WHEEL_COLORS = {"fl": "tab:blue", "fr": "tab:orange", "rl": "tab:green", "rr": "tab:purple"}
RC = {
    "font.size": 11, "axes.titlesize": 11, "axes.labelsize": 11, "legend.fontsize": 9,
    "axes.grid": True, "grid.alpha": 0.35, "grid.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False,
    "legend.framealpha": 0.85, "figure.facecolor": "white", "savefig.facecolor": "white",
    "axes.titley": 1.0,  # a fixed title position: matplotlib skips measuring every axis' tick labels for it
}


def make_figures(out: Path, estimate: dict, gnss: dict, innovations: dict,
                 truth: dict | None, window_s: float = 0.0) -> list[tuple[str, str, str]]:
    """Write the PNG files into out; returns (file name, heading, caption) of each one written,
    in PLOTS order (a drawing function may return (figure, facts): facts are appended to the caption).
    A figure without data (e.g. the error plot without truth) is not written, and
    an old file of that name is removed. A figure that fails is reported with a warning and comes
    back as (None, heading, error message), so that one bad plot does not cost the whole report.
    :class:`~state_observer.report.pool.FigurePool` draws the same figures in worker processes."""
    run = Run(estimate, gnss, innovations, truth, window_s)
    return [entry for entry in (write_figure(out, plot, run) for plot in PLOTS) if entry is not None]


def write_figure(out: Path, plot: tuple, run: "Run") -> tuple[str | None, str, str] | None:
    """Draw the :data:`PLOTS` entry ``plot`` (file name, heading, caption, drawing function) of ``run`` into
    ``out/<file name>``: (file name, heading, caption), None without its data (an old file of that name removed),
    (None, heading, error message) when it failed."""
    filename, heading, caption, draw_figure = plot
    path = Path(out) / filename
    path.unlink(missing_ok=True)
    try:
        with matplotlib.rc_context(RC):
            fig = draw_figure(run)
            fig, facts = fig if isinstance(fig, tuple) else (fig, "")
            if fig is not None:
                fig.savefig(path, dpi=DPI, pil_kwargs=PNG_OPTIONS)
    except Exception as exc:  # noqa: BLE001 - report it, keep the other figures
        warnings.warn(f"report: {filename} failed: {exc!r}", RuntimeWarning, stacklevel=2)
        path.unlink(missing_ok=True)
        return None, heading, f"This figure failed: {exc!r}"
    return (filename, heading, f"{caption} {facts}".strip()) if fig is not None else None


class Run:
    """The run's tables (as :func:`make_figures` takes them) as float arrays, with decimated views for plotting and the
    window mask (the samples from ``window_s``, s)."""

    def __init__(self, estimate, gnss, innovations, truth, window_s: float):
        self.est = _floats(estimate)
        self.truth = _floats(truth) if truth is not None else None
        self.gnss = _floats(gnss)
        self.inn = _floats(innovations)
        innovations = innovations or {}
        self.sensor_names = [str(n) for n in innovations.get("sensor_names", [])]
        self.dof = [] if innovations.get("dof") is None else list(innovations["dof"])
        self.t = self.est.get("t_s", np.empty(0))
        self.n = len(self.t)
        self.window_s = float(window_s)
        self.in_window = self.t >= self.window_s
        self.step = _stride(self.n)
        self.t_plot = self.t[::self.step]
        self.w_plot = self.in_window[::self.step]

    def has(self, name: str) -> bool:
        return name in self.est

    def e(self, name: str):
        """Decimated estimate column, None if absent."""
        return self.est[name][::self.step] if name in self.est else None

    def sigma_full(self, name: str):
        """1-sigma column of name (x_m -> x_sigma_m, friction -> friction_sigma, ...), every sample, or None."""
        parts = name.split("_")
        for i in range(1, len(parts) + 1):
            candidate = "_".join(parts[:i] + ["sigma"] + parts[i:])
            if candidate in self.est:
                return self.est[candidate]
        return None

    def sigma(self, name: str):
        """Decimated 1-sigma column of name, or None."""
        s = self.sigma_full(name)
        return None if s is None else s[::self.step]

    def tr(self, name: str):
        """(t, value) of the truth column, decimated, or None."""
        if self.truth is None or name not in self.truth or "t_s" not in self.truth:
            return None
        step = _stride(len(self.truth["t_s"]))
        return self.truth["t_s"][::step], self.truth[name][::step]

    def truth_at_estimate(self, name: str):
        """Truth column interpolated onto every estimate time (NaN outside the truth's span);
        angles (*_rad) come back unwrapped: compare them modulo 2 pi."""
        if self.truth is None or name not in self.truth or "t_s" not in self.truth \
                or len(self.truth["t_s"]) == 0:
            return None
        t, y = self.truth["t_s"], self.truth[name]
        order = np.argsort(t, kind="stable")
        y = y[order]
        if name.endswith("_rad"):  # angles: no interpolation across a +-pi wrap
            y = np.unwrap(y)
        return np.interp(self.t, t[order], y, left=np.nan, right=np.nan)

    def error(self, name: str):
        """Estimate - truth on every estimate time (angles wrapped to +-pi), None without truth."""
        ref = self.truth_at_estimate(name)
        if ref is None or name not in self.est:
            return None
        err = self.est[name] - ref
        return np.angle(np.exp(1j * err)) if name.endswith("_rad") else err

    def rmse(self, name: str, scale: float = 1.0):
        """RMS of estimate - truth over the evaluation window (scaled), None without truth."""
        err = self.error(name)
        return None if err is None else _rms(err[self.in_window] * scale)


def _floats(table) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float).ravel() for k, v in (table or {}).items()
            if k not in ("sensor_names", "dof")}


def _stride(n: int) -> int:
    return max(1, math.ceil(n / MAX_POINTS))


def _rms(err: np.ndarray):
    err = err[np.isfinite(err)]
    return float(np.sqrt(np.mean(err ** 2))) if len(err) else None


def within(err: np.ndarray, sigma: np.ndarray, k: float = SIGMAS):
    """Percentage of samples with |err| <= k sigma among those where both are finite (None if none)."""
    ok = np.isfinite(err) & np.isfinite(sigma)
    return 100.0 * float(np.mean(np.abs(err[ok]) <= k * sigma[ok])) if ok.any() else None


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.45")


def _legend(ax, loc: str = "upper right", **kwargs) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=loc, **kwargs)


def _time_axis(run: Run, ax) -> None:
    """x range of the run and the time before the evaluation window shaded."""
    if run.n > 1 and run.t[-1] > run.t[0]:
        ax.set_xlim(run.t[0], run.t[-1])
        if run.window_s > run.t[0]:
            ax.axvspan(run.t[0], min(run.window_s, run.t[-1]), color=BEFORE, linewidth=0, zorder=0)


def _robust_ylim(ax, arrays, mask=None, symmetric: bool = False) -> None:
    """Y range from ROBUST_PERCENTILES of the finite values of ``arrays`` (masked to the window where
    given and not empty), padded by 10 %; marks the axis when values of the whole run fall outside."""
    picked, full = [], []
    for a in arrays:
        if a is None:
            continue
        a = np.asarray(a, dtype=float)
        full.append(a[np.isfinite(a)])
        if mask is not None and len(mask) == len(a) and mask.any():
            a = a[mask]
        picked.append(a[np.isfinite(a)])
    values = np.concatenate(picked) if picked else np.empty(0)
    if len(values) < 2:
        return
    lo, hi = np.percentile(values, ROBUST_PERCENTILES)
    if symmetric:
        hi = max(abs(lo), abs(hi))
        lo = -hi
    pad = 0.1 * (hi - lo) if hi > lo else max(abs(hi) * 0.05, 1e-9)
    lo, hi = lo - pad, hi + pad
    every = np.concatenate(full)
    if every.min() < lo or every.max() > hi:
        ax.set_ylim(lo, hi)
        ax.text(0.995, 0.015, "y clipped", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=8, color="0.4")


def _series(run: Run, ax, name: str, scale: float = 1.0, label: str = "estimate",
            band: bool = True, robust: bool = True) -> float | None:
    """Estimate with ±3σ band and truth overlay on ax, robust y range (unless told not to); returns the
    RMSE vs truth (scaled) over the window."""
    y = run.e(name)
    if y is None or run.n == 0:
        _note(ax, f"no {name}" if y is None else "no data")
        return None
    marker = "o" if run.n == 1 else None
    sigma = run.sigma(name) if band else None
    lims = [y * scale]
    if sigma is not None and np.isfinite(sigma).any():
        low, high = (y - SIGMAS * sigma) * scale, (y + SIGMAS * sigma) * scale
        ax.fill_between(run.t_plot, low, high, color=EST, alpha=BAND_ALPHA, linewidth=0, label="±3σ")
        lims += [low, high]
    ax.plot(run.t_plot, y * scale, color=EST, linewidth=1.6, marker=marker, label=label, zorder=4)
    truth = run.tr(name)
    if truth is not None:
        ax.plot(truth[0], truth[1] * scale, marker="o" if len(truth[0]) == 1 else None, **TRUTH)
        ref = run.truth_at_estimate(name)
        if ref is not None:
            lims.append(ref[::run.step] * scale)
    if robust:
        _robust_ylim(ax, lims, run.w_plot)
    return run.rmse(name, scale)


def _with_rmse(text: str, rmse: float | None, unit: str) -> str:
    return text if rmse is None else f"{text} · RMSE vs truth {rmse:.3g} {unit}"


def _figure(width: float, height: float, rows: int, cols: int, top: float = 0.93, bottom: float = 0.08,
            left: float = 0.07, right: float = 0.98, hspace: float = 0.45, wspace: float = 0.18, **kwargs):
    """Figure and axes grid with fixed margins (fractions of the figure)."""
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(rows, cols, squeeze=False, **kwargs)
    fig.subplots_adjust(left=left, right=right, top=top, bottom=bottom, hspace=hspace, wspace=wspace)
    for ax in axes.ravel():  # fewer ticks than the default locator: each costs a few artists to draw
        ax.xaxis.set_major_locator(MaxNLocator(6, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_locator(MaxNLocator(5, steps=[1, 2, 2.5, 5, 10]))
    return fig, axes


# ---------------------------------------------------------------------------------------- plots

def _error_panel(run: Run, ax, err, sigma, scale: float, title: str, unit: str):
    """err (every sample) with its ±3σ band; title with window RMSE and share inside the band (returned, %)."""
    marker = "o" if run.n == 1 else None
    e_plot = err[::run.step] * scale
    lims = [e_plot]
    if sigma is not None and np.isfinite(sigma).any():
        bound = SIGMAS * sigma[::run.step] * scale
        ax.fill_between(run.t_plot, -bound, bound, color=EST, alpha=BAND_ALPHA, linewidth=0, label="±3σ (filter)")
        lims += [bound, -bound]
    ax.plot(run.t_plot, e_plot, color=EST, linewidth=1.2, marker=marker, label="estimate − truth", zorder=4)
    ax.axhline(0, color="0.5", linewidth=0.8)
    w = run.in_window
    rmse = _rms(err[w] * scale)
    share = within(err[w], sigma[w]) if sigma is not None else None
    if rmse is None:
        ax.set_title(f"{title} · no overlap with truth in the window", fontsize=10)
    else:
        text = f"{title} · RMSE {rmse:.3g} {unit}"
        ax.set_title(text + (f" · {share:.0f} % inside ±3σ" if share is not None else " · no σ"), fontsize=10)
    _robust_ylim(ax, lims, run.w_plot, symmetric=True)
    _time_axis(run, ax)
    return share


def _errors(run: Run):
    """Error against truth with the filter's ±3σ: pose and sideslip left, tire forces and mass right."""
    if run.truth is None or not (run.has("x_m") and run.has("y_m")):
        return None
    fig, axes = _figure(14, 11, 4, 2, top=0.95, bottom=0.06, left=0.06, right=0.99, hspace=0.42, wspace=0.16,
                        sharex=True)
    deg = 180 / math.pi
    inside = {}
    left = (("x_m", "x_sigma_m", 1.0, "East position error [m]", "m"),
            ("y_m", "y_sigma_m", 1.0, "North position error [m]", "m"),
            ("yaw_rad", "yaw_sigma_rad", deg, "Heading error [deg]", "deg"),
            ("sideslip_rad", "sideslip_sigma_rad", deg, "Sideslip error [deg]", "deg"))
    for ax, (name, sigma_name, scale, label, unit) in zip(axes[:, 0], left):
        err = run.error(name)
        if err is None:
            _note(ax, f"no {name} truth")
            continue
        inside[label.split(" error")[0].lower()] = _error_panel(run, ax, err, run.est.get(sigma_name), scale,
                                                                  label.split(" [")[0], unit)
        ax.set_ylabel(label.replace(" error", "").replace("East position", "east").replace("North position", "north")
                      .replace("Heading", "heading").replace("Sideslip", "sideslip β"))
    for ax, (axis, what) in zip(axes[:3, 1], (("fx", "longitudinal Fx"), ("fy", "lateral Fy"), ("fz", "normal Fz"))):
        inside[f"tire force {axis.capitalize()}"] = _force_errors(run, ax, axis, what)
    ax = axes[3, 1]
    err = run.error("mass_kg")
    if err is None:
        _note(ax, "no mass truth")
    else:
        inside["mass"] = _error_panel(run, ax, err, run.est.get("mass_sigma_kg"), 1.0, "Mass error", "kg")
        ax.set_ylabel("mass [kg]")
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    handles = {}
    for ax in axes.ravel():  # one legend, each entry once
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=len(handles), frameon=False)
    shares = [f"{name} {share:.0f} %" for name, share in inside.items() if share is not None]
    return fig, (f"Share of the error inside ±3σ in the window: {', '.join(shares)}." if shares else "")


def _force_errors(run: Run, ax, axis: str, what: str):
    """Tire-force errors of the four wheels (kN); band: the largest wheel's ±3σ at each instant. Returns the
    mean over the wheels of the share inside their own ±3σ in the window (%), or None."""
    errs, sigmas = {}, {}
    for wheel in WHEELS:
        err = run.error(f"{axis}_{wheel}_n")
        if err is not None:
            errs[wheel] = err * 1e-3
            s = run.est.get(f"{axis}_sigma_{wheel}_n")
            sigmas[wheel] = None if s is None else s * 1e-3
    if not errs:
        _note(ax, f"no {axis} truth")
        return None
    lims = []
    known = [s for s in sigmas.values() if s is not None]
    if known:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN instants
            envelope = SIGMAS * np.nanmax(np.vstack(known), axis=0)[::run.step]
        if np.isfinite(envelope).any():
            ax.fill_between(run.t_plot, -envelope, envelope, color="0.55", alpha=0.25, linewidth=0,
                            label="±3σ (largest wheel)")
            lims += [envelope, -envelope]
    for wheel, err in errs.items():
        e = err[::run.step]
        ax.plot(run.t_plot, e, color=WHEEL_COLORS[wheel], linewidth=0.9, label=wheel, zorder=4)
        lims.append(e)
    ax.axhline(0, color="0.5", linewidth=0.8)
    w = run.in_window
    rmse = _rms(np.concatenate([e[w] for e in errs.values()]))
    shares = [within(errs[k][w], sigmas[k][w]) for k in errs if sigmas[k] is not None]
    shares = [s for s in shares if s is not None]
    title = f"{what} error, four wheels" + ("" if rmse is None else f" · RMSE {rmse:.3g} kN")
    if shares:
        title += f" · {np.mean(shares):.0f} % inside own ±3σ"
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(f"{axis.upper()} [kN]")
    _robust_ylim(ax, lims, run.w_plot, symmetric=True)
    _time_axis(run, ax)
    return float(np.mean(shares)) if shares else None


def _trajectory(run: Run):
    if not (run.has("x_m") and run.has("y_m")):
        return None
    fig, axes = _figure(12, 9, 1, 1, top=0.95, bottom=0.07, left=0.08, right=0.98)
    ax = axes[0, 0]
    truth = run.tr("x_m"), run.tr("y_m")
    if truth[0] is not None and truth[1] is not None:
        ax.plot(truth[0][1], truth[1][1], marker="o" if len(truth[0][1]) == 1 else None, **TRUTH)
    gx, gy = run.gnss.get("x_m", np.empty(0)), run.gnss.get("y_m", np.empty(0))
    accepted = run.gnss.get("accepted", np.ones(len(gx))) > 0.5
    if len(gx):
        ax.plot(gx[accepted], gy[accepted], ".", color="tab:orange", markersize=4, alpha=0.8,
                label=f"GNSS fix ({accepted.sum()})", zorder=3)
    ax.plot(run.e("x_m"), run.e("y_m"), color=EST, linewidth=2.4, label="estimate", zorder=4)
    if run.has("x_smoothed_m") and run.has("y_smoothed_m"):
        ax.plot(run.e("x_smoothed_m"), run.e("y_smoothed_m"), color="tab:purple", linewidth=1.2, linestyle="--",
                label="smoothed offline (every fix)", zorder=5)
    if len(gx) and (~accepted).any():
        ax.plot(gx[~accepted], gy[~accepted], "x", color=REJECTED, markersize=7, markeredgewidth=1.6,
                label=f"GNSS fix rejected ({(~accepted).sum()})", zorder=6)
    x, y = run.est["x_m"], run.est["y_m"]
    if run.n:
        ax.plot(x[0], y[0], "o", color="tab:green", markersize=10, markeredgecolor="black",
                label="start", zorder=7)
        ax.plot(x[-1], y[-1], "s", color="white", markersize=9, markeredgecolor="black",
                markeredgewidth=1.5, label="end", zorder=7)
        length = float(np.nansum(np.hypot(np.diff(x), np.diff(y))))
        ax.set_title(f"Trajectory in local ENU · {length:.0f} m in {run.t[-1] - run.t[0]:.1f} s"
                     + ("" if len(gx) else " · no GNSS fixes"))
    else:
        _note(ax, "no estimates")
        ax.set_title("Trajectory in local ENU")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("east x [m]")
    ax.set_ylabel("north y [m]")
    _legend(ax, loc="best")
    return fig


def _states(run: Run):
    """Speed, yaw rate and sideslip (with its ±3σ band) against truth."""
    if not (run.has("speed_m_s") or run.has("yaw_rate_rad_s") or run.has("sideslip_rad")):
        return None
    fig, axes = _figure(12, 9, 3, 1, top=0.96, bottom=0.06, right=0.93, hspace=0.32, sharex=True)
    ax1, ax2, ax3 = axes[:, 0]
    rmse = _series(run, ax1, "speed_m_s")
    ax1.set_ylabel("speed [m/s]")
    ax1.secondary_yaxis("right", functions=(lambda v: v * 3.6, lambda v: v / 3.6)).set_ylabel("[km/h]")
    ax1.set_title(_with_rmse("Speed (horizontal, base_link)", rmse, "m/s"))
    rmse = _series(run, ax2, "yaw_rate_rad_s", scale=180 / math.pi)
    ax2.set_ylabel("yaw rate [deg/s]")
    ax2.set_title(_with_rmse("Yaw rate", rmse, "deg/s"))
    rmse = _series(run, ax3, "sideslip_rad", scale=180 / math.pi)
    ax3.axhline(0, color="0.5", linewidth=0.8)
    ax3.set_ylabel("sideslip β [deg]")
    title = _with_rmse("Body sideslip β = atan(v_y / v_x) at base_link", rmse, "deg")
    err, sigma = run.error("sideslip_rad"), run.sigma_full("sideslip_rad")
    if err is not None and sigma is not None:
        share = within(err[run.in_window], sigma[run.in_window])
        title += "" if share is None else f" · {share:.0f} % inside ±3σ"
    ax3.set_title(title)
    ax3.set_xlabel("time [s]")
    for ax in (ax1, ax2, ax3):
        _legend(ax)
        _time_axis(run, ax)
    return fig


SIDE_COLORS = {"l": "tab:blue", "r": "tab:orange"}  # tire-force figure: left and right wheel of an axle
TRUTH_COLORS = {"l": "#0b3d91", "r": "#8a4b08"}  # darker shades of those for the truth


def _tire_forces(run: Run):
    """Tire forces per axle (left and right wheel in one panel) with ±3σ bands and truth."""
    names = [f"{axis}_{wheel}_n" for axis in ("fx", "fy", "fz") for wheel in WHEELS]
    if not any(run.has(n) for n in names):
        return None
    fig, axes = _figure(14, 9.5, 3, 2, top=0.9, bottom=0.07, left=0.06, right=0.99, hspace=0.38, wspace=0.1,
                        sharex=True, sharey="row")
    for row, (axis, what) in enumerate((("fx", "longitudinal"), ("fy", "lateral"), ("fz", "normal"))):
        row_values = []
        for col, axle in enumerate(("front", "rear")):
            ax = axes[row, col]
            texts = []
            for wheel in (axle[0] + "l", axle[0] + "r"):
                name = f"{axis}_{wheel}_n"
                if not run.has(name):
                    continue
                y, sigma = run.e(name) * 1e-3, run.sigma(name)
                color, side = SIDE_COLORS[wheel[1]], "left" if wheel[1] == "l" else "right"
                row_values.append(y)
                if sigma is not None and np.isfinite(sigma).any():
                    low, high = y - SIGMAS * sigma * 1e-3, y + SIGMAS * sigma * 1e-3
                    ax.fill_between(run.t_plot, low, high, color=color, alpha=0.18, linewidth=0)
                    row_values += [low, high]
                ax.plot(run.t_plot, y, color=color, linewidth=1.4, label=f"{side} wheel estimate, ±3σ shaded", zorder=4)
                truth = run.tr(name)
                if truth is not None:
                    ax.plot(truth[0], truth[1] * 1e-3, color=TRUTH_COLORS[wheel[1]], linestyle="--", linewidth=1.0,
                            label=f"{side} wheel truth", zorder=5)
                    row_values.append(run.truth_at_estimate(name)[::run.step] * 1e-3)
                rmse = run.rmse(name, 1e-3)
                texts.append(wheel if rmse is None else f"{wheel} {rmse:.3g}")
            title = f"{axis.upper()} {axle}"
            if any(" " in t for t in texts):
                title += " · RMSE " + ", ".join(texts) + " kN"
            ax.set_title(title, fontsize=10)
            if col == 0:
                ax.set_ylabel(f"{axis.upper()} {what} [kN]")
            if row == 2:
                ax.set_xlabel("time [s]")
            _time_axis(run, ax)
        _robust_ylim(axes[row, 0], row_values, run.w_plot)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", ncol=2, frameon=False)
    fig.suptitle("Tire forces per axle, tire frame (x along wheel heading, y left, z road normal)", x=0.06, y=0.975,
                 ha="left")
    return fig


def _parameters(run: Run):
    if not (run.has("mass_kg") or run.has("friction")):
        return None
    fig, axes = _figure(12, 6.5, 2, 1, top=0.94, bottom=0.09, hspace=0.3, sharex=True)
    axes = axes[:, 0]
    for ax, name, label, unit in ((axes[0], "mass_kg", "vehicle mass [kg]", "kg"),
                                  (axes[1], "friction", "tire-road friction μ [-]", "")):
        rmse = _series(run, ax, name)
        ax.set_ylabel(label)
        title = label.split(" [")[0].capitalize()
        unit = f" {unit}" if unit else ""
        if run.has(name) and run.n:
            sigma = run.sigma(name)
            title += f" · final {run.est[name][-1]:.4g}{unit}"
            if sigma is not None and np.isfinite(sigma[-1]):
                title += f" ± {SIGMAS * sigma[-1]:.3g} (3σ)"
            truth = run.tr(name)
            if truth is not None and len(truth[1]):
                title += f" · truth {truth[1][-1]:.4g}{unit}"
        ax.set_title(title if rmse is None else f"{title} · RMSE {rmse:.3g}{unit}")
        _legend(ax)
        _time_axis(run, ax)
    axes[1].set_xlabel("time [s]")
    return fig


def _innovations(run: Run):
    index = run.inn.get("sensor_index", np.empty(0)).astype(int)
    names = list(run.sensor_names)
    for i in range(len(names), int(index.max()) + 1 if len(index) else 0):
        names.append(f"sensor {i}")
    if not names:
        return None
    nis_all = run.inn.get("nis", np.full(len(index), np.nan))
    t_all = run.inn.get("t_s", np.full(len(index), np.nan))
    accepted_all = run.inn.get("accepted", np.ones(len(index))) > 0.5
    height = 0.9 + 2.0 * len(names)
    fig, axes = _figure(12, height, len(names), 1, top=1 - 0.35 / height, bottom=0.75 / height, hspace=0.55,
                        sharex=True)
    axes = axes[:, 0]
    for k, (ax, name) in enumerate(zip(axes, names)):
        dof = run.dof[k] if k < len(run.dof) and run.dof[k] else None
        rows = (index == k) & np.isfinite(nis_all)
        t, nis, accepted = t_all[rows], nis_all[rows], accepted_all[rows]
        title = f"{name}" + (f" (dof {dof:g})" if dof else "")
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())  # minor ticks of a log axis cost a third of this figure
        if dof:
            low, high = chi2_interval(dof)
            ax.axhspan(low, high, color="tab:green", alpha=0.15, linewidth=0, label="95 % χ² interval")
            ax.axhline(dof, color="tab:green", linewidth=1.2, label="expected mean = dof")
        if len(nis) == 0:
            _note(ax, "no updates")
            ax.set_title(title + " · no updates")
            ax.set_ylabel("NIS [-]")
            continue
        shown = np.maximum(nis, 1e-6)  # log axis
        ok = np.flatnonzero(accepted)
        ok_plot = ok[::_stride(len(ok))]
        ax.plot(t[ok_plot], shown[ok_plot], ".", color=EST, markersize=3, alpha=0.7,
                label="NIS, accepted", zorder=3)
        if (~accepted).any():
            ax.plot(t[~accepted], shown[~accepted], "x", color=REJECTED, markersize=5,
                    label="NIS, rejected", zorder=4)
        window = int(np.clip(accepted.sum() // 40, 5, 500))  # accepted updates only
        if accepted.sum() >= 2 * window:
            mean = np.convolve(nis[accepted], np.ones(window) / window, mode="valid")
            tm = t[accepted][window // 2: window // 2 + len(mean)]
            step = _stride(len(mean))
            ax.plot(tm[::step], np.maximum(mean, 1e-6)[::step],
                    color="black", linewidth=1.2, label="running mean of accepted", zorder=5)
        w = t >= run.window_s
        stats = nis_stats(nis[w], accepted[w], dof)
        if stats["updates"]:
            title += (f" · in the window: {stats['updates']} updates, {stats['rejected']} rejected"
                      f" · mean NIS {stats['mean_nis']:.3g}")
            if dof and stats["inside_95_percent"] is not None:
                title += f" · {stats['inside_95_percent']:.1f} % inside 95 % interval"
        else:
            title += " · no updates in the window"
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("NIS [-]")
    axes[-1].set_xlabel("time [s]")
    for ax in axes:
        _time_axis(run, ax)
    handles = {}
    for ax in axes:  # one legend for all sensors, each entry once
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=6, frameon=False)
    return fig


# (file name, heading, one-line caption, drawing function); order of the report.
PLOTS = (
    ("errors.png", "Error against truth, with the filter's ±3σ bounds",
     "Estimate minus truth (blue) against ±3σ from the filter's covariance (shaded): a consistent "
     "filter keeps about 99 % of the error inside; errors mostly outside mean the covariance is "
     "overconfident, a band far wider than the error that it is too conservative. Tire forces: the "
     "four wheels' errors, band of the largest wheel's σ.", _errors),
    ("trajectory.png", "Trajectory",
     "Estimated path over the GNSS fixes (truth dashed): look for drift between fixes and for "
     "red ✕, fixes the innovation gate rejected.", _trajectory),
    ("states.png", "Speed, yaw rate and sideslip",
     "Speed and yaw rate are well observed by the wheel speeds and the gyroscope: the estimate should lie on the "
     "truth. Sideslip is the hardest state to observe: it should follow the truth in corners, inside its ±3σ band "
     "(from the filter's base_link velocity covariance, to first order).", _states),
    ("tire_forces.png", "Tire forces",
     "Fz shows load transfer in braking and cornering, Fx/Fy follow the manoeuvre; a consistent "
     "filter's ±3σ band covers the truth nearly all the time.", _tire_forces),
    ("parameters.png", "Mass and friction",
     "Parameters converge only with excitation (mass: acceleration, friction: slip near the grip "
     "limit); a band that stays wide means not observable yet, not wrong.", _parameters),
    ("innovations.png", "Innovation consistency (NIS)",
     "About 95 % of points inside the green χ² interval and a running mean near dof mean a "
     "consistent filter (accepted updates; red ✕ rejected by the gate); above: overconfident, "
     "below: too conservative.",
     _innovations),
)


def draw(filename: str, run: Run):
    """The figure of the :data:`PLOTS` entry ``filename`` for ``run``, not written (None without its data): to show or
    adjust one figure."""
    fig = next(draw_figure for name, _, _, draw_figure in PLOTS if name == filename)(run)
    return fig[0] if isinstance(fig, tuple) else fig

"""PNG figures of an observer run (matplotlib Figure objects, Agg, no pyplot state).

Estimate solid blue with its 2-sigma band shaded, truth dashed black. Long runs are decimated
by a constant stride to at most MAX_POINTS samples per line; errors and statistics in the
titles use every sample.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from scipy.stats import chi2

MAX_POINTS = 3000       # samples per plotted line
DPI = 100               # figure widths 12-14 in -> 1200-1400 px
EST = "tab:blue"
BAND_ALPHA = 0.22
TRUTH = {"color": "black", "linestyle": "--", "linewidth": 1.1, "label": "truth", "zorder": 5}
REJECTED = "tab:red"
WHEELS = {"fl": "front left", "fr": "front right", "rl": "rear left", "rr": "rear right"}
RC = {
    "font.size": 11, "axes.titlesize": 11, "axes.labelsize": 11, "legend.fontsize": 9,
    "axes.grid": True, "grid.alpha": 0.35, "grid.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False,
    "legend.framealpha": 0.85, "figure.facecolor": "white", "savefig.facecolor": "white",
}


def make_figures(out: Path, estimate: dict, gnss: dict, innovations: dict,
                 truth: dict | None) -> list[tuple[str, str, str]]:
    """Write the PNG files into out; returns (file name, heading, caption) of each one written.
    A figure without data (e.g. the error plot without truth) is not written, and an old file
    of that name is removed. A figure that fails is reported with a warning and comes back as
    (None, heading, error message), so that one bad plot does not cost the whole report."""
    run = _Run(estimate, gnss, innovations, truth)
    written = []
    with matplotlib.rc_context(RC):
        for filename, heading, caption, draw in PLOTS:
            path = Path(out) / filename
            path.unlink(missing_ok=True)
            try:
                fig = draw(run)
                if fig is not None:
                    fig.savefig(path, dpi=DPI)
            except Exception as exc:  # noqa: BLE001 - report it, keep the other figures
                warnings.warn(f"report: {filename} failed: {exc!r}", RuntimeWarning, stacklevel=2)
                path.unlink(missing_ok=True)
                written.append((None, heading, f"This figure failed: {exc!r}"))
                continue
            if fig is not None:
                written.append((filename, heading, caption))
    return written


class _Run:
    """The run's columns as float arrays, with decimated views for plotting."""

    def __init__(self, estimate, gnss, innovations, truth):
        self.est = _floats(estimate)
        self.truth = _floats(truth) if truth is not None else None
        self.gnss = _floats(gnss)
        self.inn = _floats(innovations)
        innovations = innovations or {}
        self.sensor_names = [str(n) for n in innovations.get("sensor_names", [])]
        self.dof = [] if innovations.get("dof") is None else list(innovations["dof"])
        self.t = self.est.get("t_s", np.empty(0))
        self.n = len(self.t)
        self.step = _stride(self.n)
        self.t_plot = self.t[::self.step]

    def has(self, name: str) -> bool:
        return name in self.est

    def e(self, name: str):
        """Decimated estimate column, None if absent."""
        return self.est[name][::self.step] if name in self.est else None

    def sigma(self, name: str):
        """Decimated 1-sigma column of name (x_m -> x_sigma_m, friction -> friction_sigma, ...)."""
        parts = name.split("_")
        for i in range(1, len(parts) + 1):
            candidate = "_".join(parts[:i] + ["sigma"] + parts[i:])
            if candidate in self.est:
                return self.est[candidate][::self.step]
        return None

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

    def rmse(self, name: str, scale: float = 1.0):
        """RMS of estimate - truth over all estimate times (scaled), None without truth."""
        ref = self.truth_at_estimate(name)
        if ref is None or name not in self.est:
            return None
        err = self.est[name] - ref
        if name.endswith("_rad"):
            err = np.angle(np.exp(1j * err))
        return _rms(err * scale)


def _floats(table) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float).ravel() for k, v in (table or {}).items()
            if k not in ("sensor_names", "dof")}


def _stride(n: int) -> int:
    return max(1, math.ceil(n / MAX_POINTS))


def _rms(err: np.ndarray):
    err = err[np.isfinite(err)]
    return float(np.sqrt(np.mean(err ** 2))) if len(err) else None


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.45")


def _legend(ax, loc: str = "upper right", **kwargs) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=loc, **kwargs)


def _time_axis(run: _Run, ax) -> None:
    if run.n > 1 and run.t[-1] > run.t[0]:
        ax.set_xlim(run.t[0], run.t[-1])


def _series(run: _Run, ax, name: str, scale: float = 1.0, label: str = "estimate",
            band: bool = True) -> float | None:
    """Estimate with 2-sigma band and truth overlay on ax; returns the RMSE vs truth (scaled)."""
    y = run.e(name)
    if y is None or run.n == 0:
        _note(ax, f"no {name}" if y is None else "no data")
        return None
    marker = "o" if run.n == 1 else None
    sigma = run.sigma(name) if band else None
    if sigma is not None and np.isfinite(sigma).any():
        ax.fill_between(run.t_plot, (y - 2 * sigma) * scale, (y + 2 * sigma) * scale,
                        color=EST, alpha=BAND_ALPHA, linewidth=0, label="±2σ")
    ax.plot(run.t_plot, y * scale, color=EST, linewidth=1.6, marker=marker, label=label, zorder=4)
    truth = run.tr(name)
    if truth is not None:
        ax.plot(truth[0], truth[1] * scale, marker="o" if len(truth[0]) == 1 else None, **TRUTH)
    return run.rmse(name, scale)


def _with_rmse(text: str, rmse: float | None, unit: str) -> str:
    return text if rmse is None else f"{text} · RMSE vs truth {rmse:.3g} {unit}"


# ---------------------------------------------------------------------------------------- plots

def _trajectory(run: _Run):
    if not (run.has("x_m") and run.has("y_m")):
        return None
    fig = Figure(figsize=(12, 9), layout="constrained")
    ax = fig.add_subplot()
    truth = run.tr("x_m"), run.tr("y_m")
    if truth[0] is not None and truth[1] is not None:
        ax.plot(truth[0][1], truth[1][1], marker="o" if len(truth[0][1]) == 1 else None, **TRUTH)
    gx, gy = run.gnss.get("x_m", np.empty(0)), run.gnss.get("y_m", np.empty(0))
    accepted = run.gnss.get("accepted", np.ones(len(gx))) > 0.5
    if len(gx):
        ax.plot(gx[accepted], gy[accepted], ".", color="tab:orange", markersize=4, alpha=0.8,
                label=f"GNSS fix ({accepted.sum()})", zorder=3)
    ax.plot(run.e("x_m"), run.e("y_m"), color=EST, linewidth=2.4, label="estimate", zorder=4)
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


def _speed_yaw_rate(run: _Run):
    if not (run.has("speed_m_s") or run.has("yaw_rate_rad_s")):
        return None
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    rmse = _series(run, ax1, "speed_m_s")
    ax1.set_ylabel("speed [m/s]")
    ax1.secondary_yaxis("right", functions=(lambda v: v * 3.6, lambda v: v / 3.6)).set_ylabel("[km/h]")
    ax1.set_title(_with_rmse("Speed (horizontal, base_link)", rmse, "m/s"))
    rmse = _series(run, ax2, "yaw_rate_rad_s", scale=180 / math.pi)
    ax2.set_ylabel("yaw rate [deg/s]")
    ax2.set_title(_with_rmse("Yaw rate", rmse, "deg/s"))
    ax2.set_xlabel("time [s]")
    for ax in (ax1, ax2):
        _legend(ax)
        _time_axis(run, ax)
    return fig


def _sideslip(run: _Run):
    if not run.has("sideslip_rad"):
        return None
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    ax = fig.add_subplot()
    rmse = _series(run, ax, "sideslip_rad", scale=180 / math.pi)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set_ylabel("sideslip β [deg]")
    ax.set_xlabel("time [s]")
    ax.set_title(_with_rmse("Body sideslip angle β = atan2(v_y, v_x) at base_link", rmse, "deg"))
    _legend(ax)
    _time_axis(run, ax)
    return fig


def _tire_forces(run: _Run):
    names = [f"{axis}_{wheel}_n" for axis in ("fx", "fy", "fz") for wheel in WHEELS]
    if not any(run.has(n) for n in names):
        return None
    fig = Figure(figsize=(14, 9.5), layout="constrained")
    axes = fig.subplots(3, 4, sharex=True, sharey="row")
    for row, (axis, what) in enumerate((("fx", "longitudinal"), ("fy", "lateral"), ("fz", "normal"))):
        for col, (wheel, wheel_name) in enumerate(WHEELS.items()):
            ax = axes[row, col]
            rmse = _series(run, ax, f"{axis}_{wheel}_n", scale=1e-3)
            title = f"{axis.upper()} {wheel}" if row else f"{wheel_name}\n{axis.upper()} {wheel}"
            ax.set_title(title if rmse is None else f"{title} · RMSE {rmse:.3g} kN", fontsize=10)
            if col == 0:
                ax.set_ylabel(f"{axis.upper()} {what} [kN]")
            if row == 2:
                ax.set_xlabel("time [s]")
            _time_axis(run, ax)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside upper right", ncol=3)
    fig.suptitle("Tire forces, tire frame (x along wheel heading, y left, z road normal)")
    return fig


def _parameters(run: _Run):
    if not (run.has("mass_kg") or run.has("friction")):
        return None
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
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
                title += f" ± {2 * sigma[-1]:.3g} (2σ)"
            truth = run.tr(name)
            if truth is not None and len(truth[1]):
                title += f" · truth {truth[1][-1]:.4g}{unit}"
        ax.set_title(title if rmse is None else f"{title} · RMSE {rmse:.3g}{unit}")
        _legend(ax)
        _time_axis(run, ax)
    axes[1].set_xlabel("time [s]")
    return fig


def _innovations(run: _Run):
    index = run.inn.get("sensor_index", np.empty(0)).astype(int)
    names = list(run.sensor_names)
    for i in range(len(names), int(index.max()) + 1 if len(index) else 0):
        names.append(f"sensor {i}")
    if not names:
        return None
    nis_all = run.inn.get("nis", np.full(len(index), np.nan))
    t_all = run.inn.get("t_s", np.full(len(index), np.nan))
    accepted_all = run.inn.get("accepted", np.ones(len(index))) > 0.5
    fig = Figure(figsize=(12, 0.9 + 2.3 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for k, (ax, name) in enumerate(zip(axes, names)):
        dof = run.dof[k] if k < len(run.dof) and run.dof[k] else None
        rows = (index == k) & np.isfinite(nis_all)
        t, nis, accepted = t_all[rows], nis_all[rows], accepted_all[rows]
        title = f"{name}" + (f" (dof {dof:g})" if dof else "")
        ax.set_yscale("log")
        if dof:
            low, high = chi2.ppf([0.025, 0.975], dof)
            ax.axhspan(low, high, color="tab:green", alpha=0.15, linewidth=0, label="95 % χ² interval")
            ax.axhline(dof, color="tab:green", linewidth=1.2, label="expected mean = dof")
        if len(nis) == 0:
            _note(ax, "no updates")
            ax.set_title(title + " · no updates")
            ax.set_ylabel("NIS [-]")
            continue
        shown = np.maximum(nis, 1e-6)  # log axis
        ax.plot(t[accepted], shown[accepted], ".", color=EST, markersize=3, alpha=0.7,
                label="NIS, accepted", zorder=3)
        if (~accepted).any():
            ax.plot(t[~accepted], shown[~accepted], "x", color=REJECTED, markersize=5,
                    label="NIS, rejected", zorder=4)
        window = int(np.clip(accepted.sum() // 40, 5, 500))  # accepted updates only
        if accepted.sum() >= 2 * window:
            mean = np.convolve(nis[accepted], np.ones(window) / window, mode="valid")
            ax.plot(t[accepted][window // 2: window // 2 + len(mean)], np.maximum(mean, 1e-6),
                    color="black", linewidth=1.2, label="running mean of accepted", zorder=5)
        stats = nis_stats(nis, accepted, dof)
        title += (f" · {stats['updates']} updates, {stats['rejected']} rejected"
                  f" · accepted: mean NIS {stats['mean_nis']:.3g}")
        if dof:
            title += f" · {stats['inside_95_percent']:.1f} % inside 95 % interval"
        ax.set_title(title)
        ax.set_ylabel("NIS [-]")
    axes[-1].set_xlabel("time [s]")
    for ax in axes:
        _time_axis(run, ax)
    handles = {}
    for ax in axes:  # one legend for all sensors, each entry once
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=6)
    return fig


def nis_stats(nis: np.ndarray, accepted: np.ndarray, dof) -> dict:
    """Consistency figures of one sensor's NIS values: updates, rejected, and over the accepted
    updates the mean NIS and the percentage inside the two-sided 95 % chi-square interval of dof
    (None without dof)."""
    nis = np.asarray(nis, dtype=float)
    accepted = np.asarray(accepted) > 0.5
    finite = np.isfinite(nis) & accepted
    inside = None
    if dof and finite.any():
        low, high = chi2.ppf([0.025, 0.975], dof)
        inside = 100 * float(np.mean((nis[finite] >= low) & (nis[finite] <= high)))
    return {"updates": int(len(nis)), "rejected": int((~accepted).sum()),
            "mean_nis": float(np.mean(nis[finite])) if finite.any() else float("nan"),
            "inside_95_percent": inside}


def _errors(run: _Run):
    ref_x, ref_y = run.truth_at_estimate("x_m"), run.truth_at_estimate("y_m")
    if ref_x is None or ref_y is None or not (run.has("x_m") and run.has("y_m")):
        return None
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    err = np.hypot(run.est["x_m"] - ref_x, run.est["y_m"] - ref_y)
    if "x_sigma_m" in run.est and "y_sigma_m" in run.est:
        bound = 2 * np.hypot(run.est["x_sigma_m"], run.est["y_sigma_m"])
        ax1.fill_between(run.t_plot, 0, bound[::run.step], color=EST, alpha=BAND_ALPHA, linewidth=0,
                         label="2DRMS bound 2·√(σx² + σy²)")
    else:
        bound = None
    marker = "o" if run.n == 1 else None
    ax1.plot(run.t_plot, err[::run.step], color=EST, linewidth=1.3, marker=marker,
             label="horizontal error |p̂ − p|")
    title = "Horizontal position error vs truth"
    finite = np.isfinite(err)
    if finite.any():
        title += f" · RMSE {_rms(err):.3g} m · max {np.max(err[finite]):.3g} m"
        if bound is not None:
            title += f" · {100 * np.mean(err[finite] <= bound[finite]):.1f} % within bound"
    else:
        _note(ax1, "no overlap with truth")
    ax1.set_title(title)
    ax1.set_ylabel("error [m]")
    ax1.set_ylim(bottom=0)
    ref_yaw = run.truth_at_estimate("yaw_rad")
    if ref_yaw is not None and run.has("yaw_rad"):
        yaw_err = np.degrees(np.angle(np.exp(1j * (run.est["yaw_rad"] - ref_yaw))))
        sigma = run.sigma("yaw_rad")
        if sigma is not None:
            ax2.fill_between(run.t_plot, -2 * np.degrees(sigma), 2 * np.degrees(sigma), color=EST,
                             alpha=BAND_ALPHA, linewidth=0, label="±2σ")
        ax2.plot(run.t_plot, yaw_err[::run.step], color=EST, linewidth=1.3, marker=marker,
                 label="yaw error ψ̂ − ψ")
        ax2.axhline(0, color="0.5", linewidth=0.8)
        rmse = _rms(yaw_err)
        ax2.set_title("Yaw error vs truth" + ("" if rmse is None else f" · RMSE {rmse:.3g} deg"))
    else:
        _note(ax2, "no yaw truth")
    ax2.set_ylabel("yaw error [deg]")
    ax2.set_xlabel("time [s]")
    for ax in (ax1, ax2):
        _legend(ax)
        _time_axis(run, ax)
    return fig


# (file name, heading, one-line caption, drawing function); order of the report.
PLOTS = (
    ("trajectory.png", "Trajectory",
     "Estimated path over the GNSS fixes (truth dashed): look for drift between fixes and for "
     "red ✕, fixes the innovation gate rejected.", _trajectory),
    ("speed_yaw_rate.png", "Speed and yaw rate",
     "Well observed by wheel speeds and gyro: the estimate should lie on the truth (right axis: km/h).",
     _speed_yaw_rate),
    ("sideslip.png", "Sideslip",
     "The hardest state to observe: it should follow the truth in corners, with the error inside "
     "the 2σ band where one is given.", _sideslip),
    ("tire_forces.png", "Tire forces",
     "Fz shows load transfer in braking and cornering, Fx/Fy follow the manoeuvre; a consistent "
     "filter's 2σ band covers the truth about 95 % of the time.", _tire_forces),
    ("parameters.png", "Mass and friction",
     "Parameters converge only with excitation (mass: acceleration, friction: slip near the grip "
     "limit); a band that stays wide means not observable yet, not wrong.", _parameters),
    ("innovations.png", "Innovation consistency (NIS)",
     "About 95 % of points inside the green χ² interval and a running mean near dof mean a "
     "consistent filter (accepted updates; red ✕ rejected by the gate); above: overconfident, "
     "below: too conservative.",
     _innovations),
    ("position_error.png", "Error vs truth",
     "Horizontal error against the 2DRMS bound and yaw error against ±2σ: errors mostly outside "
     "the bound mean the covariance is overconfident.", _errors),
)

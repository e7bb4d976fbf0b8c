"""Run report (state_observer.report): CSV files, PNG figures and report.html on real files."""
from __future__ import annotations

import html
import json
import os
import re
import signal

import numpy as np
import pytest
from matplotlib.image import imread

from state_observer.report import _read_run as read_run  # the reader behind write_report_from_csv
from state_observer.report import write_report_from_csv, write_run

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WHEELS = ("fl", "fr", "rl", "rr")
SENSORS = ["imu", "wheel_speeds", "gnss_fix", "gnss_velocity"]  # gnss_velocity: no updates
DOF = [3, 4, 2, 2]


def _truth(t: np.ndarray) -> dict:
    """Weaving drive: speed 10 +- 3 m/s, yaw rate +-0.25 rad/s, forces from a point-mass model."""
    mass, g, track, wheelbase, cg_height = 1500.0, 9.81, 1.6, 2.7, 0.55
    fine = np.linspace(0.0, max(float(t.max(initial=0.0)), 1e-3), 20001)
    speed, yaw_rate = 10 + 3 * np.sin(0.12 * fine), 0.25 * np.sin(0.21 * fine)
    yaw = np.concatenate([[0], np.cumsum((yaw_rate[1:] + yaw_rate[:-1]) / 2 * np.diff(fine))])
    dx, dy = speed * np.cos(yaw), speed * np.sin(yaw)
    x = np.concatenate([[0], np.cumsum((dx[1:] + dx[:-1]) / 2 * np.diff(fine))])
    y = np.concatenate([[0], np.cumsum((dy[1:] + dy[:-1]) / 2 * np.diff(fine))])
    at = {name: np.interp(t, fine, v) for name, v in
          (("x_m", x), ("y_m", y), ("yaw", yaw), ("speed", speed), ("yaw_rate", yaw_rate))}
    ax, ay = 0.36 * np.cos(0.12 * t), at["speed"] * at["yaw_rate"]
    d = {"t_s": t, "x_m": at["x_m"], "y_m": at["y_m"], "z_m": 0.01 * np.sin(0.05 * t),
         "roll_rad": -0.006 * ay, "pitch_rad": 0.01 * ax, "yaw_rad": np.angle(np.exp(1j * at["yaw"])),
         "speed_m_s": at["speed"], "yaw_rate_rad_s": at["yaw_rate"],
         "sideslip_rad": 0.3 * at["yaw_rate"] - 0.004 * at["speed"] * at["yaw_rate"]}
    for w in WHEELS:
        d[f"fx_{w}_n"] = mass * ax / 4
    for w in WHEELS:
        d[f"fy_{w}_n"] = mass * ay / 4 * (1.1 if w[0] == "f" else 0.9)
    for w in WHEELS:
        d[f"fz_{w}_n"] = (mass * g / 4 - (1 if w[0] == "f" else -1) * mass * ax * cg_height / wheelbase / 2
                          - (1 if w[1] == "l" else -1) * mass * ay * cg_height / track / 2)
    d["mass_kg"] = np.full_like(t, mass)
    d["friction"] = np.full_like(t, 0.9)
    return d


def synthetic_run(n: int = 2500, rate_hz: float = 250.0, gnss: bool = True, seed: int = 1):
    """(estimate, gnss, innovations, truth, summary) of a synthetic weaving drive with n estimates;
    truth on its own time grid (125 Hz, shifted by half an estimate step)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate_hz
    t_truth = np.arange(0.5 / rate_hz, t[-1] + 1e-9, 2 / rate_hz) if n > 1 else t.copy()
    truth = _truth(t_truth)
    estimate = _truth(t)
    smooth = lambda scale, w: scale * np.sin(w * t + rng.uniform(0, 6))  # noqa: E731
    noise = lambda scale: scale * rng.standard_normal(n)  # noqa: E731
    estimate["x_m"] += smooth(0.3, 0.4) + noise(0.01)
    estimate["y_m"] += smooth(0.3, 0.3) + noise(0.01)
    estimate["yaw_rad"] = np.angle(np.exp(1j * (estimate["yaw_rad"] + smooth(0.005, 0.2))))
    estimate["speed_m_s"] += noise(0.02)
    estimate["yaw_rate_rad_s"] += noise(0.002)
    estimate["sideslip_rad"] += smooth(0.004, 0.7) + noise(0.001)
    for name in [k for k in estimate if k[:2] in ("fx", "fy", "fz")]:
        estimate[name] += smooth(80, 0.5) + noise(30)
    estimate["mass_kg"] += -90 * np.exp(-t / 6) + noise(0.5)
    estimate["friction"] += -0.12 * np.exp(-t / 10) + noise(0.002)
    for name in ("x", "y"):
        estimate[f"{name}_sigma_m"] = 0.25 + 0.5 * np.exp(-t / 3)
    estimate["yaw_sigma_rad"] = np.full(n, 0.004)
    for axis in ("fx", "fy", "fz"):
        for w in WHEELS:
            estimate[f"{axis}_sigma_{w}_n"] = np.full(n, 120.0)
    estimate["mass_sigma_kg"] = 20 + 100 * np.exp(-t / 6)
    estimate["friction_sigma"] = 0.02 + 0.1 * np.exp(-t / 10)

    t_gnss = np.arange(0, t[-1], 0.1) if gnss and n > 1 else np.empty(0)
    accepted = np.ones(len(t_gnss))
    accepted[5::17] = 0.0
    gnss_fix = {"t_s": t_gnss,
                "x_m": np.interp(t_gnss, t_truth, truth["x_m"]) + 0.4 * rng.standard_normal(len(t_gnss))
                + 3.0 * (accepted == 0),
                "y_m": np.interp(t_gnss, t_truth, truth["y_m"]) + 0.4 * rng.standard_normal(len(t_gnss)),
                "accepted": accepted}

    t_inn = [t[::5], t[::10], t_gnss]
    index = np.concatenate([np.full(len(ti), k) for k, ti in enumerate(t_inn)])
    nis = rng.chisquare(np.array(DOF)[index]) * 1.1
    inn_accepted = np.ones(len(index))
    gnss_rows = np.flatnonzero(index == 2)
    inn_accepted[gnss_rows] = accepted
    nis[gnss_rows[accepted == 0]] = 40.0
    innovations = {"t_s": np.concatenate(t_inn), "sensor_index": index.astype(float), "nis": nis,
                   "accepted": inn_accepted, "sensor_names": list(SENSORS), "dof": list(DOF)}
    summary = {"input": {"bag": "/data/run<1>.mcap", "duration_s": float(t[-1]), "messages": 123456},
               "accuracy against truth": {"position_rmse_m": 0.2345678, "sideslip_rmse_deg": 0.41},
               "diagnostics": {"gnss_fix rejected": int((accepted == 0).sum()), "healthy": True,
                               "solver": {"iterations_mean": np.float64(2.25)}},
               "timing": {"rtf": 17.5, "step_p99_us": np.float32(812.5)},
               "observer": "errorekf"}
    return estimate, gnss_fix, innovations, truth, summary


def _check_report(run_dir):
    """report.html exists, references every PNG in run_dir, each one a readable PNG; returns the html."""
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    pngs = sorted(p.name for p in run_dir.glob("*.png"))
    referenced = sorted(set(re.findall(r'<img src="([^"]+\.png)"', page)))
    assert pngs and referenced == pngs
    for name in pngs:
        data = (run_dir / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
        image = imread(run_dir / name)
        assert image.ndim == 3 and 900 <= image.shape[1] <= 1500 and image.shape[0] > 200
        assert image.std() > 0.01  # not a blank image
    return page


def _assert_columns_equal(actual: dict, expected: dict):
    assert list(actual) == list(expected)
    for name, values in expected.items():
        np.testing.assert_allclose(actual[name], np.asarray(values, dtype=float), rtol=5e-9,
                                   atol=1e-12, err_msg=name)


def test_full_run_report_and_csv_round_trip(tmp_path):
    estimate, gnss, innovations, truth, summary = synthetic_run()
    path = write_run(tmp_path / "run", estimate, gnss, innovations, truth, summary, title="Circle <test>")
    run_dir = tmp_path / "run"
    assert path == run_dir / "report.html"
    page = _check_report(run_dir)
    expected_pngs = {"errors.png", "trajectory.png", "states.png", "tire_forces.png", "parameters.png",
                     "innovations.png"}
    assert {p.name for p in run_dir.glob("*.png")} == expected_pngs
    # title escaped, summary tables and their values present
    assert "<title>Circle &lt;test&gt;</title>" in page and "Circle <test>" not in page
    for key in ("input", "diagnostics", "timing"):  # details; the accuracy is in the verdict
        assert f"<caption>{html.escape(key)}</caption>" in page
    assert "<caption>accuracy against truth</caption>" not in page
    for text in ("0.2346", "0.41", "123456", "17.5", "812.5", "2.25", "errorekf", "yes",
                 "solver / iterations_mean", html.escape("/data/run<1>.mcap"), "gnss_velocity"):
        assert text in page, text
    # CSV files
    for name in ("estimate.csv", "gnss.csv", "innovations.csv", "innovations_sensors.csv",
                 "truth.csv", "summary.json"):
        assert (run_dir / name).is_file(), name
    header = (run_dir / "innovations.csv").read_text().splitlines()
    assert header[0] == "t_s,sensor_index,sensor,nis,accepted"
    assert header[1].split(",")[2] == "imu"
    assert (run_dir / "estimate.csv").read_text().splitlines()[0] == ",".join(estimate)
    # round trip
    back = read_run(run_dir)
    _assert_columns_equal(back["estimate"], estimate)
    _assert_columns_equal(back["truth"], truth)
    _assert_columns_equal(back["gnss"], gnss)
    inn = {k: v for k, v in innovations.items() if k not in ("sensor_names", "dof")}
    _assert_columns_equal({k: v for k, v in back["innovations"].items()
                           if k not in ("sensor_names", "dof")}, inn)
    assert back["innovations"]["sensor_names"] == SENSORS
    assert back["innovations"]["dof"] == DOF
    assert back["summary"] == json.loads(json.dumps(summary, default=lambda v: v.item()))
    assert back["title"] == "Circle <test>"


def test_figures_drawn_by_workers_are_the_ones_drawn_here(tmp_path):
    """FigurePool (the figures of `process`, issue 17) draws byte for byte what make_figures draws in this process, and a
    pool whose worker died draws them here, saying so."""
    from state_observer.report.plots import make_figures
    from state_observer.report.pool import FigurePool

    estimate, gnss, innovations, truth, _ = synthetic_run(n=600)
    for name in ("here", "pool", "broken"):
        (tmp_path / name).mkdir()
    here = make_figures(tmp_path / "here", estimate, gnss, innovations, truth, window_s=0.5)
    with FigurePool(2) as pool:
        drawn = pool.make_figures(tmp_path / "pool", estimate, gnss, innovations, truth, window_s=0.5)
    assert drawn == here and len(here) == 6
    for name, _, _ in here:
        assert (tmp_path / "pool" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name
    with FigurePool(1) as pool:
        os.kill(pool.pids[0], signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match="drawing workers failed"):
            drawn = pool.make_figures(tmp_path / "broken", estimate, gnss, innovations, truth, window_s=0.5)
    assert drawn == here
    assert {p.name for p in (tmp_path / "broken").glob("*.png")} == {name for name, _, _ in here}


def test_report_from_csv_rewrites_the_same_report(tmp_path):
    estimate, gnss, innovations, truth, summary = synthetic_run(n=600)
    write_run(tmp_path, estimate, gnss, innovations, truth, summary, title="first")
    first = {p.name for p in tmp_path.glob("*.png")}
    for p in tmp_path.glob("*.png"):
        p.unlink()
    (tmp_path / "report.html").unlink()
    path = write_report_from_csv(tmp_path)
    page = _check_report(tmp_path)
    assert path == tmp_path / "report.html"
    assert {p.name for p in tmp_path.glob("*.png")} == first
    assert "<title>first</title>" in page and "0.2346" in page
    write_report_from_csv(tmp_path, title="second")
    assert "<title>second</title>" in (tmp_path / "report.html").read_text()


def test_no_truth_no_gnss_no_summary(tmp_path):
    estimate, _, innovations, truth, summary = synthetic_run(n=800, gnss=False)
    # a directory that held a run with truth: its truth, summary and error plot must go
    write_run(tmp_path, estimate, *synthetic_run(n=800)[1:3], truth, summary)
    assert (tmp_path / "errors.png").is_file()
    empty_gnss = {"t_s": np.empty(0), "x_m": np.empty(0), "y_m": np.empty(0), "accepted": np.empty(0)}
    write_run(tmp_path, estimate, empty_gnss, innovations)
    page = _check_report(tmp_path)
    assert not (tmp_path / "errors.png").exists()
    assert not (tmp_path / "truth.csv").exists() and not (tmp_path / "summary.json").exists()
    assert "no ground truth" in page
    back = read_run(tmp_path)
    assert back["truth"] is None and back["summary"] is None
    assert list(back["gnss"]) == list(empty_gnss) and all(len(v) == 0 for v in back["gnss"].values())
    write_report_from_csv(tmp_path)
    _check_report(tmp_path)


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_runs(tmp_path, n):
    estimate, gnss, innovations, truth, summary = synthetic_run(n=n)
    write_run(tmp_path, estimate, gnss, innovations, truth, summary)
    _check_report(tmp_path)
    back = read_run(tmp_path)
    _assert_columns_equal(back["estimate"], estimate)
    write_report_from_csv(tmp_path)
    _check_report(tmp_path)


def test_empty_run_and_no_innovations(tmp_path):
    estimate = {k: v[:0] for k, v in synthetic_run(n=10)[0].items()}
    empty = {"t_s": np.empty(0), "sensor_index": np.empty(0), "nis": np.empty(0),
             "accepted": np.empty(0), "sensor_names": ["imu"], "dof": [3]}
    write_run(tmp_path, estimate, {}, empty)
    page = _check_report(tmp_path)
    assert "0 estimates" in page
    back = read_run(tmp_path)
    assert back["innovations"]["sensor_names"] == ["imu"] and back["innovations"]["dof"] == [3]
    assert all(len(v) == 0 for k, v in back["estimate"].items())
    assert list(back["estimate"]) == list(estimate)
    write_run(tmp_path, estimate, {}, {})
    assert not (tmp_path / "innovations.png").exists()
    write_report_from_csv(tmp_path)


def test_unequal_columns_are_rejected(tmp_path):
    estimate = synthetic_run(n=10)[0]
    estimate["x_m"] = estimate["x_m"][:5]
    with pytest.raises(ValueError, match="unequal length"):
        write_run(tmp_path, estimate, {}, {})


def test_nan_values_and_missing_optional_columns(tmp_path):
    """NaN (e.g. before a state is initialised) and absent sigma columns still give every plot."""
    estimate, gnss, innovations, truth, _ = synthetic_run(n=500)
    estimate["friction"][:100] = np.nan
    estimate["friction_sigma"][:100] = np.nan
    estimate["sideslip_rad"][200:210] = np.nan
    for name in [k for k in estimate if "_sigma" in k and k[:2] in ("fx", "fy", "fz")]:
        del estimate[name]
    innovations["nis"][:3] = np.nan
    write_run(tmp_path, estimate, gnss, innovations, truth)
    _check_report(tmp_path)
    assert (tmp_path / "tire_forces.png").is_file()
    back = read_run(tmp_path)
    assert np.isnan(back["estimate"]["friction"][:100]).all()
    _assert_columns_equal(back["estimate"], estimate)


# ----------------------------------------------------------- reports of real processed bags (process_bag)

SENSOR_TOPICS = ("/imu/data", "/gps/fix", "/gps/vel", "/wheel_states", "/steering_state")


@pytest.fixture(scope="module")
def processed(tmp_path_factory):
    """(run dir with truth, run dir without truth) of a simulated 9 s circle processed by state-observer
    process; the second bag holds the same sensor messages without the /truth/... topics."""
    from state_observer.io.bag import BagWriter, read_raw
    from state_observer.io.record import simulate_command
    from state_observer.process import process_bag

    root = tmp_path_factory.mktemp("report_bags")
    assert simulate_command("steady_circle", root / "sim", duration_s=9.0, seed=1) == 0
    with BagWriter(root / "real") as writer:
        for topic, msgtype, log_ns, data in read_raw(root / "sim", SENSOR_TOPICS):
            writer.write_raw(topic, msgtype, data, log_ns)
    process_bag(root / "sim", root / "with_truth")
    process_bag(root / "real", root / "no_truth")
    return root / "with_truth", root / "no_truth"


def _section(page: str, start: str, end: str) -> str:
    """The text from start to the next end after it."""
    i = page.index(start)
    return page[i:page.index(end, i)]


def _cells(page: str, row_label: str) -> list[str]:
    """Texts of the cells of the table row whose header is row_label."""
    row = re.search(r"<tr><th scope=\"row\">" + re.escape(html.escape(row_label)) + r"</th>(.*?)</tr>", page).group(1)
    return [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_verdict_comes_first_and_holds_the_baselines(processed):
    from state_observer.report.page import format_value

    run_dir = processed[0]
    page = _check_report(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    accuracy, baselines = summary["accuracy against truth"], summary["baselines against truth"]
    # order: window, verdict, then the error figure, then everything else
    positions = [page.index(s) for s in ('id="window"', 'id="verdict"', '<img src="errors.png"', 'id="bag"',
                                         '<img src="trajectory.png"', 'id="details"')]
    assert positions == sorted(positions)
    assert page.index('id="verdict"') < page.index("<img")
    verdict = _section(page, 'id="verdict"', '<img src="errors.png"')
    header = re.search(r'<table class="verdict">.*?</tr>', verdict).group(0)
    for column in ("observer", "open loop", "GNSS alone", "zero sideslip", "target", "verdict"):
        assert f"<th>{column}</th>" in header, column
    # each cell is the summary's figure (one implementation of the metrics: sim.evaluate.error_metrics)
    cells = _cells(verdict, "position (horizontal) RMSE")
    assert cells[:5] == ["m", format_value(accuracy["position_rmse_m"]), format_value(baselines["open loop"]["position_rmse_m"]),
                         format_value(baselines["GNSS alone"]["position_rmse_m"]), "–"]
    assert cells[-1] == ("met" if accuracy["position_rmse_m"] <= 0.25 else "not met")
    cells = _cells(verdict, "sideslip RMSE")
    assert cells[1:5] == [format_value(accuracy["sideslip_rmse_deg"]), format_value(baselines["open loop"]["sideslip_rmse_deg"]),
                          "–", format_value(baselines["zero sideslip"]["sideslip_rmse_deg"])]
    assert cells[-2:] == ["≤ 0.15", "met" if accuracy["sideslip_rmse_deg"] <= 0.15 else "not met"]
    # the baselines are what they say: zero sideslip is the RMS of the true sideslip on the estimate's samples
    # in the window; the open loop drifts away without GNSS and runs the observer's initial mass
    estimate = read_run(run_dir)["estimate"]
    truth = read_run(run_dir)["truth"]
    start = summary["evaluation window"]["from_s"]
    k = np.searchsorted(truth["t_s"], estimate["t_s"] + 1e-6) - 1
    keep = estimate["t_s"] >= start
    np.testing.assert_allclose(baselines["zero sideslip"]["sideslip_rmse_deg"],
                               np.degrees(np.sqrt(np.mean(truth["sideslip_rad"][k][keep] ** 2))), rtol=1e-9)
    assert baselines["open loop"]["position_rmse_m"] > 2 * accuracy["position_rmse_m"]
    assert baselines["open loop"]["model mass kg"] == pytest.approx(estimate["mass_kg"][0])
    assert baselines["open loop"]["failed"] is None
    assert 0.3 < baselines["GNSS alone"]["position_rmse_m"] < 5.0
    assert "open loop</b>: the observer's own model" in verdict
    # the output bag is linked, with the commands that open it
    bag = _section(page, 'id="bag"', "</section>")
    assert '<a href="bag/">bag/</a>' in bag and "ros2 bag play" in bag and "Foxglove" in bag and "bag.mcap" in bag


def test_one_window_stated_once_and_used_everywhere(processed):
    run_dir = processed[0]
    page = (run_dir / "report.html").read_text()
    summary = json.loads((run_dir / "summary.json").read_text())
    window = summary["evaluation window"]
    assert 0 < window["from_s"] < window["to_s"]
    assert summary["accuracy against truth"]["evaluated_after_s"] == window["from_s"]
    assert page.count("Evaluation window") == 1 and page.count("evaluated_after_s") == 0
    assert f"Evaluation window: t = {window['from_s']:.1f} s to {window['to_s']:.1f} s" in page
    # the NIS table counts the updates inside the window only
    innovations = read_run(run_dir)["innovations"]
    names = innovations["sensor_names"]
    k = names.index("gnss_fix")
    in_window = (innovations["sensor_index"] == k) & (innovations["t_s"] >= window["from_s"])
    assert 0 < in_window.sum() < (innovations["sensor_index"] == k).sum()
    assert _cells(page, "gnss_fix")[1] == str(int(in_window.sum()))


def test_sideslip_has_a_sigma_band(processed):
    from matplotlib.collections import PolyCollection

    from state_observer.report import plots

    run_dir = processed[0]
    run = read_run(run_dir)
    estimate = run["estimate"]
    sigma = estimate["sideslip_sigma_rad"]
    moving = estimate["speed_m_s"] > 1.0
    assert moving.any() and np.isfinite(sigma[moving]).all() and (sigma[moving] > 0).all()
    assert np.degrees(np.median(sigma[moving])) < 5.0
    # the drawn band is estimate ± 3 sigma
    r = plots.Run(run["estimate"], run["gnss"], run["innovations"], run["truth"], 0.0)
    fig = plots.draw("states.png", r)
    ax = fig.axes[2]
    assert "sideslip" in ax.get_ylabel()
    band = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_label() == "±3σ"]
    assert len(band) == 1
    y = band[0].get_paths()[0].vertices[:, 1]
    i = int(np.flatnonzero(moving)[len(np.flatnonzero(moving)) // 2])
    assert i % r.step == 0 or r.step == 1
    half = 3 * np.degrees(sigma[i])
    assert np.any(np.isclose(y, np.degrees(estimate["sideslip_rad"][i]) + half, rtol=1e-9))
    # and the page reports the share of the sideslip error inside it
    page = (run_dir / "report.html").read_text()
    assert re.search(r"sideslip \d+ %", _section(page, '<img src="errors.png"', 'id="bag"'))


def test_bag_without_truth_gets_the_nis_verdict(processed):
    run_dir = processed[1]
    page = _check_report(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "accuracy against truth" not in summary and "baselines against truth" not in summary
    assert not (run_dir / "errors.png").exists() and "open loop" not in page
    verdict = _section(page, 'id="verdict"', "</section>")
    assert page.index('id="verdict"') < page.index("<img")
    assert "No ground truth in this bag" in verdict
    innovations = read_run(run_dir)["innovations"]
    verdicts = []
    for name in innovations["sensor_names"]:
        cells = _cells(verdict, name)
        verdicts.append(cells[-1])
        assert cells[-1] in ("consistent", "overconfident", "conservative", "no updates")
        if cells[-1] != "no updates":  # mean NIS against its bounds decides the verdict
            mean = float(cells[3])
            low, high = (float(v) for v in cells[4].split(" – "))
            assert (low <= mean <= high) == (cells[-1] == "consistent")
    judged = sum(v != "no updates" for v in verdicts)
    assert judged >= 3
    assert f"{verdicts.count('consistent')} of {judged} sensors consistent" in verdict


def test_the_bag_section_names_the_final_run_folder(processed):
    run_dir = processed[0]
    bag_section = _section((run_dir / "report.html").read_text(), 'id="bag"', "</section>")
    assert html.escape(str(run_dir.resolve() / "bag")) in bag_section and ".partial" not in bag_section

"""Fleets of bags (issue 17): `state-observer process` over several bags on a local process pool and on a real
two-worker Dask cluster, giving each bag the results it gets alone; one broken bag fails alone."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """A folder of three short simulated drives (different seeds) and the first one processed alone."""
    from state_observer.io.record import simulate_command
    from state_observer.process import process_bag

    folder = tmp_path_factory.mktemp("fleet") / "drives"
    for seed in (1, 2, 3):
        assert simulate_command("steady_circle", folder / f"drive_{seed}", duration_s=5.0, seed=seed) == 0
    process_bag(folder / "drive_1", folder.parent / "alone", report=False)
    return folder


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "state_observer.cli", "process", *map(str, args)], capture_output=True, text=True)


def _accuracy(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["accuracy against truth"]


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_a_folder_of_bags_runs_two_at_a_time_and_each_bag_gets_its_own_results(fleet, tmp_path):
    out = tmp_path / "out"
    result = _cli(fleet, "--out", out, "--no-report", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert "3 bags" in result.stderr and "2 at a time" in result.stderr and "3 of 3 ok" in result.stdout
    rows = list(csv.DictReader((out / "fleet.csv").open()))
    assert [Path(r["bag"]).name for r in rows] == ["drive_1", "drive_2", "drive_3"] and {r["status"] for r in rows} == {"ok"}
    assert json.loads((out / "fleet.json").read_text())[0]["position_rmse_m"] == pytest.approx(float(rows[0]["position_rmse_m"]))
    assert _accuracy(out / "drive_1") == _accuracy(fleet.parent / "alone")  # the same numbers as the bag processed alone
    assert _accuracy(out / "drive_2") != _accuracy(out / "drive_1")
    for name in ("drive_1", "drive_2", "drive_3"):
        assert list((out / name / "bag").glob("*.mcap"))


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_a_fleet_on_a_two_worker_dask_cluster(fleet, tmp_path):
    distributed = pytest.importorskip("distributed")
    from state_observer.io.params import load_config
    from state_observer.process import process_fleet

    bags = sorted(fleet.iterdir())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        done = []
        with distributed.get_task_stream(client) as tasks:
            rows = process_fleet(bags, tmp_path / "out", load_config(), cluster=cluster.scheduler_address, report=False,
                                 on_done=done.append)
    assert [r["status"] for r in rows] == ["ok"] * 3 and sorted(r["bag"] for r in done) == [str(b) for b in bags]
    assert len({task["worker"] for task in tasks.data}) == 2  # both workers ran bags
    assert _accuracy(tmp_path / "out" / "drive_1") == _accuracy(fleet.parent / "alone")


def test_an_unreachable_cluster_is_one_error(monkeypatch):
    pytest.importorskip("distributed")
    from state_observer import batch
    from state_observer.errors import StateObserverError

    monkeypatch.setattr(batch, "CONNECT_TIMEOUT_S", 2.0)
    with pytest.raises(StateObserverError, match=r"cannot reach the Dask scheduler.*127\.0\.0\.1:9"):
        batch.run_all(abs, [(1,)], cluster="tcp://127.0.0.1:9")


@pytest.mark.slow  # processes or feeds a whole drive (see conftest.py)
def test_a_broken_bag_fails_alone_and_the_fleet_says_which(fleet, tmp_path):
    import shutil

    drives = tmp_path / "drives"
    shutil.copytree(fleet / "drive_2", drives / "drive_2")
    (drives / "broken").mkdir()
    (drives / "broken" / "metadata.yaml").write_text("rosbag2_bagfile_information: [not, a, bag]\n")
    out = tmp_path / "out"
    result = _cli(drives, "--out", out, "--no-report", "--jobs", "2")
    assert result.returncode == 1 and "Traceback" not in result.stderr + result.stdout
    rows = {Path(r["bag"]).name: r for r in csv.DictReader((out / "fleet.csv").open())}
    assert rows["drive_2"]["status"] == "ok" and rows["broken"]["status"] == "failed"
    assert f"{drives / 'broken'}: cannot read bag" in rows["broken"]["error"] and "broken: " in result.stdout and "1 of 2 ok" in result.stdout
    assert (out / "drive_2" / "summary.json").is_file()


def test_bags_are_found_in_folders_and_their_names_must_differ(fleet, tmp_path):
    import shutil

    from state_observer.io.bag import IoError
    from state_observer.process import find_bags

    assert [b.name for b in find_bags([fleet])] == ["drive_1", "drive_2", "drive_3"]
    assert [b.name for b in find_bags([fleet / "drive_3", fleet / "drive_1", fleet / "drive_3"])] == ["drive_3", "drive_1"]
    with pytest.raises(IoError, match="nor a folder of them"):
        find_bags([tmp_path])
    shutil.copytree(fleet / "drive_1", tmp_path / "other" / "drive_1")
    with pytest.raises(IoError, match="two bags named drive_1"):
        find_bags([fleet, tmp_path / "other"])


def test_run_all_keeps_the_order_and_raises_a_runs_error():
    from state_observer.batch import run_all

    assert run_all(pow, [(2, k) for k in range(6)], jobs=2) == [1, 2, 4, 8, 16, 32]
    seen = []
    assert run_all(divmod, [(7, 2), (9, 4)], on_done=lambda i, r: seen.append((i, r))) == [(3, 1), (2, 1)]
    assert seen == [(0, (3, 1)), (1, (2, 1))]
    with pytest.raises(ZeroDivisionError):
        run_all(divmod, [(1, 1), (1, 0)], jobs=2)

"""The benchmark command writes one flat JSON object of named numbers and keeps other figures."""
import json

import pytest

from state_observer import bench

pytestmark = pytest.mark.slow  # whole drives (see conftest.py)


def test_quick_bench_merges_named_numbers(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"from_another_issue": 3.5, "fourbar_ali3p_rtf_5ms": -1}))
    assert bench.main(["--quick", "--json", str(path)]) == 0
    figures = json.loads(path.read_text())
    assert figures["from_another_issue"] == 3.5
    for key in ("fourbar_ali3p_rtf_5ms", "fivebar_ali3p_rtf_5ms", "process_rtf", "process_whole_rtf", "batch_speedup_2_workers"):
        assert isinstance(figures[key], float) and figures[key] > 0
    assert all(isinstance(v, (int, float)) for v in figures.values())
    assert "fourbar_ali3p_rtf_5ms" in capsys.readouterr().out


def test_corrupt_json_is_refused_without_overwriting(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text("{not json")
    try:
        bench.write_json(path, {"x": 1.0})
    except SystemExit as exc:
        assert str(path) in str(exc)
    else:
        raise AssertionError("corrupt JSON was accepted")
    assert path.read_text() == "{not json"

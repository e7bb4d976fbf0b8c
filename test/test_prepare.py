"""``state-observer prepare`` deletes the kernels compiled from other sources before compiling: numba checks a cached
kernel against its own source file only, so a caller would otherwise keep an edited callee's old machine code."""
from state_observer.prepare import clear_stale_kernels


def test_kernels_of_changed_sources_are_deleted_and_kept_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    pkg = tmp_path / "state_observer"
    (pkg / "vehicle" / "__pycache__").mkdir(parents=True)
    (pkg / "vehicle" / "tire.py").write_text("x = 1\n")
    (pkg / "vehicle" / "reduced_kernels.py").write_text("y = 2\n")
    index = pkg / "vehicle" / "__pycache__" / "reduced_kernels.force_stage-211.py311.nbi"
    index.write_bytes(b"old")
    index.with_suffix(".nbc").write_bytes(b"old")
    assert clear_stale_kernels(pkg) == 2 and not index.exists()  # sources never seen: every kernel goes
    index.write_bytes(b"new")
    assert clear_stale_kernels(pkg) == 0 and index.exists()  # the same sources: kept
    (pkg / "vehicle" / "tire.py").write_text("x = 3\n")  # a kernel edited in another module than its caller
    assert clear_stale_kernels(pkg) == 1 and not index.exists()
    # a NUMBA_CACHE_DIR mirrors the source folders
    mirrored = tmp_path / "numba" / "work" / "state_observer" / "vehicle"
    mirrored.mkdir(parents=True)
    (mirrored / "tire.tmeasy_into-405.py311.nbi").write_bytes(b"old")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    (pkg / "vehicle" / "tire.py").write_text("x = 4\n")
    assert clear_stale_kernels(pkg) == 1 and not any(mirrored.iterdir())

"""The Gauss-Jordan kernel (state_observer/accel/hls/gauss_jordan.cpp, the source Vitis HLS would
synthesise) built with the system compiler: its C testbench, the observer's own linear systems against
LAPACK, the integrator and the errorEKF with it, and the PYNQ driver's protocol.

There is no FPGA board here.  The PYNQ driver is run against a stand-in ``pynq`` module (put in
sys.modules for those tests only) whose IP, when started, runs the same C model on the buffers whose
addresses the driver wrote into its registers; everything else of the driver (register offsets from the
kernel's signature, buffer sizes, error messages) is checked as it is.
"""
import importlib.util
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import scipy.linalg

from state_observer.accel import AcceleratorError, AcceleratorUnavailable, BuildError, GaussJordanC, make_backend, residual
from state_observer.accel import build, gauss_jordan as gj, pynq_driver
from state_observer.accel.timing import TimedSolver
from state_observer.mbs import DenseLU

# relative residual |A x - b| / (|A| |x| + |b|) on the vehicle models' tangent matrices (also in docs/fpga.md)
RESIDUAL_TOL = {"c": 1e-13, "c-float32": 1e-4, "c-fixed": 1e-8}


@pytest.fixture(scope="module")
def desc():
    from state_observer.paths import default_vehicle_path
    from state_observer.vehicle.description import load_vehicle

    return load_vehicle(default_vehicle_path())


def _systems(vehicle, seconds):
    """The (A, [b, ...]) systems the integrator factored while the vehicle drove the lane change."""
    from state_observer.sim.manoeuvres import make_manoeuvre
    from state_observer.sim.run import run

    recorder = TimedSolver(DenseLU(), keep=10**6)
    vehicle.solver_options["linear_solver"] = recorder
    for _ in run(vehicle, make_manoeuvre("double_lane_change", duration_s=seconds)):
        pass
    vehicle.solver_options["linear_solver"] = None
    return recorder.systems


@pytest.fixture(scope="module")
def detailed_systems(desc):
    from state_observer.vehicle.detailed import DetailedVehicle

    return _systems(DetailedVehicle(desc), 0.6)[::6]


@pytest.fixture(scope="module")
def reduced_systems(desc):
    from state_observer.vehicle.reduced import ReducedVehicle

    return _systems(ReducedVehicle(desc), 0.6)[::6]


# ----- the HLS sources, compiled here ------------------------------------------------------------

@pytest.mark.parametrize("precision, defines", [("double", None), ("float32", None), ("fixed", None), ("fixed", {"GJ_FIXED_PORTABLE": 1})])
def test_hls_testbench_passes_with_the_system_compiler(tmp_path, precision, defines):
    exe = build.build_testbench(precision, tmp_path / "gauss_jordan_tb", defines)
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
    assert "TESTBENCH PASSED" in result.stdout


def test_kernel_sources_ship_with_the_package():
    """setup.py's package_data covers every file in accel/hls (pip install .), and the package this test
    imports has them (under make test: the colcon install, which copies state_observer/ whole)."""
    import ast
    from fnmatch import fnmatch
    from pathlib import Path

    setup = Path(__file__).resolve().parents[1] / "setup.py"
    call = next(n for n in ast.walk(ast.parse(setup.read_text())) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    patterns = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "package_data"))["state_observer.accel"]
    shipped = sorted(p.name for p in build.HLS_DIR.iterdir() if p.is_file())
    assert set(build.KERNEL_SOURCES) | {"gauss_jordan_tb.cpp", "run_hls.tcl"} <= set(shipped)
    assert all(any(fnmatch(f"hls/{name}", pattern) for pattern in patterns) for name in shipped), (shipped, patterns)


def _header_defines() -> dict:
    text = (build.HLS_DIR / "gauss_jordan.h").read_text()
    return {m[0]: int(m[1]) for m in re.findall(r"^#define (GJ_\w+) (\d+)\b", text, flags=re.M)}


def test_python_constants_match_the_kernel_header():
    h = _header_defines()
    assert (h["GJ_MODE_FACTOR"], h["GJ_MODE_SOLVE"], h["GJ_MODE_INFO"]) == (gj.MODE_FACTOR, gj.MODE_SOLVE, gj.MODE_INFO)
    assert (h["GJ_OK"], h["GJ_SINGULAR"], h["GJ_RANGE"], h["GJ_BAD_SIZE"], h["GJ_BAD_PIVOTS"], h["GJ_BAD_MODE"]) == tuple(range(6))
    assert (h["GJ_DOUBLE"], h["GJ_FLOAT"], h["GJ_FIXED"]) == tuple(build.PRECISIONS[p] for p in ("double", "float32", "fixed"))
    assert h["GJ_INTERFACE_VERSION"] == gj.INTERFACE_VERSION and h["GJ_FIXED_W"] == gj.FIXED_WIDTH
    assert h["GJ_NMAX"] >= 82  # the detailed vehicle model


def test_driver_registers_follow_the_kernel_signature():
    """The AXI-Lite offsets of the driver come from the top function's arguments in gauss_jordan.cpp:
    m_axi pointers (64-bit addresses) and scalars, in declaration order, all on the s_axilite bundle."""
    source = (build.HLS_DIR / "gauss_jordan.cpp").read_text()
    signature = re.search(r"^int gauss_jordan\(([^)]*)\)", source, flags=re.M).group(1)
    args = [re.findall(r"(\w+)(?:\[[^\]]*\])?$", a.strip())[0] for a in signature.split(",")]
    m_axi = set(re.findall(r"#pragma HLS INTERFACE m_axi port=(\w+) offset=slave", source))
    s_axilite = set(re.findall(r"#pragma HLS INTERFACE s_axilite port=(\w+) bundle=control", source))
    assert set(args) <= s_axilite and "return" in s_axilite
    assert tuple((a, 64 if a in m_axi else 32) for a in args) == pynq_driver.KERNEL_ARGS
    # the Vitis HLS layout: control 0x00-0x0c, ap_return 0x10, arguments from 0x18
    assert pynq_driver.REGISTERS == {"CTRL": 0x00, "GIER": 0x04, "IP_IER": 0x08, "IP_ISR": 0x0C, "ap_return": 0x10,
                                     "A": 0x18, "b": 0x24, "piv": 0x30, "n": 0x3C, "mode": 0x44}


def test_library_is_built_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STATE_OBSERVER_CACHE", str(tmp_path))
    first = build.library_path("double")
    assert first.parent == tmp_path and first.is_file()
    stamp = first.stat().st_mtime_ns
    assert build.library_path("double") == first and first.stat().st_mtime_ns == stamp
    assert build.library_path("double", {"GJ_NMAX": 16}) != first  # other macros: another library


def test_no_compiler_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STATE_OBSERVER_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError) as info:
        build.library_path("double")
    assert "\n" not in str(info.value) and "no C++ compiler" in str(info.value)


# ----- the observer's systems ---------------------------------------------------------------------

@pytest.mark.parametrize("model", ["detailed", "reduced"])
def test_c_model_solves_the_observer_systems_like_lapack(model, request):
    systems = request.getfixturevalue(f"{model}_systems")
    backend = make_backend("c", systems[0][0].shape[0])
    assert len(systems) >= 20
    for A, rhs in systems:
        handle = backend.factor(A.copy())
        for b in rhs:  # the Newton residual (FACTOR) and the projections (SOLVE with the same factors)
            x, reference = backend.solve(handle, b), scipy.linalg.solve(A, b)
            assert residual(A, x, b) < RESIDUAL_TOL["c"]
            assert np.abs(x - reference).max() <= 1e-10 * np.abs(reference).max()
        assert backend.last_status == gj.GJ_OK


@pytest.mark.parametrize("name", ["c-float32", "c-fixed"])
@pytest.mark.parametrize("model", ["detailed", "reduced"])
def test_reduced_precisions_stay_within_their_tolerance(model, name, request):
    systems = request.getfixturevalue(f"{model}_systems")
    backend = make_backend(name)
    worst = 0.0
    for A, rhs in systems:
        handle = backend.factor(A)
        for b in rhs:
            worst = max(worst, residual(A, backend.solve(handle, b), b))
    assert worst < RESIDUAL_TOL[name]
    refined = GaussJordanC(backend.precision, refine=2)  # two steps of iterative refinement in float64
    A, rhs = systems[len(systems) // 2]
    assert residual(A, refined.solve(refined.factor(A), rhs[0]), rhs[0]) < {"c-float32": 1e-8, "c-fixed": 1e-12}[name]


@pytest.mark.parametrize("name", ["c", "c-float32", "c-fixed"])
def test_singular_and_non_finite_systems_are_failures(name, detailed_systems):
    backend = make_backend(name)
    A, rhs = detailed_systems[0]
    b = rhs[0]
    zero_row = A.copy()
    zero_row[7] = 0.0
    handle = backend.factor(zero_row)
    assert np.all(np.isnan(backend.solve(handle, b))) and backend.last_status == gj.GJ_SINGULAR
    assert np.all(np.isnan(backend.solve(handle, b)))  # and stays failed
    broken = A.copy()
    broken[3, 4] = np.nan
    assert np.all(np.isnan(backend.solve(backend.factor(broken), b))) and backend.last_status != gj.GJ_OK
    assert np.all(np.isnan(backend.solve(backend.factor(A.copy()), np.full_like(b, np.inf))))
    assert np.all(np.isfinite(backend.solve(backend.factor(A.copy()), b)))  # a failure leaves nothing behind


def test_rank_deficient_double_matrix_is_singular(detailed_systems):
    backend = make_backend("c")
    A = detailed_systems[0][0].copy()
    A[10] = A[3]  # a repeated row: exactly singular
    assert np.all(np.isnan(backend.solve(backend.factor(A), np.ones(len(A))))) and backend.last_status == gj.GJ_SINGULAR
    rng = np.random.default_rng(1)
    B = rng.uniform(-1.0, 1.0, (60, 60))
    B[5] = B[1] - 2.0 * B[2]  # singular in exact arithmetic, rounding noise in floating point
    assert np.all(np.isnan(backend.solve(backend.factor(B), np.ones(60)))) and backend.last_status == gj.GJ_SINGULAR


def test_fixed_point_emulation_is_the_same_with_and_without_int128(detailed_systems):
    fast, portable = GaussJordanC("fixed"), GaussJordanC("fixed", defines={"GJ_FIXED_PORTABLE": 1})
    for A, rhs in detailed_systems[:5]:
        assert np.array_equal(fast.solve(fast.factor(A), rhs[0]), portable.solve(portable.factor(A), rhs[0]))


def test_size_limits():
    backend = make_backend("c")
    assert backend.nmax == _header_defines()["GJ_NMAX"]
    with pytest.raises(ValueError, match="GJ_NMAX"):
        make_backend("c", backend.nmax + 1)
    with pytest.raises(ValueError, match="GJ_NMAX"):
        backend.factor(np.eye(backend.nmax + 1))
    with pytest.raises(ValueError, match="unknown linear-solver backend 'cuda'"):
        make_backend("cuda", 10)
    assert make_backend("numpy").name == "numpy"


# ----- the integrator and the observer with the C model -----------------------------------------

def test_detailed_model_trajectory_is_the_same_with_numpy_and_c(desc):
    from state_observer.sim.manoeuvres import make_manoeuvre
    from state_observer.sim.run import run
    from state_observer.vehicle.detailed import DetailedVehicle

    manoeuvre = make_manoeuvre("double_lane_change", duration_s=1.5)
    trajectories, iterations = [], []
    for name in ("numpy", "c"):
        vehicle = DetailedVehicle(desc, linear_solver=make_backend(name, 82))
        trajectories.append(np.array([np.concatenate([vehicle.solver.q, vehicle.solver.qd]) for _ in run(vehicle, manoeuvre)]))
        iterations.append(vehicle.solver.n_iterations)
        assert vehicle.solver.linear_solver.name == name
    assert len(trajectories[0]) == 376 and iterations[0] == iterations[1]
    q_numpy, q_c = trajectories[0][:, :82], trajectories[1][:, :82]
    assert np.abs(q_c - q_numpy).max() < 5e-9  # m (points) and unit-vector components
    assert np.abs(trajectories[1][:, 82:] - trajectories[0][:, 82:]).max() < 1e-6  # m/s


def test_errorekf_estimates_are_the_same_with_numpy_and_c():
    from harness import simulated_scenario

    from state_observer.estimation.errorekf import ErrorEkfSettings
    from state_observer.sim import evaluate as ev

    desc, config, manoeuvre, truths, samples = simulated_scenario("circle_mu08", 4.0, seed=3)
    runs = {}
    for name in ("numpy", "c"):
        backend = make_backend(name, 14)
        estimates, filt = ev.run_model(desc, manoeuvre, samples, config, len(truths) - 1, ErrorEkfSettings(), linear_solver=backend)
        assert filt.vehicle.solver.linear_solver is backend and not filt.diverged
        runs[name] = estimates
    assert len(runs["c"]) == len(truths) - 1
    for a, b in zip(runs["numpy"], runs["c"]):
        assert np.abs(a.position_m - b.position_m).max() < 1e-8  # m
        assert abs(a.yaw_rate_rad_s - b.yaw_rate_rad_s) < 1e-9  # rad/s
        # N: round-off of two linear solvers (LAPACK, Gauss-Jordan), carried through the filter (its force-error walk
        # follows the change of the tire forces): a few 1e-9 of the forces
        np.testing.assert_allclose(a.tire_force_n, b.tire_force_n, rtol=1e-8, atol=1e-5)


# ----- the PYNQ driver ----------------------------------------------------------------------------

def test_pynq_without_a_board_is_unavailable_in_one_line_unless_falling_back(monkeypatch, caplog):
    if importlib.util.find_spec("pynq") is not None:
        pytest.skip("pynq is installed here: this checks a machine without it")
    with pytest.raises(AcceleratorUnavailable) as info:
        make_backend("pynq", 82)
    message = str(info.value)
    assert "\n" not in message and "pynq package is not installed" in message
    backend = make_backend("pynq", 82, fallback=True)
    assert isinstance(backend, GaussJordanC) and backend.name == "c"
    assert "falling back to the C model" in caplog.text
    assert make_backend("pynq-fixed", 14, fallback=True).name == "c-fixed"


class _Buffer(np.ndarray):
    """pynq.allocate's buffer: an ndarray with a physical address and cache maintenance."""

    def flush(self):
        self.flushes += 1

    def invalidate(self):
        self.invalidates += 1


class _Board:
    """A stand-in for PYNQ's Overlay and IP: register reads and writes; ap_start runs the kernel's C
    model on the buffers at the addresses written into the A, b and piv registers."""

    def __init__(self, precision="double", registers=None):
        self.lib = build.load_library(precision)
        self.regs = {}
        self.writes = []
        self.hang = False
        self.hwh_registers = registers if registers is not None else {
            "CTRL": {"address_offset": 0}, "ap_return": {"address_offset": 0x10}, "A_1": {"address_offset": 0x18}, "A_2": {"address_offset": 0x1C},
            "b_1": {"address_offset": 0x24}, "piv_1": {"address_offset": 0x30}, "n": {"address_offset": 0x3C}, "mode": {"address_offset": 0x44}}
        self.buffers = []

    # pynq module API
    def allocate(self, shape, dtype):
        buf = np.zeros(shape, dtype=dtype).view(_Buffer)
        buf.physical_address = buf.ctypes.data  # the model below dereferences it
        buf.flushes = buf.invalidates = 0
        self.buffers.append(buf)
        return buf

    def module(self):
        board = self

        class Overlay:
            def __init__(self, path):
                self.path = path
                self.ip_dict = {"gauss_jordan_0": {"registers": board.hwh_registers}, "processing_system7_0": {}}
                self.gauss_jordan_0 = board

        return types.SimpleNamespace(Overlay=Overlay, allocate=self.allocate)

    # DefaultIP API
    def write(self, offset, value):
        self.writes.append((offset, value))
        self.regs[offset] = value
        if offset == 0x00 and value & pynq_driver.AP_START and not self.hang:
            address = {name: self.regs.get(off, 0) | self.regs.get(off + 4, 0) << 32 for name, off in pynq_driver.REGISTERS.items() if name in ("A", "b", "piv")}
            self.regs[0x10] = self.lib.gj_call(address.get("A"), address.get("b"), address.get("piv"), self.regs[0x3C], self.regs[0x44])
            self.regs[0x00] = pynq_driver.AP_DONE | pynq_driver.AP_IDLE

    def read(self, offset):
        return self.regs.get(offset, 0)


@pytest.fixture
def board(monkeypatch, tmp_path):
    board = _Board()
    monkeypatch.setitem(sys.modules, "pynq", board.module())
    (tmp_path / "gauss_jordan.bit").write_bytes(b"")
    (tmp_path / "gauss_jordan.hwh").write_text("<hwh/>")
    board.bit = tmp_path / "gauss_jordan.bit"
    return board


def test_pynq_driver_buffer_and_register_protocol(board, detailed_systems):
    backend = make_backend("pynq", 82, overlay=board.bit)
    nmax = backend.nmax
    assert backend.name == "pynq" and nmax == _header_defines()["GJ_NMAX"]
    A_buf, b_buf, piv_buf = board.buffers
    assert (A_buf.shape, A_buf.dtype, b_buf.shape, piv_buf.dtype) == ((nmax * nmax,), np.float64, (nmax,), np.int32)
    for name, buf in (("A", A_buf), ("b", b_buf), ("piv", piv_buf)):  # addresses written once, low and high words
        offset = pynq_driver.REGISTERS[name]
        assert board.regs[offset] == buf.physical_address & 0xFFFFFFFF and board.regs[offset + 4] == buf.physical_address >> 32
    A, rhs = next((A, rhs) for A, rhs in detailed_systems if len(rhs) == 3)  # a step's last iteration and projections
    handle = backend.factor(A)
    board.writes.clear()
    x = backend.solve(handle, rhs[0])
    # one call: n and mode (FACTOR), then ap_start
    assert board.writes == [(0x3C, 82), (0x44, gj.MODE_FACTOR), (0x00, pynq_driver.AP_START)]
    assert A_buf.flushes >= 1 and b_buf.flushes >= 1 and b_buf.invalidates >= 1
    assert np.abs(x - scipy.linalg.solve(A, rhs[0])).max() <= 1e-10 * np.abs(x).max()
    board.writes.clear()
    y = backend.solve(handle, rhs[1])  # the projections: SOLVE with the factors left in the A and piv buffers
    assert board.writes[1] == (0x44, gj.MODE_SOLVE)
    assert residual(A, y, rhs[1]) < 1e-13
    other = backend.factor(A + np.eye(82))
    backend.solve(other, rhs[0])
    board.writes.clear()
    z = backend.solve(handle, rhs[1])  # an older handle: factored again, same answer
    assert board.writes[1] == (0x44, gj.MODE_FACTOR) and np.array_equal(y, z)
    singular = A.copy()
    singular[0] = 0.0
    assert np.all(np.isnan(backend.solve(backend.factor(singular), rhs[0]))) and backend.last_status == gj.GJ_SINGULAR


def test_pynq_driver_refuses_what_it_cannot_use(board, monkeypatch, tmp_path):
    def unavailable(match, **options):
        with pytest.raises(AcceleratorUnavailable, match=match) as info:
            make_backend(options.pop("name", "pynq"), options.pop("n", 82), **options)
        assert "\n" not in str(info.value)

    monkeypatch.delenv(pynq_driver.OVERLAY_ENV, raising=False)
    unavailable("no overlay given")
    unavailable("not found", overlay=tmp_path / "missing.bit")
    (tmp_path / "lonely.bit").write_bytes(b"")
    unavailable(r"lonely.hwh not found", overlay=tmp_path / "lonely.bit")
    unavailable("has no IP 'gj_1'", overlay=board.bit, ip_name="gj_1")
    unavailable("expected version 1, float32", name="pynq-float32", overlay=board.bit)  # a double bitstream
    unavailable("exceeds the IP's GJ_NMAX", n=500, overlay=board.bit)
    monkeypatch.setenv(pynq_driver.OVERLAY_ENV, str(board.bit))
    assert make_backend("pynq", 82).name == "pynq"
    board.hwh_registers["n"] = {"address_offset": 0x40}
    unavailable("register n is at 0x40, the driver expects 0x3c")
    assert make_backend("pynq-float32", 82, fallback=True).name == "c-float32"


def test_pynq_driver_times_out_when_the_ip_hangs(board):
    backend = make_backend("pynq", 14, overlay=board.bit, timeout_s=0.05)
    board.hang = True
    board.regs[0x00] = 0
    with pytest.raises(AcceleratorError, match="did not set ap_done"):
        backend.solve(backend.factor(np.eye(14)), np.ones(14))

"""Build the host C model of the Gauss-Jordan kernel (``hls/gauss_jordan.cpp``, the HLS source itself)
with the system C++ compiler, once per precision, into a user cache folder keyed by the sources' hash.

The cache folder is ``$STATE_OBSERVER_CACHE``, else ``$XDG_CACHE_HOME/state_observer``, else
``~/.cache/state_observer``.  The compiler is ``$CXX``, else ``g++``, else ``c++``.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..errors import BuildError

HLS_DIR = Path(__file__).resolve().parent / "hls"
KERNEL_SOURCES = ("gauss_jordan.h", "gj_fixed.h", "gauss_jordan.cpp", "gauss_jordan_host.cpp")
PRECISIONS = {"double": 0, "float32": 1, "fixed": 2}  # GJ_PRECISION of gauss_jordan.h
CXXFLAGS = ("-O3", "-std=c++11", "-fPIC", "-shared", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-label")

_lock = threading.Lock()
_loaded: dict[tuple, ctypes.CDLL] = {}



def compiler() -> str:
    """Path of the C++ compiler, or BuildError with one line saying what to install."""
    for name in filter(None, (os.environ.get("CXX"), "g++", "c++")):
        found = shutil.which(name)
        if found:
            return found
    raise BuildError("state_observer.accel: no C++ compiler found to build the Gauss-Jordan kernel (install g++ or set CXX)")


def cache_dir() -> Path:
    base = os.environ.get("STATE_OBSERVER_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "state_observer"


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[0][:300]


def library_path(precision: str = "double", defines: dict | None = None) -> Path:
    """Build (if not cached) and return the shared library of the C model for ``precision``
    (``double``, ``float32`` or ``fixed``); ``defines`` adds -D macros (e.g. ``{"GJ_FIXED_I": 20}``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision '{precision}', choose one of {sorted(PRECISIONS)}")
    cxx = compiler()
    macros = {"GJ_PRECISION": PRECISIONS[precision], **(defines or {})}
    flags = [*CXXFLAGS, *(f"-D{k}={v}" for k, v in sorted(macros.items()))]
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        digest.update(name.encode() + b"\0" + (HLS_DIR / name).read_bytes())
    digest.update("\0".join([cxx, platform.machine(), *flags]).encode())
    out_dir = cache_dir()
    target = out_dir / f"gauss_jordan_{precision}_{digest.hexdigest()[:16]}.so"
    if target.is_file():
        return target
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"state_observer.accel: cannot create the kernel cache folder {out_dir} ({exc.strerror}); set STATE_OBSERVER_CACHE") from None
    fd, tmp = tempfile.mkstemp(prefix=target.stem, suffix=".so.tmp", dir=out_dir)
    os.close(fd)
    sources = [str(HLS_DIR / "gauss_jordan.cpp"), str(HLS_DIR / "gauss_jordan_host.cpp")]
    try:
        result = subprocess.run([cxx, *flags, f"-I{HLS_DIR}", *sources, "-o", tmp], capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"state_observer.accel: {Path(cxx).name} failed to build the Gauss-Jordan kernel: {_first_error(result.stderr)}")
        os.replace(tmp, target)  # atomic: concurrent builds leave one complete file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def load_library(precision: str = "double", defines: dict | None = None) -> ctypes.CDLL:
    """The C model as a ctypes library with ``gj_call(A, b, piv, n, mode) -> status`` (pointers as void*)."""
    key = (precision, tuple(sorted((defines or {}).items())))
    with _lock:
        lib = _loaded.get(key)
        if lib is None:
            lib = ctypes.CDLL(str(library_path(precision, defines)))
            lib.gj_call.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
            lib.gj_call.restype = ctypes.c_int
            _loaded[key] = lib
    return lib


def build_testbench(precision: str, out: Path, defines: dict | None = None) -> Path:
    """Compile the HLS C testbench (``hls/gauss_jordan_tb.cpp`` with the kernel) into the executable ``out``."""
    cxx = compiler()
    macros = {"GJ_PRECISION": PRECISIONS[precision], **(defines or {})}
    cmd = [cxx, "-O2", "-std=c++11", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-label", *(f"-D{k}={v}" for k, v in sorted(macros.items())),
           f"-I{HLS_DIR}", str(HLS_DIR / "gauss_jordan.cpp"), str(HLS_DIR / "gauss_jordan_tb.cpp"), "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"state_observer.accel: {Path(cxx).name} failed to build the testbench: {_first_error(result.stderr)}")
    return out

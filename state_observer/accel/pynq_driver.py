"""PYNQ driver of the Gauss-Jordan kernel on a Zynq-7000 / Zynq UltraScale+ (Kria) FPGA.

The overlay is the bitstream built from ``hls/`` (``run_hls.tcl``, then a Vivado block design with
the Zynq PS and the IP): ``gauss_jordan.bit`` with its ``gauss_jordan.hwh`` next to it.  The driver
loads it with ``pynq.Overlay``, allocates the three DDR buffers of the kernel's m_axi ports once with
``pynq.allocate`` (A: GJ_NMAX^2 words, b: GJ_NMAX, piv: GJ_NMAX int32), writes their physical
addresses into the IP's AXI-Lite registers, and per call writes A (FACTOR) and b, sets n and mode,
sets ap_start, polls ap_done and reads ap_return (the status) and x.

pynq exists only on the boards, so it is imported when the backend is built; without it, without the
overlay files or without the IP, the constructor raises :class:`AcceleratorUnavailable` with one line.
"""
from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import numpy as np

from .gauss_jordan import DTYPES, GJ_OK, GJ_RANGE, GJ_SINGULAR, INTERFACE_VERSION, MODE_FACTOR, MODE_INFO, MODE_SOLVE, GaussJordanBase, Handle, parse_info
from ..errors import AcceleratorUnavailable, AcceleratorError

DEFAULT_IP_NAME = "gauss_jordan_0"  # the instance name Vivado gives the first gauss_jordan IP
OVERLAY_ENV = "STATE_OBSERVER_OVERLAY"

# The kernel's arguments in declaration order (gauss_jordan.cpp) and their AXI-Lite data width in bits:
# m_axi pointers with offset=slave carry a 64-bit address (Vitis HLS default m_axi_addr64), scalars 32.
KERNEL_ARGS = (("A", 64), ("b", 64), ("piv", 64), ("n", 32), ("mode", 32))
AP_START, AP_DONE, AP_IDLE = 0x1, 0x2, 0x4  # bits of the CTRL register




def register_offsets(args=KERNEL_ARGS, has_return: bool = True) -> dict[str, int]:
    """Byte offsets of the s_axilite registers Vitis HLS generates for a top function: CTRL 0x00,
    GIER 0x04, IP_IER 0x08, IP_ISR 0x0C, ap_return 0x10, then each argument in declaration order,
    a 32-bit scalar taking one data word and one reserved word, a 64-bit address two data words
    (low, high) and one reserved word."""
    out = {"CTRL": 0x00, "GIER": 0x04, "IP_IER": 0x08, "IP_ISR": 0x0C}
    offset = 0x10
    if has_return:
        out["ap_return"] = 0x10
        offset = 0x18
    for name, bits in args:
        out[name] = offset
        offset += 8 if bits <= 32 else 12
    return out


REGISTERS = register_offsets()


def check_register_map(hwh_registers: dict) -> None:
    """Compare the register offsets listed in the overlay's .hwh (``ip_dict[ip]["registers"]``) with
    :data:`REGISTERS`; a 64-bit argument may be listed as ``A`` or as ``A_1``/``A_2`` (low/high)."""
    for name, offset in REGISTERS.items():
        for candidate in (name, f"{name}_1", f"{name}_DATA", name.upper()):
            entry = hwh_registers.get(candidate)
            if entry is None:
                continue
            found = int(entry["address_offset"]) if isinstance(entry, dict) else int(entry)
            if found != offset:
                raise AcceleratorUnavailable(f"the overlay's register {candidate} is at 0x{found:x}, the driver expects 0x{offset:x}: the IP was not built from this kernel's gauss_jordan.cpp")
            break


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class PynqGaussJordan(GaussJordanBase):
    """The kernel on the FPGA (``name`` ``pynq``, ``pynq-float32`` or ``pynq-fixed``: the precision the
    bitstream was built with, checked against the IP's INFO word).

    overlay: path of the .bit (the .hwh next to it), default ``$STATE_OBSERVER_OVERLAY``.
    ip_name: the IP instance in the block design.  timeout_s: longest wait for ap_done per call (s).
    n: largest system that will be solved (checked against the IP's GJ_NMAX).
    """

    def __init__(self, precision: str = "double", n: int | None = None, overlay: str | os.PathLike | None = None,
                 ip_name: str = DEFAULT_IP_NAME, timeout_s: float = 1.0, fixed_int_bits: int = 24, headroom_bits: int | None = None,
                 refine: int = 0):
        super().__init__(precision, fixed_int_bits, headroom_bits, refine)
        self.name = "pynq" if precision == "double" else f"pynq-{precision}"
        self.timeout_s = float(timeout_s)
        try:
            pynq = importlib.import_module("pynq")  # only on the boards (not a declared dependency)
        except ImportError:
            raise AcceleratorUnavailable("FPGA backend unavailable: the pynq package is not installed (it exists on PYNQ / Kria boards only); "
                                         "use the C model (solver backend 'c') or allow the fallback") from None
        overlay = overlay or os.environ.get(OVERLAY_ENV)
        if not overlay:
            raise AcceleratorUnavailable(f"FPGA backend unavailable: no overlay given (pass overlay= or set {OVERLAY_ENV} to gauss_jordan.bit)")
        bit = Path(overlay).expanduser()
        if not bit.is_file():
            raise AcceleratorUnavailable(f"FPGA backend unavailable: overlay bitstream {bit} not found")
        if not bit.with_suffix(".hwh").is_file():
            raise AcceleratorUnavailable(f"FPGA backend unavailable: {bit.with_suffix('.hwh')} not found (copy the .hwh next to the .bit)")
        try:
            self.overlay = pynq.Overlay(str(bit))
        except Exception as exc:  # no board, no FPGA manager, not root, corrupt file: pynq raises many types
            raise AcceleratorUnavailable(f"FPGA backend unavailable: cannot load overlay {bit}: {_one_line(exc)}") from None
        ip_dict = getattr(self.overlay, "ip_dict", {})
        if ip_name not in ip_dict:
            raise AcceleratorUnavailable(f"FPGA backend unavailable: overlay {bit.name} has no IP '{ip_name}' (it has: {', '.join(sorted(ip_dict)) or 'none'})")
        check_register_map(ip_dict[ip_name].get("registers", {}))
        self.ip = getattr(self.overlay, ip_name)
        info = parse_info(self._start(0, MODE_INFO))
        if info["version"] != INTERFACE_VERSION or info["precision"] != precision or (precision == "fixed" and info["fixed_int_bits"] != self.fixed_int_bits):
            raise AcceleratorUnavailable(f"FPGA backend unavailable: the IP is kernel version {info['version']}, {info['precision']}"
                                         f"{' I=' + str(info['fixed_int_bits']) if info['precision'] == 'fixed' else ''}; "
                                         f"expected version {INTERFACE_VERSION}, {precision} (rebuild with run_hls.tcl or pick the matching backend)")
        self.nmax = info["nmax"]
        if n is not None and n > self.nmax:
            raise AcceleratorUnavailable(f"FPGA backend unavailable: n = {n} exceeds the IP's GJ_NMAX = {self.nmax}")
        self.buffers = {"A": pynq.allocate(shape=(self.nmax * self.nmax,), dtype=DTYPES[precision]),
                        "b": pynq.allocate(shape=(self.nmax,), dtype=DTYPES[precision]),
                        "piv": pynq.allocate(shape=(self.nmax,), dtype=np.int32)}
        for name, buf in self.buffers.items():
            address = int(getattr(buf, "physical_address", None) or buf.device_address)
            self.ip.write(REGISTERS[name], address & 0xFFFFFFFF)
            self.ip.write(REGISTERS[name] + 4, address >> 32)
        self._resident: Handle | None = None  # whose factors the A and piv buffers hold

    def _start(self, n: int, mode: int) -> int:
        """Set n and mode, pulse ap_start, wait for ap_done; returns ap_return."""
        ip = self.ip
        ip.write(REGISTERS["n"], n)
        ip.write(REGISTERS["mode"], mode)
        ip.write(REGISTERS["CTRL"], AP_START)
        deadline = time.monotonic() + self.timeout_s
        while not ip.read(REGISTERS["CTRL"]) & AP_DONE:  # ap_done may clear on read: test each read once
            if time.monotonic() > deadline:
                raise AcceleratorError(f"{self.name}: the gauss_jordan IP did not set ap_done within {self.timeout_s} s (n = {n}, mode = {mode})")
        return ip.read(REGISTERS["ap_return"])

    def _run(self, handle: Handle, x: np.ndarray, mode: int) -> int:
        n = handle.n
        A, b = self.buffers["A"], self.buffers["b"]
        if mode == MODE_SOLVE and self._resident is not handle:
            mode = MODE_FACTOR  # another matrix was factored since: factor this one again (h.A is unchanged)
        if mode == MODE_FACTOR:
            A[: n * n] = handle.A.reshape(-1)
            _flush(A)
        b[:n] = x
        _flush(b)
        status = self._start(n, mode)
        _invalidate(b)
        x[:] = b[:n]
        if mode == MODE_FACTOR:
            self._resident = handle if status in (GJ_OK, GJ_RANGE) else None
            if status == GJ_SINGULAR:
                handle.status = GJ_SINGULAR
        return status

    def close(self) -> None:
        """Free the DDR buffers."""
        for buf in getattr(self, "buffers", {}).values():
            getattr(buf, "freebuffer", lambda: None)()
        self.buffers = {}


def _flush(buf) -> None:
    """Write the CPU cache back to DDR before the IP reads (no-op for non-cacheable buffers)."""
    (getattr(buf, "flush", None) or buf.sync_to_device)()


def _invalidate(buf) -> None:
    """Drop cached lines so the CPU reads what the IP wrote."""
    (getattr(buf, "invalidate", None) or buf.sync_from_device)()


__all__ = ["AcceleratorError", "AcceleratorUnavailable", "PynqGaussJordan", "REGISTERS", "register_offsets", "check_register_map"]

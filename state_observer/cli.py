"""The ``state-observer`` command line: argument parsing only.

Each subcommand imports its implementation late and returns its exit code.
Never imports rclpy.
"""

from __future__ import annotations

import argparse
import os

# The models' matrices are small: BLAS threads only add latency (an n = 270 factorisation took
# 16 ms with OpenBLAS threads on 2 busy cores and 1.8 ms with one). Set before NumPy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from state_observer import __version__


def _bench(args: argparse.Namespace) -> int:
    from state_observer import bench

    argv: list[str] = []
    if args.json is not None:
        argv += ["--json", args.json]
    if args.quick:
        argv.append("--quick")
    return bench.main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="state-observer",
        description="Vehicle state, tire-force and parameter observer.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench = commands.add_parser("bench", help="print real-time factors and latencies")
    bench.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    bench.add_argument("--quick", action="store_true", help="short run (smoke test)")
    bench.set_defaults(func=_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())

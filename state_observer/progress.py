"""Progress on the terminal for every phase longer than a couple of seconds (tqdm).

Countable work gets a tqdm bar: simulated or bag seconds (:class:`TimeProgress`, the
``progress(t_s, total_s)`` callback of ``simulate`` and ``process``) or steps (:func:`bar`).
On a terminal the bar redraws in place; into a log file or a pipe (CI, ``make`` under a
recorder) each refresh is a line of its own, at most one every ``LOG_INTERVAL_S``, so logs stay
readable. Bars go to stderr, results to stdout. Nothing here is needed by the core.
"""
from __future__ import annotations

import io
import sys
import time
from typing import IO

from tqdm import tqdm

LOG_INTERVAL_S = 5.0  # seconds between progress lines when the stream is not a terminal


class _Lines(io.TextIOBase):
    """A text stream that turns tqdm's carriage returns into line ends (for logs)."""

    def __init__(self, stream: IO[str]):
        self.stream = stream

    def write(self, text: str) -> int:
        for part in text.replace("\r", "\n").split("\n"):
            if part.strip():
                self.stream.write(part.rstrip() + "\n")
        self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def bar(label: str, total: float | None, unit: str = "it", stream: IO[str] | None = None, **kwargs) -> tqdm:
    """A tqdm bar on ``stream`` (default stderr) that also reads well in a log file."""
    stream = stream or sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    options = dict(desc=label, total=total, unit=unit, dynamic_ncols=True, leave=True)
    if not tty:
        options.update(file=_Lines(stream), mininterval=LOG_INTERVAL_S, ncols=100)
    else:
        options.update(file=stream, mininterval=0.2)
    options.update(kwargs)
    return tqdm(**options)


class TimeProgress:
    """``progress(t_s, total_s)`` callback: a bar of seconds (simulated or of a bag) with the real-time factor
    of the stepping (seconds done per wall second since the first call, so set-up time is left out)."""

    def __init__(self, stream: IO[str] | None, label: str):
        self.stream, self.label = stream, label
        self._bar: tqdm | None = None
        self._first: tuple[float, float] = (0.0, 0.0)  # (wall time, seconds done) at the first call

    def __call__(self, t_s: float, total_s: float) -> None:
        now = time.monotonic()
        if self._bar is None:
            self._first = (now, t_s)
            self._bar = bar(self.label, round(total_s, 2), unit="s", stream=self.stream, postfix="real-time factor n/a",
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s [{elapsed}<{remaining}{postfix}]")
        elapsed = now - self._first[0]
        if elapsed > 0:
            self._bar.set_postfix_str(f"real-time factor {(t_s - self._first[1]) / elapsed:.2f}", refresh=False)
        self._bar.update(max(0.0, min(t_s, self._bar.total) - self._bar.n))

    def finish(self) -> None:
        """Close the bar (a finished run shows 100 %)."""
        if self._bar is not None:
            self._bar.update(max(0.0, self._bar.total - self._bar.n))
            self._bar.close()
            self._bar = None

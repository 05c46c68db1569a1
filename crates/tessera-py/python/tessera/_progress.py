"""Progress for long operations, when asked (``progress=True`` or a callable).

``progress=True`` shows a bar on stderr: tqdm's when tqdm is installed and stderr is a
terminal, else a plain line (rewritten in place on a terminal, one line every few
seconds otherwise) with bytes done, the rate and the time left. A callable is called as
``progress(done_bytes, total_bytes)`` instead. tqdm is optional: no new dependency.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional

Reporter = Callable[[int, int], None]


def reporter(progress: Any, what: str) -> Optional[Reporter]:
    """The callable to report to, or None when no progress was asked for."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return _Bar(what)
    if callable(progress):
        return progress
    raise TypeError(f"progress must be True, False or a callable(done, total), not {progress!r}")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


class _Bar:
    def __init__(self, what: str) -> None:
        self.what = what
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.tqdm: Any = None
        self.closed = False
        if self.tty:
            try:
                from tqdm import tqdm  # type: ignore[import-not-found]

                self.tqdm = tqdm
            except ImportError:
                self.tqdm = None
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.closed:
            return
        finished = done >= total
        if self.tqdm is not None:
            if self.bar is None:
                self.bar = self.tqdm(
                    total=total, desc=self.what, unit="B", unit_scale=True, unit_divisor=1024, leave=False
                )
            self.bar.update(done - self.bar.n)
            if finished:
                self.bar.close()
                self.closed = True
            return
        now = time.monotonic()
        if not finished and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        line = f"{self.what}: {_mib(done)}/{_mib(total)} MiB, {rate / 2**20:.1f} MiB/s, ETA {eta:.0f} s"
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if finished else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        if finished:
            self.closed = True

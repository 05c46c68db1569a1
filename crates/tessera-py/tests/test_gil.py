"""The GIL is released while tessera does I/O, hashing and compression: other Python
threads keep running during the call."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tessera

from conftest import ROUNDTRIP, ext

# Run in a subprocess with a timeout: if the GIL were held while tessera blocks in
# open(2) on a FIFO, the main thread could never open the FIFO's write end and the
# script would hang forever, so the timeout turns the hang into a failure.
FIFO_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time, tessera
    fifo = sys.argv[1]
    os.mkfifo(fifo)
    result = {}
    def reader():
        try:
            tessera.open(fifo)
            result["r"] = "opened"
        except tessera.TesseraError as e:
            result["r"] = type(e).__name__
    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.5)  # let the reader block inside tessera.open first
    # Python code running here while the reader blocks inside tessera.open.
    fd = os.open(fifo, os.O_WRONLY)
    os.close(fd)
    t.join()
    print("main ran while tessera.open blocked;", result["r"])
    """
)


def test_gil_released_while_opening(tmp):
    p = subprocess.run(
        [sys.executable, "-c", FIFO_SCRIPT, str(tmp / "fifo")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "main ran while tessera.open blocked" in p.stdout


def ran_during(call) -> bool:
    """True when a Python thread made progress in the middle of `call()`."""
    stamps = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    th = threading.Thread(target=ticker)
    th.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    th.join()
    lo, hi = t0 + (t1 - t0) / 3, t1 - (t1 - t0) / 3
    return any(lo < s < hi for s in stamps)


def test_gil_released_while_compressing_and_hashing(tmp):
    comp = [f for f in ROUNDTRIP if "zstd" in f["compression"]]
    if not comp:
        pytest.fail("no readable+writable format with zstd compression")
    fmt = comp[0]
    rng = np.random.default_rng(0)
    arrays = {"w": rng.standard_normal(1 << 21).astype(np.float32)}  # 8 MiB, poorly compressible
    path = tmp / f"m.{ext(fmt)}"
    assert ran_during(lambda: tessera.save(arrays, path, compression="zstd:19", digests="sha256"))
    f = tessera.open(path)
    assert ran_during(lambda: [f.verify() for _ in range(3)])

#!/usr/bin/env python3
"""Python save/load rows of the benchmark table: tessera against safetensors
(.safetensors) and the original zTensor package (ztensor==1.0.1, .zt), in one run.

    python crates/tessera-py/bench/bench_load.py                 # 1 GiB, 200 f32 tensors
    python crates/tessera-py/bench/bench_load.py --quick         # 64 MiB smoke run
    python crates/tessera-py/bench/bench_load.py --json rows.json

`cargo run --release -p tessera-bench -- all` runs this script and puts its rows into
docs/benchmarks.md beside the Rust ones.

Method, so that a ratio means the same thing twice on a noisy shared machine:
- the two sides of a row alternate, repetition by repetition (ours, peer, peer, ours,
  …), on the same model and, for loads, on the same file (written by the peer);
- before every timed operation: ``os.sync()`` (the previous save's write-back is not
  paid by the next operation), then for cold rows the page cache is dropped
  (``echo 3 > /proc/sys/vm/drop_caches`` as root; otherwise the file's own pages are
  evicted with ``posix_fadvise(DONTNEED)``, which needs no privilege; the method used is
  printed and recorded);
- each side's figure is the median of its repetitions, with min–max beside it; the
  ratio is peer median / tessera median (above 1: tessera is faster).

Rows: durable saves (tessera's default atomic, fsynced save against the peer's
``save_file`` followed by an fsync of the file), non-durable saves (``durable=False``
against the peer's plain ``save_file``: neither fsyncs), ``load_file`` cold and hot
(both return writable arrays the caller owns), and the .zt rows against ztensor. Timings
are printed, never asserted.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import tessera
import tessera.numpy as tnp


def make_model(size_mib: int, n: int) -> dict:
    per = max(1, (size_mib << 20) // 4 // n)
    rng = np.random.default_rng(0)
    base = rng.standard_normal(per).astype(np.float32)
    # Distinct tensors without paying for 1 GiB of random numbers.
    return {f"model.layers.{i // 8}.w{i % 8}": np.roll(base, i) for i in range(n)}


class Cache:
    """Settles write-back and, for cold rows, empties the page cache of a file."""

    def __init__(self) -> None:
        self.method = "drop_caches"
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError:
            self.method = "fadvise" if hasattr(os, "posix_fadvise") else "none"

    def settle(self, cold_path: str | None = None) -> None:
        os.sync()
        if cold_path is None:
            return
        if self.method == "drop_caches":
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        elif self.method == "fadvise":
            fd = os.open(cold_path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def interleaved(cache: Cache, ours, peer, reps: int, cold_path: str | None = None, bound=None):
    """Times `ours` and `peer` (and `bound`, when given) alternately (ABBA order),
    settling the cache before each; returns the lists of seconds (two, or three with a
    bound)."""
    t = {"ours": [], "peer": [], "bound": []}
    for r in range(reps):
        order = [("ours", ours), ("peer", peer)] + ([("bound", bound)] if bound else [])
        if r % 2:
            order.reverse()
        for side, fn in order:
            gc.collect()
            cache.settle(cold_path)
            t0 = time.perf_counter()
            result = fn()
            t[side].append(time.perf_counter() - t0)
            del result
    if bound:
        return t["ours"], t["peer"], t["bound"]
    return t["ours"], t["peer"]


def touch_file(path: str) -> int:
    """The device bound of a cold load: every page of the file read into the page cache
    through a map (the kernel's fault read-around, the fastest cold read measured on the
    benchmark machine, ahead of 8 MiB `read`s and `O_DIRECT`), one byte per page
    touched, nothing copied or kept. No load that hands out the bytes can beat it."""
    import mmap

    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            a = np.frombuffer(m, dtype=np.uint8)
            s = int(a[::4096].sum())
            del a
        finally:
            m.close()
    return s


ROWS = []


def row(name: str, peer: str, nbytes: int, ours, theirs, goal: float, note: str = "") -> None:
    mo, mp = statistics.median(ours), statistics.median(theirs)
    ratio = mp / mo
    ROWS.append(
        {
            "row": name,
            "peer": peer,
            "bytes": nbytes,
            "ours_s": ours,
            "peer_s": theirs,
            "ratio": ratio,
            "goal": goal,
            "note": note,
        }
    )
    mbs = lambda t: nbytes / t / 1e6  # noqa: E731
    print(
        f"{name:<52} tessera {mo * 1e3:8.1f} ms ({min(ours) * 1e3:.0f}–{max(ours) * 1e3:.0f}) "
        f"{mbs(mo):7.0f} MB/s | {peer:<22} {mp * 1e3:8.1f} ms ({min(theirs) * 1e3:.0f}–"
        f"{max(theirs) * 1e3:.0f}) {mbs(mp):7.0f} MB/s | {ratio:5.2f}x (goal {goal}x)",
        flush=True,
    )


def machine(cache: Cache) -> dict:
    def read(p: str) -> str:
        try:
            with open(p) as f:
                return f.read().strip()
        except OSError:
            return "?"

    cpu = "?"
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = read("/proc/meminfo").splitlines()[0].split()[1:2]
    import safetensors

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "tessera": tessera.__version__,
        "safetensors": safetensors.__version__,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": round(int(mem[0]) / 2**20, 1) if mem else None,
        "kernel": platform.release(),
        "thp": read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "cold_method": cache.method,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=None, help="model size (default 1024; --quick: 64)")
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--reps", type=int, default=None, help="repetitions per side (default 5; --quick: 3)")
    ap.add_argument("--quick", action="store_true", help="a small, fast smoke run")
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write the rows and the machine as JSON here")
    args = ap.parse_args()
    size = args.size_mib or (64 if args.quick else 1024)
    reps = args.reps or (3 if args.quick else 5)

    import safetensors.numpy as snp

    try:
        import ztensor.numpy as znp
    except ImportError:
        znp = None
        print("ztensor not installed: .zt rows skipped", file=sys.stderr)

    cache = Cache()
    model = make_model(size, args.tensors)
    nbytes = sum(a.nbytes for a in model.values())
    d = tempfile.mkdtemp(prefix="tessera-bench-", dir=args.dir)
    info = machine(cache)
    print(
        f"model: {len(model)} f32 tensors, {nbytes / 2**20:.0f} MiB; {reps} interleaved reps per side, "
        f"medians (min–max); cold = {cache.method}; files in {d}"
    )
    if cache.method != "drop_caches":
        print(f"note: cannot drop the page cache (not root): cold rows evict the file with {cache.method}")
    try:
        st_ours, st_peer = os.path.join(d, "ours.safetensors"), os.path.join(d, "peer.safetensors")

        def peer_durable():
            snp.save_file(model, st_peer)
            fsync_path(st_peer)

        o, p = interleaved(cache, lambda: tnp.save_file(model, st_ours), peer_durable, reps)
        row("save_file .safetensors, durable", "safetensors + fsync", nbytes, o, p, 1.2)
        o, p = interleaved(
            cache,
            lambda: tnp.save_file(model, st_ours, durable=False),
            lambda: snp.save_file(model, st_peer),
            reps,
        )
        row("save_file .safetensors, no fsync (durable=False)", "safetensors", nbytes, o, p, 1.2)
        # Both read the file safetensors wrote.
        o, p, b = interleaved(
            cache,
            lambda: tnp.load_file(st_peer),
            lambda: snp.load_file(st_peer),
            reps,
            cold_path=st_peer,
            bound=lambda: touch_file(st_peer),
        )
        mb = statistics.median(b)
        note = (
            f"device bound (the file paged in through a map, nothing copied): {nbytes / mb / 1e6:.0f} MB/s "
            f"({min(b) * 1e3:.0f}–{max(b) * 1e3:.0f} ms, median {mb * 1e3:.0f}); tessera at "
            f"{mb / statistics.median(o):.2f}x of it, safetensors at {mb / statistics.median(p):.2f}x"
        )
        print(f"  {note}")
        if cache.method != "drop_caches":
            note += f"; cold by {cache.method}"
        row("load_file .safetensors, cold cache", "safetensors", nbytes, o, p, 1.3, note)
        tnp.load_file(st_peer)  # warm
        o, p = interleaved(cache, lambda: tnp.load_file(st_peer), lambda: snp.load_file(st_peer), reps)
        row("load_file .safetensors, hot cache", "safetensors", nbytes, o, p, 2.0)

        if znp is not None:
            zt_ours, zt_peer = os.path.join(d, "ours.zt"), os.path.join(d, "peer.zt")

            def zpeer_durable():
                znp.save_file(model, zt_peer)
                fsync_path(zt_peer)

            o, p = interleaved(cache, lambda: tnp.save_file(model, zt_ours), zpeer_durable, reps)
            row("save_file .zt, durable", "ztensor 1.0.1 + fsync", nbytes, o, p, 1.2)
            znp.load_file(zt_peer)
            o, p = interleaved(cache, lambda: tnp.load_file(zt_peer), lambda: znp.load_file(zt_peer), reps)
            row("load_file .zt, hot cache", "ztensor 1.0.1", nbytes, o, p, 1.5)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("(machine shared with other jobs: figures vary run to run; compare ratios)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"machine": info, "size_mib": size, "tensors": args.tensors, "reps": reps, "rows": ROWS}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

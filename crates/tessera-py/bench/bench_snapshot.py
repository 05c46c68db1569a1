#!/usr/bin/env python3
"""The snapshot pipeline's benchmark (issue 33): a state of N f32 arrays (1 GiB, 200
tensors by default), medians over repetitions, printed with the bound or peer beside
each figure. Never asserted.

    python crates/tessera-py/bench/bench_snapshot.py                    # 1 GiB, 200 tensors
    python crates/tessera-py/bench/bench_snapshot.py --size-mib 256     # scaled down
    python crates/tessera-py/bench/bench_snapshot.py --json rows.json

Rows:
- stall: time inside ``Snapshotter.request()`` (the pipeline idle: each repetition
  waits for the previous generation to be written first), against the bound — a
  plain copy of the same arrays into buffers allocated once (``np.copyto``, what a
  reused staging arena costs) — and against synchronous durable saves
  (``tessera.save``, safetensors' ``save_file`` + fsync) and, where torch is
  importable (here or in ``--torch-python``), DCP's ``async_save`` stall on the same
  state (as torch tensors). Goals: <= 1.3x the copy, <= 0.2x the synchronous save,
  below DCP's.
- throughput: request to ``written`` (the background write, durable) against a
  synchronous durable ``tessera.save`` of the same format. Goal >= 0.8x.
- interference: a CPU-bound numpy loop's rate (iterations per second) while a snapshot
  is written against its rate alone (goal <= 10% slower), and the peak extra resident memory of a snapshot
  (VmHWM, reset through /proc/self/clear_refs) against one staging copy + 64 MiB.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tessera


def med(xs):
    return statistics.median(xs)


def rss_kib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make_state(total, n):
    per = total // n // 4
    rng = np.random.default_rng(0)
    base = rng.standard_normal(per, dtype=np.float32)
    return {f"layers.{i}.weight": base + np.float32(i) for i in range(n)}


def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def loop_rate(keep_going, min_s=0.0):
    """Iterations per second of a CPU-bound numpy loop while ``keep_going()`` (and at
    least ``min_s`` seconds)."""
    a = np.ones((64, 64), dtype=np.float64)
    acc = 0.0
    n = 0
    t0 = time.perf_counter()
    while True:
        acc += float(np.sin(a).sum())
        n += 1
        el = time.perf_counter() - t0
        if el >= min_s and not keep_going():
            return n / el


DCP = r"""
import sys, time, tempfile, statistics, shutil, torch, json
import torch.distributed.checkpoint as dcp
total, n, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
per = total // n // 4
state = {f"layers.{i}.weight": torch.randn(per) for i in range(n)}
stalls, tot = [], []
for r in range(reps + 1):
    d = tempfile.mkdtemp()
    t = time.perf_counter()
    fut = dcp.async_save(state, checkpoint_id=d)
    s = time.perf_counter() - t
    fut.result()
    w = time.perf_counter() - t
    shutil.rmtree(d, ignore_errors=True)
    if r:
        stalls.append(s); tot.append(w)
print(json.dumps({"stall": statistics.median(stalls), "total": statistics.median(tot)}))
"""


def dcp_row(args, total):
    pythons = [sys.executable]
    if args.torch_python:
        pythons.insert(0, args.torch_python)
    for py in pythons:
        try:
            out = subprocess.run(
                [py, "-c", DCP, str(total), str(args.tensors), str(args.reps)],
                capture_output=True,
                text=True,
                timeout=1800,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"  DCP async_save with {py}: {e}")
            continue
        if out.returncode == 0:
            return py, json.loads(out.stdout.strip().splitlines()[-1])
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        print(f"  DCP async_save with {py}: failed: {last}")
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--format", default="safetensors")
    ap.add_argument("--torch-python", default="/work/torchvenv/bin/python")
    ap.add_argument("--json")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = ap.parse_args()
    total = args.size_mib << 20
    state = make_state(total, args.tensors)
    nbytes = sum(a.nbytes for a in state.values())
    work = tempfile.mkdtemp(dir=args.dir)
    rows = {}
    print(f"state: {args.tensors} f32 tensors, {nbytes / 2**20:.0f} MiB; format {args.format}; "
          f"{args.reps} repetitions (medians); {os.cpu_count()} CPUs; dir {work}")
    try:
        # The bound: a copy into buffers allocated once.
        dst = {k: np.empty_like(v) for k, v in state.items()}
        copies = []
        for _ in range(args.reps):
            t = time.perf_counter()
            for k, v in state.items():
                np.copyto(dst[k], v)
            copies.append(time.perf_counter() - t)
        del dst
        rows["copy_s"] = med(copies)

        # Synchronous durable saves.
        saves, st_saves = [], []
        for r in range(args.reps):
            p = os.path.join(work, f"sync-{r}.{args.format}")
            os.sync()
            t = time.perf_counter()
            tessera.save(state, p, format=args.format)
            saves.append(time.perf_counter() - t)
            os.remove(p)
            try:
                from safetensors.numpy import save_file

                p = os.path.join(work, f"st-{r}.safetensors")
                os.sync()
                t = time.perf_counter()
                save_file(state, p)
                fsync_path(p)
                st_saves.append(time.perf_counter() - t)
                os.remove(p)
            except ImportError:
                pass
        rows["tessera_save_s"] = med(saves)
        rows["safetensors_save_s"] = med(st_saves) if st_saves else None

        # The pipeline: stall and request-to-written.
        # The first generation from a fresh Snapshotter also gives the peak extra
        # memory: the arena's copy plus what the writer holds.
        ring = os.path.join(work, "ring")
        base = rss_kib()
        have_peak = reset_peak()
        snap = tessera.Snapshotter(ring, format=args.format, keep=2, on_backlog="block")
        first = time.perf_counter()
        g = snap.request(state, step=0)
        rows["first_stall_s"] = time.perf_counter() - first
        snap.wait(g)
        rows["peak_extra_bytes"] = (rss_kib("VmHWM") - base) * 1024 if have_peak else None
        stalls, through = [], []
        for r in range(args.reps):
            os.sync()
            t = time.perf_counter()
            g = snap.request(state, step=r + 1)
            stalls.append(time.perf_counter() - t)
            snap.wait(g)
            through.append(time.perf_counter() - t)
        rows["stall_s"] = med(stalls)
        rows["written_s"] = med(through)

        # Interference and peak memory.
        alone, during = [], []
        for r in range(args.reps):
            alone.append(loop_rate(lambda: False, min_s=max(rows["written_s"], 0.5)))
            g = snap.request(state, step=100 + r)
            during.append(loop_rate(lambda: snap.pinned(g)))
            snap.wait(g)
        snap.close(push_timeout=0)
        rows["loop_alone_per_s"] = med(alone)
        rows["loop_during_per_s"] = med(during)
        rows["state_bytes"] = nbytes
    finally:
        shutil.rmtree(work, ignore_errors=True)

    py, dcp = dcp_row(args, total)
    rows["dcp"] = dcp

    def x(a, b):
        return "—" if a is None or b is None else f"{a / b:.2f}x"

    print()
    print(f"{'row':<34} {'tessera':>10} {'beside':>12}  ratio (goal)")
    print(f"{'stall vs plain copy (bound)':<34} {rows['stall_s']:>9.3f}s {rows['copy_s']:>11.3f}s  {x(rows['stall_s'], rows['copy_s'])} (<= 1.3x)")
    print(f"{'stall vs tessera.save durable':<34} {rows['stall_s']:>9.3f}s {rows['tessera_save_s']:>11.3f}s  {x(rows['stall_s'], rows['tessera_save_s'])} (<= 0.2x)")
    if rows["safetensors_save_s"] is not None:
        print(f"{'stall vs save_file + fsync':<34} {rows['stall_s']:>9.3f}s {rows['safetensors_save_s']:>11.3f}s  {x(rows['stall_s'], rows['safetensors_save_s'])} (<= 0.2x)")
    if dcp:
        print(f"{'stall vs DCP async_save stall':<34} {rows['stall_s']:>9.3f}s {dcp['stall']:>11.3f}s  {x(rows['stall_s'], dcp['stall'])} (< 1x; torch: {py})")
    else:
        print(f"{'stall vs DCP async_save stall':<34} {'':>10} {'n/a':>12}  (torch not importable)")
    print(f"{'first request (arena allocated)':<34} {rows['first_stall_s']:>9.3f}s")
    thr = rows["tessera_save_s"] / rows["written_s"]
    print(f"{'throughput: request to written':<34} {rows['written_s']:>9.3f}s {rows['tessera_save_s']:>11.3f}s  {thr:.2f}x of sync save (>= 0.8x)")
    slow = rows["loop_alone_per_s"] / rows["loop_during_per_s"] - 1
    print(f"{'numpy loop (iter/s) during a write':<34} {rows['loop_during_per_s']:>9.0f}/s {rows['loop_alone_per_s']:>10.0f}/s  {slow * 100:+.0f}% slower (<= +10%)")
    if rows["peak_extra_bytes"] is not None:
        bound = nbytes + (64 << 20)
        print(f"{'peak extra memory (VmHWM)':<34} {rows['peak_extra_bytes'] / 2**20:>8.0f}Mi {bound / 2**20:>10.0f}Mi  {x(rows['peak_extra_bytes'], bound)} of copy+64MiB (<= 1x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

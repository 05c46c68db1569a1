#!/usr/bin/env python3
"""load_file / save_file throughput: tessera against safetensors (.safetensors) and the
original zTensor package (ztensor==1.0.1, .zt), in one run, with ratios.

    python crates/tessera-py/bench/bench_load.py                 # ~1 GiB, 200 f32 tensors
    python crates/tessera-py/bench/bench_load.py --size-mib 64   # quick

Each figure is the best of --repeat runs on a warm page cache (the files were just
written). Loads are measured two ways: ``load_file`` as a drop-in (it copies into
writable arrays the caller owns, as safetensors and ztensor do: the like-for-like
comparison; tessera copies into huge-page-advised buffers, packing tensors under 2 MiB
together) and ``load_file(copy=False)`` (zero-copy, read-only arrays over the mapped
file). Each is timed for the call alone (the zero-copy load maps the file and reads
nothing yet) and for the call plus touching every page of every array, which is what a
user ends up paying. Ratios are peer time / tessera time: above 1 means tessera is
faster. tessera's save fsyncs and renames (atomic
write); the peers do not, so save is also shown with the peer's file fsynced after its
save ("peer+fsync"), the like-for-like durable comparison.
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
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


def touch(arrays: dict) -> int:
    """Reads one byte per 4 KiB page of every array (faults the pages in)."""
    s = 0
    for a in arrays.values():
        u = a.reshape(-1).view(np.uint8)
        s += int(u[::4096].sum())
    return s


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        r = fn()
        times.append(time.perf_counter() - t0)
        del r
    return min(times)


def durable(save, path):
    """Runs a peer's save, then fsyncs the file, as tessera's atomic save does."""

    def run():
        save()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return run


def row(label: str, nbytes: int, t_ours: float, t_peer: float, peer: str) -> None:
    mbs = lambda t: nbytes / t / 1e6  # noqa: E731
    print(
        f"{label:<46} tessera {t_ours * 1e3:9.1f} ms {mbs(t_ours):9.0f} MB/s | "
        f"{peer:<11} {t_peer * 1e3:9.1f} ms {mbs(t_peer):9.0f} MB/s | ratio {t_peer / t_ours:6.2f}x"
    )


def loads(tnp, peer_load, path: str, suffix: str, peer: str, nbytes: int, repeat: int) -> None:
    """The load rows for one file (which the peer wrote): tessera's drop-in load_file
    (copying, writable) and load_file(copy=False) (zero-copy, read-only), each alone and
    with every page touched, against the peer's load_file (copying, writable)."""
    sample = tnp.load_file(path)
    assert all(a.flags.writeable for a in sample.values()), "load_file must return writable arrays"
    assert all(a.flags.writeable for a in peer_load(path).values()), f"{peer} returned read-only arrays"
    del sample
    t_peer = best(lambda: peer_load(path), repeat)
    t_peer_touch = best(lambda: touch(peer_load(path)), repeat)
    t_ours = best(lambda: tnp.load_file(path), repeat)
    row(f"load_file {suffix} (copy, writable)", nbytes, t_ours, t_peer, peer)
    t_ours = best(lambda: touch(tnp.load_file(path)), repeat)
    row(f"load_file+touch {suffix} (copy, writable)", nbytes, t_ours, t_peer_touch, peer)
    t_ours = best(lambda: tnp.load_file(path, copy=False), repeat)
    row(f"load_file(copy=False) {suffix} (zero-copy, ro)", nbytes, t_ours, t_peer, peer)
    t_ours = best(lambda: touch(tnp.load_file(path, copy=False)), repeat)
    row(f"load_file(copy=False)+touch {suffix}", nbytes, t_ours, t_peer_touch, peer)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temp dir)")
    args = ap.parse_args()

    import safetensors.numpy as snp

    try:
        import ztensor.numpy as znp
    except ImportError:
        znp = None
        print("ztensor not installed: .zt rows skipped", file=sys.stderr)

    model = make_model(args.size_mib, args.tensors)
    nbytes = sum(a.nbytes for a in model.values())
    d = tempfile.mkdtemp(prefix="tessera-bench-", dir=args.dir)
    print(f"model: {len(model)} f32 tensors, {nbytes / 2**20:.0f} MiB; best of {args.repeat}; files in {d}")
    print(f"tessera {tessera.__version__}; numpy {np.__version__}")
    try:
        st_ours, st_peer = os.path.join(d, "ours.safetensors"), os.path.join(d, "peer.safetensors")
        t_save_ours = best(lambda: tnp.save_file(model, st_ours), args.repeat)
        t_save_peer = best(lambda: snp.save_file(model, st_peer), args.repeat)
        row("save_file .safetensors", nbytes, t_save_ours, t_save_peer, "safetensors")
        t_save_peer = best(durable(lambda: snp.save_file(model, st_peer), st_peer), args.repeat)
        row("save_file .safetensors (peer+fsync)", nbytes, t_save_ours, t_save_peer, "safetensors")
        # Both read the file safetensors wrote.
        loads(tnp, snp.load_file, st_peer, ".safetensors", "safetensors", nbytes, args.repeat)

        if znp is not None:
            zt_ours, zt_peer = os.path.join(d, "ours.zt"), os.path.join(d, "peer.zt")
            t_save_ours = best(lambda: tnp.save_file(model, zt_ours), args.repeat)
            t_save_peer = best(lambda: znp.save_file(model, zt_peer), args.repeat)
            row("save_file .zt", nbytes, t_save_ours, t_save_peer, "ztensor")
            t_save_peer = best(durable(lambda: znp.save_file(model, zt_peer), zt_peer), args.repeat)
            row("save_file .zt (peer+fsync)", nbytes, t_save_ours, t_save_peer, "ztensor")
            loads(tnp, znp.load_file, zt_peer, ".zt", "ztensor", nbytes, args.repeat)
            zc_ours = os.path.join(d, "ours.zstd.zt")
            t_comp = best(lambda: tnp.save_file(model, zc_ours, compression="zstd"), 1)
            t_dec = best(lambda: touch(tnp.load_file(zc_ours)), 1)
            print(
                f"{'tessera .zt zstd (no peer)':<46} save {nbytes / t_comp / 1e6:7.0f} MB/s, "
                f"load+touch {nbytes / t_dec / 1e6:7.0f} MB/s, "
                f"{os.path.getsize(zc_ours) / nbytes:.2f} of raw size"
            )
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("(machine shared with other jobs: figures vary run to run; compare ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Crash-safe writes: SIGKILL a `tessera convert` at many points while it overwrites an
existing target; the target is always the complete old file or the complete new one.

The source model is written by the `safetensors` package (not by us). The writers are
deterministic, so the complete new file's hash is known from a reference conversion.
"""
import hashlib
import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import TESSERA, run

TARGETS = ["zt", "safetensors", "fold", "aero", "gptrs", "npz", "gguf", "wtxt"]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("crash")
    rng = np.random.default_rng(7)
    tensors = {f"layer.{i}.weight": rng.standard_normal((512, 512)).astype(np.float32) for i in range(48)}
    src = d / "src.safetensors"  # ~48 MiB
    save_file(tensors, str(src))
    small = d / "small.safetensors"
    save_file({"old": np.arange(10, dtype=np.float32)}, str(small))
    return d, src, small


@pytest.mark.parametrize("ext", TARGETS)
def test_sigkill_never_leaves_a_partial_target(source, ext):
    d, src, small = source
    # Fixed timestamp, UUID and salt where the format has them (an option a format does
    # not take is refused): the writers are then byte-deterministic.
    extra = ["--ts", "2026-01-01T00:00:00Z"] if ext in ("fold", "wtxt") else []
    if ext == "aero":
        extra += ["--uuid", "11" * 16]
    if ext == "wtxt":
        extra += ["--salt", "0011223344556677"]
    ref = d / f"ref.{ext}"
    t0 = time.monotonic()
    run("convert", src, ref, *extra)
    full = time.monotonic() - t0
    new_hash = sha(ref)
    target = d / f"target.{ext}"
    run("convert", small, target, *extra)
    rng = random.Random(ext)
    seen = {"old": 0, "new": 0}
    for i in range(24):
        old_hash = sha(target)
        p = subprocess.Popen([TESSERA, "convert", str(src), str(target), *extra],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, full * 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        h = sha(target)
        assert h in (old_hash, new_hash), f"kill {i}: target is neither the old nor the new file"
        seen["old" if h == old_hash and h != new_hash else "new"] += 1
        if h == new_hash:  # start the next round from the old file again
            run("convert", small, target, *extra)
    # The kills landed both before and after the rename at least once.
    assert seen["old"] > 0, seen
    for leftover in d.glob(f".target.{ext}.*.tmp"):
        leftover.unlink()


def test_convert_onto_itself_keeps_the_file(source, tmp_path):
    d, src, _ = source
    a = tmp_path / "a.zt"
    run("convert", src, a)
    before = sha(a)
    run("convert", a, a)
    assert sha(a) == before
    run("verify", a)


def _pair(target):
    wsum = target.with_name(target.name + ".wsum")
    return sha(target), (sha(wsum) if wsum.exists() else None)


def test_sigkill_never_leaves_a_wtxt_s_beside_a_stale_wsum(source):
    """A streamed WTXT-S and its `.wsum` appear together or the `.wsum` is missing:
    after a SIGKILL at any point, the pair is the old one, the new one, or a main file
    (old or new) without a `.wsum` (unfinalized, which verify reports as such), never a
    main file beside the other write's `.wsum` (which would fail verify as damage)."""
    d, src, small = source
    extra = ["--ts", "2026-01-01T00:00:00Z", "--salt", "0011223344556677", "--streaming"]
    ref = d / "ref-s.wtxt"
    t0 = time.monotonic()
    run("convert", src, ref, *extra)
    full = time.monotonic() - t0
    new = _pair(ref)
    assert new[1] is not None
    target = d / "target-s.wtxt"
    rng = random.Random("wtxt-s")
    seen = {"old pair": 0, "new pair": 0, "main alone": 0}
    for i in range(24):
        run("convert", small, target, *extra)
        old = _pair(target)
        assert old[1] is not None and old != new
        p = subprocess.Popen([TESSERA, "convert", str(src), str(target), *extra],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, full * 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        got = _pair(target)
        if got == old:
            seen["old pair"] += 1
        elif got == new:
            seen["new pair"] += 1
        else:
            assert got[1] is None and got[0] in (old[0], new[0]), f"kill {i}: a mixed pair"
            seen["main alone"] += 1
            # What the reader says of it: unfinalized, not damaged.
            v = run("verify", target, check=False)
            assert v.returncode == 1 and "unfinalized" in v.stdout + v.stderr, v.stdout
    assert seen["old pair"] > 0, seen
    # Finished writes leave a verifiable pair.
    run("convert", src, target, *extra)
    assert _pair(target) == new
    run("verify", target)
    for leftover in d.glob(".target-s.wtxt*.tmp"):
        leftover.unlink()

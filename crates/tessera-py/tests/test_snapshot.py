"""tessera.Snapshotter and tessera.restore: snapshots of a live state, pushed to a
directory target, restored past damage, and a training process killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import tessera
from tessera import IntegrityError, InvalidInputError, UnsupportedError


def model(seed: float) -> dict:
    return {
        "layers.0.weight": (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) + seed),
        "layers.0.bias": np.full((100,), -seed, dtype=np.float64),
        "step": np.array([int(seed)], dtype=np.int64),
    }


def same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("format_name", ["wtxt", "safetensors", "ztensor", "fold"])
def test_requests_are_written_and_the_newest_restores(tmp_path, format_name):
    ring = tmp_path / "ckpt"
    snap = tessera.Snapshotter(ring, format=format_name, keep=2, on_backlog="block")
    gens = []
    for step in range(3):
        g = snap.request(model(step), step=step * 100, metadata={"loss": f"{0.5 / (step + 1):.4f}"})
        snap.wait(g, timeout=30)
        gens.append(g)
    snap.close()
    assert gens == [0, 1, 2]
    r = tessera.restore(ring)
    assert r.generation == 2 and r.step == 200 and r.format == format_name
    assert r.metadata == {"loss": "0.1667"}
    assert r.skipped == []
    same(r.state, model(2))
    # keep=2: generation 0 is gone.
    assert not list(ring.glob("gen-000000000.*"))


def test_copy_false_holds_the_arrays_until_written(tmp_path):
    state = model(3)
    snap = tessera.Snapshotter(tmp_path / "r", format="safetensors", on_backlog="block")
    g = snap.request(state, copy=False)
    snap.wait(g, timeout=30)
    assert not snap.pinned(g)
    assert snap.arena_bytes == 0
    g2 = snap.request(state)  # a copy: the arena holds the state's bytes
    snap.wait(g2, timeout=30)
    assert snap.arena_bytes == sum(a.nbytes for a in state.values())
    snap.close()
    same(tessera.restore(tmp_path / "r", generation=g).state, state)


def test_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    state = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(4, dtype=torch.bfloat16)}
    with tessera.Snapshotter(tmp_path / "r", format="safetensors", on_backlog="block") as snap:
        snap.wait(snap.request(state, step=1), timeout=30)
    r = tessera.restore(tmp_path / "r", "pt")
    assert torch.equal(r.state["w"], state["w"]) and torch.equal(r.state["b"], state["b"])


def test_pushes_reach_a_directory_and_a_down_target_keeps_its_queue(tmp_path):
    far = tmp_path / "far"
    with tessera.Snapshotter(tmp_path / "r", format="wtxt", push=[f"file://{far}"], on_backlog="block") as snap:
        for i in range(2):
            snap.wait(snap.request(model(i), step=i), timeout=30)
        assert snap.wait_pushed(30)
    for g in range(2):
        f = tessera.open(far / f"gen-{g:09}" / f"gen-{g:09}.wtxt")
        assert f.verify().ok
        same(f.get_tensors(copy=True), model(g))

    # Down (its parent is a file); skip policy with a backlog of 1: the next request is
    # skipped at once, with a warning and a count.
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"x")
    down = f"file://{blocker}/weights"
    snap = tessera.Snapshotter(tmp_path / "r2", format="safetensors", push=[down], max_backlog=1, retry=(0.01, 0.05))
    g = snap.request(model(0))
    snap.wait(g, timeout=30)
    t = time.monotonic()
    with pytest.warns(RuntimeWarning, match="skipped"):
        assert snap.request(model(1)) is None
    assert time.monotonic() - t < 1.0
    assert snap.skipped == 1
    assert list(snap.pending.values()) == [[0]]
    snap.close(push_timeout=0)
    # Back: a new Snapshotter on the ring resumes the queue.
    blocker.unlink()
    with tessera.Snapshotter(tmp_path / "r2", format="safetensors", push=[down]) as snap:
        assert snap.wait_pushed(30)
    same(tessera.open(blocker / "weights" / "gen-000000000" / "gen-000000000.safetensors").get_tensors(copy=True), model(0))


def test_restore_skips_and_names_damage(tmp_path):
    ring = tmp_path / "r"
    with tessera.Snapshotter(ring, format="ztensor", keep=5, on_backlog="block") as snap:
        for i in range(3):
            snap.wait(snap.request(model(i)), timeout=30)
    p = ring / "gen-000000002.zt"
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0x10
    p.write_bytes(bytes(b))
    r = tessera.restore(ring)
    assert r.generation == 1
    assert [g for g, _ in r.skipped] == [2]
    same(r.state, model(1))
    for f in ring.glob("gen-*.zt"):
        f.write_bytes(f.read_bytes()[:-5])
    with pytest.raises(IntegrityError, match="no generation verifies"):
        tessera.restore(ring)


def test_signed_and_hmacd_wtxt(tmp_path):
    seed = bytes(range(32))
    hk = tmp_path / "hmac.key"
    hk.write_bytes(b"k" * 32)
    with tessera.Snapshotter(tmp_path / "r", sign_key=seed, hmac_key_file=hk, on_backlog="block") as snap:
        snap.wait(snap.request(model(1)), timeout=30)
    pub = tessera.public_key(seed)
    r = tessera.restore(tmp_path / "r", public_key=pub, hmac_key=b"k" * 32)
    same(r.state, model(1))
    with pytest.raises(IntegrityError):
        tessera.restore(tmp_path / "r", public_key=tessera.public_key(bytes(32)))


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="on_backlog"):
        tessera.Snapshotter(tmp_path / "a", on_backlog="later")
    with pytest.raises(UnsupportedError, match="unsupported target scheme"):
        tessera.Snapshotter(tmp_path / "b", push=["gopher://x/y"])
    with pytest.raises(UnsupportedError, match="delta"):
        tessera.Snapshotter(tmp_path / "c", delta=True)
    with pytest.raises(InvalidInputError, match="does not use"):
        tessera.Snapshotter(tmp_path / "d", format="safetensors", compression="zstd")
    snap = tessera.Snapshotter(tmp_path / "e")
    with pytest.raises(InvalidInputError, match="in use"):
        tessera.Snapshotter(tmp_path / "e")
    snap.close()


CHILD = textwrap.dedent(
    """
    import sys, numpy as np, tessera
    ring, far = sys.argv[1], sys.argv[2]
    snap = tessera.Snapshotter(ring, format="wtxt", push=[far], on_backlog="block")
    for i in range(10000):
        state = {"w": np.full((256, 1024), i, dtype=np.float32), "b": np.arange(1000.0) + i}
        g = snap.request(state, step=i)
        snap.wait(g)
        print(g, flush=True)
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.013, 0.031, 0.057])
def test_sigkill_of_the_training_process_loses_nothing(tmp_path, delay):
    ring, far = tmp_path / "ring", tmp_path / "far"
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ring), f"file://{far}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    for _ in range(3):
        assert p.stdout.readline().strip() != ""
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        snap = tessera.Snapshotter(ring, format="wtxt", push=[f"file://{far}"])
    gens = [g for g in snap.generations() if g["written"]]
    assert len(gens) >= 3
    assert snap.wait_pushed(60)
    snap.close()
    # Nothing partial in the ring: only the log and each written generation's files.
    names = sorted(os.listdir(ring))
    want = sorted(["snapshots.log"] + [f"gen-{g['generation']:09}.{e}" for g in gens for e in ("wtxt", "json")])
    # keep=5 dropped the oldest.
    assert set(names) <= set(want), names
    r = tessera.restore(ring)
    assert r.skipped == []
    i = r.step
    same(r.state, {"w": np.full((256, 1024), i, dtype=np.float32), "b": np.arange(1000.0) + i})
    import json

    # Every generation in the ring reached the target (older ones too, then dropped).
    assert {f"gen-{g['generation']:09}" for g in gens} <= set(os.listdir(far))
    for g in os.listdir(far):
        step = json.loads((far / g / f"{g}.json").read_text())["step"]
        f = tessera.open(far / g / f"{g}.wtxt")
        assert f.verify().ok, g
        assert f.get_tensors(copy=True)["b"][0] == float(step), g

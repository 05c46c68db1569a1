"""Loads check the digests a file stores before handing bytes out.

For every format that stores a digest over tensor bytes, one flipped byte inside a
tensor makes the copying loaders raise IntegrityError (naming the file, the tensor or
chunk, and the layer); ``verify=False`` lets the bytes through. Every Python path checks by default, zero-copy
views included (issue 29 §2); a copy is checked over the copy itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import tessera
import tessera.numpy as tnp

# (label, extension, save options, a word the error must contain)
CASES = [
    ("zt-sha256", "zt", {"digests": "sha256"}, "sha256"),
    ("zt-crc32c", "zt", {"digests": "crc32c"}, "crc32c"),
    ("fold", "fold", {}, "CRC-32C"),
    ("aero", "aero", {"tensor_hashes": True}, "hash_b3"),
    ("npz", "npz", {}, "crc32"),
]


def _damaged(tmp_path, label, ext, options):
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    b = np.arange(100, dtype=np.int64)
    good = tmp_path / f"{label}.{ext}"
    tessera.save({"w": w, "b": b}, good, **options)
    with tessera.open(good) as f:
        s = f.tensor_info("w")["storage"]
    data = bytearray(good.read_bytes())
    data[s["offset"] + s["stored_bytes"] // 2] ^= 0x04
    bad = tmp_path / f"bad-{label}.{ext}"
    bad.write_bytes(bytes(data))
    return good, bad, w


@pytest.mark.parametrize("label,ext,options,layer", CASES, ids=[c[0] for c in CASES])
def test_damaged_tensor_fails_every_copying_load(tmp_path, label, ext, options, layer):
    good, bad, w = _damaged(tmp_path, label, ext, options)
    np.testing.assert_array_equal(tnp.load_file(good)["w"], w)

    loads = {
        "numpy.load_file": lambda: tnp.load_file(bad),
        "numpy.load": lambda: tnp.load(bad.read_bytes()),
        "safe_open.get_tensor": lambda: tessera.safe_open(bad, "np").get_tensor("w"),
        "safe_open.get_slice": lambda: tessera.safe_open(bad, "np").get_slice("w")[0:2],
        "open(verify=True)[w]": lambda: tessera.open(bad, verify=True)["w"],
        "convert": lambda: tessera.convert(bad, tmp_path / "out.safetensors"),
    }
    for what, load in loads.items():
        with pytest.raises(tessera.IntegrityError) as e:
            load()
        msg = str(e.value)
        assert layer in msg, f"{what}: {msg}"
        assert '"w"' in msg or "chunk" in msg, f"{what}: {msg}"
    assert not (tmp_path / "out.safetensors").exists()
    # The file is named by the loaders that open it by path.
    with pytest.raises(tessera.IntegrityError) as e:
        tnp.load_file(bad)
    assert str(bad) in str(e.value)

    # Explicit opt-outs hand the damaged bytes over. FOLD's CRC-32C is checked even
    # then: it is what triggers its Reed-Solomon repair.
    if ext == "fold":
        with pytest.raises(tessera.IntegrityError):
            tnp.load_file(bad, verify=False)
        return
    got = tnp.load_file(bad, verify=False)["w"]
    assert not np.array_equal(got, w)
    tessera.convert(bad, tmp_path / "out.safetensors", verify=False)


def _loads(path, name="w"):
    """Every Python path that hands out a tensor's values."""
    def torch_load():
        pytest.importorskip("torch")
        import tessera.torch as tt

        return tt.load_file(path)

    return {
        "open()[name]": lambda: tessera.open(path)[name],
        "File.get_tensor(copy=True)": lambda: tessera.open(path).get_tensor(name, copy=True),
        "File.get_tensors()": lambda: tessera.open(path).get_tensors(),
        "File.get_tensors(copy=True)": lambda: tessera.open(path).get_tensors(copy=True),
        "open(framework=pt)[name]": lambda: (pytest.importorskip("torch"), tessera.open(path, "pt")[name]),
        "numpy.load_file": lambda: tnp.load_file(path),
        "numpy.load_file(copy=False)": lambda: tnp.load_file(path, copy=False),
        "numpy.load": lambda: tnp.load(path.read_bytes()),
        "load(bytes)[name]": lambda: tessera.load(path.read_bytes())[name],
        "safe_open.get_tensor": lambda: tessera.safe_open(path, "np").get_tensor(name),
        "safe_open(copy=False).get_tensor": lambda: tessera.safe_open(path, "np", copy=False).get_tensor(name),
        "safe_open.get_slice": lambda: tessera.safe_open(path, "np").get_slice(name)[0:2],
        "safe_open(copy=False).get_slice": lambda: tessera.safe_open(path, "np", copy=False).get_slice(name)[0:2],
        "torch.load_file": torch_load,
        "File.convert": lambda: tessera.open(path).convert(path.parent / "conv.safetensors"),
        "convert": lambda: tessera.convert(path, path.parent / "conv.safetensors"),
    }


# Issue 29 §2: every Python path checks by default, and names the tensor.
@pytest.mark.parametrize("label,ext,options,layer", CASES, ids=[c[0] for c in CASES])
def test_every_python_path_checks_by_default(tmp_path, label, ext, options, layer):
    _, bad, w = _damaged(tmp_path, label, ext, options)
    for what, load in _loads(bad).items():
        try:
            with pytest.raises(tessera.IntegrityError) as e:
                load()
        except pytest.skip.Exception:
            continue
        msg = str(e.value)
        assert layer in msg, f"{what}: {msg}"
        assert '"w"' in msg or "chunk" in msg, f"{what}: {msg}"
    assert not (tmp_path / "conv.safetensors").exists()
    if ext == "fold":  # FOLD's CRC-32C is checked even then (it triggers the repair)
        return
    # verify=False hands the damaged bytes over, on each path that takes it.
    for got in (
        tessera.open(bad, verify=False)["w"],
        tessera.open(bad, verify=False).get_tensor("w", copy=True),
        tnp.load_file(bad, verify=False)["w"],
        tnp.load(bad.read_bytes(), verify=False)["w"],
        tessera.safe_open(bad, "np", verify=False).get_tensor("w"),
        tessera.safe_open(bad, "np", verify=False).get_slice("w")[:],
    ):
        assert got.shape == w.shape and not np.array_equal(got, w)
    tessera.open(bad, verify=False).convert(tmp_path / "conv.safetensors")
    assert not np.array_equal(tnp.load_file(tmp_path / "conv.safetensors")["w"], w)


def _damaged_wtxt(tmp_path):
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    good = tmp_path / "good.wtxt"
    tessera.save({"w": w}, good)
    with tessera.open(good) as f:
        s = f.tensor_info("w")["storage"]
    data = bytearray(good.read_bytes())
    # One base64 letter for another, inside the tensor's text: still decodes, to other
    # bytes, which the chunk's digests catch.
    at = s["offset"] + s["stored_bytes"] // 2
    while not chr(data[at]).isalpha():
        at += 1
    data[at] = ord("B") if data[at] != ord("B") else ord("C")
    bad = tmp_path / "bad.wtxt"
    bad.write_bytes(bytes(data))
    return bad, w


def test_wtxt_damage_is_refused_on_every_path(tmp_path):
    bad, w = _damaged_wtxt(tmp_path)
    for what, load in _loads(bad).items():
        try:
            with pytest.raises(tessera.IntegrityError) as e:
                load()
        except pytest.skip.Exception:
            continue
        assert '"w"' in str(e.value) or "chunk" in str(e.value), f"{what}: {e.value}"
    # A WTXT line's parity nibble is part of its text syntax: checked even then.
    with pytest.raises(tessera.IntegrityError, match="parity"):
        tessera.open(bad, verify=False)["w"]


def test_a_file_without_digests_stays_readable(tmp_path):
    # safetensors stores no digest: nothing to check, nothing refused.
    _, bad, w = _damaged(tmp_path, "st", "safetensors", {})
    for what, load in _loads(bad).items():
        try:
            out = load()
        except pytest.skip.Exception:
            continue
        if isinstance(out, dict):
            out = out["w"]
        if isinstance(out, np.ndarray) and out.shape == w.shape:
            assert not np.array_equal(out, w), what


@pytest.mark.parametrize("label,ext,options,layer", CASES, ids=[c[0] for c in CASES])
def test_a_copy_is_the_bytes_that_were_checked(tmp_path, label, ext, options, layer):
    """The file changes on disk (same inode) after a tensor was read and checked
    through the map: a later copy is checked over the copy itself, so the change is
    caught, every time, instead of copying the new bytes out unchecked."""
    good, _, w = _damaged(tmp_path, label, ext, options)
    with tessera.open(good) as f:
        assert f.positional_reads
        np.testing.assert_array_equal(f["w"], w)  # checked through the map
        np.testing.assert_array_equal(f.get_tensor("w", copy=True), w)
        s = f.tensor_info("w")["storage"]
        with open(good, "r+b") as raw:
            raw.seek(s["offset"] + s["stored_bytes"] // 2)
            byte = raw.read(1)
            raw.seek(-1, 1)
            raw.write(bytes([byte[0] ^ 0x04]))
        for _ in range(2):
            with pytest.raises(tessera.IntegrityError, match='"w"|chunk'):
                f.get_tensor("w", copy=True)
            with pytest.raises(tessera.IntegrityError):
                f.get_tensors(copy=True)
        # The zero-copy view is the mapped file: it shows the change (documented).
        assert f.get_tensor("w", copy=False).shape == w.shape


def test_wtxt_hmac_is_checked_when_a_key_is_given(tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    keyed = tmp_path / "k.wtxt"
    tessera.save({"w": w}, keyed, hmac_key=b"secret")
    with tessera.open(keyed, hmac_key=b"secret") as f:
        np.testing.assert_array_equal(f["w"], w)
    with pytest.raises(tessera.IntegrityError, match="hmac mismatch"):
        tessera.open(keyed, hmac_key=b"wrong")["w"]
    plain = tmp_path / "p.wtxt"
    tessera.save({"w": w}, plain)
    with pytest.raises(tessera.IntegrityError, match="no HMAC"):
        tessera.open(plain, hmac_key=b"secret")["w"]

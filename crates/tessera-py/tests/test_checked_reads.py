"""Loads check the digests a file stores before handing bytes out.

For every format that stores a digest over tensor bytes, one flipped byte inside a
tensor makes the copying loaders raise IntegrityError (naming the file, the tensor or
chunk, and the layer); ``verify=False`` lets the bytes through; zero-copy views from
``tessera.open`` are unchecked unless ``verify=True``.
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


@pytest.mark.parametrize("label,ext,options,layer", CASES[:1] + CASES[3:4], ids=["zt", "aero"])
def test_zero_copy_views_are_unchecked_unless_asked(tmp_path, label, ext, options, layer):
    _, bad, w = _damaged(tmp_path, label, ext, options)
    with tessera.open(bad) as f:  # default: zero-copy, unchecked, as documented
        v = f["w"]
        assert not np.array_equal(v, w)
    with pytest.raises(tessera.IntegrityError):
        tnp.load_file(bad, copy=False, verify=True)
    # copy=False alone follows the zero-copy default (unchecked).
    assert not np.array_equal(tnp.load_file(bad, copy=False)["w"], w)


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

"""Writer options reach the writers and do what they say: verify sees the layers they
add (HMAC, signatures, digests, ECC, page hashes) and catches or repairs damage."""
from __future__ import annotations

import numpy as np
import pytest

import tessera

from conftest import ROUNDTRIP

NAMES = {f["name"] for f in ROUNDTRIP}


def need(name):
    assert name in NAMES, f"the {name} format is not merged yet"


def tensors():
    return {"w": np.arange(4096, dtype=np.float32), "b": np.ones(3, dtype=np.float32)}


def statuses(report, layer):
    return {c.status for c in report.checks if c.layer == layer}


def flip(path, offset):
    d = bytearray(path.read_bytes())
    d[offset] ^= 0xFF
    path.write_bytes(bytes(d))


def test_wtxt_hmac_key(tmp):
    need("wtxt")
    p = tmp / "m.wtxt"
    tessera.save(tensors(), p, hmac_key=b"secret")
    f = tessera.open(p)
    assert statuses(f.verify(hmac_key=b"secret"), "hmac") == {"ok"}
    assert f.verify(hmac_key="secret").ok  # str keys are their UTF-8 bytes
    bad = f.verify(hmac_key=b"wrong")
    assert not bad.ok and statuses(bad, "hmac") == {"failed"}
    assert "failed" not in statuses(f.verify(), "hmac")  # no key: not a failure


def test_wtxt_sign_key(tmp):
    need("wtxt")
    secret = bytes(range(32))
    p = tmp / "m.wtxt"
    tessera.save(tensors(), p, sign_key=secret)
    f = tessera.open(p)
    good = f.verify(public_key=tessera.public_key(secret))
    assert good.ok
    assert any(c.status == "ok" and "sig" in c.layer for c in good.checks), good
    other = f.verify(public_key=tessera.public_key(bytes(32)))
    assert not other.ok
    with pytest.raises(tessera.InvalidInputError):
        tessera.public_key(b"short")


def test_sign_key_from_a_key_file_path_is_accepted(tmp):
    need("wtxt")
    with pytest.raises(tessera.TesseraError):  # a path that is not a key file
        tessera.save(tensors(), tmp / "m.wtxt", sign_key=str(tmp / "missing.key"))


def test_ztensor_digests_catch_a_flipped_byte(tmp):
    need("ztensor")
    for digest in ("crc32c", "sha256"):
        p = tmp / f"m-{digest}.zt"
        tessera.save(tensors(), p, digests=digest)
        f = tessera.open(p)
        assert statuses(f.verify(), digest) == {"ok"}
        off = f.tensor_info("w")["storage"]["offset"]
        del f
        flip(p, off + 17)
        r = tessera.open(p).verify()
        assert not r.ok and "failed" in statuses(r, digest)


def test_fold_ecc_repairs_a_flipped_byte(tmp):
    need("fold")
    p = tmp / "m.fold"
    tessera.save(tensors(), p, ecc=8)
    f = tessera.open(p)
    off = f.tensor_info("w")["storage"]["offset"]
    del f
    flip(p, off + 100)
    f = tessera.open(p)
    r = f.verify()
    assert r.ok  # repaired is not a failure
    assert "repaired" in statuses(r, "reed-solomon")
    assert np.array_equal(f["w"], tensors()["w"])


def test_aero_hash_options_add_their_layers(tmp):
    need("aero")
    p = tmp / "m.aero"
    tessera.save(tensors(), p, tensor_hashes=True, control_integrity=True, page_hashes=4096)
    r = tessera.open(p).verify()
    layers = {c.layer for c in r.checks}
    assert r.ok
    assert {"ihsh", "phsh"} <= layers, layers
    plain = tmp / "plain.aero"
    tessera.save(tensors(), plain)
    assert "phsh" not in {c.layer for c in tessera.open(plain).verify().checks}


def test_compression_options(tmp):
    need("ztensor")
    rng = np.random.default_rng(0)
    t = {"z": np.zeros(1 << 16, dtype=np.float32), "r": rng.standard_normal(1000).astype(np.float32)}
    raw, fast, best = tmp / "raw.zt", tmp / "fast.zt", tmp / "best.zt"
    tessera.save(t, raw)
    tessera.save(t, fast, compression="zstd:1")
    tessera.save(t, best, compression=True, compression_level=19)
    assert best.stat().st_size <= fast.stat().st_size < raw.stat().st_size
    for p in (raw, fast, best):
        f = tessera.open(p)
        assert np.array_equal(f["z"], t["z"]) and np.array_equal(f["r"], t["r"])
    assert tessera.open(fast).tensor_info("z")["storage"]["encoding"] != tessera.open(raw).tensor_info("z")["storage"]["encoding"]


# -- options a format does not take are refused, naming the option and the format


def refused(call, option, fmt):
    with pytest.raises(tessera.InvalidInputError) as e:
        call()
    assert option in str(e.value) and fmt in str(e.value), str(e.value)


def test_compression_into_safetensors_and_aero_is_refused(tmp):
    need("safetensors")
    need("aero")
    st, aero = tmp / "m.safetensors", tmp / "m.aero"
    refused(lambda: tessera.save(tensors(), st, compression="zstd:15"), "compression", "safetensors")
    refused(lambda: tessera.save(tensors(), aero, compression="zstd"), "compression", "AERO")
    refused(lambda: tessera.save(tensors(), format="aero", compression=True), "compression", "AERO")
    assert not st.exists() and not aero.exists()
    # compression=None is the default, not a request.
    tessera.save(tensors(), st, compression=None)


def test_options_gguf_does_not_take_are_refused(tmp):
    need("gguf")
    p = tmp / "m.gguf"
    for opts, name in [
        ({"digests": "sha256"}, "digests"),
        ({"ecc": 8}, "ecc"),
        ({"sign_key": bytes(range(32))}, "sign_key"),
        ({"tensor_hashes": True}, "tensor_hashes"),
        ({"generation": 3}, "generation"),
    ]:
        refused(lambda: tessera.save(tensors(), p, **opts), name, "GGUF")
    assert not p.exists()
    src = tmp / "m.npz"
    tessera.save(tensors(), src)
    refused(lambda: tessera.convert(src, p, ecc=8, generation=3), "ecc, generation", "GGUF")
    assert not p.exists()


def test_zstd_levels_out_of_range_say_so(tmp):
    need("ztensor")
    for bad in ("zstd:99", 0, 23):
        with pytest.raises(tessera.InvalidInputError, match="zstd levels are 1–22"):
            tessera.save(tensors(), tmp / "m.zt", compression=bad)


def test_cli_names_work_as_aliases(tmp):
    need("ztensor")
    need("wtxt")
    a = tessera.save(tensors(), format="ztensor", compression="zstd:5", digests="sha256")
    b = tessera.save(tensors(), format="ztensor", compress="zstd:5", digest="sha256")
    assert a == b and a != tessera.save(tensors(), format="ztensor")
    w1 = tessera.save(tensors(), format="wtxt", generation=4, timestamp="2024-01-02T03:04:05Z",
                      fixed_salt=bytes(8), hmac_key=b"k")
    w2 = tessera.save(tensors(), format="wtxt", gen=4, ts="2024-01-02T03:04:05Z",
                      salt="0000000000000000", hmac_key="k")
    assert w1 == w2


def test_unknown_and_malformed_options(tmp):
    need("aero")
    with pytest.raises(TypeError, match="unknown save option"):
        tessera.save(tensors(), tmp / "m.aero", no_such_option=1)
    with pytest.raises(tessera.InvalidInputError, match="shard_size"):
        tessera.save(tensors(), tmp / "m.aero", shard_size="1Q")
    tessera.save(tensors(), tmp / "m.aero", shard_size="1K")  # sizes take suffixes
    assert len(tessera.open(tmp / "m.aero").chunks) > 3


def test_formats_list_their_options():
    by_name = {f["name"]: f for f in tessera.formats()}
    assert "compression" in by_name["ztensor"]["options"]
    assert by_name["safetensors"]["options"] == []
    assert "compression" not in by_name["aero"]["options"]
    assert "zstd" not in by_name["aero"].get("compression", [])

"""zTensor v1.0 against the real `ztensor==1.0.1` package, both directions.

- Their files read by us: `tessera inspect --json` (dtype, shape, layout, encoding),
  `tessera verify`, and `tessera convert their.zt ours.zt`, whose output the peer reads
  back with the original values. Converting their file with the same compression gives
  their exact bytes, the `generator` string aside.
- Our files read by them: raw and zstd, with and without crc32c/sha256 digests; the peer
  checks crc32c on read, so a wrong CRC from us would fail here.

Note: ztensor 1.0.1's `read_tensor` for sparse layouts returns arrays over freed memory
(it drops the FFI view before scipy copies it), so sparse components are read here with
its `_read_component`, keeping the view alive until the values are copied.
"""
import hashlib
import json
import struct

import cbor2
import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp
import ztensor

from conftest import SAMPLES, run, run_json

DTYPES = [
    ("float32", np.float32, "f32"),
    ("float64", np.float64, "f64"),
    ("float16", np.float16, "f16"),
    ("bfloat16", ml_dtypes.bfloat16, "bf16"),
    ("int8", np.int8, "i8"),
    ("int16", np.int16, "i16"),
    ("int32", np.int32, "i32"),
    ("int64", np.int64, "i64"),
    ("uint8", np.uint8, "u8"),
    ("uint16", np.uint16, "u16"),
    ("uint32", np.uint32, "u32"),
    ("uint64", np.uint64, "u64"),
    ("bool", np.bool_, "bool"),
]


def arrays():
    """One array per dtype with values covering the type's range, plus odd shapes."""
    rng = np.random.default_rng(7)
    out = {}
    for zt, np_t, _ in DTYPES:
        if np_t is np.bool_:
            a = rng.integers(0, 2, size=(3, 5)).astype(np.bool_)
        elif np.issubdtype(np.dtype(np_t), np.integer):
            info = np.iinfo(np_t)
            a = rng.integers(info.min, info.max, size=(3, 5), dtype=np_t, endpoint=True)
            a.flat[0], a.flat[1] = info.min, info.max
        else:
            a = (rng.standard_normal((3, 5)) * 100).astype(np_t)
        out["t_" + zt] = a
    out["big_f32"] = np.arange(50_000, dtype=np.float32).reshape(100, 500)
    out["scalar_f64"] = np.array(3.25, dtype=np.float64)  # the peer stores shape [1]
    out["empty"] = np.zeros((0, 4), dtype=np.int32)
    return out


def sparse():
    csr = sp.csr_matrix(np.array([[1.5, 0, 2], [0, 0, 0], [0, -3, 0]], dtype=np.float32))
    coo = sp.coo_matrix(np.array([[0, 0, 5], [6, 0, 0]], dtype=np.int64))
    return csr, coo


def peer_write(path, compress, with_sparse=True):
    data = arrays()
    csr, coo = sparse()
    with ztensor.Writer(str(path)) as w:
        for name, a in data.items():
            w.add_tensor(name, a, compress=compress)
        if not with_sparse:
            return data
        w.add_sparse_csr("csr", csr.data, csr.indices, csr.indptr, csr.shape)
        w.add_sparse_coo("coo", coo.data, np.vstack([coo.row, coo.col]), coo.shape)
    return data


def component(r, name, role, dtype):
    arr, ref = r._read_component(name, role, lambda: dtype)
    out = np.array(arr, copy=True)
    del ref
    return out


def peer_read(path):
    """Everything in a file, as the peer reads it (copied out of its buffers)."""
    out = {}
    with ztensor.Reader(str(path)) as r:
        for m in r.tensors:
            n = m.name
            if m.layout == "dense":
                out[n] = ("dense", np.array(r.read_tensor(n), copy=True))
            elif m.layout == "sparse_csr":
                out[n] = ("csr", m.shape, component(r, n, "values", m.dtype),
                          component(r, n, "indices", np.uint64), component(r, n, "indptr", np.uint64))
            elif m.layout == "sparse_coo":
                out[n] = ("coo", m.shape, component(r, n, "values", m.dtype),
                          component(r, n, "coords", np.uint64))
    return out


def same(a, b):
    """Bitwise equality of two arrays (NaN-safe), with dtype and shape."""
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.tobytes() == b.tobytes()


def check_values(path, data):
    got = peer_read(path)
    for name, a in data.items():
        kind, arr = got[name]
        assert kind == "dense"
        same(arr, a.reshape(1) if a.ndim == 0 else a)
    csr, coo = sparse()
    _, shape, v, i, p = got["csr"]
    assert shape == csr.shape
    same(v, csr.data)
    assert i.tolist() == csr.indices.tolist() and p.tolist() == csr.indptr.tolist()
    _, shape, v, c = got["coo"]
    assert shape == coo.shape
    same(v, coo.data)
    assert c.tolist() == coo.row.tolist() + coo.col.tolist()


def manifest(path):
    d = open(path, "rb").read()
    n = struct.unpack("<Q", d[-8:])[0]
    return d, d[: len(d) - 8 - n], d[len(d) - 8 - n: -8]


def with_generator(path, generator):
    """The file's bytes with only the manifest's generator replaced (cbor2 keeps key
    order and writes minimal definite-length items, as serde_cbor does)."""
    d, body, m = manifest(path)
    decoded = cbor2.loads(m)
    assert cbor2.dumps(decoded) == m, "cbor2 re-encodes the original manifest exactly"
    decoded["generator"] = generator
    m2 = cbor2.dumps(decoded)
    return body + m2 + struct.pack("<Q", len(m2))


def our_generator(path):
    return cbor2.loads(manifest(path)[2])["generator"]


@pytest.mark.parametrize("compress", [False, True])
def test_their_files_read_by_us(tmp_path, compress):
    theirs = tmp_path / "theirs.zt"
    data = peer_write(theirs, compress)
    doc = run_json("inspect", theirs)
    assert doc["format"] == "ztensor" and doc["version"] == "1.0"
    tensors = {t["name"]: t for t in doc["tensors"]}
    for zt, np_t, ours in DTYPES:
        t = tensors["t_" + zt]
        assert (t["dtype"], t["shape"], t["layout"]) == (ours, [3, 5], "dense")
        assert t["encoding"] == ("zstd" if compress else "raw")
    assert tensors["scalar_f64"]["shape"] == [1]
    assert tensors["empty"]["shape"] == [0, 4]
    assert (tensors["csr"]["layout"], tensors["csr"]["dtype"], tensors["csr"]["shape"]) == ("sparse_csr", "f32", [3, 3])
    assert (tensors["coo"]["layout"], tensors["coo"]["dtype"], tensors["coo"]["shape"]) == ("sparse_coo", "i64", [2, 3])
    # Tensors are listed in file (write) order.
    assert [t["name"] for t in doc["tensors"]] == list(data) + ["csr", "coo"]

    v = run_json("verify", theirs)
    assert v["ok"]
    assert {c["status"] for c in v["checks"]} <= {"ok", "not checked"}

    # Through our reader and writer, back to them: same values. (Without a digest, as
    # the peer writes by default; ours stores crc32c unless told none.)
    ours = tmp_path / "ours.zt"
    args = (["--compress", "zstd"] if compress else []) + ["-O", "digests=none"]
    run("convert", theirs, ours, *args)
    check_values(ours, data)
    # ...and the same bytes, generator aside. (The peer cannot compress sparse
    # components, so with zstd the comparison uses a dense-only file.)
    if compress:
        theirs = tmp_path / "theirs_dense.zt"
        peer_write(theirs, compress, with_sparse=False)
        ours = tmp_path / "ours_dense.zt"
        run("convert", theirs, ours, *args)
    assert open(ours, "rb").read() == with_generator(theirs, our_generator(ours))


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("digest", [None, "crc32c", "sha256", "none"])
def test_our_files_read_by_them(tmp_path, compress, digest):
    theirs = tmp_path / "theirs.zt"
    data = peer_write(theirs, False)
    ours = tmp_path / "ours.zt"
    args = (["--compress", "zstd"] if compress else []) + (["--digest", digest] if digest else [])
    # No --digest: crc32c, Tessera's default (so `verify` has something to check).
    digest = digest or "crc32c"
    run("convert", theirs, ours, *args)
    check_values(ours, data)  # the peer checks crc32c digests while reading

    d, _, m = manifest(ours)
    man = cbor2.loads(m)
    assert list(man) == ["version", "generator", "attributes", "tensors"]
    assert man["version"] == "1.0"
    assert list(man["tensors"]) == sorted(man["tensors"])
    for name, t in man["tensors"].items():
        assert list(t) == ["dtype", "shape", "format", "components"]
        assert list(t["components"]) == sorted(t["components"])
        for c in t["components"].values():
            assert c["offset"] % 64 == 0
            stored = d[c["offset"]: c["offset"] + c["length"]]
            assert c.get("encoding") == ("zstd" if compress else None)
            if digest == "crc32c":
                import google_crc32c
                assert c["digest"] == "crc32c:0x%08X" % google_crc32c.value(stored)
            elif digest == "sha256":
                assert c["digest"] == "sha256:" + hashlib.sha256(stored).hexdigest()
            else:
                assert "digest" not in c
    assert run_json("verify", ours)["ok"]


def test_our_crc_mismatch_is_caught_by_them_and_us(tmp_path):
    theirs = tmp_path / "theirs.zt"
    peer_write(theirs, False)
    ours = tmp_path / "ours.zt"
    run("convert", theirs, ours, "--digest", "crc32c")
    d, _, m = manifest(ours)
    off = cbor2.loads(m)["tensors"]["t_int32"]["components"]["data"]["offset"]
    bad = bytearray(d)
    bad[off] ^= 0x01
    p = tmp_path / "bad.zt"
    p.write_bytes(bad)
    with ztensor.Reader(str(p)) as r:
        with pytest.raises(ztensor.ZTensorError, match="Checksum mismatch"):
            r.read_tensor("t_int32")
    res = run("verify", p, "--json", check=False)
    assert res.returncode == 1
    failed = [c for c in json.loads(res.stdout)["checks"] if c["status"] == "failed"]
    assert [(c["subject"], c["layer"]) for c in failed] == [('tensor "t_int32"', "crc32c")]


def test_cli_convert_zstd_sha256_and_tamper(tmp_path):
    src = SAMPLES / "ztensor" / "pypi_ztensor_1.0.1_mixed.zt"
    out = tmp_path / "b.zt"
    run("convert", src, out, "--compress", "zstd", "--digest", "sha256")
    v = run_json("verify", out)
    assert v["ok"] and all(c["status"] == "ok" for c in v["checks"])
    assert {c["layer"] for c in v["checks"]} == {"sha256", "structure"}
    got = peer_read(out)
    same(got["w"][1], np.arange(6, dtype=np.float32).reshape(2, 3))
    same(got["z"][1], np.arange(100, dtype=np.int64))
    same(got["s"][1], np.array([7], dtype=np.int16))
    _, shape, vals, idx, ptr = got["csr"]
    assert vals.tolist() == [1.0, 2.0] and idx.tolist() == [0, 2] and ptr.tolist() == [0, 1, 2]
    _, shape, vals, coords = got["coo"]
    assert vals.tolist() == [5, 6] and coords.tolist() == [0, 1, 2, 0]
    # Tamper with the compressed bytes of "z": verify names it.
    d, _, m = manifest(out)
    c = cbor2.loads(m)["tensors"]["z"]["components"]["data"]
    bad = bytearray(d)
    bad[c["offset"] + c["length"] - 1] ^= 0xFF
    p = tmp_path / "bad.zt"
    p.write_bytes(bad)
    res = run("verify", p, "--json", check=False)
    assert res.returncode == 1
    failed = {(c["subject"], c["layer"]) for c in json.loads(res.stdout)["checks"] if c["status"] == "failed"}
    assert ('tensor "z"', "sha256") in failed
    assert all(s == 'tensor "z"' for s, _ in failed)


def hand_built(path, tensors, attributes):
    """A v1.0 file built with struct/cbor2 only (not by either writer)."""
    buf = bytearray(b"ZTEN1000")
    man = {}
    for name, (dtype, shape, raw) in tensors.items():
        buf += b"\0" * (-len(buf) % 64)
        man[name] = {"dtype": dtype, "shape": shape, "format": "dense",
                     "components": {"data": {"offset": len(buf), "length": len(raw)}}}
        buf += raw
    m = cbor2.dumps({"version": "1.0", "generator": "hand", "attributes": attributes, "tensors": man})
    path.write_bytes(bytes(buf) + m + struct.pack("<Q", len(m)))


def test_scalars_and_attributes(tmp_path):
    src = tmp_path / "hand.zt"
    attrs = {"license": "MIT", "config": '{"layers": 2}', "description": "scalars"}
    hand_built(src, {"s": ("float32", [], struct.pack("<f", 1.5)),
                     "v": ("uint16", [2], struct.pack("<2H", 1, 65535))}, attrs)
    doc = run_json("inspect", src)
    assert doc["metadata"] == attrs  # JSON-looking strings stay strings
    assert {t["name"]: t["shape"] for t in doc["tensors"]} == {"s": [], "v": [2]}
    ours = tmp_path / "ours.zt"
    run("convert", src, ours, "--compress", "zstd")
    man = cbor2.loads(manifest(ours)[2])
    assert man["attributes"] == attrs and list(man["attributes"]) == sorted(attrs)
    assert man["tensors"]["s"]["shape"] == []
    with ztensor.Reader(str(ours)) as r:
        s = np.array(r.read_tensor("s"), copy=True)
        assert s.shape == () and s.dtype == np.float32 and float(s) == 1.5
        assert np.array(r.read_tensor("v")).tolist() == [1, 65535]


def test_determinism_through_the_cli(tmp_path):
    theirs = tmp_path / "theirs.zt"
    peer_write(theirs, True)
    a, b = tmp_path / "a.zt", tmp_path / "b.zt"
    run("convert", theirs, a, "--compress", "zstd", "--digest", "crc32c")
    run("convert", theirs, b, "--compress", "zstd", "--digest", "crc32c")
    assert a.read_bytes() == b.read_bytes()
    # Converting in place keeps the file readable (write to a temp file, then rename).
    run("convert", a, a)
    assert run_json("verify", a)["ok"]

"""NumPy interop: np.save / np.savez / np.savez_compressed files read by us and rewritten
so that np.load gives equal arrays (byte-identical to np.save for C-order little-endian
arrays); bf16 and fp8 via ml_dtypes; scalars, zero-size, Fortran order, big-endian;
`extract` output loads in numpy; verify checks the zip CRC."""
import zipfile

import ml_dtypes
import numpy as np
import pytest

from conftest import run, run_json

R = np.random.default_rng(5)
ARRAYS = {
    "f32": R.standard_normal((3, 4)).astype(np.float32),
    "f64_scalar": np.array(-2.75),
    "f16": R.standard_normal(5).astype(np.float16),
    "i8": np.array([-128, 0, 127], np.int8),
    "u8": np.arange(10, dtype=np.uint8).reshape(2, 5),
    "i16": np.array([-300, 300], np.int16),
    "u16": np.array([0, 65535], np.uint16),
    "i32": np.array([[-1], [2**31 - 1]], np.int32),
    "u32": np.array([2**32 - 1], np.uint32),
    "i64": np.array([-(2**63)], np.int64),
    "u64": np.array([2**64 - 1], np.uint64),
    "bool": np.array([[True, False, True]]),
    "c8": np.array([1 + 2j], np.complex64),
    "c16": np.array([[1 - 2j, 3j]], np.complex128),
    "zero": np.zeros((3, 0, 2), np.float32),
    "bf16": R.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
    "e4m3": R.standard_normal(6).astype(ml_dtypes.float8_e4m3fn),
    "fortran": np.asfortranarray(R.standard_normal((3, 5)).astype(np.float32)),
    "fortran3d": np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4)),
    "big_endian": np.array([[1, 2], [3, 70000]], ">i4"),
    "big_endian_c16": np.array([1 + 1j, -2j], ">c16"),
    "be_scalar": np.array(3.5, ">f8"),
}


def equal(b, a):
    """np.load result `b` equals the original `a` (void arrays viewed as ml_dtypes)."""
    if b.dtype.kind == "V":
        b = b.view(a.dtype)
    assert b.shape == a.shape
    assert b.dtype.newbyteorder("=") == a.dtype.newbyteorder("=") or b.dtype == a.dtype.newbyteorder("<")
    assert np.ascontiguousarray(b).astype(b.dtype.newbyteorder("<")).tobytes() == \
        np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


@pytest.mark.parametrize("name", list(ARRAYS))
def test_np_save_read_and_rewritten(tmp_path, name):
    a = ARRAYS[name]
    src = tmp_path / "in.npy"
    np.save(src, a)
    doc = run_json("inspect", src)
    assert doc["format"] == "npy" and doc["tensors"][0]["name"] == "array"
    assert doc["tensors"][0]["shape"] == list(a.shape)
    out = tmp_path / "out.npy"
    run("convert", src, out)
    equal(np.load(out), a)
    canonical = a.dtype.byteorder != ">" and (a.flags.c_contiguous)
    if canonical:
        assert out.read_bytes() == src.read_bytes(), "not what np.save writes"


@pytest.mark.parametrize("saver", ["savez", "savez_compressed"])
@pytest.mark.parametrize("compress", [False, True])
def test_npz_both_ways(tmp_path, saver, compress):
    src = tmp_path / "in.npz"
    getattr(np, saver)(src, **ARRAYS)
    doc = run_json("inspect", src)
    assert [t["name"] for t in doc["tensors"]] == list(ARRAYS)
    out = tmp_path / "out.npz"
    args = ["convert", src, out] + (["--compress", "zstd"] if compress else [])
    run(*args)
    with np.load(out) as z:
        assert list(z.keys()) == list(ARRAYS)
        for k, a in ARRAYS.items():
            equal(z[k], a)
    methods = {i.compress_type for i in zipfile.ZipFile(out).infolist()}
    assert methods == ({zipfile.ZIP_DEFLATED} if compress else {zipfile.ZIP_STORED})
    assert zipfile.ZipFile(out).testzip() is None
    # Deterministic.
    out2 = tmp_path / "out2.npz"
    run(*(["convert", src, out2] + (["--compress", "zstd"] if compress else [])))
    assert out.read_bytes() == out2.read_bytes()
    assert run("verify", out).returncode == 0


def test_npz_to_safetensors_and_back(tmp_path):
    arrays = {k: v for k, v in ARRAYS.items() if k not in ("c16", "big_endian_c16")}
    src = tmp_path / "in.npz"
    np.savez(src, **arrays)
    st = tmp_path / "m.safetensors"
    run("convert", src, st)
    back = tmp_path / "back.npz"
    run("convert", st, back)
    with np.load(back) as z:
        for k, a in arrays.items():
            equal(z[k], a)


def test_extract_loads_in_numpy(tmp_path):
    src = tmp_path / "in.npz"
    np.savez_compressed(src, **ARRAYS)
    for k, a in ARRAYS.items():
        out = tmp_path / f"{k}.npy"
        run("extract", src, k, "-o", out)
        equal(np.load(out), a)


def test_corrupt_member_fails_verify(tmp_path):
    src = tmp_path / "in.npz"
    np.savez(src, w=np.arange(64, dtype=np.float32))
    d = bytearray(src.read_bytes())
    d[d.index(b"\x93NUMPY") + 128 + 10] ^= 1
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(d))
    p = run("verify", bad, check=False)
    assert p.returncode == 1, p
    assert "crc32" in p.stdout


def test_hostile_npy_is_a_clear_error(tmp_path):
    p = tmp_path / "h.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': ()}  \n")
    r = run("inspect", p, check=False)
    assert r.returncode == 4 and "needs the keys" in r.stderr, r


def test_e5m2_reads_and_is_refused_or_extracted_explicitly(tmp_path):
    """ml_dtypes saves float8_e5m2 as '<f1', which np.load refuses; we read it as f8_e5m2.
    We write every fp8 flavour as '<V1' (np.load reads it), which reads back as f8_e4m3fn,
    so a conversion into NumPy refuses e5m2 unless --cast; extract writes '<V1'."""
    a = R.standard_normal(6).astype(ml_dtypes.float8_e5m2)
    src = tmp_path / "e5m2.npy"
    np.save(src, a)
    assert run_json("inspect", src)["tensors"][0]["dtype"] == "f8_e5m2"
    r = run("convert", src, tmp_path / "o.npy", check=False)
    assert r.returncode == 3 and "--cast" in r.stderr, r
    run("convert", src, tmp_path / "c.npy", "--cast")
    c = np.load(tmp_path / "c.npy")
    assert np.array_equal(c.astype(np.float64), a.astype(np.float64))
    st = tmp_path / "m.safetensors"
    run("convert", src, st)
    run("extract", st, "array", "-o", tmp_path / "x.npy")
    x = np.load(tmp_path / "x.npy")
    assert x.dtype == np.dtype("V1")
    assert x.view(ml_dtypes.float8_e5m2).tobytes() == a.tobytes()

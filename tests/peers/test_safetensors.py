"""safetensors interop with the `safetensors` package (0.8.0): files it writes read by
us with the same tensors and metadata and rewritten by us byte for byte; files we write
(from NumPy sources, never from safetensors) read by it with equal bytes, and identical
to what it writes for the same arrays. bf16 and fp8 via ml_dtypes."""
import struct

import ml_dtypes
import numpy as np
import pytest
import safetensors
from safetensors.numpy import save_file

from conftest import run, run_json

ST2NP = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
    "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
    "F16": np.float16, "BF16": ml_dtypes.bfloat16, "F32": np.float32, "F64": np.float64,
    "C64": np.complex64, "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
    "F8_E8M0": ml_dtypes.float8_e8m0fnu, "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
}
OURS = {
    "bool": "BOOL", "u8": "U8", "i8": "I8", "u16": "U16", "i16": "I16", "u32": "U32",
    "i32": "I32", "u64": "U64", "i64": "I64", "f16": "F16", "bf16": "BF16", "f32": "F32",
    "f64": "F64", "c64": "C64", "f8_e4m3fn": "F8_E4M3", "f8_e5m2": "F8_E5M2",
    "f8_e8m0": "F8_E8M0", "f8_e4m3fnuz": "F8_E4M3FNUZ", "f8_e5m2fnuz": "F8_E5M2FNUZ",
}


def peer_load(path):
    """{name: ndarray} through the package's own deserializer (its numpy loader has no
    bf16/fp8)."""
    out = {}
    for name, t in safetensors.deserialize(open(path, "rb").read()):
        out[name] = np.frombuffer(t["data"], ST2NP[t["dtype"]]).reshape(t["shape"])
    return out


def models():
    r = np.random.default_rng(3)
    return {
        "dtypes": {
            "w": r.standard_normal((8, 4)).astype(np.float32),
            "b": r.standard_normal(4).astype(np.float64),
            "h": r.standard_normal((2, 2)).astype(np.float16),
            "bf": r.standard_normal((3, 5)).astype(ml_dtypes.bfloat16),
            "e4m3": r.standard_normal(9).astype(ml_dtypes.float8_e4m3fn),
            "e5m2": r.standard_normal(9).astype(ml_dtypes.float8_e5m2),
            "i64": np.arange(-3, 3, dtype=np.int64),
            "u16": np.array([1, 65535], np.uint16),
            "i16": np.array([-1, 1], np.int16),
            "mask": np.array([True, False]),
            "scalar": np.array(1.5, np.float32),
            "zero": np.zeros((0, 7), np.int32),
        },
        "names": {n: np.array([i], np.uint8) for i, n in enumerate(["B", "_", "a", "aa", "é", "a.b", "a\"q"])},
        "fp8_only": {
            "q": r.standard_normal((4, 4)).astype(ml_dtypes.float8_e4m3fn),
            "s": r.standard_normal(4).astype(ml_dtypes.float8_e8m0fnu),
            "u": r.standard_normal(4).astype(ml_dtypes.float8_e4m3fnuz),
            "v": r.standard_normal(4).astype(ml_dtypes.float8_e5m2fnuz),
        },
        "empty": {},
    }


# The package orders __metadata__ by HashMap (random per run); we keep the order we read,
# so a rewrite of its file is byte-identical even with several keys.
METAS = [
    None,
    {"format": "pt"},
    {"note": "quotes \" backslash \\ newline \n é"},
    {"k%d" % i: str(i) for i in range(6)},
]


@pytest.mark.parametrize("model", list(models()))
@pytest.mark.parametrize("meta", range(len(METAS)))
def test_peer_written_read_and_rewritten_byte_identical(tmp_path, model, meta):
    tensors = models()[model]
    src = tmp_path / "peer.safetensors"
    save_file(tensors, str(src), metadata=METAS[meta])
    doc = run_json("inspect", src)
    assert doc["format"] == "safetensors"
    got = {t["name"]: t for t in doc["tensors"]}
    assert set(got) == set(tensors)
    for name, a in tensors.items():
        assert np.dtype(ST2NP[OURS[got[name]["dtype"]]]) == a.dtype, name
        assert got[name]["shape"] == list(a.shape)
    assert doc["metadata"] == (METAS[meta] or {})
    out = tmp_path / "ours.safetensors"
    run("convert", src, out)
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("model", ["dtypes", "names", "empty"])
def test_we_write_from_numpy_they_read_equal_and_identical(tmp_path, model):
    tensors = models()[model]
    npz = tmp_path / "src.npz"
    np.savez(npz, **tensors)
    out = tmp_path / "ours.safetensors"
    run("convert", npz, out)
    back = peer_load(out)
    assert set(back) == set(tensors)
    for k, a in tensors.items():
        assert back[k].dtype == a.dtype, k
        assert back[k].shape == a.shape, k
        assert back[k].tobytes() == a.tobytes(), k
    ref = tmp_path / "peer.safetensors"
    save_file(tensors, str(ref))
    assert out.read_bytes() == ref.read_bytes()


def test_extract_to_npy_loads_in_numpy(tmp_path):
    tensors = models()["dtypes"]
    src = tmp_path / "m.safetensors"
    save_file(tensors, str(src))
    for name, a in tensors.items():
        out = tmp_path / f"{name}.npy"
        run("extract", src, name, "-o", out)
        b = np.load(out)
        if b.dtype.kind == "V":
            b = b.view(a.dtype)
        assert b.dtype == a.dtype and b.shape == a.shape, name
        assert b.tobytes() == a.tobytes(), name


def hostile(tmp_path, header, data=b""):
    p = tmp_path / "h.safetensors"
    h = header.encode()
    p.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return run("inspect", p, check=False)


@pytest.mark.parametrize(
    "header,data,needle",
    [
        ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"xyz", "gap"),
        ('{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,2]}}', b"xy", "needs 3"),
        ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"xyz", "cover 2 bytes"),
        ('{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"xy", "whole bytes"),
        ('{"__metadata__":{"a":1}}', b"", "JSON"),
        ('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xy", "duplicate"),
    ],
)
def test_hostile_files_are_clear_errors_like_the_peer(tmp_path, header, data, needle):
    p = hostile(tmp_path, header, data)
    assert p.returncode in (3, 4), p
    assert needle in p.stderr, p.stderr
    with pytest.raises(Exception):
        safetensors.deserialize(struct.pack("<Q", len(header)) + header.encode() + data)

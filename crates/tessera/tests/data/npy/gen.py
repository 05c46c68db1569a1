"""Writes the .npy/.npz test vectors with numpy (np.save, np.savez, np.savez_compressed,
np.lib.format.write_array) and ml_dtypes, plus `expected.json`: per file and array the
dtype (our canonical name), shape and the C-order little-endian bytes as hex. Also writes
hostile zips (hostile_*.npz) with zipfile + struct patches.

Run: /tmp/pyenv/bin/python gen.py   (needs numpy, ml_dtypes)
"""
import io
import json
import pathlib
import struct
import zipfile

import ml_dtypes
import numpy as np

HERE = pathlib.Path(__file__).parent
CANON = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16",
    "uint32": "u32", "int32": "i32", "uint64": "u64", "int64": "i64", "float16": "f16",
    "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64",
    "complex128": "c128", "float8_e4m3fn": "f8_e4m3fn", "float8_e5m2": "f8_e5m2",
}


def canon_bytes(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def describe(a):
    return {"dtype": CANON[a.dtype.name], "shape": list(a.shape), "hex": canon_bytes(a).hex()}


def main():
    r = np.random.default_rng(11)
    npy = {
        "f32_2x3.npy": r.standard_normal((2, 3)).astype(np.float32),
        "f64_scalar.npy": np.array(2.5),
        "i16_empty.npy": np.zeros((0, 3), np.int16),
        "bool.npy": np.array([[True, False], [False, True]]),
        "u8.npy": np.arange(7, dtype=np.uint8),
        "i8.npy": np.array([-128, 5, 127], np.int8),
        "u16.npy": np.array([1, 65535], np.uint16),
        "u32.npy": np.array([4000000000], np.uint32),
        "u64.npy": np.array([2**64 - 1, 3], np.uint64),
        "i64.npy": np.array([-(2**63), 9], np.int64),
        "f16.npy": np.array([0.5, -1, 65504], np.float16),
        "c8.npy": np.array([1 + 2j, 3 - 4j], np.complex64),
        "c16.npy": np.array([[1 + 2j], [-3.5j]], np.complex128),
        "be_i32.npy": np.array([[1, -2, 3], [4, 5, 70000]], ">i4"),
        "be_f64_scalar.npy": np.array(1.25, ">f8"),
        "be_c8.npy": np.array([1 + 2j, -3j], ">c8"),
        "fortran_u16.npy": np.asfortranarray(np.arange(12, dtype=np.uint16).reshape(3, 4)),
        "fortran_be_f4_3d.npy": np.asfortranarray(np.arange(24, dtype=">f4").reshape(2, 3, 4)),
        "bf16.npy": r.standard_normal((3, 2)).astype(ml_dtypes.bfloat16),
        "e4m3.npy": np.array([1.5, -2, 448], ml_dtypes.float8_e4m3fn),
        "e5m2.npy": np.array([1.5, -2, 57344], ml_dtypes.float8_e5m2),
        "big_shape.npy": np.zeros((1, 1, 1, 1, 1, 1, 1, 2), np.float32),
    }
    expected = {}
    for name, a in npy.items():
        np.save(HERE / name, a)
        expected[name] = {"array": describe(a)}
    # Explicit header versions 2.0 and 3.0 (3.0: UTF-8 header).
    for ver, name in [((2, 0), "v2.npy"), ((3, 0), "v3.npy")]:
        a = np.arange(5, dtype=np.int32)
        with open(HERE / name, "wb") as f:
            np.lib.format.write_array(f, a, version=ver)
        expected[name] = {"array": describe(a)}

    arrays = {
        "w": r.standard_normal((4, 3)).astype(np.float32),
        "layers/0/bias": np.arange(3, dtype=np.int64),
        "s": np.array(7, np.uint8),
        "z": np.zeros((2, 0), np.float64),
        "be": np.array([1, 2], ">u2"),
        "f": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        "bf": np.array([1, -2], ml_dtypes.bfloat16),
    }
    np.savez(HERE / "savez.npz", **arrays)
    np.savez_compressed(HERE / "savez_compressed.npz", **arrays)
    np.savez(HERE / "positional.npz", np.ones(2, np.float32), np.zeros(1, np.int8))
    for f in ["savez.npz", "savez_compressed.npz"]:
        expected[f] = {k: describe(v) for k, v in arrays.items()}
    expected["positional.npz"] = {
        "arr_0": describe(np.ones(2, np.float32)),
        "arr_1": describe(np.zeros(1, np.int8)),
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    hostile()


def member(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def zi(name, deflate=False):
    """A ZipInfo with a fixed date, so the vectors regenerate identically."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    return info


def hostile():
    a = member(np.arange(4, dtype=np.float32))
    # Duplicate entry names.
    with zipfile.ZipFile(HERE / "hostile_duplicate.npz", "w") as z:
        z.writestr(zi("a.npy"), a)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z.writestr(zi("a.npy"), a)
    # Path escapes.
    with zipfile.ZipFile(HERE / "hostile_dotdot.npz", "w") as z:
        z.writestr(zi("../evil.npy"), a)
    with zipfile.ZipFile(HERE / "hostile_absolute.npz", "w") as z:
        z.writestr(zi("/etc/evil.npy"), a)
    # Not an array.
    with zipfile.ZipFile(HERE / "hostile_not_npy.npz", "w") as z:
        z.writestr(zi("readme.txt"), b"hello")
    # Zip bomb: 64 MiB of zeros deflated, sizes patched down to 200 bytes.
    big = member(np.zeros(16 << 20, np.float32))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zi("bomb.npy", True), big)
    (HERE / "hostile_bomb.npz").write_bytes(patch_sizes(buf.getvalue(), 200))
    # Huge declared size (stored member claims 2^31 bytes but holds 144).
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zi("huge.npy"), a)
    (HERE / "hostile_huge_size.npz").write_bytes(patch_sizes(buf.getvalue(), 2**31))
    # CRC mismatch in a stored member (data byte flipped after the header).
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zi("a.npy"), a)
    d = bytearray(buf.getvalue())
    i = d.index(b"\x93NUMPY") + len(a) - 1
    d[i] ^= 0x40
    (HERE / "corrupt_crc.npz").write_bytes(bytes(d))
    # Compressed member whose CRC is wrong.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zi("a.npy", True), a)
    d = bytearray(buf.getvalue())
    for sig, off in [(b"PK\x03\x04", 14), (b"PK\x01\x02", 16)]:
        j = d.index(sig) + off
        d[j] ^= 0xFF
    (HERE / "corrupt_crc_deflate.npz").write_bytes(bytes(d))
    # Overlapping members: a second central record pointing at the first local header.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zi("a.npy"), a)
        z.writestr(zi("b.npy"), a)
    d = bytearray(buf.getvalue())
    cd = [i for i in range(len(d)) if d[i:i + 4] == b"PK\x01\x02"]
    struct.pack_into("<I", d, cd[1] + 42, 0)  # b's local header offset -> a's
    (HERE / "hostile_overlap.npz").write_bytes(bytes(d))


def patch_sizes(data, size):
    """Sets the uncompressed size in the local and central headers."""
    d = bytearray(data)
    j = d.index(b"PK\x03\x04")
    struct.pack_into("<I", d, j + 22, size)
    j = d.index(b"PK\x01\x02")
    struct.pack_into("<I", d, j + 24, size)
    return bytes(d)


if __name__ == "__main__":
    main()

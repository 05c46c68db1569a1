"""Writes the zTensor v2 test vectors with the reference implementation, ztensor 2.1.2.

    pip install --target DIR ztensor==2.1.2 numpy xxhash
    PYTHONPATH=DIR python3 gen.py

Valid files come from `ztensor.Writer` (canonical and not, every kind of object it
writes). `expected.json` records, per file, each tensor's shape, layout, part types and
the SHA-256 of every part's decoded bytes, computed here with numpy/hashlib from the
arrays handed to the writer (never by Tessera). Broken files are made from the valid
ones by editing bytes (the manifest re-hashed with `xxhash` where the point is a
manifest that parses and is wrong), each with the error kind a reader must give.
"""

import hashlib
import json
import os
import struct

import numpy as np
import xxhash
import ztensor

assert ztensor.Writer is not None
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = {"valid": {}, "broken": {}}


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


class Recorder:
    """Writes through ztensor.Writer and records what went in."""

    def __init__(self, name, **kw):
        self.name = name
        self.path = os.path.join(HERE, name)
        if os.path.exists(self.path) and not kw.get("append"):
            os.remove(self.path)
        self.w = ztensor.Writer(self.path, **kw)
        self.tensors = EXPECTED["valid"].get(name, {}).get("tensors", {}).copy()

    def dense(self, name, arr, dtype, logical=None, encoding=None, shape=None):
        data = np.ascontiguousarray(arr).tobytes()
        shape = list(arr.shape) if shape is None else shape
        self.w.add(name, data, shape, dtype, logical=logical, encoding=encoding)
        label = dtype if logical is None else f"{dtype}:{logical}"
        self.tensors[name] = {
            "shape": shape,
            "layout": "dense",
            "parts": {"data": {"type": label, "sha256": sha(data)}},
        }

    def obj(self, name, shape, layout, parts, attributes=None):
        spec = {}
        rec = {}
        for pname, (arr, dtype, logical) in parts.items():
            data = np.ascontiguousarray(arr).tobytes()
            p = {"dtype": dtype, "data": data}
            if logical:
                p["logical"] = logical
            spec[pname] = p
            r = {"type": dtype if logical is None else f"{dtype}:{logical}", "sha256": sha(data)}
            if arr.dtype == np.uint32 and pname in ("indices", "indptr", "coords"):
                r["sha256_as_u64"] = sha(arr.astype("<u8").tobytes())
            rec[pname] = r
        self.w.add_object(name, shape, spec, layout=layout, attributes=attributes)
        self.tensors[name] = {"shape": shape, "layout": layout, "parts": rec}
        if attributes:
            self.tensors[name]["attributes"] = attributes

    def finish(self, attributes=None):
        if attributes is not None:
            self.w.set_attributes(attributes)
        self.w.finish()
        entry = {"tensors": self.tensors}
        if attributes is not None:
            entry["attributes"] = attributes
        EXPECTED["valid"][self.name] = entry


rng = np.random.default_rng(20260801)
SMALL = dict(canonical=False, align=4096)  # 4 KiB placement keeps the files small

# 1. Canonical form (64 KiB placement, sorted, xxh3 on every part, tied blobs shared):
# Tessera's writer must reproduce this file byte for byte from what it reads.
r = Recorder("canonical.zt")
r.dense("bool", np.array([1, 0, 1, 1], np.uint8), "u8", logical="bool")
r.dense("f32", rng.standard_normal((7, 3)).astype(np.float32), "f32")
tied = rng.standard_normal((8, 4)).astype(np.float32)
r.dense("tied.a", tied, "f32")
r.dense("tied.b", tied, "f32")
r.finish({"name": "canonical", "epoch": 3, "lr": 0.5, "neg": -7, "tags": ["a", "b"], "nested": {"k": True}})

# 2. Dense, every storage type and the logical types numpy can make.
r = Recorder("dense.zt", **SMALL)
r.dense("bf16", rng.integers(0, 65535, (3, 5), dtype=np.uint16), "bf16")
r.dense("c64", rng.standard_normal(6).astype(np.float32), "f32", logical="complex64", shape=[3])
r.dense("empty", np.zeros((0, 4), np.float32), "f32")
r.dense("f16", rng.standard_normal((4, 4)).astype(np.float16), "f16")
r.dense("f64", rng.standard_normal(9), "f64")
r.dense("fp8", rng.integers(0, 255, 16, dtype=np.uint8), "u8", logical="f8_e4m3fn")
r.dense("i16", rng.integers(-3000, 3000, 10, dtype=np.int16), "i16")
r.dense("i32", rng.integers(-(2**31), 2**31 - 1, (2, 2, 2), dtype=np.int32), "i32")
r.dense("i64", rng.integers(-(2**62), 2**62, 5, dtype=np.int64), "i64")
r.dense("i8", rng.integers(-128, 127, 12, dtype=np.int8), "i8")
r.dense("scalar", np.array(3.25, np.float32), "f32")
r.dense("u16", rng.integers(0, 65535, 6, dtype=np.uint16), "u16")
r.dense("u32", rng.integers(0, 2**32 - 1, 6, dtype=np.uint32), "u32")
r.dense("u64", rng.integers(0, 2**63, 6, dtype=np.uint64), "u64")
r.dense("u8", rng.integers(0, 255, 33, dtype=np.uint8), "u8")
r.finish()

# 3. zt.zstd-seekable/1 (a tensor over two 1 MiB frames, an empty one).
r = Recorder("zstd.zt", **SMALL)
big = np.tile(np.arange(1000, dtype=np.float32), 400)  # 1.6 MB decoded
r.dense("big", big, "f32", encoding="zt.zstd-seekable/1")
r.dense("empty", np.zeros(0, np.int32), "i32", encoding="zt.zstd-seekable/1")
r.dense("raw", np.arange(5, dtype=np.int16), "i16")
r.dense("small", rng.standard_normal(10).astype(np.float64), "f64", encoding="zt.zstd-seekable/1")
r.finish()

# 4. Profiles: CSR (u32 indices), COO (u64 coords), MX (f4 data + e8m0 scales).
r = Recorder("profiles.zt", **SMALL)
r.obj(
    "coo",
    [4, 5, 6],
    "zt.sparse_coo/1",
    {
        "coords": (np.array([[0, 3, 1], [4, 0, 2], [5, 1, 0]], np.uint64), "u64", None),
        "values": (np.array([10, -20, 30], np.int64), "i64", None),
    },
)
r.obj(
    "csr",
    [3, 4],
    "zt.sparse_csr/1",
    {
        "indices": (np.array([1, 3, 0, 2], np.uint32), "u32", None),
        "indptr": (np.array([0, 2, 2, 4], np.uint32), "u32", None),
        "values": (np.array([1.5, -2.0, 3.0, 4.5], np.float32), "f32", None),
    },
)
r.dense("dense", np.arange(6, dtype=np.float32).reshape(2, 3), "f32")
r.obj(
    "mx",
    [2, 64],
    "zt.mx/1",
    {
        "data": (rng.integers(0, 255, 64, dtype=np.uint8), "u8", "f4_e2m1"),
        "scales": (np.array([127, 128, 126, 130], np.uint8), "u8", "f8_e8m0"),
    },
    attributes={"block_size": 32, "scale_form": "e8m0_exponent"},
)
r.finish()

# 5. Generational append: a file, then a second generation added to it.
r = Recorder("append.zt", **SMALL)
r.dense("first", np.arange(4, dtype=np.int32), "i32")
r.finish()
r = Recorder("append.zt", append=True, **SMALL)
r.dense("second", np.arange(3, dtype=np.float64), "f64")
r.finish()

# 6. Logical types Tessera does not decode (f4_e2m1, two values per byte; a vendor type
# from a later spec), dense and as sparse values, beside a plain tensor: Tessera keeps
# their stored bytes and logical shape, and a conversion carries them or refuses.
r = Recorder("valid-logical-types.zt", **SMALL)
r.dense("f4", rng.integers(0, 255, 16, dtype=np.uint8), "u8", logical="f4_e2m1", shape=[4, 8])
r.dense("f4.empty", np.zeros(0, np.uint8), "u8", logical="f4_e2m1", shape=[0, 4])
r.dense("f4.odd", np.array([0x21, 0x43, 0x05], np.uint8), "u8", logical="f4_e2m1", shape=[5])
r.dense("f4.scalar", np.array([0x07], np.uint8), "u8", logical="f4_e2m1", shape=[])
r.dense("future", rng.integers(0, 255, 8, dtype=np.uint8), "u8", logical="x.future/1", shape=[999])
r.dense("future.u16", np.arange(6, dtype=np.uint16), "u16", logical="x.future/1", shape=[3])
r.dense("plain", np.arange(6, dtype=np.float32).reshape(2, 3), "f32")
r.obj(
    "sparse.f4",
    [2, 4],
    "zt.sparse_csr/1",
    {
        "indices": (np.array([0, 1, 3], np.uint64), "u64", None),
        "indptr": (np.array([0, 2, 3], np.uint64), "u64", None),
        "values": (np.array([0x21, 0x03], np.uint8), "u8", "f4_e2m1"),
    },
)
r.finish({"about": "logical types"})

# The same kinds in canonical form: Tessera's rewrite must be this file byte for byte.
r = Recorder("valid-logical-canonical.zt")
f4 = rng.integers(0, 255, 8, dtype=np.uint8)
f4[-1] &= 0x0F  # 15 values: the last byte's high nibble is unused, so zero
r.dense("f4", f4, "u8", logical="f4_e2m1", shape=[15])
r.dense("future.u16", np.arange(4, dtype=np.uint16), "u16", logical="x.future/1", shape=[2, 5])
r.finish()

# 7. Broken files, from profiles.zt (blobs at 4096, 8192, …: 2-byte CBOR offsets).
def read(name):
    with open(os.path.join(HERE, name), "rb") as f:
        return bytearray(f.read())


def footer(b):
    mo, ml, mh, ver, res = struct.unpack_from("<QQQII", b, len(b) - 40)
    return mo, ml, mh


def rehash(b):
    mo, ml, _ = footer(b)
    struct.pack_into("<Q", b, len(b) - 24, xxhash.xxh3_64_intdigest(bytes(b[mo : mo + ml])))


def broken(name, data, kind, why):
    with open(os.path.join(HERE, "broken", name), "wb") as f:
        f.write(data)
    EXPECTED["broken"][name] = {"kind": kind, "why": why}


def patch_blob(b, old_off, new_off):
    """Rewrites the blob [old_off, …] in the manifest to start at new_off (both 2-byte
    CBOR integers, so nothing moves) and re-hashes the manifest."""
    mo, ml, _ = footer(b)
    m = bytes(b[mo : mo + ml])
    old = b"\x82\x19" + struct.pack(">H", old_off)
    i = m.index(old)
    b[mo + i : mo + i + 4] = b"\x82\x19" + struct.pack(">H", new_off)
    rehash(b)


os.makedirs(os.path.join(HERE, "broken"), exist_ok=True)
base = read("profiles.zt")
mo, ml, mh = footer(base)
man = bytes(base[mo : mo + ml])
assert len(base) < 60000

b = bytearray(base)
b[len(b) - 24] ^= 0x01
broken("footer-hash.zt", b, "integrity", "manifest hash in the footer off by one bit")

broken("truncated.zt", base[: len(base) - 1], "malformed", "last byte cut: no footer magic")
broken("short.zt", base[:40], "malformed", "shorter than magic + footer")

b = bytearray(base)
b[mo + ml // 2] ^= 0x40
broken("manifest-byte.zt", b, "integrity", "a manifest byte flipped, hash not updated")

b = bytearray(base)
patch_blob(b, 4096, (len(b) // 4096 + 2) * 4096)
broken("blob-past-eof.zt", b, "malformed", "a blob offset past the end of the file")

b = bytearray(base)
patch_blob(b, 4096, 4096 + 8)
broken("blob-misaligned.zt", b, "malformed", "a blob offset not a multiple of 4096")

b = bytearray(base)
patch_blob(b, 8192, 4096)
broken("blob-overlap.zt", b, "malformed", "two blobs at one offset with different lengths")

b = bytearray(base)
patch_blob(b, 8192, mo)
broken("blob-over-manifest.zt", b, "malformed", "a blob placed on the manifest blob")

b = bytearray(base)
b[mo] = 0xBF  # an indefinite-length map head for the root: not deterministic CBOR
rehash(b)
broken("cbor-indefinite.zt", b, "malformed", "root map head made indefinite")

b = bytearray(base)
i = man.index(b"xxh3:") + 5
b[mo + i] = ord("0") if b[mo + i] != ord("0") else ord("1")
rehash(b)
broken("part-digest.zt", b, "integrity-on-read", "a part digest changed, the manifest re-hashed")

b = bytearray(base)
b[len(b) - 16] = 3
broken("version-3.zt", b, "unsupported_version", "footer version 3")

with open(os.path.join(HERE, "expected.json"), "w") as f:
    json.dump(EXPECTED, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(EXPECTED["valid"]), sorted(EXPECTED["broken"]))

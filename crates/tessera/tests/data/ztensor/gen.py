#!/usr/bin/env python3
"""Writes the zTensor test vectors in this directory, independently of Tessera's writer.

Uses only struct, hashlib, cbor2 and zstandard (for zstd frames without a content size,
as the original ztensor writer produces). Run from anywhere:

    python3 gen.py

Valid vectors are `valid-*.zt`; invalid ones are named by the error kind Tessera must
raise: `malformed-*`, `unsupported_version-*`, `limit-*` fail to open;
`read_malformed-*` open but reading their tensor fails; `integrity-*` open and read
but `verify` reports a failed digest at the tensor named in the file name (after the
last `-`).

`valid-pypi-ztensor-1.0.2-v11.zt` is not from this script: the real ztensor 1.0.2 wrote
it (see peer_v11.py).
"""
import hashlib
import pathlib
import struct

import cbor2
import zstandard

HERE = pathlib.Path(__file__).resolve().parent
MAGIC = b"ZTEN1000"


def zstd(data: bytes) -> bytes:
    # Streaming frame, no content size: what zstd::encode_all (the original) writes.
    c = zstandard.ZstdCompressor(level=3, write_content_size=False)
    return c.compress(data)


def crc32c(data: bytes) -> int:
    # Bitwise CRC-32C (Castagnoli, reflected 0x82F63B78), no dependency.
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


class File:
    """Builds a file: components aligned to 64 (zero padding), manifest at the end."""

    def __init__(self, version="1.0", footer=False, key="tensors", generator="gen.py"):
        self.buf = bytearray(MAGIC)
        self.tensors = {}
        self.attributes = {}
        self.version = version
        self.footer = footer
        self.key = key
        self.generator = generator

    def blob(self, data: bytes, align=True) -> int:
        if align:
            self.buf += b"\0" * (-len(self.buf) % 64)
        off = len(self.buf)
        self.buf += data
        return off

    def comp(self, data, encoding=None, digest=None, align=True, **extra):
        stored = zstd(data) if encoding == "zstd" else data
        c = {"offset": self.blob(stored, align), "length": len(stored)}
        if encoding:
            c["encoding"] = encoding
        if digest == "crc32c":
            c["digest"] = "crc32c:0x%08X" % crc32c(stored)
        elif digest == "crc32c-lower":
            c["digest"] = "crc32c:0x%08x" % crc32c(stored)
        elif digest == "sha256":
            c["digest"] = "sha256:" + hashlib.sha256(stored).hexdigest()
        elif digest is not None:
            c["digest"] = digest
        c.update(extra)
        return c

    def tensor(self, name, dtype, shape, fmt, comps, **extra):
        t = {"dtype": dtype, "shape": list(shape), "format": fmt, "components": comps}
        if dtype is None:
            del t["dtype"]
        t.update(extra)
        self.tensors[name] = t

    def manifest(self):
        m = {"version": self.version}
        if self.generator is not None:
            m["generator"] = self.generator
        m["attributes"] = self.attributes
        m[self.key] = self.tensors
        return cbor2.dumps(m)

    def bytes(self, manifest=None):
        m = self.manifest() if manifest is None else manifest
        out = bytes(self.buf) + m + struct.pack("<Q", len(m))
        if self.footer:
            out += MAGIC
        return out


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def u64(*v):
    return struct.pack("<%dQ" % len(v), *v)


def write(name, data):
    (HERE / name).write_bytes(data)


def dense_file():
    f = File()
    f.attributes = {"license": "MIT", "description": "dense vectors", "config": '{"a": 1}'}
    f.tensor("w", "float32", [2, 3], "dense", {"data": f.comp(f32(0, 1, 2, 3, 4, 5), digest="crc32c")})
    f.tensor("b", "int8", [4], "dense", {"data": f.comp(struct.pack("<4b", -1, 0, 1, 127), digest="sha256")})
    f.tensor("flag", "bool", [], "dense", {"data": f.comp(b"\x01", digest="crc32c-lower")})
    f.tensor("big", "uint64", [2], "dense", {"data": f.comp(u64(0, 2**64 - 1), digest="md5:0123")})
    f.tensor("empty", "float16", [0, 3], "dense", {"data": f.comp(b"")})
    return f


def zstd_file():
    f = File()
    f.tensor("z", "int64", [100], "dense", {"data": f.comp(struct.pack("<100q", *range(100)), "zstd", "crc32c")})
    f.tensor("h", "float16", [3], "dense", {"data": f.comp(struct.pack("<3e", 0.5, -2.0, 65504.0), "zstd")})
    f.tensor("bf", "bfloat16", [2], "dense", {"data": f.comp(b"\x80\x3f\x00\xc0", "zstd", "sha256")})
    return f


def sparse_file():
    f = File()
    # [[1,0,2],[0,0,3]]
    f.tensor("csr", "float32", [2, 3], "sparse_csr", {
        "values": f.comp(f32(1, 2, 3)),
        "indices": f.comp(u64(0, 2, 2)),
        "indptr": f.comp(u64(0, 2, 3)),
    })
    # [[0,0,5],[6,0,0]]
    f.tensor("coo", "int32", [2, 3], "sparse_coo", {
        "values": f.comp(struct.pack("<2i", 5, 6), "zstd"),
        "coords": f.comp(u64(0, 1, 2, 0), "zstd", "crc32c"),
    })
    return f


def other_file():
    f = File()
    f.tensor("q", "uint8", [4, 4], "quantized_4bit", {
        "data": f.comp(bytes(range(8))),
        "scale": f.comp(f32(0.5, 0.25)),
        "zero_point": f.comp(b"\x08\x08", "zstd"),
    })
    return f


def v11_file():
    # What PyPI ztensor 1.0.2 writes: footer magic, "objects", per-component dtypes.
    f = File(version="1.1.0", footer=True, key="objects", generator=None)
    f.tensor("w", None, [2, 2], "dense", {"data": f.comp(f32(1, 2, 3, 4), dtype="f32")})
    f.tensor("csr", None, [2, 2], "sparse_csr", {
        "values": f.comp(f32(7), dtype="f32"),
        "indices": f.comp(struct.pack("<I", 1), dtype="u32"),
        "indptr": f.comp(struct.pack("<3H", 0, 0, 1), dtype="u16"),
    }, attributes={"bits": 4})
    return f


def write_valid():
    write("valid-dense.zt", dense_file().bytes())
    write("valid-zstd.zt", zstd_file().bytes())
    write("valid-sparse.zt", sparse_file().bytes())
    write("valid-other-layout.zt", other_file().bytes())
    write("valid-v11-footer.zt", v11_file().bytes())
    write("valid-empty.zt", File().bytes())
    f = File()
    f.tensor("u", "int16", [2], "dense", {"data": f.comp(struct.pack("<2h", 1, -1), align=False)})
    write("valid-unaligned.zt", f.bytes())


def one(dtype="float32", shape=(2,), data=None, fmt="dense", role="data", **comp):
    f = File()
    f.tensor("t", dtype, shape, fmt, {role: f.comp(f32(1, 2) if data is None else data, **comp)})
    return f


def patch_comp(f, **kv):
    f.tensors["t"]["components"]["data"].update(kv)
    return f


def write_invalid():
    good = one()
    b = good.bytes()
    write("malformed-magic.zt", b"ZTEN1001" + b[8:])
    write("malformed-manifest-size-too-big.zt", b[:-8] + struct.pack("<Q", len(b) - 15))
    write("malformed-manifest-size-huge.zt", b[:-8] + struct.pack("<Q", 2**64 - 1))
    m = good.manifest()
    write("malformed-cbor-trailing.zt", good.bytes(m + b"\x00"))
    write("malformed-cbor-truncated.zt", good.bytes(m[:-3]))
    write("malformed-cbor-not-a-map.zt", good.bytes(cbor2.dumps([1, 2, 3])))
    write("malformed-no-version.zt", good.bytes(cbor2.dumps({"tensors": good.tensors})))
    write("malformed-no-tensors.zt", good.bytes(cbor2.dumps({"version": "1.0"})))
    write("malformed-version-text.zt", good.bytes(cbor2.dumps({"version": "abc", "tensors": {}})))
    # Duplicate tensor name: hand-made map with the key "t" twice.
    t = cbor2.dumps(good.tensors["t"])
    dup = (b"\xa2" + cbor2.dumps("version") + cbor2.dumps("1.0") + cbor2.dumps("tensors")
           + b"\xa2" + cbor2.dumps("t") + t + cbor2.dumps("t") + t)
    write("malformed-duplicate-tensor.zt", good.bytes(dup))
    write("malformed-offset-overflow.zt", patch_comp(one(), offset=2**64 - 64, length=128).bytes())
    write("malformed-offset-past-file.zt", patch_comp(one(), offset=1 << 40).bytes())
    write("malformed-offset-into-manifest.zt", patch_comp(one(), length=64).bytes())
    write("malformed-offset-in-magic.zt", patch_comp(one(), offset=0).bytes())
    write("malformed-dense-length.zt", one(data=f32(1, 2, 3)).bytes())
    write("malformed-unknown-dtype.zt", one(dtype="float8").bytes())
    write("malformed-shape-overflow.zt", one(shape=(2**32, 2**32, 2)).bytes())
    write("malformed-shape-negative.zt", one().bytes(cbor2.dumps(
        {"version": "1.0", "tensors": {"t": {"dtype": "float32", "shape": [-1], "format": "dense",
                                             "components": {"data": {"offset": 64, "length": 8}}}}})))
    write("malformed-missing-data.zt", one(role="payload").bytes())
    write("malformed-csr-not-2d.zt", one(fmt="sparse_csr", role="values").bytes())
    write("malformed-offset-string.zt", patch_comp(one(), offset="64").bytes())
    f = File()
    f.tensor("a", "float32", [4], "dense", {"data": f.comp(f32(1, 2, 3, 4))})
    f.tensor("t", "float32", [2], "dense", {"data": {"offset": 72, "length": 8}})
    write("malformed-overlap.zt", f.bytes())
    write("unsupported_version-2.0.zt", File(version="2.0").bytes())
    write("unsupported_version-0.1.zt", File(version="0.1").bytes())
    write("limit-rank-65.zt", one(shape=[1] * 65, data=f32(1)).bytes())
    write("limit-huge-zstd-claim.zt", one(shape=(1 << 40,), data=f32(1, 2), encoding="zstd").bytes())
    # Opens, but the tensor cannot be read.
    write("read_malformed-zstd-short.zt", one(shape=(1000,), data=f32(1, 2), encoding="zstd").bytes())
    write("read_malformed-zstd-long.zt", one(shape=(1,), data=f32(1, 2), encoding="zstd").bytes())
    write("read_malformed-zstd-garbage.zt", patch_comp(one(), encoding="zstd").bytes())
    f = File()
    f.tensor("t", "float32", [2, 2], "sparse_csr", {
        "values": f.comp(f32(1)), "indices": f.comp(u64(5)), "indptr": f.comp(u64(0, 1, 1))})
    write("read_malformed-csr-index-out-of-range.zt", f.bytes())
    f = File()
    f.tensor("t", "float32", [2, 2], "sparse_csr", {
        "values": f.comp(f32(1)), "indices": f.comp(u64(0)), "indptr": f.comp(u64(1, 0, 1))})
    write("read_malformed-csr-indptr-decreasing.zt", f.bytes())
    # Digest mismatch at tensor "bad" (the second of three).
    f = File()
    f.tensor("ok1", "float32", [2], "dense", {"data": f.comp(f32(1, 2), digest="crc32c")})
    f.tensor("bad", "float32", [2], "dense", {"data": f.comp(f32(3, 4), digest="sha256:" + "00" * 32)})
    f.tensor("ok2", "float32", [2], "dense", {"data": f.comp(f32(5, 6), digest="sha256")})
    write("integrity-bad.zt", f.bytes())
    f = File()
    f.tensor("c", "int32", [2], "dense", {"data": f.comp(struct.pack("<2i", 1, 2), "zstd", "crc32c:0x00000000")})
    write("integrity-c.zt", f.bytes())


if __name__ == "__main__":
    for p in HERE.glob("*.zt"):
        if not p.name.startswith("valid-pypi-"):  # written by peer_v11.py
            p.unlink()
    write_valid()
    write_invalid()

#!/usr/bin/env python3
"""Independent AERO v0.1 test vectors for tessera's reader (not written by our writer).

Uses only struct, msgpack, blake3 and zstandard. Run from this directory:
    python gen.py
Each file name starts with the outcome the reader must give:
    valid-*          opens and verifies
    verify-fail-*    opens, `verify` reports a failure (never a panic)
    malformed-*, limit-*, unsupported-*, integrity-*   open fails with that error kind
"""
import json
import struct

import blake3
import msgpack
import zstandard

ZSTD = 0x1
MMAP = 0x2
INDEX = 0x4
OPTIONAL = 0x8


def a16(x):
    return (x + 15) & ~15


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def chunk(fourcc, name, raw, flags=0, ulen=None, hash_of=None, stored=None):
    """A chunk description: raw = uncompressed payload."""
    if stored is None:
        stored = zstandard.ZstdCompressor(level=6).compress(raw) if flags & ZSTD else raw
    return dict(fourcc=fourcc, name=name, raw=raw, stored=stored, flags=flags,
                ulen=len(raw) if ulen is None else ulen,
                hash=blake3.blake3(raw if hash_of is None else hash_of).digest())


def build(chunks, uuid=b"\x22" * 16, ihsh=None):
    """Lays chunks out as the spec says. ihsh: covered end override (None = no IHSH)."""
    names = b""
    offs = []
    for c in chunks:
        offs.append(len(names))
        names += c["name"].encode() + b"\0"
    names += b"\0" * (-len(names) % 8)
    n = len(chunks)
    toc_len = 16 + 80 * n
    st_off = 96 + toc_len
    start = a16(st_off + len(names))
    pos = start
    for c in chunks:
        c["off"] = a16(pos)
        pos = c["off"] + len(c["stored"])

    def control(zero):
        h = struct.pack("<4sHHIQQQQQ16s28s", b"AERO", 0, 1, 96, 96, toc_len, st_off,
                        len(names), 0, uuid, b"\0" * 28)
        h += struct.pack("<IIQ", n, 0, 0)
        for c, no in zip(chunks, offs):
            h += struct.pack("<4sIQQQIIQ32s", c["fourcc"], c["flags"], c["off"],
                             len(c["stored"]), c["ulen"], no, len(c["name"].encode()), 0,
                             b"\0" * 32 if zero else c["hash"])
        h += names
        return h + b"\0" * (start - len(h))

    if ihsh is not None:
        i = [c["fourcc"] for c in chunks].index(b"IHSH")
        end = start if ihsh is True else ihsh
        digest = blake3.blake3(control(True)[:end]).digest()
        raw = pack({"algo": "blake3-256", "covered_ranges": [[0, end]], "digest": digest})
        raw += b"\0" * (256 - len(raw))
        chunks[i].update(raw=raw, stored=raw, ulen=256, hash=blake3.blake3(raw).digest())
    out = bytearray(control(False))
    for c in chunks:
        out += b"\0" * (c["off"] - len(out))
        out += c["stored"]
    return bytes(out)


def tidx_entry(name, dtype, shape, shard, off, ln, **extra):
    e = {"name": name, "dtype": dtype, "shape": shape, "shard_id": shard, "data_off": off,
         "data_len": ln, "flags": 0}
    e.update(extra)
    return e


def standard(entries, shards, meta=None, tidx_flags=INDEX | ZSTD, tidx_raw=None, extra=()):
    meta = meta or {"architecture": "test", "model_name": "gen"}
    mj = json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()
    manifest = pack({"format": {"name": "AERO", "version": [0, 1]},
                     "model": {"name": meta.get("model_name", ""),
                               "architecture": meta.get("architecture", "")},
                     "chunks": [], "shards": []})
    cs = [chunk(b"MJSN", "meta.json", mj), chunk(b"MMSG", "manifest", manifest, ZSTD),
          chunk(b"TIDX", "tensors", tidx_raw if tidx_raw is not None else pack({"tensors": entries}),
                tidx_flags)]
    for i, s in enumerate(shards):
        cs.append(chunk(b"WTSH", f"weights.shard{i}", s, MMAP))
    cs.extend(extra)
    return cs


A = struct.pack("<2f", 1.5, -2.0)
B = struct.pack("<q", -7)
Q = bytes(range(18))


def valid_multishard():
    entries = [tidx_entry("a", 1, [2], 0, 0, 8, hash_b3=blake3.blake3(A).hexdigest()),
               tidx_entry("q", 0x8000, [32], 0, 8, 18, quant_id=0,
                          quant_params={"ggml_type": 2}),
               tidx_entry("b", 10, [1], 1, 0, 8),
               tidx_entry("p", 0x8000, [3], 1, 8, 3)]
    # As the original's gguf_to_aero writes them.
    meta = {"architecture": "test", "model_name": "gen", "source_format": "gguf",
            "quant_descriptors": [{"id": 0, "quant_name": "Q4_0", "codec": "ggml",
                                   "params": {"ggml_type": 2}}]}
    extra = [chunk(b"XTRA", "extra.bin", b"opaque payload", OPTIONAL),
             chunk(b"ZZZZ", "required.bin", b"not optional", 0)]
    return build(standard(entries, [A + Q, B + b"xyz"], meta, tidx_flags=INDEX, extra=extra))


def phsh_file(digests, page=8):
    entries = [tidx_entry("a", 1, [2], 0, 0, 8), tidx_entry("b", 10, [1], 0, 8, 8)]
    shard = A + B
    cs = [chunk(b"IHSH", "control.integrity", b"\0" * 256, OPTIONAL)]
    cs += standard(entries, [shard])
    cs.append(chunk(b"PHSH", "weights.shard0.phsh",
                    pack({"shard_name": "weights.shard0", "page_size": page, "digests": digests}),
                    OPTIONAL))
    return build(cs, ihsh=True)


def main():
    files = {}
    files["valid-multishard-packed-unknown-chunks.aero"] = valid_multishard()
    files["valid-wtsh-zstd.aero"] = build(
        standard([tidx_entry("a", 1, [2], 0, 0, 8), tidx_entry("b", 10, [1], 0, 8, 8)], [])
        + [chunk(b"WTSH", "weights.shard0", A + B, MMAP | ZSTD)])
    # As the original packs them: an f32 right after 3 bytes, at shard offset 3.
    files["valid-unaligned-original-packing.aero"] = build(standard(
        [tidx_entry("m", 5, [3], 0, 0, 3), tidx_entry("a", 1, [2], 0, 3, 8)], [b"\1\2\3" + A]))
    good_pages = [blake3.blake3(A).digest(), blake3.blake3(B).digest()]
    files["valid-ihsh-phsh-page8.aero"] = phsh_file(good_pages)
    files["verify-fail-phsh-digest-count.aero"] = phsh_file(good_pages[:1])
    files["verify-fail-phsh-bad-page1.aero"] = phsh_file([good_pages[0], b"\x01" * 32])
    cs = [chunk(b"IHSH", "control.integrity", b"\0" * 256, OPTIONAL)]
    cs += standard([tidx_entry("a", 1, [2], 0, 0, 8)], [A])
    files["verify-fail-ihsh-covers-past-eof.aero"] = build(cs, ihsh=10**12)
    cs = [chunk(b"IHSH", "control.integrity", b"\0" * 256, OPTIONAL)]
    cs += standard([tidx_entry("a", 1, [2], 0, 0, 8)], [A])
    files["verify-fail-ihsh-covers-header-only.aero"] = build(cs, ihsh=96)
    files["verify-fail-hash-b3.aero"] = build(standard(
        [tidx_entry("a", 1, [2], 0, 0, 8, hash_b3="00" * 32)], [A]))
    files["verify-fail-wtsh-hash.aero"] = build(
        standard([tidx_entry("a", 1, [2], 0, 0, 8)], [A])[:3]
        + [chunk(b"WTSH", "weights.shard0", A, MMAP, hash_of=b"other")])

    def bad_tidx(name, entries):
        files[name] = build(standard(entries, [A]))

    bad_tidx("malformed-tidx-data-off-overflow.aero",
             [tidx_entry("a", 1, [2], 0, 2**64 - 1, 8)])
    bad_tidx("malformed-tidx-past-shard.aero", [tidx_entry("a", 1, [4], 0, 0, 16)])
    bad_tidx("malformed-tidx-shape-overflow.aero",
             [tidx_entry("a", 1, [2**62, 2**62], 0, 0, 8)])
    bad_tidx("malformed-tidx-len-vs-shape.aero", [tidx_entry("a", 1, [3], 0, 0, 8)])
    bad_tidx("unsupported-tidx-dtype-99.aero", [tidx_entry("a", 99, [2], 0, 0, 8)])
    bad_tidx("malformed-tidx-duplicate-name.aero",
             [tidx_entry("a", 1, [1], 0, 0, 4), tidx_entry("a", 1, [1], 0, 4, 4)])
    bad_tidx("malformed-tidx-missing-shard.aero", [tidx_entry("a", 1, [2], 5, 0, 8)])
    bad_tidx("limit-tidx-rank-33.aero", [tidx_entry("a", 1, [1] * 33, 0, 0, 4)])
    bad_tidx("limit-tidx-name-5000.aero", [tidx_entry("a" * 5000, 1, [2], 0, 0, 8)])
    bad_tidx("malformed-tidx-negative-dim.aero", [tidx_entry("a", 1, [-2], 0, 0, 8)])
    bad_tidx("malformed-tidx-missing-name.aero", [{"dtype": 1, "shape": [2], "shard_id": 0,
                                                   "data_off": 0, "data_len": 8}])
    # One entry of ~70 KB that would build 70,000 values: refused, not materialized.
    bad_tidx("limit-tidx-entry-value-bomb.aero",
             [tidx_entry("a", 1, [2], 0, 0, 8, junk=[0] * 70000)])
    files["malformed-tidx-map32-bomb.aero"] = build(standard(
        [], [A], tidx_flags=INDEX, tidx_raw=b"\xdf\xff\xff\xff\xff"))
    files["malformed-tidx-not-a-map.aero"] = build(standard(
        [], [A], tidx_flags=INDEX, tidx_raw=pack([1, 2, 3])))
    files["malformed-tidx-trailing-bytes.aero"] = build(standard(
        [], [A], tidx_flags=INDEX, tidx_raw=pack({"tensors": []}) + b"\x01"))
    files["malformed-tidx-ext-type.aero"] = build(standard(
        [], [A], tidx_flags=INDEX, tidx_raw=b"\x81\xa7tensors\xd4\x01\x00"))
    # zstd: declared ulen smaller than the real output (a bomb), and over the spec limit.
    raw = pack({"tensors": [tidx_entry("a", 1, [2], 0, 0, 8)]})
    cs = standard([], [A])
    cs[2] = chunk(b"TIDX", "tensors", raw, INDEX | ZSTD, ulen=10)
    files["malformed-zstd-output-over-ulen.aero"] = build(cs)
    cs = standard([], [A])
    cs[2] = chunk(b"TIDX", "tensors", raw, INDEX | ZSTD, ulen=3 << 30)
    files["limit-metadata-ulen-3gib.aero"] = build(cs)
    cs = standard([], [A])
    cs[2] = chunk(b"TIDX", "tensors", raw, INDEX | ZSTD, stored=b"\x28\xb5\x2f\xfd garbage")
    files["malformed-zstd-corrupt.aero"] = build(cs)
    cs = standard([], [A])
    cs[0] = chunk(b"MJSN", "meta.json", b"{not json")
    files["malformed-mjsn-not-json.aero"] = build(cs)
    cs = standard([tidx_entry("a", 1, [2], 0, 0, 8)], [A])
    cs[2]["hash"] = b"\x33" * 32
    files["integrity-tidx-hash.aero"] = build(cs)
    cs = standard([], [A])
    cs.append(chunk(b"TIDX", "tensors2", pack({"tensors": []}), INDEX))
    files["malformed-two-tidx.aero"] = build(cs)
    cs = standard([], [A])
    cs.append(chunk(b"WTSH", "weights.shard0", A, MMAP))
    files["malformed-duplicate-chunk.aero"] = build(cs)

    # 20 chunks whose names all point at the same 64 KiB of the string table: copying
    # them would take 20x the table; refused.
    n, names = 20, b"n" * 65536
    toc_len = 16 + 80 * n
    start = a16(96 + toc_len + len(names))
    out = struct.pack("<4sHHIQQQQQ16s28s", b"AERO", 0, 1, 96, 96, toc_len, 96 + toc_len,
                      len(names), 0, b"\0" * 16, b"\0" * 28) + struct.pack("<IIQ", n, 0, 0)
    for i in range(n):
        out += struct.pack("<4sIQQQIIQ32s", b"X%03d" % i, OPTIONAL, start, 0, 0, 0, 65536, 0,
                           blake3.blake3(b"").digest())
    files["limit-shared-chunk-names.aero"] = out + names + b"\0" * (start - len(out) - len(names))

    for name, data in sorted(files.items()):
        with open(name, "wb") as f:
            f.write(data)
        print(f"{len(data):6d}  {name}")


if __name__ == "__main__":
    main()

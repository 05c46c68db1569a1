#!/usr/bin/env python3
"""Writes the GPTRS reader test vectors in this folder, independently of Tessera.

Only `struct`, `json` and `blake3` (the PyPI package, for BaseParamId = the first 16
bytes of BLAKE3(name)) are used; the layout follows the GPTRS v2 spec (gptrs-v2.md in the project's specs)
and ORIGINALS.md §4.2. File names say what the reader must do:

  ok-*         opens (possibly with warnings); tests check the values
  integrity-*  opens, but `verify` fails
  malformed-*  Malformed error
  limit-*      LimitExceeded error
  version-*    UnsupportedVersion error

Run: python3 gen.py  (rewrites the vectors; commit them with this script).
"""
import json
import os
import struct

import blake3

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = {"f32": 0, "f16": 1, "bf16": 2, "i32": 3}
SIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4}


def base_id(name):
    return blake3.blake3(name.encode()).digest()[:16]


def entry(kind, t):
    """One index entry; t holds name, dims, dtype, rg, offset, byte_len, base."""
    name = t["name"].encode() if isinstance(t["name"], str) else t["name"]
    out = struct.pack("<I", len(name)) + name
    if kind == "chk":
        out += t.get("base", b"\0" * 16)
    out += struct.pack("<I", t.get("rank", len(t["dims"])))
    out += b"".join(struct.pack("<Q", d) for d in t["dims"])
    out += struct.pack("<IB", t.get("tag", TAG[t["dtype"]]), t.get("rg", 0))
    out += struct.pack("<QQ", t["offset"], t["byte_len"])
    return out


def build(kind, tensors, config=b'{"kind":"gpt","config":{}}', count=None,
          index_extra=b"", tail=b"", version=2, config_len=None, index_len=None,
          layout=True):
    """A file; with layout=True, offsets/byte_len are filled contiguously unless set."""
    magic = b"GPTRSCHK" if kind == "chk" else b"GPTRSTEN"

    def index_bytes():
        body = b"".join(entry(kind, t) for t in tensors)
        n = len(tensors) if count is None else count
        return struct.pack("<I", n) + body + index_extra

    head_len = 8 + 4 + (4 + len(config) if kind == "chk" else 0) + 4
    if layout:
        for t in tensors:
            t.setdefault("offset", 0)
            t.setdefault("byte_len", len(t["data"]))
        data_start = head_len + len(index_bytes())
        off = data_start
        for t in tensors:
            if t.get("auto_offset", True):
                t["offset"] = off
            off += len(t["data"])
    idx = index_bytes()
    out = magic + struct.pack("<I", version)
    if kind == "chk":
        out += struct.pack("<I", len(config) if config_len is None else config_len) + config
    out += struct.pack("<I", len(idx) if index_len is None else index_len) + idx
    out += b"".join(t["data"] for t in tensors) + tail
    return out


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def i32(*xs):
    return struct.pack("<%di" % len(xs), *xs)


def t(name, dtype, dims, data, **kw):
    d = {"name": name, "dtype": dtype, "dims": dims, "data": data}
    d.update(kw)
    return d


def basic(kind="chk", **kw):
    ts = [
        t("a", "f32", [2], f32(1.0, 2.0), base=base_id("a"), rg=1),
        t("b", "i32", [1, 2], i32(7, -8), base=base_id("b")),
    ]
    return kind, ts, kw


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def main():
    for f in os.listdir(HERE):
        if f.split("-")[0] in ("ok", "integrity", "malformed", "limit", "version"):
            os.remove(os.path.join(HERE, f))

    # --- valid files -------------------------------------------------------------
    # All four dtypes, real base ids, a rank-0 scalar, an empty tensor, runtime config
    # with a float spelled as neither serde_json (0.00001) nor Python (1e-05) spells it,
    # and raw UTF-8 (which Python's ensure_ascii would escape): a rewrite keeps the bytes.
    cfg = b'{"kind":"gpt","config":{"vocab_size":16,"eps":1e-5,"name":"\xc3\xa9"},"runtime":{"functional_overrides":{}}}'
    ts = [
        t("bf", "bf16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x4049), base=base_id("bf")),
        t("empty", "f32", [0, 4], b"", base=base_id("empty")),
        t("h", "f16", [2], struct.pack("<2H", 0x3C00, 0xC000), base=base_id("h"), rg=1),
        t("i", "i32", [2, 1], i32(-1, 2147483647), base=base_id("i")),
        t("s", "f32", [], f32(0.25), base=base_id("s")),
    ]
    write("ok-all-dtypes.gptrs", build("chk", ts, config=cfg))
    ts = [dict(x) for x in ts]
    for x in ts:
        x.pop("base")
    write("ok-all-dtypes.gptrsten", build("ten", ts))

    # Legacy untagged GPT config (gpt.rs accepts it as kind "gpt").
    legacy = json.dumps({"vocab_size": 16, "context_length": 8, "embed_dim": 4, "num_layers": 1,
                         "num_heads": 1, "mlp_ratio": 4, "dropout": 0.1}, separators=(",", ":")).encode()
    k, ts, _ = basic()
    write("ok-legacy-config.gptrs", build(k, ts, config=legacy))

    # Lint-only oddities: unsorted names, a gap, trailing bytes, requires_grad 7.
    ts = [t("z", "f32", [1], f32(1.0), rg=7), t("a", "f32", [1], f32(2.0))]
    build("ten", ts)
    ts[1]["offset"] += 4  # skips a.data: reads 3.0 from the tail, 4 bytes remain after
    f = build("ten", ts, tail=f32(3.0) + b"\0\0\0\0", layout=False)
    write("ok-unsorted-gap-tail.gptrsten", f)

    # --- integrity -----------------------------------------------------------------
    k, ts, _ = basic()
    ts[1]["base"] = base_id("not-b")
    write("integrity-base-id-mismatch.gptrs", build(k, ts))

    # --- malformed -----------------------------------------------------------------
    k, ts, _ = basic()
    ts[1]["name"] = "a"
    write("malformed-duplicate-name.gptrs", build(k, ts))

    k, ts, _ = basic()
    ts[1]["auto_offset"] = False
    build(k, ts)  # fill offsets
    ts[1]["offset"] = ts[0]["offset"] + 4
    write("malformed-overlap.gptrs", build(k, ts, layout=False))

    k, ts, _ = basic()
    ts[0]["byte_len"] = 4
    ts[0]["data"] = f32(1.0)
    write("malformed-byte-len-vs-shape.gptrs", build(k, ts))

    k, ts, _ = basic()
    build(k, ts)
    ts[0]["offset"] = 20
    write("malformed-offset-into-header.gptrs", build(k, ts, layout=False))

    k, ts, _ = basic()
    write("malformed-trailing-index-bytes.gptrs", build(k, ts, index_extra=b"\0\0\0"))

    k, ts, _ = basic()
    build(k, ts)
    ts[1]["offset"] = 1 << 40
    write("malformed-offset-past-eof.gptrs", build(k, ts, layout=False))

    k, ts, _ = basic()
    build(k, ts)
    ts[1]["offset"] = (1 << 64) - 4
    write("malformed-offset-overflow.gptrs", build(k, ts, layout=False))

    k, ts, _ = basic()
    ts[0]["tag"] = 9
    write("malformed-dtype-tag.gptrs", build(k, ts))

    k, ts, _ = basic()
    ts[0]["name"] = "\u00e9"
    write("malformed-non-ascii-checkpoint-name.gptrs", build(k, ts))

    k, ts, _ = basic("ten")
    ts[0]["name"] = b"\xff"
    write("malformed-name-not-utf8.gptrsten", build(k, ts))

    k, ts, _ = basic()
    write("malformed-count-too-large-for-index.gptrs", build(k, ts, count=100000))

    k, ts, _ = basic()
    write("malformed-config-len-past-eof.gptrs", build(k, ts, config_len=5000))

    k, ts, _ = basic()
    write("malformed-index-len-past-eof.gptrs", build(k, ts, index_len=1 << 20))

    k, ts, _ = basic()
    write("malformed-config-not-json.gptrs", build(k, ts, config=b'{"kind":"gpt",'))

    k, ts, _ = basic()
    write("malformed-config-not-modelconfig.gptrs", build(k, ts, config=b'{"vocab_size":16}'))

    k, ts, _ = basic()
    ts[0]["dims"] = [1 << 62, 8]
    write("malformed-shape-overflow.gptrs", build(k, ts))

    k, ts, _ = basic()
    ts[0]["rank"] = 60
    write("malformed-rank-past-index.gptrs", build(k, ts))

    # --- limits --------------------------------------------------------------------
    k, ts, _ = basic()
    write("limit-tensor-count.gptrs", build(k, ts, count=0xFFFFFFFF))

    k, ts, _ = basic()
    write("limit-config-len.gptrs", build(k, ts, config_len=0xFFFFFFFF))

    k, ts, _ = basic("ten")
    write("limit-index-len.gptrsten", build(k, ts, index_len=0xFFFFFFF0))

    k, ts, _ = basic()
    ts[0]["rank"] = 100
    write("limit-rank.gptrs", build(k, ts))

    k, ts, _ = basic()
    deep = b'{"kind":"gpt","config":' + b"[" * 100 + b"]" * 100 + b"}"
    write("limit-config-depth.gptrs", build(k, ts, config=deep))

    # --- versions ------------------------------------------------------------------
    k, ts, _ = basic()
    write("version-1.gptrs", build(k, ts, version=1))
    k, ts, _ = basic("ten")
    write("version-3.gptrsten", build(k, ts, version=3))

    # The one-day "v2 bincode" index of gpt.rs 2f8370f (bincode 1: u64 lengths).
    cfg = b'{"kind":"gpt","config":{}}'
    data = f32(1.0, 2.0)

    def bincode_index(data_start):
        name = b"wte.weight"
        return (struct.pack("<QQ", 1, len(name)) + name + base_id("wte.weight")
                + struct.pack("<QQ", 1, 2) + struct.pack("<IB", 0, 0)
                + struct.pack("<QQ", data_start, len(data)))

    head = b"GPTRSCHK" + struct.pack("<II", 2, len(cfg)) + cfg
    n = len(bincode_index(0))
    f = head + struct.pack("<I", n) + bincode_index(len(head) + 4 + n) + data
    write("version-bincode-index.gptrs", f)


if __name__ == "__main__":
    main()

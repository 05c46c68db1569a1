#!/usr/bin/env python3
"""An independent WTXT/Chunks v1.1 encoder and checker, written from
shared/specs/wtxt-v1.1.md and RESOLUTIONS.md (WTXT 1-16) with hashlib, hmac, base64,
struct and the `crc32c` package only. It shares no code with Tessera.

`python gen.py` writes the golden vectors beside it (`*.wtxt`, `*.values.json`); the
Rust tests read them, and tests/peers/test_wtxt.py imports `encode` and `check` to
drive the CLI both ways.
"""
import base64
import hashlib
import hmac as hmac_mod
import json
import pathlib
import struct
import sys

import crc32c as crc32c_mod

SIZES = {"f64": 8, "f32": 4, "i64": 8, "u64": 8, "i32": 4, "u32": 4, "i16": 2, "u16": 2,
         "i8": 1, "u8": 1, "f16": 2, "bf16": 2, "bool": 1, "f8_e4m3fn": 1, "f8_e5m2": 1}
EXT_DTYPES = {"f16", "bf16", "bool", "f8_e4m3fn", "f8_e5m2"}
CAP_ORDER = ["crc32c", "line_parity", "arr_hmac", "delta_v2", "row_blocking", "ext_dtypes", "ext_names"]
CHUNK = 32 * 1024


# --- Ed25519, the reference code of RFC 8032 section 6 (pure Python) ---------------
_P = 2**255 - 19
_Q = 2**252 + 27742317777372353535851937790883648493


def _inv(x):
    return pow(x, _P - 2, _P)


_D = -121665 * _inv(121666) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _add(P, Q):
    A, B = (P[1] - P[0]) * (Q[1] - Q[0]) % _P, (P[1] + P[0]) * (Q[1] + Q[0]) % _P
    C, D = 2 * P[3] * Q[3] * _D % _P, 2 * P[2] * Q[2] % _P
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F, G * H, F * G, E * H)


def _mul(s, P):
    Q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            Q = _add(Q, P)
        P = _add(P, P)
        s >>= 1
    return Q


def _equal(P, Q):
    return (P[0] * Q[2] - Q[0] * P[2]) % _P == 0 and (P[1] * Q[2] - Q[1] * P[2]) % _P == 0


def _recover_x(y, sign):
    if y >= _P:
        return None
    x2 = (y * y - 1) * _inv(_D * y * y + 1)
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


_GY = 4 * _inv(5) % _P
_GX = _recover_x(_GY, 0)
_G = (_GX, _GY, 1, _GX * _GY % _P)


def _compress(P):
    zi = _inv(P[2])
    x, y = P[0] * zi % _P, P[1] * zi % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _decompress(s):
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


def _expand(seed):
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def _modq(s):
    return int.from_bytes(hashlib.sha512(s).digest(), "little") % _Q


def ed25519_public(seed):
    return _compress(_mul(_expand(seed)[0], _G))


def ed25519_sign(seed, msg):
    a, prefix = _expand(seed)
    A = _compress(_mul(a, _G))
    r = _modq(prefix + msg)
    Rs = _compress(_mul(r, _G))
    s = (r + _modq(Rs + A + msg) * a) % _Q
    return Rs + int.to_bytes(s, 32, "little")


def ed25519_verify(public, msg, sig):
    A, R = _decompress(public), _decompress(sig[:32])
    s = int.from_bytes(sig[32:], "little")
    if A is None or R is None or s >= _Q:
        return False
    return _equal(_mul(s, _G), _add(R, _mul(_modq(sig[:32] + public + msg), A)))


def sign_line(seed, signed_bytes):
    """RESOLUTIONS 10: signature over every byte before the sign line; keyid =
    SHA-256(public key)[:8]."""
    sig = ed25519_sign(seed, signed_bytes)
    return "sign ed25519=%s keyid=%s" % (base64.b64encode(sig).decode(), hashlib.sha256(ed25519_public(seed)).hexdigest()[:16])


def parity(line: bytes) -> str:
    x = 0
    for c in line:
        x ^= c
    return "%x" % (x & 0xF)


def b64_lines(raw: bytes):
    s = base64.b64encode(raw)
    return [s[i:i + 76].decode() + " " + parity(s[i:i + 76]) for i in range(0, len(s), 76)]


def crc32c(b: bytes) -> int:
    return crc32c_mod.crc32c(b)


def fastxor_update(acc: int, pos: int, raw: bytes) -> int:
    """XOR of the global byte stream as LE u64 words; `pos` is raw's offset in it."""
    lanes = [0] * 8
    for i, b in enumerate(raw):
        lanes[(pos + i) % 8] ^= b
    return acc ^ struct.unpack("<Q", bytes(lanes))[0]


def chunking(dtype, shape, nbytes, rows_per_chunk=None):
    """(idx line or None, chunk size): Tessera's documented default."""
    if not shape or nbytes == 0:
        return None, CHUNK
    row = SIZES[dtype]
    for d in shape[1:]:
        row *= d
    if rows_per_chunk is None:
        if row > CHUNK:
            return None, CHUNK
        rows_per_chunk = CHUNK // row
    return "idx rows_per_chunk=%d row_size=%d row_blocking=on" % (rows_per_chunk, row), rows_per_chunk * row


def encode(arrays, gen=123, ts="2025-10-09T03:12:45Z", build="abc123", host="cpu", cuda="off",
           key=None, salt=None, merkle_prev=b"\0" * 32, rows_per_chunk=None, sign_seed=None):
    """arrays: list of (name, dtype, shape, raw bytes). Returns the file as bytes."""
    arrays = sorted(arrays, key=lambda a: a[0].encode())
    exts = {"crc32c", "line_parity"}
    if key is not None:
        exts.add("arr_hmac")
    body = []
    all_h = hashlib.sha256()
    fx = 0
    pos = 0
    for name, dtype, shape, raw in arrays:
        n = len(raw)
        assert n == SIZES[dtype] * (eval("*".join(map(str, shape))) if shape else 1)
        if dtype in EXT_DTYPES:
            exts.add("ext_dtypes")
        if not all(c.isalnum() or c == "_" for c in name):
            exts.add("ext_names")
        idx, size = chunking(dtype, shape, n, rows_per_chunk)
        if idx:
            exts.update(["row_blocking", "delta_v2"])
        s = salt if key is not None else b"\0" * 8
        mac = hmac_mod.new(key, s + raw, hashlib.sha256).hexdigest() if key is not None else "0" * 64
        arr = "arr name=%s dtype=%s shape=%s order=C bytes=%d sha256=%s hmac=%s salt=%s" % (
            name, dtype, ",".join(map(str, shape)), n, hashlib.sha256(raw).hexdigest(), mac, s.hex())
        all_h.update(arr.encode() + raw)
        fx = fastxor_update(fx, pos, raw)
        pos += n
        body.append(arr)
        if idx:
            body.append(idx)
        for ix, off in enumerate(range(0, n, size)):
            c = raw[off:off + size]
            lines = b64_lines(c)
            body.append("ch ix=%06d off=%012d len=%d sha256=%s crc32c=%08x b64=on width=76 lines=%d" % (
                ix, off, len(c), hashlib.sha256(c).hexdigest(), crc32c(c), len(lines)))
            body.extend(lines)
            body.append("endch")
        body.append("endarr")
    meta = "meta schema=weights/v1 gen=%06d ts=%s build=%s endian=LE host=%s cuda=%s" % (gen, ts, build, host, cuda)
    sha_all = all_h.digest()
    this = hashlib.sha256(merkle_prev + sha_all + ts.encode() + ("%06d" % gen).encode() + build.encode()).hexdigest()
    head = ["WTXT 1", meta, "cap ext=" + ",".join(e for e in CAP_ORDER if e in exts),
            "root sha256_all=%s merkle_prev=%s merkle_this=%s fastxor=%016x" % (sha_all.hex(), merkle_prev.hex(), this, fx)]
    if sign_seed is not None:
        head.append(sign_line(sign_seed, ("\n".join(head) + "\n").encode()))
    return ("\n".join(head + body + ["endwtxt"]) + "\n").encode()


def check(data: bytes, key=None, public=None):
    """Parses a WTXT file and recomputes every layer. Returns {name: (dtype, shape, raw)}."""
    text = data.decode("ascii")
    assert "\r" not in text and "\t" not in text
    lines = text.split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    for l in lines:
        assert l == l.rstrip(" ") and l, "trailing space or empty line"
        assert all(0x20 <= ord(c) <= 0x7E for c in l)
    assert lines[0] == "WTXT 1"
    meta = dict(kv.split("=", 1) for kv in lines[1].split(" ")[1:])
    assert list(meta) == ["schema", "gen", "ts", "build", "endian", "host", "cuda"]
    root = dict(kv.split("=", 1) for kv in lines[3].split(" ")[1:])
    assert lines[3].startswith("root ") and list(root) == ["sha256_all", "merkle_prev", "merkle_this", "fastxor"]
    i = 4
    if lines[i].startswith("sign "):
        sg = dict(kv.split("=", 1) for kv in lines[i].split(" ")[1:])
        assert list(sg) == ["ed25519", "keyid"]
        if public is not None:
            covered = ("\n".join(lines[:4]) + "\n").encode()
            assert sg["keyid"] == hashlib.sha256(public).hexdigest()[:16]
            assert ed25519_verify(public, covered, base64.b64decode(sg["ed25519"], validate=True)), "bad signature"
        i += 1
    else:
        assert public is None, "the file is not signed"
    out = {}
    all_h = hashlib.sha256()
    fx = 0
    pos = 0
    names = []
    while lines[i] != "endwtxt":
        arr_line = lines[i]
        f = dict(kv.split("=", 1) for kv in arr_line.split(" ")[1:])
        assert list(f) == ["name", "dtype", "shape", "order", "bytes", "sha256", "hmac", "salt"]
        names.append(f["name"])
        i += 1
        if lines[i].startswith("idx "):
            i += 1
        raw = b""
        ix = 0
        while lines[i] != "endarr":
            ch = dict(kv.split("=", 1) for kv in lines[i].split(" ")[1:])
            assert list(ch) == ["ix", "off", "len", "sha256", "crc32c", "b64", "width", "lines"]
            assert ch["ix"] == "%06d" % ix and ch["off"] == "%012d" % len(raw)
            n = int(ch["lines"])
            assert n == -(-(-(-int(ch["len"]) // 3) * 4) // 76)
            b64 = ""
            for k in range(n):
                l = lines[i + 1 + k]
                body, p = l[:-2], l[-1]
                assert l[-2] == " " and p == parity(body.encode())
                assert len(body) == 76 or k == n - 1
                b64 += body
            c = base64.b64decode(b64, validate=True)
            assert len(c) == int(ch["len"])
            assert "%08x" % crc32c(c) == ch["crc32c"]
            assert hashlib.sha256(c).hexdigest() == ch["sha256"]
            assert lines[i + 1 + n] == "endch"
            raw += c
            i += n + 2
            ix += 1
        i += 1
        assert len(raw) == int(f["bytes"])
        assert hashlib.sha256(raw).hexdigest() == f["sha256"]
        if key is not None and f["hmac"] != "0" * 64:
            assert hmac_mod.new(key, bytes.fromhex(f["salt"]) + raw, hashlib.sha256).hexdigest() == f["hmac"]
        all_h.update(arr_line.encode() + raw)
        fx = fastxor_update(fx, pos, raw)
        pos += len(raw)
        shape = [int(d) for d in f["shape"].split(",")] if f["shape"] else []
        out[f["name"]] = (f["dtype"], shape, raw)
    assert i == len(lines) - 1
    assert names == sorted(names, key=str.encode)
    assert all_h.hexdigest() == root["sha256_all"]
    this = hashlib.sha256(bytes.fromhex(root["merkle_prev"]) + all_h.digest() + meta["ts"].encode()
                          + meta["gen"].encode() + meta["build"].encode()).hexdigest()
    assert this == root["merkle_this"]
    assert "%016x" % fx == root["fastxor"]
    return out


def vectors():
    """The golden vectors: (file stem, arrays, encode kwargs)."""
    r = b"".join(struct.pack("<d", i * 0.5 - 3.0) for i in range(300 * 64))  # 150 KiB: 5 chunks
    w = b"".join(struct.pack("<I", (i * 2654435761) & 0xFFFFFFFF) for i in range(1000))
    odd = bytes((i * 37 + 11) & 0xFF for i in range(100_003))  # plain 32 KiB chunks, odd tail
    yield "basic", [("R", "f64", [300, 64], r), ("W_base", "u32", [1000], w),
                    ("s", "f32", [], struct.pack("<f", 1.5)), ("empty", "i16", [0, 3], b"")], {}
    yield "hmac", [("W_base", "u32", [1000], w), ("blob", "u8", [100_003], odd)], \
        {"key": b"tessera-test-key", "salt": bytes.fromhex("0102030405060708"), "gen": 7, "build": "x.y-1"}
    yield "ext", [("layers.0.weight", "bf16", [4, 3], bytes(range(24))), ("mask", "bool", [5], b"\x01\x00\x01\x01\x00")], \
        {"rows_per_chunk": 2, "merkle_prev": hashlib.sha256(b"prev").digest()}
    yield "signed", [("W_base", "u32", [1000], w)], {"sign_seed": bytes(range(32))}


def main():
    here = pathlib.Path(__file__).resolve().parent
    for stem, arrays, kw in vectors():
        data = encode(arrays, **kw)
        seed = kw.get("sign_seed")
        check(data, kw.get("key"), ed25519_public(seed) if seed else None)
        (here / (stem + ".wtxt")).write_bytes(data)
        vals = {name: {"dtype": d, "shape": s, "sha256": hashlib.sha256(raw).hexdigest()} for name, d, s, raw in arrays}
        (here / (stem + ".values.json")).write_text(json.dumps(vals, indent=1, sort_keys=True) + "\n")
    print("wrote", ", ".join(stem for stem, _, _ in vectors()), file=sys.stderr)


if __name__ == "__main__":
    main()

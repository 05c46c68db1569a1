"""AERO through the CLI, checked by an independent reader.

The original reader (Aero `aerotensor`) is not on any registry, so `check_like_original`
below re-implements its validation (`AeroReader._parse`, `validate_all`,
`validate_control`, PHSH per AIP-0002) from ORIGINALS.md §3 with struct, msgpack, blake3
and zstandard only: files our CLI writes must pass it, and must equal the original's
samples byte for byte when rebuilt with the same options.
"""
import json
import math
import struct

import blake3
import msgpack
import pytest
import zstandard

from conftest import SAMPLES, run

AERO = SAMPLES / "aero"
PLAIN = AERO / "aerotensor_HEAD630e8a4_write_model_plain.aero"
IHSH = AERO / "aerotensor_f1d395d_write_model_ihsh.aero"
PHSH = AERO / "aerotensor_f1d395d_write_model_ihsh_phsh_page16.aero"
UUID = "11" * 16


def check_like_original(data):
    """Validates `data` as the original reader does; returns (meta, tensors, chunks)."""
    assert len(data) >= 96
    magic, major, minor, hsize, toc_off, toc_len, st_off, st_len, flags, _uuid, res = \
        struct.unpack_from("<4sHHIQQQQQ16s28s", data, 0)
    assert (magic, major, minor, hsize, flags, res) == (b"AERO", 0, 1, 96, 0, b"\0" * 28)
    assert toc_off + toc_len <= len(data) and st_off + st_len <= len(data)
    n, r0, r1 = struct.unpack_from("<IIQ", data, toc_off)
    assert (r0, r1) == (0, 0) and toc_len >= 16 + 80 * n
    st = data[st_off:st_off + st_len]
    chunks = []
    for i in range(n):
        fourcc, cflags, off, ln, ulen, no, nl, r, h = struct.unpack_from(
            "<4sIQQQIIQ32s", data, toc_off + 16 + 80 * i)
        assert r == 0 and off + ln <= len(data) and no + nl <= st_len and off % 16 == 0
        name = st[no:no + nl].decode()
        raw = data[off:off + ln]
        if cflags & 1:
            raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=ulen)
        assert len(raw) == ulen
        assert blake3.blake3(raw).digest() == h, name
        chunks.append(dict(fourcc=fourcc.decode(), name=name, flags=cflags, raw=raw, index=i))
    by = {c["fourcc"]: c for c in chunks}
    meta = json.loads(by["MJSN"]["raw"])
    manifest = msgpack.unpackb(by["MMSG"]["raw"], raw=False)
    assert manifest["format"] == {"name": "AERO", "version": [0, 1]}
    for e in manifest["chunks"]:
        assert chunks[e["toc_index"]]["fourcc"] == e["fourcc"]
    shards = {c["name"]: c["raw"] for c in chunks if c["fourcc"] == "WTSH"}
    tensors = {}
    for t in msgpack.unpackb(by["TIDX"]["raw"], raw=False)["tensors"]:
        assert list(t)[:7] == ["name", "dtype", "shape", "shard_id", "data_off", "data_len", "flags"]
        shard = shards[f"weights.shard{t['shard_id']}"]
        assert t["data_off"] + t["data_len"] <= len(shard)
        b = shard[t["data_off"]:t["data_off"] + t["data_len"]]
        if t.get("hash_b3"):
            assert blake3.blake3(b).hexdigest() == t["hash_b3"]
        assert t["name"] not in tensors
        tensors[t["name"]] = (t, b)
    # validate_control (AIP-0001 as write_model implements it)
    if "IHSH" in by:
        c = by["IHSH"]
        assert c["index"] == 0 and c["flags"] == 8 and len(c["raw"]) == 256
        u = msgpack.Unpacker(raw=False)
        u.feed(c["raw"])
        ih = next(u)
        assert ih["algo"] == "blake3-256" and len(ih["digest"]) == 32
        end = ih["covered_ranges"][0][1]
        region = bytearray(data[:end])
        for i in range(n):
            p = toc_off + 16 + 80 * i + 48
            region[p:p + 32] = b"\0" * 32
        assert blake3.blake3(bytes(region)).digest() == ih["digest"]
    # PHSH (AIP-0002), looked up by name
    for name, shard in shards.items():
        ph = [c for c in chunks if c["fourcc"] == "PHSH" and c["name"] == name + ".phsh"]
        if ph:
            p = msgpack.unpackb(ph[0]["raw"], raw=False)
            ps = p["page_size"]
            assert p["shard_name"] == name and ps > 0
            assert len(p["digests"]) == math.ceil(len(shard) / ps)
            for i, d in enumerate(p["digests"]):
                assert blake3.blake3(shard[i * ps:(i + 1) * ps]).digest() == d
    return meta, tensors, chunks


@pytest.mark.parametrize("sample,flags", [
    (PLAIN, []),
    (IHSH, ["--control-integrity"]),
    (PHSH, ["--control-integrity", "--page-hashes", "16"]),
])
def test_cli_rebuilds_the_original_samples_byte_for_byte(tmp_path, sample, flags):
    out = tmp_path / "out.aero"
    run("convert", sample, out, "--uuid", UUID, *flags)
    assert out.read_bytes() == sample.read_bytes()


def test_files_we_write_pass_the_original_validation(tmp_path):
    src = pathlib_data() / "valid-multishard-packed-unknown-chunks.aero"
    out = tmp_path / "all.aero"
    run("convert", src, out, "--shard-size", "16", "--tensor-hashes", "--control-integrity",
        "--page-hashes", "8")
    meta, tensors, chunks = check_like_original(out.read_bytes())
    assert meta["source_format"] == "gguf"
    assert struct.unpack("<2f", tensors["a"][1]) == (1.5, -2.0)
    assert struct.unpack("<q", tensors["b"][1]) == (-7,)
    t, q = tensors["q"]
    assert (t["dtype"], t["quant_id"], t["quant_params"], q) == (0x8000, 0, {"ggml_type": 2}, bytes(range(18)))
    assert all(len(t["hash_b3"]) == 64 for t, _ in tensors.values())
    kinds = [c["fourcc"] for c in chunks]
    assert kinds[:4] == ["IHSH", "MJSN", "MMSG", "TIDX"]
    assert kinds.count("WTSH") == 3 and kinds.count("PHSH") == 3
    assert {"XTRA", "ZZZZ"} <= set(kinds)
    v = json.loads(run("verify", "--json", out).stdout)
    assert v["ok"] and any(c["layer"] == "phsh" for c in v["checks"])
    # inspect lists every chunk and how many tensors each shard holds.
    text = run("inspect", out).stdout
    shard_lines = [l for l in text.splitlines() if " WTSH " in l]
    counts = [l.rsplit("(", 1)[1] for l in shard_lines]
    assert counts == ["1 tensor)", "1 tensor)", "2 tensors)"], text
    doc = json.loads(run("inspect", "--json", out).stdout)
    assert [c["kind"] for c in doc["chunks"]] == kinds
    assert next(t for t in doc["tensors"] if t["name"] == "q")["layout"] == "ggml_q4_0"


def test_verify_exit_codes_and_page_scope(tmp_path):
    data = bytearray(PHSH.read_bytes())
    data[1360 + 2] ^= 1  # shard byte 2: page 0, inside linear.weight only
    bad = tmp_path / "bad.aero"
    bad.write_bytes(bytes(data))
    assert run("verify", bad, check=False).returncode == 1
    assert run("verify", "--tensor", "linear.bias", bad).returncode == 0
    p = run("verify", "--tensor", "linear.weight", bad, check=False)
    assert p.returncode == 1 and "page 0" in p.stdout
    assert run("verify", "--control", bad).returncode == 0


def pathlib_data():
    import pathlib
    return pathlib.Path(__file__).resolve().parents[2] / "crates" / "tessera" / "tests" / "data" / "aero"


@pytest.mark.parametrize("name,code", [
    ("malformed-tidx-map32-bomb.aero", 4),
    ("limit-tidx-rank-33.aero", 4),
    ("integrity-tidx-hash.aero", 1),
    ("unsupported-tidx-dtype-99.aero", 3),
])
def test_hostile_files_exit_with_their_error_class(name, code):
    p = run("inspect", pathlib_data() / name, check=False)
    assert p.returncode == code, p.stderr
    assert ": aero: " in p.stderr and "panicked" not in p.stderr


def test_metadata_chunks_compress_exactly_as_python_zstandard(tmp_path):
    """With many tensors the TIDX/MMSG are kilobytes: our zstd frames must still be the
    bytes python-zstandard (the original writer's compressor) gives at level 6."""
    import sys
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(pathlib_data()))
    import gen  # the independent vector generator

    entries, shard = [], b""
    for i in range(400):
        data = struct.pack("<4f", i, -i, i / 3, 7)
        entries.append(gen.tidx_entry(f"model.layers.{i}.weight", 1, [2, 2], 0, len(shard), 16))
        shard += data
    src = tmp_path / "many.aero"
    src.write_bytes(gen.build(gen.standard(entries, [shard])))
    out = tmp_path / "ours.aero"
    run("convert", src, out, "--uuid", UUID)
    data = out.read_bytes()
    _, tensors, chunks = check_like_original(data)
    assert len(tensors) == 400
    n = struct.unpack_from("<I", data, 96)[0]
    for i in range(n):
        fourcc, flags, off, ln, ulen = struct.unpack_from("<4sIQQQ", data, 112 + 80 * i)
        if flags & 1:
            raw = zstandard.ZstdDecompressor().decompress(data[off:off + ln], max_output_size=ulen)
            assert fourcc != b"TIDX" or ulen > 16384
            assert zstandard.ZstdCompressor(level=6).compress(raw) == data[off:off + ln], fourcc

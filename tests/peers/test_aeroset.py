"""AEROSET through the CLI, checked both ways.

- Our sets (`tessera convert … NAME.aeroset.json`) pass the repository's independent AERO
  checker (`check_like_original`, test_aero.py) part by part, and an AEROSET check written
  here from the AEROSET doc: every file's size and SHA-256 as the JSON says, `index.aero`
  a valid AERO file with MMSG and TIDX and no shard, its TIDX naming each tensor's shard,
  and each part's own TIDX agreeing with it.
- When a checkout of the original is present (`AEROTENSOR_SRC`: the directory holding the
  `aerotensor` package, e.g. Aero's `aerotensor/` at f1d395d or `py/` at HEAD), its
  `AeroSetReader` reads our sets equal to the source and its `validate` (and each part's
  `validate_all`) passes on them; skipped otherwise (aerotensor is on no registry).
"""
import hashlib
import json
import os
import pathlib
import struct
import sys

import msgpack
import pytest
import zstandard

from conftest import ROOT, run
from test_aero import check_like_original

SET = ROOT / "crates" / "tessera" / "tests" / "data" / "aeroset" / "valid-aerotensor"
EXPECTED = json.loads((SET.parent / "expected.json").read_text())


def write_ours(tmp_path, *flags):
    out = tmp_path / "out"
    out.mkdir()
    index = out / "model.aeroset.json"
    run("convert", SET, index, "--max-shard-size", "64", "--max-part-shards", "2", *flags)
    return index


def index_tidx(data):
    """index.aero's MMSG and TIDX, checked as the original reader checks an AERO file's
    header and TOC; it must hold no WTSH."""
    magic, major, minor, hsize, toc_off, toc_len, st_off, st_len, flags, _u, res = \
        struct.unpack_from("<4sHHIQQQQQ16s28s", data, 0)
    assert (magic, major, minor, hsize, flags, res) == (b"AERO", 0, 1, 96, 0, b"\0" * 28)
    n = struct.unpack_from("<I", data, toc_off)[0]
    got = {}
    for i in range(n):
        fourcc, cflags, off, ln, ulen, no, nl, _r, _h = struct.unpack_from("<4sIQQQIIQ32s", data, toc_off + 16 + 80 * i)
        raw = data[off:off + ln]
        if cflags & 1:
            raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=ulen)
        got[fourcc.decode()] = raw
    assert "WTSH" not in got and {"MMSG", "TIDX"} <= set(got)
    assert msgpack.unpackb(got["MMSG"], raw=False)["format"]["name"] == "AERO"
    return msgpack.unpackb(got["TIDX"], raw=False)["tensors"]


def test_our_aeroset_passes_the_independent_checks(tmp_path):
    index = write_ours(tmp_path, "--tensor-hashes", "--control-integrity", "--page-hashes", "16")
    j = json.loads(index.read_text())
    assert j["format"] == {"name": "AEROSET", "version": [0, 1]}
    assert j["model"] == {"name": "tiny-set", "architecture": "llama"}
    d = index.parent
    for f in j["parts"] + [j["global_tidx"]]:
        b = (d / f["path"]).read_bytes()
        assert len(b) == f["size_bytes"] and hashlib.sha256(b).hexdigest() == f["sha256"], f["path"]
    assert len(j["parts"]) == 3 and [len(p["shards"]) for p in j["parts"]] == [2, 2, 1]
    glob = {t["name"]: t for t in index_tidx((d / "index.aero").read_bytes())}
    assert list(glob) == EXPECTED["order"]
    part_of = {s: (p, k) for p in j["parts"] for k, s in enumerate(p["shards"])}
    seen = set()
    for p in j["parts"]:
        _meta, tensors, chunks = check_like_original((d / p["path"]).read_bytes())
        assert [c["fourcc"] for c in chunks][:4] == ["IHSH", "MJSN", "MMSG", "TIDX"]
        for name, (t, b) in tensors.items():
            g = glob[name]
            owner, k = part_of[g["shard_id"]]
            assert owner is p and t["shard_id"] == k, name
            for key in ("dtype", "shape", "data_off", "data_len", "hash_b3"):
                assert t[key] == g[key], (name, key)
            assert hashlib.sha256(b).hexdigest() == EXPECTED["tensors"][name]["sha256"], name
            seen.add(name)
    assert seen == set(glob)


@pytest.fixture
def aerotensor():
    src = os.environ.get("AEROTENSOR_SRC")
    if not src:
        pytest.skip("AEROTENSOR_SRC (a checkout of Aero's aerotensor package) is not set")
    sys.path.insert(0, src)
    try:
        import aerotensor.aeroset as aeroset
        from aerotensor.reader import AeroReader
    finally:
        sys.path.remove(src)
    return aeroset, AeroReader


@pytest.mark.parametrize("flags", [[], ["--tensor-hashes", "--control-integrity", "--page-hashes", "16"]])
def test_aerotensor_reads_and_validates_our_sets(tmp_path, aerotensor, flags):
    aeroset, AeroReader = aerotensor
    index = write_ours(tmp_path, *flags)
    with aeroset.AeroSetReader(str(index)) as r:
        assert r.validate() == []
        assert [t["name"] for t in r.list_tensors()] == EXPECTED["order"]
        assert (r.model_name, r.architecture) == ("tiny-set", "llama")
        for name, e in EXPECTED["tensors"].items():
            assert hashlib.sha256(r.read_tensor_bytes(name)).hexdigest() == e["sha256"], name
    for p in json.loads(index.read_text())["parts"]:
        rd = AeroReader(str(index.parent / p["path"]))
        try:
            assert rd.validate_all() == [], p["path"]
        finally:
            rd.close()


def test_aerotensor_option_gives_its_safetensors_converters_bytes(tmp_path, aerotensor):
    # `-O aerotensor` with a fixed UUID: the bytes of aerotensor's own converter
    # (`convert_safetensors`) on a file the safetensors package wrote, with odd sizes (so
    # back-to-back packing matters), names out of name order, and metadata it drops.
    import numpy as np
    from safetensors.numpy import save_file

    src = os.environ["AEROTENSOR_SRC"]
    sys.path.insert(0, src)
    try:
        from aerotensor.convert.safetensors_to_aero import convert_safetensors
    finally:
        sys.path.remove(src)
    rng = np.random.default_rng(7)
    tensors = {
        "z.first": rng.standard_normal(5).astype(np.float16),
        "m.mid": rng.integers(-9, 9, (3, 1), dtype=np.int8),
        "a.last": rng.standard_normal((2, 3)).astype(np.float64),
        "b.flag": np.array([True, False, True]),
        "c.u16": np.arange(7, dtype=np.uint16),
    }
    st = tmp_path / "in.safetensors"
    save_file(tensors, st, metadata={"format": "pt", "architecture": "llama", "note": "x"})
    theirs = tmp_path / "theirs.aero"
    convert_safetensors(str(st), str(theirs), uuid=bytes.fromhex("ab" * 16))
    ours = tmp_path / "ours.aero"
    run("convert", st, ours, "-O", "aerotensor", "-O", "uuid=" + "ab" * 16)
    assert ours.read_bytes() == theirs.read_bytes()

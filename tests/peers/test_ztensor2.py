"""zTensor v2 against the real `ztensor==2.1.2` package, both directions.

ztensor 2.1.2 and the 1.0.1 the other tests use are both `import ztensor`, so 2.1.2 is
installed into its own directory (scripts/test.sh: `$VENV/ztensor2-peer`, or
$TESSERA_ZTENSOR2_PATH) and driven in a subprocess with that directory first on
PYTHONPATH. The subprocess checks it imported 2.1.2.

- Their files read by us: `tessera inspect --json`, `tessera verify`, values through
  `tessera convert` to .npz (read here with numpy); their canonical files converted by
  us back to v2 are their bytes exactly.
- Our files read by them: canonical (and byte-identical to what they write for the same
  tensors), zstd-seekable, sha256 digests; they read the values and verify the digests.
- v1 (written by ztensor 1.0.1 in this process) -> v2 by us -> read by 2.1.2.
"""
import json
import os
import pathlib
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from conftest import ROOT, run, run_json

PEER = pathlib.Path(os.environ.get("TESSERA_ZTENSOR2_PATH", ROOT / ".venv" / "ztensor2-peer"))
pytestmark = pytest.mark.skipif(
    not (PEER / "ztensor" / "__init__.py").exists(),
    reason=f"ztensor 2.1.2 is not installed in {PEER} (scripts/test.sh installs it)",
)

PRELUDE = """
import importlib.metadata, json, sys
import numpy as np
import ztensor
assert importlib.metadata.version("ztensor") == "2.1.2", importlib.metadata.version("ztensor")
assert hasattr(ztensor, "Writer")
args = json.loads(sys.argv[1])
"""


def peer(script, **args):
    """Runs `script` under ztensor 2.1.2; returns what it prints as JSON."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PEER), *sys.path[1:]])
    p = subprocess.run(
        [sys.executable, "-c", PRELUDE + script, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
    )
    if p.returncode != 0:
        raise AssertionError(f"ztensor 2.1.2 script failed:\n{p.stdout}\n{p.stderr}")
    out = p.stdout.strip()
    return json.loads(out) if out else None


# name -> (numpy array, v2 dtype, logical type); names in sorted order.
def tensors():
    rng = np.random.default_rng(11)
    return {
        "a.bf16": (rng.standard_normal((3, 4)).astype(ml_dtypes.bfloat16), "bf16", None),
        "b.bool": (rng.integers(0, 2, 7).astype(np.bool_), "u8", "bool"),
        "c.f16": (rng.standard_normal(5).astype(np.float16), "f16", None),
        "d.f32": (rng.standard_normal((4, 2, 3)).astype(np.float32), "f32", None),
        "e.f64": (rng.standard_normal(3), "f64", None),
        "f.i8": (rng.integers(-128, 127, 9, dtype=np.int8), "i8", None),
        "g.i64": (rng.integers(-(2**60), 2**60, 4, dtype=np.int64), "i64", None),
        "h.u16": (rng.integers(0, 65535, 6, dtype=np.uint16), "u16", None),
        "i.u64": (rng.integers(0, 2**63, 2, dtype=np.uint64), "u64", None),
        "j.empty": (np.zeros((0, 3), np.float32), "f32", None),
        "k.scalar": (np.array(1.5, np.float32), "f32", None),
        "l.tied": (np.arange(8, dtype=np.int32), "i32", None),
        "m.tied": (np.arange(8, dtype=np.int32), "i32", None),
    }


WRITE = """
w = ztensor.Writer(args["path"], **args.get("kw", {}))
for name, (hexdata, shape, dtype, logical) in sorted(args["tensors"].items()):
    w.add(name, bytes.fromhex(hexdata), shape, dtype, logical=logical, encoding=args.get("encoding"))
if args.get("attributes") is not None:
    w.set_attributes(args["attributes"])
w.finish()
"""

READ = """
out = {}
with ztensor.open(args["path"]) as src:
    v = src.verify(deep=True)
    out["__verify__"] = [v.checked, v.undigested]
    for name in src:
        t = src[name]
        parts = {}
        for p in t.parts:
            pt = t[p] if len(t.parts) > 1 else t
            parts[p] = [pt.dtype, pt.logical, bytes(pt.tobytes()).hex()]
        out[name] = {"shape": list(t.shape), "layout": t.layout, "parts": parts}
print(json.dumps(out))
"""


def spec(ts):
    return {
        n: [np.ascontiguousarray(a).tobytes().hex(), list(a.shape), d, lt]
        for n, (a, d, lt) in ts.items()
    }


def test_their_canonical_file_we_read_verify_and_rewrite_byte_for_byte(tmp_path):
    ts = tensors()
    theirs = tmp_path / "theirs.zt"
    attrs = {"model": "peer", "step": 12, "lr": 0.25, "tags": ["x", "y"], "nested": {"ok": True}}
    peer(WRITE, path=str(theirs), tensors=spec(ts), attributes=attrs)

    info = run_json("inspect", theirs)
    assert info["format"] == "ztensor-v2"
    assert info["version"] == "2"
    got = {t["name"]: t for t in info["tensors"]}
    assert set(got) == set(ts)
    for name, (a, _, _) in ts.items():
        assert got[name]["shape"] == list(a.shape), name
    assert got["b.bool"]["dtype"] == "bool"
    assert got["a.bf16"]["dtype"] == "bf16"
    assert info["metadata"]["step"] == 12 and info["metadata"]["tags"] == ["x", "y"]
    run("verify", theirs)

    # Values, through a format numpy reads.
    npz = tmp_path / "theirs.npz"
    run("convert", theirs, npz, "--drop-metadata")
    with np.load(npz) as z:
        for name, (a, _, _) in ts.items():
            assert z[name].tobytes() == np.ascontiguousarray(a).tobytes(), name

    ours = tmp_path / "ours.zt"
    run("convert", theirs, ours, "--to", "ztensor2")
    assert ours.read_bytes() == theirs.read_bytes()


def test_our_files_are_read_by_them_and_canonical_ones_match_theirs(tmp_path):
    ts = tensors()
    # Tessera's input: the same tensors as an .npz (bool, bf16 via ml_dtypes).
    npz = tmp_path / "in.npz"
    np.savez(npz, **{n: a for n, (a, _, _) in ts.items()})
    ours = tmp_path / "ours.zt"
    run("convert", npz, ours, "--zt-version", "2")
    assert run_json("inspect", ours)["format"] == "ztensor-v2"

    theirs = tmp_path / "theirs.zt"
    peer(WRITE, path=str(theirs), tensors=spec(ts))
    assert ours.read_bytes() == theirs.read_bytes(), "same tensors, different bytes"

    for extra in ([], ["--compress", "zstd"], ["--digest", "sha256"], ["--compress", "zstd:9", "--digest", "sha256"]):
        out = tmp_path / f"ours{len(extra)}.zt"
        run("convert", npz, out, "--to", "ztensor2", *extra)
        read = peer(READ, path=str(out))
        checked, undigested = read.pop("__verify__")
        assert undigested == 0 and checked >= len(ts), (extra, checked, undigested)
        assert set(read) == set(ts)
        for name, (a, d, lt) in ts.items():
            r = read[name]
            assert r["shape"] == list(a.shape), (extra, name)
            dtype, logical, hexdata = r["parts"]["data"]
            assert (dtype, logical) == (d, lt), (extra, name)
            assert bytes.fromhex(hexdata) == np.ascontiguousarray(a).tobytes(), (extra, name)


def test_sparse_profiles_both_ways(tmp_path):
    theirs = tmp_path / "sparse.zt"
    peer(
        """
w = ztensor.Writer(args["path"])
u64 = lambda xs: np.array(xs, dtype="<u8").tobytes()
w.add_object("coo", [3, 4], {"coords": {"dtype": "u64", "data": u64([0, 2, 1, 3])},
    "values": {"dtype": "f32", "data": np.array([1, 2], np.float32).tobytes()}}, layout="zt.sparse_coo/1")
w.add_object("csr", [2, 3], {"indices": {"dtype": "u64", "data": u64([0, 2, 1])},
    "indptr": {"dtype": "u64", "data": u64([0, 2, 3])},
    "values": {"dtype": "f64", "data": np.array([1.5, 2.5, 3.5]).tobytes()}}, layout="zt.sparse_csr/1")
w.finish()
""",
        path=str(theirs),
    )
    info = {t["name"]: t for t in run_json("inspect", theirs)["tensors"]}
    assert info["csr"]["layout"] == "sparse_csr" and info["coo"]["layout"] == "sparse_coo"
    dense = tmp_path / "dense.npz"
    run("convert", theirs, dense, "--densify")
    with np.load(dense) as z:
        assert z["csr"].tolist() == [[1.5, 0, 2.5], [0, 3.5, 0]]
        assert z["coo"][0, 1] == 1 and z["coo"][2, 3] == 2 and z["coo"].sum() == 3
    # v2 -> ours v2 is their bytes; v2 -> v1 -> v2 too (lossless both ways).
    ours = tmp_path / "ours.zt"
    run("convert", theirs, ours, "--to", "ztensor2")
    assert ours.read_bytes() == theirs.read_bytes()
    v1 = tmp_path / "v1.zt"
    run("convert", theirs, v1)
    assert run_json("inspect", v1)["format"] == "ztensor"
    back = tmp_path / "back.zt"
    run("convert", v1, back, "--zt-version", "2")
    assert back.read_bytes() == theirs.read_bytes()


def test_v1_written_by_ztensor_1_0_1_converts_to_v2_that_2_1_2_reads(tmp_path):
    import ztensor as zt1  # 1.0.1, in this process

    assert hasattr(zt1, "Writer") and not hasattr(zt1, "Source")
    v1 = tmp_path / "v1.zt"
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([7, -8], np.int64)}
    with zt1.Writer(str(v1)) as w:
        for n, a in arrays.items():
            w.add_tensor(n, a)
    v2 = tmp_path / "v2.zt"
    run("convert", v1, v2, "--zt-version", "2")
    read = peer(READ, path=str(v2))
    read.pop("__verify__")
    for n, a in arrays.items():
        assert read[n]["shape"] == list(a.shape)
        assert bytes.fromhex(read[n]["parts"]["data"][2]) == a.tobytes(), n


def test_their_appended_file_reads_both_generations(tmp_path):
    f = tmp_path / "app.zt"
    peer(
        """
w = ztensor.Writer(args["path"])
w.add("one", np.arange(3, dtype=np.int16).tobytes(), [3], "i16")
w.finish()
w = ztensor.Writer(args["path"], canonical=False, append=True)
w.add("two", np.arange(2, dtype=np.float32).tobytes(), [2], "f32")
w.finish()
""",
        path=str(f),
    )
    run("verify", f)
    npz = tmp_path / "app.npz"
    run("convert", f, npz)
    with np.load(npz) as z:
        assert z["one"].tolist() == [0, 1, 2] and z["two"].tolist() == [0.0, 1.0]


def test_our_shard_sets_are_read_by_them_as_one_model(tmp_path):
    # Their file -> our set of data shards and a root (shard table with sizes and
    # SHA-256) -> 2.1.2 opens the root, resolves the shards by its positional
    # convention, verifies every part and every shard digest, and reads their values.
    ts = tensors()
    theirs = tmp_path / "theirs.zt"
    peer(WRITE, path=str(theirs), tensors=spec(ts), attributes={"model": "sharded"})
    root = tmp_path / "set" / "model.zt"
    root.parent.mkdir()
    run("convert", theirs, root, "--to", "ztensor2", "--max-shard-size", "64")
    shards = sorted(p.name for p in root.parent.iterdir() if p.name != "model.zt")
    assert len(shards) >= 3 and shards[0] == f"model-00001-of-{len(shards):05}.zt", shards
    got = peer(READ, path=str(root))
    verified = got.pop("__verify__")
    assert verified == [len(ts), 0], verified
    assert set(got) == set(ts)
    for name, (a, dtype, lt) in ts.items():
        assert got[name]["parts"]["data"] == [dtype, lt, np.ascontiguousarray(a).tobytes().hex()], name
    assert peer(
        "print(json.dumps(ztensor.open(args['path']).attributes))", path=str(root)
    ) == {"model": "sharded"}
    # And we read it back as one model, shard digests checked.
    info = run_json("verify", root)
    assert info["ok"] and sum(c["layer"] == "shard digest" for c in info["checks"]) == len(shards)


def test_f4_e2m1_both_ways_with_their_packing(tmp_path):
    """f4_e2m1 (two per byte, low nibble first, the final odd nibble zero): their tensors
    read as f4 with the values ml_dtypes gives for that packing, and ours read by them
    as the same bytes under the same logical type."""
    codes = np.array([1, 2, 3, 4, 5, 6, 7, 15, 9], dtype=np.uint8)  # 9: an odd count
    packed = bytes(int(codes[i]) | (int(codes[i + 1]) << 4 if i + 1 < codes.size else 0)
                   for i in range(0, codes.size, 2))
    theirs = tmp_path / "f4.zt"
    peer(WRITE, path=str(theirs), tensors={
        "even": [packed[:4].hex(), [2, 4], "u8", "f4_e2m1"],
        "odd": [packed.hex(), [9], "u8", "f4_e2m1"],
    })
    info = {t["name"]: t for t in run_json("inspect", theirs)["tensors"]}
    assert (info["odd"]["dtype"], info["odd"]["shape"]) == ("f4_e2m1", [9])
    assert (info["even"]["dtype"], info["even"]["shape"]) == ("f4_e2m1", [2, 4])
    out = tmp_path / "f4.npz"
    run("convert", theirs, out, "--cast")
    want = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["odd"].astype(np.float64), want)
        np.testing.assert_array_equal(z["even"].astype(np.float64).reshape(-1), want[:8])
    # Ours: torch + safetensors' F4 tensor written as zTensor v2, read by ztensor.
    src = ROOT / "crates/tessera/tests/data/safetensors/fp4_torch.safetensors"
    ours = tmp_path / "ours.zt"
    run("convert", src, ours, "--to", "ztensor2")
    got = peer(READ, path=str(ours))
    assert got["blocks"]["shape"] == [3, 4]
    assert got["blocks"]["parts"]["data"] == ["u8", "f4_e2m1", "214365f7089a"]


def test_sparse_u32_indices_are_rewritten_as_their_bytes(tmp_path):
    # Their CSR and COO with u32 index parts: our v2 -> v2 rewrite keeps u32 (before,
    # widened to u64), so the file is theirs byte for byte, and they read it equal.
    theirs = tmp_path / "sparse32.zt"
    peer(
        """
w = ztensor.Writer(args["path"])
u32 = lambda xs: np.array(xs, dtype="<u4").tobytes()
w.add_object("coo", [3, 4], {"coords": {"dtype": "u32", "data": u32([0, 2, 1, 3])},
    "values": {"dtype": "i16", "data": np.array([7, -8], np.int16).tobytes()}}, layout="zt.sparse_coo/1")
w.add_object("csr", [2, 3], {"indices": {"dtype": "u32", "data": u32([0, 2, 1])},
    "indptr": {"dtype": "u32", "data": u32([0, 2, 3])},
    "values": {"dtype": "f32", "data": np.array([1.5, 2.5, 3.5], np.float32).tobytes()}}, layout="zt.sparse_csr/1")
w.finish()
""",
        path=str(theirs),
    )
    ours = tmp_path / "ours.zt"
    run("convert", theirs, ours, "--to", "ztensor2")
    assert ours.read_bytes() == theirs.read_bytes()
    compressed = tmp_path / "zstd.zt"
    run("convert", theirs, compressed, "--to", "ztensor2", "--compress", "zstd")
    got = peer(
        """
with ztensor.open(args["path"]) as src:
    src.verify(deep=True)
    out = {n: {p: [src[n][p].dtype, np.frombuffer(src[n][p].tobytes(), np.uint8).tolist()]
               for p in src[n].parts} for n in ("coo", "csr")}
print(json.dumps(out))
""",
        path=str(compressed),
    )
    u32 = lambda xs: np.array(xs, "<u4").view(np.uint8).tolist()  # noqa: E731
    assert got["csr"]["indices"] == ["u32", u32([0, 2, 1])]
    assert got["csr"]["indptr"] == ["u32", u32([0, 2, 3])]
    assert got["coo"]["coords"] == ["u32", u32([0, 2, 1, 3])]
    assert got["coo"]["values"][1] == np.array([7, -8], np.int16).view(np.uint8).tolist()

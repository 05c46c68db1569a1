"""FOLD interop with the original, pyfolds==1.0.2 (FoldWriter/FoldReader, loaded without
torch as ORIGINALS.md §1.10 describes), both directions, plus safetensors for the STEN
payloads we write. Where torch is installed, the torch_state of our checkpoints goes
through torch.load(weights_only=True) and pyfolds' load_fold_or_mind too."""
import importlib.util
import io
import json
import struct
import sys
import types
import warnings

import numpy as np
import pytest
import reedsolo
from safetensors.numpy import load as st_load

from conftest import SAMPLES, run, run_json, stub_torch

try:  # the real torch, when installed, before pyfolds' loader would stub it
    import torch
except ImportError:
    torch = None


def _load_pyfolds():
    stub_torch()
    spec = importlib.util.find_spec("pyfolds")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pyfolds not installed (scripts/test.sh installs it with --no-deps)", allow_module_level=True)
    base = list(spec.submodule_search_locations)[0] + "/serialization/"
    pkg = types.ModuleType("pyfolds_ser")
    pkg.__path__ = [base]
    sys.modules["pyfolds_ser"] = pkg
    mods = {}
    for name in ("ecc", "foldio"):
        s = importlib.util.spec_from_file_location(f"pyfolds_ser.{name}", base + name + ".py")
        m = importlib.util.module_from_spec(s)
        sys.modules[f"pyfolds_ser.{name}"] = m
        s.loader.exec_module(m)
        mods[name] = m
    return mods["foldio"], mods["ecc"]


foldio, ecc = _load_pyfolds()

META = {
    "model_type": "peer",
    "note": "ã unicode \u20ac \U0001F600",
    "floats": [0.1, 1e-05, 1e16, 1.5, -0.0, 123456.789],
    "seed": 1453882350627420034,
    "nested": {"z": 1, "a": [True, None, "x"]},
}


def pyfolds_write(path, chunks, compress="zstd", rs=None, metadata=META):
    with foldio.FoldWriter(str(path), compress=compress, ecc=ecc.ReedSolomonECC(rs) if rs else None) as w:
        for name, ctype, payload in chunks:
            w.add_chunk(name, ctype, payload)
        w.finalize(metadata=metadata)


def pyfolds_read_all(path):
    """Every chunk through pyfolds 1.0.2 with verify=True; any warning (manifest hash
    mismatch included) fails the test."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message="google-crc32c")
        with foldio.FoldReader(str(path), use_mmap=True) as r:
            for name in r.list_chunks():
                out[name] = r.read_chunk_bytes(name, verify=True)
            index = r.index
    return out, index


def npz_bytes(arrays):
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


ARRAYS = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
    "f64": np.array([np.pi, -1e300, 5e-324]),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "u16": np.array([[1, 65535]], dtype=np.uint16),
    "i64be": np.array([1, -2, 3], dtype=">i8"),
    "f16": np.array([0.5, -2.0], dtype=np.float16),
    "b": np.array([True, False, True]),
    "c64": np.array([1 + 2j, -3j], dtype=np.complex64),
    "scalar": np.array(3.25, dtype=np.float32),
}


DTYPES = {"f32": "f32", "f64": "f64", "i8": "i8", "u16": "u16", "i64be": "i64", "f16": "f16",
          "b": "bool", "c64": "c64", "scalar": "f32"}


# --- pyfolds writes, we read -------------------------------------------------------

@pytest.mark.parametrize("compress,rs", [("zstd", None), ("none", None), ("none", 16), ("zstd", 16)])
def test_we_read_and_verify_pyfolds_files(tmp_path, compress, rs):
    p = tmp_path / "py.fold"
    blob = bytes(range(256)) * 3
    chunks = [("metrics", "JSON", json.dumps({"a": 1.5}).encode()), ("blob", "RAW0", blob),
              ("nuclear_arrays", "NPZ0", npz_bytes(ARRAYS)), ("torch_state", "TSAV", b"\x80\x04not-a-real-pickle.")]
    if rs:  # pyfolds 1.0.2 writes correct parity only for chunks of one block
        chunks = [c for c in chunks if c[0] != "nuclear_arrays"] + [("small", "JSON", b'{"k":"v"}')]
        chunks = [(n, t, b[:200]) for n, t, b in chunks]
    pyfolds_write(p, chunks, compress=compress, rs=rs)
    rep = run_json("verify", p)
    assert rep["ok"], rep
    layers = {(c["subject"], c["layer"]): c["status"] for c in rep["checks"]}
    assert layers[("metadata", "manifest_hash")] == "ok"
    if rs:
        assert all(layers[(f'chunk "{n}"', "reed-solomon")] == "ok" for n, _, _ in chunks)
    info = run_json("inspect", p)
    assert info["metadata"]["note"] == META["note"]
    assert info["metadata"]["seed"] == META["seed"]
    for name, ctype, payload in chunks:
        assert any(c["name"] == name and c["kind"] == ctype for c in info["chunks"])
        run("extract", p, name, "-o", tmp_path / f"{name}.bin")
        assert (tmp_path / f"{name}.bin").read_bytes() == payload
    if not rs:
        # Values are checked through our writer in test_pyfolds_reads_our_files.
        names = {t["name"]: t for t in info["tensors"]}
        for k, a in ARRAYS.items():
            t = names[f"nuclear_arrays/{k}"]
            assert t["shape"] == list(a.shape)
            assert t["dtype"] == DTYPES[k], k


def test_python_only_json_values_verify(tmp_path):
    """NaN, Infinity and ints beyond 64 bits: Python writes them; the manifest_hash still
    verifies, and the values read back."""
    p = tmp_path / "nan.fold"
    pyfolds_write(p, [("m", "JSON", b"{}")], metadata={"r_hat": float("nan"), "x": float("-inf"), "seed": 2**100})
    rep = run_json("verify", p)
    assert rep["ok"], rep
    info = run_json("inspect", p)
    assert info["metadata"]["seed"] == str(2**100)  # inspect --json prints ints beyond 64 bits as text


def test_we_repair_pyfolds_files_they_cannot(tmp_path):
    """pyfolds 1.0.2 decodes multi-block parity wrongly; our repair rewrites it block-wise
    and fixes damage in files whose parity is block-wise."""
    src = SAMPLES / "fold" / "pyfolds102_none_rs16_multiblock_BROKEN_ECC.fold"
    out = tmp_path / "fixed.fold"
    rep = json.loads(run("repair", src, "-o", out, "--json").stdout)
    assert rep["ok"] and rep["chunks"][0]["status"] == "parity rewritten"
    head = (SAMPLES / "fold" / "pyfoldsHEAD_e45e9eb_none_rs16_multiblock.fold").read_bytes()
    fixed = out.read_bytes()
    # The rewritten parity is what pyfolds HEAD writes for the same payload.
    assert _parity(fixed, "big") == _parity(head, "big")


def _parity(data, name):
    off, n = struct.unpack(">QQ", data[12:28])
    index = json.loads(data[off:off + n])
    e = next(c for c in index["chunks"] if c["name"] == name)
    start = e["offset"] + 32 + e["comp_len"]
    return data[start:start + e["ecc_len"]]


# --- we write, pyfolds reads --------------------------------------------------------

def _source(tmp_path):
    """A pyfolds file holding tensors (NPZ0), opaque chunks and rich metadata."""
    p = tmp_path / "src.fold"
    pyfolds_write(p, [("torch_state", "TSAV", b"\x80\x04opaque"), ("metrics", "JSON", b'{"m":2}'),
                      ("nuclear_arrays", "NPZ0", npz_bytes(ARRAYS))], compress="zstd")
    return p


def _chunk_table(data):
    """Each chunk as stored (header, payload, parity) with its index entry less the
    offset, by name in file order; and the index."""
    off, n = struct.unpack(">QQ", data[12:28])
    index = json.loads(data[off:off + n])
    out = {}
    for e in index["chunks"]:
        end = e["offset"] + 32 + e["comp_len"] + e["ecc_len"]
        out[e["name"]] = (data[e["offset"]:end], {k: v for k, v in e.items() if k != "offset"})
    return out, index


def _same_arrays(got, want):
    assert sorted(got) == sorted(want)
    for k, a in want.items():
        assert got[k].dtype == a.dtype and got[k].shape == a.shape and np.array_equal(got[k], a), k


@pytest.mark.parametrize("args", [[], ["--compress", "zstd"], ["--ecc", "16"], ["--compress", "zstd", "--ecc", "16"]])
def test_pyfolds_reads_our_files(tmp_path, args):
    """A pyfolds file rewritten by us: every chunk's payload as it was (NPZ0 included, so
    read_nuclear_arrays finds the arrays); --ecc gives new parity over the same bytes."""
    src = _source(tmp_path)
    ours = tmp_path / "ours.mind"
    run("convert", src, ours, *args)
    theirs, _ = _chunk_table(src.read_bytes())
    mine, index = _chunk_table(ours.read_bytes())
    assert list(mine) == list(theirs)
    for name, (stored, entry) in mine.items():
        want_stored, want_entry = theirs[name]
        n = 32 + entry["comp_len"]
        assert stored[:28] == want_stored[:28], name  # the header but ecc_len
        assert stored[32:n] == want_stored[32:n], name  # the payload
        assert {k: v for k, v in entry.items() if k not in ("ecc_algo", "ecc_len")} == \
            {k: v for k, v in want_entry.items() if k not in ("ecc_algo", "ecc_len")}
        assert entry["ecc_algo"] == ("rs(16)" if "--ecc" in args else "none")
    assert index["format"] == "fold" and index["version"] == "1.2.0"
    meta = {k: v for k, v in index["metadata"].items() if k not in ("chunk_hashes", "manifest_hash")}
    assert meta == META
    if "--ecc" in args:
        # pyfolds 1.0.2 decodes multi-block parity wrongly (its own files too): the NPZ0
        # chunk is more than one block; the others read.
        assert mine["nuclear_arrays"][1]["comp_len"] > 239
        with foldio.FoldReader(str(ours), use_mmap=True) as r:
            assert r.read_chunk_bytes("torch_state") == b"\x80\x04opaque"
            assert r.read_json("metrics") == {"m": 2}
        return
    chunks, _ = pyfolds_read_all(ours)
    assert chunks["torch_state"] == b"\x80\x04opaque"
    assert chunks["metrics"] == b'{"m":2}'
    _same_arrays(foldio.read_nuclear_arrays(str(ours)), ARRAYS)


SMALL = {"N": np.arange(8, dtype=np.int32).reshape(2, 4), "theta": np.array([1.5], dtype=np.float32)}


@pytest.mark.parametrize("compress,rs,arrays", [("zstd", None, ARRAYS), ("none", None, ARRAYS),
                                                ("none", 16, SMALL), ("zstd", 16, SMALL),
                                                ("none", 16, ARRAYS), ("zstd", 16, ARRAYS)])
def test_fold_to_fold_keeps_pyfolds_chunks_byte_for_byte(tmp_path, compress, rs, arrays):
    """Every chunk pyfolds wrote — its zstd frames, its parity (1.0.2's multi-block
    layout too), NPZ0 included — comes out of a FOLD→FOLD rewrite byte for byte, with
    the same index entry, in the same order, with the same metadata."""
    src = tmp_path / "py.fold"
    pyfolds_write(src, [("torch_state", "TSAV", b"\x80\x04opaque"),
                        ("llm_manifest", "JSON", b'{"routing":{"resume_training":"torch_state"}}'),
                        ("metrics", "JSON", b'{"loss":0.5}'),
                        ("nuclear_arrays", "NPZ0", npz_bytes(arrays))], compress=compress, rs=rs)
    ours = tmp_path / "ours.fold"
    run("convert", src, ours)
    theirs, ti = _chunk_table(src.read_bytes())
    mine, mi = _chunk_table(ours.read_bytes())
    assert list(mine) == list(theirs)
    for name in theirs:
        assert mine[name] == theirs[name], name
    assert mi["metadata"] == ti["metadata"]
    npz = theirs["nuclear_arrays"][1]
    if rs and npz["comp_len"] > 255 - rs:
        return  # pyfolds 1.0.2 cannot read its own multi-block parity back
    _same_arrays(foldio.read_nuclear_arrays(str(ours)), arrays)
    chunks, _ = pyfolds_read_all(ours)
    assert chunks["metrics"] == b'{"loss":0.5}'


CKPT = {
    "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 3,
    "fc.bias": np.array([0.5, -1.0], dtype=np.float32),
    "hist": np.linspace(0, 1, 4),
    "counts": np.array([1, 2, 70000], dtype=np.uint32),
}


def _checkpoint(tmp_path, *extra):
    """Our checkpoint of a safetensors training state, with metrics and history given."""
    from safetensors.numpy import save_file
    src = tmp_path / "state.safetensors"
    save_file(CKPT, str(src), metadata={"epoch": "3"})
    (tmp_path / "metrics.json").write_text(json.dumps({"loss": 0.25, "acc": [0.5, 0.75]}))
    (tmp_path / "history.json").write_text('{"theta": [1.0, 1.5]}')
    ours = tmp_path / "ckpt.fold"
    run("convert", src, ours, "--checkpoint", "--chunk", f"metrics={tmp_path / 'metrics.json'}",
        "--chunk", f"history={tmp_path / 'history.json'}", "--nuclear", "fc.weight", *extra)
    return ours


@pytest.mark.parametrize("args", [[], ["--compress", "zstd"]])
def test_pyfolds_reads_our_checkpoint(tmp_path, args):
    """pyfolds' readers find the standard chunks of our checkpoint and the source's
    values in them: torch_state (a torch.save zip), llm_manifest, metrics, history,
    nuclear_arrays (read_nuclear_arrays)."""
    ours = _checkpoint(tmp_path, *args)
    chunks, index = pyfolds_read_all(ours)
    kinds = [(e["name"], e["ctype"]) for e in index["chunks"]]
    assert kinds == [("torch_state", "TSAV"), ("llm_manifest", "JSON"), ("metrics", "JSON"),
                     ("history", "JSON"), ("nuclear_arrays", "NPZ0")]
    with foldio.FoldReader(str(ours), use_mmap=True) as r:
        assert r.read_json("metrics") == {"loss": 0.25, "acc": [0.5, 0.75]}
        assert r.read_json("history") == {"theta": [1.0, 1.5]}
        manifest = r.read_json("llm_manifest")
    assert manifest["routing"]["resume_training"] == "torch_state"
    assert manifest["chunks_expected"] == [k[0] for k in kinds]
    assert chunks["torch_state"][:4] == b"PK\x03\x04"  # torch.save's zip, as pyfolds' own
    _same_arrays(foldio.read_nuclear_arrays(str(ours)),
                 {"counts": CKPT["counts"], "fc.weight": CKPT["fc.weight"]})


@pytest.mark.skipif(torch is None or not hasattr(torch, "load"), reason="torch not installed")
def test_pyfolds_resumes_from_our_checkpoint(tmp_path):
    """Real torch: torch.load(weights_only=True) loads torch_state, and pyfolds'
    load_fold_or_mind builds a module from it with the source's values."""
    ours = _checkpoint(tmp_path)
    chunks, _ = pyfolds_read_all(ours)
    payload = torch.load(io.BytesIO(chunks["torch_state"]), weights_only=True)
    assert payload["epoch"] == "3" and "config" not in payload
    assert sorted(payload["state_dict"]) == ["fc.bias", "fc.weight", "hist"]
    for k, t in payload["state_dict"].items():
        assert np.array_equal(t.numpy(), CKPT[k]) and t.numpy().dtype == CKPT[k].dtype, k

    class Net(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()
            assert cfg is None
            self.fc = torch.nn.Linear(3, 2)
            self.register_buffer("hist", torch.zeros(4, dtype=torch.float64))

    net = foldio.load_fold_or_mind(str(ours), Net)
    assert np.array_equal(net.fc.weight.detach().numpy(), CKPT["fc.weight"])
    assert np.array_equal(net.fc.bias.detach().numpy(), CKPT["fc.bias"])
    assert np.array_equal(net.hist.numpy(), CKPT["hist"])


@pytest.mark.skipif(torch is None or not hasattr(torch, "load"), reason="torch not installed")
def test_a_torch_training_state_becomes_torch_state(tmp_path):
    """A torch.save of model and optimizer state: every tensor in torch_state's
    state_dict under its joined name, the non-tensor entries (epoch, param_groups) beside
    it, loadable with weights_only=True."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.randn(4, 3)).sum().backward()
    opt.step()
    src = tmp_path / "train.pt"
    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, src)
    ours = tmp_path / "train.fold"
    run("convert", src, ours, "--checkpoint")
    with foldio.FoldReader(str(ours), use_mmap=True) as r:
        payload = r.read_torch("torch_state")  # weights_only=True inside
    orig = torch.load(src, weights_only=True)
    sd = payload["state_dict"]
    for k, t in orig["model"].items():
        assert torch.equal(sd[f"model.{k}"], t), k
    for i, state in orig["optimizer"]["state"].items():
        for k, t in state.items():
            assert torch.equal(sd[f"optimizer.state.{i}.{k}"], t), (i, k)
    assert payload["epoch"] == 3
    assert payload["optimizer.param_groups"][0]["lr"] == 1e-3


def test_checkpoint_chunk_names_and_json_are_refused_clearly(tmp_path):
    from safetensors.numpy import save_file
    src = tmp_path / "s.safetensors"
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(src))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for arg, says in [("weights=x.json", 'unknown chunk "weights"'),
                      (f"metrics={bad}", 'chunk "metrics" (file'),
                      ("metrics", "is not NAME=FILE")]:
        p = run("convert", src, tmp_path / "o.fold", "--checkpoint", "--chunk", arg, check=False)
        assert p.returncode != 0 and says in p.stderr, (arg, p.stderr)
        assert not (tmp_path / "o.fold").exists()


def test_our_multiblock_parity_is_reedsolo_blockwise(tmp_path):
    src = tmp_path / "big.fold"
    big = {"w": np.linspace(-1, 1, 3000, dtype=np.float32), "i": np.arange(100, dtype=np.int64)}
    pyfolds_write(src, [("nuclear_arrays", "NPZ0", npz_bytes(big)), ("blob", "RAW0", bytes(range(256)) * 9)])
    ours = tmp_path / "ours.fold"
    run("convert", src, ours, "--ecc", "16")
    data = ours.read_bytes()
    off, n = struct.unpack(">QQ", data[12:28])
    index = json.loads(data[off:off + n])
    rs = reedsolo.RSCodec(16)
    multi = 0
    for e in index["chunks"]:
        start = e["offset"] + 32
        comp = data[start:start + e["comp_len"]]
        parity = data[start + e["comp_len"]:start + e["comp_len"] + e["ecc_len"]]
        want = b"".join(bytes(rs.encode(comp[i:i + 239])[-16:]) for i in range(0, len(comp), 239))
        assert parity == want, e["name"]
        multi += len(comp) > 239
    assert multi > 0


def test_repaired_file_reads_in_pyfolds(tmp_path):
    src = _source(tmp_path)
    ours = tmp_path / "ours.fold"
    run("convert", src, ours, "--ecc", "16", "--compress", "zstd")
    data = bytearray(ours.read_bytes())
    off, n = struct.unpack(">QQ", data[12:28])
    index = json.loads(bytes(data[off:off + n]))
    e = next(c for c in index["chunks"] if c["name"] == "torch_state")
    start = e["offset"] + 32
    for i in range(min(8, e["comp_len"])):
        data[start + i] ^= 0x5A
    bad = tmp_path / "bad.fold"
    bad.write_bytes(bytes(data))
    # Repaired damage is damage: exit 1, the checks say what was repaired.
    p = run("verify", "--json", bad, check=False)
    rep = json.loads(p.stdout)
    assert p.returncode == 1 and rep["result"] == "repaired"
    assert any(c["status"] == "repaired" for c in rep["checks"])
    fixed = tmp_path / "fixed.fold"
    run("repair", bad, "-o", fixed)
    assert fixed.read_bytes() == ours.read_bytes()
    # (pyfolds 1.0.2 reads the single-block chunks; the NPZ0 is more than one block.)
    with foldio.FoldReader(str(fixed), use_mmap=True) as r:
        assert r.read_chunk_bytes("torch_state", verify=True) == b"\x80\x04opaque"
    # Beyond nsym/2 in one block: reported, nothing written, exit 1.
    for i in range(9):
        data[start + i] ^= 0xFF
    bad.write_bytes(bytes(data))
    p = run("repair", bad, "-o", tmp_path / "no.fold", check=False)
    assert p.returncode == 1 and not (tmp_path / "no.fold").exists()
    assert run("verify", bad, check=False).returncode == 1


def test_pyfolds_samples_verify(tmp_path):
    for f in sorted((SAMPLES / "fold").glob("*.fold")):
        rep = run_json("verify", f)
        assert rep["ok"], (f, rep)


@pytest.mark.parametrize("rs,compress", [(None, "none"), (16, "none"), (None, "zstd")])
def test_our_bytes_equal_pyfolds_bytes(tmp_path, rs, compress, monkeypatch):
    """Same chunks, metadata and timestamp: our writer produces pyfolds' exact bytes
    (parity single-block; zstd frames equal while both sides bundle libzstd 1.5.7)."""
    chunks = [("metrics", "JSON", b'{"a":1}'), ("blob", "RAW0", bytes(range(200))),
              ("torch_state", "TSAV", b"\x80\x04opaque"), ("odd", "X-1!", b"")]
    monkeypatch.setattr(foldio.time, "time", lambda: 1767323045.0)  # 2026-01-02T03:04:05Z
    theirs = tmp_path / "theirs.fold"
    pyfolds_write(theirs, chunks, compress=compress, rs=rs)
    ours = tmp_path / "ours.fold"
    run("convert", theirs, ours, "--ts", "2026-01-02T03:04:05Z", "--compress", compress,
        *(["--ecc", str(rs)] if rs else []))
    assert ours.read_bytes() == theirs.read_bytes()

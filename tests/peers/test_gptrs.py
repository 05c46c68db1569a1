"""GPTRS v2 interop through the CLI.

GPTRS has no package on PyPI: the peer is a reader/writer written here with `struct`
(and `blake3` for BaseParamId = BLAKE3(name)[:16]), following the spec and the original
Python exporter (`json.dumps(..., separators=(",", ":"))`, names sorted, data contiguous).
Files it writes are read by `tessera`; files `tessera` writes are parsed by it.
The safetensors cases use the real `safetensors` package and are skipped while the
CLI cannot read or write safetensors.
"""
import json
import struct

import blake3
import ml_dtypes
import numpy as np
import pytest

from conftest import SAMPLES, run, run_json

TAGS = {0: np.dtype("<f4"), 1: np.dtype("<f2"), 2: np.dtype(ml_dtypes.bfloat16), 3: np.dtype("<i4")}
TAG_OF = {np.dtype("float32"): 0, np.dtype("float16"): 1, np.dtype(ml_dtypes.bfloat16): 2, np.dtype("int32"): 3}
NAMES = {0: "f32", 1: "f16", 2: "bf16", 3: "i32"}


def base_id(name):
    return blake3.blake3(name.encode()).digest()[:16]


def py_write(path, tensors, kind=None, config=None, requires_grad=None, real_ids=True):
    """Writes a checkpoint (when kind is given) or an archive, laid out as the original exporter
    does (but a 0-d array stays rank 0: the exporter's np.ascontiguousarray makes it [1])."""
    chk = kind is not None
    names = sorted(tensors)
    rg = requires_grad or {}

    def index(data_start):
        out = struct.pack("<I", len(names))
        off = data_start
        for n in names:
            a = np.asarray(tensors[n])
            out += struct.pack("<I", len(n.encode())) + n.encode()
            if chk:
                out += base_id(n) if real_ids else b"\0" * 16
            out += struct.pack("<I", a.ndim) + b"".join(struct.pack("<Q", d) for d in a.shape)
            out += struct.pack("<IB", TAG_OF[a.dtype], 1 if rg.get(n) else 0)
            out += struct.pack("<QQ", off, a.nbytes)
            off += a.nbytes
        return out

    head = (b"GPTRSCHK" if chk else b"GPTRSTEN") + struct.pack("<I", 2)
    if chk:
        cfg = json.dumps({"kind": kind, "config": dict(config or {})}, separators=(",", ":")).encode()
        head += struct.pack("<I", len(cfg)) + cfg
    idx_len = len(index(0))
    data_start = len(head) + 4 + idx_len
    out = head + struct.pack("<I", idx_len) + index(data_start)
    out += b"".join(np.asarray(tensors[n]).tobytes() for n in names)
    path.write_bytes(out)


def py_read(path):
    """Parses a GPTRS v2 file strictly; returns (config bytes or None, entries, arrays)."""
    b = path.read_bytes()
    magic, version = b[:8], struct.unpack_from("<I", b, 8)[0]
    assert magic in (b"GPTRSCHK", b"GPTRSTEN") and version == 2
    pos, cfg = 12, None
    if magic == b"GPTRSCHK":
        (n,) = struct.unpack_from("<I", b, pos)
        cfg = b[pos + 4:pos + 4 + n]
        pos += 4 + n
    (index_len,) = struct.unpack_from("<I", b, pos)
    pos += 4
    end = pos + index_len
    (count,) = struct.unpack_from("<I", b, pos)
    pos += 4
    entries, arrays = [], {}
    for _ in range(count):
        (nl,) = struct.unpack_from("<I", b, pos)
        name = b[pos + 4:pos + 4 + nl].decode()
        pos += 4 + nl
        bid = None
        if cfg is not None:
            bid = b[pos:pos + 16]
            pos += 16
        (rank,) = struct.unpack_from("<I", b, pos)
        dims = list(struct.unpack_from("<%dQ" % rank, b, pos + 4))
        pos += 4 + 8 * rank
        tag, rg, off, blen = struct.unpack_from("<IBQQ", b, pos)
        pos += 21
        dt = TAGS[tag]
        assert blen == int(np.prod(dims, dtype=np.int64)) * dt.itemsize
        arrays[name] = np.frombuffer(b[off:off + blen], dtype=dt).reshape(dims)
        entries.append(dict(name=name, base_id=bid, dims=dims, tag=tag, rg=rg, offset=off, len=blen))
    assert pos == end, "no trailing index bytes"
    return cfg, entries, arrays, end


def sample_arrays():
    return {
        "b": np.array([1, -2], dtype=np.int32),
        "scalar": np.array([3.5], dtype=np.float32),
        "wte.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
    }


def test_tessera_reads_what_the_struct_writer_writes(tmp_path):
    t = {
        "h.0.w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
        "h.0.half": np.array([1.5, -2.0, 65504.0], dtype=np.float16),
        "h.0.bf": np.array([1.0, -0.5], dtype=ml_dtypes.bfloat16),
        "ids": np.array([[7], [-9]], dtype=np.int32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    p = tmp_path / "m.gptrs"
    py_write(p, t, kind="gpt", config={"vocab_size": 16, "dropout": 0.1}, requires_grad={"h.0.w": True})
    doc = run_json("inspect", p)
    assert doc["format"] == "gptrs"
    assert doc["metadata"] == {"kind": "gpt", "config": {"vocab_size": 16, "dropout": 0.1}}
    by = {x["name"]: x for x in doc["tensors"]}
    assert [x["name"] for x in doc["tensors"]] == sorted(t)
    for n, a in t.items():
        assert by[n]["shape"] == list(a.shape)
        assert by[n]["dtype"] == NAMES[TAG_OF[a.dtype]]
        # A set flag is shown; a 0 byte is not turned into an invented `false`.
        assert by[n]["attrs"].get("requires_grad", False) == (n == "h.0.w")
        assert ("requires_grad" in by[n]["attrs"]) == (n == "h.0.w")
    v = run_json("verify", p)
    assert v["ok"]
    ids = [c for c in v["checks"] if c["layer"] == "base_id"]
    assert len(ids) == len(t) and all(c["status"] == "ok" for c in ids)

    # A corrupted stored id fails verify for that tensor only, exit code 1.
    b = bytearray(p.read_bytes())
    _, entries, _, _ = py_read(p)
    name = "ids"
    i = b.index(struct.pack("<I", len(name)) + name.encode() + base_id(name))
    b[i + 4 + len(name)] ^= 1
    p.write_bytes(bytes(b))
    r = run("verify", p, "--json", check=False)
    assert r.returncode == 1
    failed = [c for c in json.loads(r.stdout)["checks"] if c["status"] == "failed"]
    assert [c["subject"] for c in failed] == ['tensor "ids"']


def test_tessera_rewrite_is_what_the_struct_reader_expects(tmp_path):
    out = tmp_path / "out.gptrs"
    run("convert", SAMPLES / "gptrs" / "py_exporter_v2.gptrs", out)
    cfg, entries, arrays, data_start = py_read(out)
    assert cfg == b'{"kind":"gpt","config":{"vocab_size":16,"embed_dim":8}}'
    assert [e["name"] for e in entries] == ["b", "scalar", "wte.weight"]
    # Real base ids are stored by default; data is contiguous right after the index.
    off = data_start
    for e in entries:
        assert e["base_id"] == base_id(e["name"])
        assert e["offset"] == off
        off += e["len"]
    assert off == out.stat().st_size
    assert [e["rg"] for e in entries] == [1, 0, 0]
    for n, a in sample_arrays().items():
        np.testing.assert_array_equal(arrays[n], a)

    # --zero-base-id gives back the Python exporter's file exactly.
    z = tmp_path / "z.gptrs"
    run("convert", SAMPLES / "gptrs" / "py_exporter_v2.gptrs", z, "--zero-base-id")
    assert z.read_bytes() == (SAMPLES / "gptrs" / "py_exporter_v2.gptrs").read_bytes()


def test_archive_round_trip_through_the_struct_writer(tmp_path):
    p = tmp_path / "in.gptrsten"
    t = {"x": np.arange(5, dtype=np.int32), "y": np.full((2, 2), 0.25, dtype=np.float16)}
    py_write(p, t, requires_grad={"y": True})
    out = tmp_path / "out.gptrsten"
    run("convert", p, out)
    assert out.read_bytes() == p.read_bytes()
    cfg, entries, arrays, _ = py_read(out)
    assert cfg is None and [e["rg"] for e in entries] == [0, 1]


def test_scalar_is_written_as_rank_zero(tmp_path):
    # A rank-0 tensor from the struct writer stays rank 0 through tessera.
    p = tmp_path / "s.gptrsten"
    py_write(p, {"s": np.array(2.5, dtype=np.float32)})
    assert run_json("inspect", p)["tensors"][0]["shape"] == []
    out = tmp_path / "s.gptrs"
    run("convert", p, out)
    _, entries, arrays, _ = py_read(out)
    assert entries[0]["dims"] == [] and arrays["s"].item() == 2.5


def _safetensors_supported(tmp_path):
    from safetensors.numpy import save_file

    p = tmp_path / "probe.safetensors"
    save_file({"a": np.zeros(1, dtype=np.float32)}, str(p))
    r = run("inspect", p, check=False)
    return r.returncode == 0


def test_safetensors_to_gptrs_refuses_or_casts(tmp_path):
    if not _safetensors_supported(tmp_path):
        pytest.skip("this build cannot read safetensors yet")
    from safetensors.numpy import save_file

    src = tmp_path / "m.safetensors"
    save_file(
        {"w": np.array([[1.5, -2.25]], dtype=np.float64), "n": np.array([3, -4], dtype=np.int64),
         "ok": np.array([1.0], dtype=np.float32)},
        str(src),
        metadata={"format": "pt"},
    )
    out = tmp_path / "m.gptrs"
    r = run("convert", src, out, check=False)
    assert r.returncode != 0 and not out.exists()
    assert '"n"' in r.stderr or '"w"' in r.stderr
    r = run("convert", src, out, "--cast")
    assert 'cast "w" f64 -> f32' in r.stdout and 'cast "n" i64 -> i32' in r.stdout
    cfg, entries, arrays, _ = py_read(out)
    assert json.loads(cfg) == {"kind": "tensors", "config": {"format": "pt"}}
    np.testing.assert_array_equal(arrays["w"], np.array([[1.5, -2.25]], dtype=np.float32))
    np.testing.assert_array_equal(arrays["n"], np.array([3, -4], dtype=np.int32))


def test_gptrs_to_safetensors_reads_in_the_peer(tmp_path):
    if not _safetensors_supported(tmp_path):
        pytest.skip("this build cannot read safetensors yet")
    from safetensors.numpy import load_file

    out = tmp_path / "s.safetensors"
    run("convert", SAMPLES / "gptrs" / "py_exporter_v2.gptrs", out)
    got = load_file(str(out))
    for n, a in sample_arrays().items():
        np.testing.assert_array_equal(got[n], a)

"""GGUF against the reference peer, gguf-py: files it writes (plain and quantized
tensors, every metadata value type, custom alignment) read by `tessera inspect --json`,
`extract`, `verify`, `diff`; files we write (a GGUF rewrite, the tour's model) read back
by gguf.GGUFReader with equal values; byte identity with GGUFWriter for the same inputs;
hostile headers that make gguf-py loop fail fast here."""
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q, GGUFValueType as T  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

from conftest import TESSERA, run, run_json  # noqa: E402


KVS = [
    # key, value, type, sub type, our annotation
    ("t.u8", 1, T.UINT8, None, "u8"),
    ("t.i8", -1, T.INT8, None, "i8"),
    ("t.u16", 2, T.UINT16, None, "u16"),
    ("t.i16", -2, T.INT16, None, "i16"),
    ("t.u32", 3, T.UINT32, None, "u32"),
    ("t.i32", -3, T.INT32, None, "i32"),
    ("t.f32", 0.25, T.FLOAT32, None, "f32"),
    ("t.bool", True, T.BOOL, None, "bool"),
    ("t.str", "ünïcode", T.STRING, None, "str"),
    ("t.u64", 2**64 - 1, T.UINT64, None, "u64"),
    ("t.i64", -(2**63), T.INT64, None, "i64"),
    ("t.f64", 1.0e-10, T.FLOAT64, None, "f64"),
    ("t.tokens", ["<s>", "</s>", "▁a"], T.ARRAY, T.STRING, "[str]"),
    ("t.scores", [0.0, -1.5], T.ARRAY, T.FLOAT32, "[f32]"),
    ("t.ids", [1, 2, 3], T.ARRAY, T.UINT32, "[u32]"),
    ("t.nested", [[1, 2], [3]], T.ARRAY, None, "[[i32]]"),
]


def make_peer_file(path, alignment=None, big=False, seed=7):
    """A GGUF written by gguf-py; returns {name: (ggml type, row-major shape, bytes)}."""
    rng = np.random.default_rng(seed)
    endian = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(str(path), "llama", endianess=endian)
    if alignment:
        w.add_custom_alignment(alignment)
    for k, v, t, s, _ in KVS:
        w.add_key_value(k, v, t, sub_type=s)
    tensors = {}

    def add(name, arr, raw=None, shape=None):
        w.add_tensor(name, arr, raw_dtype=raw)
        tensors[name] = (raw.name if raw else None, shape or list(arr.shape), arr.tobytes())

    add("tok_embd", rng.standard_normal((8, 16)).astype(np.float32))
    add("norm", rng.standard_normal(16).astype(np.float16))
    add("pos", np.arange(-4, 4, dtype=np.int32))
    add("big", np.array([2**62, -5], dtype=np.int64))
    add("d", np.array([[0.5], [-0.25]], dtype=np.float64))
    x = rng.standard_normal((4, 64)).astype(np.float32)
    add("q8", gguf.quants.quantize(x, Q.Q8_0), Q.Q8_0, [4, 64])
    add("q4", gguf.quants.quantize(x, Q.Q4_0), Q.Q4_0, [4, 64])
    add("bf", gguf.quants.quantize(x, Q.BF16), Q.BF16, [4, 64])
    _, tsize = GGML_QUANT_SIZES[Q.Q4_K]
    add("q4k", rng.integers(0, 256, (2, tsize), dtype=np.uint8), Q.Q4_K, [2, 256])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


def fields(reader):
    out = {}
    for name, f in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        main = f.types[0]
        if main == T.ARRAY and len(f.types) > 1 and f.types[1] == T.ARRAY:
            out[name] = ("nested", bytes(reader.data[f.offset:f.offset + sum(p.nbytes for p in f.parts)]))
        else:
            out[name] = ([int(t) for t in f.types], f.contents())
    return out


def test_peer_file_inspects_with_its_values(tmp_path):
    p = tmp_path / "peer.gguf"
    tensors = make_peer_file(p, alignment=64)
    doc = run_json("inspect", p)
    assert doc["format"] == "gguf" and doc["version"] == "3" and doc["warnings"] == []
    meta = doc["metadata"]
    # The value types are shown beside the metadata, not as a key of it.
    assert "tessera.gguf_types" not in meta
    types = doc["metadata_types"]
    assert list(meta)[:3] == ["general.architecture", "general.alignment", "t.u8"]
    assert types["general.alignment"] == "u32" and meta["general.alignment"] == 64
    for k, v, _, _, ann in KVS:
        assert types[k] == ann, k
        want = [float(np.float32(x)) for x in v] if ann == "[f32]" else v
        assert meta[k] == want, k
    r = gguf.GGUFReader(str(p))
    by_name = {t.name: t for t in r.tensors}
    assert [t["name"] for t in doc["tensors"]] == list(tensors)
    for t in doc["tensors"]:
        qname, shape, _ = tensors[t["name"]]
        assert t["shape"] == shape
        assert t["offset"] == by_name[t["name"]].data_offset and t["offset"] % 64 == 0
        if qname in (None, "BF16"):
            assert t["layout"] == "dense"
        else:
            # Shown as the ggml type gguf-py wrote, stored as u8 blocks.
            assert t["layout"] == "ggml_" + qname.lower() and t["dtype"] == qname.lower()
            assert t["storage_dtype"] == "u8"
            assert t["attrs"]["ggml_type"] == int(Q[qname])


def test_dense_tensors_extract_equal(tmp_path):
    p = tmp_path / "peer.gguf"
    tensors = make_peer_file(p)
    for name in ["tok_embd", "norm", "pos", "big", "d", "bf"]:
        out = tmp_path / f"{name}.npy"
        proc = run("extract", p, name, "-o", out, check=False)
        if "not supported yet" in proc.stderr:
            pytest.skip("the .npy writer is not in this build")
        assert proc.returncode == 0, proc.stderr
        arr = np.load(out)
        _, shape, raw = tensors[name]
        assert list(arr.shape) == shape
        assert arr.tobytes() == raw, name


def test_verify_and_diff(tmp_path):
    p = tmp_path / "peer.gguf"
    make_peer_file(p)
    assert run("verify", p).returncode == 0
    q = tmp_path / "ours.gguf"
    run("convert", p, q)
    assert run("diff", p, q).returncode == 0


@pytest.mark.parametrize("alignment", [None, 64, 128])
def test_rewrite_is_byte_identical_and_reads_equal(tmp_path, alignment):
    p, q = tmp_path / "peer.gguf", tmp_path / "ours.gguf"
    make_peer_file(p, alignment)
    run("convert", p, q)
    assert q.read_bytes() == p.read_bytes()
    a, b = gguf.GGUFReader(str(p)), gguf.GGUFReader(str(q))
    assert fields(a) == fields(b)
    assert [(t.name, t.tensor_type, t.shape.tolist(), t.data.tobytes()) for t in a.tensors] == \
        [(t.name, t.tensor_type, t.shape.tolist(), t.data.tobytes()) for t in b.tensors]


def test_big_endian_peer_file_rewrites_as_the_little_endian_one(tmp_path):
    be, le, ours = tmp_path / "be.gguf", tmp_path / "le.gguf", tmp_path / "ours.gguf"
    make_peer_file(be, big=True)
    make_peer_file(le)
    doc = run_json("inspect", be)
    assert any("big-endian" in w for w in doc["warnings"])
    run("convert", be, ours)
    assert ours.read_bytes() == le.read_bytes()


def test_our_file_from_another_source_reads_in_gguf_py(tmp_path):
    # The tour's model (built in memory, no GGUF types): strings become GGUF strings.
    run("tour", "--dir", tmp_path)
    r = gguf.GGUFReader(str(tmp_path / "tour.gguf"))
    f = r.fields
    assert f["model_name"].types == [T.STRING] and f["model_name"].contents() == "tessera-tour"
    assert f["description"].contents() == "a tiny two-layer model"
    assert "tessera.gguf_types" not in f
    t = {x.name: x for x in r.tensors}
    w = np.sin(np.arange(64 * 32, dtype=np.float32) * np.float32(0.37)).reshape(64, 32)
    assert t["encoder.weight"].tensor_type == Q.F32
    np.testing.assert_allclose(t["encoder.weight"].data, w, rtol=1e-6, atol=1e-6)
    assert t["vocab.ids"].data.tolist() == [i * 1000 - 3 for i in range(10)]
    assert t["step"].data.tolist() == 1234 and t["step"].shape.tolist() == []
    assert t["encoder.bias"].tensor_type == Q.BF16
    assert t["empty"].n_elements == 0 and list(t["empty"].shape) == [4, 0]


def hostile(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    proc = subprocess.run([TESSERA, "inspect", str(p)], capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "panicked" not in proc.stderr, proc.stderr
    assert proc.stderr.strip(), "an error message is printed"
    return proc


def test_hostile_headers_fail_fast(tmp_path):
    head = lambda t, k: b"GGUF" + (3).to_bytes(4, "little") + t.to_bytes(8, "little") + k.to_bytes(8, "little")
    # 43 bytes with huge counts (gguf-py loops over them).
    proc = hostile(tmp_path, "counts.gguf", head(2**63, 2**63) + bytes(19))
    assert "limit" in proc.stderr
    proc = hostile(tmp_path, "kvs.gguf", head(0, 10**6) + bytes(19))
    assert proc.returncode == 4
    # A huge string length, a huge array, unknown value type, unknown ggml type.
    key = (1).to_bytes(8, "little") + b"k"
    hostile(tmp_path, "str.gguf", head(0, 1) + key + (8).to_bytes(4, "little") + (2**62).to_bytes(8, "little"))
    hostile(tmp_path, "arr.gguf", head(0, 1) + key + (9).to_bytes(4, "little") + (4).to_bytes(4, "little")
            + (2**60).to_bytes(8, "little") + bytes(8))
    hostile(tmp_path, "type.gguf", head(0, 1) + key + (99).to_bytes(4, "little") + bytes(8))
    ti = key + (1).to_bytes(4, "little") + (32).to_bytes(8, "little") + (5).to_bytes(4, "little") + bytes(8)
    proc = hostile(tmp_path, "ggml.gguf", head(1, 0) + ti + bytes(64))
    assert "unknown ggml type 5" in proc.stderr

"""ONNX interop with the `onnx` package (tests/requirements.txt): models it builds with
onnx.helper / numpy_helper (raw_data and the typed fields, external data written by
onnx.save) read by `tessera inspect --json`, `tessera extract` and Python's
tessera.open with the tensors onnx.numpy_helper reads back, and the header (IR version,
opsets, graph inputs) as onnx states it."""
import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run, run_json

OURS = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.INT8: "i8", TensorProto.UINT8: "u8",
    TensorProto.INT16: "i16", TensorProto.UINT16: "u16", TensorProto.INT32: "i32",
    TensorProto.INT64: "i64", TensorProto.UINT32: "u32", TensorProto.UINT64: "u64",
    TensorProto.BOOL: "bool", TensorProto.COMPLEX64: "c64", TensorProto.COMPLEX128: "c128",
    TensorProto.FLOAT8E4M3FN: "f8_e4m3fn", TensorProto.FLOAT8E5M2: "f8_e5m2",
}


def arrays():
    r = np.random.default_rng(34)
    return {
        "w": r.standard_normal((8, 4)).astype(np.float32),
        "b": r.standard_normal(4),
        "h": r.standard_normal((2, 3)).astype(np.float16),
        "bf": r.standard_normal(5).astype(ml_dtypes.bfloat16),
        "q": r.standard_normal(6).astype(ml_dtypes.float8_e4m3fn),
        "ids": np.arange(-5, 5, dtype=np.int64),
        "u32": np.array([0, 2**32 - 1], np.uint32),
        "i8": np.array([-128, 127], np.int8),
        "mask": np.array([True, False, True]),
        "c": np.array([1 + 2j, -3j], np.complex64),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }


def model(inits, opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "peer", [x], [y], initializer=inits)
    m = helper.make_model(g, producer_name="onnx-peer", opset_imports=[helper.make_opsetid("", opset)])
    helper.set_model_props(m, {"source": "test_onnx.py"})
    return m


def typed(name, a):
    """The array as a TensorProto with its values in the typed field (raw=False)."""
    dtype = numpy_helper.from_array(a, name).data_type
    vals = a.astype(np.float32) if dtype in (TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN) else a
    return helper.make_tensor(name, dtype, a.shape, vals.reshape(-1).tolist(), raw=False)


def check_listing(path, protos):
    """inspect --json lists every initializer as onnx reads it; extract gives its bytes."""
    j = run_json("inspect", path)
    assert j["format"] == "onnx"
    got = {t["name"]: t for t in j["tensors"]}
    assert list(got) == [t.name for t in protos]
    for t in protos:
        assert got[t.name]["dtype"] == OURS[t.data_type], t.name
        assert got[t.name]["shape"] == list(t.dims), t.name
    return j


def test_raw_data_reads_as_onnx_reads_it(tmp_path):
    a = arrays()
    protos = [numpy_helper.from_array(v, k) for k, v in a.items()]
    m = model(protos)
    p = tmp_path / "raw.onnx"
    onnx.save(m, p)
    onnx.checker.check_model(str(p))
    j = check_listing(p, protos)
    meta = j["metadata"]
    assert meta["onnx.ir_version"] == m.ir_version
    assert meta["onnx.producer_name"] == "onnx-peer"
    assert json.loads(meta["onnx.opset_import"]) == {o.domain: o.version for o in m.opset_import}
    assert json.loads(meta["onnx.graph.inputs"]) == [
        {"name": "x", "kind": "tensor", "type": "FLOAT", "shape": ["batch", 4]}
    ]
    assert meta["source"] == "test_onnx.py"
    for name in ["w", "b", "h", "ids", "mask", "c", "scalar", "empty", "u32", "i8"]:
        out = tmp_path / f"{name}.npy"
        run("extract", p, name, "-o", out)
        np.testing.assert_array_equal(np.load(out), numpy_helper.to_array(protos[list(a).index(name)]))


def test_typed_fields_read_as_onnx_reads_them(tmp_path):
    a = arrays()
    protos = [typed(k, v) for k, v in a.items()]
    assert all(not t.raw_data for t in protos)
    p = tmp_path / "typed.onnx"
    onnx.save(model(protos), p)
    check_listing(p, protos)
    import tessera

    f = tessera.open(p)
    for t in protos:
        want = numpy_helper.to_array(t)
        got = f.get_tensor(t.name)
        assert got.shape == want.shape, t.name
        assert got.tobytes() == want.astype(want.dtype.newbyteorder("<")).tobytes(), t.name


@pytest.mark.parametrize("one_file", [True, False])
def test_external_data_as_onnx_save_writes_it(tmp_path, one_file):
    a = {k: v for k, v in arrays().items() if k != "empty"}
    protos = [numpy_helper.from_array(v, k) for k, v in a.items()]
    p = tmp_path / "ext.onnx"
    onnx.save(model(protos), p, save_as_external_data=True, all_tensors_to_one_file=one_file,
              location="ext.onnx.data" if one_file else None, size_threshold=16)
    back = onnx.load(p, load_external_data=False)
    external = [t.name for t in back.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    assert len(external) >= 5
    j = run_json("inspect", p)
    enc = {t["name"]: t["encoding"] for t in j["tensors"]}
    assert all(enc[n] == "external" for n in external), enc
    import tessera

    f = tessera.open(p)
    for t in protos:
        assert f.get_tensor(t.name).tobytes() == numpy_helper.to_array(t).tobytes(), t.name
    # Into npz (complex and all), which has no metadata: metadata_props are refused with
    # the flag that allows dropping them (the onnx.* header is left out with a note),
    # then the arrays read back by numpy equal.
    out = tmp_path / "ext.npz"
    r = run("convert", p, out, check=False)
    assert r.returncode == 3 and "--drop-metadata" in r.stderr, r.stderr
    r = run("convert", p, out, "--drop-metadata")
    assert "onnx." in r.stdout + r.stderr
    with np.load(out) as z:
        for k in ["w", "b", "h", "ids", "mask", "c"]:
            np.testing.assert_array_equal(z[k], a[k])


def test_external_data_outside_the_directory_is_refused(tmp_path):
    protos = [numpy_helper.from_array(np.ones(64, np.float32), "w")]
    (tmp_path / "m").mkdir()
    p = tmp_path / "m" / "model.onnx"
    onnx.save(model(protos), p, save_as_external_data=True, location="w.data", size_threshold=0)
    m = onnx.load(p, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "../w.data"
    (tmp_path / "w.data").write_bytes((tmp_path / "m" / "w.data").read_bytes())
    bad = tmp_path / "m" / "bad.onnx"
    bad.write_bytes(m.SerializeToString())
    r = run("inspect", bad, check=False)
    assert r.returncode == 4, r.stderr
    assert "inside the model's directory" in r.stderr


def test_a_checksum_that_does_not_match_is_refused(tmp_path):
    import hashlib

    protos = [numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")]
    p = tmp_path / "model.onnx"
    onnx.save(model(protos), p, save_as_external_data=True, location="w.data", size_threshold=0)
    good = hashlib.sha1((tmp_path / "w.data").read_bytes()).hexdigest()
    for sha, code in [(good, 0), ("0" * 40, 1)]:
        m = onnx.load(p, load_external_data=False)
        t = m.graph.initializer[0]
        e = t.external_data.add()
        e.key, e.value = "checksum", sha
        q = tmp_path / f"sum-{code}.onnx"
        q.write_bytes(m.SerializeToString())
        r = run("extract", q, "w", "-o", tmp_path / f"w{code}.npy", check=False)
        assert r.returncode == code, r.stderr
        assert run("verify", q, check=False).returncode == code

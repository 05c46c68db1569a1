"""GGUF quantized tensors are shown as what they are (the ggml type gguf-py wrote, the
logical shape); ``dequantize=`` decodes them on every loader, bit for bit as gguf-py's
``dequantize`` does, and the array loaders without it refuse them, naming the tensor and
the keyword (issue 30 §2)."""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

import tessera
import tessera.numpy as tnp


@pytest.fixture()
def quantized(tmp_path):
    p = tmp_path / "q.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    w.add_tensor("q8", gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("q4", gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q4_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    w.add_tensor("f", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p, x


def test_dtype_is_the_ggml_type_and_shape_is_logical(quantized):
    p, x = quantized
    reader = gguf.GGUFReader(str(p))
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    with tessera.open(p) as f:
        for name in ("q8", "q4"):
            info = f.tensor_info(name)
            assert info["dtype"] == types[name].lower()
            assert info["storage_dtype"] == "u8"
            assert info["shape"] == [4, 64]
    with tessera.safe_open(p, "np") as f:
        assert f.get_slice("q8").get_dtype() == types["q8"]
        assert f.get_slice("q8").get_shape() == [4, 64]
        assert f.get_slice("f").get_dtype() == "F32"
        np.testing.assert_array_equal(f.get_slice("f")[1:3], x[1:3])


def test_arrays_of_packed_blocks_need_dequantize(quantized):
    p, _ = quantized
    refusals = {
        "safe_open.get_slice": lambda: tessera.safe_open(p, "np").get_slice("q8")[0:1],
        "safe_open.get_tensor": lambda: tessera.safe_open(p, "np").get_tensor("q8"),
        "numpy.load_file": lambda: tnp.load_file(p),
        "numpy.load": lambda: tnp.load(p.read_bytes()),
        "deserialize": lambda: tessera.deserialize(p.read_bytes()),
    }
    for what, call in refusals.items():
        with pytest.raises(tessera.UnsupportedError) as e:
            call()
        msg = str(e.value)
        assert "'q8'" in msg and "q8_0" in msg and "dequantize=" in msg, f"{what}: {msg}"
    # tessera.File hands out the packed blocks, as documented: a Tensor with its bytes.
    with tessera.open(p) as f:
        t = f.get_tensor("q8")
        assert isinstance(t, tessera.Tensor) and t.dtype == "q8_0"
        assert t.parts["data"].dtype == np.uint8 and t.parts["data"].nbytes == 4 * 64 // 32 * 34


def _gguf_py_dequantized(p):
    return {
        t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(4, 64)
        for t in gguf.GGUFReader(str(p)).tensors
    }


def test_dequantize_on_every_loader_matches_gguf_py(quantized):
    import ml_dtypes

    p, _ = quantized
    want = _gguf_py_dequantized(p)
    casts = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
    for dq, np_type in casts.items():
        expect = {k: v.astype(np_type) for k, v in want.items()}
        loads = {
            "numpy.load_file": tnp.load_file(p, dequantize=dq),
            "numpy.load_file(copy=False)": tnp.load_file(p, copy=False, dequantize=dq),
            "numpy.load": tnp.load(p.read_bytes(), dequantize=dq),
            "open(dequantize=)": dict(tessera.open(p, dequantize=dq).get_tensors()),
            "get_tensor(dequantize=)": {
                k: tessera.open(p).get_tensor(k, dequantize=dq) for k in ("q8", "q4")
            },
        }
        with tessera.safe_open(p, "np", dequantize=dq) as f:
            loads["safe_open.get_tensor"] = {k: f.get_tensor(k) for k in f.keys()}
            loads["safe_open.get_slice"] = {k: f.get_slice(k)[:] for k in f.keys()}
            assert f.get_slice("q8").get_dtype() == dq.upper()
            assert f.get_slice("q8").get_shape() == [4, 64]
            np.testing.assert_array_equal(
                f.get_slice("q4")[1:3, 8:40].view(np.uint8), expect["q4"][1:3, 8:40].view(np.uint8)
            )
        for what, got in loads.items():
            for name, arr in got.items():
                # Packed tensors decoded to `dq`; the float tensor stays what it is (f32).
                exp = expect[name] if name != "f" else want["f"]
                assert isinstance(arr, np.ndarray), (what, name)
                assert arr.dtype == exp.dtype and arr.shape == exp.shape, (what, name, arr.dtype)
                assert arr.tobytes() == exp.tobytes(), (dq, what, name)


def test_dequantize_torch(quantized):
    torch = pytest.importorskip("torch")
    import tessera.torch as tt

    p, _ = quantized
    want = _gguf_py_dequantized(p)
    got = tt.load_file(p, dequantize="bf16")
    assert got["q8"].dtype == torch.bfloat16
    assert torch.equal(got["q8"].float(), torch.from_numpy(want["q8"]).bfloat16().float())
    with pytest.raises(tessera.UnsupportedError, match="dequantize="):
        tt.load_file(p)


def test_dequantize_takes_three_dtypes(quantized):
    p, _ = quantized
    for bad in ("f64", "q8_0", "i8"):
        with pytest.raises(tessera.InvalidInputError, match="dequantize"):
            tnp.load_file(p, dequantize=bad)


def test_convert_dequantize_and_quantize_keywords(quantized, tmp_path):
    p, x = quantized
    out = tmp_path / "f.safetensors"
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.convert(p, out)
    assert "dequantize=" in str(e.value) and "--dequantize" not in str(e.value)  # the keyword, not the CLI flag
    rep = tessera.convert(p, out, dequantize="f32")
    assert any("dequantized" in n and "q8_0" in n for n in rep.notes)
    reader = gguf.GGUFReader(str(p))
    with tessera.safe_open(out, "np") as f:
        for t in reader.tensors:
            want = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            assert f.get_tensor(t.name).tobytes() == want.tobytes(), t.name
    q = tmp_path / "q.gguf"
    rep = tessera.convert(out, q, quantize="q4_1")
    back = {t.name: t for t in gguf.GGUFReader(str(q)).tensors}
    with tessera.safe_open(out, "np") as f:
        for name in ("q8", "q4", "f"):
            want = gguf.quants.quantize(f.get_tensor(name), gguf.GGMLQuantizationType.Q4_1)
            assert back[name].data.tobytes() == want.tobytes(), name
    with pytest.raises(tessera.InvalidInputError):
        tessera.convert(out, q, quantize="q3_k")

"""GGUF quantized tensors are shown as what they are (the ggml type gguf-py wrote, the
logical shape), and every Python access either works or raises a clear UnsupportedError."""
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


def test_element_access_to_packed_blocks_says_what_to_do(quantized):
    p, _ = quantized
    with tessera.safe_open(p, "np") as f:
        with pytest.raises(tessera.UnsupportedError) as e:
            f.get_slice("q8")[0:1]
        assert "q8_0" in str(e.value) and "dequantization" in str(e.value)
        t = f.get_tensor("q8")  # works: the packed blocks
        assert isinstance(t, tessera.Tensor) and t.dtype == "q8_0"
        assert t.parts["data"].nbytes == 4 * 64 // 32 * 34
    with pytest.raises(tessera.UnsupportedError):
        tessera.deserialize(p.read_bytes())
    d = tnp.load_file(p)
    assert d["q8"].dtype == "q8_0" and d["f"].shape == (4, 64)


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

"""GGUF quantized tensors against gguf-py 0.19.0's `gguf.quants`, through the real CLI:
`convert --dequantize` decodes every block type we implement to exactly the floats
gguf-py's `dequantize` gives (f32 bit for bit; f16/bf16 as numpy/ml_dtypes round them);
`convert --quantize` writes a GGUF that gguf.GGUFReader reads, with each quantized tensor
byte-identical to gguf-py's `quantize` and 1-D/ragged tensors kept float, as reported."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

from conftest import run  # noqa: E402

DEQUANT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
           "Q6_K", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "IQ4_NL", "IQ4_XS", "IQ2_XXS",
           "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
# The grid IQ types: a NaN's sign may differ (numpy's NaN * -1 keeps it).
GRID_IQ = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"}
QUANT = ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"]
F16_AT = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "TQ1_0": [52], "TQ2_0": [64], "IQ4_NL": [0], "IQ4_XS": [0],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0],
    "IQ1_S": [0],
}


def blocks(t, rows, blocks_per_row, rng, edges):
    _, size = GGML_QUANT_SIZES[Q[t]]
    b = rng.integers(0, 256, size=(rows * blocks_per_row, size), dtype=np.uint8)
    if t == "MXFP4":
        b[:, 0] = rng.integers(118, 136, size=b.shape[0])
    elif t == "NVFP4":
        b[:, :4] = rng.integers(0, 0x70, size=(b.shape[0], 4))
    elif t == "IQ1_M":
        # Its f16 scale is the top nibbles of the four u16 scales (bytes 48..56).
        vals = (rng.standard_normal(b.shape[0]) * 0.02).astype(np.float16)
        if edges:
            vals[:4] = [np.nan, np.inf, 0.0, -65504.0]
        bits = vals.view(np.uint16)
        for k in range(4):
            hi = 49 + 2 * k
            b[:, hi] = (b[:, hi] & 0x0F) | (((bits >> (4 * k)) & 0x0F) << 4).astype(np.uint8)
    else:
        for off in F16_AT[t]:
            vals = (rng.standard_normal(b.shape[0]) * 0.02).astype(np.float16)
            if edges:
                vals[:4] = [np.nan, np.inf, 0.0, -65504.0]
            b[:, off:off + 2] = vals.view(np.uint8).reshape(-1, 2)
    return b.reshape(rows, blocks_per_row * size)


def write_quantized(path, rng, edges):
    w = gguf.GGUFWriter(str(path), "llama")
    made = {}
    for i, t in enumerate(DEQUANT):
        data = blocks(t, 3, 2, rng, edges)
        name = f"blk.{i}.{t.lower()}"
        w.add_tensor(name, data, raw_dtype=Q[t])
        made[name] = t
    w.add_tensor("norm", rng.standard_normal(16).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return made


def reference(path):
    r = gguf.GGUFReader(str(path))
    with np.errstate(all="ignore"):  # NaN and infinite scales are part of the test
        return {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in r.tensors}


def test_dequantize_f32_is_gguf_py_bit_for_bit(tmp_path):
    src, out = tmp_path / "q.gguf", tmp_path / "f.safetensors"
    made = write_quantized(src, np.random.default_rng(5), edges=True)
    p = run("convert", src, out, "--dequantize", "f32")
    ref = reference(src)
    got = safetensors_numpy.load_file(str(out))
    assert set(got) == set(ref)
    for name, t in made.items():
        assert f'dequantized "{name}" {t.lower()} -> f32' in p.stdout
        want = ref[name].astype(np.float32)
        assert got[name].dtype == np.float32 and got[name].shape == want.shape, name
        if t in GRID_IQ:
            nan = np.isnan(want)
            assert np.array_equal(np.isnan(got[name]), nan), t
            assert got[name][~nan].view(np.uint32).tobytes() == \
                want[~nan].view(np.uint32).tobytes(), t
        else:
            assert got[name].view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), t
    assert np.array_equal(got["norm"], ref["norm"])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_dequantize_to_half_rounds_as_numpy(tmp_path, dtype):
    src, out = tmp_path / "q.gguf", tmp_path / "f.safetensors"
    made = write_quantized(src, np.random.default_rng(6), edges=False)
    run("convert", src, out, "--dequantize", dtype)
    ref = reference(src)
    got = safetensors_numpy.load_file(str(out))
    np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    for name in made:
        want = ref[name].astype(np.float32).astype(np_dtype)
        assert got[name].dtype == np_dtype, name
        assert got[name].tobytes() == want.tobytes(), name


def test_requantize_is_quantize_of_dequantize(tmp_path):
    src, out = tmp_path / "q.gguf", tmp_path / "q8.gguf"
    made = write_quantized(src, np.random.default_rng(8), edges=False)
    p = run("convert", src, out, "--dequantize", "f32", "--quantize", "q8_0")
    ref = reference(src)
    got = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    orig = {t.name: t for t in gguf.GGUFReader(str(src)).tensors}
    for name, t in made.items():
        assert got[name].tensor_type == Q.Q8_0, name
        if t == "Q8_0":  # already the asked type: passed through unchanged
            want = orig[name].data
        else:
            assert f'requantized "{name}" {t.lower()} -> q8_0' in p.stdout
            want = gguf.quants.quantize(ref[name].astype(np.float32), Q.Q8_0)
        assert got[name].data.tobytes() == want.tobytes(), name
    assert got["norm"].tensor_type == Q.F32


def test_quantized_tensor_refusal_names_the_option(tmp_path):
    src = tmp_path / "q.gguf"
    write_quantized(src, np.random.default_rng(7), edges=False)
    p = run("convert", src, tmp_path / "f.safetensors", check=False)
    assert p.returncode != 0
    assert "--dequantize" in p.stderr


@pytest.mark.parametrize("kind", QUANT)
def test_quantize_is_gguf_py_byte_for_byte(tmp_path, kind):
    rng = np.random.default_rng(11)
    tensors = {
        "tok_embd.weight": (rng.standard_normal((12, 96)) * 0.1).astype(np.float32),
        "blk.0.attn_q.weight": rng.standard_normal((2, 4, 64)).astype(np.float16),
        "blk.0.ffn.weight": np.concatenate(
            [np.zeros((1, 64)), rng.standard_normal((3, 64)) * 1e3]).astype(np.float32),
        "output_norm.weight": rng.standard_normal(64).astype(np.float32),
        "ragged.weight": rng.standard_normal((4, 33)).astype(np.float32),
        "ids": np.arange(64, dtype=np.int32).reshape(2, 32),
    }
    src, out = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    safetensors_numpy.save_file(tensors, str(src))
    p = run("convert", src, out, "--quantize", kind)
    for kept in ("output_norm.weight", "ragged.weight", "ids"):
        assert f'kept "{kept}"' in p.stdout, p.stdout
    r = gguf.GGUFReader(str(out))
    by = {t.name: t for t in r.tensors}
    qt = Q[kind.upper()]
    for name in ("tok_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn.weight"):
        t = by[name]
        assert t.tensor_type == qt, name
        want = gguf.quants.quantize(tensors[name].astype(np.float32), qt)
        assert t.data.tobytes() == want.tobytes(), name
        # And gguf-py decodes what it reads back to the right shape.
        back = gguf.quants.dequantize(t.data, t.tensor_type)
        assert back.shape == tensors[name].shape
    assert by["output_norm.weight"].tensor_type == Q.F32
    assert by["ragged.weight"].tensor_type == Q.F32
    assert by["ids"].tensor_type == Q.I32
    assert np.array_equal(by["ragged.weight"].data, tensors["ragged.weight"])


def test_quantize_needs_a_gguf_target(tmp_path):
    src = tmp_path / "in.safetensors"
    safetensors_numpy.save_file({"w": np.zeros((2, 32), np.float32)}, str(src))
    p = run("convert", src, tmp_path / "o.safetensors", "--quantize", "q8_0", check=False)
    assert p.returncode != 0 and "GGUF" in p.stderr

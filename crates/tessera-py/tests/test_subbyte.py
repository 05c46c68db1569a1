"""Sub-byte floats (f4_e2m1, f6_e2m3, f6_e3m2) in Python: ml_dtypes arrays one element per
byte, files packed (two f4 per byte low nibble first, four f6 per three bytes), torch's
float4_e2m1fn_x2 where torch is installed.

The reader vector `fp4_torch.safetensors` was written by torch 2.15 through
`safetensors.torch.save_file` (crates/tessera/tests/data/safetensors/gen_fp4.py); the
values it should read as were computed there with ml_dtypes.
"""
import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.numpy import load_file, save_file

DATA = pathlib.Path(__file__).resolve().parents[2] / "tessera" / "tests" / "data" / "safetensors"
FP4 = DATA / "fp4_torch.safetensors"
EXPECTED = json.loads((DATA / "expected.json").read_text())["fp4_torch.safetensors"]["tensors"]


def test_a_torch_written_f4_file_loads_as_ml_dtypes_arrays_with_its_values():
    d = load_file(FP4)
    b = d["blocks"]
    assert b.dtype == np.dtype(ml_dtypes.float4_e2m1fn)
    assert b.shape == (3, 4)
    np.testing.assert_array_equal(b.astype(np.float64).reshape(-1), EXPECTED["blocks"]["values"])
    # A new, writable array (unpacked from the file's bytes), not a view of the map.
    assert b.flags.writeable
    np.testing.assert_array_equal(d["scales"].astype(np.float64), EXPECTED["scales"]["values"])


def test_packed_bytes_when_asked_and_slices():
    f = tessera.open(FP4)
    t = f.get_tensor("blocks", packed=True)
    assert isinstance(t, tessera.Tensor)
    assert (t.dtype, list(t.shape)) == ("f4_e2m1", [3, 4])
    assert t.parts["data"].tobytes().hex() == EXPECTED["blocks"]["hex"]
    with tessera.safe_open(FP4, "np") as g:
        assert g.get_slice("blocks").get_dtype() == "F4"
        part = g.get_slice("blocks")[1:, 2:]
    np.testing.assert_array_equal(part.astype(np.float64), [[6.0, -6.0], [-1.0, -0.5]])


def test_saving_ml_dtypes_arrays_packs_them_as_the_peer_does(tmp_path):
    # The same tensors saved by us are the bytes torch + safetensors wrote.
    out = tmp_path / "same.safetensors"
    save_file(load_file(FP4), out, metadata={"format": "pt"})
    assert out.read_bytes() == FP4.read_bytes()


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"])
def test_every_sub_byte_type_round_trips_through_safetensors(tmp_path, name):
    dt = getattr(ml_dtypes, name)
    top = float(ml_dtypes.finfo(dt).max)
    a = np.array([[0.5, -top, 0.0, 1.0], [top, -0.5, 2.0, -1.0]], dtype=dt)
    p = tmp_path / "x.safetensors"
    save_file({"a": a}, p)
    # Stored packed: 8 elements of 4 or 6 bits.
    bits = 4 if "4" in name else 6
    assert tessera.open(p).tensor_info("a")["storage"]["stored_bytes"] == 8 * bits // 8
    back = load_file(p)["a"]
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back.view(np.uint8), a.view(np.uint8))


def test_an_odd_f4_count_is_refused_by_safetensors_and_kept_by_ztensor_v2(tmp_path):
    o = np.array([1.0, -2.0, 3.0], dtype=ml_dtypes.float4_e2m1fn)
    with pytest.raises(tessera.UnsupportedError, match="whole bytes"):
        save_file({"o": o}, tmp_path / "o.safetensors")
    assert not (tmp_path / "o.safetensors").exists()
    tessera.save({"o": o}, tmp_path / "o.zt", format="ztensor2")
    back = tessera.open(tmp_path / "o.zt")["o"]
    np.testing.assert_array_equal(back.astype(np.float32), [1.0, -2.0, 3.0])


def test_formats_without_the_type_refuse_it_and_cast_when_asked(tmp_path):
    with pytest.raises(tessera.UnsupportedError, match="f4_e2m1"):
        tessera.convert(FP4, tmp_path / "x.npz", drop_metadata=True)
    with pytest.warns(Warning, match='cast "blocks" f4_e2m1 -> f16'):
        tessera.convert(FP4, tmp_path / "x.npz", drop_metadata=True, cast=True)
    z = np.load(tmp_path / "x.npz")
    assert z["blocks"].dtype == np.float16
    np.testing.assert_array_equal(z["blocks"].astype(np.float64).reshape(-1), EXPECTED["blocks"]["values"])


def test_an_array_with_bits_above_its_type_is_refused():
    bad = np.array([0x1F], dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    with pytest.raises(tessera.InvalidInputError, match="bits above"):
        tessera.save({"bad": bad}, "/dev/null", format="safetensors")


def test_torch_float4_x2_loads_and_saves_as_safetensors_does(tmp_path):
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch.float4_e2m1fn_x2 needs torch 2.8")
    import tessera.torch as tt

    d = tt.load_file(FP4)
    assert d["blocks"].dtype == torch.float4_e2m1fn_x2
    assert tuple(d["blocks"].shape) == (3, 2)
    assert d["blocks"].view(torch.uint8).numpy().tobytes().hex() == EXPECTED["blocks"]["hex"]
    out = tmp_path / "t.safetensors"
    tt.save_file(d, out, metadata={"format": "pt"})
    assert out.read_bytes() == FP4.read_bytes()

"""MXFP4 as gpt-oss checkpoints store it: ``X_blocks`` (u8, (..., G, 16): 32 E2M1 codes
per block, the even element in the low nibble) beside ``X_scales`` (u8, (..., G): E8M0
exponents). With ``dequantize=`` the pair is one tensor ``X`` of shape (..., G*32) on
every loader; without it, the two u8 tensors as stored. The vector was written by the
safetensors package and its expected values computed with ml_dtypes (gen_mxfp4.py in
crates/tessera/tests/data/safetensors), not by Tessera."""
from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.numpy as tnp

DATA = pathlib.Path(__file__).resolve().parents[2] / "tessera" / "tests" / "data" / "safetensors"
VECTOR = DATA / "mxfp4_pair.safetensors"
STEM = "model.layers.0.mlp.experts.gate_up_proj"


@pytest.fixture(scope="module")
def want():
    e = json.loads((DATA / "expected.json").read_text())["mxfp4_pair.safetensors"]["mxfp4"][STEM]
    f32 = np.frombuffer(bytes.fromhex(e["f32_hex"]), "<f4").reshape(e["shape"])
    bf16 = np.frombuffer(bytes.fromhex(e["bf16_hex"]), ml_dtypes.bfloat16).reshape(e["shape"])
    return f32, bf16


def test_without_dequantize_the_pair_is_two_u8_tensors():
    with tessera.open(VECTOR) as f:
        assert f"{STEM}_blocks" in f.keys() and f"{STEM}_scales" in f.keys()
        assert STEM not in f
        assert f.get_tensor(f"{STEM}_blocks").dtype == np.uint8


def test_open_with_dequantize_lists_and_reads_the_pair_as_one_tensor(want):
    f32, bf16 = want
    with tessera.open(VECTOR, dequantize="f32") as f:
        names = f.keys()
        assert STEM in names and f"{STEM}_scales" not in names and f"{STEM}_blocks" not in names
        assert "lonely_blocks" in names  # no scales beside it: not a pair
        info = f.tensor_info(STEM)
        assert info["dtype"] == "f32" and list(info["shape"]) == list(f32.shape)
        got = f.get_tensor(STEM)
        np.testing.assert_array_equal(got, f32)  # NaN where the scale is 0xFF, both sides
        assert np.isnan(got).any()
        got = f.get_tensor(STEM, dequantize="bf16")
        assert got.dtype == ml_dtypes.bfloat16
        assert got.tobytes() == bf16.tobytes()


def test_load_file_with_dequantize_gives_the_pair_decoded(want):
    f32, _ = want
    out = tnp.load_file(VECTOR, dequantize="f32")
    assert set(out) == {STEM, f"{STEM}_bias", "lonely_blocks"}
    np.testing.assert_array_equal(out[STEM], f32)
    plain = tnp.load_file(VECTOR)
    assert f"{STEM}_scales" in plain and plain[f"{STEM}_scales"].dtype == np.uint8

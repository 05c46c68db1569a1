"""torch: loading as torch tensors (bf16 and fp8 included), saving from torch tensors,
and safetensors.torch compatibility. Runs where torch is installed (it is not in the
default test environment: a CPU torch install is several GiB)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import safetensors  # noqa: E402
import safetensors.torch as storch  # noqa: E402

import tessera  # noqa: E402
import tessera.torch as ttorch  # noqa: E402

from conftest import ROUNDTRIP, ext  # noqa: E402


def need_safetensors():
    assert "safetensors" in {f["name"] for f in ROUNDTRIP}, "the safetensors format is not merged yet"


def bits(t):
    """A tensor's raw bytes, for exact comparison of any dtype (NaN-safe)."""
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def assert_same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    assert bits(a) == bits(b)


def tensors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g)
    out = {
        "f32": x,
        "f16": x.half(),
        "bf16": x.bfloat16(),
        "f64": x.double()[:2],
        "i64": torch.arange(12).reshape(3, 4),
        "i32": torch.arange(5, dtype=torch.int32),
        "i8": torch.tensor([-1, 2, -3], dtype=torch.int8),
        "u8": torch.arange(7, dtype=torch.uint8),
        "bool": torch.tensor([True, False]),
        "f8_e4m3fn": x.to(torch.float8_e4m3fn),
        "f8_e5m2": x.to(torch.float8_e5m2),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 3),
    }
    return out


def test_load_file_matches_safetensors_torch(tmp):
    need_safetensors()
    t = tensors()
    storch.save_file(t, str(tmp / "theirs.safetensors"), metadata={"format": "pt"})
    ref = storch.load_file(str(tmp / "theirs.safetensors"))
    ours = ttorch.load_file(tmp / "theirs.safetensors")
    assert ref.keys() == ours.keys()
    for k in ref:
        assert isinstance(ours[k], torch.Tensor)
        assert_same(ours[k], ref[k])
        assert_same(ours[k], t[k])


def test_save_file_is_read_by_safetensors_and_bytes_match(tmp):
    need_safetensors()
    t = tensors()
    ttorch.save_file(t, tmp / "ours.safetensors", metadata={"format": "pt"})
    ref = storch.load_file(str(tmp / "ours.safetensors"))
    for k in t:
        assert_same(ref[k], t[k])
    assert ttorch.save(t) == storch.save(t)
    assert ttorch.save(t, metadata={"format": "pt"}) == storch.save(t, metadata={"format": "pt"})


def test_safe_open_pt_matches_safetensors(tmp):
    need_safetensors()
    t = tensors()
    path = str(tmp / "m.safetensors")
    storch.save_file(t, path)
    with safetensors.safe_open(path, framework="pt") as a, tessera.safe_open(path, framework="pt") as b:
        assert a.keys() == b.keys()
        for k in a.keys():
            assert_same(b.get_tensor(k), a.get_tensor(k))
        for k, idx in (("f32", (slice(1, 3), slice(None, None, 2))), ("bf16", 2), ("i64", (slice(None), 1))):
            assert_same(b.get_slice(k)[idx], a.get_slice(k)[idx])
            assert b.get_slice(k).get_dtype() == a.get_slice(k).get_dtype()
            assert b.get_slice(k).get_shape() == a.get_slice(k).get_shape()


@pytest.mark.parametrize("anyfmt", ROUNDTRIP, ids=[f["name"] for f in ROUNDTRIP])
def test_torch_round_trip_on_every_format(anyfmt, tmp):
    from tessera._convert import dtype_name

    t = {k: v for k, v in tensors().items() if dtype_name(v.dtype) in anyfmt["dtypes"]}
    assert t
    path = tmp / f"m.{ext(anyfmt)}"
    ttorch.save_file(t, path)
    back = ttorch.load_file(path)
    assert back.keys() == t.keys()
    for k in t:
        assert_same(back[k], t[k])
    f = tessera.open(path, framework="pt")
    assert_same(f["f32"], t["f32"])


def test_loaded_tensors_are_writable_and_independent(tmp):
    fmt = ROUNDTRIP[0]
    path = tmp / f"m.{ext(fmt)}"
    ttorch.save_file({"w": torch.arange(4, dtype=torch.float32)}, path)
    a = ttorch.load_file(path)["w"]
    a[0] = 100.0  # no warning, no crash: it is not the read-only mapping
    assert ttorch.load_file(path)["w"][0].item() == 0.0


def test_parameters_views_and_grad_tensors_save(tmp):
    fmt = ROUNDTRIP[0]
    p = torch.nn.Parameter(torch.randn(3, 4))
    t = {"param": p, "transposed": p.detach().t(), "strided": torch.arange(10.0)[::3]}
    path = tmp / f"m.{ext(fmt)}"
    ttorch.save_file(t, path)
    back = ttorch.load_file(path)
    assert_same(back["param"], p.detach())
    assert_same(back["transposed"], p.detach().t().contiguous())
    assert_same(back["strided"], torch.arange(10.0)[::3].contiguous())


def test_numpy_and_torch_agree_on_bf16(tmp):
    fmt = ROUNDTRIP[0]
    x = torch.randn(8).bfloat16()
    path = tmp / f"m.{ext(fmt)}"
    ttorch.save_file({"x": x}, path)
    arr = tessera.open(path)["x"]
    assert str(arr.dtype) == "bfloat16"
    assert np.array_equal(arr.astype(np.float32), x.float().numpy())

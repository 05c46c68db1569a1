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
    """tessera.save packs views and strided tensors (tessera.torch.save_file refuses
    them, as safetensors does: test_save_file_refuses_as_safetensors)."""
    fmt = ROUNDTRIP[0]
    p = torch.nn.Parameter(torch.randn(3, 4))
    t = {"param": p, "transposed": p.detach().t(), "strided": torch.arange(10.0)[::3]}
    path = tmp / f"m.{ext(fmt)}"
    tessera.save(t, path)
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


# --- safetensors.torch's checks and helpers, side by side with safetensors ---------


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - compared below
        return ("raised", e)


def _refused(tmp):
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return {
        "sparse": {"test": torch.sparse_coo_tensor(size=(2, 3))},
        "not a tensor": {"test": {"some": "thing"}},
        "not a dict": "notadict",
        "non contiguous": {"test": torch.arange(6.0).reshape(1, 2, 3)[:, :, 1]},
        "shared": {"A": a, "B": a[:1]},
        "shared tail": {"A": a, "B": a[1:]},
        "meta": {"test": torch.zeros((2, 2), device="meta")},
    }


@pytest.mark.parametrize("case", list(_refused(None)))
def test_save_file_refuses_as_safetensors(tmp, case):
    tensors = _refused(tmp)[case]
    want = _outcome(lambda: storch.save_file(tensors, str(tmp / "theirs.safetensors")))
    got = _outcome(lambda: ttorch.save_file(tensors, tmp / "ours.safetensors"))
    assert want[0] == got[0] == "raised"
    assert isinstance(got[1], type(want[1])) or isinstance(want[1], type(got[1])), (want, got)
    if case in ("sparse", "not a tensor", "not a dict"):
        assert str(got[1]) == str(want[1])
    assert not (tmp / "ours.safetensors").exists()
    with pytest.raises(type(want[1])):
        ttorch.save(tensors)


def test_disjoint_views_of_one_storage_save(tmp):
    a = torch.zeros((10, 10))
    t = {"test": a[1:], "test2": a[:1]}
    storch.save_file(t, str(tmp / "theirs.safetensors"))
    ttorch.save_file(t, tmp / "ours.safetensors")
    assert (tmp / "ours.safetensors").read_bytes() == (tmp / "theirs.safetensors").read_bytes()


def _shared_cases():
    a = torch.zeros((3, 3))
    v = torch.zeros((4,))
    m = torch.randn(10)
    n = torch.empty([], dtype=m.dtype)
    n.set_(source=m.untyped_storage()[:16])
    c = torch.zeros((2, 2), device="meta")
    return [
        {"A": a, "B": a[:1, :]},
        {"A": a},
        {"B": a[:1, :]},
        {"B": v[:2], "C": v[2:]},
        {"B": v[:2], "C": v[1:]},
        {"B": v[:2], "C": v[2:], "D": v[:1]},
        {"m": m, "n": n},
        {"C": c, "D": c[:1]},
        {"x": torch.zeros(3), "y": torch.zeros(0), "z": torch.ones(2, 2)},
    ]


def test_shared_tensor_helpers_agree_with_safetensors():
    for case in _shared_cases():
        assert ttorch._find_shared_tensors(case) == storch._find_shared_tensors(case), case
        for name, t in case.items():
            assert ttorch._is_complete(t) == storch._is_complete(t), name
            assert ttorch.storage_ptr(t) == storch.storage_ptr(t), name
            assert ttorch.storage_size(t) == storch.storage_size(t), name
            if t.device.type != "meta":
                assert ttorch._end_ptr(t) == storch._end_ptr(t), name
        want = _outcome(lambda: storch._remove_duplicate_names(case))
        got = _outcome(lambda: ttorch._remove_duplicate_names(case))
        assert got[0] == want[0], case
        if want[0] == "ok":
            assert dict(got[1]) == dict(want[1])
        else:
            assert type(got[1]) is type(want[1])
    strided = torch.zeros(16, dtype=torch.float16)[::4]
    assert ttorch._end_ptr(strided) == storch._end_ptr(strided)


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a


class _Untied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)


def test_save_model_and_load_model_as_safetensors(tmp):
    torch.manual_seed(0)
    model = _Tied()
    storch.save_model(model, str(tmp / "theirs.safetensors"))
    ttorch.save_model(model, tmp / "ours.safetensors")
    with safetensors.safe_open(str(tmp / "theirs.safetensors"), "pt") as a, tessera.safe_open(
        tmp / "ours.safetensors", "pt"
    ) as b:
        assert a.metadata() == b.metadata() == {"b.weight": "a.weight", "b.bias": "a.bias"}
        assert a.keys() == b.keys()
    # The same tensor bytes after headers of the same length (metadata order aside).
    theirs, ours = (tmp / "theirs.safetensors").read_bytes(), (tmp / "ours.safetensors").read_bytes()
    assert len(theirs) == len(ours) and theirs[-32 * 4 :] == ours[-32 * 4 :]
    for load_model in (storch.load_model, ttorch.load_model):
        fresh = _Tied()
        load_model(fresh, tmp / "ours.safetensors")
        for k, v in model.state_dict().items():
            assert torch.equal(fresh.state_dict()[k], v)
    # A model without the tie misses the dropped names; one with it has two tensors too many.
    for model2, path in ((_Untied(), "ours.safetensors"), (_Tied(), "untied.safetensors")):
        ttorch.save_model(_Untied(), tmp / "untied.safetensors")
        want = _outcome(lambda: storch.load_model(model2, str(tmp / path)))
        got = _outcome(lambda: ttorch.load_model(model2, tmp / path))
        assert want[0] == got[0] == "raised"
        assert type(got[1]) is RuntimeError and str(got[1]) == str(want[1])
        missing, unexpected = ttorch.load_model(model2, tmp / path, strict=False)
        assert (sorted(missing), sorted(unexpected)) == tuple(
            sorted(x) for x in storch.load_model(model2, str(tmp / path), strict=False)
        )


def test_save_model_non_contiguous(tmp):
    class NonContiguous(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.a.weight = torch.nn.Parameter(torch.zeros((3, 3)).t())

    with pytest.raises(ValueError, match=r"use save_model\(\.\.\., force_contiguous=True\)"):
        ttorch.save_model(NonContiguous(), tmp / "m.safetensors", force_contiguous=False)
    assert not (tmp / "m.safetensors").exists()
    ttorch.save_model(NonContiguous(), tmp / "m.safetensors")
    fresh = NonContiguous()
    ttorch.load_model(fresh, tmp / "m.safetensors")


def test_pread_backend_and_get_tensors(tmp):
    t = tensors()
    path = tmp / "m.safetensors"
    storch.save_file(t, str(path))
    for opener in (safetensors.safe_open, tessera.safe_open):
        with opener(str(path), framework="pt", backend="pread") as f:
            got = f.get_tensors()
        assert set(got) == set(t)
        for k in t:
            assert_same(got[k], t[k])
    for k, v in ttorch.load_file(path, backend="pread").items():
        assert_same(v, t[k])
    with pytest.raises(tessera.InvalidInputError):
        ttorch.load_file(path, backend="not_a_backend")

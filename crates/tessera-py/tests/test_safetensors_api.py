"""The safetensors-compatible API: one script, run against `safetensors` and against
`tessera`, must give the same results; and files cross between the two."""
from __future__ import annotations

import numpy as np
import pytest
import safetensors
import safetensors.numpy as snp

import tessera
import tessera.numpy as tnp

from conftest import ROUNDTRIP, ext, find_meta, same

NAMES = {f["name"] for f in ROUNDTRIP}


def need_safetensors():
    assert "safetensors" in NAMES, "the safetensors format is not merged yet"


def tensors():
    # Only dtypes safetensors.numpy itself can load (it has no bf16/fp8: those are
    # compared through safetensors.torch in test_torch.py).
    rng = np.random.default_rng(7)
    return {
        "embed.weight": rng.standard_normal((16, 8)).astype(np.float32),
        "layer.0.bias": rng.standard_normal((8,)).astype(np.float16),
        "layer.0.w": rng.standard_normal((4, 4)).astype(np.int16),
        "ids": np.arange(12, dtype=np.int64).reshape(3, 4),
        "mask": np.array([True, False, True]),
        "scale": np.array(0.5, dtype=np.float64),
        "u8": np.arange(6, dtype=np.uint8),
    }


def in_place(a):
    """What a user does to loaded weights: in-place arithmetic (it needs a writable
    array; a read-only one raises "assignment destination is read-only")."""
    if a.dtype == np.bool_:
        a ^= True
    elif a.dtype.kind == "f":
        a *= 0.5
        a += 1
    else:
        a *= 3
        a -= 1
    return a


def script(numpy_mod, safe_open, path, meta=None):
    """What a user of safetensors.numpy writes; returns everything it observed."""
    t = tensors()
    numpy_mod.save_file(t, str(path), metadata=meta)
    out = {"load_file": numpy_mod.load_file(str(path))}
    out["writable"] = {k: v.flags.writeable for k, v in out["load_file"].items()}
    out["load_file_changed"] = {k: in_place(v).copy() for k, v in numpy_mod.load_file(str(path)).items()}
    # Loaded arrays are the caller's: changing them changes neither the file nor a
    # re-load (nor the arrays of the first load).
    out["reload_after_change"] = numpy_mod.load_file(str(path))
    blob = numpy_mod.save(t, metadata=meta)
    out["load"] = numpy_mod.load(blob)
    out["load_changed"] = {k: in_place(v) for k, v in numpy_mod.load(blob).items()}
    out["load_again"] = numpy_mod.load(blob)
    with safe_open(str(path), framework="np") as f:
        out["keys"] = list(f.keys())
        out["metadata"] = f.metadata()
        out["get_tensor"] = {k: f.get_tensor(k) for k in f.keys()}
        out["get_tensor_changed"] = {k: in_place(f.get_tensor(k)) for k in f.keys()}
        out["get_tensor_again"] = {k: f.get_tensor(k) for k in f.keys()}
        s = f.get_slice("embed.weight")
        out["shape"] = s.get_shape()
        out["dtype"] = s.get_dtype()
        out["slice_rows"] = s[2:5]
        out["slice_cols"] = s[:, 1:3]
        out["slice_step"] = s[::3, ::2]
        out["slice_int"] = s[1]
        out["slice_changed"] = in_place(s[1:3])
        out["slice_again"] = s[1:3]
        out["slice_i16"] = f.get_slice("layer.0.w")[1:, :2]
        out["i16_dtype"] = f.get_slice("layer.0.w").get_dtype()
        out["u8_dtype"] = f.get_slice("u8").get_dtype()
    return out


def assert_same_results(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, dict):
            assert x.keys() == y.keys(), k
            for n in x:
                if isinstance(x[n], np.ndarray):
                    assert same(x[n], y[n]), (k, n)
                else:
                    assert x[n] == y[n], (k, n)
        elif isinstance(x, np.ndarray):
            assert same(x, y), k
        else:
            assert x == y, k


def test_same_script_same_results(tmp):
    need_safetensors()
    meta = {"format": "np", "note": "hello"}
    ref = script(snp, safetensors.safe_open, tmp / "ref.safetensors", meta)
    ours = script(tnp, tessera.safe_open, tmp / "ours.safetensors", meta)
    assert ours["metadata"] == meta
    assert_same_results(ref, ours)
    # Not vacuous: safetensors' arrays are writable, and the changes changed values.
    assert all(ref["writable"].values())
    t = tensors()
    for k in t:
        assert not same(ref["load_file_changed"][k], t[k]), k
        assert same(ref["reload_after_change"][k], t[k]), k
    # And both write the same bytes (without metadata: safetensors orders metadata keys
    # by a randomly seeded hash map, tessera keeps the caller's order).
    assert snp.save(tensors()) == tnp.save(tensors())
    assert snp.save(tensors(), metadata={"k": "v"}) == tnp.save(tensors(), metadata={"k": "v"})


def test_files_cross_between_the_two(tmp):
    need_safetensors()
    t = tensors()
    snp.save_file(t, str(tmp / "theirs.safetensors"), metadata={"a": "b"})
    tnp.save_file(t, tmp / "ours.safetensors", metadata={"a": "b"})
    for k, v in tnp.load_file(tmp / "theirs.safetensors").items():
        assert same(v, t[k])
    for k, v in snp.load_file(str(tmp / "ours.safetensors")).items():
        assert same(v, t[k])
    assert tessera.open(tmp / "theirs.safetensors").metadata == {"a": "b"}


@pytest.mark.parametrize("other", ROUNDTRIP, ids=[f["name"] for f in ROUNDTRIP])
def test_same_script_on_every_format(other, tmp):
    """The safetensors script, unchanged, on a file of another format gives what
    safetensors gives on a .safetensors file (metadata aside where the format has none)."""
    need_safetensors()
    fmt = other
    missing = {tessera._convert.dtype_name(a.dtype) for a in tensors().values()} - set(fmt["dtypes"])
    if missing:
        pytest.skip(f"{fmt['name']} cannot store {sorted(missing)}")
    # Metadata as the format can hold it (none: the script passes none).
    meta = None if fmt["metadata"] == "none" else {"format": "np", "note": "hello"}
    ref = script(snp, safetensors.safe_open, tmp / "ref.safetensors", meta)
    ours = script(tnp, tessera.safe_open, tmp / f"ours.{ext(fmt)}", meta)
    assert tessera.open(tmp / f"ours.{ext(fmt)}").format == fmt["name"]
    if meta is not None:
        # Formats may add their own keys or nest user metadata (GPTRS "config").
        assert all(find_meta(tessera.open(tmp / f"ours.{ext(fmt)}").metadata, k) == v for k, v in meta.items())
        ref.pop("metadata"), ours.pop("metadata")
    elif ours.get("metadata"):
        # A format without metadata may still show its own header (WTXT's `wtxt.gen`, …).
        assert all(k.startswith(fmt["name"] + ".") for k in ours.pop("metadata")), ours
        ref.pop("metadata")
    assert_same_results(ref, ours)


def test_safe_open_reads_without_loading_everything(fmt, tmp):
    path = tmp / f"m.{ext(fmt)}"
    tessera.save({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(2, np.float32)}, path)
    with tessera.safe_open(path, framework="np") as f:
        assert f.keys() == ["a", "b"]
        assert f.get_slice("a").get_shape() == [2, 3]
        assert f.get_slice("a").get_dtype() == "F32"
        assert len(f.get_slice("a")) == 2
        part = f.get_slice("a")[:, 1]
        assert part.flags.writeable  # slices are copies, as in safetensors
        assert list(part) == [1.0, 4.0]

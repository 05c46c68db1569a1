"""Model sets through the Python API: ``tessera.open``, ``tessera.numpy.load_file`` and
``tessera.safe_open`` take a set's directory, its index or any shard, and see one model
whose values equal the manifest numpy wrote (crates/tessera/tests/data/sets/gen.py)."""
import hashlib
import json
import pathlib

import numpy as np
import pytest

import tessera
import tessera.numpy as tn

DATA = pathlib.Path(__file__).resolve().parents[2] / "tessera" / "tests" / "data" / "sets"
MANIFEST = json.loads((DATA / "manifest.json").read_text())


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def ways(kind):
    d = DATA / kind
    out = [d] + [d / s for s in MANIFEST[kind]["shards"]]
    if kind == "hf":
        out.append(d / "model.safetensors.index.json")
    return out


@pytest.mark.parametrize("kind", ["hf", "gguf"])
def test_open_load_file_safe_open_see_one_model(kind):
    want = MANIFEST[kind]["tensors"]
    for path in ways(kind):
        f = tessera.open(path)
        assert sorted(f.keys()) == sorted(want)
        assert f"set of {len(MANIFEST[kind]['shards'])} shards" in f.version
        loaded = tn.load_file(path)
        assert sorted(loaded) == sorted(want)
        for n, w in want.items():
            a = loaded[n]
            assert str(a.dtype) == w["dtype"] and list(a.shape) == w["shape"]
            assert digest(a) == w["sha256"], n
            a[...] = 0  # writable copies
        with tessera.safe_open(path, "np") as s:
            n = next(iter(want))
            assert digest(s.get_tensor(n)) == want[n]["sha256"]


def test_a_set_fault_raises_naming_the_shard():
    with pytest.raises(Exception) as e:
        tessera.open(DATA / "hf_missing_tensor")
    assert "ghost.weight" in str(e.value)
    with pytest.raises(Exception) as e:
        tn.load_file(DATA / "gguf_missing_split")
    assert "tiny-00002-of-00003.gguf" in str(e.value)


# --- writing sets from Python (issue 30 §5) ---------------------------------------


def _model(n=5):
    return {f"layer.{i}.weight": np.full((10, 10), i, dtype=np.float32) for i in range(n)}


def test_save_max_shard_size_cuts_as_huggingface_hub_does(tmp_path):
    hf = pytest.importorskip("huggingface_hub")
    model = _model()
    for size in ("1KB", 1000, "900"):
        out = tmp_path / str(size) / "model.safetensors"
        out.parent.mkdir()
        rep = tessera.save(model, out, max_shard_size=size)
        split = hf.split_state_dict_into_shards_factory(
            model,
            get_storage_size=lambda t: t.nbytes,
            filename_pattern="model{suffix}.safetensors",
            max_shard_size=int(size) if str(size).isdigit() else size,
        )
        index = json.loads((out.parent / "model.safetensors.index.json").read_text())
        assert index["weight_map"] == split.tensor_to_filename, size
        assert not out.exists()
        assert sorted(pathlib.Path(f).name for f in rep.extra_files) == sorted(
            list(split.filename_to_tensors) + ["model.safetensors.index.json"]
        )
        assert pathlib.Path(rep.extra_files[-1]).name == "model.safetensors.index.json"
        # Each shard reads with safetensors itself; the set opens as one model.
        import safetensors.numpy

        for shard, names in split.filename_to_tensors.items():
            got = safetensors.numpy.load_file(str(out.parent / shard))
            assert sorted(got) == sorted(names)
        loaded = tn.load_file(out.parent / "model.safetensors.index.json")
        for k, v in model.items():
            np.testing.assert_array_equal(loaded[k], v)


def test_sizes_are_read_as_huggingface_hub_reads_them():
    from tessera import _parse_size

    hf_base = pytest.importorskip("huggingface_hub.serialization._base")
    for s in ("5GB", "500MB", "1KB", "2.5GB", "10TB", " 7MB "):
        assert _parse_size(s) == hf_base.parse_size_to_int(s), s
    assert _parse_size("4GiB") == 4 << 30
    assert _parse_size(12345) == 12345
    for bad in ("5XB", "GB", "-5GB", 0, -1, True, 1.5):
        with pytest.raises(tessera.InvalidInputError):
            _parse_size(bad)


def test_shards_and_file_convert_write_sets_in_any_format(tmp_path):
    model = _model(4)
    src = tmp_path / "m.safetensors"
    tessera.save(model, src)
    out = tmp_path / "zt" / "m.zt"
    out.parent.mkdir()
    rep = tessera.open(src).convert(out, shards=2)
    names = sorted(pathlib.Path(f).name for f in rep.extra_files)
    assert names == ["m-00001-of-00002.zt", "m-00002-of-00002.zt", "m.tessera-set.json"]
    with tessera.open(out.parent / "m.tessera-set.json") as f:
        assert sorted(f.keys()) == sorted(model)
        for k, v in model.items():
            np.testing.assert_array_equal(f[k], v)
    # One shard is one plain file at the path.
    one = tmp_path / "one.safetensors"
    rep = tessera.save(model, one, max_shard_size="1GB")
    assert one.exists() and rep.extra_files == []
    with pytest.raises(tessera.InvalidInputError):
        tessera.save(model, None, format="safetensors", max_shard_size="1KB")
    with pytest.raises(tessera.InvalidInputError):
        tessera.save(model, tmp_path / "x.safetensors", max_shard_size="1KB", shards=2)

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

"""tessera.diff: the library's comparison (the one `tessera diff` renders), as a dict
with the same fields as `tessera diff --json`. The CLI's JSON is checked to agree."""
import json
import os
import subprocess

import numpy as np
import pytest

import tessera
from tessera.numpy import save_file


def tensors(w_scale=1.0):
    return {
        "w": (np.arange(6, dtype=np.float32).reshape(2, 3) * w_scale),
        "b": np.array([1, 2, 3], dtype=np.int32),
    }


def test_the_same_model_in_two_formats_has_no_differences(tmp_path):
    a, b = tmp_path / "m.safetensors", tmp_path / "m.zt"
    save_file(tensors(), str(a), metadata={"k": "v"})
    tessera.convert(a, b)
    d = tessera.diff(a, b)
    assert d["same"] and d["tensors_same"] and d["metadata_same"]
    assert d["added"] == d["removed"] == d["changed"] == []
    # Opened files work as well as paths.
    with tessera.open(a) as fa, tessera.open(b) as fb:
        assert tessera.diff(fa, fb)["same"]


def test_changes_are_named_and_tolerance_applies(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    base = tensors()
    save_file(base, str(a), metadata={"k": "1"})
    changed = dict(base, w=base["w"] + np.float32(0.001))
    del changed["b"]
    changed["new"] = np.zeros(2, np.float32)
    save_file(changed, str(b), metadata={"k": "2"})
    d = tessera.diff(a, b)
    assert not d["same"]
    assert d["removed"] == ["b"] and d["added"] == ["new"]
    [w] = d["changed"]
    assert w["name"] == "w" and w["elements_compared"] == 6 and w["elements_differing"] == 6
    assert w["max_abs_diff"] == pytest.approx(0.001, rel=1e-3)
    assert d["metadata"]["changed"] == ["k"]
    assert d["metadata"]["values"]["k"] == ("1", "2")
    loose = tessera.diff(a, b, atol=0.01)
    assert loose["changed"] == [] and [t["name"] for t in loose["within_tolerance"]] == ["w"]
    assert loose["tolerance"] == {"atol": 0.01, "rtol": 0.0}


def test_a_negative_tolerance_is_invalid_input(tmp_path):
    a = tmp_path / "a.safetensors"
    save_file(tensors(), str(a))
    with pytest.raises(tessera.InvalidInputError, match="atol"):
        tessera.diff(a, a, atol=-1)


@pytest.mark.skipif(not os.environ.get("TESSERA_BIN"), reason="needs the CLI (TESSERA_BIN)")
def test_the_cli_json_has_the_same_fields(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.npz"
    save_file(tensors(), str(a))
    save_file(tensors(2.0), str(b))
    out = subprocess.run(
        [os.environ["TESSERA_BIN"], "diff", "--json", str(a), str(b)],
        capture_output=True,
        text=True,
    )
    cli = json.loads(out.stdout)
    py = tessera.diff(a, b)
    for key in ["same", "tensors_same", "metadata_same", "added", "removed"]:
        assert py[key] == cli[key], key
    assert [t["name"] for t in py["changed"]] == [t["name"] for t in cli["changed"]]
    assert py["changed"][0]["max_abs_diff"] == cli["changed"][0]["max_abs_diff"]

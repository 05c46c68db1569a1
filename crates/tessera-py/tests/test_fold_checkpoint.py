"""FOLD checkpoints from Python: ``tessera.save(..., checkpoint=True, chunks={...})``."""
import json

import numpy as np
import pytest

import tessera


def test_save_checkpoint_with_chunks(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    counts = np.array([1, 2, 3], dtype=np.uint32)
    p = tmp_path / "ck.fold"
    (tmp_path / "t.json").write_text('{"events": []}')
    tessera.save(
        {"fc.weight": w, "counts": counts},
        p,
        checkpoint=True,
        chunks={"metrics": {"loss": 0.5, "name": "é"}, "history": '{"a": [1]}',
                "telemetry": tmp_path / "t.json"},
        timestamp="2026-01-02T03:04:05Z",
    )
    f = tessera.open(p)
    names = [c["name"] for c in f.chunks]
    assert names == ["torch_state", "llm_manifest", "metrics", "history", "telemetry", "nuclear_arrays"]
    # dicts as pyfolds writes JSON; str and files as given.
    assert f.chunk("metrics") == json.dumps({"loss": 0.5, "name": "é"}, ensure_ascii=False,
                                             separators=(",", ":")).encode()
    assert f.chunk("history") == b'{"a": [1]}'
    assert f.chunk("telemetry") == b'{"events": []}'
    assert np.array_equal(f.get_tensor("torch_state/state_dict.fc.weight"), w)
    assert np.array_equal(f.get_tensor("nuclear_arrays/counts"), counts)


def test_bad_chunks_are_refused(tmp_path):
    x = {"w": np.zeros(2, dtype=np.float32)}
    with pytest.raises(tessera.InvalidInputError, match='unknown chunk "weights"'):
        tessera.save(x, tmp_path / "a.fold", checkpoint=True, chunks={"weights": {}})
    with pytest.raises(tessera.InvalidInputError, match='chunk "metrics" is not JSON'):
        tessera.save(x, tmp_path / "a.fold", checkpoint=True, chunks={"metrics": "{nope"})
    assert not (tmp_path / "a.fold").exists()

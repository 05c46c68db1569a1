"""AEROSET through the Python API: the set aerotensor's write_aeroset wrote
(crates/tessera/tests/data/aeroset/, gen.py) opens with ``tessera.open``,
``tessera.safe_open`` and ``tessera.numpy.load_file`` — by its JSON index or its
directory — equal to the values numpy gave (expected.json); ``tessera.save`` writes one
to ``NAME.aeroset.json`` (also with ``format="aeroset"``)."""
import hashlib
import json
import pathlib

import numpy as np
import pytest

import tessera
import tessera.numpy as tn

DATA = pathlib.Path(__file__).resolve().parents[2] / "tessera" / "tests" / "data" / "aeroset"
EXPECTED = json.loads((DATA / "expected.json").read_text())
SET = DATA / "valid-aerotensor"


def q4_0_blocks_decoded():
    """The packed tensor gen.py wrote (two Q4_0 blocks: f16 scale 0.25*(i+1), nibble
    bytes 16*i..16*i+15) decoded by ggml's rule: low nibbles then high, (q - 8) * d."""
    out = []
    for i in range(2):
        d = np.float32(np.float16(0.25 * (i + 1)))
        qs = np.arange(16 * i, 16 * i + 16, dtype=np.uint8)
        out += [((qs & 0xF).astype(np.int32) - 8) * d, ((qs >> 4).astype(np.int32) - 8) * d]
    return np.concatenate(out).astype(np.float32)


@pytest.mark.parametrize("path", [SET, SET / "model.aeroset.json"])
def test_aerotensors_set_reads_equal_to_numpy(path):
    want = EXPECTED["tensors"]
    f = tessera.open(path)
    assert list(f.keys()) == EXPECTED["order"]
    assert "AEROSET" in f.version
    loaded = tn.load_file(path, dequantize="f32")
    q4 = loaded.pop("layer.0.wq_q4")
    assert np.array_equal(q4, q4_0_blocks_decoded())
    with tessera.safe_open(path, framework="numpy") as s:
        for name, e in want.items():
            if "values" not in e:
                continue
            for a in (loaded[name], s.get_tensor(name)):
                assert hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() == e["sha256"], name
                if "values" in e:
                    assert np.array_equal(np.asarray(a, dtype=np.float64 if a.dtype != np.bool_ else np.bool_),
                                          np.array(e["values"])), name


def test_save_writes_an_aeroset(tmp_path):
    model = {f"w{i}": np.arange(64, dtype=np.float32) * i for i in range(6)}
    out = tmp_path / "model.aeroset.json"
    tessera.save(model, out, max_shard_size=512, max_part_shards=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["index.aero", "model.aeroset.json", "part-000.aero", "part-001.aero"]
    back = tn.load_file(out)
    for k, v in model.items():
        assert np.array_equal(back[k], v)
    other = tmp_path / "b"
    other.mkdir()
    tessera.save(model, other / "m.aeroset.json", format="aeroset")
    assert (other / "index.aero").exists()
    with pytest.raises(ValueError, match="aeroset.json"):
        tessera.save(model, tmp_path / "x.aero", format="aeroset")

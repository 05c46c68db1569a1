"""tessera.id(..., pages=): the page manifest `tessera id --pages` writes, from Python.

The page digests are checked against the blake3 package over numpy's bytes of arrays
the safetensors package wrote, not against Tessera."""
import json

import blake3
import numpy as np
import pytest
from safetensors.numpy import save_file

import tessera


def model(tmp_path):
    r = np.random.default_rng(3)
    arrays = {
        "w": r.standard_normal((40, 70)).astype(np.float32),  # 11,200 bytes: 3 pages of 4 KiB
        "b": np.arange(5, dtype=np.int16),
    }
    path = tmp_path / "model.safetensors"
    save_file(arrays, str(path))
    return path, arrays


def test_pages_writes_a_manifest_beside_the_file_with_blake3_digests(tmp_path):
    path, arrays = model(tmp_path)
    result = tessera.id(path, pages=4096)
    beside = tmp_path / "model.pages"
    assert result["pages"] == {"file": str(beside), "page_size": 4096, "count": 4}
    assert result["id"] == tessera.id(path)["id"]
    doc = json.loads(beside.read_text())
    assert doc["type"] == "tessera-pages/1" and doc["page_size"] == 4096
    for t in doc["tensors"]:
        raw = arrays[t["name"]].tobytes()
        want = [blake3.blake3(raw[i:i + 4096]).hexdigest() for i in range(0, len(raw), 4096)]
        assert t["pages"] == want, t["name"]
        assert t["bytes"] == len(raw)


def test_pages_takes_cli_sizes_and_output_and_refuses_bad_sizes(tmp_path):
    path, _ = model(tmp_path)
    out = tmp_path / "elsewhere.pages"
    r = tessera.id(path, pages="1M", output=out)
    assert r["pages"]["page_size"] == 1 << 20 and r["pages"]["count"] == 2
    assert json.loads(out.read_text())["page_size"] == 1 << 20
    for bad in ("3000", 1000, "1MB", True):
        with pytest.raises(tessera.InvalidInputError):
            tessera.id(path, pages=bad, output=tmp_path / "bad.pages")
    assert not (tmp_path / "bad.pages").exists()
    with pytest.raises(tessera.InvalidInputError):
        tessera.id(path, output=out)
    # Nothing but the model and the two manifests: no temporary left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "elsewhere.pages", "model.safetensors"]

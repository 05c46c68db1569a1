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


def flip(path, offset):
    b = bytearray(path.read_bytes())
    b[offset] ^= 0x20
    path.write_bytes(bytes(b))


def data_start(path, name):
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    return 8 + n + header[name]["data_offsets"][0]


def test_slices_check_the_pages_they_touch_found_beside_the_file(tmp_path):
    path, arrays = model(tmp_path)
    tessera.id(path, pages=4096)
    # w is [40, 70] f32: 280 bytes a row; byte 5000 is on page 1 (row 17).
    flip(path, data_start(path, "w") + 5000)
    # Rows 0..10 lie on page 0: checked and equal.
    got = tessera.load_slices(path, {"w": (slice(0, 10), slice(None))})
    np.testing.assert_array_equal(got["w"], arrays["w"][0:10])
    # Rows 17..18 touch page 1: refused, naming tensor and page.
    with pytest.raises(tessera.IntegrityError, match=r'"w".*page 1'):
        tessera.load_slices(path, {"w": (slice(17, 18), slice(None))})
    with tessera.open(path) as f:
        with pytest.raises(tessera.IntegrityError, match="page 1"):
            f.get_slice("w")[10:20]
        np.testing.assert_array_equal(f.get_slice("w")[30:40], arrays["w"][30:40])
    # The manifest given explicitly works the same; one for another model is refused.
    other = tmp_path / "other.safetensors"
    save_file({"x": np.zeros(3, np.float32)}, str(other))
    tessera.id(other, pages=4096)
    with pytest.raises(tessera.InvalidInputError, match="another model"):
        tessera.load_slices(path, {"w": (0, 0, 2)}, pages=tmp_path / "other.pages")


def test_a_big_endian_npy_checks_its_pages_on_the_canonical_bytes(tmp_path):
    a = np.arange(3000, dtype=">f4") * 0.5
    path = tmp_path / "big.npy"
    np.save(path, a)
    tessera.id(path, pages=4096)
    doc = json.loads((tmp_path / "big.pages").read_text())
    le = a.astype("<f4").tobytes()
    assert doc["tensors"][0]["pages"][0] == blake3.blake3(le[:4096]).hexdigest()
    name = doc["tensors"][0]["name"]
    got = tessera.load_slices(path, {name: slice(1000, 1010)})
    np.testing.assert_array_equal(got[name], a[1000:1010])
    header = path.read_bytes().index(b"\n") + 1
    flip(path, header + 4 * 1500)  # element 1500: page 1
    with pytest.raises(tessera.IntegrityError, match="page 1"):
        tessera.load_slices(path, {name: slice(1100, 1200)})
    np.testing.assert_array_equal(tessera.load_slices(path, {name: slice(0, 10)})[name], a[:10])


def test_a_signature_covers_the_pages_it_was_made_with(tmp_path, recwarn):
    path, arrays = model(tmp_path)
    tessera.id(path, pages=4096)
    import subprocess, os, shutil
    exe = os.environ.get("TESSERA_BIN") or shutil.which("tessera")
    if not exe:
        pytest.skip("needs the tessera CLI (TESSERA_BIN) to sign with --pages")
    key = tmp_path / "k"
    subprocess.run([exe, "keygen", "-o", str(key)], check=True, capture_output=True)
    sig = tmp_path / "model.sig"
    subprocess.run([exe, "sign", str(path), "--key", str(key), "-o", str(sig),
                    "--pages", str(tmp_path / "model.pages")], check=True, capture_output=True)
    pub = (tmp_path / "k.pub").read_bytes()
    with tessera.open(path, signature=sig, public_key=pub) as f:
        np.testing.assert_array_equal(f.get_slice("w")[0:5], arrays["w"][0:5])
    assert not [w for w in recwarn if "unverified" in str(w.message) or "only" in str(w.message)]
    # Signed without pages: the slice is checked against the manifest, and says so.
    subprocess.run([exe, "sign", str(path), "--key", str(key), "-o", str(sig)],
                   check=True, capture_output=True)
    with tessera.open(path, signature=sig, public_key=pub) as f:
        with pytest.warns(UserWarning, match="page manifest only"):
            f.get_slice("w")[0:5]

"""Model sets against the real tools: Hugging Face sharded checkpoints planned by
huggingface_hub's splitter and written by safetensors, GGUF splits written by gguf-py's
GGUFWriter (split_max_tensors / split_max_size) — read by `tessera verify` / `extract`;
and sets Tessera writes (`convert --max-shard-size` / `--shards`) read by safetensors
(through the index's weight_map) and by gguf.GGUFReader (every split, its split.* keys
and their types)."""
import json

import numpy as np
import pytest

from conftest import run

gguf = pytest.importorskip("gguf")
hub = pytest.importorskip("huggingface_hub.serialization")
from safetensors.numpy import load_file, save_file  # noqa: E402


def state(seed=3):
    rng = np.random.default_rng(seed)
    return {
        "embed.weight": rng.standard_normal((32, 16)).astype(np.float32),
        "layers.0.w": rng.standard_normal((16, 16)).astype(np.float16),
        "layers.0.b": rng.standard_normal(16).astype(np.float32),
        "layers.1.w": rng.standard_normal((16, 16)).astype(np.float16),
        "layers.1.ids": rng.integers(-9, 9, (8,)).astype(np.int64),
        "head.weight": rng.standard_normal((16, 32)).astype(np.float32),
    }


def write_hf(d, sd, max_size):
    split = hub.split_state_dict_into_shards_factory(
        sd, get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors", max_shard_size=max_size)
    assert split.is_sharded
    for fname, names in split.filename_to_tensors.items():
        save_file({n: sd[n] for n in names}, d / fname, metadata={"format": "pt"})
    with open(d / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": split.metadata, "weight_map": split.tensor_to_filename}, f, indent=2)
    return split


def extracted(tmp_path, src, name):
    out = tmp_path / "x.npy"
    run("extract", src, name, "-o", out)
    return np.load(out)


def test_hf_set_written_by_huggingface_hub(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    sd = state()
    split = write_hf(d, sd, 1500)
    run("verify", d)
    for shard in split.filename_to_tensors:
        run("verify", d / shard)  # any shard opens the whole set
    for n, a in sd.items():
        np.testing.assert_array_equal(extracted(tmp_path, d / "model.safetensors.index.json", n), a)


@pytest.mark.parametrize("how", [{"split_max_tensors": 2}, {"split_max_size": 1500}])
def test_gguf_splits_written_by_gguf_py(tmp_path, how):
    d = tmp_path / "g"
    d.mkdir()
    sd = {k: v for k, v in state().items() if v.dtype != np.int64}
    w = gguf.GGUFWriter(d / "m.gguf", "llama", **how)
    w.add_name("peer split")
    for n, a in sd.items():
        w.add_tensor(n, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    splits = sorted(p.name for p in d.iterdir())
    assert len(splits) >= 2 and splits[0].endswith("-00001-of-%05d.gguf" % len(splits))
    run("verify", d / splits[-1])
    for n, a in sd.items():
        np.testing.assert_array_equal(extracted(tmp_path, d, n), a)


def test_tessera_writes_an_hf_set_safetensors_reads(tmp_path):
    sd = state(5)
    src = tmp_path / "one.safetensors"
    save_file(sd, src)
    out = tmp_path / "out"
    out.mkdir()
    run("convert", src, out / "model.safetensors", "--max-shard-size", "2K")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    wm = index["weight_map"]
    assert sorted(wm) == sorted(sd)
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in sd.values())
    shards = sorted(set(wm.values()))
    assert len(shards) > 1
    assert shards == sorted(p.name for p in out.glob("model-*-of-*.safetensors"))
    loaded = {f: load_file(out / f) for f in shards}
    for n, a in sd.items():
        np.testing.assert_array_equal(loaded[wm[n]][n], a)
    assert sum(len(t) for t in loaded.values()) == len(sd)
    # The planner agrees with huggingface_hub's for the same size (2K = 2048 bytes; no tensor over it) and
    # the same order (the source file's, which safetensors sorts).
    split = hub.split_state_dict_into_shards_factory(
        {n: sd[n] for n in wm}, get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors", max_shard_size=2048)
    assert split.tensor_to_filename == wm


def test_tessera_writes_gguf_splits_gguf_py_reads(tmp_path):
    sd = {k: v for k, v in state(9).items() if v.dtype != np.int64}
    src = tmp_path / "one.safetensors"
    save_file(sd, src)
    run("convert", src, tmp_path / "m.gguf", "--shards", "3")
    files = [tmp_path / f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    seen = {}
    for i, p in enumerate(files):
        r = gguf.GGUFReader(p)
        f = r.fields
        for key, want, vt in [("split.no", i, gguf.GGUFValueType.UINT16),
                              ("split.count", 3, gguf.GGUFValueType.UINT16),
                              ("split.tensors.count", len(sd), gguf.GGUFValueType.INT32)]:
            assert f[key].types == [vt], key
            assert int(f[key].parts[-1][0]) == want, key
        for t in r.tensors:
            shape = tuple(int(x) for x in reversed(t.shape.tolist()))
            seen[t.name] = np.asarray(t.data).reshape(shape)
    assert sorted(seen) == sorted(sd)
    for n, a in sd.items():
        np.testing.assert_array_equal(seen[n], a)


def test_a_set_fault_is_named(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    split = write_hf(d, state(), 1500)
    victim = sorted(split.filename_to_tensors)[1]
    (d / victim).unlink()
    p = run("verify", d, check=False)
    assert p.returncode != 0
    assert "shard present" in p.stdout and victim in p.stdout
    p = run("extract", d, "embed.weight", "-o", tmp_path / "x.npy", check=False)
    assert p.returncode != 0 and victim in p.stderr


def test_aero_multi_shard_from_a_huggingface_hub_set(tmp_path):
    """`convert SET out.aero --shards N / --max-shard-size`: one AERO file with N WTSH
    chunks (each with its PHSH), checked by the independent AERO validation of
    test_aero.py, tensors whole and equal to numpy's."""
    from test_aero import check_like_original

    d = tmp_path / "ckpt"
    d.mkdir()
    sd = state()
    write_hf(d, sd, 1500)
    out = tmp_path / "m.aero"
    run("convert", d, out, "--shards", "3", "--page-hashes", "64")
    meta, tensors, chunks = check_like_original(out.read_bytes())
    kinds = [c["fourcc"] for c in chunks]
    assert kinds.count("WTSH") == 3 and kinds.count("PHSH") == 3
    assert {t["shard_id"] for t, _ in tensors.values()} == {0, 1, 2}
    for n, a in sd.items():
        t, raw = tensors[n]
        assert raw == a.tobytes(), n
    run("verify", out)
    out2 = tmp_path / "m2.aero"
    run("convert", d, out2, "--max-shard-size", "1K")
    _, tensors, chunks = check_like_original(out2.read_bytes())
    sizes = {}
    for t, raw in tensors.values():
        sizes[t["shard_id"]] = sizes.get(t["shard_id"], 0) + len(raw)
    # Each shard at most 1 KiB of tensor bytes, unless one tensor alone is larger.
    for s, n in sizes.items():
        alone = [t for t, _ in tensors.values() if t["shard_id"] == s]
        assert n <= 1024 or len(alone) == 1, (s, n)
    assert [c["fourcc"] for c in chunks].count("WTSH") == len(sizes) > 1


def test_npz_shards_with_a_tessera_index_read_by_numpy(tmp_path):
    """Shards of a format with no set convention (npz here) plus the Tessera index: each
    shard is a plain npz numpy loads, the index's sizes and BLAKE3 digests are the
    files', and its weight_map places every tensor."""
    import blake3

    d = tmp_path / "ckpt"
    d.mkdir()
    sd = state()
    write_hf(d, sd, 1500)
    out = tmp_path / "out"
    out.mkdir()
    # The shards' own metadata ({"format": "pt"}, as transformers writes it) is kept by the
    # set since issue 30; npz cannot hold it, so the loss is asked for, as for one file.
    run("convert", d, out / "m.npz", "--shards", "2", "--drop-metadata")
    index = json.loads((out / "m.tessera-set.json").read_text())
    assert index["tessera_set"] == 1 and index["format"] == "npz"
    seen = {}
    for s in index["shards"]:
        data = (out / s["file"]).read_bytes()
        assert s["size"] == len(data)
        assert s["blake3"] == blake3.blake3(data).hexdigest()
        with np.load(out / s["file"]) as z:
            for n in z.files:
                seen[n] = s["file"]
                np.testing.assert_array_equal(z[n], sd[n])
    assert seen == index["weight_map"]
    assert index["total_size"] == sum(s["size"] for s in index["shards"])
    run("verify", out)
    (out / index["shards"][1]["file"]).unlink()
    assert run("verify", out, check=False).returncode != 0

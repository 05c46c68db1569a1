#!/usr/bin/env python3
"""Generates the model-set test vectors with the real tools. Run from this directory:
`python gen.py` (huggingface_hub==2.4.0, safetensors==0.8.0, gguf==0.19.0, numpy; no
network).

- hf/: a Hugging Face sharded checkpoint. huggingface_hub's own splitter
  (`serialization.split_state_dict_into_shards_factory`, what its numpy/torch helpers
  call, with numpy's `nbytes` as the storage size) plans the shards;
  `safetensors.numpy.save_file` writes each; the index is written the way
  `huggingface_hub.save_torch_state_dict` writes it (`{"metadata": {**split.metadata,
  **metadata}, "weight_map": split.tensor_to_filename}`, `json.dump(indent=2)`).
- gguf/: llama.cpp-style splits written by gguf-py's `GGUFWriter(split_max_tensors=2)`.
- Faults, each a copy of one of the above with one thing wrong (the byte edits are
  done here, on the tools' output):
  - hf_missing_shard/: shard 2 deleted.
  - hf_unindexed_shard/: the index forgets every tensor of shard 3 (the shard file is
    still there: an extra shard).
  - hf_omitted_tensor/: the index forgets one tensor of a shard holding two.
  - hf_two_shards/: shard 1 rewritten to also hold a tensor of shard 2.
  - hf_missing_tensor/: the index names "ghost.weight" in shard 1, which lacks it.
  - hf_total_size/: metadata.total_size off by one (only `verify` fails).
  - hf_truncated/: shard 2 cut short by 3 bytes.
  - hf_hostile_name/: the index names "../outside.safetensors".
  - gguf_missing_split/: split 2 deleted.
  - gguf_wrong_count/: split 2's split.count patched from 3 to 4.
  - gguf_truncated/: split 3 cut short by 3 bytes.

manifest.json: per good set, each tensor's dtype, shape, shard file and the SHA-256 of
its C-order bytes (from numpy), the set's metadata, and the shard names.
"""
import hashlib
import json
import os
import shutil

import numpy as np
import gguf
from huggingface_hub.serialization import split_state_dict_into_shards_factory
from safetensors.numpy import save_file

rng = np.random.default_rng(16)
MANIFEST = {}


def fresh(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def hf():
    state = {
        "embed.weight": rng.standard_normal((8, 16)).astype(np.float32),
        "layers.0.attn.weight": rng.standard_normal((16, 16)).astype(np.float16),
        "layers.0.attn.bias": rng.standard_normal(16).astype(np.float32),
        "layers.1.attn.weight": rng.standard_normal((16, 16)).astype(np.float16),
        "layers.1.mask": rng.integers(-5, 5, (4, 4)).astype(np.int32),
        "lm_head.weight": rng.standard_normal((16, 8)).astype(np.float32),
        "scale": np.array(0.5, dtype=np.float64),
    }
    split = split_state_dict_into_shards_factory(
        state,
        get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors",
        max_shard_size=600,
    )
    assert split.is_sharded and len(split.filename_to_tensors) >= 3, split
    fresh("hf")
    for fname, names in split.filename_to_tensors.items():
        save_file({n: state[n] for n in names}, f"hf/{fname}", metadata={"format": "np"})
    index = {
        "metadata": {**split.metadata, "producer": "tessera gen.py"},
        "weight_map": split.tensor_to_filename,
    }
    with open("hf/model.safetensors.index.json", "w") as f:
        json.dump(index, f, indent=2)
    MANIFEST["hf"] = {
        "shards": sorted(split.filename_to_tensors),
        "metadata": {"producer": "tessera gen.py"},
        "tensors": {
            n: {
                "dtype": str(a.dtype),
                "shape": list(a.shape),
                "shard": split.tensor_to_filename[n],
                "sha256": sha(a),
            }
            for n, a in state.items()
        },
    }
    return split, state


def gguf_set():
    fresh("gguf")
    tensors = {
        "token_embd.weight": rng.standard_normal((8, 16)).astype(np.float32),
        "blk.0.attn_q.weight": rng.standard_normal((16, 16)).astype(np.float16),
        "blk.0.attn_norm.weight": rng.standard_normal(16).astype(np.float32),
        "blk.1.attn_q.weight": rng.standard_normal((16, 16)).astype(np.float16),
        "output.weight": rng.standard_normal((16, 8)).astype(np.float32),
    }
    w = gguf.GGUFWriter("gguf/tiny.gguf", "llama", split_max_tensors=2)
    w.add_name("tiny split")
    w.add_context_length(64)
    for n, a in tensors.items():
        w.add_tensor(n, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shards = sorted(os.listdir("gguf"))
    assert shards == [f"tiny-0000{i}-of-00003.gguf" for i in (1, 2, 3)], shards
    names = list(tensors)
    MANIFEST["gguf"] = {
        "shards": shards,
        "metadata": {"general.architecture": "llama", "general.name": "tiny split",
                     "llama.context_length": 64},
        "tensors": {
            n: {
                "dtype": str(a.dtype),
                # GGUF shapes are written innermost first; Tessera reports row-major.
                "shape": list(a.shape),
                "shard": shards[names.index(n) // 2],
                "sha256": sha(a),
            }
            for n, a in tensors.items()
        },
    }


def copy(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def edit_index(d, fn):
    p = f"{d}/model.safetensors.index.json"
    with open(p) as f:
        index = json.load(f)
    fn(index)
    with open(p, "w") as f:
        json.dump(index, f, indent=2)


def truncate(p, by):
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - by)


def faults(split, state):
    shards = sorted(split.filename_to_tensors)
    copy("hf", "hf_missing_shard")
    os.remove(f"hf_missing_shard/{shards[1]}")

    copy("hf", "hf_unindexed_shard")
    gone = split.filename_to_tensors[shards[2]]
    edit_index("hf_unindexed_shard",
               lambda ix: [ix["weight_map"].pop(n) for n in gone])

    copy("hf", "hf_omitted_tensor")
    two = next(s for s in shards if len(split.filename_to_tensors[s]) > 1)
    omitted = split.filename_to_tensors[two][0]
    edit_index("hf_omitted_tensor", lambda ix: ix["weight_map"].pop(omitted))

    copy("hf", "hf_two_shards")
    stray = split.filename_to_tensors[shards[1]][0]
    both = {n: state[n] for n in split.filename_to_tensors[shards[0]]}
    both[stray] = state[stray]
    save_file(both, f"hf_two_shards/{shards[0]}", metadata={"format": "np"})

    copy("hf", "hf_missing_tensor")
    edit_index("hf_missing_tensor",
               lambda ix: ix["weight_map"].__setitem__("ghost.weight", shards[0]))

    copy("hf", "hf_total_size")
    edit_index("hf_total_size",
               lambda ix: ix["metadata"].__setitem__("total_size", ix["metadata"]["total_size"] + 1))

    copy("hf", "hf_truncated")
    truncate(f"hf_truncated/{shards[1]}", 3)

    copy("hf", "hf_hostile_name")
    edit_index("hf_hostile_name",
               lambda ix: ix["weight_map"].__setitem__("scale", "../outside.safetensors"))

    g = MANIFEST["gguf"]["shards"]
    copy("gguf", "gguf_missing_split")
    os.remove(f"gguf_missing_split/{g[1]}")

    copy("gguf", "gguf_wrong_count")
    p = f"gguf_wrong_count/{g[1]}"
    data = bytearray(open(p, "rb").read())
    key = b"split.count"
    at = data.index(key) + len(key)
    # value type (u32 = 2, UINT16) then the u16 value
    assert data[at:at + 4] == (2).to_bytes(4, "little") and data[at + 4:at + 6] == (3).to_bytes(2, "little")
    data[at + 4:at + 6] = (4).to_bytes(2, "little")
    open(p, "wb").write(bytes(data))

    copy("gguf", "gguf_truncated")
    truncate(f"gguf_truncated/{g[2]}", 3)


if __name__ == "__main__":
    split, state = hf()
    gguf_set()
    faults(split, state)
    with open("manifest.json", "w") as f:
        json.dump(MANIFEST, f, indent=2, sort_keys=True)
        f.write("\n")

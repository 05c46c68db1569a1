#!/usr/bin/env python3
"""More model-set vectors, beside gen.py's. Run from this directory: `python gen_more.py`
(safetensors==0.8.0, huggingface_hub==2.4.0, numpy; no network; torch not needed).

- pt/: a PyTorch `.bin` set as `save_pretrained(safe_serialization=False)` lays it
  out: shards `pytorch_model-00001-of-00002.bin` and `pytorch_model-00002-of-00002.bin`
  beside `pytorch_model.bin.index.json`. The shards are files torch.save wrote
  (../pytorch/gen.py, Debian's torch 1.13.1), copied: shard 1 is
  ../pytorch/pytorch_model.bin, shard 2 ../pytorch/dtypes.pt (their tensor names do not
  overlap). The index is written as transformers writes it (`json.dumps(index,
  indent=2, sort_keys=True) + "\\n"`), `total_size` the tensors' bytes (numel x item
  size, from ../pytorch/manifest.json) with storage shared by two tensors counted once,
  as huggingface_hub's splitter counts it.
- hf_shard_metadata/: a safetensors set whose shards carry `__metadata__` as
  transformers writes it (`{"format": "pt"}` in every shard) plus a key the shards
  disagree on (`"written_by"`: `"shard 1"`, `"shard 2"`), written by
  `safetensors.numpy.save_file`; planned by huggingface_hub's splitter as gen.py's hf/.

manifest_more.json: per set, the shards, each tensor's shard and (for hf_shard_metadata)
dtype, shape and SHA-256 of its bytes from numpy, and each shard's metadata as written.
"""
import hashlib
import json
import os
import shutil

import numpy as np
from huggingface_hub.serialization import split_state_dict_into_shards_factory
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
PT = os.path.join(HERE, "..", "pytorch")
ITEM = {"bf16": 2, "bool": 1, "c64": 8, "f16": 2, "f32": 4, "f64": 8, "i16": 2,
        "i32": 4, "i64": 8, "i8": 1, "u8": 1}
OUT = {}


def fresh(d):
    shutil.rmtree(os.path.join(HERE, d), ignore_errors=True)
    os.makedirs(os.path.join(HERE, d))


def pt():
    fresh("pt")
    with open(os.path.join(PT, "manifest.json")) as f:
        listing = json.load(f)
    shards = {
        "pytorch_model-00001-of-00002.bin": "pytorch_model.bin",
        "pytorch_model-00002-of-00002.bin": "dtypes.pt",
    }
    weight_map, total, tensors = {}, 0, {}
    for shard, src in shards.items():
        shutil.copyfile(os.path.join(PT, src), os.path.join(HERE, "pt", shard))
        entry = listing[src]
        tied = {b for _, b in entry["shared"]}
        for name, t in entry["tensors"].items():
            assert name not in weight_map, name
            weight_map[name] = shard
            tensors[name] = {**t, "shard": shard, "from": src}
            if name not in tied:
                total += int(np.prod(t["shape"], dtype=np.int64)) * ITEM[t["dtype"]]
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(HERE, "pt", "pytorch_model.bin.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    OUT["pt"] = {"shards": sorted(shards), "tensors": tensors}


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def hf_shard_metadata():
    rng = np.random.default_rng(30)
    state = {
        "embed.weight": rng.standard_normal((8, 16)).astype(np.float32),
        "layers.0.weight": rng.standard_normal((16, 16)).astype(np.float16),
        "lm_head.weight": rng.standard_normal((16, 8)).astype(np.float32),
    }
    split = split_state_dict_into_shards_factory(
        state,
        get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors",
        max_shard_size=1100,
    )
    assert split.is_sharded and len(split.filename_to_tensors) == 2, split
    fresh("hf_shard_metadata")
    metas = {}
    for i, (fname, names) in enumerate(sorted(split.filename_to_tensors.items())):
        meta = {"format": "pt", "written_by": f"shard {i + 1}"}
        save_file({n: state[n] for n in names}, os.path.join(HERE, "hf_shard_metadata", fname),
                  metadata=meta)
        metas[fname] = meta
    index = {"metadata": dict(split.metadata), "weight_map": split.tensor_to_filename}
    with open(os.path.join(HERE, "hf_shard_metadata", "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    OUT["hf_shard_metadata"] = {
        "shards": sorted(split.filename_to_tensors),
        "shard_metadata": metas,
        "tensors": {
            n: {"dtype": str(a.dtype), "shape": list(a.shape),
                "shard": split.tensor_to_filename[n], "sha256": sha(a)}
            for n, a in state.items()
        },
    }


if __name__ == "__main__":
    pt()
    hf_shard_metadata()
    with open(os.path.join(HERE, "manifest_more.json"), "w") as f:
        json.dump(OUT, f, indent=1, sort_keys=True)
        f.write("\n")

"""Writes the DCP vectors with torch.distributed.checkpoint (torch 2.x, CPU, gloo).

Run from anywhere: `python gen_dcp.py` (needs torch; the repository's tests do not).

valid-r1/  one process, no process group: nested state (model.…, optim.state.…), plain
           tensors of several dtypes, a 0-d tensor, non-tensor items (int, str, bytes,
           a list of dicts).
valid-r2/, valid-r4/  2 and 4 ranks (spawned processes, gloo on 127.0.0.1): DTensors
           sharded by rows (Shard(0), FSDP-style, uneven: 5 rows over 4 ranks leaves one
           empty), by columns (Shard(1), tensor-parallel-style, uneven), replicated
           (Replicate() and plain tensors every rank holds: written once), and in
           valid-r4/ a 2-D mesh (2×2: Shard(0), Shard(1)) tiling a tensor in blocks.
The negative vectors are copies of valid-r2/ with `.metadata` rewritten (unpickled and
re-pickled with torch's own classes) or a `.distcp` changed, as vectors.json says.

expected.json: per valid vector, every tensor (dtype, shape, SHA-256 of its row-major
little-endian bytes, computed here from the full tensors, not read back) and every
non-tensor item (its Python repr).
"""

import hashlib
import io
import json
import os
import pickle
import shutil
import socket
import struct
import zipfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.metadata import MetadataIndex

HERE = os.path.dirname(os.path.abspath(__file__))
DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
      torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool", torch.float64: "f64"}


def full_state(world):
    """The full (unsharded) state; every rank builds the same."""
    g = torch.Generator().manual_seed(1234 + world)
    r = lambda *s: torch.randn(*s, generator=g)
    return {
        "model": {
            "embed.weight": r(5, 3).to(torch.bfloat16),
            "layers.0.attn.q.weight": r(6, 4),
            "layers.0.mlp.up.weight": r(5, 7),
            "layers.0.attn.o.weight": r(5, 6),
            "norm.weight": r(3),
            "head.bias": r(4).to(torch.float16),
            "pos_ids": torch.arange(7, dtype=torch.int64),
        },
        "optim": {
            "state": {
                "model.embed.weight": {"exp_avg": r(5, 3), "step": torch.tensor(3.0)},
                "model.layers.0.mlp.up.weight": {"exp_avg": r(5, 7)},
            },
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.95), "params": ["model.embed.weight"]}],
        },
        "step": 7,
        "run_name": "tiny-run",
        "blob": b"\x00\x01\x02\xff",
    }


# How each tensor is placed on the mesh in the multi-rank vectors (others: plain,
# replicated on every rank).
def placements(name, world):
    from torch.distributed.tensor import Replicate, Shard
    return {
        "model.embed.weight": [Shard(0)],
        "model.layers.0.attn.q.weight": [Shard(0)],
        "model.layers.0.mlp.up.weight": [Shard(1)],
        "model.head.bias": [Replicate()],
        "optim.state.model.embed.weight.exp_avg": [Shard(0)],
        "optim.state.model.layers.0.mlp.up.weight.exp_avg": [Shard(1)],
        "model.layers.0.attn.o.weight": [Shard(0), Shard(1)] if world == 4 else [Shard(1)],
    }.get(name)


def walk(d, prefix=""):
    for k, v in d.items():
        n = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from walk(v, n + ".")
        else:
            yield n, v


def set_path(d, dotted_parts, v):
    for p in dotted_parts[:-1]:
        d = d[p]
    d[dotted_parts[-1]] = v


def paths(d, prefix=()):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from paths(v, prefix + (k,))
        else:
            yield prefix + (k,), v


def sharded_state(world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    state = full_state(world)
    mesh1 = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, 2)) if world == 4 else None
    for path, v in list(paths(state)):
        name = ".".join(path)
        pl = placements(name, world)
        if pl is None or not isinstance(v, torch.Tensor):
            continue
        mesh = mesh2 if len(pl) == 2 else mesh1
        set_path(state, path, distribute_tensor(v, mesh, pl))
    return state


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        dcp.save(sharded_state(world), checkpoint_id=out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def fixed_metadata(out):
    """Drops what changes from run to run (the save's UUID, the absolute path)."""
    p = os.path.join(out, ".metadata")
    with open(p, "rb") as f:
        m = pickle.load(f)
    if m.storage_meta is not None:
        m.storage_meta.checkpoint_id = None
        m.storage_meta.save_id = None
    with open(p, "wb") as f:
        pickle.dump(m, f)


def listing(world):
    st = full_state(world)
    tensors, objects = {}, {}
    for n, v in walk(st):
        if isinstance(v, torch.Tensor):
            tensors[n] = {"dtype": DT[v.dtype], "shape": list(v.shape),
                          "sha256": hashlib.sha256(v.contiguous().view(torch.uint8).numpy().tobytes()
                                                   if v.dim() else v.reshape(1).view(torch.uint8).numpy().tobytes()).hexdigest()}
        else:
            objects[n] = repr(v)
    return {"tensors": tensors, "objects": objects}


def rewrite(src, dst, edit):
    shutil.copytree(src, dst)
    p = os.path.join(dst, ".metadata")
    with open(p, "rb") as f:
        m = pickle.load(f)
    edit(m)
    with open(p, "wb") as f:
        pickle.dump(m, f)


def info_of(m, fqn):
    return next(v for k, v in m.storage_data.items() if k.fqn == fqn)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def main():
    expected = {}
    for d in os.listdir(HERE):
        if os.path.isdir(os.path.join(HERE, d)):
            shutil.rmtree(os.path.join(HERE, d))
    out = os.path.join(HERE, "valid-r1")
    dcp.save(full_state(1), checkpoint_id=out, no_dist=True)
    fixed_metadata(out)
    expected["valid-r1/"] = listing(1)
    for world in (2, 4):
        out = os.path.join(HERE, f"valid-r{world}")
        mp.spawn(worker, args=(world, free_port(), out), nprocs=world, join=True)
        fixed_metadata(out)
        expected[f"valid-r{world}/"] = listing(world)
    r2 = os.path.join(HERE, "valid-r2")
    q = "model.layers.0.attn.q.weight"

    def gap(m):
        m.state_dict_metadata[q].chunks.pop()

    def overlap(m):
        # Chunk 1 moved up a row (its storage entry with it): rows 2 overlap, row 5 is
        # left uncovered.
        c = m.state_dict_metadata[q].chunks[1]
        old = c.offsets
        c.offsets = torch.Size([old[0] - 1, 0])
        m.storage_data = {
            (MetadataIndex(k.fqn, c.offsets, k.index) if k.fqn == q and k.offset == old else k): v
            for k, v in m.storage_data.items()
        }

    def past_shape(m):
        c = m.state_dict_metadata[q].chunks[1]
        c.sizes = torch.Size([c.sizes[0] + 1, c.sizes[1]])

    def past_file(m):
        info_of(m, q).length += 10_000

    def transform(m):
        info_of(m, q).transform_descriptors = ["zstd"]

    def evil(m):
        m.planner_data = Evil()

    rewrite(r2, os.path.join(HERE, "malformed-chunks-gap"), gap)
    rewrite(r2, os.path.join(HERE, "malformed-chunks-overlap"), overlap)
    rewrite(r2, os.path.join(HERE, "malformed-chunk-past-shape"), past_shape)
    rewrite(r2, os.path.join(HERE, "malformed-item-past-file"), past_file)
    rewrite(r2, os.path.join(HERE, "unsupported-transform"), transform)
    rewrite(r2, os.path.join(HERE, "unsupported-evil-global"), evil)
    shutil.copytree(r2, os.path.join(HERE, "io-distcp-missing"))
    os.remove(os.path.join(HERE, "io-distcp-missing", "__1_0.distcp"))
    # A byte of a tensor's storage flipped: its zip record's CRC-32 no longer matches.
    d = os.path.join(HERE, "integrity-item-crc")
    shutil.copytree(r2, d)
    with open(os.path.join(d, ".metadata"), "rb") as f:
        m = pickle.load(f)
    info = info_of(m, q)
    path = os.path.join(d, info.relative_path)
    blob = bytearray(open(path, "rb").read())
    item = bytes(blob[info.offset:info.offset + info.length])
    rec = next(i for i in zipfile.ZipFile(io.BytesIO(item)).infolist() if i.filename.endswith("/data/0"))
    h = rec.header_offset
    name_len, extra_len = struct.unpack("<HH", item[h + 26:h + 30])
    blob[info.offset + h + 30 + name_len + extra_len] ^= 0xFF
    open(path, "wb").write(bytes(blob))
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"about": "written by gen_dcp.py from the full tensors (not read back)",
                   "torch": torch.__version__, **expected}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()

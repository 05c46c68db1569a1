"""Writes the PyTorch checkpoint test vectors with real torch (torch.save, torch.jit.save)
and `manifest.json`: per file, every tensor's dtype (our canonical name), shape and the
SHA-256 of its contiguous little-endian bytes as torch/numpy give them, the metadata
values we expect, and which tensors share storage. Also writes hostile checkpoints with
pickle + zipfile only (a pickle that would call os.system, builtins.eval, …): torch is not
needed to read any of them, and nothing in them is ever run by our reader.

Run: /usr/bin/python3 gen.py   (Debian's python3-torch 1.13.1, CPU only)
"""
import hashlib
import io
import json
import os
import pathlib
import pickle
import struct
import zipfile

import torch

HERE = pathlib.Path(__file__).parent
CANON = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "bool", torch.complex64: "c64",
}


def le_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def describe(t):
    return {"dtype": CANON[t.dtype], "shape": list(t.shape),
            "sha256": hashlib.sha256(le_bytes(t)).hexdigest()}


def flat(obj, prefix=""):
    """name -> tensor, joined with '.' as the reader does."""
    out = {}
    if isinstance(obj, torch.Tensor):
        out[prefix or "tensor"] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flat(v, f"{prefix}.{i}" if prefix else str(i)))
    return out


def overlaps(tensors):
    """Pairs of tensors (as torch loaded them) whose element ranges overlap in one storage."""
    spans = []
    for k, t in tensors.items():
        if t.numel():
            last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
            spans.append((t.storage().data_ptr(), t.storage_offset(), t.storage_offset() + last + 1, k))
    return sorted([a[3], b[3]] for i, a in enumerate(spans) for b in spans[i + 1:]
                  if a[0] == b[0] and a[1] < b[2] and b[1] < a[2])


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(5, 4)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)])
        self.norm = torch.nn.BatchNorm1d(3)
        self.head = torch.nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight  # tied


def main():
    torch.manual_seed(7)
    manifest = {}

    def save(name, obj, metadata=None, **kw):
        torch.save(obj, HERE / name, **kw)
        back = flat(torch.load(HERE / name))
        manifest[name] = {
            "tensors": {k: describe(v) for k, v in back.items()},
            "metadata": metadata or {},
            "shared": overlaps(back),
        }

    net = Net()
    sd = net.state_dict()
    save("state_dict.pt", sd)

    r = torch.randn(2, 3)
    dt = {
        "f32": r, "f16": r.half(), "bf16": r.bfloat16(), "f64": r.double(),
        "i64": torch.arange(-3, 3), "i32": torch.arange(4, dtype=torch.int32),
        "i16": torch.tensor([-2, 7], dtype=torch.int16), "i8": torch.tensor([-1, 1], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
        "c64": torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
        "param": torch.nn.Parameter(torch.ones(3)),
    }
    save("dtypes.pt", dt)

    base = torch.arange(24, dtype=torch.float32)
    m = base.view(4, 6)
    views = {
        "slice": base[2:8],            # view with a storage offset
        "row": m[2],                   # another window of the same storage
        "transposed": m.t(),           # non-contiguous
        "strided": base[1::5],         # non-contiguous, 1-D
        "w": m[:2],                    # tied: w and w_again are one tensor object
        "w_again": m[:2],
    }
    save("views.pt", views)

    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    ckpt = {"epoch": 3, "name": "run-1", "lr": 0.001, "flags": [True, None],
            "model": net.state_dict(), "optimizer": opt.state_dict()}
    # A subtree without tensors is one metadata value (tuples become lists).
    groups = json.loads(json.dumps(opt.state_dict()["param_groups"]))
    save("checkpoint.pt", ckpt, metadata={
        "epoch": 3, "name": "run-1", "lr": 0.001, "flags": [True, None],
        "optimizer.param_groups": groups,
    })

    save("tensor.pt", torch.arange(6, dtype=torch.int64).view(2, 3))
    save("protocol4.pt", {"a": r, "b": [r.half(), torch.ones(2)]}, pickle_protocol=4)
    save("legacy.pt", {"dt": dt, "views": views}, _use_new_zipfile_serialization=False)
    save("legacy_protocol4.pt", {"a": r}, _use_new_zipfile_serialization=False, pickle_protocol=4)
    save("a_rather_long_checkpoint_file_name_for_detection.pt", {"x": torch.ones(2)})
    save("pytorch_model.bin", sd)

    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), HERE / "scripted.pt")
    repack("dtypes.pt", manifest)
    hostile()
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


class Call:
    """Pickles as fn(*args): what an attacker's checkpoint does."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def swap_sizes(pkl):
    """storage key -> the byte run a big-endian machine reverses (the element size; a
    complex element's component size), from data.pkl's persistent ids. No tensor is
    rebuilt: the rebuild functions are replaced by stubs."""
    sizes = {}

    class Keys(pickle.Unpickler):
        def find_class(self, module, name):
            if name in ("_rebuild_tensor_v2", "_rebuild_parameter"):
                return lambda *a: None
            return super().find_class(module, name)

        def persistent_load(self, pid):
            es = pid[1](0).element_size()
            sizes[pid[2]] = es // 2 if pid[1].__name__.startswith("Complex") else es

    Keys(io.BytesIO(pkl)).load()
    return sizes


def repack(src, manifest):
    """The same checkpoint as another writer could store it: every record deflated
    (deflated.pt), and as a big-endian machine writes it (big_endian.pt: storages
    byte-swapped and a `byteorder` record saying `big`). Same values as `src`."""
    with zipfile.ZipFile(HERE / src) as z:
        records = [(i.filename, z.read(i)) for i in z.infolist()]
    prefix = records[0][0][: -len("data.pkl")]
    sizes = swap_sizes(records[0][1])
    with zipfile.ZipFile(HERE / "deflated.pt", "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in records:
            z.writestr(n, b)
    with zipfile.ZipFile(HERE / "big_endian.pt", "w", zipfile.ZIP_STORED) as z:
        for n, b in records:
            if n.startswith(prefix + "data/"):
                k = sizes[n[len(prefix + "data/"):]]
                b = b"".join(b[i:i + k][::-1] for i in range(0, len(b), k))
            z.writestr(n, b)
            if n == records[0][0]:
                z.writestr(prefix + "byteorder", b"big")
    for name in ("deflated.pt", "big_endian.pt"):
        manifest[name] = manifest[src]


def zip_pt(name, pkl, extra=()):
    with zipfile.ZipFile(HERE / name, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        for n, b in extra:
            z.writestr("archive/" + n, b)
        z.writestr("archive/version", b"3\n")


def hostile():
    import builtins
    zip_pt("evil_os_system.pt", pickle.dumps({"w": Call(os.system, "echo pwned")}, protocol=2))
    zip_pt("evil_eval.pt", pickle.dumps(Call(builtins.eval, "1+1"), protocol=2))
    zip_pt("evil_stack_global.pt", pickle.dumps(Call(os.system, "x"), protocol=4))
    # Legacy layout with an os.system call in the object pickle.
    b = io.BytesIO()
    for o in (0x1950a86a20f9469cfc6c, 1001, {"little_endian": True}, Call(os.system, "x"), []):
        pickle.dump(o, b, protocol=2)
    (HERE / "evil_legacy.pt").write_bytes(b.getvalue())
    # A good checkpoint whose storage bytes were changed after the CRC was written.
    src = (HERE / "dtypes.pt").read_bytes()
    with zipfile.ZipFile(HERE / "dtypes.pt") as z:
        info = z.getinfo("dtypes/data/0")
        # The local header's extra field (torch's alignment padding) sets the data start.
        n, e = struct.unpack("<HH", src[info.header_offset + 26:info.header_offset + 30])
        off = info.header_offset + 30 + n + e
    bad = bytearray(src)
    bad[off] ^= 0xFF
    (HERE / "corrupt_crc.pt").write_bytes(bytes(bad))


if __name__ == "__main__":
    main()

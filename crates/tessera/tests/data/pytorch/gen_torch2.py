"""Writes the torch 2.x checkpoint vectors (issue 34 §1) with real torch 2.15 (CPU), and
adds their entries to `manifest.json` (the independent listing gen.py started: per file,
every tensor's dtype in Tessera's name, shape and the SHA-256 of its contiguous
little-endian bytes as torch gives them after `torch.load(weights_only=True)`, the
metadata values we expect, and which tensors share storage).

torch 2.x pickles the dtypes that have no legacy storage class (u16/u32/u64, the float8s,
float4_e2m1fn_x2, complex32, bits*) through `torch._utils._rebuild_tensor_v3(untyped
storage of bytes, offset, size, stride, requires_grad, hooks, dtype)`; the others still
through `_rebuild_tensor_v2` with a typed storage. These files cover both:

- torch2_dtypes.pt      every dtype torch 2.15 saves that Tessera has, scalars, empty
                        tensors, an nn.Parameter
- torch2_views.pt       views with offsets and strides of v3 dtypes, tied tensors, and an
                        f8 tensor and its u8 view sharing one storage (torch allows it:
                        both are byte storages to torch)
- torch2_checkpoint.pt  nested model + optimizer state (Adam; f8/bf16/u16 parameters)
- torch2_legacy.pt      `_use_new_zipfile_serialization=False` with v3 dtypes (torch 2.15
                        writes `_rebuild_tensor_v3` there too; the storage count is bytes;
                        torch 2.15 cannot load this file back, see below)
- torch2_big_endian.pt  torch2_dtypes.pt as a big-endian machine writes it: storages
                        byte-swapped per element (per component of a complex), a
                        `byteorder` record saying `big` (torch 2.15 reads its v2 tensors
                        back equal, its v3 u16/u32/u64 byte-reversed: see below)
- legacy_none_hooks.pt  a legacy file as old torch wrote it: `None` as
                        `_rebuild_tensor_v2`'s backward_hooks (torch 2.15 writes an empty
                        OrderedDict, so the object pickle is re-pickled with `None`,
                        everything else kept), and the storage location `cuda:0` (as a
                        GPU machine saved it; there is no GPU here, so the location string
                        is patched the same way). torch 2.15 loads it with
                        map_location="cpu" to the listed values.
- cuda_location.pt      torch2_views.pt re-pickled with `cuda:0`/`cuda:1` locations (zip)
- torch2_undecoded.pt   complex32, bcomplex32 and the bits* dtypes, which Tessera has no
                        DType for: carried
                        as their bytes (dense:torch.complex32). Not in manifest.json:
                        their expected bytes are in torch2_undecoded.expected.json
- torch2_quantized.pt   a quantized tensor (`_rebuild_qtensor`): refused by name

Run: /work/torchvenv/bin/python gen_torch2.py   (torch 2.15.0, CPU)
"""
import collections
import hashlib
import io
import json
import pathlib
import pickle
import zipfile

import torch

HERE = pathlib.Path(__file__).parent
CANON = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.uint16: "u16", torch.uint32: "u32", torch.uint64: "u64",
    torch.bool: "bool", torch.complex64: "c64", torch.complex128: "c128",
    torch.float8_e4m3fn: "f8_e4m3fn", torch.float8_e5m2: "f8_e5m2",
    torch.float8_e4m3fnuz: "f8_e4m3fnuz", torch.float8_e5m2fnuz: "f8_e5m2fnuz",
    torch.float8_e8m0fnu: "f8_e8m0", torch.float4_e2m1fn_x2: "f4_e2m1",
}


def le_bytes(t):
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def describe(t):
    shape = list(t.shape)
    if t.dtype == torch.float4_e2m1fn_x2:  # two values per element: the last dim doubles
        shape = shape[:-1] + [2 * shape[-1]] if shape else [2]
    return {"dtype": CANON[t.dtype], "shape": shape,
            "sha256": hashlib.sha256(le_bytes(t)).hexdigest()}


def flat(obj, prefix=""):
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
    """Pairs of tensors whose byte ranges overlap in one storage."""
    spans = []
    for k, t in tensors.items():
        if t.numel():
            last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
            es = t.element_size()
            start = t.untyped_storage().data_ptr() + t.storage_offset() * es
            spans.append((t.untyped_storage().data_ptr(), start, start + (last + 1) * es, k))
    return sorted([a[3], b[3]] for i, a in enumerate(spans) for b in spans[i + 1:]
                  if a[0] == b[0] and a[1] < b[2] and b[1] < a[2])


def bits(dtype, n, seed):
    """n values of `dtype` from random bytes (every bit pattern torch keeps)."""
    g = torch.Generator().manual_seed(seed)
    es = torch.empty(0, dtype=dtype).element_size()
    return torch.randint(0, 256, (n * es,), dtype=torch.uint8, generator=g).view(dtype)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(5, 4)
        self.proj = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight  # tied


def main():
    torch.manual_seed(34)
    manifest = json.loads((HERE / "manifest.json").read_text())

    def record(name, back, metadata=None):
        back = flat(back)
        manifest[name] = {
            "tensors": {k: describe(v) for k, v in back.items()},
            "metadata": metadata or {},
            "shared": overlaps(back),
        }

    def save(name, obj, metadata=None, **kw):
        torch.save(obj, HERE / name, **kw)
        record(name, torch.load(HERE / name, weights_only=True), metadata)

    r = torch.randn(2, 3)
    dt = {
        "bool": torch.tensor([True, False, True]),
        "u8": torch.tensor([0, 7, 255], dtype=torch.uint8),
        "i8": torch.tensor([-128, 1, 127], dtype=torch.int8),
        "i16": torch.tensor([-2, 7], dtype=torch.int16),
        "i32": torch.tensor([-(2 ** 31), 4], dtype=torch.int32),
        "i64": torch.tensor([-(2 ** 63), 2 ** 40]),
        "u16": torch.tensor([0, 1, 40000, 65535]).to(torch.uint16),
        "u32": torch.tensor([0, 3_000_000_000, 2 ** 32 - 1]).to(torch.uint32),
        "u64": bits(torch.uint64, 3, 1),
        "f16": r.half(), "bf16": r.bfloat16(), "f32": r, "f64": r.double(),
        "c64": torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
        "c128": torch.tensor([0.5 - 1j, 2j], dtype=torch.complex128),
        "f8_e4m3fn": (r * 4).to(torch.float8_e4m3fn),
        "f8_e5m2": (r * 100).to(torch.float8_e5m2),
        "f8_e4m3fnuz": (r * 4).to(torch.float8_e4m3fnuz),
        "f8_e5m2fnuz": (r * 100).to(torch.float8_e5m2fnuz),
        "f8_e8m0": torch.tensor([0.25, 1.0, 2.0 ** 40]).to(torch.float8_e8m0fnu),
        "f4": bits(torch.float4_e2m1fn_x2, 6, 2).view(2, 3),
        "f4_scalar": bits(torch.float4_e2m1fn_x2, 1, 3).view(()),
        "u16_scalar": torch.tensor(65000).to(torch.uint16),
        "f8_scalar": torch.tensor(-1.5).to(torch.float8_e4m3fn),
        "u64_empty": torch.zeros(0, 3).to(torch.uint64),
        "f8_empty": torch.zeros(2, 0).to(torch.float8_e5m2),
        "param_f8": torch.nn.Parameter((r * 2).to(torch.float8_e4m3fn), requires_grad=False),
        "param_bf16": torch.nn.Parameter(r.bfloat16()),
    }
    save("torch2_dtypes.pt", dt)

    base = torch.arange(24).to(torch.uint32)
    m = base.view(4, 6)
    f8 = (torch.randn(4, 6) * 8).to(torch.float8_e5m2)
    f4 = bits(torch.float4_e2m1fn_x2, 12, 4).view(3, 4)
    u16 = torch.tensor([1, 2, 3, 60000, 5, 6]).to(torch.uint16)
    views = {
        "u32_transposed": m.t(),          # non-contiguous
        "u32_window": m[1:3, 2:5],       # offset and strides
        "u16_slice": u16[2:5],           # offset only
        "f8_strided": f8[:, ::2],        # non-contiguous 1-byte elements
        "f8": f8,
        "f8_bytes": f8.view(torch.uint8),  # one storage as f8 and u8
        "f4_rows": f4[1:],               # float4_e2m1fn_x2 with an offset
        "f4_cols": f4[:, 1:3],           # and with strides
        "tied": u16,                     # tied: one tensor object under two names
        "tied_again": u16,
    }
    save("torch2_views.pt", views)

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    sd = net.state_dict()
    sd["proj.weight"] = sd["proj.weight"].to(torch.float8_e4m3fn)
    sd["proj.bias"] = sd["proj.bias"].bfloat16()
    sd["steps"] = torch.tensor([3, 9]).to(torch.uint16)
    ckpt = {"epoch": 3, "model": sd, "optimizer": opt.state_dict(),
            "extra": {"scale": torch.nn.Parameter(torch.tensor(0.5)), "note": "fp8 run"}}
    groups = json.loads(json.dumps(opt.state_dict()["param_groups"]))
    save("torch2_checkpoint.pt", ckpt, metadata={
        "epoch": 3, "optimizer.param_groups": groups, "extra.note": "fp8 run"})

    legacy = {"u16": dt["u16"], "u64": dt["u64"], "f8": dt["f8_e4m3fn"], "f4": dt["f4"],
              "f32": r, "u32_window": m[1:3, 2:5], "f8_strided": f8[:, ::2]}
    # torch 2.15 writes this but cannot load it back (`_legacy_load` asks the
    # UntypedStorage class for a dtype: AttributeError), so the listing is of the
    # tensors it saved.
    torch.save(legacy, HERE / "torch2_legacy.pt", _use_new_zipfile_serialization=False)
    record("torch2_legacy.pt", legacy)

    # torch 2.15 reads the v2 tensors of the big-endian file back equal but not the v3
    # ones: it byte-swaps an UntypedStorage as uint8 (not at all), so its u16/u32/u64
    # come back byte-reversed. The listing is torch2_dtypes.pt's: the same values.
    big_endian("torch2_dtypes.pt", "torch2_big_endian.pt")
    record("torch2_big_endian.pt", torch.load(HERE / "torch2_big_endian.pt", weights_only=True))
    wrong = {k for k, v in manifest["torch2_big_endian.pt"]["tensors"].items()
             if v != manifest["torch2_dtypes.pt"]["tensors"][k]}
    assert wrong == {"u16", "u32", "u64", "u16_scalar"}, wrong
    manifest["torch2_big_endian.pt"] = manifest["torch2_dtypes.pt"]

    # Old torch's legacy file: None hooks, a GPU location.
    old = {"w": r, "b": torch.arange(3), "half": r.half()[1]}
    buf = io.BytesIO()
    torch.save(old, buf, _use_new_zipfile_serialization=False)
    (HERE / "legacy_none_hooks.pt").write_bytes(repickle_legacy(buf.getvalue(), "cuda:0"))
    assert b"cuda:0" in (HERE / "legacy_none_hooks.pt").read_bytes()
    record("legacy_none_hooks.pt",
           torch.load(HERE / "legacy_none_hooks.pt", weights_only=True, map_location="cpu"))

    repickle_zip("torch2_views.pt", "cuda_location.pt", ["cuda:0", "cuda:1"])
    record("cuda_location.pt",
           torch.load(HERE / "cuda_location.pt", weights_only=True, map_location="cpu"))
    assert manifest["cuda_location.pt"] == manifest["torch2_views.pt"]

    undecoded = {"c32": torch.tensor([1 + 2j, -0.5j, 3], dtype=torch.complex32),
                 "bc32": bits(torch.int32, 3, 5).view(torch.bcomplex32),
                 "bits16": torch.tensor([1, -2, 300], dtype=torch.int16).view(torch.bits16),
                 "bits8": bits(torch.bits8, 3, 6),
                 "bits1x8": bits(torch.bits1x8, 3, 7),
                 "bits2x4": bits(torch.bits2x4, 3, 8),
                 "bits4x2": bits(torch.bits4x2, 3, 9),
                 "f32": torch.ones(2)}
    torch.save(undecoded, HERE / "torch2_undecoded.pt")
    back = torch.load(HERE / "torch2_undecoded.pt", weights_only=True)
    (HERE / "torch2_undecoded.expected.json").write_text(json.dumps({
        k: {"dtype": str(v.dtype), "shape": list(v.shape),
            "sha256": hashlib.sha256(le_bytes(v)).hexdigest()}
        for k, v in back.items()}, indent=1, sort_keys=True) + "\n")

    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 0, torch.qint8)
    torch.save({"f32": torch.ones(2), "q": q}, HERE / "torch2_quantized.pt")

    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


class Stub:
    """A rebuild call kept as its function and arguments, to be pickled again."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class Pid:
    def __init__(self, pid):
        self.pid = pid


REBUILDS = {"_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter"}


class Reader(pickle.Unpickler):
    """Unpickles torch's object pickle without rebuilding anything: rebuild calls become
    Stubs (hooks set to None), persistent ids Pids with the location replaced."""

    def __init__(self, f, locations):
        super().__init__(f)
        self.locations = locations
        self.seen = {}

    def find_class(self, module, name):
        fn = super().find_class(module, name)
        if name in REBUILDS:
            def call(*args):
                args = list(args)
                hooks = 5 if name != "_rebuild_parameter" else 2
                assert args[hooks] == collections.OrderedDict()
                args[hooks] = None
                return Stub(fn, tuple(args))
            return call
        return fn

    def persistent_load(self, pid):
        pid = list(pid)
        key = pid[2]
        if key not in self.seen:
            self.seen[key] = self.locations[len(self.seen) % len(self.locations)]
        assert pid[3] == "cpu"
        pid[3] = self.seen[key]
        return Pid(tuple(pid))


class Writer(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Pid) else None


def repickle(pkl, locations, protocol=2):
    obj = Reader(io.BytesIO(pkl), locations).load()
    out = io.BytesIO()
    Writer(out, protocol=protocol).dump(obj)
    return out.getvalue()


def repickle_legacy(data, location):
    """The legacy file's object pickle (the fourth) re-pickled; the rest kept."""
    f = io.BytesIO(data)
    for _ in range(3):
        pickle.load(f)
    start = f.tell()
    Reader(f, [location]).load()  # to find its end
    end = f.tell()
    return data[:start] + repickle(data[start:end], [location]) + data[end:]


def repickle_zip(src, dst, locations):
    with zipfile.ZipFile(HERE / src) as z:
        records = [(i.filename, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(HERE / dst, "w", zipfile.ZIP_STORED) as z:
        for n, b in records:
            z.writestr(n, repickle(b, locations) if n.endswith("/data.pkl") else b)


def swap_sizes(pkl):
    """storage key -> the byte run a big-endian machine reverses (the element size; a
    complex element's component size), from the rebuild calls' dtypes."""
    sizes = {}
    obj = Reader(io.BytesIO(pkl), ["cpu"]).load()

    def walk(o):
        if isinstance(o, Stub):
            if o.fn.__name__ == "_rebuild_parameter":
                return walk(o.args[0])
            pid = o.args[0].pid
            dtype = o.args[6] if o.fn.__name__ == "_rebuild_tensor_v3" else pid[1](0).dtype
            es = torch.empty(0, dtype=dtype).element_size()
            sizes[pid[2]] = es // 2 if dtype.is_complex else es
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
    walk(obj)
    return sizes


def big_endian(src, dst):
    with zipfile.ZipFile(HERE / src) as z:
        records = [(i.filename, z.read(i)) for i in z.infolist()]
    prefix = records[0][0][: -len("data.pkl")]
    sizes = swap_sizes(records[0][1])
    with zipfile.ZipFile(HERE / dst, "w", zipfile.ZIP_STORED) as z:
        for n, b in records:
            if n == prefix + "byteorder":
                b = b"big"
            elif n.startswith(prefix + "data/"):
                k = sizes[n[len(prefix + "data/"):]]
                b = b"".join(b[i:i + k][::-1] for i in range(0, len(b), k))
            z.writestr(n, b)


if __name__ == "__main__":
    main()

"""PyTorch `.pt` against real torch (Debian's python3-torch 1.13, run as
$TESSERA_TORCH_PYTHON, /usr/bin/python3 by default, in a subprocess), both directions.

- torch writes a checkpoint (every dtype torch 1.13 stores, scalars, zero-size,
  non-contiguous and sliced views, tied weights, a parameter, nested dicts and lists,
  plain metadata); we read it (`tessera convert` to zTensor v2 and straight to `.pt`),
  write `.pt`, and torch loads ours with `torch.load(weights_only=True)` and compares
  every tensor (dtype, shape, values) with its own, and the metadata.
- safetensors (the PyPI package, here) -> `.pt` by us -> torch: values and the
  safetensors metadata, which lands in the state dict's `_tessera_metadata` attribute.
"""
import json
import os
import subprocess

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import run, run_json

TORCH_PY = os.environ.get("TESSERA_TORCH_PYTHON", "/usr/bin/python3")


def _has_torch():
    try:
        p = subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True)
    except OSError:
        return False
    return p.returncode == 0


pytestmark = pytest.mark.skipif(
    not _has_torch(), reason=f"{TORCH_PY} cannot import torch (apt-get install python3-torch)"
)

PRELUDE = """
import json, sys
import torch
args = json.loads(sys.argv[1])

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

def same(ours, ref):
    assert sorted(ours) == sorted(ref), (sorted(ours), sorted(ref))
    for k, t in ref.items():
        o = ours[k]
        assert o.dtype == t.dtype, (k, o.dtype, t.dtype)
        assert tuple(o.shape) == tuple(t.shape), (k, o.shape, t.shape)
        assert o.is_contiguous(), k
        assert torch.equal(o, t.detach()), k
"""


def torch_run(script, **args):
    p = subprocess.run(
        [TORCH_PY, "-c", PRELUDE + script, json.dumps(args)], capture_output=True, text=True
    )
    if p.returncode != 0:
        raise AssertionError(f"torch script failed:\n{p.stdout}\n{p.stderr}")
    out = p.stdout.strip()
    return json.loads(out) if out else None


WRITE_REF = """
torch.manual_seed(3)
def rnd(dtype, *shape):
    if dtype.is_complex or dtype.is_floating_point:
        return torch.randn(*shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    return torch.randint(0, 100, shape, dtype=dtype)
dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
          torch.complex128]
model = {str(d).split(".")[1]: rnd(d, 3, 5) for d in dtypes}
base = torch.randn(6, 4)
model["views"] = {"t": base.t(), "row": base[2], "cols": base[:, 1:3], "base": base}
model["tied"] = [model["float32"], model["float32"]]
model["scalar"] = torch.tensor(2.5)
model["empty"] = torch.zeros(0, 7, dtype=torch.int32)
model["param"] = torch.nn.Parameter(torch.randn(2, 2))
torch.save({"model": model, "epoch": 7, "name": "ref", "sizes": [1, 2, 3]}, args["out"])
"""

CHECK = """
ref = torch.load(args["ref"])
meta = {k: v for k, v in ref.items() if not isinstance(v, dict)}
for path in args["ours"]:
    ours = torch.load(path, weights_only=True)
    same(dict(ours), flat(ref["model"], "model"))
    assert ours._tessera_metadata == meta, (ours._tessera_metadata, meta)
    assert not any(k == "_tessera_metadata" for k in ours)
print(json.dumps(len(flat(ref))))
"""


def test_torch_loads_what_we_write_from_its_checkpoints(tmp_path):
    ref, mid = tmp_path / "ref.pt", tmp_path / "mid.zt"
    torch_run(WRITE_REF, out=str(ref))
    direct, via = tmp_path / "direct.pt", tmp_path / "via.pth"
    run("convert", ref, direct)
    run("convert", ref, mid, "--to", "ztensor-v2")
    run("convert", mid, via)
    assert run_json("inspect", via)["format"] == "pytorch"
    assert run("verify", via).returncode == 0
    n = torch_run(CHECK, ref=str(ref), ours=[str(direct), str(via)])
    assert n == 12 + 4 + 2 + 3


def test_safetensors_to_pt_loads_in_torch(tmp_path):
    rng = np.random.default_rng(5)
    arrays = {
        "encoder.layer.0.weight": rng.standard_normal((4, 3)).astype(np.float32),
        "encoder.layer.0.bias": rng.standard_normal(3).astype(np.float16),
        "embed.ids": rng.integers(-5, 5, (2, 2, 2)).astype(np.int64),
        "mask": rng.random(5) > 0.5,
    }
    st, pt, npz = tmp_path / "m.safetensors", tmp_path / "m.pt", tmp_path / "ref.npz"
    save_file(arrays, str(st), metadata={"format": "pt", "source": "peer test"})
    np.savez(npz, **arrays)
    run("convert", st, pt)
    torch_run(
        """
import numpy as np
ours = torch.load(args["pt"], weights_only=True)
ref = {k: torch.from_numpy(v) for k, v in np.load(args["npz"]).items()}
same(dict(ours), ref)
assert ours._tessera_metadata == {"format": "pt", "source": "peer test"}, ours._tessera_metadata
""",
        pt=str(pt),
        npz=str(npz),
    )


# safetensors name -> (torch dtype, bytes per element, logical shape). F4 is torch's
# float4_e2m1fn_x2: two values per byte, torch's last dimension half the logical one.
NEW_DTYPES = {
    "U16": ("uint16", 2, [2, 3]),
    "U32": ("uint32", 4, [3]),
    "U64": ("uint64", 8, [2, 2]),
    "F8_E4M3": ("float8_e4m3fn", 1, [4, 2]),
    "F8_E5M2": ("float8_e5m2", 1, [5]),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 1, [3]),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 1, [3]),
    "F8_E8M0": ("float8_e8m0fnu", 1, [2, 3]),
    "F4": ("float4_e2m1fn_x2", 0.5, [2, 4]),
}


def _safetensors(path, tensors):
    """A safetensors file by the format's rules, written here (numpy has no f8 or f4)."""
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def _read_safetensors(path):
    b = path.read_bytes()
    n = int.from_bytes(b[:8], "little")
    header = json.loads(b[8 : 8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def test_float8_and_unsigned_safetensors_to_pt_load_in_torch_2(tmp_path):
    """Issue 34 §1: u16/u32/u64, the float8s and f4 go to .pt as torch 2.x writes them
    (`_rebuild_tensor_v3`); torch 2.x's `torch.load(weights_only=True)` gives the same
    bytes, dtypes and shapes, and Tessera reads the .pt back to the same safetensors."""
    have = torch_run("print(json.dumps([hasattr(torch, d) for d in args['d']]))",
                     d=[v[0] for v in NEW_DTYPES.values()])
    if not all(have):
        pytest.skip("this torch lacks some of " + ", ".join(v[0] for v in NEW_DTYPES.values()))
    rng = np.random.default_rng(34)
    tensors = {}
    for st, (_, size, shape) in NEW_DTYPES.items():
        n = int(np.prod(shape) * size)
        tensors[st.lower()] = (st, shape, rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    src, pt, back = tmp_path / "m.safetensors", tmp_path / "m.pt", tmp_path / "back.safetensors"
    _safetensors(src, tensors)
    run("convert", src, pt)
    want = {}
    for name, (st, shape, data) in tensors.items():
        tdt = NEW_DTYPES[st][0]
        tshape = shape[:-1] + [shape[-1] // 2] if st == "F4" else shape
        want[name] = [tdt, tshape, data.hex()]
    torch_run(
        """
ours = torch.load(args["pt"], weights_only=True)
assert sorted(ours) == sorted(args["want"]), sorted(ours)
for name, (dt, shape, data) in args["want"].items():
    t = ours[name]
    assert t.dtype == getattr(torch, dt), (name, t.dtype)
    assert list(t.shape) == shape, (name, t.shape)
    got = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    assert got == bytes.fromhex(data), name
""",
        pt=str(pt),
        want=want,
    )
    run("convert", pt, back)
    got = _read_safetensors(back)
    assert got == {k: (st, shape, data) for k, (st, shape, data) in tensors.items()}

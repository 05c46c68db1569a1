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

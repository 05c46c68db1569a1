"""tessera.torch.load_sharded over torch.distributed, for real: 2 and 4 processes on
127.0.0.1 (gloo, CPU), spawned by the test, each loading a model written by another
writer (the safetensors package, ztensor 1.0.1) from a local file or an nginx URL,
sharded by rows and by columns (uneven sizes, empty last pieces included) on 1-D and
2-D device meshes. Each rank checks its DTensor against what torch's own
``distribute_tensor`` gives for the same tensor and placements (its local piece, bit for
bit), and that ``full_tensor()`` gathers the tensor; the expected tensors come from
numpy's .npy files, not from tessera.

Run by $TESSERA_TORCH_PYTHON (else $TESSERA_DCP_PYTHON, else this interpreter) with
this tessera package first on its path; skipped where that python has no
torch.distributed.tensor (CI without torch)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tessera

PY = os.environ.get("TESSERA_TORCH_PYTHON") or os.environ.get("TESSERA_DCP_PYTHON") or sys.executable
HTTP_URL = os.environ.get("TESSERA_TEST_HTTP_URL")
HTTP_ROOT = os.environ.get("TESSERA_TEST_HTTP_ROOT")
HTTP_LOG = os.environ.get("TESSERA_TEST_HTTP_LOG")


def _has_dtensor() -> bool:
    try:
        p = subprocess.run(
            [PY, "-c", "import torch.distributed.tensor, numpy, ml_dtypes"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


pytestmark = pytest.mark.skipif(not _has_dtensor(), reason=f"{PY} has no torch.distributed.tensor")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "tessera-cache"))


# name -> (dtype, shape). Row counts 5, 7, 3 and column counts 5, 6, 9 do not divide
# by 2 or 4: torch.chunk's pieces (ceil-sized, the last shorter or empty) differ from
# numpy.array_split's there, e.g. 5 rows over 4 ranks are 2, 2, 1, 0 (not 2, 1, 1, 1).
TENSORS = {
    "embed.rows": ("float32", (5, 3)),
    "layers.0.q.rows": ("bfloat16", (7, 4)),
    "layers.0.o.cols": ("float16", (3, 6)),
    "layers.1.up.cols": ("float32", (4, 9)),
    "layers.1.norm": ("float32", (5,)),
    "ids.rows": ("int64", (3, 2, 2)),
    "conv.last": ("float32", (2, 3, 5)),
    "even.rows": ("float32", (8, 4)),
    # glob characters in a name: load_slices' plan keys are globs
    "experts[1].rows": ("float32", (6, 2)),
}


def _arrays(spec=TENSORS):
    rng = np.random.default_rng(35)
    out = {}
    for name, (dt, shape) in spec.items():
        if dt == "int64":
            out[name] = rng.integers(-1000, 1000, size=shape, dtype=np.int64)
        else:
            a = rng.standard_normal(shape).astype(np.float32)
            out[name] = a.astype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt))
    return out


def _write(arrays, path, fmt):
    if fmt == "safetensors":
        import safetensors.numpy

        safetensors.numpy.save_file(arrays, str(path))
    else:
        import ztensor

        with ztensor.Writer(str(path)) as w:
            for k, v in arrays.items():
                w.add_tensor(k, v)


def _expected(arrays, d, spec=TENSORS):
    """Each tensor as .npy (its integer view for bf16/f16, so plain numpy reads it) and
    the dtype names, for the ranks."""
    os.makedirs(d, exist_ok=True)
    for k, v in arrays.items():
        ints = v.view(np.uint16) if v.dtype.itemsize == 2 else v
        np.save(os.path.join(d, k + ".npy"), ints)
    return {k: dt for k, (dt, _) in spec.items()}


WORKER = r'''
import datetime, json, os, socket, sys, traceback
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import tessera, tessera.torch

args = json.loads(sys.argv[1])

DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int64": torch.int64}


def expected(name):
    a = torch.from_numpy(np.load(os.path.join(args["expected"], name + ".npy")))
    return a.view(DT[args["dtypes"][name]])


def placements(spec):
    return [Shard(p) if isinstance(p, int) else Replicate() for p in spec]


def pick(name, plan):
    if name in plan:
        return plan[name]
    import fnmatch
    return next((v for k, v in plan.items() if fnmatch.fnmatchcase(name, k)), None)


def check(rank, mesh, case):
    plan = {k: (None if v is None else placements(v)) for k, v in case["plan"].items()}
    got = tessera.torch.load_sharded(args["source"], mesh, plan, **args["read"])
    assert sorted(got) == sorted(args["dtypes"]), (list(got), list(args["dtypes"]))
    if args["bytes_only"]:  # one read per rank, nothing else: the test counts its bytes
        for name, d in got.items():
            assert torch.equal(d.full_tensor(), expected(name)), name
        return
    plain = tessera.torch.load_sharded(args["source"], mesh, plan, as_dtensor=False)
    for name, d in got.items():
        full = expected(name)
        want_p = pick(name, plan) or [Replicate()] * mesh.ndim
        ref = distribute_tensor(full, mesh, want_p)  # torch's own cut
        where = f"rank {rank} {case['label']} {name}"
        assert tuple(d.placements) == tuple(ref.placements), (where, d.placements, ref.placements)
        assert d.shape == full.shape and d.dtype == full.dtype, (where, d.shape, d.dtype)
        mine, theirs = d.to_local(), ref.to_local()
        assert mine.shape == theirs.shape, (where, mine.shape, theirs.shape)
        assert torch.equal(mine, theirs), where
        assert torch.equal(plain[name], theirs), where
        assert torch.equal(d.full_tensor(), full), where


def refusals(mesh):
    # Bad placements are refused before any read, naming the tensor.
    from torch.distributed.tensor import Partial
    bad = [
        ({"embed.rows": [Shard(2)] * mesh.ndim}, "embed.rows"),
        ({"embed.rows": [Shard(0)] * (mesh.ndim + 1)}, "embed.rows"),
        ({"layers.1.norm": [Partial()] * mesh.ndim}, "layers.1.norm"),
    ]
    for plan, name in bad:
        try:
            tessera.torch.load_sharded(args["source"], mesh, plan)
        except ValueError as e:
            assert name in str(e), str(e)
        else:
            raise AssertionError(f"{plan} was not refused")


def pages_check(rank, mesh):
    # The file has one flipped byte; with its page manifest the rank whose rows hold it
    # fails naming the tensor, the other loads (and checks) its own rows.
    from tessera.errors import IntegrityError
    try:
        got = tessera.torch.load_sharded(args["source"], mesh, [Shard(0)], pages=args["pages"], as_dtensor=False)
        outcome = "ok"
        for name, t in got.items():
            full = expected(name)
            a = min(rank * -(-full.shape[0] // mesh.size()), full.shape[0])
            assert torch.equal(t, full[a:a + t.shape[0]]), name
    except IntegrityError as e:
        outcome = "IntegrityError: " + str(e)
    outcomes = [None] * mesh.size()
    dist.all_gather_object(outcomes, outcome)
    if rank == 0:
        print("outcomes " + json.dumps(outcomes), flush=True)


def worker(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=90))
    try:
        if args.get("pages"):
            pages_check(rank, init_device_mesh("cpu", (world,)))
        for case in args["cases"]:
            mesh = init_device_mesh("cpu", tuple(case["mesh"]))
            check(rank, mesh, case)
            if not args["bytes_only"]:
                refusals(mesh)
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(worker, args=(args["world"], port), nprocs=args["world"], join=True)
    print("ranks ok")
'''

ROWS_COLS = {"*.rows": [0], "*.cols": [1], "conv.last": [-1]}
CASES_1D = [{"label": "1-D rows/cols", "mesh": None, "plan": ROWS_COLS}]
CASES_2D = [
    {"label": "2-D rows x cols", "mesh": [2, 2], "plan": {"*.rows": [0, 1], "*.cols": [1, 0], "*": ["R", 0]}},
    {"label": "2-D rows twice", "mesh": [2, 2], "plan": {"*": [0, 0], "layers.1.norm": None}},
]


def _run(tmp_path, source, world, cases, spec=TENSORS, read=None, bytes_only=False, pages=None):
    arrays_dir = tmp_path / "expected"
    dtypes = _expected(_arrays(spec), arrays_dir, spec)
    # This tessera (the one under test) first on the ranks' path, nothing else of this
    # interpreter's.
    path_dir = tmp_path / "path"
    path_dir.mkdir()
    os.symlink(os.path.dirname(tessera.__file__), path_dir / "tessera")
    script = tmp_path / "sharded_ranks.py"
    script.write_text(WORKER)
    cases = [dict(c, mesh=c["mesh"] or [world]) for c in cases]
    for c in cases:
        c["plan"] = {k: (None if v is None else [p if isinstance(p, int) else "R" for p in v]) for k, v in c["plan"].items()}
    args = {
        "source": source,
        "world": world,
        "cases": cases,
        "expected": str(arrays_dir),
        "dtypes": dtypes,
        "read": read or {},
        "bytes_only": bytes_only,
        "pages": pages,
    }
    env = dict(os.environ, PYTHONPATH=str(path_dir), OMP_NUM_THREADS="1")
    p = subprocess.run(
        [PY, str(script), json.dumps(args)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert p.returncode == 0 and "ranks ok" in p.stdout, p.stdout[-4000:] + p.stderr[-8000:]
    return p.stdout


def test_two_ranks_rows_and_cols_from_a_local_safetensors_file(tmp_path):
    path = tmp_path / "model.safetensors"
    _write(_arrays(), path, "safetensors")
    _run(tmp_path, str(path), 2, CASES_1D)


def test_four_ranks_1d_and_2d_meshes_from_a_local_zt_file(tmp_path):
    path = tmp_path / "model.zt"
    _write(_arrays(), path, "zt")
    _run(tmp_path, str(path), 4, CASES_1D + CASES_2D)


def _servers():
    if not (HTTP_URL and HTTP_ROOT):
        msg = "no test server (TESSERA_TEST_HTTP_URL); scripts/test.sh starts it"
        if os.environ.get("TESSERA_REQUIRE_REMOTE") == "1":
            pytest.fail("TESSERA_REQUIRE_REMOTE=1: " + msg)
        pytest.skip(msg)


def test_four_ranks_from_an_http_url(tmp_path):
    _servers()
    name = f"sharded-{os.getpid()}-{tmp_path.name}.safetensors"
    _write(_arrays(), os.path.join(HTTP_ROOT, name), "safetensors")
    try:
        _run(tmp_path, f"{HTTP_URL}/{name}", 4, CASES_1D + CASES_2D[:1])
    finally:
        os.remove(os.path.join(HTTP_ROOT, name))


def _sent(uri):
    """Body bytes nginx logged for GETs of `uri`."""
    total = 0
    with open(HTTP_LOG) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "GET" and parts[1] == uri and parts[-1].isdigit():
                total += int(parts[-1])
    return total


def test_four_ranks_fetch_only_their_rows_over_http(tmp_path):
    # 4 ranks, each a quarter of the rows of every tensor: together they fetch the
    # tensors' bytes once (plus each rank's index read), not four times. Reading whole
    # tensors and slicing would fetch 4x.
    _servers()
    if not HTTP_LOG:
        pytest.skip("no TESSERA_TEST_HTTP_LOG")
    spec = {f"layers.{i}.w": ("float32", (64 + i, 512)) for i in range(8)}
    name = f"sharded-bytes-{os.getpid()}-{tmp_path.name}.safetensors"
    arrays = _arrays(spec)
    _write(arrays, os.path.join(HTTP_ROOT, name), "safetensors")
    data = sum(a.nbytes for a in arrays.values())
    try:
        before = _sent("/" + name)
        _run(
            tmp_path,
            f"{HTTP_URL}/{name}",
            4,
            [{"label": "rows", "mesh": None, "plan": {"*": [0]}}],
            spec=spec,
            read={"cache": False},
            bytes_only=True,
        )
        import time

        time.sleep(0.3)  # nginx logs a request after its response
        sent = _sent("/" + name) - before
    finally:
        os.remove(os.path.join(HTTP_ROOT, name))
    # Each rank's open reads the first 64 KiB (the index); the rest is its rows.
    assert sent <= 1.05 * data + 4 * 65536, (sent, data)


def test_with_a_page_manifest_only_the_rank_reading_a_flipped_byte_fails(tmp_path):
    spec = {"a.w": ("float32", (64, 512)), "b.w": ("float32", (64, 512))}
    arrays = _arrays(spec)
    path = tmp_path / "model.safetensors"
    _write(arrays, path, "safetensors")
    pages = tmp_path / "model.pages"
    tessera.id(path, pages="4K", output=pages)
    tessera.load_slices(str(path), {"a.w": ("rows", 0, 2)}, pages=str(pages))
    # flip a byte of b.w's row 50: rank 1's rows (32..64) of 2
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        import json as _json

        header = _json.loads(f.read(n))
    at = 8 + n + header["b.w"]["data_offsets"][0] + 50 * 512 * 4 + 7
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x10]))
    out = _run(tmp_path, str(path), 2, [], spec=spec, pages=str(pages))
    outcomes = json.loads(out.split("outcomes ", 1)[1].splitlines()[0])
    assert outcomes[0] == "ok", outcomes
    assert outcomes[1].startswith("IntegrityError") and "b.w" in outcomes[1], outcomes

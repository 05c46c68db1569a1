"""Shared fixtures for the peer interop tests.

The tests drive the real peer packages (ztensor==1.0.1, pyfolds==1.0.2, safetensors,
numpy, gguf) and the `tessera` binary named by $TESSERA_BIN (scripts/test.sh builds it):
they write, we read; we write, they read.
"""
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "interop-samples"


def _bin():
    b = os.environ.get("TESSERA_BIN")
    if b:
        return b
    cand = ROOT / "target" / "release" / "tessera"
    if cand.exists():
        return str(cand)
    return str(ROOT / "target" / "debug" / "tessera")


TESSERA = _bin()


def run(*args, check=True):
    """Runs the tessera CLI; returns the CompletedProcess."""
    p = subprocess.run([TESSERA, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"tessera {' '.join(map(str, args))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def run_json(*args):
    return json.loads(run(*args, "--json").stdout)


@pytest.fixture
def tessera():
    return run


_TORCH_STUB_MARK = "__tessera_stub__"


def stub_torch():
    """pyfolds imports torch at module level; its FoldWriter/FoldReader need none of it.

    The stub lives only while the module that asked for it is being collected
    (pytest_collectstart removes it before the next one), so packages that import torch
    optionally (ztensor, safetensors) never see a fake torch.
    """
    if "torch" not in sys.modules:
        stub = types.ModuleType("torch")
        setattr(stub, _TORCH_STUB_MARK, True)
        sys.modules["torch"] = stub


def pytest_collectstart(collector):
    t = sys.modules.get("torch")
    if t is not None and getattr(t, _TORCH_STUB_MARK, False):
        del sys.modules["torch"]

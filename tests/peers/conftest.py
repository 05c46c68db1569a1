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
SAMPLES = ROOT.parent / "shared" / "interop-samples"


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


def stub_torch():
    """pyfolds imports torch at module level; its FoldWriter/FoldReader need none of it."""
    if "torch" not in sys.modules:
        sys.modules["torch"] = types.ModuleType("torch")

"""Writes the page-manifest test vector with the `safetensors` package, and
`expected.json`: each tensor's pages of 4096 bytes hashed with the `blake3` package over
numpy's little-endian bytes (computed here, not by Tessera).

Run: /work/torchvenv/bin/python gen.py   (needs numpy, safetensors, blake3)
The Rust tests (crates/tessera/tests/all/pages.rs) compare `tessera id --pages 4K` with it.
"""
import json
import pathlib

import blake3
import numpy as np
from safetensors.numpy import save_file

HERE = pathlib.Path(__file__).parent
PAGE = 4096

r = np.random.default_rng(35)
tensors = {
    # 5 pages, the last one partial (20,000 bytes).
    "layers.0.w": r.standard_normal((50, 100)).astype("<f4"),
    # Exactly 2 pages.
    "layers.0.b": r.integers(-1000, 1000, size=(1024,)).astype("<i8"),
    # Under one page.
    "norm": r.standard_normal((7,)).astype("<f2"),
    # No bytes: no pages.
    "empty": np.zeros((0, 3), dtype="<f4"),
}
save_file(tensors, str(HERE / "model.safetensors"), metadata={"made_by": "gen.py"})

expected = {"page_size": PAGE, "tensors": {}}
for name, a in tensors.items():
    b = np.ascontiguousarray(a).tobytes()
    pages = [blake3.blake3(b[i:i + PAGE]).hexdigest() for i in range(0, len(b), PAGE)]
    expected["tensors"][name] = {"bytes": len(b), "pages": pages}
(HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")

"""What a save changed is reported as the CLI prints it (return value and a
ConversionWarning), and the library's hints are spelled as Python's keyword arguments,
not as CLI flags."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tessera
from tessera.numpy import save_file


def test_a_cast_is_returned_and_warned(tmp):
    t = {"w": np.arange(4, dtype=np.float64)}
    with pytest.warns(tessera.ConversionWarning) as w:
        report = tessera.save(t, tmp / "m.gptrs", cast=True)
    assert any('"w"' in n and "f64 -> f32" in n for n in report.notes), report.notes
    assert '"w"' in str(w[0].message) and "f64 -> f32" in str(w[0].message)
    # save_file (safetensors' API: returns None) warns the same way.
    with pytest.warns(tessera.ConversionWarning, match="f64 -> f32"):
        save_file(t, tmp / "n.gptrs", cast=True)
    # Without a change, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = tessera.save({"w": np.arange(4, dtype=np.float32)}, tmp / "o.safetensors")
    assert report.notes == []


def test_hints_name_python_keywords_not_cli_flags(tmp):
    t = {"w": np.arange(4, dtype=np.float64)}
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.save(t, tmp / "m.gptrs")
    msg = str(e.value)
    assert "cast=True" in msg and "--cast" not in msg, msg

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


def test_every_refusal_comes_at_once_with_structured_hints(tmp):
    # Seven f64 tensors, an i64 one and metadata: a GPTRS tensor archive holds none of
    # them; one error lists them all, grouped, and carries the hints as data.
    t = {f"d{i}": np.zeros(2, dtype=np.float64) for i in range(7)}
    t["n"] = np.zeros(2, dtype=np.int64)
    t["ok"] = np.zeros(2, dtype=np.float32)
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.save(t, tmp / "m.gptrsten", metadata={"author": "me"})
    err = e.value
    assert err.hints == ["cast", "drop_metadata"], err.hints
    assert len(err.refusals) == 9
    assert [r[0] for r in err.refusals if r[0]] == [f"d{i}" for i in range(7)] + ["n"]
    assert (None, err.refusals[-1][1], "drop_metadata") == err.refusals[-1]
    msg = str(err)
    assert "7 tensors are f64" in msg and "and 2 more" in msg, msg
    assert "use cast=True" in msg and "use drop_metadata=True" in msg, msg
    assert "--" not in msg, msg
    # With both allowed it is written, and every change reported.
    with pytest.warns(tessera.ConversionWarning):
        report = tessera.save(t, tmp / "m.gptrsten", metadata={"author": "me"}, cast=True, drop_metadata=True)
    assert sum(n.startswith("cast ") for n in report.notes) == 8, report.notes


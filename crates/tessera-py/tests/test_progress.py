"""``progress=``: a callable gets ``(done_bytes, total_bytes)`` in the tensors' dense
bytes — ``done`` never going back, ending at ``total``, ``total`` the arrays' own
``nbytes`` summed — on save, convert, File.convert, numpy.load_file and File.verify
(whose checks run on several threads); ``progress=True`` prints a plain line when
stderr is not a terminal; nothing is printed without it; a callable that raises stops
a write (no file left) and is raised after a verify."""
from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera.numpy import load_file, save_file


def tensors():
    # Different sizes and dtypes, so that a wrong element size shows in the sums.
    t = {f"w{i}": np.arange(1000 * (i + 1), dtype=np.float32) for i in range(5)}
    t["h"] = np.ones((30, 7), dtype=np.float16)
    t["d"] = np.zeros(17, dtype=np.float64)
    return t


def total(t):
    return sum(a.nbytes for a in t.values())


def recorder():
    calls = []
    return calls, lambda done, tot: calls.append((done, tot))


def check(calls, want, at_least=2):
    assert len(calls) >= at_least, calls
    done = [d for d, _ in calls]
    assert done == sorted(done), calls
    assert all(n == want for _, n in calls), (want, calls)
    assert calls[-1] == (want, want), calls


def test_writes_and_loads_report_their_tensors(tmp):
    t = tensors()
    calls, cb = recorder()
    tessera.save(t, tmp / "m.zt", progress=cb)
    check(calls, total(t), at_least=len(t))
    calls.clear()
    save_file(t, tmp / "m.safetensors", progress=cb)
    check(calls, total(t), at_least=len(t))
    calls.clear()
    tessera.convert(tmp / "m.zt", tmp / "c.safetensors", progress=cb)
    check(calls, total(t), at_least=len(t))
    calls.clear()
    with tessera.open(tmp / "m.safetensors") as f:
        f.convert(tmp / "c.fold", progress=cb)
    check(calls, total(t), at_least=len(t))
    calls.clear()
    d = load_file(tmp / "c.fold", progress=cb)
    assert sorted(d) == sorted(t)
    assert all(np.array_equal(d[k], t[k]) for k in t)
    # All in one batch of under 64 MiB: one call.
    check(calls, total(t), at_least=1)


@pytest.mark.filterwarnings("ignore::tessera.ConversionWarning")  # GGUF without an architecture
@pytest.mark.parametrize("suffix", [".zt", ".fold", ".aero", ".wtxt", ".safetensors", ".npz", ".gguf"])
def test_verify_reports_every_tensor(tmp, suffix):
    t = tensors()
    path = tmp / f"m{suffix}"
    tessera.save(t, path)
    calls, cb = recorder()
    with tessera.open(path) as f:
        report = f.verify(progress=cb)
        assert report.ok, report
        assert report == f.verify(), "the hook changed the report"
        assert sum(i["nbytes"] for i in f.tensor_infos()) == total(t)
    check(calls, total(t))


def test_verify_of_many_chunks_calls_one_at_a_time(tmp):
    # FOLD checks its chunks on several threads; the calls still never go back.
    t = {f"t{i:03}": np.full(4096 + i, i, dtype=np.float32) for i in range(120)}
    tessera.save(t, tmp / "m.fold")
    calls, cb = recorder()
    assert tessera.open(tmp / "m.fold").verify(progress=cb).ok
    check(calls, total(t), at_least=len(t))


def test_true_prints_a_line_off_a_terminal_and_nothing_without(tmp, capsys):
    t = tensors()
    capsys.readouterr()
    tessera.save(t, tmp / "n.zt", progress=True)
    err = capsys.readouterr().err
    assert "writing: " in err and "MiB/s" in err, err
    tessera.open(tmp / "n.zt").verify(progress=True)
    err = capsys.readouterr().err
    assert "verifying: " in err and "MiB/s" in err, err
    tessera.save(t, tmp / "o.zt")
    tessera.open(tmp / "o.zt").verify()
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress"):
        tessera.save(t, tmp / "p.zt", progress="yes")


def test_a_callable_that_raises(tmp):
    t = tensors()

    def boom(done, tot):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        tessera.save(t, tmp / "p.zt", progress=boom)
    assert not (tmp / "p.zt").exists()
    tessera.save(t, tmp / "q.zt")
    calls = []

    def once(done, tot):
        calls.append(done)
        raise RuntimeError("stop verifying")

    with pytest.raises(RuntimeError, match="stop verifying"):
        tessera.open(tmp / "q.zt").verify(progress=once)
    assert len(calls) == 1, calls

"""Errors: each Rust error kind raises its exception class, with context attributes;
hostile files raise, never crash."""
from __future__ import annotations

import errno

import numpy as np
import pytest

import tessera

from conftest import ROUNDTRIP, ext


def write(fmt, tmp, **opts):
    path = tmp / f"m.{ext(fmt)}"
    tessera.save({"w": np.arange(64, dtype=np.float32), "b": np.ones(3, dtype=np.float32)}, path, **opts)
    return path


def test_unknown_format(tmp):
    p = tmp / "x.bin"
    p.write_bytes(b"definitely not a tensor file")
    with pytest.raises(tessera.UnknownFormatError) as e:
        tessera.open(p)
    assert isinstance(e.value, tessera.FormatError)
    assert e.value.kind == "unknown format"
    assert "unknown format" in str(e.value)


def test_missing_file_is_an_oserror(tmp):
    with pytest.raises(OSError) as e:
        tessera.open(tmp / "nope.safetensors")
    assert isinstance(e.value, tessera.IoError)
    assert e.value.kind == "io"


def test_empty_file(tmp):
    p = tmp / "empty"
    p.write_bytes(b"")
    with pytest.raises(tessera.TesseraError):
        tessera.open(p)


def test_missing_tensor_is_a_keyerror(fmt, tmp):
    f = tessera.open(write(fmt, tmp))
    with pytest.raises(KeyError):
        f["nope"]
    with pytest.raises(tessera.NotFoundError):
        f.get_tensor("nope")
    assert "nope" not in f and "w" in f


def test_every_truncation_raises_a_tessera_error(fmt, tmp):
    path = write(fmt, tmp)
    data = path.read_bytes()
    cuts = sorted({0, 1, 7, 8, 9, 16, 32, len(data) // 2, len(data) - 9, len(data) - 8, len(data) - 1} & set(range(len(data))))
    for cut in cuts:
        p = tmp / f"cut{cut}"
        p.write_bytes(data[:cut])
        try:
            f = tessera.open(p)
        except tessera.TesseraError as e:
            assert e.kind in ("malformed", "unknown format", "limit exceeded", "integrity", "unsupported"), (cut, e)
            continue
        # Opening a prefix may succeed only if reading every tensor then fails or the
        # file really is complete without its tail (never a crash).
        try:
            for k in f:
                f[k]
            f.verify()
        except tessera.TesseraError:
            pass


def test_bad_save_arguments(fmt, tmp):
    path = tmp / f"m.{ext(fmt)}"
    with pytest.raises(TypeError, match="unknown save option"):
        tessera.save({"w": np.zeros(2, np.float32)}, path, compresion="zstd")
    with pytest.raises(tessera.InvalidInputError):
        tessera.save({"w": np.array(["a"], dtype=object)}, path)
    with pytest.raises(tessera.InvalidInputError):
        tessera.save({1: np.zeros(2)}, path)
    with pytest.raises(tessera.InvalidInputError, match="unknown format"):
        tessera.save({"w": np.zeros(2, np.float32)}, path, format="nosuchformat")
    with pytest.raises(tessera.InvalidInputError, match="cannot tell the format"):
        tessera.save({"w": np.zeros(2, np.float32)}, tmp / "noext")
    with pytest.raises(tessera.InvalidInputError):
        tessera.save({"w": np.zeros(2, np.float32)}, path, compression="lz4")
    with pytest.raises(TypeError):
        tessera.save({"w": np.zeros(2, np.float32)}, path, metadata={"k": object()})
    assert not path.exists()


def test_failed_save_leaves_the_old_file(fmt, tmp):
    path = write(fmt, tmp)
    before = path.read_bytes()
    with pytest.raises(tessera.TesseraError):
        tessera.save({"w": np.zeros(2, np.float32)}, path, compression="zstd:notanumber")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp.iterdir()) == [path.name]


def test_unsupported_framework(fmt, tmp):
    with pytest.raises(tessera.UnsupportedError):
        tessera.safe_open(write(fmt, tmp), framework="flax")


def test_corrupted_tensor_fails_verify_with_digests(tmp):
    fmts = [f for f in ROUNDTRIP if f["name"] == "ztensor"]
    if not fmts:
        pytest.fail("the ztensor format is not merged yet")
    path = write(fmts[0], tmp, digests="sha256")
    f = tessera.open(path)
    assert f.verify().ok
    off = f.tensor_info("w")["storage"]["offset"]
    del f
    data = bytearray(path.read_bytes())
    data[off + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    f = tessera.open(path)
    r = f.verify()
    assert not r.ok and not bool(r)
    bad = r.failures
    assert any('"w"' in c.subject for c in bad), r
    assert all('"b"' not in c.subject for c in bad)
    with pytest.raises(tessera.IntegrityError):
        r.raise_for_failure()


def test_a_missing_file_is_a_filenotfounderror_and_a_missing_tensor_a_keyerror(tmp):
    # Issue 30 §5: a missing file (or remote object) is FileNotFoundError, on every
    # path that opens one; a missing tensor name stays a KeyError.
    import tessera.numpy as tnp

    missing = tmp / "nope.zt"
    for call in (
        lambda: tessera.open(missing),
        lambda: tnp.load_file(missing),
        lambda: tessera.safe_open(missing, "np"),
        lambda: tessera.convert(missing, tmp / "out.safetensors"),
        lambda: tessera.id(missing),
    ):
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert isinstance(e.value, tessera.TesseraError) and not isinstance(e.value, KeyError)
        assert e.value.errno == errno.ENOENT and str(missing) in str(e.value)
    tessera.save({"w": np.zeros(2, np.float32)}, tmp / "m.zt")
    with pytest.raises(KeyError) as e:
        tessera.open(tmp / "m.zt")["nope"]
    assert not isinstance(e.value, FileNotFoundError)

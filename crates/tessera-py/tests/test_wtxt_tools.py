"""tessera.wtxt: the CLI's WTXT verbs from Python (delta, apply, sign, finalize,
encrypt, decrypt), checked by reading what they write."""

import os

import numpy as np
import pytest

import tessera
import tessera.numpy
import tessera.wtxt
from tessera.errors import IntegrityError, InvalidInputError

SEED = bytes(range(32))


def arrays(shift=0.0):
    rng = np.random.default_rng(7)
    return {
        "w": (rng.standard_normal((64, 32)) + shift).astype(np.float32),
        "b": np.arange(10, dtype=np.int64),
    }


def save(path, a, **kw):
    tessera.save(a, str(path), timestamp="2026-01-01T00:00:00Z", **kw)


def test_finalize_writes_the_wsum_the_streaming_writer_wrote(tmp_path):
    p = tmp_path / "s.wtxt"
    save(p, arrays(), streaming=True, sign_key=SEED, hmac_key=b"k")
    wsum = tmp_path / "s.wtxt.wsum"
    written = wsum.read_bytes()
    wsum.unlink()
    assert not tessera.open(str(p)).verify().ok  # unfinalized
    out = tessera.wtxt.finalize(p, sign_key=SEED, hmac_key=b"k")
    assert out == str(wsum)
    assert wsum.read_bytes() == written
    report = tessera.open(str(p)).verify(public_key=tessera.public_key(SEED), hmac_key=b"k")
    assert report.ok, report
    # Once: the WSUM it wrote is not replaced.
    with pytest.raises(InvalidInputError, match="exists"):
        tessera.wtxt.finalize(p)
    # A wrong HMAC key: the arrays do not authenticate, nothing is written.
    other = tmp_path / "other.wsum"
    with pytest.raises(IntegrityError, match="hmac"):
        tessera.wtxt.finalize(p, out=other, hmac_key=b"wrong")
    assert not other.exists()


def test_finalize_refuses_a_damaged_array(tmp_path):
    p = tmp_path / "s.wtxt"
    save(p, arrays(), streaming=True)
    (tmp_path / "s.wtxt.wsum").unlink()
    lines = p.read_bytes().split(b"\n")
    k = next(i for i, l in enumerate(lines) if l.startswith(b"ch ix=000000")) + 2
    line = bytearray(lines[k])
    line[10] = ord("B") if line[10] == ord("A") else ord("A")
    lines[k] = bytes(line)
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(IntegrityError, match="chunk 000000"):
        tessera.wtxt.finalize(p)
    assert not (tmp_path / "s.wtxt.wsum").exists()


def test_delta_and_apply_rebuild_the_next_generation(tmp_path):
    g1, g2 = tmp_path / "g1.wtxt", tmp_path / "g2.wtxt"
    a1, a2 = arrays(), arrays()
    a2["w"][3, :] += 1.0
    save(g1, a1, generation=1)
    save(g2, a2, generation=2)
    d = tmp_path / "g2.wtxtdelta"
    size = tessera.wtxt.delta(g1, g2, d, with_target_root=True)
    assert size == d.stat().st_size and size < g2.stat().st_size
    out = tmp_path / "rebuilt.wtxt"
    tessera.wtxt.apply(g1, d, out)
    assert out.read_bytes() == g2.read_bytes()
    got = tessera.numpy.load_file(str(out))
    np.testing.assert_array_equal(got["w"], a2["w"])
    # Applied to a base it was not made for: refused.
    with pytest.raises(tessera.errors.TesseraError):
        tessera.wtxt.apply(g2, d, tmp_path / "wrong.wtxt")
    assert not (tmp_path / "wrong.wtxt").exists()


def test_sign_in_place_and_to_a_new_file_with_a_key_file(tmp_path):
    p = tmp_path / "m.wtxt"
    save(p, arrays())
    before = p.read_bytes()
    keyid = tessera.wtxt.sign(p, SEED, out=tmp_path / "signed.wtxt")
    assert len(keyid) == 16 and p.read_bytes() == before
    report = tessera.open(str(tmp_path / "signed.wtxt")).verify(public_key=tessera.public_key(SEED))
    assert report.ok and any(c.layer == "signature" and c.status == "ok" for c in report.checks)
    key = tmp_path / "signer"
    key.write_text("not a key\n")
    with pytest.raises(tessera.errors.TesseraError):
        tessera.wtxt.sign(p, key)  # a file that holds no key is refused
    with pytest.raises(TypeError):
        tessera.wtxt.sign(p, b"short")


def test_encrypt_and_decrypt_with_a_passphrase(tmp_path):
    p = tmp_path / "m.wtxt"
    save(p, arrays())
    enc = tmp_path / "m.wtxt.age"
    tessera.wtxt.encrypt(p, enc, passphrase="correct horse")
    assert b"BEGIN AGE ENCRYPTED FILE" in enc.read_bytes()
    with tessera.open(str(enc), age_passphrase="correct horse") as f:
        np.testing.assert_array_equal(f["b"], np.arange(10))
    plain = tmp_path / "plain.wtxt"
    tessera.wtxt.decrypt(enc, plain, passphrase="correct horse")
    assert plain.read_bytes() == p.read_bytes()
    with pytest.raises(tessera.errors.TesseraError):
        tessera.wtxt.decrypt(enc, tmp_path / "x.wtxt", passphrase="wrong")
    assert not (tmp_path / "x.wtxt").exists()


def test_the_module_is_there_after_import_tessera():
    assert set(tessera.wtxt.__all__) == {"delta", "apply", "sign", "finalize", "encrypt", "decrypt"}
    assert "wtxt" in dir(tessera)


def test_save_encrypts_as_it_writes(tmp_path):
    p = tmp_path / "m.wtxt.age"
    a = arrays()
    tessera.save(a, str(p), format="wtxt", age_passphrase="pw words")
    data = p.read_bytes()
    assert data.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----") and b"WTXT 1" not in data
    with tessera.open(str(p), age_passphrase="pw words") as f:
        np.testing.assert_array_equal(f["w"], a["w"])
    with pytest.raises(tessera.errors.TesseraError):
        tessera.open(str(p))

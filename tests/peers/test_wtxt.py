"""WTXT/Chunks v1.1 against an independent encoder/checker written from the spec
(crates/tessera/tests/data/wtxt/gen.py: hashlib, hmac, base64, crc32c only).

It writes, we read and verify; we write, it re-derives every hash; corruptions are
found where they are; delta/apply, sign, streaming and age go through the CLI.
"""
import base64
import hashlib
import importlib.util
import json
import struct

import pytest

from conftest import ROOT, run

_spec = importlib.util.spec_from_file_location("wtxt_ref", ROOT / "crates/tessera/tests/data/wtxt/gen.py")
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

TS = ["--ts", "2025-10-09T03:12:45Z", "--gen", "123", "--build", "abc123"]


def arrays():
    r = b"".join(struct.pack("<d", (i % 977) * 0.125) for i in range(512 * 64))
    return [
        ("R", "f64", [512, 64], r),
        ("W_base", "u32", [1000], b"".join(struct.pack("<I", i * 7919 & 0xFFFFFFFF) for i in range(1000))),
        ("s", "f32", [], struct.pack("<f", -2.5)),
        ("z", "i8", [0], b""),
    ]


def write_ref(tmp_path, name="ref.wtxt", **kw):
    p = tmp_path / name
    p.write_bytes(ref.encode(arrays(), **kw))
    return p


def raw_public(path):
    """The 32 bytes of a `tessera keygen` public key file (PEM SubjectPublicKeyInfo),
    as `cryptography` reads it."""
    from cryptography.hazmat.primitives import serialization as s

    k = s.load_pem_public_key(path.read_bytes())
    return k.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)


def verify_json(*args):
    p = run("verify", *args, "--json", check=False)
    return p.returncode, json.loads(p.stdout)


def failed(doc):
    return [(c["subject"], c["layer"]) for c in doc["checks"] if c["status"] == "failed"]


def test_reference_signed_file_verifies(tmp_path):
    seed = bytes(range(1, 33))
    p = write_ref(tmp_path, sign_seed=seed)
    (tmp_path / "k.pub").write_text(ref.ed25519_public(seed).hex() + "\n")
    (tmp_path / "k").write_text(seed.hex() + "\n")
    code, doc = verify_json(p, "--public-key", tmp_path / "k.pub")
    assert code == 0 and any(c["layer"] == "signature" and c["status"] == "ok" for c in doc["checks"])
    # Our signer writes the same line (Ed25519 is deterministic).
    plain = write_ref(tmp_path, "plain.wtxt")
    run("wtxt", "sign", plain, "--key", tmp_path / "k")
    assert plain.read_bytes() == p.read_bytes()


def test_reference_files_read_and_verify(tmp_path):
    p = write_ref(tmp_path)
    code, doc = verify_json(p)
    assert code == 0 and doc["ok"], failed(doc)
    layers = {c["layer"] for c in doc["checks"]}
    assert {"chunks", "sha256", "hmac", "sha256_all", "merkle_this", "fastxor"} <= layers
    info = json.loads(run("inspect", p, "--json").stdout)
    got = {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}
    assert got == {n: (d, s) for n, d, s, _ in arrays()}


def test_reference_hmac_with_right_and_wrong_key(tmp_path):
    p = write_ref(tmp_path, key=b"k3y", salt=bytes(range(8)))
    (tmp_path / "k").write_bytes(b"k3y")
    (tmp_path / "bad").write_bytes(b"nope")
    code, doc = verify_json(p, "--hmac-key-file", tmp_path / "k")
    assert code == 0
    assert all(c["status"] == "ok" for c in doc["checks"] if c["layer"] == "hmac")
    code, doc = verify_json(p, "--hmac-key-file", tmp_path / "bad")
    assert code == 1
    assert sum(1 for s, l in failed(doc) if l == "hmac") == 4
    code, doc = verify_json(p)
    assert code == 0
    assert all(c["status"] == "unauthenticated" for c in doc["checks"] if c["layer"] == "hmac")


def test_our_files_pass_the_reference_checker(tmp_path):
    src = write_ref(tmp_path)
    out = tmp_path / "ours.wtxt"
    (tmp_path / "k").write_bytes(b"secret")
    run("convert", src, out, *TS, "--hmac-key-file", tmp_path / "k", "--salt", "0011223344556677")
    vals = ref.check(out.read_bytes(), key=b"secret")
    for n, d, s, raw in arrays():
        assert vals[n] == (d, s, raw)
    # Same arrays, same options: the reference encoder writes the same bytes.
    assert out.read_bytes() == ref.encode(arrays(), key=b"secret", salt=bytes.fromhex("0011223344556677"))
    # Row blocking on request.
    out2 = tmp_path / "rows.wtxt"
    run("convert", src, out2, *TS, "--rows-per-chunk", "100")
    assert "idx rows_per_chunk=100 row_size=512 row_blocking=on" in out2.read_text()
    assert out2.read_bytes() == ref.encode(arrays(), rows_per_chunk=100)


def flip(path, line_no, col):
    lines = path.read_bytes().split(b"\n")
    l = bytearray(lines[line_no - 1])
    l[col] = ord("B") if l[col] == ord("A") else ord("A")
    lines[line_no - 1] = bytes(l)
    path.write_bytes(b"\n".join(lines))


def test_corruption_is_found_at_its_line_and_chunk(tmp_path):
    p = write_ref(tmp_path)
    lines = p.read_text().split("\n")
    ch = next(i for i, l in enumerate(lines) if l.startswith("ch ix=000002 ")) + 1
    flip(p, ch + 3, 20)
    code, doc = verify_json(p)
    assert code == 1
    f = failed(doc)
    assert ('array "R" chunk 000002 (line %d)' % (ch + 3), "parity") in f, f
    assert [x for x in f if "chunk" in x[0]] == [('array "R" chunk 000002 (line %d)' % (ch + 3), "parity")]
    # The intact arrays still extract; salvage reports the lost one.
    info = json.loads(run("inspect", p, "--json", "--salvage").stdout)
    assert sorted(t["name"] for t in info["tensors"]) == ["W_base", "s", "z"]


def test_strict_armor_errors_name_the_line(tmp_path):
    p = write_ref(tmp_path)
    lines = p.read_text().split("\n")
    lines[1] = lines[1].replace(" host=", "  host=")
    p.write_text("\n".join(lines))
    r = run("inspect", p, check=False)
    assert r.returncode == 4 and "line 2" in r.stderr + r.stdout


def test_delta_apply_sign_cli(tmp_path):
    base = write_ref(tmp_path, "base.wtxt")
    arrs = arrays()
    rb = bytearray(arrs[0][3])
    rb[300 * 512:300 * 512 + 8] = struct.pack("<d", 42.0)
    arrs[0] = ("R", "f64", [512, 64], bytes(rb))
    target = tmp_path / "target.wtxt"
    target.write_bytes(ref.encode(arrs, gen=124))
    d = tmp_path / "d.wtxtdelta"
    # This target does not chain from the base (merkle_prev is zero): only the
    # extension, which carries the target's root, rebuilds it byte for byte.
    run("wtxt", "delta", base, target, "-o", d, "--with-target-root")
    text = d.read_text()
    assert text.count("\nch ") == 1 and "enddelta" in text
    out = tmp_path / "out.wtxt"
    run("wtxt", "apply", base, d, "-o", out)
    assert out.read_bytes() == target.read_bytes()
    r = run("wtxt", "apply", target, d, "-o", tmp_path / "x.wtxt", check=False)
    assert r.returncode != 0 and "another base" in r.stderr
    run("keygen", "-o", tmp_path / "key")
    run("wtxt", "sign", out, "--key", tmp_path / "key")
    code, doc = verify_json(out, "--public-key", tmp_path / "key.pub")
    assert code == 0 and any(c["layer"] == "signature" and c["status"] == "ok" for c in doc["checks"])
    run("keygen", "-o", tmp_path / "other")
    code, doc = verify_json(out, "--public-key", tmp_path / "other.pub")
    assert code == 1 and ("sign (line 5)", "signature") in failed(doc)
    # The reference checker verifies our signature (pure-Python Ed25519, RFC 8032) over
    # exactly the four header lines, with keyid = SHA-256(public)[:8].
    public = raw_public(tmp_path / "key.pub")
    assert ref.check(out.read_bytes(), public=public)["R"][2] == bytes(rb)
    other = raw_public(tmp_path / "other.pub")
    with pytest.raises(AssertionError):
        ref.check(out.read_bytes(), public=other)


def test_streaming_wsum(tmp_path):
    src = write_ref(tmp_path)
    out = tmp_path / "s.wtxt"
    run("convert", src, out, *TS, "--streaming")
    wsum = tmp_path / "s.wtxt.wsum"
    line = wsum.read_text()
    assert line.startswith("WSUM 1 sha256_all=") and line.endswith("\n")
    assert out.read_text().split("\n")[3].startswith("root_pending sha256_all=" + "0" * 64)
    # The WSUM holds the same root as the reference encoder's.
    root = ref.encode(arrays()).decode().split("\n")[3]
    assert line.rstrip("\n") == "WSUM 1 " + root[len("root "):]
    assert verify_json(out)[0] == 0
    assert verify_json(wsum)[0] == 0
    # Signed: the signature covers the WSUM line's bytes before " sign=" (RESOLUTIONS 14).
    run("keygen", "-o", tmp_path / "key")
    run("convert", src, out, *TS, "--streaming", "--sign-key", tmp_path / "key")
    line = wsum.read_text().rstrip("\n")
    head, tail = line.split(" sign=")
    sig_b64, keyid = tail.split(" keyid=")
    public = raw_public(tmp_path / "key.pub")
    assert keyid == hashlib.sha256(public).hexdigest()[:16]

    assert ref.ed25519_verify(public, head.encode(), base64.b64decode(sig_b64, validate=True))
    assert verify_json(out, "--public-key", tmp_path / "key.pub")[0] == 0
    wsum.unlink()
    code, doc = verify_json(out)
    assert code == 1 and any("unfinalized" in (c["detail"] or "") for c in doc["checks"])


def test_age_passphrase_and_identity(tmp_path):
    src = write_ref(tmp_path)
    (tmp_path / "pass").write_text("correct horse\n")
    enc = tmp_path / "p.wtxt.age"
    run("wtxt", "encrypt", src, "-o", enc, "--passphrase-file", tmp_path / "pass")
    assert enc.read_text().startswith("-----BEGIN AGE ENCRYPTED FILE-----")
    assert verify_json(enc, "--passphrase-file", tmp_path / "pass")[0] == 0
    dec = tmp_path / "plain.wtxt"
    run("wtxt", "decrypt", enc, "-o", dec, "--passphrase-file", tmp_path / "pass")
    assert dec.read_bytes() == src.read_bytes()
    (tmp_path / "wrong").write_text("nope\n")
    assert run("verify", enc, "--passphrase-file", tmp_path / "wrong", check=False).returncode != 0


@pytest.mark.skipif(__import__("shutil").which("git") is None, reason="git not installed")
def test_git_diff_of_one_changed_row_is_one_chunk(tmp_path):
    import subprocess
    m = bytearray(b"".join(struct.pack("<d", i * 0.001) for i in range(4096 * 64)))
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q")
    (repo / ".gitattributes").write_text("*.wtxt text eol=lf diff=wtxt\n")
    src = tmp_path / "src.wtxt"
    src.write_bytes(ref.encode([("R", "f64", [4096, 64], bytes(m))]))
    run("convert", src, repo / "m.wtxt", *TS)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    m[2000 * 512 + 16:2000 * 512 + 24] = struct.pack("<d", 7.0)
    src.write_bytes(ref.encode([("R", "f64", [4096, 64], bytes(m))]))
    run("convert", src, repo / "m.wtxt", *TS)
    added, removed, _ = git("diff", "--numstat").split("\t")
    # Row 2000 lives in chunk 31 (64 rows per chunk); a changed 8-byte value touches a
    # line or two of it, plus the arr line (sha256) and the root line.
    assert int(added) == int(removed) and 3 <= int(added) <= 6, (added, removed)
    hunks = [l for l in git("diff", "-U0").split("\n") if l.startswith("@@")]
    text = (repo / "m.wtxt").read_text().split("\n")
    ch = next(i for i, l in enumerate(text) if l.startswith("ch ix=000031 ")) + 1
    for h in hunks:
        start = int(h.split("+")[1].split(",")[0].split(" ")[0])
        assert start in (4, 5) or ch <= start <= ch + 576, h


def test_reference_parity_matches_the_spec_sample():
    # The seed's sample line; MANIFEST.md gives its parity nibble: a.
    line = b"TWFuIGlzIGRpc3Rpbmd1aXNoZWQsIG5vdCBvbmx5IGJ5IGhpcyByZWFzb24sIGJ1dCBieSB0aGlz"
    assert ref.parity(line) == "a"
    assert base64.b64decode(line).startswith(b"Man is distinguished")


# --- DELTA v2 as RESOLUTIONS item 15 defines it, against an encoder written from it ---


def _blocks(text):
    """{array name: (arr line, [chunk block text])} of a WTXT snapshot, parsed here."""
    out, cur, lines, i = {}, None, text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("arr "):
            name = line.split()[1][len("name="):]
            cur = out[name] = (line, [])
        elif line.startswith("ch "):
            n = int(dict(f.split("=", 1) for f in line.split()[1:])["lines"])
            cur[1].append("\n".join(lines[i:i + n + 2]) + "\n")  # ch, body, endch
            i += n + 1
        i += 1
    return out


def ref_delta(base: bytes, target: bytes) -> bytes:
    """An independent DELTA v2 encoder: the header with the base's sha256_all, the
    target's meta line, one bare `arr name=` block per array with changed chunks, then
    `enddelta` (RESOLUTIONS 15)."""
    b, t = base.decode(), target.decode()
    root = dict(f.split("=", 1) for f in b.split("\n")[3].split()[1:])
    out = ["WTXT-DELTA 2 base_sha256_all=" + root["sha256_all"], t.split("\n")[1]]
    bb, tb = _blocks(b), _blocks(t)
    assert list(bb) == list(tb)
    for name in tb:
        changed = [y for x, y in zip(bb[name][1], tb[name][1]) if x != y]
        if changed:
            out.append("arr name=" + name)
            out.append("".join(changed).rstrip("\n"))
            out.append("endarr")
    out.append("enddelta")
    return ("\n".join(out) + "\n").encode()


def conforming(delta: bytes) -> bool:
    """Every line is one the resolution's grammar allows, in its order."""
    lines = delta.decode().split("\n")[:-1]
    ok = lines[0].startswith("WTXT-DELTA 2 base_sha256_all=") and lines[1].startswith("meta ")
    state = "top"
    for line in lines[2:]:
        if state == "top":
            if line == "enddelta":
                state = "end"
            elif line.startswith("arr name=") and " " not in line[len("arr "):]:
                state = "arr"
            else:
                return False
        elif state == "arr":
            if line == "endarr":
                state = "top"
            elif line.startswith("ch "):
                state = "ch"
            else:
                return False
        elif state == "ch":
            if line == "endch":
                state = "arr"
        else:
            return False
    return ok and state == "end"


def _chained(tmp_path):
    arrs = arrays()
    base = ref.encode(arrs, rows_per_chunk=64)
    root = dict(f.split("=", 1) for f in base.decode().split("\n")[3].split()[1:])
    rb = bytearray(arrs[0][3])
    rb[300 * 512:300 * 512 + 8] = struct.pack("<d", 42.0)
    arrs[0] = ("R", "f64", [512, 64], bytes(rb))
    target = ref.encode(arrs, gen=124, rows_per_chunk=64, merkle_prev=bytes.fromhex(root["merkle_this"]))
    (tmp_path / "base.wtxt").write_bytes(base)
    (tmp_path / "target.wtxt").write_bytes(target)
    return tmp_path / "base.wtxt", tmp_path / "target.wtxt"


def test_conforming_delta_both_ways(tmp_path):
    base, target = _chained(tmp_path)
    theirs = ref_delta(base.read_bytes(), target.read_bytes())
    assert conforming(theirs) and theirs.count(b"\nch ") == 1
    # Their delta applied by us gives their target, byte for byte.
    (tmp_path / "theirs.wtxtdelta").write_bytes(theirs)
    out = tmp_path / "out.wtxt"
    run("wtxt", "apply", base, tmp_path / "theirs.wtxtdelta", "-o", out)
    assert out.read_bytes() == target.read_bytes()
    ref.check(out.read_bytes())
    # Our default delta is the conforming one: the same bytes as theirs.
    ours = tmp_path / "ours.wtxtdelta"
    run("wtxt", "delta", base, target, "-o", ours)
    assert conforming(ours.read_bytes())
    assert ours.read_bytes() == theirs
    # The extension is opt-in and not conforming.
    ext = tmp_path / "ext.wtxtdelta"
    run("wtxt", "delta", base, target, "-o", ext, "--with-target-root")
    assert not conforming(ext.read_bytes())
    assert b"\ncap " in ext.read_bytes() and b"\nroot " in ext.read_bytes()
    run("wtxt", "apply", base, ext, "-o", out)
    assert out.read_bytes() == target.read_bytes()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.replace(b"enddelta\n", b""),  # cut short
        lambda d: d.replace(b"WTXT-DELTA 2", b"WTXT-DELTA 3"),  # another version
        lambda d: d.replace(b"arr name=R\n", b"arr name=Q\n"),  # an array the base lacks
        lambda d: d.replace(b"ch ix=000004", b"ch ix=000005", 1),  # ix/off/len not the base's
        lambda d: d.replace(b"endarr\n", b"", 1),  # no endarr
        lambda d: d + b"trailing\n",  # text after enddelta
        lambda d: d.replace(b"base_sha256_all=", b"base_sha256_all=00", 1),  # bad hex width
    ],
)
def test_malformed_conforming_deltas_are_refused(tmp_path, mutate):
    base, target = _chained(tmp_path)
    theirs = ref_delta(base.read_bytes(), target.read_bytes())
    assert b"ch ix=000004" in theirs
    bad = tmp_path / "bad.wtxtdelta"
    bad.write_bytes(mutate(theirs))
    r = run("wtxt", "apply", base, bad, "-o", tmp_path / "x.wtxt", check=False)
    assert r.returncode != 0, r.stdout
    assert not (tmp_path / "x.wtxt").exists()

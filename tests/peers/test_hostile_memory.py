"""Hostile headers claiming huge counts and sizes never make peak memory exceed a small
bound, and no input makes a reader loop forever. Each file is crafted here with
`struct` from the specs (not by our writer); peak RSS of the `tessera` child is read
with os.wait4.
"""
import json
import os
import struct
import subprocess
import time

import pytest

from conftest import TESSERA

RSS_LIMIT_MB = 200
TIME_LIMIT_S = 20


def cbor_map(d):
    import cbor2
    return cbor2.dumps(d)


def hostile_files():
    big = 1 << 60
    files = {}
    # safetensors: header length 2^60.
    files["st_huge_header.safetensors"] = struct.pack("<Q", big) + b"{}"
    # safetensors: a tensor claiming 2^40 elements.
    hdr = json.dumps({"w": {"dtype": "F32", "shape": [1 << 20, 1 << 20], "data_offsets": [0, 1 << 42]}}).encode()
    files["st_huge_tensor.safetensors"] = struct.pack("<Q", len(hdr)) + hdr + b"\0" * 16
    # zTensor: manifest size 2^60.
    files["zt_huge_manifest.zt"] = b"ZTEN1000" + b"\0" * 56 + struct.pack("<Q", big)
    # zTensor: zstd tensor declaring 2^40 elements, with a tiny frame that claims no size.
    import zstandard
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 4096)
    body = b"ZTEN1000" + b"\0" * 56 + frame
    body += b"\0" * (-len(body) % 64)
    man = cbor_map({"version": "1.0", "generator": "x", "attributes": {},
                    "tensors": {"w": {"dtype": "float32", "shape": [1 << 38], "format": "dense",
                                      "components": {"data": {"offset": 64, "length": len(frame), "encoding": "zstd"}}}}})
    files["zt_zstd_bomb_claim.zt"] = body + man + struct.pack("<Q", len(man))
    # FOLD: index length just under the 100 MiB cap pointing past EOF.
    files["fold_huge_index.fold"] = b"FOLDv1\0\0" + struct.pack(">IIQQ", 28, 0, 28, (100 << 20) - 1)
    # AERO: huge entry count and string table.
    files["aero_huge_counts.aero"] = b"AERO" + struct.pack("<HH", 1, 0) + struct.pack("<QQQQ", 96, 1 << 40, 1 << 40, 1 << 40) + b"\0" * 56
    # GPTRS: tensor count 2^32 - 1.
    files["gptrs_huge_count.gptrs"] = b"GPTRSCHK" + struct.pack("<I", 2) + struct.pack("<I", 2) + b"{}" + struct.pack("<I", 0xFFFFFFFF)
    files["gptrsten_huge_count.gptrsten"] = b"GPTRSTEN" + struct.pack("<I", 2) + struct.pack("<I", 0xFFFFFFFF)
    # GGUF: 2^60 tensors and KVs in 43 bytes.
    files["gguf_huge_counts.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, big, big) + b"\0" * 19
    # GGUF: one KV string claiming 2^60 bytes.
    files["gguf_huge_string.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", big) + b"k"
    # GGUF: nested array claiming 2^40 elements.
    files["gguf_huge_array.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 9, 1 << 40)
    # npy: shape (2^40,).
    h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    files["npy_huge_shape.npy"] = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + b"\0" * 64
    # WTXT: a header claiming a 2^39-byte array.
    files["wtxt_huge_array.wtxt"] = b"WTXT 1\n" + b"arr name=w dtype=f32 shape=137438953472 bytes=549755813888\n"
    return files


@pytest.mark.parametrize("name,data", sorted(hostile_files().items()))
@pytest.mark.parametrize("verb", ["inspect", "verify", "convert"])
def test_hostile_header_is_refused_with_bounded_memory(tmp_path, name, data, verb):
    p = tmp_path / name
    p.write_bytes(data)
    args = [TESSERA, verb, str(p)]
    if verb == "convert":
        args.append(str(tmp_path / "out.safetensors"))
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + TIME_LIMIT_S
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            pytest.fail(f"{verb} {name}: still running after {TIME_LIMIT_S}s")
        time.sleep(0.01)
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    assert code in (1, 3, 4), f"{verb} {name}: exit {code}: {err}"
    assert "panicked" not in err, err
    rss_mb = ru.ru_maxrss / 1024
    assert rss_mb < RSS_LIMIT_MB, f"{verb} {name}: peak RSS {rss_mb:.0f} MB"
    assert not (tmp_path / "out.safetensors").exists()

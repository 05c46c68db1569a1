#!/usr/bin/env python3
"""Generates the GGUF test vectors with the reference peer, gguf-py (`pip install
gguf==0.19.0`; numpy). Run from this directory: `python gen.py`.

Files (all written by gguf.GGUFWriter, except peer_v2.gguf which is peer_small.gguf with
the version field patched to 2 — v2 and v3 share the layout):

- peer_all.gguf: every metadata value type (scalars, strings, arrays of every item type,
  nested arrays, an array of arrays of differing item types) and a tensor of every ggml
  type gguf-py knows: the plain ones from numpy, the quantized ones packed (real
  quantization where gguf.quants implements it, deterministic pseudo-random blocks
  otherwise), plus a scalar, a zero-size and a 3-D tensor.
- peer_align64.gguf: general.alignment = 64.
- peer_small.gguf / peer_v2.gguf: two tensors, a few keys (for the every-prefix test).
- peer_notensors.gguf: metadata only.
- peer_be.gguf: a big-endian file (GGUFWriter(endianess=BIG)) with plain, BF16 and
  Q8_0 tensors and numeric keys; peer_be_as_le.gguf: the same inputs, little-endian
  (what rewriting peer_be.gguf must give).

manifest.json lists, per file, each key with the GGUF type we expect Tessera to
annotate (written by hand from the types passed below) and its value as JSON (u8
arrays as {"$bytes": hex}, f32 as the exact double of the f32), and each tensor with
its ggml type name, row-major shape, byte size, absolute data offset (from
gguf.GGUFReader) and the SHA-256 of its bytes.
"""
import hashlib
import json

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as T
from gguf.constants import GGML_QUANT_SIZES

rng = np.random.default_rng(1234)
MANIFEST = {}


def f32(x):
    return float(np.float32(x))


def kvs_all():
    # (key, value, vtype, sub_type, expected annotation, expected JSON value)
    return [
        ("test.u8", 200, T.UINT8, None, "u8", 200),
        ("test.i8", -100, T.INT8, None, "i8", -100),
        ("test.u16", 65535, T.UINT16, None, "u16", 65535),
        ("test.i16", -32768, T.INT16, None, "i16", -32768),
        ("test.u32", 4294967295, T.UINT32, None, "u32", 4294967295),
        ("test.i32", -2147483648, T.INT32, None, "i32", -2147483648),
        ("test.f32", 0.1, T.FLOAT32, None, "f32", f32(0.1)),
        ("test.bool_t", True, T.BOOL, None, "bool", True),
        ("test.bool_f", False, T.BOOL, None, "bool", False),
        ("test.str", "héllo, wörld ✓", T.STRING, None, "str", "héllo, wörld ✓"),
        ("test.empty_str", "", T.STRING, None, "str", ""),
        ("test.u64", 18446744073709551615, T.UINT64, None, "u64", 18446744073709551615),
        ("test.i64", -9223372036854775808, T.INT64, None, "i64", -9223372036854775808),
        ("test.f64", 1e-300, T.FLOAT64, None, "f64", 1e-300),
        ("test.arr_u8", [0, 1, 255], T.ARRAY, T.UINT8, "[u8]", {"$bytes": "0001ff"}),
        ("test.arr_i8", [-1, 2], T.ARRAY, T.INT8, "[i8]", [-1, 2]),
        ("test.arr_u16", [1, 65535], T.ARRAY, T.UINT16, "[u16]", [1, 65535]),
        ("test.arr_i16", [-5, 5], T.ARRAY, T.INT16, "[i16]", [-5, 5]),
        ("test.arr_u32", [7], T.ARRAY, T.UINT32, "[u32]", [7]),
        ("test.arr_i32", [-7, 0, 7], T.ARRAY, T.INT32, "[i32]", [-7, 0, 7]),
        ("test.arr_f32", [0.5, -1.25, 3.3], T.ARRAY, T.FLOAT32, "[f32]", [0.5, -1.25, f32(3.3)]),
        ("test.arr_bool", [True, False, True], T.ARRAY, T.BOOL, "[bool]", [True, False, True]),
        ("test.arr_str", ["<s>", "", "▁the"], T.ARRAY, T.STRING, "[str]", ["<s>", "", "▁the"]),
        ("test.arr_u64", [2**64 - 1], T.ARRAY, T.UINT64, "[u64]", [2**64 - 1]),
        ("test.arr_i64", [-(2**63)], T.ARRAY, T.INT64, "[i64]", [-(2**63)]),
        ("test.arr_f64", [0.1, 2.5], T.ARRAY, T.FLOAT64, "[f64]", [0.1, 2.5]),
        ("test.nested", [[1, 2], [3]], T.ARRAY, None, "[[i32]]", [[1, 2], [3]]),
        ("test.nested2", [[["a"]], [["b", "c"]]], T.ARRAY, None, "[[[str]]]", [[["a"]], [["b", "c"]]]),
        ("test.mixed_nested", [[1], ["x"], [0.5]], T.ARRAY, None, ["[i32]", "[str]", "[f32]"], [[1], ["x"], [0.5]]),
    ]


def packed(qtype, shape):
    """Packed bytes of a tensor of `shape` (row-major, last dim a multiple of the block)."""
    block, tsize = GGML_QUANT_SIZES[qtype]
    x = rng.standard_normal(shape).astype(np.float32)
    try:
        return gguf.quants.quantize(x, qtype)
    except (NotImplementedError, gguf.quants.QuantError, AttributeError, KeyError, TypeError):
        byte_shape = (*shape[:-1], shape[-1] // block * tsize)
        return rng.integers(0, 256, size=byte_shape, dtype=np.uint8)


def write(path, kvs, tensors, alignment=None, record=True, big=False):
    endian = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(path, "tessera-test", endianess=endian)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub, _, _ in kvs:
        w.add_key_value(key, value, vtype, sub_type=sub)
    for name, arr, raw in tensors:
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if not record:
        return
    r = gguf.GGUFReader(path)
    meta = [["general.architecture", "str", "tessera-test"]]
    if alignment is not None:
        meta.append(["general.alignment", "u32", alignment])
    meta += [[k, ann, val] for k, _, _, _, ann, val in kvs]
    ts = []
    for t in r.tensors:
        start = t.data_offset
        raw_bytes = bytes(r.data[start:start + t.n_bytes])
        if big and t.data.dtype.itemsize > 1:
            # Our canonical bytes are little-endian.
            raw_bytes = t.data.astype(t.data.dtype.newbyteorder("<")).tobytes()
        ts.append({
            "name": t.name,
            "ggml_type": t.tensor_type.name,
            "ggml_type_id": int(t.tensor_type),
            "shape": [int(d) for d in reversed(t.shape.tolist())],
            "nbytes": int(t.n_bytes),
            "offset": int(start),
            "sha256": hashlib.sha256(raw_bytes).hexdigest(),
        })
    MANIFEST[path] = {"alignment": int(r.alignment), "metadata": meta, "tensors": ts}


def main():
    all_tensors = [
        ("f32", np.arange(12, dtype=np.float32).reshape(3, 4) / 7, None),
        ("f16", (np.arange(6, dtype=np.float16) - 2.5).reshape(2, 3), None),
        ("f64", np.array([1e300, -0.0, np.pi]), None),
        ("i8", np.array([-128, 0, 127], dtype=np.int8), None),
        ("i16", np.array([[-32768], [32767]], dtype=np.int16), None),
        ("i32", np.arange(-3, 3, dtype=np.int32).reshape(1, 2, 3), None),
        ("i64", np.array([-(2**63), 2**63 - 1], dtype=np.int64), None),
        ("scalar", np.array(2.5, dtype=np.float32), None),
        ("empty", np.zeros((0, 5), dtype=np.float32), None),
    ]
    for qtype in GGML_QUANT_SIZES:
        if qtype in (Q.F32, Q.F16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64):
            continue
        block, _ = GGML_QUANT_SIZES[qtype]
        shape = (2, block) if block > 1 else (2, 3)
        all_tensors.append((f"q.{qtype.name.lower()}", packed(qtype, shape), qtype))
    write("peer_all.gguf", kvs_all(), all_tensors)

    small_kvs = [
        ("test.u32", 5, T.UINT32, None, "u32", 5),
        ("test.arr", ["a", "b"], T.ARRAY, T.STRING, "[str]", ["a", "b"]),
    ]
    small_tensors = [
        ("a", np.arange(5, dtype=np.float32), None),
        ("b.q8", packed(Q.Q8_0, (1, 32)), Q.Q8_0),
    ]
    write("peer_align64.gguf", small_kvs, small_tensors, alignment=64)
    write("peer_small.gguf", small_kvs, small_tensors)
    write("peer_notensors.gguf", small_kvs, [])

    be_kvs = [
        ("test.u16", 0x1234, T.UINT16, None, "u16", 0x1234),
        ("test.i32", -5, T.INT32, None, "i32", -5),
        ("test.f32", 1.5, T.FLOAT32, None, "f32", 1.5),
        ("test.u64", 2**40 + 1, T.UINT64, None, "u64", 2**40 + 1),
        ("test.f64", -0.1, T.FLOAT64, None, "f64", -0.1),
        ("test.str", "big", T.STRING, None, "str", "big"),
        ("test.arr_u32", [1, 2], T.ARRAY, T.UINT32, "[u32]", [1, 2]),
        ("test.nested", [[1], [2, 3]], T.ARRAY, None, "[[i32]]", [[1], [2, 3]]),
    ]
    be_tensors = [
        ("f32", np.array([[1.0, -2.0, 3.5]], dtype=np.float32), None),
        ("f16", np.array([0.5, -1.0], dtype=np.float16), None),
        ("f64", np.array([1e-300], dtype=np.float64), None),
        ("i8", np.array([-1, 2], dtype=np.int8), None),
        ("i16", np.array([0x0102], dtype=np.int16), None),
        ("i32", np.array([0x01020304], dtype=np.int32), None),
        ("i64", np.array([0x0102030405060708], dtype=np.int64), None),
        ("bf16", packed(Q.BF16, (1, 4)), Q.BF16),
        ("q8", packed(Q.Q8_0, (1, 32)), Q.Q8_0),
    ]
    write("peer_be.gguf", be_kvs, be_tensors, big=True)
    write("peer_be_as_le.gguf", be_kvs, be_tensors, record=False)

    data = bytearray(open("peer_small.gguf", "rb").read())
    data[4:8] = (2).to_bytes(4, "little")
    open("peer_v2.gguf", "wb").write(bytes(data))
    MANIFEST["peer_v2.gguf"] = dict(MANIFEST["peer_small.gguf"])

    with open("manifest.json", "w") as f:
        json.dump(MANIFEST, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()

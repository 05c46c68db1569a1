"""Writes the ONNX test vectors with the `onnx` package (tests/requirements.txt), and
expected.json: each valid vector's tensors as onnx.numpy_helper reads them (dtype in
Tessera's names, shape, SHA-256 of the little-endian bytes), the independent listing
tests/all/vectors.rs checks the goldens against.

The hostile vectors are built with onnx's own protobuf classes (fields set that its
helpers would not set), or by cutting bytes, and named by the outcome they must have.

Run from this folder: ../../../../../.venv/bin/python gen.py
"""

import hashlib
import json
import os

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
expected = {}

TESSERA = {
    TensorProto.FLOAT: "f32",
    TensorProto.UINT8: "u8",
    TensorProto.INT8: "i8",
    TensorProto.UINT16: "u16",
    TensorProto.INT16: "i16",
    TensorProto.INT32: "i32",
    TensorProto.INT64: "i64",
    TensorProto.BOOL: "bool",
    TensorProto.FLOAT16: "f16",
    TensorProto.DOUBLE: "f64",
    TensorProto.UINT32: "u32",
    TensorProto.UINT64: "u64",
    TensorProto.COMPLEX64: "c64",
    TensorProto.COMPLEX128: "c128",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.FLOAT8E4M3FN: "f8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "f8_e4m3fnuz",
    TensorProto.FLOAT8E5M2: "f8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "f8_e5m2fnuz",
    TensorProto.FLOAT4E2M1: "f4_e2m1",
    TensorProto.FLOAT8E8M0: "f8_e8m0",
}


def le_bytes(t, base_dir=None):
    """The tensor's bytes as onnx reads them, little-endian, FLOAT4E2M1 packed two a
    byte (low nibble first)."""
    a = numpy_helper.to_array(t, base_dir=base_dir) if base_dir else numpy_helper.to_array(t)
    if t.data_type == TensorProto.FLOAT4E2M1:
        return numpy_helper._pack_4bitx2(a.reshape(-1)).tobytes()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def listing(model, base_dir=None):
    out = {}
    for t in model.graph.initializer:
        if t.data_type == TensorProto.STRING:
            continue
        b = le_bytes(t, base_dir)
        out[t.name] = {
            "dtype": TESSERA[t.data_type],
            "shape": list(t.dims),
            "sha256": hashlib.sha256(b).hexdigest(),
        }
    return out


def graph_with(inits, inputs=None, outputs=None, name="g"):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])]
    node = helper.make_node("Identity", ["x"], ["y"])
    return helper.make_graph([node], name, inputs, outputs, initializer=inits)


def model_of(graph, **kw):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], **kw)
    m.ir_version = 8
    return m


def save(name, model, valid=True):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    if valid:
        onnx.checker.check_model(path)
        expected[name] = {"tensors": listing(model)}


def save_bytes(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


rng = np.random.default_rng(34)

# --- valid: raw_data of every mapped type, graph inputs/outputs, metadata_props -------
raw = [
    numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w.f32"),
    numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float16), "b.f16"),
    numpy_helper.from_array(rng.standard_normal((2, 3)), "d.f64"),
    numpy_helper.from_array(np.arange(-3, 3, dtype=np.int64), "i.i64"),
    numpy_helper.from_array(np.array([-128, 0, 127], dtype=np.int8), "i.i8"),
    numpy_helper.from_array(np.array([0, 255, 7], dtype=np.uint8), "u.u8"),
    numpy_helper.from_array(np.array([1, 65535], dtype=np.uint16), "u.u16"),
    numpy_helper.from_array(np.array([-7, 7], dtype=np.int16), "i.i16"),
    numpy_helper.from_array(np.array([-1, 1 << 30], dtype=np.int32), "i.i32"),
    numpy_helper.from_array(np.array([1, 1 << 31], dtype=np.uint32), "u.u32"),
    numpy_helper.from_array(np.array([1, 1 << 63], dtype=np.uint64), "u.u64"),
    numpy_helper.from_array(np.array([True, False, True]), "mask"),
    numpy_helper.from_array(np.array([1 + 2j, -3j], dtype=np.complex64), "c.c64"),
    numpy_helper.from_array(np.array([0.5 - 1j], dtype=np.complex128), "c.c128"),
    numpy_helper.from_array(np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16), "b.bf16"),
    numpy_helper.from_array(np.array([0.5, -448.0], dtype=ml_dtypes.float8_e4m3fn), "q.e4m3fn"),
    numpy_helper.from_array(np.array([2.0, -1.0], dtype=ml_dtypes.float8_e5m2), "q.e5m2"),
    numpy_helper.from_array(np.array([0.5, -1.0], dtype=ml_dtypes.float8_e4m3fnuz), "q.e4m3fnuz"),
    numpy_helper.from_array(np.array([4.0, -0.5], dtype=ml_dtypes.float8_e5m2fnuz), "q.e5m2fnuz"),
    numpy_helper.from_array(np.array([1.0, 0.5, 6.0], dtype=ml_dtypes.float4_e2m1fn), "q.fp4"),
    numpy_helper.from_array(np.array([1.0, 2.0, 0.5], dtype=ml_dtypes.float8_e8m0fnu), "s.e8m0"),
    numpy_helper.from_array(np.zeros((0, 3), dtype=np.float32), "empty"),
    numpy_helper.from_array(np.array(3.5, dtype=np.float32), "scalar"),
]
g = graph_with(
    raw,
    inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, [1, None]),
    ],
    name="raw graph",
)
m = model_of(g, producer_name="tessera-gen", producer_version="1.0", doc_string="raw data of every type")
helper.set_model_props(m, {"license": "MIT", "author": "gen.py"})
save("valid-raw.onnx", m)

# --- valid: the typed fields (make_tensor raw=False) -----------------------------------
typed = [
    helper.make_tensor("f", TensorProto.FLOAT, [2, 2], [1.0, -2.0, 0.5, 3.25]),
    helper.make_tensor("d", TensorProto.DOUBLE, [2], [1e300, -0.5]),
    helper.make_tensor("h", TensorProto.FLOAT16, [3], np.array([1.0, -2.0, 0.5], np.float16)),
    helper.make_tensor("bh", TensorProto.BFLOAT16, [2], [1.5, -2.25]),
    helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]),
    helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
    helper.make_tensor("i16", TensorProto.INT16, [2], [-32768, 32767]),
    helper.make_tensor("u16", TensorProto.UINT16, [2], [0, 65535]),
    helper.make_tensor("i32", TensorProto.INT32, [3], [-(1 << 31), 0, (1 << 31) - 1]),
    helper.make_tensor("i64", TensorProto.INT64, [2], [-(1 << 63), (1 << 63) - 1]),
    helper.make_tensor("u32", TensorProto.UINT32, [2], [0, (1 << 32) - 1]),
    helper.make_tensor("u64", TensorProto.UINT64, [2], [0, (1 << 64) - 1]),
    helper.make_tensor("b", TensorProto.BOOL, [3], [True, False, True]),
    helper.make_tensor("c", TensorProto.COMPLEX64, [2], [1 + 2j, -3j]),
    helper.make_tensor("cc", TensorProto.COMPLEX128, [1], [0.5 - 1j]),
    helper.make_tensor("e4", TensorProto.FLOAT8E4M3FN, [2], [0.5, -448.0]),
    helper.make_tensor("e5", TensorProto.FLOAT8E5M2, [2], [2.0, -1.0]),
    helper.make_tensor("fp4", TensorProto.FLOAT4E2M1, [3], [1.0, -2.0, 0.5]),
]
save("valid-typed.onnx", model_of(graph_with(typed)))

# --- valid: a STRING initializer (listed in metadata, not as a tensor) ----------------
strs = [
    helper.make_tensor("vocab", TensorProto.STRING, [2], [b"hello", "\u00e9t\u00e9".encode()]),
    numpy_helper.from_array(np.ones(2, np.float32), "w"),
]
save("valid-strings.onnx", model_of(graph_with(strs)))

# --- valid: external data, as onnx.save writes it ---------------------------------------
big = [
    numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "ext.a"),
    numpy_helper.from_array(np.arange(300, dtype=np.int64), "ext.b"),
    numpy_helper.from_array(np.ones(2, np.float32), "inline.small"),
]
m = model_of(graph_with(big))
expected["valid-external.onnx"] = {"tensors": listing(m)}
if os.path.exists(os.path.join(HERE, "valid-external.onnx.data")):
    os.remove(os.path.join(HERE, "valid-external.onnx.data"))
onnx.save(
    m,
    os.path.join(HERE, "valid-external.onnx"),
    save_as_external_data=True,
    location="valid-external.onnx.data",
    size_threshold=1024,
)
onnx.checker.check_model(os.path.join(HERE, "valid-external.onnx"))
os.chmod(os.path.join(HERE, "valid-external.onnx.data"), 0o644)
ext_data = open(os.path.join(HERE, "valid-external.onnx.data"), "rb").read()
sha1 = hashlib.sha1(ext_data).hexdigest()


def external_model(location, checksum=None, offset=None, length=None):
    """A model whose tensor `ext.a` is read from `location` (from valid-external's data
    file, at its offset)."""
    src = onnx.load(os.path.join(HERE, "valid-external.onnx"), load_external_data=False)
    for t in src.graph.initializer:
        if t.name == "ext.a":
            info = {e.key: e.value for e in t.external_data}
            del t.external_data[:]
            # set_external_data wants raw_data loaded: the entries are written as it
            # writes them (key, str(value)).
            entries = {
                "location": location,
                "offset": int(info.get("offset", 0)) if offset is None else offset,
                "length": int(info["length"]) if length is None else length,
                "checksum": checksum,
            }
            for k, v in entries.items():
                if v is not None:
                    e = t.external_data.add()
                    e.key, e.value = k, str(v)
    return src


m = external_model("valid-external.onnx.data", checksum=sha1)
save("valid-external-checksum.onnx", m, valid=False)
expected["valid-external-checksum.onnx"] = expected["valid-external.onnx"]
save("integrity-external-checksum.onnx", external_model("valid-external.onnx.data", checksum="0" * 40), valid=False)
save("malformed-external-dotdot.onnx", external_model("../onnx/valid-external.onnx.data"), valid=False)
save("malformed-external-absolute.onnx", external_model("/etc/passwd"), valid=False)
save("malformed-external-past-end.onnx", external_model("valid-external.onnx.data", offset=len(ext_data) - 4), valid=False)
save("malformed-external-length.onnx", external_model("valid-external.onnx.data", length=12), valid=False)

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


# --- hostile ----------------------------------------------------------------------------
ok = model_of(graph_with([numpy_helper.from_array(np.ones(4, np.float32), "w")]))
good = ok.SerializeToString()
# The graph's length varint cut off by the end of the file, and one of 11 bytes.
save_bytes("malformed-truncated-varint.onnx", b"\x08\x08\x3a\x80")
save_bytes("malformed-varint-overlong.onnx", b"\x08\x08\x3a" + b"\xff" * 10 + b"\x01")
# The graph's length says more bytes than the file has.
gbytes = ok.graph.SerializeToString()
save_bytes("malformed-length-past-end.onnx", b"\x08\x08" + b"\x3a\xff\xff\xff\x0f" + gbytes)
save_bytes("malformed-no-graph.onnx", b"\x08\x08\x42\x02\x10\x11")

# raw_data of 12 bytes for dims [4] of FLOAT.
t = numpy_helper.from_array(np.ones(4, np.float32), "w")
t.raw_data = b"\0" * 12
save("malformed-raw-length.onnx", model_of(graph_with([t])), valid=False)
# Huge dims: their product overflows; a rank over the limit; float_data far short.
t = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 62, 1 << 62])
save("malformed-huge-dims.onnx", model_of(graph_with([t])), valid=False)
t = TensorProto(name="rank", data_type=TensorProto.FLOAT, dims=[1] * 100, float_data=[1.0])
save("limit-rank.onnx", model_of(graph_with([t])), valid=False)
t = TensorProto(name="short", data_type=TensorProto.FLOAT, dims=[1 << 40], float_data=[1.0])
save("malformed-typed-count.onnx", model_of(graph_with([t])), valid=False)
t = TensorProto(name="neg", data_type=TensorProto.FLOAT, dims=[-1], float_data=[1.0])
save("malformed-negative-dim.onnx", model_of(graph_with([t])), valid=False)
# INT8 with a value of 300 in int32_data: out of range, found when read.
t = TensorProto(name="wide", data_type=TensorProto.INT8, dims=[2], int32_data=[1, 300])
save("malformed-int8-range.onnx", model_of(graph_with([t])), valid=False)
# Both raw_data and float_data.
t = TensorProto(name="both", data_type=TensorProto.FLOAT, dims=[1], float_data=[1.0], raw_data=b"\0\0\0\0")
save("malformed-two-data.onnx", model_of(graph_with([t])), valid=False)
# float_data packed in two fields of 2 bytes: 4 bytes in all, no whole value in either.
t = b"\x08\x01\x10\x01" + b"\x22\x02\x00\x00" * 2 + b"\x42\x01w"
gb = graph_with([]).SerializeToString() + b"\x2a" + bytes([len(t)]) + t
save_bytes("malformed-packed-split.onnx", b"\x08\x08\x3a" + varint(len(gb)) + gb + b"\x42\x02\x10\x11")
# Two initializers of one name.
a = numpy_helper.from_array(np.ones(1, np.float32), "dup")
save("malformed-duplicate-name.onnx", model_of(graph_with([a, a])), valid=False)
# Types Tessera has no dtype for, segments, sparse initializers.
save("unsupported-int4.onnx", model_of(graph_with([helper.make_tensor("q", TensorProto.INT4, [4], [1, -2, 3, -4])])), valid=False)
t = TensorProto(name="seg", data_type=TensorProto.FLOAT, dims=[1], float_data=[1.0])
t.segment.begin, t.segment.end = 0, 1
save("unsupported-segment.onnx", model_of(graph_with([t])), valid=False)
sparse = helper.make_sparse_tensor(
    numpy_helper.from_array(np.array([1.0], np.float32), "sp"),
    numpy_helper.from_array(np.array([2], np.int64), "sp_i"),
    [4],
)
g = graph_with([])
g.sparse_initializer.append(sparse)
save("unsupported-sparse.onnx", model_of(g), valid=False)
# A graph input whose type nests 5000 sequences deep (TypeProto.sequence_type (4) holds
# Sequence {elem_type (1): TypeProto}): read without descending.
deep_bytes = helper.make_tensor_type_proto(TensorProto.FLOAT, [1]).SerializeToString()
for _ in range(5000):
    seq = b"\x0a" + varint(len(deep_bytes)) + deep_bytes
    deep_bytes = b"\x22" + varint(len(seq)) + seq
vi_bytes = b"\x0a\x04deep" + b"\x12" + varint(len(deep_bytes)) + deep_bytes
g = graph_with([numpy_helper.from_array(np.ones(2, np.float32), "w")])
gb = g.SerializeToString() + b"\x5a" + varint(len(vi_bytes)) + vi_bytes
mb = b"\x08\x08" + b"\x3a" + varint(len(gb)) + gb + b"\x42\x02\x10\x11"
save_bytes("valid-deep-nesting.onnx", mb)
expected["valid-deep-nesting.onnx"] = {
    "tensors": {"w": {"dtype": "f32", "shape": [2], "sha256": hashlib.sha256(np.ones(2, np.float32).tobytes()).hexdigest()}}
}

with open(os.path.join(HERE, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", len(expected), "valid vectors")

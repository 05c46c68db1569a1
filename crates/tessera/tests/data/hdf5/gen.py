"""Writes the HDF5 vectors here with h5py (the peer) and lists what they hold, as
numpy sees it, in expected.json (the independent listing the goldens are checked
against): {file: {"tensors": {name: {dtype, shape, hex}}, "metadata": {key: value}}}.

Run from this folder with the project's venv: ../../../../../.venv/bin/python gen.py
h5py's defaults are kept (libver "earliest": superblock v0, object header v1,
symbol-table groups), as Keras and plain h5py files have them, unless a vector says.
"""
import json
import struct

import h5py
import numpy as np

EXPECTED = {}

DTYPES = {
    "float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool",
}


def meta_value(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, str):
        return v
    if isinstance(v, np.ndarray):
        return [meta_value(x) for x in v.tolist()] if v.ndim else meta_value(v[()])
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, list):
        return [meta_value(x) for x in v]
    raise TypeError(type(v))


def listing(path):
    """What h5py reads back from `path`: every dataset (little-endian bytes) and every
    attribute (root: its name; elsewhere: `group/path/name`)."""
    tensors, metadata = {}, {}

    def attrs(prefix, obj):
        for k, v in obj.attrs.items():
            metadata[prefix + k] = meta_value(v)

    attrs("", h5py.File(path, "r"))
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            attrs(name + "/", obj)
            if isinstance(obj, h5py.Dataset):
                a = obj[()]
                a = np.asarray(a)
                a = a.astype(a.dtype.newbyteorder("<"))
                tensors[name] = {
                    "dtype": DTYPES[a.dtype.name],
                    "shape": list(a.shape),
                    "hex": a.tobytes().hex(),
                }
        f.visititems(visit)
    return {"tensors": tensors, "metadata": metadata}


def record(path):
    EXPECTED[path] = listing(path)


rng = np.random.default_rng(34)

# Step 1: contiguous and compact datasets in nested groups, attributes.
with h5py.File("valid-nested.h5", "w") as f:
    f.attrs["title"] = "nested groups"          # variable-length UTF-8 string
    f.attrs["fixed"] = np.bytes_(b"fixed-len")  # fixed-length string
    f.attrs["epochs"] = np.int64(12)
    f.attrs["lr"] = np.float64(0.125)
    f.attrs["sizes"] = np.array([3, 2, 1], dtype=np.int32)
    f.attrs["flag"] = True
    f["top_f32"] = rng.standard_normal((2, 3)).astype(np.float32)
    g = f.create_group("a/b/c")
    g["deep_i64"] = np.array(-5, dtype=np.int64)             # scalar
    g["deep_u8"] = np.arange(7, dtype=np.uint8)
    f["a/half"] = rng.standard_normal(5).astype(np.float16)
    f["a/be_f64"] = np.array([[1.5, -2.25], [3.0, 1e300]], dtype=">f8")
    f["a/be_i32"] = np.array([1, -2, 70000], dtype=">i4")
    f["a/mask"] = np.array([True, False, True])
    f["a/b/i16"] = np.array([[-1, 2], [3, -4]], dtype=np.int16)
    f["a/b/u64"] = np.array([2**64 - 1, 0], dtype=np.uint64)
    f["a/b/empty"] = np.zeros((0, 3), dtype=np.float32)
    f["a/half"].attrs["unit"] = "volts"
    f["a/b"].attrs["names"] = np.array([b"x", b"yy"])        # fixed strings, Keras-style
    f.create_dataset("unwritten", shape=(2, 2), dtype=np.int32, fillvalue=7)
    # A compact dataset: its bytes inside the object header.
    sid = h5py.h5s.create_simple((4,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    d = h5py.h5d.create(f.id, b"compact_f32", h5py.h5t.IEEE_F32LE, sid, dcpl=dcpl)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 2, 3, 4], dtype=np.float32))
    d.close()
record("valid-nested.h5")

# A Keras 2 style weights file (model.save_weights("x.h5")): layer groups, names as
# fixed-length byte-string attributes, weights named `layer/layer/kernel:0`.
with h5py.File("valid-keras_weights.h5", "w") as f:
    f.attrs["layer_names"] = np.array([b"dense", b"dense_1"])
    f.attrs["backend"] = "tensorflow"
    f.attrs["keras_version"] = "2.15.0"
    for name, shape in (("dense", (4, 3)), ("dense_1", (3, 2))):
        g = f.create_group(name)
        g.attrs["weight_names"] = np.array([f"{name}/kernel:0".encode(), f"{name}/bias:0".encode()])
        g[f"{name}/kernel:0"] = rng.standard_normal(shape).astype(np.float32)
        g[f"{name}/bias:0"] = rng.standard_normal(shape[1]).astype(np.float32)
record("valid-keras_weights.h5")

# Step 2: chunked datasets: gzip, shuffle, both, partial edge chunks, big-endian,
# chunks never written (the fill value), a B-tree of more than one level.
with h5py.File("valid-chunked.h5", "w") as f:
    a = rng.standard_normal((10, 7)).astype(np.float32)
    f.create_dataset("plain", data=a, chunks=(4, 3))
    f.create_dataset("gzip", data=a, chunks=(4, 3), compression="gzip", compression_opts=6)
    f.create_dataset("shuffle_gzip", data=a, chunks=(3, 5), compression="gzip", shuffle=True)
    f.create_dataset("shuffle_only", data=np.arange(50, dtype=np.int64), chunks=(8,), shuffle=True)
    f.create_dataset("be_i16", data=np.arange(-20, 19, dtype=">i2").reshape(3, 13), chunks=(2, 4),
                     compression="gzip")
    d = f.create_dataset("sparse", shape=(6, 6), dtype=np.float64, chunks=(2, 2), fillvalue=-1.5)
    d[2:4, 2:4] = np.array([[1, 2], [3, 4]])
    f.create_dataset("untouched", shape=(5,), dtype=np.uint16, chunks=(2,), fillvalue=9)
    f.create_dataset("many", data=np.arange(3000, dtype=np.int32), chunks=(4,), compression="gzip")
    f.create_dataset("cube", data=rng.integers(0, 255, (5, 4, 3), dtype=np.uint8), chunks=(2, 3, 2),
                     compression="gzip", shuffle=True)
    f["gzip"].attrs["note"] = "deflate level 6"
record("valid-chunked.h5")

# Refused: a filter other than deflate and shuffle, libver="latest" (object header v2),
# a compound dataset.
with h5py.File("unsupported-lzf.h5", "w") as f:
    f.create_dataset("x", data=np.arange(100, dtype=np.float32), chunks=(10,), compression="lzf")
with h5py.File("unsupported-latest.h5", "w", libver="latest") as f:
    f["x"] = np.arange(4, dtype=np.float32)
with h5py.File("unsupported-complex.h5", "w") as f:
    f["z"] = np.array([1 + 2j], dtype=np.complex64)


def cycle():
    """valid-nested.h5 with the object header address of its first group entry turned
    into the root's: a group that contains itself."""
    b = bytearray(open("valid-nested.h5", "rb").read())
    root = struct.unpack_from("<Q", b, 64)[0]  # superblock v0: root entry's header address
    snod = b.find(b"SNOD")
    # First entry: name offset (8), object header address (8).
    struct.pack_into("<Q", b, snod + 8 + 8, root)
    open("malformed-cycle.h5", "wb").write(bytes(b))


cycle()

with open("expected.json", "w") as out:
    json.dump(EXPECTED, out, indent=1, sort_keys=True)
    out.write("\n")

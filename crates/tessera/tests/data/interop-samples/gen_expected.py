# Transcribes tests/interop-samples/MANIFEST.md's "what to expect" column into JSON
# (names, dtypes, shapes, SHA-256 of the little-endian values it states), computed here
# with Python's struct, not by Tessera.
import hashlib, json, struct
import os
D = os.path.dirname(os.path.abspath(__file__))
def h(b): return hashlib.sha256(b).hexdigest()
def f32(*v): return h(struct.pack('<%df' % len(v), *v))
def i32(*v): return h(struct.pack('<%di' % len(v), *v))
def i64(*v): return h(struct.pack('<%dq' % len(v), *v))
def i16(*v): return h(struct.pack('<%dh' % len(v), *v))
def u64(*v): return h(struct.pack('<%dQ' % len(v), *v))
def t(dtype, shape, **parts): return {'dtype': dtype, 'shape': shape, 'parts': parts}
aero = {'tensors': {'linear.weight': t('f32', [2, 3], data=f32(0, 1, 2, 3, 4, 5)),
                    'linear.bias': t('f32', [2], data=f32(0.5, -0.5))}}
gptrs = {'tensors': {'b': t('i32', [2], data=i32(1, -2)),
                     'scalar': t('f32', [1], data=f32(3.5)),
                     'wte.weight': t('f32', [2, 3], data=f32(0, 1, 2, 3, 4, 5))}}
big = bytes((i * 7) % 256 for i in range(1000))
out = {
 '_about': 'tests/interop-samples/MANIFEST.md\'s notes on each sample as data: tensors (dtype, shape, SHA-256 of the little-endian values the notes state) and chunks (name, type, SHA-256 where the notes give the bytes). Transcribed by hand from the MANIFEST and hashed with Python; the independent listing the samples\' goldens are checked against (tests/vectors.rs).',
 'aero/aerotensor_HEAD630e8a4_write_model_plain.aero': aero,
 'aero/aerotensor_f1d395d_write_model_ihsh.aero': aero,
 'aero/aerotensor_f1d395d_write_model_ihsh_phsh_page16.aero': aero,
 'gptrs/py_exporter_v2.gptrs': gptrs,
 'gptrs/py_exporter_v2.gptrsten': gptrs,
 'ztensor/pypi_ztensor_1.0.1_mixed.zt': {'tensors': {
    'w': t('f32', [2, 3], data=f32(0, 1, 2, 3, 4, 5)),
    'z': t('i64', [100], data=i64(*range(100))),
    's': t('i16', [1], data=i16(7)),
    'csr': t('f32', [2, 3], values=f32(1, 2), indices=u64(0, 2), indptr=u64(0, 1, 2)),
    'coo': t('i32', [2, 3], values=i32(5, 6), coords=u64(0, 1, 2, 0))}},
 'fold/pyfolds102_zstd.fold': {'tensors': {}, 'chunks': {
    'metrics': {'kind': 'JSON'}, 'blob': {'kind': 'RAW0', 'sha256': h(bytes(range(256)) * 4)}}},
 'fold/pyfolds102_none_rs16_single_block.fold': {'tensors': {}, 'chunks': {'small': {'kind': 'JSON'}}},
 'fold/pyfolds102_none_rs16_multiblock_BROKEN_ECC.fold': {'tensors': {}, 'chunks': {'big': {'kind': 'RAW0', 'sha256': h(big)}}},
 'fold/pyfoldsHEAD_e45e9eb_none_rs16_multiblock.fold': {'tensors': {}, 'chunks': {'big': {'kind': 'RAW0', 'sha256': h(big)}}},
}
with open(f'{D}/expected.json', 'w') as f:
    json.dump(out, f, indent=1)
    f.write('\n')
with open(f'{D}/vectors.json', 'w') as f:
    json.dump({'about': 'Goldens of the interop samples (tests/interop-samples/, listed by its MANIFEST.md); no vectors here.',
               'helpers': [{'file': 'expected.json', 'why': 'MANIFEST.md\'s notes on the samples as data, the independent listing for their goldens'}]}, f, indent=1)
    f.write('\n')

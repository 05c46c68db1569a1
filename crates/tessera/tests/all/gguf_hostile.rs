//! Hostile GGUF files, built byte by byte here (no writer involved): every one is a
//! clear error of the right kind, fast, without a big allocation, never a panic or a hang.

use tessera::formats::gguf::GgufFile;
use tessera::{ErrorKind, Limits};

/// A tiny GGUF builder over raw bytes.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn header(version: u32, tensors: u64, kvs: u64) -> B {
        let mut b = B::default();
        b.0.extend_from_slice(b"GGUF");
        b.u32(version).u64(tensors).u64(kvs);
        b
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s);
        self
    }
    /// A tensor info.
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, off: u64) -> &mut Self {
        self.str(name.as_bytes()).u32(dims.len() as u32);
        for d in dims {
            self.u64(*d);
        }
        self.u32(ty).u64(off)
    }
    fn pad_to(&mut self, align: usize, extra: usize) -> &mut Self {
        while self.0.len() % align != 0 {
            self.0.push(0);
        }
        self.0.extend(std::iter::repeat_n(0u8, extra));
        self
    }
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

fn kind(data: &[u8]) -> ErrorKind {
    kind_with(data, &Limits::default())
}

fn kind_with(data: &[u8], limits: &Limits) -> ErrorKind {
    match GgufFile::parse(data, limits) {
        Ok(_) => panic!("hostile file opened"),
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
            e.kind()
        }
    }
}

#[test]
fn huge_counts_in_tiny_files() {
    // 43 bytes with absurd counts: the kind of file gguf-py loops on.
    let mut b = B::header(3, u64::MAX, u64::MAX);
    b.0.extend_from_slice(&[0u8; 19]);
    assert_eq!(b.bytes().len(), 43);
    assert_eq!(kind(b.bytes()), ErrorKind::LimitExceeded);
    let mut b = B::header(3, 0, 1_000_000);
    b.0.extend_from_slice(&[0u8; 19]);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    let mut b = B::header(3, 9_000_000, 0);
    b.0.extend_from_slice(&[0u8; 19]);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    // Both counts fit alone, not together.
    let mut b = B::header(3, 1, 1);
    b.0.extend_from_slice(&[0u8; 30]);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
}

#[test]
fn huge_string_lengths() {
    let mut b = B::header(3, 0, 1);
    b.u64(u64::MAX).0.extend_from_slice(b"key-and-more");
    assert_eq!(kind(b.bytes()), ErrorKind::LimitExceeded);
    let mut b = B::header(3, 0, 1);
    b.u64(1000).0.extend_from_slice(b"key-and-more");
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    // A string value claiming more than the file holds.
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(8).u64(u64::MAX - 3).u64(0);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    // A tensor name claiming 2^63 bytes.
    let mut b = B::header(3, 1, 0);
    b.u64(1 << 63).0.extend_from_slice(&[0u8; 24]);
    assert_eq!(kind(b.bytes()), ErrorKind::LimitExceeded);
}

#[test]
fn huge_arrays_and_nesting_bombs() {
    // An array of u64::MAX u32s.
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(9).u32(4).u64(u64::MAX).u64(0);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    // 2^40 strings, 2^40 empty arrays.
    for item in [8u32, 9] {
        let mut b = B::header(3, 0, 1);
        b.str(b"k").u32(9).u32(item).u64(1 << 40).u64(0).u64(0);
        assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    }
    // Arrays nested 200 deep.
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(9);
    for _ in 0..200 {
        b.u32(9).u64(1);
    }
    b.u32(0).u64(0);
    assert_eq!(kind(b.bytes()), ErrorKind::LimitExceeded);
    // 100,000 deep with the depth limit lifted: still refused, no stack overflow.
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(9);
    for _ in 0..100_000 {
        b.u32(9).u64(1);
    }
    b.u32(0).u64(0);
    let lifted = Limits {
        max_depth: usize::MAX,
        ..Limits::default()
    };
    assert_eq!(kind_with(b.bytes(), &lifted), ErrorKind::LimitExceeded);
    // Many array items in all: over a lowered item budget.
    let mut b = B::header(3, 0, 2);
    b.str(b"a").u32(9).u32(4).u64(3).u32(1).u32(2).u32(3);
    b.str(b"b").u32(9).u32(4).u64(3).u32(1).u32(2).u32(3);
    let limits = Limits {
        max_entries: 5,
        ..Limits::default()
    };
    assert_eq!(kind_with(b.bytes(), &limits), ErrorKind::LimitExceeded);
    assert!(GgufFile::parse(b.bytes(), &Limits::default()).is_ok());
}

#[test]
fn header_over_the_index_limit() {
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(8).str(&[b'x'; 4096]);
    let limits = Limits {
        max_index_bytes: 1024,
        ..Limits::default()
    };
    assert_eq!(kind_with(b.bytes(), &limits), ErrorKind::LimitExceeded);
}

#[test]
fn unknown_and_invalid_values() {
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(13).u64(0);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(9).u32(77).u64(1).u64(0);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    let mut b = B::header(3, 0, 1);
    b.str(b"k").u32(7).u8(2);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    let mut b = B::header(3, 0, 1);
    b.str(b"\xff").u32(7).u8(1);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    let mut b = B::header(3, 0, 2);
    b.str(b"k").u32(7).u8(1).str(b"k").u32(7).u8(0);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
    // A file's own key named like our old reserved one is just its metadata: it reads,
    // and a GGUF -> GGUF rewrite keeps it as a KV.
    let mut b = B::header(3, 0, 1);
    b.str(b"tessera.gguf_types").u32(7).u8(1);
    {
        use tessera::TensorSource;
        let f = GgufFile::parse(b.bytes(), &Limits::default()).unwrap();
        assert_eq!(
            f.metadata().get("tessera.gguf_types"),
            Some(&tessera::Value::Bool(true))
        );
        let mut out = std::io::Cursor::new(Vec::new());
        tessera::convert::write_to(tessera::Format::Gguf, &f, &mut out, &Default::default())
            .unwrap();
        let out = out.into_inner();
        let g = GgufFile::parse(&out, &Limits::default()).unwrap();
        assert_eq!(
            g.metadata().get("tessera.gguf_types"),
            Some(&tessera::Value::Bool(true))
        );
    }
    // Our json_keys KV with the wrong type; and listing a key that is not JSON text.
    let mut b = B::header(3, 0, 1);
    b.str(b"tessera.json_keys").u32(7).u8(1);
    assert_eq!(kind(b.bytes()), ErrorKind::Unsupported);
    let mut b = B::header(3, 0, 2);
    b.str(b"k").u32(8).str(b"{not json");
    b.str(b"tessera.json_keys")
        .u32(9)
        .u32(8)
        .u64(2)
        .str(b"k")
        .str(b"missing");
    use tessera::{Container, TensorSource};
    let f = GgufFile::parse(b.bytes(), &Limits::default()).unwrap();
    assert_eq!(
        f.metadata().get("k"),
        Some(&tessera::Value::Str("{not json".into()))
    );
    assert!(!f.metadata().contains_key("tessera.json_keys"));
    assert_eq!(f.warnings().len(), 2, "{:?}", f.warnings());
}

#[test]
fn bad_alignment() {
    for (ty, v) in [(4u32, 0u32), (4, 3), (4, 48), (5, 32)] {
        let mut b = B::header(3, 0, 1);
        b.str(b"general.alignment").u32(ty).u32(v);
        assert_eq!(kind(b.bytes()), ErrorKind::Malformed, "type {ty} value {v}");
    }
    let mut b = B::header(3, 0, 1);
    b.str(b"general.alignment").u32(4).u32(64);
    assert!(GgufFile::parse(b.bytes(), &Limits::default()).is_ok());
}

#[test]
fn versions_and_endianness() {
    let b = B::header(1, 0, 0);
    assert_eq!(kind(b.bytes()), ErrorKind::UnsupportedVersion);
    let b = B::header(4, 0, 0);
    assert_eq!(kind(b.bytes()), ErrorKind::UnsupportedVersion);
    // Big-endian: v1 refused, v3 with big-endian counts read as such.
    let b = B::header(1u32.swap_bytes(), 0, 0);
    assert_eq!(kind(b.bytes()), ErrorKind::UnsupportedVersion);
    let mut b = B::header(3u32.swap_bytes(), 0, 0);
    b.0[16..24].copy_from_slice(&1u64.to_be_bytes());
    assert_eq!(
        kind(b.bytes()),
        ErrorKind::Malformed,
        "one KV announced, none present"
    );
    b.0.extend_from_slice(&1u64.to_be_bytes());
    b.0.push(b'k');
    b.0.extend_from_slice(&7u32.to_be_bytes());
    b.0.push(1);
    let f = GgufFile::parse(b.bytes(), &Limits::default()).unwrap();
    use tessera::TensorSource;
    assert_eq!(f.metadata().get("k"), Some(&tessera::Value::Bool(true)));
    assert!(GgufFile::parse(B::header(3, 0, 0).bytes(), &Limits::default()).is_ok());
}

fn one_tensor(dims: &[u64], ty: u32, off: u64, data: usize) -> B {
    let mut b = B::header(3, 1, 0);
    b.tensor("t", dims, ty, off).pad_to(32, data);
    b
}

#[test]
fn tensor_info_attacks() {
    // Sanity: a valid 2x3 f32.
    assert!(GgufFile::parse(one_tensor(&[3, 2], 0, 0, 24).bytes(), &Limits::default()).is_ok());
    // Too many dims.
    let mut b = B::header(3, 1, 0);
    b.str(b"t").u32(u32::MAX).0.extend_from_slice(&[0u8; 64]);
    assert_eq!(kind(b.bytes()), ErrorKind::LimitExceeded);
    // Dims whose product overflows, and a dim beyond i64.
    assert_eq!(
        kind(one_tensor(&[1 << 62, 1 << 62], 0, 0, 0).bytes()),
        ErrorKind::Malformed
    );
    assert_eq!(
        kind(one_tensor(&[u64::MAX], 8, 0, 0).bytes()),
        ErrorKind::Malformed
    );
    // numel fits but the byte size does not.
    assert_eq!(
        kind(one_tensor(&[1 << 61, 2], 0, 0, 0).bytes()),
        ErrorKind::Malformed
    );
    // Offsets: past the end, overflowing, misaligned.
    assert_eq!(
        kind(one_tensor(&[3, 2], 0, 32, 24).bytes()),
        ErrorKind::Malformed
    );
    assert_eq!(
        kind(one_tensor(&[3, 2], 0, u64::MAX - 31, 24).bytes()),
        ErrorKind::Malformed
    );
    assert_eq!(
        kind(one_tensor(&[2], 0, 4, 24).bytes()),
        ErrorKind::Malformed
    );
    // Data shorter than the tensor.
    assert_eq!(
        kind(one_tensor(&[3, 2], 0, 0, 23).bytes()),
        ErrorKind::Malformed
    );
    // Unknown ggml types (removed ids and garbage).
    for ty in [4u32, 5, 31, 36, 1000, u32::MAX] {
        assert_eq!(
            kind(one_tensor(&[32], ty, 0, 64).bytes()),
            ErrorKind::Unsupported,
            "{ty}"
        );
    }
    // A quantized row that is not whole blocks.
    assert_eq!(
        kind(one_tensor(&[33], 2, 0, 64).bytes()),
        ErrorKind::Malformed
    );
    // Duplicate tensor names.
    let mut b = B::header(3, 2, 0);
    b.tensor("t", &[1], 0, 0)
        .tensor("t", &[1], 0, 32)
        .pad_to(32, 64);
    assert_eq!(kind(b.bytes()), ErrorKind::Malformed);
}

#[test]
fn overlapping_tensors_open_with_a_warning() {
    use tessera::Container;
    let mut b = B::header(3, 2, 0);
    b.tensor("a", &[4], 0, 0)
        .tensor("b", &[4], 0, 0)
        .pad_to(32, 32);
    let f = GgufFile::parse(b.bytes(), &Limits::default()).unwrap();
    assert_eq!(f.warnings().len(), 1, "{:?}", f.warnings());
}

#[test]
fn random_garbage_never_panics() {
    // A deterministic xorshift stream of headers with random counts and bytes.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let mut b = B::header(3, next() % 4, next() % 4);
        let n = (next() % 200) as usize;
        for _ in 0..n {
            // Bias towards small numbers so the parser gets deep.
            let v = next();
            b.u8(if v % 3 == 0 {
                (v >> 8) as u8
            } else {
                (v % 13) as u8
            });
        }
        let _ = GgufFile::parse(b.bytes(), &Limits::default());
    }
}

#[test]
fn many_keys_parse_and_rewrite_in_linear_time() {
    // Quadratic work on 200,000 keys would take minutes; linear takes about a second.
    let n = 200_000u64;
    let mut b = B::header(3, 0, n);
    for i in 0..n {
        // u16 values: not the writer's default type, so the type map is kept too.
        b.str(format!("k{i}").as_bytes()).u32(2);
        b.0.extend_from_slice(&(i as u16).to_le_bytes());
    }
    b.pad_to(32, 0);
    let f = GgufFile::parse(b.bytes(), &Limits::default()).unwrap();
    use tessera::TensorSource;
    assert_eq!(f.metadata().len() as u64, n);
    assert_eq!(f.metadata_types().unwrap().len() as u64, n);
    let mut out = std::io::Cursor::new(Vec::new());
    tessera::convert::write_to(
        tessera::Format::Gguf,
        &f,
        &mut out,
        &tessera::WriteOptions::default(),
    )
    .unwrap();
    assert!(out.into_inner() == b.0);
}

//! The corruption campaign: every byte of a small file of each format, flipped, is
//! either detected (the open fails, `verify` fails, or reading a tensor fails) or
//! provably harmless (every tensor and the metadata read back exactly as written).
//! Counts per format are printed (`cargo test --test corruption -- --nocapture`).
//!
//! The "read path" column asks the question a loader asks, without `verify`: open with
//! the default options and read every tensor. Each flip is refused (the open or a read
//! fails), exact (every tensor reads back as written), or **served**: a read returned
//! bytes other than those written. Formats whose digests cover the tensor bytes (WTXT,
//! FOLD, AERO, zTensor with digests, NPZ) must serve nothing damaged.
//!
//! Formats whose integrity layers cover every byte that matters (WTXT signed, FOLD,
//! AERO with IHSH + per-tensor hashes + page hashes) must have no undetected flip.
//! For the others the test measures what their specs leave uncovered, and asserts
//! the part they do cover: zTensor's digests cover component bytes (not the CBOR
//! manifest), NPZ's CRC-32 covers member data (not the zip directory).

use std::borrow::Cow;
use std::io::Cursor;

use tessera::convert::{write_to, Compression, Digest};
use tessera::{
    DType, Format, Model, ReadOptions, TensorInfo, TensorSource, TensorView, VerifyOptions,
    WriteOptions,
};

fn model() -> Model {
    let mut m = Model::new();
    m.metadata.insert("description", "campaign");
    let w: Vec<u8> = (0..48u32)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense("w", DType::F32, vec![4, 3, 4]),
            Cow::Owned(w),
        )
        .unwrap(),
    )
    .unwrap();
    let b: Vec<u8> = (0..6i32).flat_map(|i| (i - 3).to_le_bytes()).collect();
    m.push(TensorView::dense(TensorInfo::dense("b", DType::I32, vec![6]), Cow::Owned(b)).unwrap())
        .unwrap();
    m
}

const SEED: [u8; 32] = [7; 32];
const HMAC: &[u8] = b"campaign hmac key";

fn write(format: Format, opts: &WriteOptions, src: &dyn TensorSource) -> Vec<u8> {
    let p = tessera::convert::prepare(
        src,
        format,
        tessera::ConvertOptions::default().drop_metadata(true),
    )
    .unwrap();
    let mut cur = Cursor::new(Vec::new());
    write_to(format, &p, &mut cur, opts).unwrap_or_else(|e| panic!("{format}: {e}"));
    cur.into_inner()
}

#[derive(Debug, Default)]
struct Counts {
    detected: usize,
    harmless: usize,
    undetected: Vec<usize>,
    /// Read path: flips whose damage made a read fail.
    read_refused: usize,
    /// Read path: flips after which a read handed out bytes other than those written.
    read_served: Vec<usize>,
}

/// The read path alone (no `verify`): Some(true) refused, Some(false) exact, None served.
fn read_path(data: &[u8], want: &Model) -> Option<bool> {
    let Ok(file) = tessera::open(data, &ReadOptions::default()) else {
        return Some(true);
    };
    let mut refused = false;
    for info in file.tensor_infos() {
        let Ok(exp) = want.tensor(&info.name) else {
            continue; // a renamed tensor: not bytes served under a name that was written
        };
        match file.tensor(&info.name) {
            Err(_) => refused = true,
            Ok(got) => {
                let same = got.parts.len() == exp.parts.len()
                    && got
                        .parts
                        .iter()
                        .zip(&exp.parts)
                        .all(|(a, b)| a.bytes.as_ref() == b.bytes.as_ref());
                if !same {
                    return None;
                }
            }
        }
    }
    Some(refused)
}

fn classify(data: &[u8], want: &Model, vopts: &VerifyOptions) -> Option<bool> {
    // Some(true) detected, Some(false) harmless, None undetected.
    let Ok(file) = tessera::open(data, &ReadOptions::default()) else {
        return Some(true);
    };
    if !file.verify(vopts).is_ok() {
        return Some(true);
    }
    if file.tensor_infos().len() != want.tensor_infos().len() {
        return None;
    }
    for info in want.tensor_infos() {
        let Ok(got) = file.tensor(&info.name) else {
            return Some(true);
        };
        let exp = want.tensor(&info.name).unwrap();
        if got.info.dtype != exp.info.dtype
            || got.info.shape != exp.info.shape
            || got.parts.first().map(|p| p.bytes.as_ref())
                != exp.parts.first().map(|p| p.bytes.as_ref())
        {
            return None;
        }
    }
    for (k, v) in want.metadata.iter() {
        if file.metadata().get(k) != Some(v) {
            return None;
        }
    }
    Some(false)
}

fn campaign(format: Format, opts: &WriteOptions, vopts: &VerifyOptions) -> (Vec<u8>, Counts) {
    let m = model();
    let clean = write(format, opts, &m);
    // What the clean file holds (metadata as this format carries it).
    let reference = {
        let f = tessera::open(&clean, &ReadOptions::default()).unwrap();
        assert!(f.verify(vopts).is_ok(), "{format}: clean file fails verify");
        Model::from_source(f.as_ref()).unwrap()
    };
    let mut counts = Counts::default();
    let mut d = clean.clone();
    for i in 0..d.len() {
        d[i] ^= 0x01;
        match classify(&d, &reference, vopts) {
            Some(true) => counts.detected += 1,
            Some(false) => counts.harmless += 1,
            None => counts.undetected.push(i),
        }
        match read_path(&d, &reference) {
            Some(true) => counts.read_refused += 1,
            Some(false) => {}
            None => counts.read_served.push(i),
        }
        d[i] ^= 0x01;
    }
    println!(
        "{:<12} {:>6} bytes: {:>6} detected, {:>5} harmless, {:>5} undetected | read path: {:>6} refused, {:>5} served damaged",
        format.name(),
        clean.len(),
        counts.detected,
        counts.harmless,
        counts.undetected.len(),
        counts.read_refused,
        counts.read_served.len()
    );
    (clean, counts)
}

#[test]
fn wtxt_signed_every_flip_is_detected_or_harmless() {
    let opts = WriteOptions::default()
        .with(
            tessera::formats::wtxt::WtxtOptions::default()
                .hmac_key(Some(HMAC.to_vec()))
                .sign_key(Some(SEED))
                .fixed_salt(Some([1; 8])),
        )
        .timestamp(Some("2026-01-01T00:00:00Z".into()));
    let vopts = VerifyOptions::default()
        .hmac_key(Some(HMAC.to_vec()))
        .public_key(Some(tessera::signing::ed25519::public_key(&SEED)));
    let (_, c) = campaign(Format::Wtxt, &opts, &vopts);
    assert!(
        c.undetected.is_empty(),
        "wtxt: undetected flips at {:?}",
        c.undetected
    );
    assert!(
        c.read_served.is_empty(),
        "wtxt: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
}

#[test]
fn fold_every_flip_is_detected_or_harmless() {
    let opts = WriteOptions::default()
        .with(tessera::formats::fold::FoldOptions::default().ecc(Some(16)))
        .timestamp(Some("2026-01-01T00:00:00Z".into()));
    let (_, c) = campaign(Format::Fold, &opts, &VerifyOptions::default());
    assert!(
        c.undetected.is_empty(),
        "fold: undetected flips at {:?}",
        c.undetected
    );
    assert!(
        c.read_served.is_empty(),
        "fold: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
}

#[test]
fn aero_with_every_layer_every_flip_is_detected_or_harmless() {
    let opts = WriteOptions::default().with(
        tessera::formats::aero::AeroOptions::default()
            .tensor_hashes(true)
            .control_integrity(true)
            .page_hashes(Some(64))
            .uuid(Some([0x11; 16])),
    );
    let (_, c) = campaign(Format::Aero, &opts, &VerifyOptions::default());
    assert!(
        c.undetected.is_empty(),
        "aero: undetected flips at {:?}",
        c.undetected
    );
    assert!(
        c.read_served.is_empty(),
        "aero: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
}

#[test]
fn ztensor_digests_cover_every_component_byte() {
    let opts = WriteOptions::default().digests(vec![Digest::Sha256]);
    let (clean, c) = campaign(Format::Ztensor, &opts, &VerifyOptions::default());
    // Components end where the manifest starts: size - 8 - manifest_size.
    let n = clean.len();
    let msize = u64::from_le_bytes(clean[n - 8..].try_into().unwrap()) as usize;
    let manifest_start = n - 8 - msize;
    let in_data: Vec<usize> = c
        .undetected
        .iter()
        .copied()
        .filter(|&i| i < manifest_start)
        .collect();
    assert!(
        in_data.is_empty(),
        "ztensor: undetected flips in component bytes at {in_data:?}"
    );
    assert!(
        c.read_served.is_empty(),
        "ztensor: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
    let zstd = WriteOptions::default()
        .digests(vec![Digest::Crc32c])
        .compression(Compression::Zstd(3));
    let (_, c) = campaign(Format::Ztensor, &zstd, &VerifyOptions::default());
    assert!(
        c.read_served.is_empty(),
        "ztensor+zstd: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
}

#[test]
fn npz_crc_covers_every_member_data_byte() {
    let (clean, c) = campaign(
        Format::Npz,
        &WriteOptions::default(),
        &VerifyOptions::default(),
    );
    // Every undetected flip must lie outside the tensors' own bytes.
    let m = model();
    for info in m.tensor_infos() {
        let bytes = m.tensor(&info.name).unwrap().parts[0].bytes.to_vec();
        let at = clean
            .windows(bytes.len())
            .position(|w| w == bytes.as_slice())
            .unwrap();
        let hit: Vec<usize> = c
            .undetected
            .iter()
            .copied()
            .filter(|&i| i >= at && i < at + bytes.len())
            .collect();
        assert!(
            hit.is_empty(),
            "npz: undetected flips in {:?}'s data at {hit:?}",
            info.name
        );
    }
    assert!(
        c.read_served.is_empty(),
        "npz: reads served damaged bytes after flips at {:?}",
        c.read_served
    );
}

#[test]
fn formats_without_checksums_miss_only_data_and_metadata_text() {
    // safetensors, GGUF and GPTRS have no checksum over tensor data or metadata, so a
    // flip there (a value, or a key) goes unnoticed; every other byte (magic, lengths, offsets, names,
    // dtypes, shapes, JSON/KV structure) must be caught by the structural checks.
    let m = model();
    for f in [Format::Safetensors, Format::Gguf, Format::GptrsCheckpoint] {
        let (clean, c) = campaign(f, &WriteOptions::default(), &VerifyOptions::default());
        let mut uncovered: Vec<std::ops::Range<usize>> = Vec::new();
        for info in m.tensor_infos() {
            let bytes = m.tensor(&info.name).unwrap().parts[0].bytes.to_vec();
            let at = clean
                .windows(bytes.len())
                .position(|w| w == bytes.as_slice())
                .unwrap();
            uncovered.push(at..at + bytes.len());
        }
        if f == Format::Gguf {
            // GGUF stores no tensor lengths: the last tensor ("b", dims [6]) may grow
            // into the alignment padding after it (24 bytes padded to 32) unnoticed.
            let info = [b'b', 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0];
            let at = clean.windows(info.len()).position(|w| w == info).unwrap();
            uncovered.push(at + 5..at + 13);
        }
        // Metadata text: the key and value, and GPTRS's config wrapper around them.
        for text in [
            &b"description"[..],
            b"campaign",
            br#""kind":"tensors","config""#,
        ] {
            for at in (0..clean.len()).filter(|&i| clean[i..].starts_with(text)) {
                uncovered.push(at..at + text.len());
            }
        }
        let elsewhere: Vec<usize> = c
            .undetected
            .iter()
            .copied()
            .filter(|i| !uncovered.iter().any(|r| r.contains(i)))
            .collect();
        assert!(
            elsewhere.is_empty(),
            "{f}: undetected flips outside data and metadata text at {elsewhere:?}"
        );
    }
}

/// A file read by range whose bytes can change between reads (what a file rewritten in
/// place looks like through `pread`, or a remote object through ranged GETs): every
/// read a fresh copy.
struct Changing(std::sync::Mutex<Vec<u8>>);

impl tessera::source::ByteSource for Changing {
    fn len(&self) -> u64 {
        self.0.lock().unwrap().len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> tessera::Result<Cow<'_, [u8]>> {
        let data = self.0.lock().unwrap();
        let (o, n) = (offset as usize, len as usize);
        Ok(Cow::Owned(data[o..o + n].to_vec()))
    }
    fn kind(&self) -> &'static str {
        "test"
    }
}

/// Over a source that is not in memory, every read of a tensor is checked: a digest
/// that held for one read says nothing of the next one's fresh bytes. (Readers checked
/// each tensor once, and the second read handed out changed bytes unchecked.)
#[test]
fn reads_that_are_not_in_memory_are_checked_every_time() {
    let mut aero = WriteOptions::default();
    aero.set("tensor_hashes", tessera::options::OptionValue::Bool(true))
        .unwrap();
    let cases = [
        (
            "ztensor crc32c",
            Format::Ztensor,
            WriteOptions::default().digests(vec![Digest::Crc32c]),
        ),
        (
            "ztensor sha256",
            Format::Ztensor,
            WriteOptions::default().digests(vec![Digest::Sha256]),
        ),
        ("fold", Format::Fold, WriteOptions::default()),
        ("aero", Format::Aero, aero),
        ("npz", Format::Npz, WriteOptions::default()),
        ("pytorch", Format::Pytorch, WriteOptions::default()),
    ];
    for (label, format, opts) in cases {
        let m = model();
        let bytes = write(format, &opts, &m);
        let src = Changing(std::sync::Mutex::new(bytes));
        let file = tessera::open(&src, &ReadOptions::default()).unwrap();
        let want = m.tensor("w").unwrap().parts[0].bytes.to_vec();
        assert_eq!(
            file.tensor("w").unwrap().parts[0].bytes.as_ref(),
            &want[..],
            "{label}"
        );
        let s = &file
            .tensor_infos()
            .iter()
            .find(|i| i.name == "w")
            .unwrap()
            .storage;
        let at = (s.offset.unwrap() + s.stored_bytes / 2) as usize;
        src.0.lock().unwrap()[at] ^= 0x04;
        for _ in 0..2 {
            let e = file
                .tensor("w")
                .err()
                .unwrap_or_else(|| panic!("{label}: served changed bytes"));
            assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{label}: {e}");
        }
    }
}

//! What opening a file reads, format by format, over a source that is not in memory.
//!
//! A format that reads by range ([`Access::Ranges`]) must build its index from a few
//! kilobytes — never the tensor bytes (FOLD too: a chunk's checks run when its bytes
//! are first used, issue 30 §3) — and read each tensor when asked; a format whose
//! layout forces a full scan ([`Access::Whole`]) says so in the registry and reads the
//! file once. Every format gives the same tensors over a memory map, positional reads
//! (`pread`) and an in-memory buffer.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::any::Access;
use tessera::convert::{capabilities, prepare, write_to};
use tessera::formats::reader_for;
use tessera::source::{CountingSource, PreadFile};
use tessera::{
    ConvertOptions, DType, FileData, Format, Model, ReadOptions, TensorInfo, TensorSource,
    TensorView, WriteOptions,
};

/// Sixteen 256 KiB tensors (4 MiB of tensor bytes; one 4 MiB tensor in a `.npy`, which
/// holds one), with a little metadata.
fn model(format: Format) -> Model {
    let caps = capabilities(format).unwrap();
    let dtype = [DType::F32, DType::U8, DType::I32]
        .into_iter()
        .find(|d| caps.dtypes.contains(d))
        .unwrap();
    let mut m = Model::new();
    if caps.metadata != tessera::convert::MetadataSupport::None {
        m.metadata.insert("description", "open_reads");
    }
    let count = tensor_count(format);
    for t in 0..count {
        let n = 4 * 1024 * 1024 / count as usize / dtype.size();
        let bytes: Vec<u8> = (0..n * dtype.size())
            .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(t) as u8 & 0x3f)
            .collect();
        let info = TensorInfo::dense(format!("layer{t}.weight"), dtype, vec![n as u64]);
        m.push(TensorView::dense(info, Cow::Owned(bytes)).unwrap())
            .unwrap();
    }
    m
}

fn tensor_count(format: Format) -> u32 {
    if format == Format::Npy {
        1
    } else {
        16
    }
}

fn written(format: Format) -> Vec<u8> {
    let m = model(format);
    let p = prepare(&m, format, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(format, &p, &mut out, &WriteOptions::default()).unwrap();
    out.into_inner()
}

/// Formats whose reader decodes the next tensor ahead while one is read in file order
/// (FOLD: `FoldFile::decoded_ahead`), so a tensor's bytes may have been fetched by the
/// call before: for them the bytes read are checked over all tensors, not per tensor.
const READS_AHEAD: [Format; 1] = [Format::Fold];

use crate::common::{ext, readable_formats};

#[test]
fn opening_reads_the_index_not_the_tensors() {
    let mut report = Vec::new();
    for format in readable_formats() {
        let bytes = written(format);
        let total = bytes.len() as u64;
        let src = CountingSource::new(bytes.clone());
        let file = tessera::open(&src, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{format}: {e}"));
        let at_open = src.bytes();
        let (_, access) = reader_for(format).unwrap();
        report.push(format!("{format}: {at_open} of {total} bytes at open"));
        match access {
            Access::Ranges => assert!(
                at_open <= 64 * 1024,
                "{format} reads by range but read {at_open} of {total} bytes to open"
            ),
            // A full scan reads the file once (after the first bytes, to detect it).
            _ => assert!(
                at_open <= total + tessera::format::DETECT_LEN as u64,
                "{format}: {at_open} bytes read to open a {total}-byte file"
            ),
        }
        // Each tensor is then read when asked, and equals the in-memory read.
        let mem = tessera::open(&bytes, &ReadOptions::default()).unwrap();
        for info in mem.tensor_infos() {
            src.reset();
            let a = file.tensor(&info.name).unwrap();
            let b = mem.tensor(&info.name).unwrap();
            assert_eq!(
                a.data().unwrap(),
                b.data().unwrap(),
                "{format} {}",
                info.name
            );
            if access == Access::Ranges && !READS_AHEAD.contains(&format) {
                assert!(
                    src.bytes() >= b.nbytes() as u64 / 2 || b.nbytes() == 0,
                    "{format}: tensor {} was not read from the source",
                    info.name
                );
            }
        }
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn map_pread_and_memory_give_the_same_tensors() {
    let dir = tempfile::tempdir().unwrap();
    for format in readable_formats() {
        let bytes = written(format);
        let path = dir.path().join(format!("m.{}", ext(format)));
        std::fs::write(&path, &bytes).unwrap();
        let mapped = FileData::open(&path).unwrap();
        let pread = PreadFile::open(&path).unwrap();
        let opts = ReadOptions::default();
        let files = [
            tessera::open(&mapped, &opts).unwrap(),
            tessera::open(&pread, &opts).unwrap_or_else(|e| panic!("{format} over pread: {e}")),
            tessera::open(&bytes[..], &opts).unwrap(),
        ];
        let want = Model::from_source(files[0].as_ref()).unwrap();
        for f in &files[1..] {
            assert_eq!(f.format(), format);
            assert_eq!(f.metadata(), want.metadata(), "{format}");
            let got = Model::from_source(f.as_ref()).unwrap();
            assert_eq!(
                got.tensor_infos().len(),
                tensor_count(format) as usize,
                "{format}"
            );
            for info in want.tensor_infos() {
                assert_eq!(
                    got.tensor(&info.name).unwrap().data().unwrap(),
                    want.tensor(&info.name).unwrap().data().unwrap(),
                    "{format} {}",
                    info.name
                );
            }
            assert!(f.verify(&Default::default()).is_ok(), "{format}: verify");
        }
    }
}

#[test]
fn a_file_cut_short_is_a_truncation_error_over_every_source() {
    let dir = tempfile::tempdir().unwrap();
    for format in readable_formats() {
        let bytes = written(format);
        // Cut inside the tensor data: an index that points past the end.
        let cut = &bytes[..bytes.len() * 3 / 4];
        let path = dir.path().join(format!("cut.{}", ext(format)));
        std::fs::write(&path, cut).unwrap();
        let pread = PreadFile::open(&path).unwrap();
        let outcome = tessera::open(&pread, &ReadOptions::default()).and_then(|f| {
            let infos = f.tensor_infos().to_vec();
            for i in &infos {
                f.tensor(&i.name)?;
            }
            Ok(())
        });
        let e = outcome.expect_err(&format!("{format}: a file cut at 3/4 read without error"));
        assert!(
            matches!(
                e.kind(),
                tessera::ErrorKind::Malformed | tessera::ErrorKind::Integrity
            ),
            "{format}: {e}"
        );
    }
}

#[test]
fn a_gguf_index_larger_than_the_first_read_is_read_in_growing_steps() {
    // A 40,000-token vocabulary: an index of about 600 KB, past the first 32 KiB read.
    let mut m = model(Format::Gguf);
    let vocab: Vec<tessera::Value> = (0..40_000)
        .map(|i| tessera::Value::Str(format!("token_{i:05}")))
        .collect();
    m.metadata.insert("general.architecture", "llama");
    m.metadata
        .insert("tokenizer.ggml.tokens", tessera::Value::List(vocab));
    let p = prepare(&m, Format::Gguf, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Gguf, &p, &mut out, &WriteOptions::default()).unwrap();
    let bytes = out.into_inner();
    let mem = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    let index_end = mem.tensor_infos()[0].storage.offset.unwrap();
    assert!(index_end > 500_000, "{index_end}");
    let src = CountingSource::new(bytes.clone());
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    assert_eq!(file.metadata(), mem.metadata());
    assert!(
        src.bytes() < 2 * index_end + 64 * 1024 && src.bytes() < bytes.len() as u64 / 2,
        "read {} bytes for a {index_end}-byte index",
        src.bytes()
    );
}

#[test]
fn aero_checked_reads_over_a_counting_source_hash_only_the_pages_a_tensor_touches() {
    // 16 tensors of 256 KiB in one shard, 64 KiB pages: a checked read of one tensor
    // reads its 4 pages (and the PHSH chunk), not the 4 MiB shard.
    let m = model(Format::Aero);
    let opts = WriteOptions::default().with(
        tessera::formats::aero::AeroOptions::default()
            .page_hashes(Some(64 * 1024))
            .control_integrity(true),
    );
    let p = prepare(&m, Format::Aero, ConvertOptions::default()).unwrap();
    let mut out = Cursor::new(Vec::new());
    write_to(Format::Aero, &p, &mut out, &opts).unwrap();
    let mut bytes = out.into_inner();
    let src = CountingSource::new(bytes.clone());
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    assert!(src.bytes() <= 64 * 1024, "open read {}", src.bytes());
    let name = &file.tensor_infos()[5].name.clone();
    src.reset();
    let t = file.tensor(name).unwrap();
    assert_eq!(t.nbytes(), 256 * 1024);
    let read = src.bytes();
    assert!(
        (2 * 256 * 1024..4 * 256 * 1024).contains(&read),
        "a checked read of one tensor read {read} bytes"
    );
    // One flipped byte inside tensor 5 fails its checked read over the counting source,
    // and only its pages: tensor 0 still reads.
    let at = file.tensor_infos()[5].storage.offset.unwrap() + 1000;
    bytes[at as usize] ^= 0x01;
    let src = CountingSource::new(bytes);
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    let e = file.tensor(name).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("phsh"), "{e}");
    file.tensor(&file.tensor_infos()[0].name).unwrap();
    assert!(!file.verify(&Default::default()).is_ok());
}

#[test]
fn npz_deflated_members_open_from_their_headers_and_stored_ones_check_their_crc() {
    let m = model(Format::Npz);
    let p = prepare(&m, Format::Npz, ConvertOptions::default()).unwrap();
    let deflated = {
        let opts = WriteOptions::default().compression(tessera::convert::Compression::Zstd(3));
        let mut out = Cursor::new(Vec::new());
        write_to(Format::Npz, &p, &mut out, &opts).unwrap();
        out.into_inner()
    };
    let mem = tessera::open(&deflated, &ReadOptions::default()).unwrap();
    assert_eq!(mem.tensor_infos()[0].storage.encoding, "npz-deflate");
    let src = CountingSource::new(deflated.clone());
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    assert!(src.bytes() <= 64 * 1024, "open read {}", src.bytes());
    for info in mem.tensor_infos() {
        src.reset();
        let a = file.tensor(&info.name).unwrap();
        assert!(src.bytes() >= info.storage.stored_bytes, "{}", info.name);
        assert_eq!(
            a.data().unwrap(),
            mem.tensor(&info.name).unwrap().data().unwrap()
        );
    }
    // A stored member with one flipped array byte: its checked read over a source that
    // is not in memory fails its CRC-32, naming it; the others read.
    let mut stored = written(Format::Npz);
    let mem = tessera::open(&stored, &ReadOptions::default()).unwrap();
    let bad = mem.tensor_infos()[3].clone();
    let at = bad.storage.offset.unwrap() + 10;
    drop(mem);
    stored[at as usize] ^= 0x40;
    let src = CountingSource::new(stored);
    let file = tessera::open(&src, &ReadOptions::default()).unwrap();
    let e = file.tensor(&bad.name).unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains(&bad.name), "{e}");
    file.tensor(&file.tensor_infos()[0].name).unwrap();
}

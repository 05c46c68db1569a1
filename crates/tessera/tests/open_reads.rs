//! What opening a file reads, format by format, over a source that is not in memory.
//!
//! A format that reads by range ([`Access::Ranges`]) must build its index from a few
//! kilobytes — never the tensor bytes — and read each tensor when asked; a format whose
//! layout forces a full scan ([`Access::Whole`]) says so in the registry and reads the
//! file once. Every format gives the same tensors over a memory map, positional reads
//! (`pread`) and an in-memory buffer.

use std::borrow::Cow;
use std::io::Cursor;

use tessera::any::{reader_for, Access};
use tessera::convert::{capabilities, prepare, write_to};
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

/// A file extension for `format` (its name when it has none of its own: zTensor v2
/// shares `.zt` with v1).
fn ext(format: Format) -> &'static str {
    format
        .extensions()
        .first()
        .copied()
        .unwrap_or(format.name())
}

fn readable_formats() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.can_read() && f.can_write())
        .collect()
}

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
            if access == Access::Ranges {
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

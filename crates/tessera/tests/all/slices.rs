//! Slice reads (`tessera::slice`): equal to a cut of the whole tensor, made here by a
//! walk over every element, for every dtype of every format Tessera writes and reads;
//! only the selected bytes read where a format stores a tensor raw (counted with
//! `CountingSource`, and against nginx's log for a remote object); the request pool
//! bounded; a range check (a page manifest's hook) checks exactly the pages a slice
//! touches; sub-byte dtypes sliced on whole bytes only.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Mutex;

use tessera::convert::{capabilities, prepare, write_to};
use tessera::slice::{read_slice, read_slice_with, Index, RangeCheck, SliceOptions};
use tessera::source::CountingSource;
use tessera::{ConvertOptions, DType, Format, Model, TensorInfo, TensorView};

use crate::common::{clear_padding, readable_formats};

/// The elements of `whole` (row-major, `shape`, `bits` per element, whole bytes) that
/// `index` selects, walked one element at a time as numpy defines basic indexing:
/// independent of the slice reader's runs and ranges.
fn cut(whole: &[u8], shape: &[u64], size: usize, index: &[Index]) -> (Vec<u64>, Vec<u8>) {
    // Each dimension's positions, in order, and whether it stays.
    let n = shape.len();
    let fixed = index.iter().filter(|i| **i != Index::Ellipsis).count();
    let mut full = Vec::new();
    for i in index {
        if *i == Index::Ellipsis {
            full.extend(std::iter::repeat_n(Index::ALL, n - fixed));
        } else {
            full.push(*i);
        }
    }
    full.resize(n, Index::ALL);
    let mut axes: Vec<(Vec<u64>, bool)> = Vec::new();
    for (d, ix) in full.iter().enumerate() {
        let size = shape[d] as i64;
        let norm = |v: i64| if v < 0 { v + size } else { v };
        axes.push(match *ix {
            Index::At(i) => (vec![norm(i) as u64], false),
            Index::Range { start, stop, step } => {
                let step = step.unwrap_or(1);
                let mut v = Vec::new();
                if step > 0 {
                    let mut p = start.map_or(0, norm);
                    let end = stop.map_or(size, norm);
                    while p < end {
                        v.push(p as u64);
                        p += step;
                    }
                } else {
                    let mut p = start.map_or(size - 1, |s| norm(s).min(size - 1));
                    let end = stop.map_or(-1, norm);
                    while p > end {
                        v.push(p as u64);
                        p += step;
                    }
                }
                (v, true)
            }
            Index::Ellipsis => unreachable!(),
        });
    }
    let out_shape = axes
        .iter()
        .filter(|a| a.1)
        .map(|a| a.0.len() as u64)
        .collect();
    let mut out = Vec::new();
    let mut pos = vec![0usize; n];
    if axes.iter().any(|a| a.0.is_empty()) {
        return (out_shape, out);
    }
    loop {
        let mut flat = 0u64;
        for d in 0..n {
            flat = flat * shape[d] + axes[d].0[pos[d]];
        }
        let at = flat as usize * size;
        out.extend_from_slice(&whole[at..at + size]);
        let mut d = n;
        loop {
            if d == 0 {
                return (out_shape, out);
            }
            d -= 1;
            pos[d] += 1;
            if pos[d] < axes[d].0.len() {
                break;
            }
            pos[d] = 0;
        }
    }
}

fn selections() -> Vec<Vec<Index>> {
    [
        "1:4",
        "::2,1,:",
        "-1",
        "::-1,::-2,1:",
        "...,0",
        "2:2",
        ":,:,::-1",
        "1,2,3",
        ":,1:4:2,-3:-1",
        "...",
        "5:0:-2,...",
    ]
    .iter()
    .map(|s| tessera::slice::parse(s).unwrap())
    .collect()
}

/// Bytes of `n` elements of `dtype` that every writer takes (bool 0/1, small floats).
fn values(dtype: DType, n: usize, seed: u8) -> Vec<u8> {
    let len = dtype.nbytes(n as u64).unwrap() as usize;
    (0..len)
        .map(|i| {
            let b = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed as u32) as u8;
            match dtype {
                DType::Bool => b & 1,
                _ => b & 0x3f,
            }
        })
        .collect()
}

fn written(format: Format, m: &Model) -> Vec<u8> {
    let p = prepare(m, format, ConvertOptions::default()).unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    write_to(format, &p, &mut out, &Default::default()).unwrap();
    out.into_inner()
}

#[test]
fn slices_equal_a_cut_of_the_whole_tensor_every_format_every_dtype() {
    for format in readable_formats() {
        let caps = capabilities(format).unwrap();
        let dtypes: Vec<DType> = caps
            .dtypes
            .iter()
            .copied()
            .filter(|d| !d.is_packed())
            .collect();
        let mut m = Model::new();
        let single = format == Format::Npy;
        for (k, &d) in dtypes.iter().enumerate() {
            let info = TensorInfo::dense(format!("t{k}"), d, vec![6, 5, 4]);
            m.push(TensorView::dense(info, Cow::Owned(values(d, 120, k as u8))).unwrap())
                .unwrap();
            if single {
                break;
            }
        }
        let bytes = written(format, &m);
        let f = tessera::open(&bytes[..], &Default::default()).unwrap();
        for info in f.tensor_infos() {
            let whole = f.tensor(&info.name).unwrap();
            let whole = whole.parts[0].bytes.as_ref();
            for ix in selections() {
                let s = read_slice(f.as_ref(), &info.name, &ix, None)
                    .unwrap_or_else(|e| panic!("{format:?} {} {ix:?}: {e}", info.name));
                let (shape, want) = cut(whole, &info.shape, info.dtype.size(), &ix);
                assert_eq!(s.info.shape, shape, "{format:?} {} {ix:?}", info.name);
                assert_eq!(s.data, want, "{format:?} {} {ix:?}", info.name);
                assert_eq!(s.info.dtype, info.dtype);
            }
        }
    }
}

/// A safetensors file whose tensor `w` is `rows` × `cols` f32, and `w`'s bytes.
fn matrix(rows: u64, cols: u64) -> (Vec<u8>, Vec<u8>) {
    let mut m = Model::new();
    let data = values(DType::F32, (rows * cols) as usize, 7);
    let info = TensorInfo::dense("w", DType::F32, vec![rows, cols]);
    m.push(TensorView::dense(info, Cow::Owned(data.clone())).unwrap())
        .unwrap();
    (written(Format::Safetensors, &m), data)
}

/// [`matrix`] over a counting source.
fn counted(rows: u64, cols: u64) -> (CountingSource<Vec<u8>>, Vec<u8>) {
    let (file, data) = matrix(rows, cols);
    (CountingSource::new(file), data)
}

#[test]
fn a_slice_reads_its_bytes_not_the_tensor() {
    // 256 rows of 32 KiB (8 MiB).
    let (src, data) = counted(256, 8192);
    let f = tessera::open(&src, &Default::default()).unwrap();
    let row = 8192 * 4;
    // Rows 100..110: exactly their bytes, one range.
    src.reset();
    let s = read_slice(
        f.as_ref(),
        "w",
        &tessera::slice::parse("100:110").unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(s.data, data[100 * row..110 * row]);
    assert_eq!((src.bytes(), s.ranges), (10 * row as u64, 1));
    // Columns 0..16 of every row: 64 bytes of each 32 KiB row, a range per row.
    src.reset();
    let s = read_slice(
        f.as_ref(),
        "w",
        &tessera::slice::parse(":,0:16").unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(s.data.len(), 256 * 64);
    assert_eq!(src.bytes(), 256 * 64);
    assert_eq!(s.ranges, 256);
    // At most 8 ranges: the gap widens until the runs merge into 8 or fewer.
    src.reset();
    let opts = SliceOptions {
        max_ranges: 8,
        ..Default::default()
    };
    let ix = tessera::slice::parse(":,0:16").unwrap();
    let s8 = read_slice_with(f.as_ref(), "w", &ix, None, &opts).unwrap();
    assert_eq!(s8.data, s.data);
    assert!(s8.ranges <= 8, "{} ranges", s8.ranges);
    assert!(src.bytes() < data.len() as u64, "{}", src.bytes());
}

#[test]
fn out_of_range_is_refused_naming_the_tensor_and_dimension() {
    let (src, _) = counted(4, 6);
    let f = tessera::open(&src, &Default::default()).unwrap();
    for (spec, says) in [
        ("4", "index 4 is out of range for dimension 0 of size 4"),
        (":,-7", "index -7 is out of range for dimension 1 of size 6"),
        (":,2:7", "stop 7 is out of range for dimension 1 of size 6"),
        ("0,0,0", "3 indices for a tensor of 2 dimensions"),
        ("...,...", "more than one '...'"),
    ] {
        let e = read_slice(f.as_ref(), "w", &tessera::slice::parse(spec).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tensor \"w\"") && e.contains(says),
            "{spec}: {e}"
        );
    }
    assert!(tessera::slice::parse("1:2:0").is_err());
    assert!(tessera::slice::parse("a").is_err());
    let e = read_slice(f.as_ref(), "nope", &[], None).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn split_follows_array_split() {
    // 10 in 4 parts: 3, 3, 2, 2; 2 in 4 parts: 1, 1, 0, 0.
    let want = [(0, 3), (3, 6), (6, 8), (8, 10)];
    for (p, (a, b)) in want.iter().enumerate() {
        let ix = tessera::slice::split(&[10, 3], 0, p as u64, 4).unwrap();
        assert_eq!(ix[0], Index::range(*a, *b));
        assert_eq!(ix[1], Index::ALL);
    }
    let last = tessera::slice::split(&[3, 2], -1, 3, 4).unwrap();
    assert_eq!(last[1], Index::range(2, 2));
    assert!(tessera::slice::split(&[3], 1, 0, 2).is_err());
    assert!(tessera::slice::split(&[3], 0, 2, 2).is_err());
}

/// Pages of 4 KiB of tensor `w`, one of them "damaged"; records what was checked.
struct Pages {
    bad: u64,
    checked: Mutex<Vec<Range<u64>>>,
}

impl RangeCheck for Pages {
    fn widen(&self, _: &str, r: Range<u64>) -> Range<u64> {
        (r.start / 4096 * 4096)..r.end.div_ceil(4096) * 4096
    }
    fn check(&self, tensor: &str, r: Range<u64>, bytes: &[u8]) -> tessera::Result<()> {
        assert_eq!(r.start % 4096, 0);
        assert_eq!(bytes.len() as u64, r.end - r.start);
        self.checked.lock().unwrap().push(r.clone());
        let page = self.bad;
        if r.start <= page * 4096 && page * 4096 < r.end {
            return Err(tessera::Error::integrity(format!(
                "tensor {tensor:?} page {page}: digest mismatch"
            )));
        }
        Ok(())
    }
}

#[test]
fn a_range_check_sees_the_pages_a_slice_touches_only() {
    // 64 rows of 1 KiB: 4 rows a page.
    let (src, data) = counted(64, 256);
    let f = tessera::open(&src, &Default::default()).unwrap();
    let pages = Pages {
        bad: 5,
        checked: Mutex::new(Vec::new()),
    };
    // Rows 2..6 lie in pages 0 and 1: read widened to them, checked, the rows cut out.
    src.reset();
    let ix = tessera::slice::parse("2:6").unwrap();
    let s = read_slice(f.as_ref(), "w", &ix, Some(&pages)).unwrap();
    assert_eq!(s.data, data[2 * 1024..6 * 1024]);
    assert_eq!(*pages.checked.lock().unwrap(), vec![0..8192]);
    assert_eq!(src.bytes(), 8192);
    assert!(s.unverified.is_none());
    // A slice touching page 5 (rows 20..24) fails naming the tensor and the page.
    let e = read_slice(
        f.as_ref(),
        "w",
        &tessera::slice::parse("22").unwrap(),
        Some(&pages),
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"w\" page 5"), "{e}");
    // Rows elsewhere pass.
    read_slice(
        f.as_ref(),
        "w",
        &tessera::slice::parse("24:40").unwrap(),
        Some(&pages),
    )
    .unwrap();
}

#[test]
fn sub_byte_dtypes_slice_on_whole_bytes_only() {
    let format = readable_formats()
        .into_iter()
        .find(|f| capabilities(*f).unwrap().dtypes.contains(&DType::F4E2M1))
        .expect("a format stores f4_e2m1");
    let mut m = Model::new();
    let mut bytes = values(DType::F4E2M1, 24, 3);
    clear_padding(DType::F4E2M1, &[4, 6], &mut bytes);
    let info = TensorInfo::dense("q", DType::F4E2M1, vec![4, 6]);
    m.push(TensorView::dense(info, Cow::Owned(bytes.clone())).unwrap())
        .unwrap();
    let file = written(format, &m);
    let f = tessera::open(&file[..], &Default::default()).unwrap();
    // Rows are 3 bytes: rows 1..3 are bytes 3..9; columns 2..6 of each row whole bytes.
    let s = read_slice(
        f.as_ref(),
        "q",
        &tessera::slice::parse("1:3").unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(s.data, bytes[3..9]);
    let s = read_slice(
        f.as_ref(),
        "q",
        &tessera::slice::parse(":,2:6").unwrap(),
        None,
    )
    .unwrap();
    let want: Vec<u8> = (0..4)
        .flat_map(|r| bytes[r * 3 + 1..r * 3 + 3].to_vec())
        .collect();
    assert_eq!(s.data, want);
    // Column 1 starts mid-byte.
    let e = read_slice(
        f.as_ref(),
        "q",
        &tessera::slice::parse(":,1:3").unwrap(),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("\"q\"") && e.contains("cuts a byte") && e.contains("f4_e2m1"),
        "{e}"
    );
}

#[cfg(feature = "remote")]
#[test]
fn a_remote_slice_costs_its_bytes_and_the_pool_is_bounded() {
    use tessera::remote::{Location, RemoteSource};
    let Some(srv) =
        crate::remote::servers("a_remote_slice_costs_its_bytes_and_the_pool_is_bounded")
    else {
        return;
    };
    // 64 rows of 128 KiB (8 MiB).
    let (file, data) = matrix(64, 32768);
    let name = "slices/rows.safetensors";
    let (s3, http) = srv.stage(name, &file);
    let row = 128 << 10;
    for url in [&http, &s3] {
        let before = srv.http_bytes(name);
        let remote = srv.remote().concurrency(Some(3));
        let rs = RemoteSource::open(&Location::parse(url).unwrap(), &remote).unwrap();
        let f = tessera::open(&rs, &Default::default()).unwrap();
        let opened = rs.bytes_fetched();
        // A quarter by rows: its bytes, plus nothing but the index fetched at open.
        let s = read_slice(
            f.as_ref(),
            "w",
            &tessera::slice::parse("16:32").unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(s.data, data[16 * row..32 * row]);
        let cost = rs.bytes_fetched() - opened;
        assert!(
            cost <= 16 * row as u64 + (64 << 10),
            "{url}: {cost} bytes for a slice of {}",
            16 * row
        );
        if url == &http {
            let served = srv.http_bytes(name) - before;
            assert!(
                served <= opened + 16 * row as u64 + (64 << 10),
                "nginx sent {served} bytes"
            );
        }
        // Every other row, 256 bytes of it: 32 ranges 256 KiB apart, on a pool of 3.
        let s = read_slice(
            f.as_ref(),
            "w",
            &tessera::slice::parse("::2,0:64").unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(s.data.len(), 32 * 256);
        assert!(rs.bytes_fetched() - opened <= 16 * row as u64 + 32 * 256 + (64 << 10));
        assert!(
            rs.peak_in_flight() <= 3,
            "{url}: {} in flight",
            rs.peak_in_flight()
        );
        assert!(
            rs.peak_in_flight() >= 2,
            "{url}: the ranges went one at a time"
        );
    }
}

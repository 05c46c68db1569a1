//! The GPTRS writer streams: writing 64 MiB of tensors that a source produces on demand
//! never holds much more than one tensor. Measured with a counting global allocator
//! (this test binary only).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tessera::convert::{self, WriteOptions};
use tessera::{DType, Format, Metadata, Result, TensorInfo, TensorSource, TensorView};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::SeqCst) + l.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        System.dealloc(p, l);
        CURRENT.fetch_sub(l.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const TENSORS: usize = 64;
const ELEMS: u64 = 256 * 1024; // 1 MiB of f32 each

/// Makes every tensor's bytes when asked, and records the order it was asked in.
struct OnDemand {
    meta: Metadata,
    infos: Vec<TensorInfo>,
    asked: Mutex<Vec<String>>,
}

impl TensorSource for OnDemand {
    fn metadata(&self) -> &Metadata {
        &self.meta
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self.infos.iter().find(|i| i.name == name).unwrap().clone();
        self.asked.lock().unwrap().push(name.to_string());
        let seed = name.len() as u8;
        let data: Vec<u8> = (0..ELEMS * 4).map(|i| (i as u8) ^ seed).collect();
        TensorView::dense(info, Cow::Owned(data))
    }
}

#[test]
fn writing_holds_about_one_tensor_at_a_time() {
    let mut meta = Metadata::new();
    meta.insert("kind", "gpt");
    meta.insert("config", Metadata::new());
    // Given in reverse name order: the writer asks in name order.
    let infos: Vec<TensorInfo> = (0..TENSORS)
        .rev()
        .map(|i| TensorInfo::dense(format!("layer.{i:03}.w"), DType::F32, vec![ELEMS]))
        .collect();
    let src = OnDemand {
        meta,
        infos,
        asked: Mutex::new(Vec::new()),
    };
    let one = (ELEMS * 4) as usize;
    // An output that counts and drops the bytes, so only the writer's memory counts.
    struct Sink(u64);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl std::io::Seek for Sink {
        fn seek(&mut self, _: std::io::SeekFrom) -> std::io::Result<u64> {
            Ok(self.0)
        }
    }
    let mut out = Sink(0);
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    convert::write_to(
        Format::GptrsCheckpoint,
        &src,
        &mut out,
        &WriteOptions::default(),
    )
    .unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - base;
    assert!(out.0 > (TENSORS * one) as u64, "all data was written");
    assert!(
        peak >= one,
        "the counter sees the source's tensor ({peak} bytes)"
    );
    assert!(
        peak < 2 * one,
        "peak {peak} bytes while writing {TENSORS} tensors of {one}: not streaming"
    );
    let asked = std::mem::take(&mut *src.asked.lock().unwrap());
    let mut sorted = asked.clone();
    sorted.sort();
    assert_eq!(asked, sorted, "data is requested in name order, once each");
    assert_eq!(asked.len(), TENSORS);
}

//! Writers stream: writing 64 MiB of tensors that a source produces on demand through
//! the GPTRS writer holds no more than the driver's two read-ahead batches (made 4 MiB
//! here with the `test-hooks` variable `TESSERA_TEST_READ_AHEAD`, else the whole
//! source would be one batch). Measured with a counting global allocator (the test
//! binary's; it counts only in a subprocess of the binary that runs this test alone, as
//! the other tests allocate on their own threads).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::borrow::Cow;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Mutex;

use tessera::convert::{self, WriteOptions};
use tessera::{DType, Format, Metadata, Result, TensorInfo, TensorSource, TensorView};

struct Counting;

/// Set by the test in its own subprocess only: elsewhere the allocator just forwards.
static COUNTING: AtomicBool = AtomicBool::new(false);
// Signed: blocks allocated before counting began may be freed while it counts.
static CURRENT: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        // SAFETY: the caller's `alloc` contract, passed on unchanged.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            let size = l.size() as isize;
            let now = CURRENT.fetch_add(size, Ordering::SeqCst) + size;
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        // SAFETY: `p` came from `alloc` above with layout `l` (the caller's contract).
        unsafe { System.dealloc(p, l) };
        if COUNTING.load(Ordering::Relaxed) {
            CURRENT.fetch_sub(l.size() as isize, Ordering::SeqCst);
        }
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

/// Set in the environment of the subprocess that runs the test alone.
const ALONE: &str = "TESSERA_TEST_ALLOCATIONS_ALONE";

/// The driver's read-ahead batch in the subprocess: four tensors.
const BATCH: usize = 4 << 20;

#[test]
fn writing_holds_about_two_read_ahead_batches() {
    if std::env::var_os(ALONE).is_none() {
        // This binary runs its tests on parallel threads that all allocate: run this one
        // alone in a subprocess of the binary, and count there.
        let name = "gptrs_streaming::writing_holds_about_two_read_ahead_batches";
        let o = Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--test-threads=1"])
            .env(ALONE, "1")
            .env("TESSERA_TEST_READ_AHEAD", BATCH.to_string())
            .output()
            .unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{out}");
        assert!(out.contains("test result: ok. 1 passed"), "{out}");
        return;
    }
    COUNTING.store(true, Ordering::SeqCst);
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
    let peak = (PEAK.load(Ordering::SeqCst) - base) as usize;
    assert!(out.0 > (TENSORS * one) as u64, "all data was written");
    assert!(
        peak >= one,
        "the counter sees the source's tensor ({peak} bytes)"
    );
    assert!(
        peak < 2 * BATCH + one,
        "peak {peak} bytes while writing {TENSORS} tensors of {one} in batches of {BATCH}: \
         not streaming"
    );
    // Each tensor asked once; a batch's on the pool, in any order, the batches in
    // name order.
    let asked = std::mem::take(&mut *src.asked.lock().unwrap());
    assert_eq!(asked.len(), TENSORS);
    let per = BATCH / one;
    for (i, batch) in asked.chunks(per).enumerate() {
        let mut got = batch.to_vec();
        got.sort();
        let want: Vec<String> = (i * per..(i + 1) * per)
            .map(|t| format!("layer.{t:03}.w"))
            .collect();
        assert_eq!(got, want, "batch {i}");
    }
}

//! The writer protocol. Every streaming writer speaks [`StreamWriter`]: the tensor names
//! in the order the format needs their bytes ([`StreamWriter::order`]), then one
//! [`StreamWriter::write_tensor`] per tensor in that order, then
//! [`StreamWriter::finish`]. A writer that compresses or hashes tensor bytes adds an
//! encoding companion ([`StreamWriter::encoder`]): a function of one tensor that runs
//! on the rayon pool, whose result the writer is handed with the tensor, in order.
//!
//! [`drive`] is the one loop that feeds a writer from a [`TensorSource`]: it reads the
//! tensors in batches of about [`READ_AHEAD`] bytes with [`TensorSource::tensors`] on
//! the pool (a compressed source decodes and checks on every core) and encodes them
//! there, the next batch while the writing thread writes the one before; before each
//! tensor it asks [`TensorSource::interrupted`] on the writing thread (Python's Ctrl-C
//! is seen there only); the first error in order stops it. Peak memory is two batches.
//!
//! [`InOrder`] is the order and completeness check a writer keeps for callers that
//! drive it by hand (tests, Python): a tensor out of turn or after the last is refused
//! naming the one expected, a `finish` before the last tensor naming the first missing.
//!
//! This module names no format; the formats implement the trait (`formats/*/write.rs`).

use std::collections::HashMap;

use rayon::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::model::TensorSource;
use crate::tensor::TensorView;

/// How many decoded bytes [`drive`] reads ahead, per batch (two batches are held at
/// once: the one being written and the one being read and encoded). A batch holds one
/// tensor at least.
pub const READ_AHEAD: u64 = 64 << 20;

/// An encoding companion: what the pool makes of one tensor before its writer takes it
/// (compressed bytes, digests, encoded text). Runs on any thread, in any order.
pub type Encoder<E> = Box<dyn Fn(&TensorView<'_>) -> Result<E> + Send + Sync>;

/// A streaming writer: see the module docs.
pub trait StreamWriter {
    /// What the encoding companion makes of a tensor (`()` for a writer without one).
    type Encoded: Send;
    /// What [`StreamWriter::finish`] gives back (the sink, a report).
    type Done;

    /// The tensor names in the order the writer takes them.
    fn order(&self) -> Vec<String>;

    /// About how many bytes of tensors a batch holds ([`READ_AHEAD`] unless the writer
    /// wants its text or encoded bytes written while still in cache).
    fn read_ahead(&self) -> u64 {
        READ_AHEAD
    }

    /// The encoding companion, if the writer's tensors are to be encoded on the pool
    /// ([`drive`] then hands each tensor's result to [`StreamWriter::write_tensor`]).
    fn encoder(&self) -> Option<Encoder<Self::Encoded>> {
        None
    }

    /// Writes the next tensor (`name`, the next in [`StreamWriter::order`]) with what
    /// the companion made of it (`None` without a companion).
    fn write_tensor(
        &mut self,
        name: &str,
        view: TensorView<'_>,
        encoded: Option<Self::Encoded>,
    ) -> Result<()>;

    /// Checks every tensor came and writes what follows the data.
    fn finish(self) -> Result<Self::Done>;
}

/// The order and completeness check of a streaming writer over its plan (the tensors in
/// the order it takes them). Always compiled: every writer uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InOrder {
    next: usize,
}

impl InOrder {
    /// A check at the first planned tensor.
    pub fn new() -> InOrder {
        InOrder::default()
    }

    /// How many tensors were written.
    pub fn written(&self) -> usize {
        self.next
    }

    /// The planned entry that `name`'s bytes must be: the next of `plan`, whose name
    /// `name_of` gives. Refuses a tensor after the last, or out of order, naming the one
    /// expected. Call [`InOrder::advance`] once it is written.
    pub fn next<'p, T>(&self, plan: &'p [T], name: &str, name_of: fn(&T) -> &str) -> Result<&'p T> {
        let p = plan.get(self.next).ok_or_else(|| {
            Error::invalid_input(format!("tensor {name:?} given after the last tensor"))
        })?;
        if name_of(p) != name {
            return Err(Error::invalid_input(format!(
                "tensor {name:?} given where {:?} was expected",
                name_of(p)
            )));
        }
        Ok(p)
    }

    /// The next tensor is written.
    pub fn advance(&mut self) {
        self.next += 1;
    }

    /// The next `n` tensors are written (a writer that takes several at once).
    pub fn advance_by(&mut self, n: usize) {
        self.next += n;
    }

    /// Refuses a `finish` (of `writer`: "GGUF writer") before every planned tensor came.
    pub fn all_written<T>(&self, writer: &str, plan: &[T], name_of: fn(&T) -> &str) -> Result<()> {
        match plan.get(self.next) {
            Some(p) => Err(Error::invalid_input(format!(
                "{writer} finished before tensor {:?}",
                name_of(p)
            ))),
            None => Ok(()),
        }
    }
}

/// Feeds `writer` the tensors of `src` in the writer's order and finishes it: see the
/// module docs.
pub fn drive<W: StreamWriter>(src: &dyn TensorSource, writer: W) -> Result<W::Done> {
    let budget = read_ahead(&writer);
    drive_by(src, writer, budget)
}

/// The writer's [`StreamWriter::read_ahead`]; with feature `test-hooks` (never in a
/// user's build), `TESSERA_TEST_READ_AHEAD=N` makes it N bytes, so that a test can
/// measure the memory two batches take without writing hundreds of MiB.
fn read_ahead<W: StreamWriter>(writer: &W) -> u64 {
    #[cfg(feature = "test-hooks")]
    if let Some(n) = std::env::var("TESSERA_TEST_READ_AHEAD")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    writer.read_ahead()
}

/// One tensor read (and encoded), ready for its writer.
type Item<'s, E> = Result<(TensorView<'s>, Option<E>)>;

/// A batch's names and what was read (and encoded) of them.
type Batch<'n, 's, E> = (&'n [&'n str], Vec<Item<'s, E>>);

/// [`drive`] with batches of about `budget` bytes.
pub(crate) fn drive_by<W: StreamWriter>(
    src: &dyn TensorSource,
    mut writer: W,
    budget: u64,
) -> Result<W::Done> {
    let order = writer.order();
    let names: Vec<&str> = order.iter().map(String::as_str).collect();
    let encoder = writer.encoder();
    let encoder = encoder.as_ref();
    let mut pending: Option<Batch<'_, '_, W::Encoded>> = None;
    let batches = batches(src, &names, budget);
    for next in batches.into_iter().map(Some).chain(std::iter::once(None)) {
        let (read, written) = std::thread::scope(|s| {
            let h = next.map(|b| s.spawn(move || read_batch(src, b, encoder)));
            let mut written = Ok(());
            if let Some((b, items)) = pending.take() {
                for (name, item) in b.iter().zip(items) {
                    // Asked here, on the writing thread: the reads ran on others.
                    written = src
                        .interrupted()
                        .and_then(|()| item.and_then(|(v, e)| writer.write_tensor(name, v, e)));
                    if written.is_err() {
                        break;
                    }
                }
            }
            (h.map(|h| h.join()), written)
        });
        written?;
        match (next, read) {
            (Some(b), Some(Ok(items))) => pending = Some((b, items)),
            (_, Some(Err(_))) => {
                return Err(Error::new(
                    ErrorKind::Io,
                    "a thread reading tensors ahead panicked",
                ))
            }
            _ => {}
        }
    }
    writer.finish()
}

/// `names` cut into batches of about `budget` decoded bytes (one tensor at least).
fn batches<'n>(src: &dyn TensorSource, names: &'n [&'n str], budget: u64) -> Vec<&'n [&'n str]> {
    let sizes: HashMap<&str, u64> = src
        .tensor_infos()
        .iter()
        .map(|i| (i.name.as_str(), i.dense_nbytes().unwrap_or(budget)))
        .collect();
    let mut batches = Vec::new();
    let (mut start, mut held) = (0usize, 0u64);
    for (i, n) in names.iter().enumerate() {
        held = held.saturating_add(sizes.get(n).copied().unwrap_or(0));
        if held >= budget || i + 1 == names.len() {
            batches.push(&names[start..=i]);
            start = i + 1;
            held = 0;
        }
    }
    batches
}

/// Reads a batch on the pool and, with a companion, encodes its tensors there.
fn read_batch<'s, E: Send>(
    src: &'s dyn TensorSource,
    names: &[&str],
    encoder: Option<&Encoder<E>>,
) -> Vec<Item<'s, E>> {
    let views = src.tensors(names);
    match encoder {
        None => views.into_iter().map(|v| v.map(|v| (v, None))).collect(),
        Some(enc) => views
            .into_par_iter()
            .map(|v| v.and_then(|v| enc(&v).map(|e| (v, Some(e)))))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::tensor::TensorInfo;
    use crate::DType;
    use std::borrow::Cow;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// A model that counts the tensors read from it (and records the batches asked).
    struct Counting(Model, AtomicUsize, usize, Mutex<Vec<usize>>);

    impl TensorSource for Counting {
        fn metadata(&self) -> &crate::Metadata {
            self.0.metadata()
        }
        fn tensor_infos(&self) -> &[TensorInfo] {
            self.0.tensor_infos()
        }
        fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.tensor(name)
        }
        fn tensors(&self, names: &[&str]) -> Vec<Result<TensorView<'_>>> {
            self.3.lock().unwrap().push(names.len());
            names.iter().map(|n| self.tensor(n)).collect()
        }
        /// "Ctrl-C" once more than `self.2` tensors were read.
        fn interrupted(&self) -> Result<()> {
            if self.1.load(Ordering::SeqCst) > self.2 {
                return Err(Error::invalid_input("interrupted"));
            }
            Ok(())
        }
    }

    fn model(n: u8) -> Counting {
        let mut m = Model::new();
        for i in 0..n {
            let info = TensorInfo::dense(format!("t{i}"), DType::U8, vec![1000]);
            m.push(TensorView::dense(info, Cow::Owned(vec![i; 1000])).unwrap())
                .unwrap();
        }
        Counting(m, AtomicUsize::new(0), usize::MAX, Mutex::default())
    }

    /// A writer that records what it is given (name, first byte, encoded value and the
    /// thread it ran on), with an optional companion and a failing tensor.
    struct Recorder {
        order: Vec<String>,
        plan: InOrder,
        seen: Vec<(String, u8, Option<u64>)>,
        threads: Vec<std::thread::ThreadId>,
        encode: bool,
        fail_at: Option<&'static str>,
        /// Threads the companion ran on.
        encoded_on: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }

    impl Recorder {
        fn new(order: &[&str]) -> Recorder {
            Recorder {
                order: order.iter().map(|s| s.to_string()).collect(),
                plan: InOrder::new(),
                seen: Vec::new(),
                threads: Vec::new(),
                encode: false,
                fail_at: None,
                encoded_on: Arc::default(),
            }
        }
    }

    impl StreamWriter for &mut Recorder {
        type Encoded = u64;
        type Done = ();
        fn order(&self) -> Vec<String> {
            self.order.clone()
        }
        fn encoder(&self) -> Option<Encoder<u64>> {
            let on = self.encoded_on.clone();
            self.encode.then(|| -> Encoder<u64> {
                Box::new(move |v: &TensorView<'_>| {
                    on.lock().unwrap().push(std::thread::current().id());
                    // Slower for earlier tensors, so results finish out of order.
                    let n = v.info.name[1..].parse::<u64>().unwrap_or(0);
                    std::thread::sleep(std::time::Duration::from_millis(12u64.saturating_sub(n)));
                    Ok(v.data()?.iter().map(|&b| u64::from(b)).sum())
                })
            })
        }
        fn write_tensor(
            &mut self,
            name: &str,
            view: TensorView<'_>,
            encoded: Option<u64>,
        ) -> Result<()> {
            self.plan.next(&self.order, name, |s| s)?;
            assert_eq!(view.info.name, name);
            self.threads.push(std::thread::current().id());
            if self.fail_at == Some(name) {
                return Err(Error::invalid_input("disk full"));
            }
            self.seen.push((name.to_string(), view.data()?[0], encoded));
            self.plan.advance();
            Ok(())
        }
        fn finish(self) -> Result<()> {
            self.plan.all_written("test writer", &self.order, |s| s)
        }
    }

    #[test]
    fn tensors_come_in_the_writers_order_across_batches_on_the_writing_thread() {
        let m = model(10);
        let names = ["t9", "t0", "t5", "t1", "t2", "t3", "t4", "t6", "t8", "t7"];
        let mut w = Recorder::new(&names);
        drive_by(&m, &mut w, 2500).unwrap();
        let got: Vec<&str> = w.seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(got, names);
        for (name, first, enc) in &w.seen {
            assert_eq!(*first, name[1..].parse::<u8>().unwrap());
            assert_eq!(*enc, None);
        }
        assert_eq!(m.1.load(Ordering::SeqCst), 10);
        let me = std::thread::current().id();
        assert!(w.threads.iter().all(|t| *t == me));
    }

    /// `drive` reads in batches of the writer's `read_ahead` bytes.
    #[test]
    fn batches_are_the_writers_read_ahead() {
        struct Small(Recorder, u64);
        impl StreamWriter for &mut Small {
            type Encoded = u64;
            type Done = ();
            fn order(&self) -> Vec<String> {
                self.0.order.clone()
            }
            fn read_ahead(&self) -> u64 {
                self.1
            }
            fn write_tensor(&mut self, n: &str, v: TensorView<'_>, e: Option<u64>) -> Result<()> {
                (&mut self.0).write_tensor(n, v, e)
            }
            fn finish(self) -> Result<()> {
                (&mut self.0).finish()
            }
        }
        if std::env::var_os("TESSERA_TEST_READ_AHEAD").is_some() {
            return;
        }
        let names = ["t0", "t1", "t2", "t3", "t4", "t5", "t6"];
        for (budget, want) in [(2000, vec![2, 2, 2, 1]), (READ_AHEAD, vec![7])] {
            let m = model(7);
            let mut w = Small(Recorder::new(&names), budget);
            drive(&m, &mut w).unwrap();
            assert_eq!(w.0.seen.len(), 7);
            assert_eq!(*m.3.lock().unwrap(), want, "read_ahead {budget}");
        }
    }

    /// The companion's results come with their tensors, in order, though they were
    /// made on pool threads and finished out of order.
    #[test]
    fn encoded_results_come_in_order() {
        let m = model(12);
        let names: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for budget in [1, 4000, READ_AHEAD] {
            let mut w = Recorder::new(&names);
            w.encode = true;
            drive_by(&m, &mut w, budget).unwrap();
            let got: Vec<(String, Option<u64>)> =
                w.seen.iter().map(|s| (s.0.clone(), s.2)).collect();
            let want: Vec<(String, Option<u64>)> = (0..12u64)
                .map(|i| (format!("t{i}"), Some(i * 1000)))
                .collect();
            assert_eq!(got, want, "budget {budget}");
            let me = std::thread::current().id();
            assert!(w.encoded_on.lock().unwrap().iter().all(|t| *t != me));
        }
    }

    /// The source's `interrupted` is asked before each tensor is written, on the
    /// writing thread, and stops the work.
    #[test]
    fn an_interrupted_source_stops_the_writing() {
        let mut m = model(10);
        m.2 = 4;
        let names = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"];
        let mut w = Recorder::new(&names);
        let e = drive_by(&m, &mut w, 3000).unwrap_err();
        assert!(e.to_string().contains("interrupted"));
        // Batches of 3, the next read while one is written: the interruption (more
        // than 4 read) is seen before the last batch is written, whatever the timing.
        assert!(w.seen.len() <= 6, "{:?}", w.seen);
    }

    /// `interrupted` is asked on the writing thread: a source that answers only there
    /// (as Python's does) stops the writing at once.
    #[test]
    fn interruption_is_asked_on_the_writing_thread() {
        struct OnlyHere(Model, std::thread::ThreadId, AtomicUsize);
        impl TensorSource for OnlyHere {
            fn metadata(&self) -> &crate::Metadata {
                self.0.metadata()
            }
            fn tensor_infos(&self) -> &[TensorInfo] {
                self.0.tensor_infos()
            }
            fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
                self.0.tensor(name)
            }
            fn interrupted(&self) -> Result<()> {
                assert_eq!(
                    std::thread::current().id(),
                    self.1,
                    "asked on another thread"
                );
                if self.2.fetch_add(1, Ordering::SeqCst) == 2 {
                    return Err(Error::invalid_input("interrupted"));
                }
                Ok(())
            }
        }
        let src = OnlyHere(model(6).0, std::thread::current().id(), AtomicUsize::new(0));
        let names = ["t0", "t1", "t2", "t3", "t4", "t5"];
        let mut w = Recorder::new(&names);
        w.encode = true;
        let e = drive_by(&src, &mut w, 1500).unwrap_err();
        assert!(e.to_string().contains("interrupted"));
        let got: Vec<&str> = w.seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(got, ["t0", "t1"]);
    }

    #[test]
    fn the_first_error_in_order_stops_it_and_reading_ahead_stays_one_batch_ahead() {
        // A missing tensor in the second batch (of four): the first batch and the
        // tensors before it in the second are written, nothing after it.
        let m = model(12);
        let names = [
            "t0", "t1", "t2", "t3", "gone", "t5", "t6", "t7", "t8", "t9", "t10", "t11",
        ];
        let mut w = Recorder::new(&names);
        let e = drive_by(&m, &mut w, 3000).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NotFound);
        let got: Vec<&str> = w.seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(got, ["t0", "t1", "t2", "t3"]);
        // Batches [t0 t1 t2] [t3 gone t5 t6] [t7 t8 t9] [t10 t11]: the third was read
        // while the second was written, never the fourth.
        assert_eq!(m.1.load(Ordering::SeqCst), 10);

        // An error from the writer stops it where it happened.
        let m = model(9);
        let mut w = Recorder::new(&names[..4]);
        w.fail_at = Some("t1");
        let e = drive_by(&m, &mut w, 1000).unwrap_err();
        assert!(e.to_string().contains("disk full"));
        assert_eq!(w.threads.len(), 2);
        assert_eq!(m.1.load(Ordering::SeqCst), 3);

        // An error of the companion is the tensor's: those before it are written.
        struct Failing(Recorder);
        impl StreamWriter for &mut Failing {
            type Encoded = ();
            type Done = ();
            fn order(&self) -> Vec<String> {
                self.0.order.clone()
            }
            fn encoder(&self) -> Option<Encoder<()>> {
                Some(Box::new(|v: &TensorView<'_>| {
                    if v.info.name == "t2" {
                        return Err(Error::invalid_input("cannot encode t2"));
                    }
                    Ok(())
                }))
            }
            fn write_tensor(&mut self, n: &str, v: TensorView<'_>, _: Option<()>) -> Result<()> {
                (&mut self.0).write_tensor(n, v, None)
            }
            fn finish(self) -> Result<()> {
                Ok(())
            }
        }
        let m = model(6);
        let mut w = Failing(Recorder::new(&["t0", "t1", "t2", "t3", "t4", "t5"]));
        let e = drive_by(&m, &mut w, 1).unwrap_err();
        assert!(e.to_string().contains("cannot encode t2"), "{e}");
        let got: Vec<&str> = w.0.seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(got, ["t0", "t1"]);
    }

    /// A tensor out of turn or after the last is refused naming the one expected; a
    /// writer finished before its last tensor is refused naming the first missing.
    #[test]
    fn out_of_order_and_early_finish_are_refused() {
        let plan = ["a", "b"];
        let mut w = Recorder::new(&plan);
        let one = |n: &str| {
            TensorView::dense(
                TensorInfo::dense(n, DType::U8, vec![1]),
                Cow::Owned(vec![1]),
            )
            .unwrap()
        };
        let e = (&mut w).write_tensor("b", one("b"), None).unwrap_err();
        assert!(e.to_string().contains("where \"a\" was expected"), "{e}");
        (&mut w).write_tensor("a", one("a"), None).unwrap();
        let e = (&mut w).finish().unwrap_err();
        assert!(
            e.to_string()
                .contains("test writer finished before tensor \"b\""),
            "{e}"
        );
        let mut w2 = Recorder::new(&plan);
        for n in plan {
            (&mut w2).write_tensor(n, one(n), None).unwrap();
        }
        let e = (&mut w2).write_tensor("c", one("c"), None).unwrap_err();
        assert!(
            e.to_string().contains("\"c\" given after the last tensor"),
            "{e}"
        );
        (&mut w2).finish().unwrap();
        // The driver finishes a writer only after its last tensor: a source that
        // lacks one ends in its error, not in a short file.
        let m = model(2);
        let mut w3 = Recorder::new(&["t0", "t1", "t2"]);
        assert_eq!(
            drive_by(&m, &mut w3, READ_AHEAD).unwrap_err().kind(),
            crate::ErrorKind::NotFound
        );
    }
}

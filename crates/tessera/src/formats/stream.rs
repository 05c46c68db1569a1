//! What the streaming writers (`SafetensorsWriter`, `GgufWriter`, `WtxtWriter`,
//! `PytorchWriter`) share: the tensors' bytes come in the order they planned, and
//! `finish` comes after the last. And how their `write` entry points read a source:
//! [`each_read_ahead`], the next tensors decoded on every core while the ones before
//! are written.

#[cfg(any(
    feature = "safetensors",
    feature = "gguf",
    feature = "wtxt",
    feature = "pytorch"
))]
pub(crate) use order::{all_written, next_planned};

/// The order and completeness checks of the streaming writers.
#[cfg(any(
    feature = "safetensors",
    feature = "gguf",
    feature = "wtxt",
    feature = "pytorch"
))]
mod order {
    use crate::error::{Error, Result};

    /// The planned entry that `name`'s bytes must be: `plan[next]`, whose name `name_of`
    /// gives. Refuses a tensor after the last, or out of order, naming the one expected.
    pub(crate) fn next_planned<'p, T>(
        plan: &'p [T],
        next: usize,
        name: &str,
        name_of: fn(&T) -> &str,
    ) -> Result<&'p T> {
        let p = plan.get(next).ok_or_else(|| {
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

    /// Refuses a `finish` (of `writer`: "GGUF writer") before every planned tensor came.
    pub(crate) fn all_written<T>(
        writer: &str,
        plan: &[T],
        next: usize,
        name_of: fn(&T) -> &str,
    ) -> Result<()> {
        match plan.get(next) {
            Some(p) => Err(Error::invalid_input(format!(
                "{writer} finished before tensor {:?}",
                name_of(p)
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(any(
    feature = "safetensors",
    feature = "gguf",
    feature = "pytorch",
    feature = "npy"
))]
pub(crate) use ahead::each_read_ahead;

/// Reading a source ahead of its writer (the writers of raw tensor bytes use it).
#[cfg(any(
    feature = "safetensors",
    feature = "gguf",
    feature = "pytorch",
    feature = "npy"
))]
mod ahead {
    use std::collections::HashMap;

    use crate::error::{Error, Result};
    use crate::model::TensorSource;
    use crate::tensor::TensorView;

    /// How many decoded bytes [`each_read_ahead`] reads ahead, per batch (two batches are
    /// held at once: the one being written and the one being read).
    pub(crate) const READ_AHEAD: u64 = 64 << 20;

    /// Gives `each` the tensors `names` of `src`, in that order. They are read in batches
    /// of about [`READ_AHEAD`] bytes (one tensor at least) with [`TensorSource::tensors`]
    /// (on the rayon pool: a compressed source decompresses and checks them on every
    /// core), the next batch while `each` writes the one before. A source whose tensors
    /// are borrowed from a map costs nothing more; a zstd zTensor converted to
    /// safetensors no longer decodes on one core between writes. The first error, in
    /// `names` order, stops it; tensors read ahead of it are dropped unused.
    pub(crate) fn each_read_ahead<'s>(
        src: &'s dyn TensorSource,
        names: &[&str],
        each: impl FnMut(&str, TensorView<'s>) -> Result<()>,
    ) -> Result<()> {
        read_ahead_by(src, names, READ_AHEAD, each)
    }

    /// [`each_read_ahead`] with batches of about `budget` bytes.
    fn read_ahead_by<'s>(
        src: &'s dyn TensorSource,
        names: &[&str],
        budget: u64,
        mut each: impl FnMut(&str, TensorView<'s>) -> Result<()>,
    ) -> Result<()> {
        let sizes: HashMap<&str, u64> = src
            .tensor_infos()
            .iter()
            .map(|i| (i.name.as_str(), i.dense_nbytes().unwrap_or(budget)))
            .collect();
        let mut batches: Vec<&[&str]> = Vec::new();
        let (mut start, mut held) = (0usize, 0u64);
        for (i, n) in names.iter().enumerate() {
            held = held.saturating_add(sizes.get(n).copied().unwrap_or(0));
            if held >= budget || i + 1 == names.len() {
                batches.push(&names[start..=i]);
                start = i + 1;
                held = 0;
            }
        }
        let mut pending: Option<(&[&str], Vec<Result<TensorView<'s>>>)> = None;
        for next in batches.into_iter().map(Some).chain(std::iter::once(None)) {
            let (read, written) = std::thread::scope(|s| {
                let h = next.map(|b| s.spawn(move || src.tensors(b)));
                let mut written = Ok(());
                if let Some((b, views)) = pending.take() {
                    for (name, v) in b.iter().zip(views) {
                        // Asked here, on the writing thread: the reads ran on others.
                        written = src
                            .interrupted()
                            .and_then(|()| v.and_then(|v| each(name, v)));
                        if written.is_err() {
                            break;
                        }
                    }
                }
                (h.map(|h| h.join()), written)
            });
            written?;
            match (next, read) {
                (Some(b), Some(Ok(views))) => pending = Some((b, views)),
                (_, Some(Err(_))) => {
                    return Err(Error::new(
                        crate::error::ErrorKind::Io,
                        "a thread reading tensors ahead panicked",
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::model::Model;
        use crate::tensor::TensorInfo;
        use crate::DType;
        use std::borrow::Cow;
        use std::sync::atomic::{AtomicUsize, Ordering};

        /// A model that counts the tensors read from it.
        struct Counting(Model, AtomicUsize, usize);

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
            Counting(m, AtomicUsize::new(0), usize::MAX)
        }

        #[test]
        fn tensors_come_in_the_order_given_across_batches() {
            let m = model(10);
            let names = ["t9", "t0", "t5", "t1", "t2", "t3", "t4", "t6", "t8", "t7"];
            let mut seen = Vec::new();
            read_ahead_by(&m, &names, 2500, |name, v| {
                assert_eq!(v.data()?[0], name[1..].parse::<u8>().unwrap());
                seen.push(name.to_string());
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, names);
            assert_eq!(m.1.load(Ordering::SeqCst), 10);
        }

        /// The source's `interrupted` is asked before each tensor is written, on the
        /// writing thread, and stops the work.
        #[test]
        fn an_interrupted_source_stops_the_writing() {
            let mut m = model(10);
            m.2 = 4;
            let names = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"];
            let mut seen = Vec::new();
            let e = read_ahead_by(&m, &names, 3000, |name, _| {
                seen.push(name.to_string());
                Ok(())
            })
            .unwrap_err();
            assert!(e.to_string().contains("interrupted"));
            // Batches of 3, the next read while one is written: the interruption (more
            // than 4 read) is seen before the last batch is written, whatever the timing.
            assert!(seen.len() <= 6, "{seen:?}");
        }

        #[test]
        fn the_first_error_in_order_stops_it_and_reading_ahead_stays_one_batch_ahead() {
            // A missing tensor in the second batch (of four): the first batch and the
            // tensors before it in the second are written, nothing after it.
            let m = model(12);
            let names = [
                "t0", "t1", "t2", "t3", "gone", "t5", "t6", "t7", "t8", "t9", "t10", "t11",
            ];
            let mut seen = Vec::new();
            let e = read_ahead_by(&m, &names, 3000, |name, _| {
                seen.push(name.to_string());
                Ok(())
            })
            .unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::NotFound);
            assert_eq!(seen, ["t0", "t1", "t2", "t3"]);
            // Batches [t0 t1 t2] [t3 gone t5 t6] [t7 t8 t9] [t10 t11]: the third was read
            // while the second was written, never the fourth.
            assert_eq!(m.1.load(Ordering::SeqCst), 10);

            // An error from the writer stops it where it happened.
            let m = model(9);
            let mut seen = Vec::new();
            let e = read_ahead_by(&m, &names[..4], 1000, |name, _| {
                seen.push(name.to_string());
                if name == "t1" {
                    return Err(Error::invalid_input("disk full"));
                }
                Ok(())
            })
            .unwrap_err();
            assert!(e.to_string().contains("disk full"));
            assert_eq!(seen, ["t0", "t1"]);
            assert_eq!(m.1.load(Ordering::SeqCst), 3);
        }
    }
}

//! Encode one batch while the previous one is written: the writers of FOLD and zTensor
//! gather items up to a byte budget on the calling thread (sources need not be `Sync`),
//! encode the batch on a scoped thread (which fans out on the rayon pool), and write the
//! batch before it in the meantime. Peak memory is two batches.

use crate::error::{Error, ErrorKind, Result};

/// Runs the pipeline over `state` (the writer). `next(state, batch)` yields the next
/// item and its input size, or `None` at the end; it sees the batch gathered so far (for
/// duplicate checks). `encode` turns a batch into its encoded form; `write(state, batch,
/// encoded)` writes a batch, in order. `what` names the writer in a thread-panic error.
pub(crate) fn encode_while_writing<S, T: Sync, E: Send>(
    state: &mut S,
    budget: u64,
    mut next: impl FnMut(&mut S, &[T]) -> Option<Result<(T, u64)>>,
    encode: impl Fn(&[T]) -> E + Sync,
    mut write: impl FnMut(&mut S, Vec<T>, E) -> Result<()>,
    what: &str,
) -> Result<()> {
    let mut pending: Option<(Vec<T>, E)> = None;
    let mut done = false;
    loop {
        let mut batch = Vec::new();
        let mut size = 0u64;
        while !done && (batch.is_empty() || size < budget) {
            match next(state, &batch) {
                None => done = true,
                Some(item) => {
                    let (item, n) = item?;
                    size += n;
                    batch.push(item);
                }
            }
        }
        if batch.is_empty() && pending.is_none() {
            return Ok(());
        }
        let (encoded, written) = std::thread::scope(|s| {
            let h = s.spawn(|| encode(&batch));
            let written = match pending.take() {
                Some((items, enc)) => write(state, items, enc),
                None => Ok(()),
            };
            (h.join(), written)
        });
        written?;
        let encoded = encoded.map_err(|_| {
            Error::new(
                ErrorKind::Io,
                format!("{what}: a compression thread panicked"),
            )
        })?;
        if !batch.is_empty() {
            pending = Some((batch, encoded));
        }
    }
}

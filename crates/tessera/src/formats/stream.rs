//! What the streaming writers (`SafetensorsWriter`, `GgufWriter`, `WtxtWriter`,
//! `PytorchWriter`) share: the tensors' bytes come in the order they planned, and
//! `finish` comes after the last.

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

//! Crash-safe file replacement.
//!
//! [`write_atomic`] writes into a temporary file in the target's directory, flushes and
//! fsyncs it and the directory, renames it over the target and fsyncs the directory
//! again. A crash or an error at
//! any point leaves either the complete old file or the complete new one under the
//! target name, never a mix; on error the temporary file is removed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Writes a file atomically through `fill`, which gets a buffered `Write + Seek`.
pub fn write_atomic<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| {
            Error::from(e).at_subject(format!("creating a temporary file in {}", dir.display()))
        })?;
    let (file, tmp_path) = tmp.into_parts();
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let value = fill(&mut w)?; // on error, tmp_path's Drop removes the file
    w.flush()?;
    let file = w.into_inner().map_err(|e| Error::from(e.into_error()))?;
    file.sync_all()?;
    drop(file);
    // The temporary file's directory entry is durable before the rename, the rename
    // itself after it.
    sync_dir(&dir);
    tmp_path
        .persist(path)
        .map_err(|e| Error::from(e.error).at_subject(path.display().to_string()))?;
    sync_dir(&dir);
    Ok(value)
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| Ok(w.write_all(bytes)?))
}

fn sync_dir(dir: &Path) {
    // Directory fsync makes the rename durable; not every platform or filesystem allows
    // opening a directory, and the rename has happened either way.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_keeps_the_old_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, b"old").unwrap();
        let r: Result<()> = write_atomic(&p, |w| {
            w.write_all(b"partial")?;
            Err(Error::invalid_input("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_bytes_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }
}

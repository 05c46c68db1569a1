//! The ring's log (`snapshots.log`): one append-only text file, one record a line, each
//! line written with one `write` and fsynced before the step it records counts as done.
//! After a crash the log is the truth: a generation is a snapshot when (and only when)
//! its `written` record is in the log.
//!
//! A line is `KIND key=value … crc=XXXXXXXX`: a value is a bare token (`[A-Za-z0-9._:/@+-]`)
//! or a JSON string; `crc` is the CRC-32C of the line before ` crc=`. Records:
//!
//! | record | fields | written when |
//! | --- | --- | --- |
//! | `target` | `url` | a Snapshotter first pushes to a target |
//! | `requested` | `gen step time` | `request()` pinned a generation (before the copy) |
//! | `written` | `gen file bytes root` | the snapshot, its sidecar (and signature) are durable |
//! | `failed` | `gen [target] reason` | the write failed (no `target`), or a push did |
//! | `pushed` | `gen target` | a target holds the generation |
//! | `dropped` | `gen` | the ring let it go (its files removed after this line) |
//!
//! Reading is tolerant: a last line without its newline (a write torn by a crash) and a
//! line that does not parse or whose CRC is wrong are skipped and reported
//! ([`Log::problems`]), never fatal.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The log's file name in the ring.
pub const LOG: &str = "snapshots.log";

/// The longest line read (a longer one is reported and skipped).
const MAX_LINE: usize = 64 << 10;

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A push target of the ring.
    Target {
        /// Its URL.
        url: String,
    },
    /// A generation was requested (and is being pinned).
    Requested {
        /// The generation.
        gen: u64,
        /// The training step, when given.
        step: Option<u64>,
        /// When (`YYYY-MM-DDTHH:MM:SSZ`).
        time: String,
    },
    /// A generation's files are durable in the ring.
    Written {
        /// The generation.
        gen: u64,
        /// Its main file's name in the ring.
        file: String,
        /// Bytes of all its files.
        bytes: u64,
        /// Its content identity root (`blake3:…`).
        root: String,
    },
    /// The write (no target) or a push (to `target`) failed.
    Failed {
        /// The generation.
        gen: u64,
        /// The target, for a push.
        target: Option<String>,
        /// Why.
        reason: String,
    },
    /// A target holds the generation.
    Pushed {
        /// The generation.
        gen: u64,
        /// The target.
        target: String,
    },
    /// The ring dropped the generation.
    Dropped {
        /// The generation.
        gen: u64,
    },
}

fn bare(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+-".contains(&b))
}

fn value(s: &str) -> String {
    if bare(s) {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
    }
}

impl Record {
    /// The line (without its newline).
    pub fn line(&self) -> String {
        let body = match self {
            Record::Target { url } => format!("target url={}", value(url)),
            Record::Requested { gen, step, time } => {
                let step = step.map_or("-".to_string(), |s| s.to_string());
                format!("requested gen={gen} step={step} time={}", value(time))
            }
            Record::Written {
                gen,
                file,
                bytes,
                root,
            } => format!(
                "written gen={gen} file={} bytes={bytes} root={}",
                value(file),
                value(root)
            ),
            Record::Failed {
                gen,
                target,
                reason,
            } => match target {
                Some(t) => format!(
                    "failed gen={gen} target={} reason={}",
                    value(t),
                    value(reason)
                ),
                None => format!("failed gen={gen} reason={}", value(reason)),
            },
            Record::Pushed { gen, target } => {
                format!("pushed gen={gen} target={}", value(target))
            }
            Record::Dropped { gen } => format!("dropped gen={gen}"),
        };
        let crc = crc32c::crc32c(body.as_bytes());
        format!("{body} crc={crc:08x}")
    }

    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> std::result::Result<Record, String> {
        let (body, crc) = line
            .rsplit_once(" crc=")
            .ok_or_else(|| "no crc field".to_string())?;
        let want = u32::from_str_radix(crc, 16).map_err(|_| format!("crc {crc:?}"))?;
        if crc.len() != 8 || crc32c::crc32c(body.as_bytes()) != want {
            return Err("crc mismatch".into());
        }
        let (kind, fields) = fields(body)?;
        let get = |k: &str| -> std::result::Result<&str, String> {
            fields
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .ok_or_else(|| format!("{kind} without {k}"))
        };
        let num = |k: &str| -> std::result::Result<u64, String> {
            let v = get(k)?;
            v.parse().map_err(|_| format!("{k}={v:?} is not a number"))
        };
        Ok(match kind.as_str() {
            "target" => Record::Target {
                url: get("url")?.into(),
            },
            "requested" => Record::Requested {
                gen: num("gen")?,
                step: match get("step")? {
                    "-" => None,
                    _ => Some(num("step")?),
                },
                time: get("time")?.into(),
            },
            "written" => Record::Written {
                gen: num("gen")?,
                file: get("file")?.into(),
                bytes: num("bytes")?,
                root: get("root")?.into(),
            },
            "failed" => Record::Failed {
                gen: num("gen")?,
                target: get("target").ok().map(String::from),
                reason: get("reason")?.into(),
            },
            "pushed" => Record::Pushed {
                gen: num("gen")?,
                target: get("target")?.into(),
            },
            "dropped" => Record::Dropped { gen: num("gen")? },
            other => return Err(format!("unknown record {other:?}")),
        })
    }
}

type Fields = (String, Vec<(String, String)>);

/// `KIND k=v k="json" …` split into the kind and its fields.
fn fields(body: &str) -> std::result::Result<Fields, String> {
    let (kind, mut rest) = body.split_once(' ').unwrap_or((body, ""));
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| format!("field without '=' in {rest:?}"))?;
        if let Some(q) = after.strip_prefix('"') {
            // A JSON string: find its closing quote.
            let bytes = q.as_bytes();
            let mut i = 0;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            if i >= bytes.len() {
                return Err("unterminated string".into());
            }
            let text = &after[..i + 2];
            let v: String = serde_json::from_str(text).map_err(|e| format!("{key}: {e}"))?;
            out.push((key.to_string(), v));
            rest = after[i + 2..].trim_start_matches(' ');
        } else {
            let (v, next) = after.split_once(' ').unwrap_or((after, ""));
            out.push((key.to_string(), v.to_string()));
            rest = next;
        }
    }
    Ok((kind.to_string(), out))
}

/// The log as read: its records in order and what was skipped.
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// The records that parsed, in order.
    pub records: Vec<Record>,
    /// Lines skipped (`line N: why`): a torn last line, a bad CRC.
    pub problems: Vec<String>,
    /// Bytes of the log up to the end of its last complete line.
    pub good_len: u64,
}

/// Reads the log of the ring `dir` (an empty log when it has none).
pub fn read(dir: &Path) -> Result<Log> {
    let path = dir.join(LOG);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Log::default()),
        Err(e) => return Err(Error::from(e).at_subject(path.display().to_string())),
    };
    Ok(parse(&data))
}

/// Parses a log's bytes.
pub fn parse(data: &[u8]) -> Log {
    let mut log = Log::default();
    let mut at = 0usize;
    let mut n = 0usize;
    while at < data.len() {
        n += 1;
        let Some(end) = data[at..].iter().position(|&b| b == b'\n') else {
            log.problems.push(format!(
                "line {n}: torn (no newline: a write cut short), ignored"
            ));
            break;
        };
        let line = &data[at..at + end];
        at += end + 1;
        log.good_len = at as u64;
        if line.len() > MAX_LINE {
            log.problems
                .push(format!("line {n}: over {MAX_LINE} bytes"));
            continue;
        }
        match std::str::from_utf8(line)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(Record::parse)
        {
            Ok(r) => log.records.push(r),
            Err(e) => log.problems.push(format!("line {n}: {e}, ignored")),
        }
    }
    log
}

/// The log open for appending.
pub struct Wal {
    file: File,
    path: PathBuf,
}

impl Wal {
    /// Opens (creating) the log of the ring `dir`. A torn last line is cut off first, so
    /// the next record starts on a line of its own.
    pub fn open(dir: &Path, log: &Log) -> Result<Wal> {
        let path = dir.join(LOG);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
        let len = file.metadata()?.len();
        if len > log.good_len {
            file.set_len(log.good_len)?;
            file.sync_all()?;
        }
        crate::util::atomic::sync_dir(dir);
        Ok(Wal { file, path })
    }

    /// Appends a record and fsyncs it.
    pub fn append(&mut self, r: &Record) -> Result<()> {
        let mut line = r.line();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(|e| Error::from(e).at_subject(self.path.display().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_reported() {
        let recs = vec![
            Record::Target {
                url: "file:///tmp/x y".into(),
            },
            Record::Requested {
                gen: 3,
                step: Some(100),
                time: "2026-01-01T00:00:00Z".into(),
            },
            Record::Requested {
                gen: 4,
                step: None,
                time: "2026-01-01T00:00:00Z".into(),
            },
            Record::Written {
                gen: 3,
                file: "gen-000000003.wtxt".into(),
                bytes: 10,
                root: "blake3:ab".into(),
            },
            Record::Failed {
                gen: 3,
                target: Some("s3://b/k".into()),
                reason: "500 \"oops\" crc=1".into(),
            },
            Record::Failed {
                gen: 4,
                target: None,
                reason: "disk full".into(),
            },
            Record::Pushed {
                gen: 3,
                target: "s3://b/k".into(),
            },
            Record::Dropped { gen: 3 },
        ];
        let mut text = String::new();
        for r in &recs {
            text.push_str(&r.line());
            text.push('\n');
        }
        let log = parse(text.as_bytes());
        assert_eq!(log.records, recs);
        assert!(log.problems.is_empty());
        // A flipped byte, and a torn last line.
        let mut bad = text.clone().into_bytes();
        bad[20] ^= 1;
        bad.extend_from_slice(b"written gen=9 fi");
        let log = parse(&bad);
        assert_eq!(log.records.len(), recs.len() - 1);
        assert_eq!(log.problems.len(), 2, "{:?}", log.problems);
        assert!(log.problems[1].contains("torn"), "{:?}", log.problems);
        assert_eq!(log.good_len, text.len() as u64);
    }
}

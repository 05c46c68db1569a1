//! [`SafetensorsFile`]: parse and validate a safetensors file, hand out zero-copy views.

use std::borrow::Cow;
use std::collections::HashMap;

use super::raw::{self, Header, MAX_HEADER_SIZE};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::{Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// An opened safetensors file. Every tensor is a borrowed slice of `data`.
#[derive(Debug)]
pub struct SafetensorsFile<'data> {
    data: &'data [u8],
    header_len: u64,
    metadata: Metadata,
    infos: Vec<TensorInfo>,
    /// Absolute `[begin, end)` of each tensor in `data`, parallel to `infos`.
    ranges: Vec<(usize, usize)>,
    index: HashMap<String, usize>,
    warnings: Vec<String>,
}

impl<'data> SafetensorsFile<'data> {
    /// Parses and validates `data` as the original does: header length within 100 MB
    /// (and `limits.max_index_bytes`) and inside the file, UTF-8 JSON object, every
    /// tensor's `data_offsets` contiguous from 0 with no gap or overlap, each length equal
    /// to dtype size × shape, the last one ending exactly at the end of the file,
    /// `__metadata__` an object of strings. Duplicate keys are errors (the original keeps
    /// the last one and then fails on the offsets).
    pub fn parse(data: &'data [u8], opts: &ReadOptions) -> Result<SafetensorsFile<'data>> {
        let limits = &opts.limits;
        let Some(len_bytes) = data.get(..8) else {
            return Err(Error::malformed(format!(
                "truncated: the file is {} bytes, shorter than the 8-byte header length",
                data.len()
            )));
        };
        let mut n8 = [0u8; 8];
        n8.copy_from_slice(len_bytes);
        let n = u64::from_le_bytes(n8);
        let cap = MAX_HEADER_SIZE.min(limits.max_index_bytes);
        if n > cap {
            return Err(Error::limit(format!(
                "header length {n} is over the limit of {cap} bytes"
            ))
            .at_offset(0));
        }
        let header_end = 8 + n; // n <= 100 MB: no overflow
        if header_end > data.len() as u64 {
            return Err(Error::malformed(format!(
                "truncated: header length {n} runs past the end of the file ({} bytes)",
                data.len()
            ))
            .at_offset(0));
        }
        let header_end = header_end as usize;
        let text = std::str::from_utf8(&data[8..header_end]).map_err(|e| {
            Error::malformed(format!("header is not UTF-8: {e}"))
                .at_offset(8 + e.valid_up_to() as u64)
        })?;
        let header: Header = serde_json::from_str(text).map_err(|e| {
            let mut err = Error::malformed(format!("invalid JSON header: {e}"));
            if e.line() == 1 && e.column() > 0 {
                err = err.at_offset(8 + e.column() as u64 - 1);
            }
            err
        })?;
        limits.check_entries(header.tensors.len() as u64)?;

        let mut metadata = Metadata::new();
        for (k, v) in header.metadata.unwrap_or_default() {
            metadata.insert(k, Value::Str(v));
        }

        // The original sorts entries by data_offsets (stable) and then requires them to
        // tile the byte buffer exactly.
        let mut entries = header.tensors;
        entries.sort_by_key(|(_, e)| e.data_offsets);
        let buffer_len = (data.len() - header_end) as u64;
        let mut infos = Vec::with_capacity(entries.len());
        let mut ranges = Vec::with_capacity(entries.len());
        let mut index = HashMap::with_capacity(entries.len());
        let mut warnings = Vec::new();
        let mut expect = 0u64;
        for (name, e) in entries {
            let subject = format!("tensor {name:?}");
            limits.check_name(name.len() as u64)?;
            limits
                .check_rank(e.shape.len() as u64)
                .map_err(|err| err.at_subject(subject.clone()))?;
            let dtype = raw::dtype_from_name(&e.dtype).map_err(|err| err.at_subject(&subject))?;
            let (begin, end) = e.data_offsets;
            if begin != expect {
                let what = if begin < expect {
                    "overlaps"
                } else {
                    "leaves a gap after"
                };
                return Err(Error::malformed(format!(
                    "data_offsets [{begin}, {end}] {what} the previous tensor (expected to start at {expect})"
                ))
                .at_subject(subject));
            }
            if end < begin {
                return Err(Error::malformed(format!(
                    "data_offsets [{begin}, {end}] end before they begin"
                ))
                .at_subject(subject));
            }
            let want = crate::tensor::dense_nbytes(dtype, &e.shape)
                .map_err(|err| err.at_subject(&subject))?;
            if end - begin != want {
                return Err(Error::malformed(format!(
                    "data_offsets [{begin}, {end}] hold {} bytes, {} {:?} needs {want}",
                    end - begin,
                    e.dtype,
                    e.shape
                ))
                .at_subject(subject));
            }
            if end > buffer_len {
                return Err(Error::malformed(format!(
                    "data_offsets [{begin}, {end}] run past the end of the file (byte buffer is {buffer_len} bytes)"
                ))
                .at_subject(subject));
            }
            expect = end;
            let abs = header_end as u64 + begin;
            if want > 0 && abs % dtype.size() as u64 != 0 {
                warnings.push(format!(
                    "tensor {name:?} starts at byte {abs}, not aligned to its {}-byte elements",
                    dtype.size()
                ));
            }
            let mut info = TensorInfo::dense(name.clone(), dtype, e.shape);
            info.storage = Storage {
                offset: Some(abs),
                stored_bytes: want,
                encoding: "raw".into(),
                digests: Vec::new(),
            };
            // Both ends are within data.len(): checked above.
            ranges.push((abs as usize, (header_end as u64 + end) as usize));
            index.insert(name, infos.len());
            infos.push(info);
        }
        if expect != buffer_len {
            return Err(Error::malformed(format!(
                "the tensors cover {expect} bytes of the {buffer_len}-byte buffer after the header \
                 (the last data_offsets must end at the end of the file)"
            ))
            .at_offset(header_end as u64 + expect));
        }
        Ok(SafetensorsFile {
            data,
            header_len: n,
            metadata,
            infos,
            ranges,
            index,
            warnings,
        })
    }

    /// Length of the JSON header in bytes (the first 8 bytes of the file).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }
}

impl TensorSource for SafetensorsFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let (b, e) = self.ranges[i];
        TensorView::dense(self.infos[i].clone(), Cow::Borrowed(&self.data[b..e]))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Safetensors)
    }
}

impl Container for SafetensorsFile<'_> {
    fn format(&self) -> Format {
        Format::Safetensors
    }
    fn version(&self) -> String {
        // safetensors has no version field.
        "-".into()
    }
    fn verify(&self, _opts: &VerifyOptions) -> VerifyReport {
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        r.ok("file", "structure");
        r.push(
            "file",
            "checksum",
            Status::NotChecked,
            Some(
                "safetensors stores no checksums; offsets, sizes and dtypes were validated".into(),
            ),
        );
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

//! [`SafetensorsFile`]: parse and validate a safetensors file, hand out zero-copy views.
//!
//! Opening reads the 8-byte length and the JSON header only; each tensor is read by
//! range when asked (borrowed from a map, read into a buffer from other sources).

use std::collections::HashMap;

use super::raw::{self, Header, MAX_HEADER_SIZE};
use crate::any::ReadOptions;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::metadata::{Metadata, Value};
use crate::model::{Container, TensorSource};
use crate::source::SourceRef;
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// An opened safetensors file. Every tensor is a range of the source (a borrowed slice
/// when the source is in memory).
#[derive(Debug)]
pub struct SafetensorsFile<'data> {
    src: SourceRef<'data>,
    header_len: u64,
    metadata: Metadata,
    infos: Vec<TensorInfo>,
    /// Absolute `(offset, length)` of each tensor in the file, parallel to `infos`.
    ranges: Vec<(u64, u64)>,
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
    pub fn parse(
        src: impl Into<SourceRef<'data>>,
        opts: &ReadOptions,
    ) -> Result<SafetensorsFile<'data>> {
        let src = src.into();
        let limits = &opts.limits;
        let file_len = src.len();
        if file_len < 8 {
            return Err(Error::malformed(format!(
                "truncated: the file is {file_len} bytes, shorter than the 8-byte header length"
            )));
        }
        let len_bytes = src.read_at(0, 8)?;
        let mut n8 = [0u8; 8];
        n8.copy_from_slice(&len_bytes);
        let n = u64::from_le_bytes(n8);
        let cap = MAX_HEADER_SIZE.min(limits.max_index_bytes);
        if n > cap {
            return Err(Error::limit(format!(
                "header length {n} is over the limit of {cap} bytes"
            ))
            .at_offset(0));
        }
        let header_end = 8 + n; // n <= 100 MB: no overflow
        if header_end > file_len {
            return Err(Error::malformed(format!(
                "truncated: header length {n} runs past the end of the file ({file_len} bytes)"
            ))
            .at_offset(0));
        }
        let header_bytes = src.read_at(8, n)?;
        let text = std::str::from_utf8(&header_bytes).map_err(|e| {
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
        let buffer_len = file_len - header_end;
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
            raw::check_whole_bytes(dtype, &e.shape).map_err(|err| err.at_subject(&subject))?;
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
                    "truncated: the header says the data runs to byte {} (data_offsets [{begin}, {end}]) but the file ends at byte {}",
                    header_end.saturating_add(end),
                    header_end.saturating_add(buffer_len)
                ))
                .at_subject(subject));
            }
            expect = end;
            let abs = header_end + begin;
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
            // Both ends are within the file: checked above.
            ranges.push((abs, want));
            index.insert(name, infos.len());
            infos.push(info);
        }
        if expect != buffer_len {
            return Err(Error::malformed(format!(
                "the tensors cover {expect} bytes of the {buffer_len}-byte buffer after the header \
                 (the last data_offsets must end at the end of the file)"
            ))
            .at_offset(header_end + expect));
        }
        Ok(SafetensorsFile {
            src,
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
        let (offset, len) = self.ranges[i];
        let bytes = self.src.read_at(offset, len)?;
        TensorView::dense(self.infos[i].clone(), bytes)
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Safetensors)
    }
    fn raw_extent(&self, name: &str) -> Result<Option<crate::slice::RawExtent<'_>>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        Ok(Some(crate::slice::RawExtent {
            src: self.src,
            offset: self.ranges[i].0,
            big_endian: false,
            whole_digests: Vec::new(),
            own_check: None,
        }))
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
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        // No checksum: every tensor is done as soon as it is reached.
        opts.advance_tensors(&self.infos);
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

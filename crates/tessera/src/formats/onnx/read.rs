//! [`OnnxFile`]: scan an ONNX model's protobuf for its initializers and metadata, hand
//! out each initializer's bytes when asked.
//!
//! Opening walks `ModelProto` → `GraphProto` → each `TensorProto` initializer (and the
//! graph's inputs and outputs, a fixed six levels down to a shape's dimension), skipping
//! every other field by its length; an initializer's `raw_data` is recorded as a byte
//! range of the file, its typed fields (`float_data`, `int32_data`, …) as the range of
//! its message, decoded when the tensor is read, and external data as a range of a file
//! beside the model, opened (mapped) and checked against its length at open.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value as J};

use super::sha1::Sha1;
use super::wire::{as_bytes, as_varint, packed_varints, wrong_type, Cursor, Field, Value};
use crate::any::{Load, ReadOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::limits::Limits;
use crate::metadata::{Metadata, Value as MValue};
use crate::model::{Container, TensorSource};
use crate::source::{FileData, SourceRef};
use crate::tensor::{Storage, TensorInfo, TensorView};
use crate::verify::{Status, VerifyOptions, VerifyReport};

/// The prefix of the metadata keys the reader gives for the model's own header.
pub const PREFIX: &str = "onnx.";

/// ONNX's `TensorProto.DataType` names, by number.
const TYPE_NAMES: [&str; 27] = [
    "UNDEFINED",
    "FLOAT",
    "UINT8",
    "INT8",
    "UINT16",
    "INT16",
    "INT32",
    "INT64",
    "STRING",
    "BOOL",
    "FLOAT16",
    "DOUBLE",
    "UINT32",
    "UINT64",
    "COMPLEX64",
    "COMPLEX128",
    "BFLOAT16",
    "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ",
    "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ",
    "UINT4",
    "INT4",
    "FLOAT4E2M1",
    "FLOAT8E8M0",
    "UINT2",
    "INT2",
];

/// The name of ONNX data type `t` (`FLOAT`), or its number.
pub fn type_name(t: u64) -> String {
    TYPE_NAMES
        .get(t as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("data type {t}"))
}

/// Tessera's dtype for ONNX data type `t`; `None` for STRING (metadata) and the types
/// Tessera has no dtype for.
fn dtype_of(t: u64) -> Option<DType> {
    Some(match t {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        14 => DType::C64,
        15 => DType::C128,
        16 => DType::BF16,
        17 => DType::F8E4M3FN,
        18 => DType::F8E4M3FNUZ,
        19 => DType::F8E5M2,
        20 => DType::F8E5M2FNUZ,
        23 => DType::F4E2M1,
        24 => DType::F8E8M0,
        _ => return None,
    })
}

/// The typed field that holds a dtype's values, as ONNX specifies: its number, and
/// whether its values are fixed-width (`float_data`, `double_data`) or varints.
fn typed_field(d: DType) -> (u32, &'static str) {
    match d {
        DType::F32 | DType::C64 => (4, "float_data"),
        DType::F64 | DType::C128 => (10, "double_data"),
        DType::I64 => (7, "int64_data"),
        DType::U32 | DType::U64 => (11, "uint64_data"),
        _ => (5, "int32_data"),
    }
}

/// The name of typed field `n`.
fn field_name(n: u32) -> &'static str {
    match n {
        4 => "float_data",
        5 => "int32_data",
        6 => "string_data",
        7 => "int64_data",
        10 => "double_data",
        11 => "uint64_data",
        _ => "raw_data",
    }
}

/// Where an initializer's bytes are.
#[derive(Debug, Clone)]
enum Data {
    /// `raw_data`: `(offset, length)` in the model.
    Raw(u64, u64),
    /// A typed field of the `TensorProto` at `(offset, length)`, decoded when read.
    Typed { msg: (u64, u64), field: u32 },
    /// A range of external file `file`, its SHA-1 (hex) when the model states one.
    External {
        file: usize,
        offset: u64,
        len: u64,
        checksum: Option<String>,
    },
}

/// An external data file beside the model.
struct External {
    /// The `location` as the model writes it.
    location: String,
    data: FileData,
    /// Its SHA-1, computed once, when a checksum asks for it.
    sha1: OnceLock<String>,
}

impl External {
    fn sha1(&self) -> &str {
        self.sha1.get_or_init(|| {
            let mut h = Sha1::new();
            h.update(&self.data);
            h.hex()
        })
    }
}

/// An opened ONNX model: its initializers as tensors, its header as metadata.
pub struct OnnxFile<'d> {
    src: SourceRef<'d>,
    ir_version: u64,
    metadata: Metadata,
    infos: Vec<TensorInfo>,
    data: Vec<Data>,
    index: HashMap<String, usize>,
    externals: Vec<External>,
    verify: bool,
    warnings: Vec<String>,
}

impl std::fmt::Debug for OnnxFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxFile")
            .field("ir_version", &self.ir_version)
            .field("tensors", &self.infos.len())
            .field("externals", &self.externals.len())
            .finish_non_exhaustive()
    }
}

/// What the metadata text read so far may still take (`Limits::max_index_bytes` in all).
struct Budget(u64);

impl Budget {
    fn take(&mut self, n: u64, what: &str) -> Result<()> {
        if n > self.0 {
            return Err(Error::limit(format!(
                "{what}: the model's metadata text is over the limit of the index size"
            )));
        }
        self.0 -= n;
        Ok(())
    }
}

/// A UTF-8 string field of at most `max` bytes.
fn string(c: &Cursor<'_>, f: &Field, what: &str, max: u64, budget: &mut Budget) -> Result<String> {
    let (o, n) = as_bytes(f, what)?;
    if n > max {
        return Err(
            Error::limit(format!("{what} is {n} bytes, over the limit of {max}")).at_offset(o),
        );
    }
    budget.take(n, what)?;
    let b = c.bytes(o, n)?;
    String::from_utf8(b.into_owned())
        .map_err(|_| Error::malformed(format!("{what} is not UTF-8")).at_offset(o))
}

/// A varint field read as protobuf's `int64`.
fn int64(f: &Field, what: &str) -> Result<i64> {
    as_varint(f, what).map(|v| v as i64)
}

/// The first stored field holding an initializer's values.
#[derive(Default)]
struct TensorFields {
    dims: Vec<u64>,
    data_type: Option<u64>,
    name: Option<String>,
    raw: Option<(u64, u64)>,
    /// The typed field seen (number) and its bytes on the wire (values only).
    typed: Option<(u32, u64)>,
    strings: Vec<J>,
    external: Vec<(String, String)>,
    location: u64,
}

impl<'d> OnnxFile<'d> {
    /// Scans and validates the model in `src` (see the module's documentation).
    pub fn parse(src: impl Into<SourceRef<'d>>, opts: &ReadOptions) -> Result<OnnxFile<'d>> {
        let src = src.into();
        let limits = &opts.limits;
        let mut budget = Budget(limits.max_index_bytes);
        let mut c = Cursor::new(src, 0, src.len(), "ModelProto");
        let mut metadata = Metadata::new();
        let mut props: Vec<(String, String)> = Vec::new();
        let mut ir_version = None;
        let mut graph = None;
        let mut opsets = serde_json::Map::new();
        let max = limits.max_index_bytes;
        while let Some(f) = c.next_field()? {
            match f.number {
                1 => ir_version = Some(as_varint(&f, "ir_version")?),
                2 => metadata.insert(
                    "onnx.producer_name",
                    string(&c, &f, "producer_name", max, &mut budget)?,
                ),
                3 => metadata.insert(
                    "onnx.producer_version",
                    string(&c, &f, "producer_version", max, &mut budget)?,
                ),
                4 => metadata.insert("onnx.domain", string(&c, &f, "domain", max, &mut budget)?),
                5 => metadata.insert(
                    "onnx.model_version",
                    MValue::Int(int64(&f, "model_version")?.into()),
                ),
                6 => metadata.insert(
                    "onnx.doc_string",
                    string(&c, &f, "doc_string", max, &mut budget)?,
                ),
                7 => {
                    if graph.is_some() {
                        return Err(Error::malformed("the model has two graphs").at_offset(f.at));
                    }
                    graph = Some(as_bytes(&f, "graph")?);
                }
                8 => {
                    let (o, n) = as_bytes(&f, "opset_import")?;
                    limits.check_entries(opsets.len() as u64 + 1)?;
                    let mut s = c.sub(o, n, "opset_import");
                    let (mut domain, mut version) = (String::new(), 0i64);
                    while let Some(g) = s.next_field()? {
                        match g.number {
                            1 => domain = string(&s, &g, "opset domain", max, &mut budget)?,
                            2 => version = int64(&g, "opset version")?,
                            _ => {}
                        }
                    }
                    opsets.insert(domain, J::from(version));
                }
                14 => {
                    let (o, n) = as_bytes(&f, "metadata_props")?;
                    limits.check_entries(props.len() as u64 + 1)?;
                    props.push(entry(c.sub(o, n, "metadata_props"), max, &mut budget)?);
                }
                _ => {}
            }
        }
        let Some(ir_version) = ir_version else {
            return Err(Error::malformed(
                "the model has no ir_version (ModelProto field 1)",
            ));
        };
        let Some((go, gn)) = graph else {
            return Err(Error::malformed(
                "the model has no graph (ModelProto field 7)",
            ));
        };
        if ir_version >= 3 && opsets.is_empty() {
            return Err(Error::malformed(format!(
                "the model (IR version {ir_version}) imports no operator set (opset_import)"
            )));
        }

        let mut file = OnnxFile {
            src,
            ir_version,
            metadata: Metadata::new(),
            infos: Vec::new(),
            data: Vec::new(),
            index: HashMap::new(),
            externals: Vec::new(),
            verify: opts.verify,
            warnings: Vec::new(),
        };
        let mut head = Metadata::new();
        head.insert("onnx.ir_version", MValue::Int(ir_version.into()));
        for (k, v) in metadata.iter() {
            head.insert(k, v.clone());
        }
        head.insert("onnx.opset_import", J::Object(opsets).to_string());

        let mut g = c.sub(go, gn, "GraphProto");
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        let mut strings = serde_json::Map::new();
        let mut ext_index: HashMap<PathBuf, usize> = HashMap::new();
        while let Some(f) = g.next_field()? {
            match f.number {
                2 => head.insert("onnx.graph.name", string(&g, &f, "graph name", max, &mut budget)?),
                5 => {
                    let (o, n) = as_bytes(&f, "initializer")?;
                    limits.check_entries(file.infos.len() as u64 + 1)?;
                    let t = tensor_fields(g.sub(o, n, "initializer"), limits, &mut budget)?;
                    file.add(t, (o, n), opts, &mut strings, &mut ext_index)?;
                }
                11 | 12 => {
                    let (o, n) = as_bytes(&f, "graph input or output")?;
                    let list = if f.number == 11 { &mut inputs } else { &mut outputs };
                    limits.check_entries(list.len() as u64 + 1)?;
                    list.push(value_info(g.sub(o, n, "ValueInfoProto"), limits, &mut budget)?);
                }
                15 => {
                    return Err(Error::unsupported(
                        "the graph has a sparse initializer (GraphProto field 15), which Tessera does not read",
                    )
                    .at_offset(f.at))
                }
                _ => {}
            }
        }
        head.insert("onnx.graph.inputs", J::Array(inputs).to_string());
        head.insert("onnx.graph.outputs", J::Array(outputs).to_string());
        if !strings.is_empty() {
            let names: Vec<&String> = strings.keys().collect();
            file.warnings.push(format!(
                "{} STRING initializer(s) listed in metadata `onnx.string_initializers`, not as tensors: {names:?}",
                names.len()
            ));
            head.insert("onnx.string_initializers", J::Object(strings).to_string());
        }
        for (k, v) in props {
            if head.contains_key(&k) {
                file.warnings.push(format!(
                    "metadata_props key {k:?} is also a key the reader gives; the reader's is kept"
                ));
                continue;
            }
            head.insert(k, v);
        }
        file.metadata = head;
        Ok(file)
    }

    /// Adds one initializer, checking its data against its dims and type.
    fn add(
        &mut self,
        t: TensorFields,
        msg: (u64, u64),
        opts: &ReadOptions,
        strings: &mut serde_json::Map<String, J>,
        ext_index: &mut HashMap<PathBuf, usize>,
    ) -> Result<()> {
        let name = t.name.clone().unwrap_or_default();
        let subject = format!("initializer {name:?}");
        let at = |e: Error| e.at_subject(subject.clone()).at_offset(msg.0);
        if name.is_empty() {
            return Err(at(Error::malformed("an initializer has no name")));
        }
        if self.index.contains_key(&name) || strings.contains_key(&name) {
            return Err(at(Error::malformed("two initializers have this name")));
        }
        let Some(dt) = t.data_type.filter(|&d| d != 0) else {
            return Err(at(Error::malformed("no data_type")));
        };
        if dt == 8 {
            if t.raw.is_some() || t.typed.is_some() || t.location == 1 {
                return Err(at(Error::unsupported(
                    "a STRING initializer not stored in string_data",
                )));
            }
            let n = crate::tensor::numel(&t.dims).map_err(at)?;
            if n != t.strings.len() as u64 {
                return Err(at(Error::malformed(format!(
                    "dims {:?} hold {n} strings, string_data has {}",
                    t.dims,
                    t.strings.len()
                ))));
            }
            strings.insert(name, json!({"dims": t.dims, "values": t.strings}));
            return Ok(());
        }
        let Some(dtype) = dtype_of(dt) else {
            return Err(at(Error::unsupported(format!(
                "ONNX data type {} ({dt}) has no Tessera dtype",
                type_name(dt)
            ))));
        };
        if !t.strings.is_empty() {
            return Err(at(Error::malformed(format!(
                "a {} initializer has string_data",
                type_name(dt)
            ))));
        }
        let want = crate::tensor::dense_nbytes(dtype, &t.dims).map_err(at)?;
        let (data, encoding, stored) = if t.location == 1 {
            if t.raw.is_some() || t.typed.is_some() {
                return Err(at(Error::malformed(
                    "data_location is EXTERNAL, and the message holds data too",
                )));
            }
            let (d, stored) = self
                .external(&t.external, want, opts, ext_index)
                .map_err(at)?;
            (d, "external", stored)
        } else if t.location != 0 {
            return Err(at(Error::malformed(format!(
                "data_location {} is neither DEFAULT (0) nor EXTERNAL (1)",
                t.location
            ))));
        } else {
            if !t.external.is_empty() {
                self.warnings.push(format!(
                    "{subject}: external_data entries ignored: data_location is not EXTERNAL"
                ));
            }
            match (t.raw, t.typed) {
                (Some(_), Some((f, _))) => {
                    return Err(at(Error::malformed(format!(
                        "holds both raw_data and {}",
                        field_name(f)
                    ))))
                }
                (Some((o, n)), None) => {
                    if n != want {
                        return Err(at(Error::malformed(format!(
                            "raw_data holds {n} bytes, {} {:?} needs {want}",
                            type_name(dt),
                            t.dims
                        ))));
                    }
                    (Data::Raw(o, n), "raw", n)
                }
                (None, Some((f, bytes))) => {
                    let (expect, fname) = typed_field(dtype);
                    if f != expect {
                        return Err(at(Error::malformed(format!(
                            "a {} initializer stores its values in {}, ONNX puts them in {fname}",
                            type_name(dt),
                            field_name(f)
                        ))));
                    }
                    let n = crate::tensor::numel(&t.dims).map_err(at)?;
                    let values = values_for(dtype, n);
                    let fits = match f {
                        4 => bytes == values.saturating_mul(4),
                        10 => bytes == values.saturating_mul(8),
                        // One to ten bytes a varint: the exact count is checked on read.
                        _ => bytes >= values && bytes <= values.saturating_mul(10),
                    };
                    if !fits {
                        return Err(at(Error::malformed(format!(
                            "{fname} holds {bytes} bytes of values, not {values} values for dims {:?}",
                            t.dims
                        ))));
                    }
                    opts.limits.check_decoded(want).map_err(at)?;
                    (Data::Typed { msg, field: f }, fname, bytes)
                }
                (None, None) if want == 0 => (Data::Raw(msg.0, 0), "raw", 0),
                (None, None) => {
                    return Err(at(Error::malformed(format!(
                        "holds no data for its dims {:?}",
                        t.dims
                    ))))
                }
            }
        };
        let mut info = TensorInfo::dense(name.clone(), dtype, t.dims);
        info.storage = Storage {
            offset: match data {
                Data::Raw(o, _) => Some(o),
                Data::Typed { msg, .. } => Some(msg.0),
                Data::External { offset, .. } => Some(offset),
            },
            stored_bytes: stored,
            encoding: encoding.into(),
            digests: match &data {
                Data::External {
                    checksum: Some(_), ..
                } => vec!["sha1".into()],
                _ => Vec::new(),
            },
        };
        self.index.insert(name, self.infos.len());
        self.infos.push(info);
        self.data.push(data);
        Ok(())
    }

    /// Resolves an initializer's external data: the file beside the model (never outside
    /// its directory), the range checked against the file and the tensor's size.
    fn external(
        &mut self,
        entries: &[(String, String)],
        want: u64,
        opts: &ReadOptions,
        ext_index: &mut HashMap<PathBuf, usize>,
    ) -> Result<(Data, u64)> {
        let (mut location, mut offset, mut length, mut checksum) = (None, None, None, None);
        for (k, v) in entries {
            let number = |v: &str| {
                v.trim().parse::<u64>().map_err(|_| {
                    Error::malformed(format!("external_data {k} {v:?} is not a number of bytes"))
                })
            };
            match k.as_str() {
                "location" => location = Some(v.clone()),
                "offset" => offset = Some(number(v)?),
                "length" => length = Some(number(v)?),
                "checksum" => {
                    let h = v.trim().to_ascii_lowercase();
                    if h.len() != 40 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(Error::malformed(format!(
                            "external_data checksum {v:?} is not a SHA-1 in hex"
                        )));
                    }
                    checksum = Some(h);
                }
                _ => self.warnings.push(format!(
                    "external_data key {k:?} is not one ONNX defines: ignored"
                )),
            }
        }
        let Some(location) = location else {
            return Err(Error::malformed("external data without a location"));
        };
        let path = external_path(&location, opts)?;
        let file = match ext_index.get(&path) {
            Some(&i) => i,
            None => {
                let data = match opts.load {
                    Load::Read => FileData::read(&path),
                    _ => FileData::open(&path),
                }
                .map_err(|e| {
                    Error::new(
                        e.kind(),
                        format!("external data file {location:?}: {}", e.message()),
                    )
                })?;
                self.externals.push(External {
                    location: location.clone(),
                    data,
                    sha1: OnceLock::new(),
                });
                ext_index.insert(path, self.externals.len() - 1);
                self.externals.len() - 1
            }
        };
        let total = self.externals[file].data.len() as u64;
        let offset = offset.unwrap_or(0);
        if offset > total {
            return Err(Error::malformed(format!(
                "external data offset {offset} is past the end of {location:?} ({total} bytes)"
            )));
        }
        let len = length.unwrap_or(total - offset);
        crate::limits::check_range(
            offset,
            len,
            total,
            &format!("external data in {location:?}"),
        )?;
        if len != want {
            return Err(Error::malformed(format!(
                "external data in {location:?} is {len} bytes, the tensor's dims and type need {want}"
            )));
        }
        Ok((
            Data::External {
                file,
                offset,
                len,
                checksum,
            },
            len,
        ))
    }

    /// The IR version the model states.
    pub fn ir_version(&self) -> u64 {
        self.ir_version
    }

    /// Checks external file `file` against `checksum`.
    fn check_external(&self, file: usize, checksum: &str) -> Result<()> {
        let e = &self.externals[file];
        let got = e.sha1();
        if got != checksum {
            return Err(Error::integrity(format!(
                "external data file {:?}: its SHA-1 is {got}, the model's checksum says {checksum}",
                e.location
            )));
        }
        Ok(())
    }

    /// Decodes the typed field `field` of the `TensorProto` at `msg` for tensor `i`.
    fn decode(&self, i: usize, msg: (u64, u64), field: u32) -> Result<Vec<u8>> {
        let info = &self.infos[i];
        let dtype = info.dtype;
        let n = info.numel()?;
        let values = values_for(dtype, n);
        let want = info.dense_nbytes()?;
        let mut out = Vec::with_capacity(crate::limits::to_usize(want, "a tensor's size")?);
        let mut c = Cursor::new(self.src, msg.0, msg.1, "initializer");
        let mut count = 0u64;
        let over = || {
            Error::malformed(format!(
                "{} holds more values than its dims {:?}",
                field_name(field),
                info.shape
            ))
        };
        let mut push = |v: u64, out: &mut Vec<u8>| -> Result<()> {
            count += 1;
            if count > values {
                return Err(over());
            }
            put(dtype, field, v, out)
        };
        while let Some(f) = c.next_field()? {
            if f.number != field {
                continue;
            }
            match f.value {
                Value::Bytes(o, len) => {
                    let width = match field {
                        4 => 4,
                        10 => 8,
                        _ => 1,
                    };
                    if len % width != 0 {
                        return Err(Error::malformed(format!(
                            "packed {} of {len} bytes is not a whole number of {width}-byte values",
                            field_name(field)
                        ))
                        .at_offset(f.at));
                    }
                    let b = c.bytes(o, len)?;
                    match field {
                        4 => b.chunks_exact(4).try_for_each(|x| {
                            push(
                                u32::from_le_bytes([x[0], x[1], x[2], x[3]]).into(),
                                &mut out,
                            )
                        })?,
                        10 => b.chunks_exact(8).try_for_each(|x| {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(x);
                            push(u64::from_le_bytes(a), &mut out)
                        })?,
                        _ => packed_varints(&b, |v| push(v, &mut out))?,
                    }
                }
                Value::Fixed32(v) if field == 4 => push(v.into(), &mut out)?,
                Value::Fixed64(v) if field == 10 => push(v, &mut out)?,
                Value::Varint(v) if field != 4 && field != 10 => push(v, &mut out)?,
                _ => return Err(wrong_type(&f, field_name(field), "of its type")),
            }
        }
        if count != values {
            return Err(Error::malformed(format!(
                "{} holds {count} values, dims {:?} need {values}",
                field_name(field),
                info.shape
            )));
        }
        Ok(out)
    }
}

/// How many values of a typed field a tensor of `n` elements has: two per complex
/// element, one per two FLOAT4E2M1 elements (a byte of two nibbles in each `int32`).
fn values_for(dtype: DType, n: u64) -> u64 {
    match dtype {
        DType::C64 | DType::C128 => n.saturating_mul(2),
        DType::F4E2M1 => n.div_ceil(2),
        _ => n,
    }
}

/// Appends one typed value `v` (as the wire gave it) as `dtype`'s little-endian bytes,
/// refusing a value out of the dtype's range.
fn put(dtype: DType, field: u32, v: u64, out: &mut Vec<u8>) -> Result<()> {
    let range = |lo: i64, hi: i64| {
        let s = v as i64;
        if s < lo || s > hi {
            Err(Error::malformed(format!(
                "{} value {s} does not fit {dtype}",
                field_name(field)
            )))
        } else {
            Ok(s)
        }
    };
    match dtype {
        DType::F32 | DType::C64 => out.extend_from_slice(&(v as u32).to_le_bytes()),
        DType::F64 | DType::C128 | DType::I64 | DType::U64 => {
            out.extend_from_slice(&v.to_le_bytes())
        }
        DType::U32 => {
            let x = u32::try_from(v)
                .map_err(|_| Error::malformed(format!("uint64_data value {v} does not fit u32")))?;
            out.extend_from_slice(&x.to_le_bytes())
        }
        DType::I32 => {
            out.extend_from_slice(&(range(i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes())
        }
        DType::I16 => {
            out.extend_from_slice(&(range(i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes())
        }
        DType::U16 | DType::F16 | DType::BF16 => {
            out.extend_from_slice(&(range(0, u16::MAX.into())? as u16).to_le_bytes())
        }
        DType::I8 => out.push(range(i8::MIN.into(), i8::MAX.into())? as i8 as u8),
        DType::Bool => out.push(range(0, 1)? as u8),
        _ => out.push(range(0, u8::MAX.into())? as u8),
    }
    Ok(())
}

/// A `StringStringEntryProto`: key and value.
fn entry(mut s: Cursor<'_>, max: u64, budget: &mut Budget) -> Result<(String, String)> {
    let (mut k, mut v) = (String::new(), String::new());
    while let Some(f) = s.next_field()? {
        match f.number {
            1 => k = string(&s, &f, "metadata key", max, budget)?,
            2 => v = string(&s, &f, "metadata value", max, budget)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// The fields of a `TensorProto` (an initializer), its data as ranges.
fn tensor_fields(mut s: Cursor<'_>, limits: &Limits, budget: &mut Budget) -> Result<TensorFields> {
    let mut t = TensorFields::default();
    let max_name = limits.max_name_len as u64;
    let max = limits.max_index_bytes;
    let dim = |v: u64, dims: &mut Vec<u64>| -> Result<()> {
        if (v as i64) < 0 {
            return Err(Error::malformed(format!(
                "a dim is negative ({})",
                v as i64
            )));
        }
        limits.check_rank(dims.len() as u64 + 1)?;
        dims.push(v);
        Ok(())
    };
    while let Some(f) = s.next_field()? {
        match f.number {
            1 => match f.value {
                Value::Varint(v) => dim(v, &mut t.dims)?,
                Value::Bytes(o, n) => {
                    let b = s.bytes(o, n)?;
                    packed_varints(&b, |v| dim(v, &mut t.dims))?;
                }
                _ => return Err(wrong_type(&f, "dims", "int64")),
            },
            2 => t.data_type = Some(as_varint(&f, "data_type")?),
            3 => {
                return Err(Error::unsupported(
                    "the initializer is stored in segments (TensorProto.segment), which Tessera does not read",
                )
                .at_offset(f.at))
            }
            4 | 5 | 7 | 10 | 11 => {
                let bytes = match (f.number, f.value) {
                    (_, Value::Bytes(_, n)) => n,
                    (4, Value::Fixed32(_)) => 4,
                    (10, Value::Fixed64(_)) => 8,
                    (5 | 7 | 11, Value::Varint(_)) => 1,
                    _ => return Err(wrong_type(&f, field_name(f.number), "of its type")),
                };
                match t.typed {
                    Some((g, _)) if g != f.number => {
                        return Err(Error::malformed(format!(
                            "an initializer holds both {} and {}",
                            field_name(g),
                            field_name(f.number)
                        ))
                        .at_offset(f.at))
                    }
                    _ => {}
                }
                let so_far = t.typed.map_or(0, |(_, b)| b);
                t.typed = Some((f.number, so_far.saturating_add(bytes)));
            }
            6 => {
                let (o, n) = as_bytes(&f, "string_data")?;
                limits.check_entries(t.strings.len() as u64 + 1)?;
                budget.take(n, "string_data")?;
                let b = s.bytes(o, n)?;
                t.strings.push(match std::str::from_utf8(&b) {
                    Ok(x) => J::from(x),
                    Err(_) => json!({"$bytes": b.iter().map(|x| format!("{x:02x}")).collect::<String>()}),
                });
            }
            8 => t.name = Some(string(&s, &f, "initializer name", max_name, budget)?),
            9 => {
                if t.raw.is_some() {
                    return Err(Error::malformed("an initializer has two raw_data fields").at_offset(f.at));
                }
                t.raw = Some(as_bytes(&f, "raw_data")?);
            }
            13 => {
                let (o, n) = as_bytes(&f, "external_data")?;
                if t.external.len() >= 64 {
                    return Err(Error::limit("an initializer has over 64 external_data entries"));
                }
                t.external.push(entry(s.sub(o, n, "external_data"), max, budget)?);
            }
            14 => t.location = as_varint(&f, "data_location")?,
            _ => {}
        }
    }
    Ok(t)
}

/// A graph input or output (`ValueInfoProto`) as JSON: name, type and shape, the type
/// read down to its dimensions (a fixed depth), other kinds of type named only.
fn value_info(mut s: Cursor<'_>, limits: &Limits, budget: &mut Budget) -> Result<J> {
    let max = limits.max_index_bytes;
    let mut out = serde_json::Map::new();
    out.insert("name".into(), J::from(""));
    while let Some(f) = s.next_field()? {
        match f.number {
            1 => {
                out.insert(
                    "name".into(),
                    J::from(string(&s, &f, "value name", max, budget)?),
                );
            }
            2 => {
                let (o, n) = as_bytes(&f, "type")?;
                let mut ty = s.sub(o, n, "TypeProto");
                while let Some(g) = ty.next_field()? {
                    let kind = match g.number {
                        1 => "tensor",
                        8 => "sparse_tensor",
                        4 => "sequence",
                        5 => "map",
                        9 => "optional",
                        _ => continue,
                    };
                    out.insert("kind".into(), J::from(kind));
                    if g.number != 1 && g.number != 8 {
                        continue;
                    }
                    let (o, n) = as_bytes(&g, "tensor type")?;
                    let mut tt = ty.sub(o, n, "TypeProto.Tensor");
                    while let Some(h) = tt.next_field()? {
                        match h.number {
                            1 => {
                                out.insert(
                                    "type".into(),
                                    J::from(type_name(as_varint(&h, "elem_type")?)),
                                );
                            }
                            2 => {
                                let (o, n) = as_bytes(&h, "shape")?;
                                out.insert(
                                    "shape".into(),
                                    J::Array(shape(
                                        tt.sub(o, n, "TensorShapeProto"),
                                        limits,
                                        budget,
                                    )?),
                                );
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(J::Object(out))
}

/// A `TensorShapeProto`'s dimensions: a number, a parameter's name, or null.
fn shape(mut s: Cursor<'_>, limits: &Limits, budget: &mut Budget) -> Result<Vec<J>> {
    let mut dims = Vec::new();
    while let Some(f) = s.next_field()? {
        if f.number != 1 {
            continue;
        }
        limits.check_rank(dims.len() as u64 + 1)?;
        let (o, n) = as_bytes(&f, "dim")?;
        let mut d = s.sub(o, n, "Dimension");
        let mut v = J::Null;
        while let Some(g) = d.next_field()? {
            match g.number {
                1 => v = J::from(int64(&g, "dim_value")?),
                2 => {
                    v = J::from(string(
                        &d,
                        &g,
                        "dim_param",
                        limits.max_name_len as u64,
                        budget,
                    )?)
                }
                _ => {}
            }
        }
        dims.push(v);
    }
    Ok(dims)
}

/// The path of external data `location`, relative to the model's directory and never
/// outside it: an absolute path, a `..` component or a link out of the directory is
/// refused.
fn external_path(location: &str, opts: &ReadOptions) -> Result<PathBuf> {
    let escapes = || {
        Error::malformed(format!(
            "external data location {location:?} is not a path inside the model's directory"
        ))
    };
    if location.is_empty() || location.contains('\0') {
        return Err(escapes());
    }
    let p = Path::new(location);
    let drive = location.as_bytes().get(1) == Some(&b':');
    if p.is_absolute()
        || p.has_root()
        || drive
        || location.starts_with('\\')
        || location.split(['/', '\\']).any(|c| c == "..")
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(escapes());
    }
    if opts.sibling.is_some() {
        return Err(Error::unsupported(format!(
            "the model's initializers are in an external file ({location:?}), which Tessera \
             reads only beside a local model"
        )));
    }
    let Some(model) = &opts.path else {
        return Err(Error::unsupported(format!(
            "the model's initializers are in an external file ({location:?}), and the model \
             was opened without its path"
        )));
    };
    let dir = model.parent().unwrap_or(Path::new(""));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let full = dir.join(p);
    let real_dir = dir
        .canonicalize()
        .map_err(|e| Error::from(e).at_subject(dir.display().to_string()))?;
    let real = full.canonicalize().map_err(|e| {
        Error::new(
            Error::from(e).kind(),
            format!("external data file {location:?} beside the model: not found or not readable"),
        )
    })?;
    if !real.starts_with(&real_dir) {
        return Err(escapes());
    }
    Ok(real)
}

impl TensorSource for OnnxFile<'_> {
    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    fn tensor_infos(&self) -> &[TensorInfo] {
        &self.infos
    }
    fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = crate::model::tensor_position(&self.index, name)?;
        let subject = || format!("initializer {name:?}");
        let bytes: Cow<'_, [u8]> = match &self.data[i] {
            Data::Raw(o, n) => self.src.read_at(*o, *n)?,
            Data::Typed { msg, field } => Cow::Owned(
                self.decode(i, *msg, *field)
                    .map_err(|e| e.at_subject(subject()))?,
            ),
            Data::External {
                file,
                offset,
                len,
                checksum,
            } => {
                if let (Some(sum), true) = (checksum, self.verify) {
                    self.check_external(*file, sum)
                        .map_err(|e| e.at_subject(subject()))?;
                }
                let d: &[u8] = &self.externals[*file].data;
                // In range: checked at open against the file's length.
                Cow::Borrowed(&d[*offset as usize..(*offset + *len) as usize])
            }
        };
        TensorView::dense(self.infos[i].clone(), bytes).map_err(|e| e.at_subject(subject()))
    }
    fn source_format(&self) -> Option<Format> {
        Some(Format::Onnx)
    }
}

impl Container for OnnxFile<'_> {
    fn format(&self) -> Format {
        Format::Onnx
    }
    fn version(&self) -> String {
        format!("IR {}", self.ir_version)
    }
    fn verify(&self, opts: &VerifyOptions) -> VerifyReport {
        let mut r = VerifyReport {
            warnings: self.warnings.clone(),
            ..Default::default()
        };
        r.ok("file", "structure");
        let mut checked = vec![false; self.externals.len()];
        for (info, d) in self.infos.iter().zip(&self.data) {
            let subject = format!("tensor {:?}", info.name);
            match d {
                Data::Typed { msg, field } => {
                    let i = self.index[&info.name];
                    match self.decode(i, *msg, *field) {
                        Ok(_) => r.ok(subject, "decode"),
                        Err(e) => r.failed(subject, "decode", e.message().to_string()),
                    }
                }
                Data::External {
                    file,
                    checksum: Some(sum),
                    ..
                } if !checked[*file] => {
                    checked[*file] = true;
                    let e = &self.externals[*file];
                    r.compare(
                        format!("external file {:?}", e.location),
                        "sha1",
                        sum,
                        e.sha1(),
                    );
                }
                _ => {}
            }
            opts.advance(crate::verify::progress_bytes(info));
        }
        if !self.data.iter().any(|d| {
            matches!(
                d,
                Data::External {
                    checksum: Some(_),
                    ..
                }
            )
        }) {
            r.push(
                "file",
                "checksum",
                Status::NotChecked,
                Some("ONNX stores no checksums but external data's optional SHA-1; dims, types and ranges were validated".into()),
            );
        }
        r
    }
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

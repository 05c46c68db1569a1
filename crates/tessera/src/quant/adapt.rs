//! The conversion steps `--dequantize` and `--quantize` (`ConvertOptions::dequantize`,
//! `ConvertOptions::quantize`), for any source and target: which tensors they change,
//! the description each becomes, and the work on its bytes. `convert::prepare` asks [`plan`] per tensor and
//! `Prepared::tensor` calls [`apply`].
//!
//! With both options (GGUF to GGUF), packed tensors of another type are decoded and
//! encoded again (`quantize(dequantize(x))`, as gguf-py would), tensors already of the
//! asked type pass unchanged, and packed tensors whose shape cannot be quantized are
//! decoded to the `--dequantize` type.

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::metadata::{Map, Value};
use crate::tensor::{Layout, Part, TensorInfo, TensorView};

use super::{
    dequantize, f32_to_bytes, floats_to_f32, keep_float_reason, quantize, GgmlType, QuantKind,
    ATTR_GGML_TYPE,
};

/// What happens to one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Decode packed ggml blocks to this float dtype.
    Dequantize(DType),
    /// Encode a float tensor as these blocks.
    Quantize(QuantKind),
    /// Decode packed blocks to f32, then encode them as these blocks (both options
    /// given), as `quantize(dequantize(...))` does in gguf-py.
    Requantize(QuantKind),
}

/// The dtypes `--dequantize` accepts.
pub const DEQUANTIZE_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The ggml type of a packed GGUF tensor description, if it is one.
pub fn packed_type(info: &TensorInfo) -> Option<GgmlType> {
    match &info.layout {
        Layout::Other(l) => GgmlType::from_layout_name(l),
        _ => None,
    }
}

/// Checks `--dequantize`'s dtype before any tensor is looked at. (Which targets
/// `--quantize` may write is the target's to say: `Codec::quantizes`, checked by
/// `convert::prepare`.)
pub fn check_dequantize(dequant: Option<DType>) -> Result<()> {
    if let Some(d) = dequant {
        if !DEQUANTIZE_DTYPES.contains(&d) {
            return Err(Error::invalid_input(format!(
                "dequantize takes f32, f16 or bf16, not {d}"
            )));
        }
    }
    Ok(())
}

/// The step for `info` under the options, with the description it becomes and a note;
/// `None` when the tensor passes unchanged (by these two options).
pub fn plan(
    info: &TensorInfo,
    dequant: Option<DType>,
    quant: Option<QuantKind>,
    notes: &mut Vec<String>,
) -> Result<Option<(TensorInfo, Step)>> {
    let name = &info.name;
    if let (Some(to), Some(ty)) = (dequant, packed_type(info)) {
        if !super::can_dequantize(ty) {
            return Err(Error::unsupported(format!(
                "tensor {name:?} is {}; Tessera cannot dequantize this type yet",
                ty.name
            )));
        }
        if quant.is_some_and(|k| k.ggml_type() == ty) {
            return Ok(None); // already what the output asks for
        }
        if let Some(kind) = quant {
            if keep_float_reason(kind, DType::F32, &info.shape).is_none() {
                let out = packed_info(info, kind.ggml_type());
                notes.push(format!(
                    "requantized {name:?} {} -> {kind}",
                    ty.name.to_ascii_lowercase()
                ));
                return Ok(Some((out, Step::Requantize(kind))));
            }
        }
        let mut out = TensorInfo::dense(name.clone(), to, info.shape.clone());
        out.attrs = without_ggml_type(&info.attrs);
        notes.push(format!(
            "dequantized {name:?} {} -> {to}",
            ty.name.to_ascii_lowercase()
        ));
        return Ok(Some((out, Step::Dequantize(to))));
    }
    let Some(kind) = quant else {
        return Ok(None);
    };
    if info.layout != Layout::Dense {
        return Ok(None);
    }
    if let Some(why) = keep_float_reason(kind, info.dtype, &info.shape) {
        notes.push(format!(
            "kept {name:?} as {} ({why}; llama.cpp's converter keeps such tensors too)",
            info.dtype
        ));
        return Ok(None);
    }
    let out = packed_info(info, kind.ggml_type());
    notes.push(format!("quantized {name:?} {} -> {kind}", info.dtype));
    Ok(Some((out, Step::Quantize(kind))))
}

/// The description of `info` stored as packed `ty` blocks.
fn packed_info(info: &TensorInfo, ty: GgmlType) -> TensorInfo {
    let mut attrs = without_ggml_type(&info.attrs);
    attrs.insert(ATTR_GGML_TYPE, Value::Int(ty.id as i128));
    TensorInfo {
        name: info.name.clone(),
        dtype: DType::U8,
        shape: info.shape.clone(),
        layout: Layout::Other(ty.layout_name()),
        attrs,
        storage: Default::default(),
    }
}

fn without_ggml_type(attrs: &Map) -> Map {
    let mut out = Map::new();
    for (k, v) in attrs.iter() {
        if k != ATTR_GGML_TYPE {
            out.insert(k, v.clone());
        }
    }
    out
}

/// Applies `step` to the source's view `v`, giving a view described by `info`.
pub fn apply(step: Step, v: TensorView<'_>, info: &TensorInfo) -> Result<TensorView<'static>> {
    let name = &info.name;
    let numel = info.numel()?;
    let decode = |v: &TensorView<'_>| -> Result<Vec<f32>> {
        let ty = packed_type(&v.info).ok_or_else(|| {
            Error::invalid_input(format!("tensor {name:?} is not a packed ggml tensor"))
        })?;
        match v.parts.as_slice() {
            [p] if p.role == "data" => dequantize(name, ty, &p.bytes, numel),
            _ => Err(Error::malformed(format!(
                "tensor {name:?}: a packed ggml tensor has exactly one part, \"data\""
            ))),
        }
    };
    let packed = |bytes: Vec<u8>| TensorView {
        info: info.clone(),
        parts: vec![Part {
            role: "data".into(),
            bytes: Cow::Owned(bytes),
        }],
    };
    match step {
        Step::Dequantize(to) => {
            let out = f32_to_bytes(name, &decode(&v)?, to)?;
            TensorView::dense(info.clone(), Cow::Owned(out))
        }
        Step::Quantize(kind) => {
            let x = floats_to_f32(name, v.info.dtype, v.data()?)?;
            Ok(packed(quantize(name, kind, &x)?))
        }
        Step::Requantize(kind) => Ok(packed(quantize(name, kind, &decode(&v)?)?)),
    }
}

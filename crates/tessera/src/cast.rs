//! Explicit dtype casts (`--cast`): the nearest dtype a target holds, and the element
//! conversion. Integer casts check every value's range and refuse to wrap; float casts
//! round to nearest (even); int → float is allowed only where the float holds every
//! value exactly is not guaranteed, so the report names the cast.

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Layout, Part, TensorView};

/// Preference lists: for each source dtype, the dtypes to try, best first.
fn preferences(d: DType) -> &'static [DType] {
    use DType::*;
    match d {
        F64 => &[F32, BF16, F16],
        F32 => &[F64, BF16, F16],
        F16 => &[F32, F64, BF16],
        BF16 => &[F32, F64, F16],
        F8E4M3FN | F8E5M2 | F8E4M3FNUZ | F8E5M2FNUZ | F8E8M0 | F4E2M1 | F6E2M3 | F6E3M2 => {
            &[F16, BF16, F32, F64]
        }
        Bool => &[U8, I8, I16, I32, I64, U16, U32, U64, F32],
        U8 => &[U16, I16, I32, I64, U32, U64, F32],
        I8 => &[I16, I32, I64, F32],
        U16 => &[U32, I32, I64, U64, F32],
        I16 => &[I32, I64, F32],
        U32 => &[U64, I64, I32, F64],
        I32 => &[I64, U32, F64],
        U64 => &[I64, U32, I32, F64],
        I64 => &[U64, I32, U32, F64],
        C64 | C128 => &[],
    }
}

/// The dtype among `available` that `from` should be cast to.
pub fn cast_target(from: DType, available: &[DType]) -> Option<DType> {
    preferences(from)
        .iter()
        .copied()
        .find(|d| available.contains(d))
}

enum Num {
    I(i128),
    F(f64),
}

fn read(d: DType, b: &[u8], i: usize) -> Result<Num> {
    let out_of_range = || Error::invalid_input("element out of range");
    if !(d.is_int() || d == DType::Bool) {
        return d.element_as_f64(b, i).map(Num::F).ok_or_else(out_of_range);
    }
    // Integers exactly, not through f64 (which loses precision past 2^53).
    let sz = d.size();
    let s = b.get(i * sz..(i + 1) * sz).ok_or_else(out_of_range)?;
    let mut w = [0u8; 8];
    w[..sz].copy_from_slice(s);
    let u = u64::from_le_bytes(w);
    let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    Ok(Num::I(if signed {
        let shift = 64 - 8 * sz as u32;
        (((u << shift) as i64) >> shift) as i128
    } else {
        u as i128
    }))
}

fn write(d: DType, n: Num, out: &mut Vec<u8>, name: &str) -> Result<()> {
    use DType::*;
    let range_err = |v: i128| {
        Error::unsupported(format!(
            "tensor {name:?}: value {v} does not fit in {d}; cast refused"
        ))
    };
    // A finite value that becomes infinite in a narrower float is a loss the caller did
    // not ask for: refuse it, as an out-of-range integer is refused.
    let overflow = |v: f64, narrowed: f64| {
        if v.is_finite() && !narrowed.is_finite() {
            Err(Error::unsupported(format!(
                "tensor {name:?}: value {v} overflows {d}; cast refused"
            )))
        } else {
            Ok(())
        }
    };
    match (&d, &n) {
        (F32, Num::F(v)) => overflow(*v, *v as f32 as f64)?,
        (F16, Num::F(v)) => overflow(*v, half::f16::from_f64(*v).to_f64())?,
        (BF16, Num::F(v)) => overflow(*v, half::bf16::from_f64(*v).to_f64())?,
        (F16, Num::I(v)) => overflow(*v as f64, half::f16::from_f64(*v as f64).to_f64())?,
        _ => {}
    }
    match (d, n) {
        (F64, Num::F(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (F64, Num::I(v)) => out.extend_from_slice(&(v as f64).to_le_bytes()),
        (F32, Num::F(v)) => out.extend_from_slice(&(v as f32).to_le_bytes()),
        (F32, Num::I(v)) => out.extend_from_slice(&(v as f32).to_le_bytes()),
        (F16, Num::F(v)) => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        (F16, Num::I(v)) => out.extend_from_slice(&half::f16::from_f64(v as f64).to_le_bytes()),
        (BF16, Num::F(v)) => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        (BF16, Num::I(v)) => out.extend_from_slice(&half::bf16::from_f64(v as f64).to_le_bytes()),
        (_, Num::F(_)) => {
            return Err(Error::unsupported(format!(
                "tensor {name:?}: float to {d} is not a cast Tessera makes"
            )))
        }
        (_, Num::I(v)) => {
            let (lo, hi): (i128, i128) = match d {
                U8 | Bool => (0, u8::MAX as i128),
                U16 => (0, u16::MAX as i128),
                U32 => (0, u32::MAX as i128),
                U64 => (0, u64::MAX as i128),
                I8 => (i8::MIN as i128, i8::MAX as i128),
                I16 => (i16::MIN as i128, i16::MAX as i128),
                I32 => (i32::MIN as i128, i32::MAX as i128),
                I64 => (i64::MIN as i128, i64::MAX as i128),
                _ => return Err(Error::unsupported(format!("cannot cast to {d}"))),
            };
            if v < lo || v > hi {
                return Err(range_err(v));
            }
            let bytes = (v as u64).to_le_bytes();
            out.extend_from_slice(&bytes[..d.size()]);
        }
    }
    Ok(())
}

/// Casts a dense view to `to`. Integer values out of the target's range are an error.
pub fn cast_view(v: TensorView<'_>, to: DType) -> Result<TensorView<'static>> {
    if v.info.layout != Layout::Dense {
        return Err(Error::unsupported(format!(
            "tensor {:?}: only dense tensors can be cast",
            v.info.name
        )));
    }
    let from = v.info.dtype;
    if matches!(from, DType::C64 | DType::C128) || matches!(to, DType::C64 | DType::C128) {
        return Err(Error::unsupported(format!(
            "tensor {:?}: complex casts are not supported",
            v.info.name
        )));
    }
    let data = v.data()?;
    let n = usize::try_from(v.info.numel()?)
        .map_err(|_| Error::invalid_input("tensor too large to cast"))?;
    let mut out = Vec::with_capacity(n.saturating_mul(to.size()));
    for i in 0..n {
        write(to, read(from, data, i)?, &mut out, &v.info.name)?;
    }
    let mut info = v.info;
    info.dtype = to;
    Ok(TensorView {
        info,
        parts: vec![Part {
            role: "data".into(),
            bytes: Cow::Owned(out),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorInfo;

    #[test]
    fn picks_nearest_available() {
        use DType::*;
        assert_eq!(cast_target(F64, &[F32, F16, BF16, I32]), Some(F32));
        assert_eq!(cast_target(I64, &[F32, F16, BF16, I32]), Some(I32));
        assert_eq!(cast_target(Bool, &[F32, I32]), Some(I32));
        assert_eq!(cast_target(C64, &[F32]), None);
    }

    #[test]
    fn casts_values_and_refuses_out_of_range() {
        let data: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let v = TensorView::dense(
            TensorInfo::dense("a", DType::F64, vec![2]),
            Cow::Owned(data),
        )
        .unwrap();
        let c = cast_view(v, DType::F32).unwrap();
        let want: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(c.data().unwrap(), &want[..]);

        let big: Vec<u8> = [1i64 << 40].iter().flat_map(|x| x.to_le_bytes()).collect();
        let v = TensorView::dense(TensorInfo::dense("b", DType::I64, vec![1]), Cow::Owned(big))
            .unwrap();
        assert!(cast_view(v, DType::I32).is_err());

        let huge: Vec<u8> = 1e300f64.to_le_bytes().to_vec();
        let v = TensorView::dense(TensorInfo::dense("h", DType::F64, vec![]), Cow::Owned(huge))
            .unwrap();
        let e = cast_view(v, DType::F32).unwrap_err();
        assert!(e.to_string().contains("overflows f32"), "{e}");
        let inf: Vec<u8> = f64::INFINITY.to_le_bytes().to_vec();
        let v =
            TensorView::dense(TensorInfo::dense("i", DType::F64, vec![]), Cow::Owned(inf)).unwrap();
        assert_eq!(
            cast_view(v, DType::F32).unwrap().data().unwrap(),
            &f32::INFINITY.to_le_bytes()
        );

        let neg: Vec<u8> = (-5i64).to_le_bytes().to_vec();
        let v =
            TensorView::dense(TensorInfo::dense("c", DType::I64, vec![]), Cow::Owned(neg)).unwrap();
        let c = cast_view(v, DType::I32).unwrap();
        assert_eq!(c.data().unwrap(), &(-5i32).to_le_bytes());
    }
}

//! Typed access to dense tensors: [`Element`], the plain Rust types a dtype maps to
//! one to one, and [`TensorView::from_slice`] / [`TensorView::to_vec`] over it.
//!
//! Tensor bytes are canonical little-endian ([`crate::tensor::Part`]); both helpers go
//! through `to_le_bytes` / `from_le_bytes`, so they are right on any host, and a dtype
//! that does not match `T` is refused rather than reinterpreted. Both copy (the crate
//! has no `unsafe` to view a `&[f32]` as bytes); for zero-copy access use
//! [`TensorView::data`].

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{TensorInfo, TensorView};

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values are one dtype's elements: `bool`, `u8`…`u64`, `i8`…`i64`,
/// `f32`, `f64`, `half::f16`, `half::bf16`. Sealed: the list is the library's.
pub trait Element: sealed::Sealed + Copy + Sized {
    /// The dtype.
    const DTYPE: DType;
    /// Bytes per element.
    const SIZE: usize;
    /// Appends the element's little-endian bytes.
    #[doc(hidden)]
    fn put(self, out: &mut Vec<u8>);
    /// The element from its little-endian bytes (`SIZE` of them), or `None` when they
    /// are not a valid value (a `bool` byte other than 0 or 1).
    #[doc(hidden)]
    fn get(bytes: &[u8]) -> Option<Self>;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(bytes.try_into().ok()?))
            }
        }
    )*};
}

element!(
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    f32 => F32, f64 => F64, half::f16 => F16, half::bf16 => BF16,
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    const SIZE: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

impl TensorView<'static> {
    /// A dense tensor of `T`'s dtype from its values (copied, little-endian). Fails
    /// with `InvalidInput` when `shape` does not hold `data.len()` elements.
    ///
    /// ```
    /// let t = tessera::TensorView::from_slice("w", vec![2, 2], &[1.0f32, 2.0, 3.0, 4.0])?;
    /// assert_eq!(t.info.dtype, tessera::DType::F32);
    /// assert_eq!(t.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn from_slice<T: Element>(
        name: impl Into<String>,
        shape: Vec<u64>,
        data: &[T],
    ) -> Result<TensorView<'static>> {
        let mut bytes = Vec::with_capacity(data.len().saturating_mul(T::SIZE));
        for &x in data {
            x.put(&mut bytes);
        }
        TensorView::dense(TensorInfo::dense(name, T::DTYPE, shape), Cow::Owned(bytes))
    }
}

impl TensorView<'_> {
    /// The dense values as `T`. Fails with `InvalidInput` when the dtype is not `T`'s
    /// (no silent cast: see [`crate::cast`]), `Unsupported` for a layout other than
    /// dense, `Malformed` when the bytes are not whole elements or not valid values.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.info.dtype != T::DTYPE {
            return Err(Error::invalid_input(format!(
                "tensor {:?} is {}, not {}",
                self.info.name,
                self.info.dtype_label(),
                T::DTYPE.name()
            )));
        }
        let data = self.data()?;
        if data.len() % T::SIZE != 0 {
            return Err(Error::malformed(format!(
                "tensor {:?}: {} bytes are not whole {} elements",
                self.info.name,
                data.len(),
                T::DTYPE.name()
            )));
        }
        data.chunks_exact(T::SIZE)
            .enumerate()
            .map(|(i, c)| {
                T::get(c).ok_or_else(|| {
                    Error::malformed(format!(
                        "tensor {:?}: element {i} is not a valid {}",
                        self.info.name,
                        T::DTYPE.name()
                    ))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn values_round_trip_through_little_endian_bytes() {
        let t = TensorView::from_slice("w", vec![3], &[1u16, 0x0102, u16::MAX]).unwrap();
        // Little-endian on every host: the byte order is fixed by the format model.
        assert_eq!(t.data().unwrap(), [1, 0, 2, 1, 0xff, 0xff]);
        assert_eq!(t.to_vec::<u16>().unwrap(), [1, 0x0102, u16::MAX]);
        let h = [half::bf16::from_f32(1.5), half::bf16::from_f32(-2.0)];
        let t = TensorView::from_slice("h", vec![2], &h).unwrap();
        assert_eq!(t.info.dtype, DType::BF16);
        assert_eq!(t.data().unwrap(), [0xc0, 0x3f, 0x00, 0xc0]);
        assert_eq!(t.to_vec::<half::bf16>().unwrap(), h);
    }

    #[test]
    fn a_shape_that_does_not_hold_the_values_is_refused() {
        let e = TensorView::from_slice("w", vec![2, 2], &[1.0f32; 3]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn another_dtype_is_refused_not_reinterpreted() {
        let t = TensorView::from_slice("w", vec![2], &[1.0f32, 2.0]).unwrap();
        let e = t.to_vec::<u32>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("f32"), "{e}");
        let e = t.to_vec::<f64>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn bool_bytes_other_than_0_and_1_are_malformed() {
        let info = TensorInfo::dense("b", DType::Bool, vec![2]);
        let t = TensorView::dense(info, Cow::Borrowed(&[1u8, 2][..])).unwrap();
        let e = t.to_vec::<bool>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
        let t = TensorView::from_slice("b", vec![2], &[true, false]).unwrap();
        assert_eq!(t.to_vec::<bool>().unwrap(), [true, false]);
    }
}

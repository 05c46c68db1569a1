//! `setters!`: the by-value builder setters of the public option structs
//! (`WriteOptions::default().compression(Compression::Zstd(3)).ecc(Some(16))`).
//!
//! The option structs are `#[non_exhaustive]`, so code outside this crate cannot build
//! them as struct literals; it starts from `default()` and chains one setter per field.
//! Each setter is named after its field and takes the field's type as is. A macro
//! because the setters are one pattern repeated for every field.

/// `setters!(Struct { /// doc  field: Type, … })`: one `#[must_use]` setter per field,
/// named after it, taking the field's type and returning the struct. Attributes other
/// than docs (`#[cfg(feature = "gguf")]`) go on the setter too.
macro_rules! setters {
    ($ty:ident { $( $(#[$attr:meta])+ $field:ident : $t:ty ),+ $(,)? }) => {
        impl $ty {
            $(
                $(#[$attr])+
                #[must_use]
                pub fn $field(mut self, $field: $t) -> $ty {
                    self.$field = $field;
                    self
                }
            )+
        }
    };
}

pub(crate) use setters;

//! Models and format lists shared by the conversion tests (`matrix.rs`, `readback.rs`).
#![allow(dead_code)]

use std::borrow::Cow;

use tessera::convert::{capabilities, MetadataSupport};
use tessera::{DType, Format, Model, TensorInfo, TensorView};

/// Formats with both a reader and a writer that hold a model (not one array, as `.npy`),
/// which the matrix covers: every such line of the registry.
pub fn formats() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.can_read() && f.can_write() && !f.identity().single_tensor)
        .collect()
}

/// One dense tensor of a generated model.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub seed: u8,
}

/// A model of `specs`, each tensor's bytes a pattern of its position and seed (`bool`
/// bytes 0 or 1), with two metadata strings when asked.
pub fn model_of(specs: &[Spec], with_metadata: bool) -> Model {
    let mut m = Model::new();
    if with_metadata {
        m.metadata.insert("description", "matrix model");
        m.metadata.insert("license", "MIT");
    }
    for s in specs {
        let n = tessera::tensor::dense_nbytes(s.dtype, &s.shape).unwrap() as usize;
        let mut bytes: Vec<u8> = (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(s.seed))
            .collect();
        if s.dtype == DType::Bool {
            bytes.iter_mut().for_each(|b| *b &= 1);
        }
        super::clear_padding(s.dtype, &s.shape, &mut bytes);
        m.push(
            TensorView::dense(
                TensorInfo::dense(s.name.clone(), s.dtype, s.shape.clone()),
                Cow::Owned(bytes),
            )
            .unwrap(),
        )
        .unwrap();
    }
    m
}

/// Whether `f` carries file metadata at all.
pub fn carries_metadata(f: Format) -> bool {
    capabilities(f).is_some_and(|c| c.metadata != MetadataSupport::None)
}

//! One module per verb.

pub mod convert;
pub mod convert_set;
pub mod diff;
pub mod extract;
pub mod formats;
pub mod id;
pub mod inspect;
pub mod keys;
pub mod push;
pub mod repair;
pub mod sign;
pub mod snapshots;
pub mod stats;
pub mod stats_plot;
pub mod tour;
pub mod verify;
pub mod wtxt;

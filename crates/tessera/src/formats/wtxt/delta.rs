//! DELTA v2.

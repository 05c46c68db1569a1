//! age ASCII-armored encryption of a whole file (RESOLUTIONS 16).

use crate::any::ReadOptions;
use crate::error::{Error, Result};

/// Decrypts an age-armored file with the identities or passphrase of `opts`.
pub fn decrypt(_data: &[u8], _opts: &ReadOptions) -> Result<Vec<u8>> {
    Err(Error::unsupported("age decryption is not built in yet"))
}

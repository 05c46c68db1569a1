//! Header lines (`meta`, `cap`, `root`/`root_pending`, `sign`) and the strict
//! `key=value` field parser every line kind shares.

use crate::error::{Error, Result};
use crate::util::{hex, unhex};

/// Extensions in the order `cap ext=` lists them (RESOLUTIONS 13), then ours.
pub const CAP_ORDER: &[&str] = &[
    "crc32c",
    "line_parity",
    "arr_hmac",
    "delta_v2",
    "row_blocking",
    "ext_dtypes",
    "ext_names",
];

/// A Malformed error at a line.
pub fn bad(n: usize, msg: impl Into<String>) -> Error {
    Error::malformed(msg).at_subject(format!("line {n}"))
}

/// Checks the armor of a non-base64 line: printable ASCII, no trailing space, not empty.
pub fn check_text(line: &[u8], n: usize) -> Result<&str> {
    if let Some(p) = line.iter().position(|&b| !(0x20..=0x7e).contains(&b)) {
        let what = match line[p] {
            b'\r' => "a CR (LF line ends only)".to_string(),
            b'\t' => "a tab".to_string(),
            b => format!("byte 0x{b:02x} (printable ASCII only)"),
        };
        return Err(bad(n, format!("column {}: {what}", p + 1)));
    }
    if line.is_empty() {
        return Err(bad(n, "empty line"));
    }
    if line.last() == Some(&b' ') {
        return Err(bad(n, "trailing space"));
    }
    std::str::from_utf8(line).map_err(|_| bad(n, "not ASCII"))
}

/// Splits `tag k1=v1 k2=v2 …` into the values of exactly `keys`, in that order. Values
/// may be empty (`shape=`) or quoted (`note="…"`, no `"` inside).
pub fn fields<'a>(line: &'a str, tag: &str, keys: &[&str], n: usize) -> Result<Vec<&'a str>> {
    let rest = line
        .strip_prefix(tag)
        .and_then(|r| {
            if keys.is_empty() {
                Some(r)
            } else {
                r.strip_prefix(' ')
            }
        })
        .ok_or_else(|| bad(n, format!("expected a {tag:?} line")))?;
    let mut out = Vec::with_capacity(keys.len());
    let mut s = rest;
    for (i, key) in keys.iter().enumerate() {
        let v = s
            .strip_prefix(key)
            .and_then(|r| r.strip_prefix('='))
            .ok_or_else(|| {
                bad(
                    n,
                    format!(
                        "{tag}: expected field {key}= (fields in the order {})",
                        keys.join(" ")
                    ),
                )
            })?;
        let end = if let Some(q) = v.strip_prefix('"') {
            let close = q
                .find('"')
                .ok_or_else(|| bad(n, format!("{tag}: unterminated quoted value of {key}")))?;
            close + 2
        } else {
            v.find(' ').unwrap_or(v.len())
        };
        out.push(&v[..end]);
        let after = &v[end..];
        if i + 1 < keys.len() {
            s = after
                .strip_prefix(' ')
                .ok_or_else(|| bad(n, format!("{tag}: expected one space after {key}=")))?;
        } else if !after.is_empty() {
            return Err(bad(
                n,
                format!("{tag}: unexpected text after {key}=: {after:?}"),
            ));
        }
    }
    Ok(out)
}

/// Parses lowercase hex of exactly `N` bytes.
pub fn hex_n<const N: usize>(v: &str, what: &str, n: usize) -> Result<[u8; N]> {
    if v.len() != 2 * N || v.bytes().any(|b| !matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad(
            n,
            format!("{what} must be {} lowercase hex digits", 2 * N),
        ));
    }
    let b = unhex(v).ok_or_else(|| bad(n, format!("{what}: bad hex")))?;
    let mut a = [0u8; N];
    a.copy_from_slice(&b);
    Ok(a)
}

/// Parses decimal digits (no sign, no spaces) as u64.
pub fn digits(v: &str, what: &str, n: usize) -> Result<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            n,
            format!("{what} must be decimal digits, found {v:?}"),
        ));
    }
    v.parse()
        .map_err(|_| bad(n, format!("{what} {v:?} does not fit in 64 bits")))
}

/// Exactly `w` decimal digits.
pub fn fixed_digits(v: &str, w: usize, what: &str, n: usize) -> Result<u64> {
    if v.len() != w {
        return Err(bad(
            n,
            format!("{what} must be exactly {w} digits, found {v:?}"),
        ));
    }
    digits(v, what, n)
}

/// TOKEN: 1+ printable ASCII characters other than space, `=` and `"`.
pub fn is_token(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'=' && b != b'"')
}

/// `YYYY-MM-DDTHH:MM:SSZ` with plausible ranges.
pub fn is_timestamp(v: &str) -> bool {
    let b = v.as_bytes();
    if b.len() != 20 {
        return false;
    }
    let pat = b"dddd-dd-ddTdd:dd:ddZ";
    if !b.iter().zip(pat).all(|(c, p)| {
        if *p == b'd' {
            c.is_ascii_digit()
        } else {
            c == p
        }
    }) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| v[r].parse::<u32>().unwrap_or(99);
    (1..=12).contains(&num(5..7))
        && (1..=31).contains(&num(8..10))
        && num(11..13) < 24
        && num(14..16) < 60
        && num(17..19) < 61
}

/// The `meta` line's values, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// `schema=` (e.g. `weights/v1`).
    pub schema: String,
    /// `gen=` exactly as written (zero-padded decimal).
    pub gen: String,
    /// `ts=`.
    pub ts: String,
    /// `build=`.
    pub build: String,
    /// `host=`.
    pub host: String,
    /// `cuda=`.
    pub cuda: String,
}

const META_KEYS: &[&str] = &["schema", "gen", "ts", "build", "endian", "host", "cuda"];

impl Meta {
    /// The line, without LF.
    pub fn line(&self) -> String {
        format!(
            "meta schema={} gen={} ts={} build={} endian=LE host={} cuda={}",
            self.schema, self.gen, self.ts, self.build, self.host, self.cuda
        )
    }
    /// Parses a `meta` line.
    pub fn parse(line: &str, n: usize) -> Result<Meta> {
        let f = fields(line, "meta", META_KEYS, n)?;
        for (k, v) in META_KEYS.iter().zip(&f) {
            if matches!(*k, "schema" | "build" | "host" | "cuda") && !is_token(v) {
                return Err(bad(n, format!("meta: {k}={v:?} is not a token")));
            }
        }
        digits(f[1], "meta gen", n)?;
        if !is_timestamp(f[2]) {
            return Err(bad(
                n,
                format!("meta: ts={:?} is not YYYY-MM-DDTHH:MM:SSZ", f[2]),
            ));
        }
        if f[4] != "LE" {
            return Err(bad(n, format!("meta: endian={:?}, only LE exists", f[4])));
        }
        Ok(Meta {
            schema: f[0].into(),
            gen: f[1].into(),
            ts: f[2].into(),
            build: f[3].into(),
            host: f[5].into(),
            cuda: f[6].into(),
        })
    }
}

/// Parses `cap ext=a,b,c` (unknown items kept; readers ignore them).
pub fn parse_cap(line: &str, n: usize) -> Result<Vec<String>> {
    let f = fields(line, "cap", &["ext"], n)?;
    if f[0].is_empty() {
        return Ok(Vec::new());
    }
    f[0].split(',')
        .map(|s| {
            if is_token(s) && !s.contains(',') {
                Ok(s.to_string())
            } else {
                Err(bad(n, format!("cap: bad extension name {s:?}")))
            }
        })
        .collect()
}

/// The `cap` line for a set of extensions (written in [`CAP_ORDER`]).
pub fn cap_line(exts: &[&str]) -> String {
    let v: Vec<&str> = CAP_ORDER
        .iter()
        .copied()
        .filter(|e| exts.contains(e))
        .collect();
    format!("cap ext={}", v.join(","))
}

/// The root values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Root {
    /// `sha256_all`.
    pub sha256_all: [u8; 32],
    /// `merkle_prev`.
    pub merkle_prev: [u8; 32],
    /// `merkle_this`.
    pub merkle_this: [u8; 32],
    /// `fastxor`.
    pub fastxor: u64,
}

impl Root {
    /// The `root` line without LF.
    pub fn line(&self) -> String {
        format!(
            "root sha256_all={} merkle_prev={} merkle_this={} fastxor={:016x}",
            hex(&self.sha256_all),
            hex(&self.merkle_prev),
            hex(&self.merkle_this),
            self.fastxor
        )
    }
    /// Parses a `root` line.
    pub fn parse(line: &str, n: usize) -> Result<Root> {
        let f = fields(
            line,
            "root",
            &["sha256_all", "merkle_prev", "merkle_this", "fastxor"],
            n,
        )?;
        let x: [u8; 8] = hex_n(f[3], "root fastxor", n)?;
        Ok(Root {
            sha256_all: hex_n(f[0], "root sha256_all", n)?,
            merkle_prev: hex_n(f[1], "root merkle_prev", n)?,
            merkle_this: hex_n(f[2], "root merkle_this", n)?,
            fastxor: u64::from_be_bytes(x),
        })
    }
}

/// The `root_pending` line of a WTXT-S (RESOLUTIONS 14).
pub const ROOT_PENDING: &str = "root_pending sha256_all=0000000000000000000000000000000000000000000000000000000000000000 note=\"finalize with WSUM\"";

/// Parses a `root_pending` line (any quoted note).
pub fn parse_root_pending(line: &str, n: usize) -> Result<()> {
    let f = fields(line, "root_pending", &["sha256_all", "note"], n)?;
    if hex_n::<32>(f[0], "root_pending sha256_all", n)? != [0; 32] {
        return Err(bad(n, "root_pending: sha256_all must be 64 zeros"));
    }
    if !(f[1].len() >= 2 && f[1].starts_with('"') && f[1].ends_with('"')) {
        return Err(bad(n, "root_pending: note must be a quoted value"));
    }
    Ok(())
}

/// `merkle_this = SHA-256(merkle_prev ‖ sha256_all ‖ ts ‖ gen ‖ build)` (RESOLUTIONS 7).
pub fn merkle_this(prev: &[u8; 32], all: &[u8; 32], meta: &Meta) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(prev);
    h.update(all);
    h.update(meta.ts.as_bytes());
    h.update(meta.gen.as_bytes());
    h.update(meta.build.as_bytes());
    h.finalize().into()
}

/// An Ed25519 signature line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sign {
    /// The 64-byte signature.
    pub sig: [u8; 64],
    /// `keyid`: first 8 bytes of SHA-256(public key).
    pub keyid: [u8; 8],
}

/// `keyid` of a public key (RESOLUTIONS 10).
pub fn keyid(public: &[u8; 32]) -> [u8; 8] {
    let h = crate::util::sha256(public);
    let mut k = [0u8; 8];
    k.copy_from_slice(&h[..8]);
    k
}

impl Sign {
    /// Signs `msg` with a seed.
    pub fn create(seed: &[u8; 32], msg: &[u8]) -> Sign {
        use ed25519_dalek::Signer;
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        Sign {
            sig: key.sign(msg).to_bytes(),
            keyid: keyid(&key.verifying_key().to_bytes()),
        }
    }
    /// Checks the signature of `msg` with a public key.
    pub fn verify(&self, public: &[u8; 32], msg: &[u8]) -> std::result::Result<(), String> {
        use ed25519_dalek::Verifier;
        if keyid(public) != self.keyid {
            // The given key is shown by nothing: it may be a secret key read as public.
            if keyid(
                &ed25519_dalek::SigningKey::from_bytes(public)
                    .verifying_key()
                    .to_bytes(),
            ) == self.keyid
            {
                return Err(crate::verify::SECRET_KEY_GIVEN.to_string());
            }
            return Err(format!(
                "signed by keyid {}, not by the trusted key",
                hex(&self.keyid)
            ));
        }
        let key = ed25519_dalek::VerifyingKey::from_bytes(public)
            .map_err(|_| "not a valid Ed25519 public key".to_string())?;
        key.verify(msg, &ed25519_dalek::Signature::from_bytes(&self.sig))
            .map_err(|_| "the signature does not match".to_string())
    }
    /// `ed25519=<b64> keyid=<hex>` (the fields, shared by `sign` and WSUM).
    pub fn b64(&self) -> String {
        base64_simd::STANDARD.encode_to_string(self.sig)
    }
    /// The `sign` line without LF.
    pub fn line(&self) -> String {
        format!("sign ed25519={} keyid={}", self.b64(), hex(&self.keyid))
    }
    /// Parses the two values.
    pub fn from_values(sig: &str, keyid: &str, n: usize) -> Result<Sign> {
        let raw = base64_simd::STANDARD
            .decode_to_vec(sig)
            .ok()
            .filter(|v| v.len() == 64 && sig.len() == 88)
            .ok_or_else(|| bad(n, "signature must be 88 base64 characters (64 bytes)"))?;
        let mut s = [0u8; 64];
        s.copy_from_slice(&raw);
        Ok(Sign {
            sig: s,
            keyid: hex_n(keyid, "keyid", n)?,
        })
    }
    /// Parses a `sign` line.
    pub fn parse(line: &str, n: usize) -> Result<Sign> {
        let f = fields(line, "sign", &["ed25519", "keyid"], n)?;
        Sign::from_values(f[0], f[1], n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_strict() {
        assert_eq!(
            fields("idx a=1 b=", "idx", &["a", "b"], 1).unwrap(),
            vec!["1", ""]
        );
        assert!(fields("idx b=1 a=2", "idx", &["a", "b"], 1).is_err());
        assert!(fields("idx a=1  b=2", "idx", &["a", "b"], 1).is_err());
        assert!(fields("idx a=1 b=2 c=3", "idx", &["a", "b"], 1).is_err());
        assert_eq!(
            fields("x n=\"a b\" m=1", "x", &["n", "m"], 1).unwrap(),
            vec!["\"a b\"", "1"]
        );
        assert!(check_text(b"a\tb", 3).is_err());
        assert!(check_text(b"ab ", 3).is_err());
        assert!(check_text(b"ab\r", 3).is_err());
        assert!(is_timestamp("2025-10-09T03:12:45Z"));
        assert!(!is_timestamp("2025-13-09T03:12:45Z"));
    }
}

//! AWS shared config and credentials files: what `AWS_PROFILE` (else `default`) says
//! in `~/.aws/credentials` and `~/.aws/config` (or `AWS_SHARED_CREDENTIALS_FILE` and
//! `AWS_CONFIG_FILE`), for whatever the environment does not set: access key, secret,
//! session token, region and endpoint (`endpoint_url`, top level or under `s3 =`).
//! object_store reads only the environment.
//!
//! The precedence is the AWS SDKs': environment variables first, then the credentials
//! file, then the config file (`[profile NAME]`, or `[default]`). A profile named by
//! `AWS_PROFILE` that neither file has is an error; a missing `default` is not (the
//! request is then anonymous). A profile that gets its keys another way (`role_arn`,
//! `credential_process`, `sso_*`, `web_identity_token_file`) and has none of its own is
//! refused as unsupported, naming the setting, rather than read anonymously.
//!
//! Hand-written: the files are INI with AWS's own rules — `[profile NAME]` sections in
//! the config file but `[NAME]` in the credentials file, indented lines continuing a
//! key as a sub-section (`s3 =` then `  endpoint_url = …`), `#` and `;` comments —
//! which the general INI crates parse differently (indented lines as new keys or as
//! errors), and the AWS crate that reads them (`aws-config`) brings in the whole SDK.
//! Values are never printed: errors name the file, the profile and the key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What a profile supplies (only the fields it sets).
#[derive(Default, Clone, PartialEq, Eq)]
pub(crate) struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("Profile")
            .field("access_key_id", &self.access_key_id.is_some())
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .finish_non_exhaustive()
    }
}

/// Keys a profile may use to get credentials in ways this reader does not follow.
const INDIRECT: &[&str] = &[
    "role_arn",
    "credential_process",
    "sso_session",
    "sso_start_url",
    "sso_account_id",
    "web_identity_token_file",
    "credential_source",
];

/// A section's keys; `s3 =` sub-keys as `s3.endpoint_url`.
type Section = HashMap<String, String>;

/// Parses an AWS INI file into sections by their header text (`default`,
/// `profile dev`, `dev`).
fn parse(text: &str) -> HashMap<String, Section> {
    let mut out: HashMap<String, Section> = HashMap::new();
    let mut section: Option<String> = None;
    let mut parent: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(h) = trimmed.strip_prefix('[') {
            let name = h.split(']').next().unwrap_or("").trim();
            // `[profile   dev]` is `profile dev`.
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            out.entry(name.clone()).or_default();
            section = Some(name);
            parent = None;
            continue;
        }
        let Some(sec) = &section else { continue };
        let Some((k, v)) = trimmed.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
        let indented = line.starts_with([' ', '\t']);
        let key = match (&parent, indented) {
            (Some(p), true) => format!("{p}.{k}"),
            _ => {
                // `s3 =` with nothing after it opens a sub-section.
                parent = v.is_empty().then(|| k.clone());
                k
            }
        };
        if let Some(s) = out.get_mut(sec) {
            s.insert(key, v);
        }
    }
    out
}

/// The profile the environment selects, read from the files the environment names
/// (`env` looks a variable up, `read` reads a file: `None` when it is absent).
pub(crate) fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Result<Profile> {
    let named = env("AWS_PROFILE").or_else(|| env("AWS_DEFAULT_PROFILE"));
    let name = named.clone().unwrap_or_else(|| "default".into());
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| -> Option<PathBuf> {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let creds_path = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_path = file("AWS_CONFIG_FILE", "config");
    let load = |p: &Option<PathBuf>| p.as_deref().and_then(read).map(|t| parse(&t));
    let creds = load(&creds_path).unwrap_or_default();
    let config = load(&config_path).unwrap_or_default();
    let from_creds = creds.get(&name);
    let config_key = match name.as_str() {
        "default" => "default".to_string(),
        n => format!("profile {n}"),
    };
    let from_config = config.get(&config_key).or_else(|| {
        // The config file of old tools names the default profile `[profile default]`.
        (name == "default")
            .then(|| config.get("profile default"))
            .flatten()
    });
    if from_creds.is_none() && from_config.is_none() {
        if named.is_some() {
            let files: Vec<String> = [&creds_path, &config_path]
                .iter()
                .filter_map(|p| p.as_ref().map(|p| p.display().to_string()))
                .collect();
            return Err(Error::invalid_input(format!(
                "AWS_PROFILE names the profile {name:?}, which neither {} has",
                files.join(" nor ")
            )));
        }
        return Ok(Profile::default());
    }
    let get = |k: &str| -> Option<String> {
        from_creds
            .and_then(|s| s.get(k))
            .or_else(|| from_config.and_then(|s| s.get(k)))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let p = Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: get("region"),
        endpoint_url: get("s3.endpoint_url").or_else(|| get("endpoint_url")),
    };
    if p.access_key_id.is_some() != p.secret_access_key.is_some() {
        return Err(Error::invalid_input(format!(
            "the AWS profile {name:?} sets only one of aws_access_key_id and aws_secret_access_key"
        )));
    }
    if p.access_key_id.is_none() {
        if let Some(k) = INDIRECT.iter().find(|k| get(k).is_some()) {
            return Err(Error::unsupported(format!(
                "the AWS profile {name:?} gets its credentials through {k}, which tessera does not follow; \
                 export AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (e.g. from `aws configure export-credentials`)"
            )));
        }
    }
    Ok(p)
}

/// [`resolve`] over the process environment and the file system.
pub(crate) fn from_env() -> Result<Profile> {
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    resolve(&env, &read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(vars: &[(&str, &str)], files: &[(&str, &str)]) -> Result<Profile> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let files: HashMap<PathBuf, String> = files
            .iter()
            .map(|(k, v)| (PathBuf::from(k), v.to_string()))
            .collect();
        resolve(&|n| vars.get(n).cloned(), &|p| files.get(p).cloned())
    }

    const CREDS: &str = "# keys\n[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = sdefault\n\n[dev]\naws_access_key_id=AKDEV\naws_secret_access_key=sdev\naws_session_token = tdev\n";
    const CONFIG: &str = "[default]\nregion = eu-west-1\n\n[profile dev]\nregion = us-west-2\ns3 =\n  endpoint_url = http://127.0.0.1:9000\n  addressing_style = path\n\n[profile sso]\nsso_session = corp\nregion = us-east-1\n";

    #[test]
    fn default_profile_from_home() {
        let p = run(
            &[("HOME", "/h")],
            &[("/h/.aws/credentials", CREDS), ("/h/.aws/config", CONFIG)],
        )
        .unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKDEFAULT"));
        assert_eq!(p.secret_access_key.as_deref(), Some("sdefault"));
        assert_eq!(p.session_token, None);
        assert_eq!(p.region.as_deref(), Some("eu-west-1"));
        assert_eq!(p.endpoint_url, None);
    }

    #[test]
    fn named_profile_from_the_files_the_environment_names() {
        let p = run(
            &[
                ("HOME", "/h"),
                ("AWS_PROFILE", "dev"),
                ("AWS_SHARED_CREDENTIALS_FILE", "/c"),
                ("AWS_CONFIG_FILE", "/f"),
            ],
            &[("/c", CREDS), ("/f", CONFIG), ("/h/.aws/credentials", "")],
        )
        .unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKDEV"));
        assert_eq!(p.session_token.as_deref(), Some("tdev"));
        assert_eq!(p.region.as_deref(), Some("us-west-2"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
    }

    #[test]
    fn a_missing_named_profile_is_an_error_a_missing_default_is_not() {
        let e = run(
            &[("HOME", "/h"), ("AWS_PROFILE", "nope")],
            &[("/h/.aws/config", CONFIG)],
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("\"nope\""), "{e}");
        assert_eq!(run(&[("HOME", "/h")], &[]).unwrap(), Profile::default());
    }

    #[test]
    fn indirect_credentials_are_refused_and_secrets_never_shown() {
        let e = run(
            &[("HOME", "/h"), ("AWS_PROFILE", "sso")],
            &[("/h/.aws/config", CONFIG)],
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
        assert!(e.to_string().contains("sso_session"), "{e}");
        let half = run(
            &[("HOME", "/h")],
            &[(
                "/h/.aws/credentials",
                "[default]\naws_access_key_id = AKHALF\n",
            )],
        )
        .unwrap_err();
        assert!(!half.to_string().contains("AKHALF"), "{half}");
        let p = run(&[("HOME", "/h")], &[("/h/.aws/credentials", CREDS)]).unwrap();
        let shown = format!("{p:?}");
        assert!(
            !shown.contains("sdefault") && !shown.contains("AKDEFAULT"),
            "{shown}"
        );
    }
}

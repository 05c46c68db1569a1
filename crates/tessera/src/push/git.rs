//! The Git target, through the `git` program (and `git-lfs` when the repository uses
//! it).
//!
//! A clone is kept in `PushOptions::work_dir` (`git-<hash of the URL>`), made by
//! `git clone --no-checkout` into a temporary name then renamed, and fetched again
//! (`--prune --prune-tags`: local leftovers of a failed push go) before each use. A push
//! checks out the remote's default branch (`main` in an empty repository), replaces the
//! previous generation's files (those its manifest lists) with the new ones and the
//! manifest, keeps `.gitattributes` (`*.wtxt text eol=lf diff=wtxt`; with LFS one
//! `PATTERN filter=lfs diff=lfs merge=lfs -text` line per file extension), commits as
//! `GIT_AUTHOR_*`/`GIT_COMMITTER_*` or `tessera <tessera@localhost>` with the message
//! `tessera snapshot gen-000000N step S digest D`, tags `gen-000000N` and runs
//! `git push --atomic origin HEAD:refs/heads/BRANCH refs/tags/gen-000000N` (LFS objects
//! go first, by git-lfs's pre-push hook; a `file://` remote uses git-lfs's built-in
//! standalone file transfer). Branch and tag move together or not at all; a failed
//! push deletes its local tag. Every git command runs with no terminal prompt and
//! `GIT_LFS_SKIP_SMUDGE=1` (files are never downloaded to be overwritten); fetching a
//! generation reads each blob with `git cat-file` and, for an LFS pointer, `git lfs
//! smudge`. `git` itself has no timeout here: a hung SSH or HTTPS remote hangs the
//! worker that called (ssh runs with `BatchMode=yes`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, ErrorKind, Result};

use super::{
    generation_name, parse_generation_name, same_digest, Artifact, Manifest, PushOptions,
    PushReceipt, Target, MANIFEST, MAX_JSON,
};

const LFS_POINTER: &[u8] = b"version https://git-lfs.github.com/spec/v1";
const WTXT_ATTRIBUTES: &str = "*.wtxt text eol=lf diff=wtxt";

fn command(dir: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    if let Some(d) = dir {
        c.arg("-C").arg(d);
    }
    c.arg("-c").arg("commit.gpgsign=false");
    c.arg("-c").arg("tag.gpgsign=false");
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    if std::env::var_os("GIT_SSH_COMMAND").is_none() {
        c.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
    }
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "tessera"),
        ("GIT_AUTHOR_EMAIL", "tessera@localhost"),
        ("GIT_COMMITTER_NAME", "tessera"),
        ("GIT_COMMITTER_EMAIL", "tessera@localhost"),
    ] {
        if std::env::var_os(k).is_none_or(|x| x.is_empty()) {
            c.env(k, v);
        }
    }
    c
}

/// Runs git; an exit other than 0 is an error saying what failed, where, and git's
/// last stderr lines.
fn run(t: &Target, dir: Option<&Path>, args: &[&str], what: &str) -> Result<Vec<u8>> {
    let out = command(dir).args(args).output().map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("{}: {what}: cannot run git: {e}", t.display()),
        )
    })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(Error::new(
            ErrorKind::Io,
            format!(
                "{}: {what} failed (git {}, {}): {}",
                t.display(),
                args.first().copied().unwrap_or(""),
                out.status,
                super::last_lines(&out.stderr, 8)
            ),
        ))
    }
}

fn ok(t: &Target, dir: &Path, args: &[&str]) -> Result<bool> {
    let st = command(Some(dir))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("{}: cannot run git: {e}", t.display()),
            )
        })?;
    Ok(st.success())
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).trim().to_string()
}

/// The clone of `url`, made or fetched up to date.
fn work_clone(t: &Target, url: &str, opts: &PushOptions) -> Result<PathBuf> {
    let base = opts
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-push"));
    std::fs::create_dir_all(&base)
        .map_err(|e| Error::from(e).at_subject(base.display().to_string()))?;
    let hash = blake3::hash(url.as_bytes()).to_hex();
    let work = base.join(format!("git-{}", &hash[..16]));
    if work.join(".git").is_dir() {
        run(
            t,
            Some(&work),
            &[
                "fetch",
                "-q",
                "--force",
                "--prune",
                "--prune-tags",
                "origin",
            ],
            "fetching",
        )?;
        return Ok(work);
    }
    let tmp = tempfile::Builder::new()
        .prefix(".clone-")
        .tempdir_in(&base)
        .map_err(|e| Error::from(e).at_subject(base.display().to_string()))?;
    let into = tmp.path().join("repo");
    let into_s = into.to_string_lossy().into_owned();
    run(
        t,
        None,
        &["clone", "-q", "--no-checkout", "--", url, &into_s],
        "cloning",
    )?;
    std::fs::rename(&into, &work)
        .map_err(|e| Error::from(e).at_subject(work.display().to_string()))?;
    Ok(work)
}

/// The branch generations go to: the remote's default, `main` when it has none.
fn branch(t: &Target, work: &Path) -> Result<String> {
    let out = run(
        t,
        Some(work),
        &["ls-remote", "--symref", "origin", "HEAD"],
        "asking the default branch",
    )?;
    for line in String::from_utf8_lossy(&out).lines() {
        if let Some(r) = line.strip_prefix("ref: refs/heads/") {
            if let Some((b, _)) = r.split_once('\t') {
                return Ok(b.to_string());
            }
        }
    }
    Ok("main".to_string())
}

/// The commit the remote's tag `gen` names, if any.
fn remote_tag(t: &Target, work: &Path, gen: &str) -> Result<Option<String>> {
    let out = run(
        t,
        Some(work),
        &["ls-remote", "origin", &format!("refs/tags/{gen}")],
        "listing tags",
    )?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .next()
        .and_then(|l| l.split('\t').next())
        .map(str::to_string))
}

/// The manifest stored at `rev`.
fn manifest_at(t: &Target, work: &Path, rev: &str, generation: u64) -> Result<Manifest> {
    let spec = format!("{rev}:{MANIFEST}");
    let size: u64 = text(run(
        t,
        Some(work),
        &["cat-file", "-s", &spec],
        "reading the manifest",
    )?)
    .parse()
    .unwrap_or(u64::MAX);
    let place = format!("{} {spec}", t.display());
    if size > MAX_JSON {
        return Err(Error::limit(format!(
            "{place}: the manifest is over {MAX_JSON} bytes"
        )));
    }
    let bytes = run(
        t,
        Some(work),
        &["cat-file", "blob", &spec],
        "reading the manifest",
    )?;
    Manifest::parse(&bytes, &place, generation)
}

/// The file extension pattern Git LFS tracks a file by (`*.wtxt`), or its name.
fn lfs_pattern(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => format!("*.{ext}"),
        _ => name.to_string(),
    }
}

/// The `.gitattributes` to commit, and whether files go through LFS.
fn attributes(existing: &str, a: &Artifact, lfs: bool) -> (String, bool) {
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let has = |out: &str, pat: &str| {
        out.lines()
            .any(|l| l.split_whitespace().next() == Some(pat))
    };
    if !has(&out, "*.wtxt") {
        out.push_str(WTXT_ATTRIBUTES);
        out.push('\n');
    }
    let uses_lfs = lfs || existing.contains("filter=lfs");
    if lfs {
        for (name, _) in &a.files {
            let pat = lfs_pattern(name);
            let tracked = out.lines().any(|l| {
                l.split_whitespace().next() == Some(pat.as_str()) && l.contains("filter=lfs")
            });
            if !tracked {
                out.push_str(&format!("{pat} filter=lfs diff=lfs merge=lfs -text\n"));
            }
        }
    }
    (out, uses_lfs)
}

pub(crate) fn push(t: &Target, url: &str, a: &Artifact, opts: &PushOptions) -> Result<PushReceipt> {
    let work = work_clone(t, url, opts)?;
    let gen = generation_name(a.generation);
    if let Some(commit) = remote_tag(t, &work, &gen)? {
        let m = manifest_at(t, &work, &format!("refs/tags/{gen}"), a.generation)?;
        same_digest(&m.digest, a, &format!("{} tag {gen}", t.display()))?;
        return Ok(PushReceipt {
            target: t.display(),
            generation: a.generation,
            already_present: true,
            location: commit,
            bytes_sent: 0,
        });
    }
    let branch = branch(t, &work)?;
    let remote_ref = format!("refs/remotes/origin/{branch}");
    if ok(t, &work, &["rev-parse", "-q", "--verify", &remote_ref])? {
        run(
            t,
            Some(&work),
            &["checkout", "-q", "-f", "-B", &branch, &remote_ref],
            "checking out",
        )?;
    } else {
        run(
            t,
            Some(&work),
            &["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")],
            "starting the branch",
        )?;
        // A local branch of an earlier failed push: start it anew.
        let _ = ok(
            t,
            &work,
            &["update-ref", "-d", &format!("refs/heads/{branch}")],
        );
        run(
            t,
            Some(&work),
            &["rm", "-rfq", "--cached", "--ignore-unmatch", "."],
            "emptying the index",
        )?;
    }
    run(
        t,
        Some(&work),
        &["clean", "-fdxq"],
        "cleaning the work tree",
    )?;
    // The previous generation's files go (the manifest lists them).
    if let Ok(prev) = std::fs::read(work.join(MANIFEST)) {
        if let Ok(m) = serde_json::from_slice::<Manifest>(&prev) {
            for f in m.files {
                if super::check_name(&f.name).is_ok() && !a.files.iter().any(|(n, _)| *n == f.name)
                {
                    let _ = std::fs::remove_file(work.join(&f.name));
                }
            }
        }
    }
    let existing = std::fs::read_to_string(work.join(".gitattributes")).unwrap_or_default();
    let (attrs, uses_lfs) = attributes(&existing, a, opts.lfs);
    let write = |p: PathBuf, b: &[u8]| {
        std::fs::write(&p, b).map_err(|e| Error::from(e).at_subject(p.display().to_string()))
    };
    write(work.join(".gitattributes"), attrs.as_bytes())?;
    if uses_lfs {
        run(
            t,
            Some(&work),
            &["lfs", "install", "--local"],
            "setting up Git LFS (is git-lfs installed?)",
        )?;
    }
    let manifest = Manifest::of(a)?;
    let mut sent = 0;
    for (name, path) in &a.files {
        sent += std::fs::copy(path, work.join(name))
            .map_err(|e| Error::from(e).at_subject(path.display().to_string()))?;
    }
    write(work.join(MANIFEST), &manifest.to_json()?)?;
    run(t, Some(&work), &["add", "-A"], "adding the files")?;
    let step = a.step.map_or("-".to_string(), |s| s.to_string());
    let msg = format!(
        "tessera snapshot {gen} step {step} digest {}\n\nformat: {}\nfiles: {}\n",
        a.digest,
        a.format,
        a.files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    run(
        t,
        Some(&work),
        &["commit", "-q", "--allow-empty", "--no-verify", "-m", &msg],
        "committing",
    )?;
    run(t, Some(&work), &["tag", "-f", &gen], "tagging")?;
    let pushed = run(
        t,
        Some(&work),
        &[
            "push",
            "-q",
            "--atomic",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
            &format!("refs/tags/{gen}:refs/tags/{gen}"),
        ],
        "pushing",
    );
    if let Err(e) = pushed {
        let _ = ok(t, &work, &["tag", "-d", &gen]);
        return Err(e);
    }
    let commit = text(run(
        t,
        Some(&work),
        &["rev-parse", "HEAD"],
        "reading the commit",
    )?);
    Ok(PushReceipt {
        target: t.display(),
        generation: a.generation,
        already_present: false,
        location: commit,
        bytes_sent: sent,
    })
}

pub(crate) fn list(t: &Target, url: &str, _opts: &PushOptions) -> Result<Vec<u64>> {
    let out = run(
        t,
        None,
        &["ls-remote", "--tags", url, "refs/tags/gen-*"],
        "listing tags",
    )?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.split('\t').nth(1))
        .filter_map(|r| r.strip_prefix("refs/tags/"))
        .filter_map(parse_generation_name)
        .collect())
}

pub(crate) fn fetch(
    t: &Target,
    url: &str,
    generation: u64,
    dir: &Path,
    opts: &PushOptions,
) -> Result<Vec<PathBuf>> {
    let work = work_clone(t, url, opts)?;
    let gen = generation_name(generation);
    let rev = format!("refs/tags/{gen}");
    if !ok(
        t,
        &work,
        &["rev-parse", "-q", "--verify", &format!("{rev}^{{commit}}")],
    )? {
        return Err(Error::not_found(format!(
            "{}: generation {generation} is not there (no tag {gen})",
            t.display()
        )));
    }
    let m = manifest_at(t, &work, &rev, generation)?;
    let mut out = Vec::new();
    for f in &m.files {
        let spec = format!("{rev}:{}", f.name);
        let place = format!("{} {spec}", t.display());
        let path = super::write_checked(dir, &f.name, f.size, &f.sha256, &place, |sink| {
            stream_blob(t, &work, &spec, &f.name, sink)
        })?;
        out.push(path);
    }
    Ok(out)
}

/// The blob at `spec` into `sink`; an LFS pointer is replaced by its object (`git lfs
/// smudge`, which downloads it).
fn stream_blob(
    t: &Target,
    work: &Path,
    spec: &str,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let size: u64 = text(run(
        t,
        Some(work),
        &["cat-file", "-s", spec],
        "reading a file",
    )?)
    .parse()
    .unwrap_or(u64::MAX);
    let head = if size < 1024 {
        Some(run(
            t,
            Some(work),
            &["cat-file", "blob", spec],
            "reading a file",
        )?)
    } else {
        None
    };
    let (mut child, input) = match head {
        Some(pointer) if pointer.starts_with(LFS_POINTER) => {
            let mut c = command(Some(work));
            c.env_remove("GIT_LFS_SKIP_SMUDGE")
                .args(["lfs", "smudge", "--", name])
                .stdin(Stdio::piped());
            (c, Some(pointer))
        }
        Some(small) => return sink(&small),
        None => {
            let mut c = command(Some(work));
            c.args(["cat-file", "blob", spec]);
            (c, None)
        }
    };
    let mut proc = child
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("{}: cannot run git: {e}", t.display()),
            )
        })?;
    if let Some(p) = input {
        let Some(mut stdin) = proc.stdin.take() else {
            return Err(Error::new(ErrorKind::Io, "git: no stdin pipe"));
        };
        std::thread::spawn(move || {
            let _ = stdin.write_all(&p);
        });
    }
    let Some(mut stderr) = proc.stderr.take() else {
        return Err(Error::new(ErrorKind::Io, "git: no stderr pipe"));
    };
    let errs = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let Some(mut stdout) = proc.stdout.take() else {
        return Err(Error::new(ErrorKind::Io, "git: no stdout pipe"));
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut result = Ok(());
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Err(e) = sink(&buf[..n]) {
                    result = Err(e);
                    break;
                }
            }
            Err(e) => {
                result = Err(Error::from(e));
                break;
            }
        }
    }
    drop(stdout);
    if result.is_err() {
        let _ = proc.kill();
    }
    let status = proc.wait().map_err(Error::from)?;
    let errs = errs.join().unwrap_or_default();
    result?;
    if !status.success() {
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "{}: reading {spec} failed ({status}): {}",
                t.display(),
                super::last_lines(&errs, 4)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_keep_the_repository_lines_and_add_wtxt_and_lfs() {
        let a = Artifact {
            files: vec![
                ("model.wtxt".into(), PathBuf::new()),
                ("x.bin".into(), PathBuf::new()),
            ],
            ..Artifact::default()
        };
        let (s, lfs) = attributes("*.pt binary", &a, false);
        assert_eq!(s, "*.pt binary\n*.wtxt text eol=lf diff=wtxt\n");
        assert!(!lfs);
        let (s, lfs) = attributes("*.bin filter=lfs diff=lfs merge=lfs -text\n", &a, false);
        assert!(lfs && s.ends_with(&format!("{WTXT_ATTRIBUTES}\n")), "{s}");
        let (s, lfs) = attributes("", &a, true);
        assert!(lfs);
        assert_eq!(
            s,
            "*.wtxt text eol=lf diff=wtxt\n*.wtxt filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"
        );
    }
}

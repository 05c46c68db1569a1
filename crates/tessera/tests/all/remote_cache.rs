//! The disk range cache of remote reads (`remote/cache.rs`), against the moto and nginx
//! servers of `remote.rs`: a second open of a URL fetches no object bytes, a replaced
//! object is fetched again, a damaged entry is never handed out, the bound evicts the
//! entries used least recently, and a cache that is off or unwritable writes nothing.
//! Each test has a cache folder of its own ([`RemoteOptions::cache_dir`]); the other
//! remote tests run without the cache.
#![cfg(feature = "remote")]

use std::path::{Path, PathBuf};

use tessera::remote::{Location, RemoteOptions, RemoteSource};
use tessera::{ErrorKind, Format, ReadOptions};

use crate::common::ext;
use crate::remote::{
    aero_paged, http_log, log_lines, open_location, servers, written, written_with, Servers,
};

/// The entry header: magic, start, length, BLAKE3 digest (`remote/cache.rs`).
const HEADER: usize = 56;

fn cached(srv: &Servers, dir: &Path) -> RemoteOptions {
    srv.remote().cache(true).cache_dir(Some(dir.to_path_buf()))
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(list) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in list.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The cache's entries (no temporary file may be among the files).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let all = files(dir);
    let temps: Vec<_> = all
        .iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "temporary files left: {temps:?}");
    all
}

/// `(start, end)` of an entry, from its name.
fn span(entry: &Path) -> (u64, u64) {
    let name = entry.file_name().unwrap().to_string_lossy().to_string();
    let (s, e) = name.split_once('-').unwrap();
    (s.parse().unwrap(), e.parse().unwrap())
}

/// Every tensor's bytes, read with the format's checks on.
fn read_all(url: &str, remote: &RemoteOptions) -> tessera::Result<Vec<(String, Vec<u8>)>> {
    let opened = open_location(url, &ReadOptions::default(), remote)?;
    let f = opened.container();
    f.tensor_infos()
        .iter()
        .map(|i| Ok((i.name.clone(), f.tensor(&i.name)?.data()?.to_vec())))
        .collect()
}

fn local_tensors(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let f = tessera::open(bytes, &ReadOptions::default()).unwrap();
    f.tensor_infos()
        .iter()
        .map(|i| {
            (
                i.name.clone(),
                f.tensor(&i.name).unwrap().data().unwrap().to_vec(),
            )
        })
        .collect()
}

/// The whole object through a [`RemoteSource`] in 1 MiB reads (read-ahead included);
/// returns the source, to count what it fetched.
fn read_source(url: &str, remote: &RemoteOptions) -> (RemoteSource, Vec<u8>) {
    use tessera::source::ByteSource;
    let src = RemoteSource::open(&Location::parse(url).unwrap(), remote).unwrap();
    let mut all = Vec::new();
    let mut at = 0;
    while at < src.len() {
        let n = (1 << 20).min(src.len() - at);
        all.extend_from_slice(&src.read_at(at, n).unwrap());
        at += n;
    }
    (src, all)
}

#[test]
fn a_second_open_of_a_url_fetches_no_object_bytes() {
    let Some(srv) = servers("a_second_open_of_a_url_fetches_no_object_bytes") else {
        return;
    };
    // An index at the start, one at the end (zTensor), and page hashes checked per read.
    let samples = [
        (Format::Safetensors, written(Format::Safetensors)),
        (Format::Ztensor, written(Format::Ztensor)),
        (Format::Aero, written_with(Format::Aero, &aero_paged())),
    ];
    for (format, bytes) in samples {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("cache/second.{}", ext(format));
        let (s3, http) = srv.stage(&name, &bytes);
        let remote = cached(&srv, dir.path());
        let want = local_tensors(&bytes);
        let before = http_log(&srv, &name, (0, 0));
        assert!(read_all(&http, &remote).unwrap() == want, "{format}");
        let cold = http_log(&srv, &name, before);
        assert!(cold.1 > 0, "{format}: the first open fetched nothing");
        let before = http_log(&srv, &name, (0, 0));
        assert!(read_all(&http, &remote).unwrap() == want, "{format}: warm");
        let warm = http_log(&srv, &name, before);
        let lines = log_lines(&srv, &name);
        assert_eq!(
            warm.1,
            0,
            "{format}: the second open fetched object bytes: {:?}",
            &lines[lines.len() - warm.0 as usize..]
        );
        // One HEAD per open (the current ETag), nothing else.
        let lines = log_lines(&srv, &name);
        let new = &lines[lines.len() - warm.0 as usize..];
        assert!(
            !new.is_empty() && new.iter().all(|l| l.starts_with("HEAD ")),
            "{format}: {new:?}"
        );
        // S3 alike, counted by the source: one request (the HEAD), no body bytes.
        let (cold, all) = read_source(&s3, &remote);
        assert!(all == bytes, "{format}");
        assert!(cold.bytes_fetched() >= bytes.len() as u64, "{format}");
        let (warm, all) = read_source(&s3, &remote);
        assert!(all == bytes, "{format}");
        assert_eq!(
            (warm.requests(), warm.bytes_fetched()),
            (1, 0),
            "{format}: S3, second open"
        );
        assert!(warm.bytes_from_cache() >= bytes.len() as u64, "{format}");
        assert!(!entries(dir.path()).is_empty());
        // The user's only: the bytes of private objects are there.
        #[cfg(unix)]
        for p in files(dir.path()) {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&p), 0o600, "{}", p.display());
            assert_eq!(mode(p.parent().unwrap()), 0o700, "{}", p.display());
            assert_eq!(mode(&dir.path().join("ranges")), 0o700);
        }
        // Nothing of the URL is written: neither in a name nor in an entry.
        for p in files(dir.path()) {
            assert!(!p.to_string_lossy().contains("second"), "{}", p.display());
            let data = std::fs::read(&p).unwrap();
            assert!(!data.windows(6).any(|w| w == b"second"), "{}", p.display());
        }
    }
}

/// A safetensors file of `count` tensors of 64 KiB, their bytes from `seed`.
fn model(seed: u8, count: usize) -> Vec<u8> {
    let tensors: Vec<(String, Vec<u8>)> = (0..count)
        .map(|t| {
            let data = (0..64 * 1024)
                .map(|i: usize| (i.wrapping_mul(31) as u8) ^ seed ^ t as u8)
                .collect();
            (format!("t{t}"), data)
        })
        .collect();
    let mut header = String::from("{");
    let mut at = 0;
    for (i, (name, d)) in tensors.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"U8\",\"shape\":[{}],\"data_offsets\":[{at},{}]}}",
            d.len(),
            at + d.len()
        ));
        at += d.len();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    for (_, d) in &tensors {
        out.extend_from_slice(d);
    }
    out
}

#[test]
fn a_replaced_object_is_fetched_again_and_its_old_entries_are_dropped() {
    let Some(srv) = servers("a_replaced_object_is_fetched_again_and_its_old_entries_are_dropped")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let remote = cached(&srv, dir.path());
    let name = "cache/replaced.safetensors";
    let v1 = model(1, 8);
    let (s3, http) = srv.stage(name, &v1);
    assert!(read_all(&http, &remote).unwrap() == local_tensors(&v1));
    assert!(read_all(&s3, &remote).unwrap() == local_tensors(&v1));
    // S3: the same size, other bytes (another ETag). HTTP: nginx's ETag is the time of
    // modification (in seconds) and the size: another size.
    // (`stage` writes both servers: S3 is read before v3 replaces it.)
    let v2 = model(2, 8);
    let v3 = model(3, 9);
    let (s3, _) = srv.stage(name, &v2);
    assert_eq!(v1.len(), v2.len());
    assert!(
        read_all(&s3, &remote).unwrap() == local_tensors(&v2),
        "S3: not v2"
    );
    let before = http_log(&srv, name, (0, 0));
    let (_, http) = srv.stage(name, &v3);
    assert!(
        read_all(&http, &remote).unwrap() == local_tensors(&v3),
        "HTTP: not v3"
    );
    assert!(http_log(&srv, name, before).1 >= v3.len() as u64 / 2);
    // Each URL keeps one version: the old entries are gone.
    let ranges = dir.path().join("ranges");
    let urls: Vec<_> = std::fs::read_dir(&ranges).unwrap().flatten().collect();
    assert_eq!(urls.len(), 2, "one folder per URL");
    for u in urls {
        assert_eq!(
            std::fs::read_dir(u.path()).unwrap().count(),
            1,
            "one version"
        );
    }
    // And a reopen reads the new version from the cache.
    let before = http_log(&srv, name, (0, 0));
    assert!(read_all(&http, &remote).unwrap() == local_tensors(&v3));
    assert_eq!(http_log(&srv, name, before).1, 0);
    entries(dir.path());
}

#[test]
fn a_damaged_cache_entry_is_fetched_again_and_never_handed_out() {
    let Some(srv) = servers("a_damaged_cache_entry_is_fetched_again_and_never_handed_out") else {
        return;
    };
    let bytes = written_with(Format::Aero, &aero_paged());
    let want = local_tensors(&bytes);
    let name = "cache/damaged.aero";
    let (_, http) = srv.stage(name, &bytes);
    let dir = tempfile::tempdir().unwrap();
    let remote = cached(&srv, dir.path());
    assert!(read_all(&http, &remote).unwrap() == want);

    // A flipped byte in every entry, one cut short: each is caught by the entry's own
    // digest or size, removed, and its range fetched again.
    let all = entries(dir.path());
    assert!(all.len() > 2, "{all:?}");
    for (i, p) in all.iter().enumerate() {
        let mut data = std::fs::read(p).unwrap();
        if i == 0 {
            data.truncate(data.len() - 1);
        } else {
            let at = HEADER + (data.len() - HEADER) / 2;
            data[at] ^= 0x40;
        }
        std::fs::write(p, &data).unwrap();
    }
    let before = http_log(&srv, name, (0, 0));
    assert!(
        read_all(&http, &remote).unwrap() == want,
        "read past damaged entries"
    );
    assert!(
        http_log(&srv, name, before).1 > 0,
        "nothing was fetched again"
    );
    let before = http_log(&srv, name, (0, 0));
    assert!(read_all(&http, &remote).unwrap() == want);
    assert_eq!(
        http_log(&srv, name, before).1,
        0,
        "the entries were not rewritten"
    );

    // An entry damaged with its digest made to match (what the cache cannot tell from
    // good bytes) is caught by the format's page hashes, as a fetched byte would be.
    let local = tessera::open(&bytes, &ReadOptions::default()).unwrap();
    let info = local
        .tensor_infos()
        .iter()
        .find(|i| i.name == "layer5.weight")
        .unwrap()
        .clone();
    let at = info.storage.offset.unwrap() + 1000;
    let mut forged = 0;
    for p in entries(dir.path()) {
        let (s, e) = span(&p);
        if !(s..e).contains(&at) {
            continue;
        }
        let mut data = std::fs::read(&p).unwrap();
        data[HEADER + (at - s) as usize] ^= 0x01;
        let digest = blake3::hash(&data[HEADER..]);
        data[24..HEADER].copy_from_slice(digest.as_bytes());
        std::fs::write(&p, &data).unwrap();
        forged += 1;
    }
    assert!(forged > 0);
    let opened = open_location(&http, &ReadOptions::default(), &remote).unwrap();
    let f = opened.container();
    assert!(f.tensor("layer4.weight").is_ok());
    let Err(e) = f.tensor("layer5.weight") else {
        panic!("a forged entry was handed out");
    };
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    entries(dir.path());
}

#[test]
fn the_bound_evicts_the_entries_used_least_recently() {
    let Some(srv) = servers("the_bound_evicts_the_entries_used_least_recently") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bound = 250 << 10;
    let remote = cached(&srv, dir.path()).cache_max_bytes(Some(bound));
    // Objects of 100 KiB: each fetched whole when opened, one entry.
    let urls: Vec<String> = (0..3u8)
        .map(|i| {
            let bytes: Vec<u8> = (0..100 << 10).map(|j: u32| (j % 251) as u8 ^ i).collect();
            srv.stage(&format!("cache/lru-{i}.bin"), &bytes).0
        })
        .collect();
    let open = |u: &str| RemoteSource::open(&Location::parse(u).unwrap(), &remote).unwrap();
    let pause = || std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(open(&urls[0]).bytes_fetched(), 100 << 10);
    pause();
    assert_eq!(open(&urls[1]).bytes_fetched(), 100 << 10);
    pause();
    // Used again: now the most recent.
    assert_eq!(open(&urls[0]).bytes_fetched(), 0);
    pause();
    // A third would pass the bound: the one used least recently (1) goes.
    assert_eq!(open(&urls[2]).bytes_fetched(), 100 << 10);
    let total: u64 = entries(dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(total <= bound, "{total} bytes in the cache, bound {bound}");
    assert_eq!(entries(dir.path()).len(), 2);
    assert_eq!(
        open(&urls[0]).bytes_fetched(),
        0,
        "the entry used last was evicted"
    );
    assert_eq!(open(&urls[2]).bytes_fetched(), 0);
    assert_eq!(
        open(&urls[1]).bytes_fetched(),
        100 << 10,
        "1 was not evicted"
    );
    // An object larger than the bound is read and not cached.
    let big: Vec<u8> = (0..300 << 10).map(|j: u32| (j % 253) as u8).collect();
    let (url, _) = srv.stage("cache/lru-big.bin", &big);
    let before = entries(dir.path()).len();
    let (src, got) = read_source(&url, &remote.clone().cache_max_bytes(Some(64 << 10)));
    assert!(got == big);
    assert!(src.bytes_fetched() >= big.len() as u64);
    assert!(entries(dir.path()).len() <= before);
}

#[test]
fn a_cache_turned_off_or_unwritable_writes_nothing_and_reads_go_on() {
    let Some(srv) = servers("a_cache_turned_off_or_unwritable_writes_nothing_and_reads_go_on")
    else {
        return;
    };
    let bytes = written(Format::Safetensors);
    let want = local_tensors(&bytes);
    let (s3, http) = srv.stage("cache/off.safetensors", &bytes);
    let dir = tempfile::tempdir().unwrap();
    let off = cached(&srv, dir.path()).cache(false);
    for url in [&s3, &http] {
        assert!(read_all(url, &off).unwrap() == want);
        assert!(read_all(url, &off).unwrap() == want);
    }
    assert_eq!(files(dir.path()), Vec::<PathBuf>::new());
    let (src, _) = read_source(&s3, &off);
    assert_eq!(src.bytes_from_cache(), 0);
    // A cache folder that cannot be made (below a file): the reads fetch, never fail.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let unwritable = cached(&srv, &file.join("cache"));
    for url in [&s3, &http] {
        assert!(read_all(url, &unwritable).unwrap() == want);
    }
    let (src, got) = read_source(&s3, &unwritable);
    assert!(got == bytes);
    assert!(src.bytes_fetched() >= bytes.len() as u64);
    assert_eq!(src.bytes_from_cache(), 0);
    assert_eq!(files(dir.path()), vec![file]);
}

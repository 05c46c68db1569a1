//! The snapshot pipeline (`tessera::snapshot`): generations written in every writable
//! format and restored, the WTXT chain, the ring's retention, the resend queue (a
//! directory target, a target that fails then recovers, one down until a flag file
//! appears), damaged generations skipped by restore, a full disk, SIGKILL at every stage
//! (a subprocess of this binary, stopped at a named stage by the `test-hooks` pause).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera::snapshot::{
    ring, wal, Backlog, Backoff, PinnedTensor, PushItem, PushTarget, RestoreOptions,
    SnapshotOptions, Snapshotter,
};
use tessera::{Format, Model, ReadOptions, Result, TensorView};

fn state(seed: f32) -> Model {
    let mut m = Model::new();
    let a: Vec<f32> = (0..64 * 32).map(|i| i as f32 * 0.5 + seed).collect();
    let b: Vec<f32> = (0..100).map(|i| -(i as f32) - seed).collect();
    m.push(TensorView::from_slice("layers.0.weight", vec![64, 32], &a).unwrap())
        .unwrap();
    m.push(TensorView::from_slice("layers.0.bias", vec![100], &b).unwrap())
        .unwrap();
    m
}

fn id_of(m: &dyn tessera::TensorSource) -> String {
    tessera::identity::model_id(m, false)
        .unwrap()
        .root
        .to_prefixed()
}

fn fast() -> Backoff {
    Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_millis(40),
    }
}

fn opts(format: Format) -> SnapshotOptions {
    let mut o = SnapshotOptions::new(format);
    o.on_backlog = Backlog::Block;
    o.backoff = fast();
    o
}

fn snap(s: &Snapshotter, m: &Model, step: u64) -> u64 {
    let g = s
        .request(
            m,
            Some(step),
            BTreeMap::from([("loss".into(), "0.5".into())]),
        )
        .unwrap()
        .expect("block policy never skips");
    s.wait(g, Some(Duration::from_secs(30))).unwrap();
    g
}

/// A target that records what it got (gen order), fails its first `fail` pushes, and is
/// down while `flag` (when set) does not exist.
struct TestTarget {
    url: String,
    fail: AtomicU32,
    flag: Option<PathBuf>,
    got: Arc<Mutex<Vec<u64>>>,
    dir: PathBuf,
}

impl TestTarget {
    fn new(url: &str, dir: &Path) -> TestTarget {
        TestTarget {
            url: url.into(),
            fail: AtomicU32::new(0),
            flag: None,
            got: Arc::new(Mutex::new(Vec::new())),
            dir: dir.to_path_buf(),
        }
    }
}

impl PushTarget for TestTarget {
    fn url(&self) -> String {
        self.url.clone()
    }
    fn push(&self, item: &PushItem) -> Result<()> {
        if let Some(f) = &self.flag {
            if !f.exists() {
                return Err(tessera::Error::invalid_input("connection refused (down)"));
            }
        }
        if self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(tessera::Error::invalid_input("HTTP 500"));
        }
        tessera::snapshot::DirTarget::new(&self.dir).push(item)?;
        self.got.lock().unwrap().push(item.generation);
        Ok(())
    }
}

#[test]
fn every_writable_format_snapshots_and_restores() {
    let mut tried = Vec::new();
    let mut failed = Vec::new();
    for f in Format::ALL {
        if !f.can_write() || tessera::convert::capabilities(f).is_none() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let s = Snapshotter::open(dir.path(), opts(f)).unwrap();
        let mut gens = Vec::new();
        for i in 0..2u64 {
            let g = s
                .request(
                    &state(i as f32),
                    Some(i * 100),
                    BTreeMap::from([("loss".into(), "0.5".into())]),
                )
                .unwrap()
                .unwrap();
            if let Err(e) = s.wait(g, Some(Duration::from_secs(30))) {
                failed.push(format!("{}: {e}", f.name()));
            }
            gens.push(g);
        }
        s.close(Duration::ZERO).unwrap();
        assert_eq!(gens, [0, 1]);
        if failed
            .iter()
            .any(|e| e.starts_with(&format!("{}:", f.name())))
        {
            continue;
        }
        let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.name()));
        assert_eq!(r.generation, 1, "{}", f.name());
        assert!(r.skipped.is_empty(), "{}: {:?}", f.name(), r.skipped);
        assert_eq!(r.sidecar.step, Some(100));
        assert_eq!(r.sidecar.format, f.name());
        assert_eq!(
            id_of(r.opened.container()),
            id_of(&state(1.0)),
            "{}",
            f.name()
        );
        assert_eq!(r.sidecar.metadata["loss"], "0.5");
        tried.push(f.name());
    }
    for want in ["wtxt", "safetensors", "ztensor", "fold"] {
        assert!(tried.contains(&want), "{tried:?} {failed:?}");
    }
    // Only a one-array format refuses a state of several tensors, saying so.
    assert!(
        failed
            .iter()
            .all(|e| e.starts_with("npy:") && e.contains("exactly one array")),
        "{failed:?}"
    );
}

#[test]
fn wtxt_generations_chain_and_metadata_formats_carry_the_generation() {
    let dir = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Wtxt)).unwrap();
    for i in 0..3 {
        snap(&s, &state(i as f32), i * 10);
    }
    s.close(Duration::ZERO).unwrap();
    let roots: Vec<_> = (0..3)
        .map(|g| {
            let p = dir.path().join(format!("gen-{g:09}.wtxt"));
            let data = std::fs::read(p).unwrap();
            let f = tessera::formats::wtxt::WtxtFile::parse(
                std::borrow::Cow::Owned(data),
                &ReadOptions::default(),
            )
            .unwrap();
            assert_eq!(f.meta.gen.parse::<u64>().unwrap(), g);
            f.final_root().unwrap()
        })
        .collect();
    assert_eq!(roots[0].merkle_prev, [0; 32]);
    assert_eq!(roots[1].merkle_prev, roots[0].merkle_this);
    assert_eq!(roots[2].merkle_prev, roots[1].merkle_this);

    let dir = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Safetensors)).unwrap();
    snap(&s, &state(0.0), 1);
    snap(&s, &state(1.0), 2);
    s.close(Duration::ZERO).unwrap();
    let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default()).unwrap();
    let md = r.opened.container().metadata();
    assert_eq!(md.get("tessera.snapshot.gen").unwrap().as_str(), Some("1"));
    assert_eq!(md.get("tessera.snapshot.step").unwrap().as_str(), Some("2"));
    assert_eq!(
        md.get("tessera.snapshot.prev").unwrap().as_str(),
        Some(id_of(&state(0.0)).as_str())
    );
    assert_eq!(r.sidecar.prev_root, Some(id_of(&state(0.0))));
}

#[test]
fn the_ring_keeps_keep_and_keep_every_and_never_an_unpushed_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(Format::Safetensors);
    o.keep = 2;
    o.keep_every = 3;
    let s = Snapshotter::open(dir.path(), o).unwrap();
    for i in 0..7 {
        snap(&s, &state(i as f32), i);
    }
    s.close(Duration::ZERO).unwrap();
    let st = ring::State::from_log(&wal::read(dir.path()).unwrap());
    let live: Vec<u64> = st.live().map(|g| g.gen).collect();
    assert_eq!(live, [0, 3, 5, 6]);
    for g in [1, 2, 4] {
        assert!(
            ring::files_of(dir.path(), g).is_empty(),
            "gen {g} left files"
        );
    }

    // A target that is down: nothing it lacks is dropped.
    let dir = tempfile::tempdir().unwrap();
    let far = tempfile::tempdir().unwrap();
    let mut t = TestTarget::new("test://down", far.path());
    t.flag = Some(dir.path().join("never"));
    let mut o = opts(Format::Safetensors);
    o.keep = 1;
    o.max_backlog = Some(100);
    o.targets.push(Box::new(t));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    for i in 0..4 {
        snap(&s, &state(i as f32), i);
    }
    s.close(Duration::ZERO).unwrap();
    let st = ring::State::from_log(&wal::read(dir.path()).unwrap());
    assert_eq!(st.live().count(), 4);
}

#[test]
fn a_directory_target_gets_each_generation_once_in_order_and_it_verifies_there() {
    let dir = tempfile::tempdir().unwrap();
    let far = tempfile::tempdir().unwrap();
    let mut o = opts(Format::Wtxt);
    o.push.push(format!("file://{}", far.path().display()));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    for i in 0..3 {
        snap(&s, &state(i as f32), i);
    }
    assert!(s.wait_pushed(Duration::from_secs(20)));
    s.close(Duration::from_secs(5)).unwrap();
    for g in 0..3u64 {
        let d = far.path().join(format!("gen-{g:09}"));
        let o = tessera::open_path(&d.join(format!("gen-{g:09}.wtxt")), &ReadOptions::default())
            .unwrap();
        assert!(o.container().verify(&Default::default()).is_ok());
        assert_eq!(id_of(o.container()), id_of(&state(g as f32)));
        assert!(d.join(format!("gen-{g:09}.json")).exists());
    }
    let log = std::fs::read_to_string(dir.path().join("snapshots.log")).unwrap();
    let pushed: Vec<&str> = log.lines().filter(|l| l.starts_with("pushed")).collect();
    assert_eq!(pushed.len(), 3, "{log}");
}

#[test]
fn a_failing_target_is_retried_and_a_down_one_gets_everything_once_in_order_when_back() {
    let dir = tempfile::tempdir().unwrap();
    let far = tempfile::tempdir().unwrap();
    let t = TestTarget::new("test://flaky", far.path());
    t.fail.store(3, Ordering::SeqCst);
    let got = t.got.clone();
    let mut o = opts(Format::Safetensors);
    o.targets.push(Box::new(t));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    snap(&s, &state(0.0), 0);
    snap(&s, &state(1.0), 1);
    assert!(s.wait_pushed(Duration::from_secs(20)));
    s.close(Duration::ZERO).unwrap();
    assert_eq!(*got.lock().unwrap(), [0, 1]);
    let log = std::fs::read_to_string(dir.path().join("snapshots.log")).unwrap();
    assert_eq!(
        log.lines()
            .filter(|l| l.starts_with("failed gen=0 target=test://flaky reason=\"HTTP 500"))
            .count(),
        3,
        "{log}"
    );

    // Down until a flag file appears; the hot path is not held (skip policy, a backlog
    // of up to 10).
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("up");
    let mut t = TestTarget::new("test://down", far.path());
    t.flag = Some(flag.clone());
    let got = t.got.clone();
    let mut o = opts(Format::Safetensors);
    o.on_backlog = Backlog::Skip;
    o.max_backlog = Some(10);
    o.targets.push(Box::new(t));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    let mut gens = Vec::new();
    for i in 0..4 {
        let start = Instant::now();
        let g = loop {
            // Skipped while the previous generation is still being written.
            if let Some(g) = s
                .request(&state(i as f32), Some(i), BTreeMap::new())
                .unwrap()
            {
                break g;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(start.elapsed() < Duration::from_secs(10));
        s.wait(g, Some(Duration::from_secs(20))).unwrap();
        gens.push(g);
    }
    assert!(got.lock().unwrap().is_empty());
    assert_eq!(s.pending()[0].1, gens);
    std::fs::write(&flag, b"").unwrap();
    assert!(s.wait_pushed(Duration::from_secs(20)));
    s.close(Duration::ZERO).unwrap();
    assert_eq!(*got.lock().unwrap(), gens, "once each, in order");
    for g in gens {
        let p = far
            .path()
            .join(format!("gen-{g:09}/gen-{g:09}.safetensors"));
        let o = tessera::open_path(&p, &ReadOptions::default()).unwrap();
        assert_eq!(id_of(o.container()), id_of(&state(g as f32)));
    }
}

#[test]
fn pending_pushes_resume_in_a_new_snapshotter_and_push_pending_drains() {
    let dir = tempfile::tempdir().unwrap();
    let far = tempfile::tempdir().unwrap();
    let mut t = TestTarget::new("test://later", far.path());
    t.flag = Some(dir.path().join("never"));
    let mut o = opts(Format::Fold);
    o.targets.push(Box::new(t));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    snap(&s, &state(0.0), 0);
    snap(&s, &state(1.0), 1);
    s.close(Duration::ZERO).unwrap();

    let t = TestTarget::new("test://later", far.path());
    let got = t.got.clone();
    let mut o = opts(Format::Fold);
    o.targets.push(Box::new(t));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    assert!(s.wait_pushed(Duration::from_secs(20)));
    s.close(Duration::ZERO).unwrap();
    assert_eq!(*got.lock().unwrap(), [0, 1]);

    // push_pending: a second target recorded, drained on this thread.
    let far2 = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Fold)).unwrap();
    let t2: Box<dyn PushTarget> = Box::new(TestTarget::new("test://second", far2.path()));
    let r = s.push_pending(&[t2], 2, fast()).unwrap();
    assert_eq!(r.pushed.len(), 2);
    assert!(r.left.is_empty());
    s.close(Duration::ZERO).unwrap();
}

#[test]
fn restore_skips_and_names_damaged_generations() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(Format::Safetensors);
    o.keep = 10;
    let s = Snapshotter::open(dir.path(), o).unwrap();
    for i in 0..5 {
        snap(&s, &state(i as f32), i);
    }
    s.close(Duration::ZERO).unwrap();
    let p = |g: u64| dir.path().join(format!("gen-{g:09}.safetensors"));
    // 4: a flipped byte in a tensor (same size).
    let mut b = std::fs::read(p(4)).unwrap();
    let n = b.len();
    b[n - 3] ^= 0x40;
    std::fs::write(p(4), b).unwrap();
    // 3: truncated.
    let b = std::fs::read(p(3)).unwrap();
    std::fs::write(p(3), &b[..b.len() - 10]).unwrap();
    // 2: a broken chain (its sidecar names another predecessor).
    let sc = dir.path().join("gen-000000002.json");
    let text = std::fs::read_to_string(&sc).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["prev_root"] = serde_json::json!(format!("blake3:{}", "0".repeat(64)));
    std::fs::write(&sc, serde_json::to_string(&j).unwrap()).unwrap();

    let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default()).unwrap();
    assert_eq!(r.generation, 1);
    assert_eq!(id_of(r.opened.container()), id_of(&state(1.0)));
    let skipped: Vec<u64> = r.skipped.iter().map(|(g, _)| *g).collect();
    assert_eq!(skipped, [4, 3, 2], "{:?}", r.skipped);
    assert!(r.skipped[0].1.contains("identity"), "{:?}", r.skipped[0]);
    assert!(r.skipped[1].1.contains("truncated"), "{:?}", r.skipped[1]);
    assert!(
        r.skipped[2].1.contains("broken chain"),
        "{:?}",
        r.skipped[2]
    );
}

#[test]
#[cfg(feature = "signing")]
fn signed_generations_restore_only_with_the_signers_key() {
    use tessera::signing::key::SecretKey;
    let key = SecretKey::generate("ed25519").unwrap();
    let other = SecretKey::generate("ed25519").unwrap();
    for f in [Format::Wtxt, Format::Ztensor] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(f);
        o.sign_key = Some(key.clone());
        let s = Snapshotter::open(dir.path(), o).unwrap();
        snap(&s, &state(0.0), 0);
        s.close(Duration::ZERO).unwrap();
        let mut ro = RestoreOptions::default();
        ro.public_key = Some(key.public());
        let r = tessera::snapshot::restore(dir.path(), &ro).unwrap();
        assert_eq!(r.generation, 0);
        ro.public_key = Some(other.public());
        let e = tessera::snapshot::restore(dir.path(), &ro).err().unwrap();
        assert!(e.to_string().contains("not by the trusted key"), "{e}");
    }
}

#[test]
fn copy_false_holds_the_callers_bytes_until_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Ztensor)).unwrap();
    let m = state(2.0);
    let tensors = m
        .tensor_infos()
        .iter()
        .map(|i| PinnedTensor {
            info: i.clone(),
            bytes: Arc::new(m.tensor(&i.name).unwrap().data().unwrap().to_vec()),
        })
        .collect();
    use tessera::TensorSource;
    let g = s
        .request_pinned(tensors, None, BTreeMap::new())
        .unwrap()
        .unwrap();
    s.wait(g, Some(Duration::from_secs(20))).unwrap();
    assert!(!s.pinned(g));
    assert_eq!(s.arena_bytes(), 0, "nothing copied into the arena");
    s.close(Duration::ZERO).unwrap();
    let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default()).unwrap();
    assert_eq!(id_of(r.opened.container()), id_of(&m));
}

#[test]
fn skip_never_waits_and_block_waits_for_a_slow_pipeline() {
    struct Slow(Arc<Mutex<()>>);
    impl PushTarget for Slow {
        fn url(&self) -> String {
            "test://slow".into()
        }
        fn push(&self, _: &PushItem) -> Result<()> {
            let _g = self.0.lock().unwrap();
            Ok(())
        }
    }
    let gate = Arc::new(Mutex::new(()));
    let held = gate.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(Format::Safetensors);
    o.on_backlog = Backlog::Skip;
    o.max_backlog = Some(1);
    o.targets.push(Box::new(Slow(gate.clone())));
    let s = Snapshotter::open(dir.path(), o).unwrap();
    let g = s
        .request(&state(0.0), None, BTreeMap::new())
        .unwrap()
        .unwrap();
    s.wait(g, Some(Duration::from_secs(20))).unwrap();
    let t = Instant::now();
    assert_eq!(s.request(&state(1.0), None, BTreeMap::new()).unwrap(), None);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(s.skipped(), 1);
    drop(held);
    assert!(s.wait_pushed(Duration::from_secs(20)));
    assert!(s
        .request(&state(1.0), None, BTreeMap::new())
        .unwrap()
        .is_some());
    s.close(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_torn_log_line_is_ignored_reported_and_cut() {
    let dir = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Safetensors)).unwrap();
    snap(&s, &state(0.0), 0);
    s.close(Duration::ZERO).unwrap();
    let log = dir.path().join("snapshots.log");
    let mut text = std::fs::read(&log).unwrap();
    text.extend_from_slice(b"written gen=1 file=gen-0000");
    std::fs::write(&log, &text).unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Safetensors)).unwrap();
    assert!(
        s.recovered.iter().any(|r| r.contains("torn")),
        "{:?}",
        s.recovered
    );
    assert_eq!(snap(&s, &state(1.0), 1), 1);
    s.close(Duration::ZERO).unwrap();
    let l = wal::read(dir.path()).unwrap();
    assert!(l.problems.is_empty(), "{:?}", l.problems);
    let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default()).unwrap();
    assert_eq!(r.generation, 1);
}

#[test]
fn one_snapshotter_per_ring_and_unknown_schemes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Snapshotter::open(dir.path(), opts(Format::Safetensors)).unwrap();
    let e = Snapshotter::open(dir.path(), opts(Format::Safetensors))
        .err()
        .unwrap();
    assert!(e.to_string().contains("in use"), "{e}");
    s.close(Duration::ZERO).unwrap();
    let mut o = opts(Format::Safetensors);
    o.push.push("gopher://x/y".into());
    let e = Snapshotter::open(dir.path(), o).err().unwrap();
    assert!(e.to_string().contains("unsupported target scheme"), "{e}");
    // The failed open released the lock.
    Snapshotter::open(dir.path(), opts(Format::Safetensors))
        .unwrap()
        .close(Duration::ZERO)
        .unwrap();
}

/// Disk full during a write, on a 1 MiB tmpfs (needs root to mount; skipped, saying so,
/// where the mount fails).
#[test]
fn a_full_disk_fails_the_snapshot_and_keeps_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIPPED a_full_disk_fails_the_snapshot_and_keeps_the_ring: cannot mount a tmpfs here"
        );
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(dir.path().to_path_buf());
    let s = Snapshotter::open(dir.path(), opts(Format::Safetensors)).unwrap();
    snap(&s, &state(0.0), 0);
    let mut big = Model::new();
    big.push(TensorView::from_slice("w", vec![400_000], &vec![1.0f32; 400_000]).unwrap())
        .unwrap();
    let g = s.request(&big, Some(1), BTreeMap::new()).unwrap().unwrap();
    let e = s.wait(g, Some(Duration::from_secs(20))).err().unwrap();
    assert!(e.to_string().contains("failed"), "{e}");
    s.close(Duration::ZERO).unwrap();
    let log = std::fs::read_to_string(dir.path().join("snapshots.log")).unwrap();
    assert!(log.contains("failed gen=1 reason="), "{log}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains("gen-000000001") || n.ends_with(".tmp")),
        "{names:?}"
    );
    let r = tessera::snapshot::restore(dir.path(), &RestoreOptions::default()).unwrap();
    assert_eq!(r.generation, 0);
}

/// The child of [`sigkill_at_every_stage_loses_nothing`]: snapshots in a loop into the
/// ring `TESSERA_TEST_SNAP_RING`, pushing to `TESSERA_TEST_SNAP_FAR`.
#[test]
fn sigkill_child() {
    let Some(ring) = std::env::var_os("TESSERA_TEST_SNAP_RING") else {
        return;
    };
    let far = std::env::var("TESSERA_TEST_SNAP_FAR").unwrap();
    let mut o = opts(Format::Wtxt);
    o.push.push(far);
    let s = Snapshotter::open(&ring, o).unwrap();
    for i in 0..1000 {
        snap(&s, &state(i as f32), i);
    }
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs the test-hooks feature (scripts/test.sh enables it)"
)]
fn sigkill_at_every_stage_loses_nothing() {
    for stage in ["pin", "write", "sidecar", "written", "push"] {
        let dir = tempfile::tempdir().unwrap();
        let far = tempfile::tempdir().unwrap();
        let at = dir.path().join("paused");
        let ring = dir.path().join("ring");
        let far_url = format!("file://{}", far.path().display());
        // One clean generation first, then the child that stops at `stage`.
        {
            let mut o = opts(Format::Wtxt);
            o.push.push(far_url.clone());
            let s = Snapshotter::open(&ring, o).unwrap();
            snap(&s, &state(100.0), 0);
            assert!(s.wait_pushed(Duration::from_secs(20)));
            s.close(Duration::ZERO).unwrap();
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["snapshot::sigkill_child", "--exact", "--test-threads=1"])
            .env("TESSERA_TEST_SNAP_RING", &ring)
            .env("TESSERA_TEST_SNAP_FAR", &far_url)
            .env("TESSERA_TEST_SNAPSHOT_PAUSE", stage)
            .env("TESSERA_TEST_SNAPSHOT_PAUSE_FILE", &at)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !at.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{stage}: never paused"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        // No partial snapshot visible, every `written` generation verifies.
        let log = wal::read(&ring).unwrap();
        let st = ring::State::from_log(&log);
        for g in st.live() {
            tessera::snapshot::check_generation(&ring, &st, g.gen, &RestoreOptions::default())
                .unwrap_or_else(|e| panic!("{stage}: generation {} fails: {e}", g.gen));
        }
        // A new Snapshotter cleans up and resumes the pushes.
        let mut o = opts(Format::Wtxt);
        o.push.push(far_url.clone());
        let s = Snapshotter::open(&ring, o).unwrap();
        let next = snap(&s, &state(7.0), 7);
        assert!(s.wait_pushed(Duration::from_secs(20)), "{stage}");
        let st = s.state();
        s.close(Duration::ZERO).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&ring)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "snapshots.log")
            .collect();
        names.sort();
        let mut want = Vec::new();
        for g in st.live() {
            want.push(format!("gen-{:09}.json", g.gen));
            want.push(format!("gen-{:09}.wtxt", g.gen));
        }
        want.sort();
        assert_eq!(names, want, "{stage}: leftovers in the ring");
        let live: Vec<u64> = st.live().map(|g| g.gen).collect();
        match stage {
            // Killed before `written`: that generation is gone, the next one is 2.
            "pin" | "write" | "sidecar" => assert_eq!(live, [0, next], "{stage}"),
            // The emitter stopped after logging 1.
            "written" => assert_eq!(live, [0, 1, next], "{stage}"),
            // The training loop went on while the push of 1 was stuck: 1, never pushed,
            // is kept whatever the ring's size (0, pushed, may have aged out of it when
            // the loop got far before the kill).
            _ => assert!(live.contains(&1) && live.ends_with(&[next]), "{live:?}"),
        }
        for g in live {
            let p = far.path().join(format!("gen-{g:09}/gen-{g:09}.wtxt"));
            let o = tessera::open_path(&p, &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{stage}: gen {g} not pushed: {e}"));
            assert!(o.container().verify(&Default::default()).is_ok(), "{stage}");
        }
        let r = tessera::snapshot::restore(&ring, &RestoreOptions::default()).unwrap();
        assert_eq!(r.generation, next);
    }
}

/// The resend queue over the real transports: a bare Git repository (the `git`
/// program) always, and the OCI registry `scripts/remote-servers.sh` starts when it
/// runs. Each generation arrives once, in order, and reads back byte for byte.
#[test]
fn generations_are_pushed_to_git_and_oci_targets_and_read_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let bare = tempfile::tempdir().unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(bare.path())
        .status();
    if !git.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no git program");
        return;
    }
    let mut urls = vec![format!("git+file://{}", bare.path().display())];
    if let Ok(oci) = std::env::var("TESSERA_TEST_OCI_URL") {
        urls.push(format!(
            "{oci}/tessera/snapshot-test-{}",
            std::process::id()
        ));
    } else if std::env::var_os("TESSERA_REQUIRE_REMOTE").is_some() {
        panic!("TESSERA_REQUIRE_REMOTE is set but TESSERA_TEST_OCI_URL is not");
    }
    let work = tempfile::tempdir().unwrap();
    let mut o = opts(Format::Safetensors);
    for u in &urls {
        o.push.push(u.clone());
    }
    let mut push = tessera::push::PushOptions::default();
    push.work_dir = Some(work.path().to_path_buf());
    o.target_options = o.target_options.push(push.clone());
    let s = Snapshotter::open(dir.path(), o).unwrap();
    for i in 0..2 {
        snap(&s, &state(i as f32), i);
    }
    assert!(
        s.wait_pushed(Duration::from_secs(60)),
        "pushes did not complete"
    );
    s.close(Duration::from_secs(5)).unwrap();
    for u in &urls {
        let t = tessera::push::Target::parse(u).unwrap();
        assert_eq!(t.list(&push).unwrap(), [0, 1], "{u}");
        for g in 0..2u64 {
            let back = tempfile::tempdir().unwrap();
            let files = t.fetch(g, back.path(), &push).unwrap();
            let snapshot = files
                .iter()
                .find(|f| f.extension().is_some_and(|e| e == "safetensors"))
                .unwrap_or_else(|| panic!("{u}: no snapshot file in {files:?}"));
            let ring = dir.path().join(snapshot.file_name().unwrap());
            assert_eq!(
                std::fs::read(snapshot).unwrap(),
                std::fs::read(&ring).unwrap(),
                "{u}"
            );
        }
    }
}

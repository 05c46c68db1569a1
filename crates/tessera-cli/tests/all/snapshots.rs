//! `tessera snapshots RING`, `snapshots push`, `snapshots restore` on a ring written by
//! the library's Snapshotter.

use std::collections::BTreeMap;
use std::time::Duration;

use tessera::snapshot::{Backlog, Backoff, SnapshotOptions, Snapshotter};
use tessera::{Format, Model, ReadOptions, TensorView};

use crate::common::{run, text};

fn state(seed: f32) -> Model {
    let mut m = Model::new();
    let a: Vec<f32> = (0..256).map(|i| i as f32 + seed).collect();
    m.push(TensorView::from_slice("w", vec![16, 16], &a).unwrap())
        .unwrap();
    m
}

fn id(src: &dyn tessera::TensorSource) -> String {
    tessera::identity::model_id(src, false)
        .unwrap()
        .root
        .to_prefixed()
}

#[test]
fn list_push_and_restore_a_ring() {
    let tmp = tempfile::tempdir().unwrap();
    let ring = tmp.path().join("ckpt");
    // The target is down: its directory's parent is a file.
    let blocker = tmp.path().join("far");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let far = blocker.join("weights");
    let url = format!("file://{}", far.display());
    let mut o = SnapshotOptions::new(Format::Wtxt);
    o.on_backlog = Backlog::Block;
    o.backoff = Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_millis(20),
    };
    o.push.push(url.clone());
    let s = Snapshotter::open(&ring, o).unwrap();
    for i in 0..3u64 {
        let g = s
            .request(&state(i as f32), Some(i * 10), BTreeMap::new())
            .unwrap()
            .unwrap();
        s.wait(g, Some(Duration::from_secs(30))).unwrap();
    }
    s.close(Duration::ZERO).unwrap();

    let o = run(&[&"snapshots", &ring]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("3 generations in the ring, 1 target"), "{t}");
    assert_eq!(t.lines().filter(|l| l.contains(" ok ")).count(), 3, "{t}");
    assert!(t.contains("target 1 ("), "the push failure is shown: {t}");

    let o = run(&[&"snapshots", &ring, &"--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let gens = j["generations"].as_array().unwrap();
    assert_eq!(gens.len(), 3);
    assert_eq!(gens[2]["step"], 20);
    assert_eq!(gens[2]["format"], "wtxt");
    assert_eq!(gens[0]["verified"], true);
    assert_eq!(gens[0]["pending"][0].as_str().unwrap(), url);

    // Still down: everything stays queued, exit 5.
    let o = run(&[&"snapshots", &"push", &ring, &"--attempts", &"1"]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(text(&o).contains("pending: generation 0"), "{}", text(&o));
    // Back: all three arrive, in order, and verify there.
    std::fs::remove_file(&blocker).unwrap();
    let o = run(&[&"snapshots", &"push", &ring, &"--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pushed: Vec<u64> = j["pushed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(pushed, [0, 1, 2]);
    for g in 0..3u64 {
        let p = far.join(format!("gen-{g:09}/gen-{g:09}.wtxt"));
        let f = tessera::open_path(&p, &ReadOptions::default()).unwrap();
        assert_eq!(id(f.container()), id(&state(g as f32)));
    }
    let o = run(&[&"snapshots", &"push", &ring]);
    assert!(text(&o).contains("nothing to push"), "{}", text(&o));

    // The newest damaged: listed as failing (exit 1), skipped by restore, named.
    let newest = ring.join("gen-000000002.wtxt");
    let mut b = std::fs::read(&newest).unwrap();
    let at = b.len() / 2;
    b[at] = if b[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&newest, b).unwrap();
    let o = run(&[&"snapshots", &ring]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAILED"), "{}", text(&o));

    let out = tmp.path().join("model.safetensors");
    let o = run(&[&"snapshots", &"restore", &ring, &"-o", &out]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("skipped generation 2"), "{t}");
    assert!(t.contains("restored generation 1 (step 10"), "{t}");
    let f = tessera::open_path(&out, &ReadOptions::default()).unwrap();
    assert_eq!(f.container().format(), Format::Safetensors);
    assert_eq!(id(f.container()), id(&state(1.0)));

    let out2 = tmp.path().join("g0.zt");
    let o = run(&[
        &"snapshots",
        &"restore",
        &ring,
        &"-o",
        &out2,
        &"--generation",
        &"0",
        &"--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["generation"], 0);
    assert_eq!(j["format"], "ztensor");

    // No ring: a clear error, exit 2.
    let o = run(&[&"snapshots", &tmp.path().join("nothing")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no snapshot ring here"), "{}", text(&o));
}

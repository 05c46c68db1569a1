//! `tessera convert --ecc`, `verify`, `repair` and `extract` on FOLD, in-process.

use clap::Parser;
use tessera_cli::{exit_code_for, run, Cli};

const NEURON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/interop-samples/fold/pyfolds102_save_fold_or_mind_MPJRDNeuron.fold"
);

fn tessera(args: &[&str]) -> (u8, String) {
    let cli = Cli::parse_from(std::iter::once("tessera").chain(args.iter().copied()));
    let mut out = Vec::new();
    let code = match run(cli, &mut out) {
        Ok(c) => c,
        Err(e) => {
            out.extend_from_slice(format!("error: {e:#}").as_bytes());
            exit_code_for(&e)
        }
    };
    (code, String::from_utf8(out).unwrap())
}

#[test]
fn convert_with_ecc_then_damage_verify_and_repair() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (code, out) = tessera(&[
        "convert",
        NEURON,
        &p("n.mind"),
        "--ecc",
        "16",
        "--compress",
        "zstd",
    ]);
    assert_eq!(code, 0, "{out}");
    let good = std::fs::read(p("n.mind")).unwrap();
    // Damage 6 bytes of the first chunk (torch_state) inside its first RS block.
    let mut bad = good.clone();
    for i in 0..6 {
        bad[28 + 32 + 10 + i * 20] ^= 0xC3;
    }
    std::fs::write(p("bad.mind"), &bad).unwrap();
    // Repaired damage is damage: exit 1, naming what was repaired and what to do.
    let (code, out) = tessera(&["verify", &p("bad.mind")]);
    assert_eq!(code, 1, "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.contains("DAMAGED")
            && last.contains("chunk \"torch_state\"")
            && last.contains("6 bytes fixed")
            && last.contains("tessera repair"),
        "{out}"
    );
    let (code, out) = tessera(&["verify", &p("bad.mind"), "--json"]);
    assert_eq!(code, 1, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["result"], "repaired");
    assert_eq!(doc["ok"], false);
    let repaired: Vec<_> = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "repaired")
        .collect();
    assert!(!repaired.is_empty());
    assert!(repaired
        .iter()
        .all(|c| c["subject"] == "chunk \"torch_state\""));
    assert!(
        repaired[0]["detail"]
            .as_str()
            .unwrap()
            .contains("6 bytes fixed"),
        "{out}"
    );
    let (code, out) = tessera(&["repair", &p("bad.mind"), "-o", &p("fixed.mind"), "--json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::read(p("fixed.mind")).unwrap(), good);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["chunks"][0]["status"], "repaired");
    assert_eq!(doc["chunks"][0]["bytes_fixed"], 6);
    // Too much damage: exit 1, nothing written.
    for i in 0..10 {
        bad[28 + 32 + 100 + i] ^= 0x11;
    }
    std::fs::write(p("worse.mind"), &bad).unwrap();
    let (code, out) = tessera(&["repair", &p("worse.mind"), "-o", &p("no.mind")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("UNRECOVERABLE") && out.contains("torch_state"),
        "{out}"
    );
    assert!(!dir.path().join("no.mind").exists());
    let (code, _) = tessera(&["verify", &p("worse.mind")]);
    assert_eq!(code, 1);
    let (code, out) = tessera(&[
        "extract",
        &p("worse.mind"),
        "torch_state",
        "-o",
        &p("ts.bin"),
    ]);
    assert_eq!(code, 1, "{out}");
    // Other chunks still extract, byte for byte as in the pyfolds original.
    let (code, out) = tessera(&[
        "extract",
        &p("worse.mind"),
        "llm_manifest",
        "-o",
        &p("m.json"),
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, _) = tessera(&["extract", NEURON, "llm_manifest", "-o", &p("m0.json")]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read(p("m.json")).unwrap(),
        std::fs::read(p("m0.json")).unwrap()
    );
}

#[test]
fn inspect_lists_a_fold_tensor_chunk_once() {
    // pyfolds' MPJRDNeuron: six tensors in one npz chunk "nuclear_arrays".
    let (code, out) = tessera(&["inspect", NEURON]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("nuclear_arrays/").count(), 6, "{out}");
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("nuclear_arrays ")),
        "the chunk is listed again:\n{out}"
    );
    assert!(
        out.contains("(1 chunk holds the tensors above: NPZ0)"),
        "{out}"
    );
    // Each shared chunk's bytes are counted once in the totals: the npz chunk and the
    // torch_state TSAV chunk (whose pickle lists the other tensors).
    let (_, out) = tessera(&["inspect", NEURON, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let stored = |name: &str| {
        doc["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["stored_bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        doc["totals"]["stored_bytes"].as_u64().unwrap(),
        stored("nuclear_arrays") + stored("torch_state")
    );
    // One STEN chunk per tensor (Tessera's own FOLD): none listed again.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.fold");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tessera/tests/data/sets/gguf"
    );
    let (code, out) = tessera(&["convert", src, f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (_, out) = tessera(&["inspect", f.to_str().unwrap()]);
    assert!(
        out.contains("(5 chunks hold the tensors above: STEN)"),
        "{out}"
    );
    assert!(!out.contains("STEN "), "{out}");
}

#[test]
fn repair_refuses_other_formats_and_bad_ecc_values() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("x.bin");
    std::fs::write(&other, b"GGUF\x03\0\0\0 not really").unwrap();
    let out = dir.path().join("y.bin");
    let (code, msg) = tessera(&[
        "repair",
        other.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "{msg}");
    assert!(msg.contains("only FOLD"), "{msg}");
    let target = dir.path().join("z.fold");
    let (code, msg) = tessera(&["convert", NEURON, target.to_str().unwrap(), "--ecc", "255"]);
    assert_eq!(code, 2, "{msg}");
    assert!(msg.contains("1..=254"), "{msg}");
    assert!(!target.exists());
}

/// `--checkpoint --chunk NAME=FILE`: the chunk is written as given; unknown, repeated
/// and non-JSON chunks are refused before anything is written, naming them.
#[test]
fn checkpoint_chunks_are_written_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(p("m.json"), br#"{"loss": 0.125}"#).unwrap();
    std::fs::write(p("bad.json"), b"{loss").unwrap();
    // A source with tensors (and no torch_state of its own): our own FOLD of the neuron's
    // nuclear arrays, as safetensors.
    let (code, out) = tessera(&["convert", NEURON, &p("src.safetensors"), "--drop-metadata"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = tessera(&[
        "convert",
        &p("src.safetensors"),
        &p("ck.fold"),
        "--checkpoint",
        "--chunk",
        &format!("metrics={}", p("m.json")),
    ]);
    assert_eq!(code, 0, "{out}");
    let f = std::fs::read(p("ck.fold")).unwrap();
    let f = tessera::open(&f[..], &tessera::ReadOptions::default()).unwrap();
    let names: Vec<&str> = f.chunks().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names[..3],
        ["torch_state", "llm_manifest", "metrics"],
        "{names:?}"
    );
    assert_eq!(f.chunk("metrics").unwrap().as_ref(), br#"{"loss": 0.125}"#);
    for (args, says) in [
        (
            vec!["--chunk", "weights=x.json"],
            "unknown chunk \"weights\"",
        ),
        (
            vec!["--chunk", "metrics=a.json", "--chunk", "metrics=b.json"],
            "\"metrics\" given twice",
        ),
        (vec!["--chunk", "history=BAD"], "chunk \"history\" (file"),
    ] {
        let bad = p("bad.json");
        let args: Vec<String> = args.iter().map(|a| a.replace("BAD", &bad)).collect();
        let mut all = vec![
            "convert".to_string(),
            p("src.safetensors"),
            p("no.fold"),
            "--checkpoint".into(),
        ];
        all.extend(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let (code, out) = tessera(&all);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(says), "{says}: {out}");
        assert!(!std::path::Path::new(&p("no.fold")).exists());
    }
}

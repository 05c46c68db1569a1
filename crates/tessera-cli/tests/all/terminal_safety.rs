//! Text from a file never reaches the terminal raw: tensor names, metadata keys and
//! values holding ESC sequences (screen clear, OSC 52 clipboard write, window title),
//! BEL, a C1 CSI (U+009B), DEL and a bidi override (U+202E) are printed escaped by
//! `inspect`, `diff`, `verify` and `convert`, in text and in `--json`, on stdout and on
//! stderr, for every format that can hold such names.

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;

use tessera::{DType, Format, Model, TensorInfo, TensorView};

const HOSTILE_NAME: &str = "w\x1b]52;c;cHduZWQ=\x07\x1b[2J\u{9b}31m\u{202e}gnp.exe\x7f\n";
const HOSTILE_KEY: &str = "k\x1b]0;owned\x07";
const HOSTILE_VALUE: &str = "v\x1b[2J\u{9b}1;1H\u{2066}x";

fn tessera(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    for a in args {
        c.arg(a);
    }
    let out = c.output().unwrap();
    let mut text = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    text.push_str(&String::from_utf8(out.stderr).expect("stderr is UTF-8"));
    (out.status.code(), text)
}

fn is_unsafe(c: char) -> bool {
    c != '\n'
        && c != '\t'
        && matches!(c,
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

fn model(name: &str, value: f32) -> Model {
    let mut m = Model::new();
    m.metadata.insert(HOSTILE_KEY, HOSTILE_VALUE);
    let data: Vec<u8> = (0..6)
        .flat_map(|i| (i as f32 + value).to_le_bytes())
        .collect();
    m.push(
        TensorView::dense(
            TensorInfo::dense(name, DType::F32, vec![2, 3]),
            Cow::Owned(data),
        )
        .unwrap(),
    )
    .unwrap();
    m
}

fn write(format: Format, m: &Model, path: &Path) -> bool {
    let prepared = match tessera::convert::prepare(
        m,
        format,
        tessera::ConvertOptions::default().drop_metadata(true),
    ) {
        Ok(p) => p,
        Err(_) => return false,
    };
    tessera::convert::write_file(format, &prepared, path, &Default::default()).is_ok()
}

#[test]
fn hostile_text_is_escaped_in_every_verb_and_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for (format, ext) in [
        (Format::Safetensors, "safetensors"),
        (Format::Ztensor, "zt"),
        (Format::Fold, "fold"),
        (Format::Aero, "aero"),
        (Format::Gguf, "gguf"),
        (Format::GptrsCheckpoint, "gptrs"),
        (Format::Npz, "npz"),
        (Format::Wtxt, "wtxt"),
    ] {
        let a = dir.path().join(format!("a.{ext}"));
        let b = dir.path().join(format!("b.{ext}"));
        if !write(format, &model(HOSTILE_NAME, 0.0), &a) {
            eprintln!("{ext}: the writer refuses such a name (covered by the others)");
            continue;
        }
        assert!(write(format, &model("other\x1b[5m", 1.0), &b));
        written.push(ext);
        let out = dir.path().join(format!("c-{ext}.safetensors"));
        let npy = dir.path().join("x.npy");
        let runs: Vec<Vec<&dyn AsRef<std::ffi::OsStr>>> = vec![
            vec![&"inspect", &a],
            vec![&"inspect", &"--json", &a],
            vec![&"verify", &a],
            vec![&"verify", &"--json", &a],
            vec![&"diff", &a, &b],
            vec![&"diff", &"--json", &a, &b],
            vec![&"extract", &a, &"nope\x1b[2J", &"-o", &npy],
            vec![&"convert", &"--cast", &"--drop-metadata", &a, &out],
        ];
        for args in runs {
            let (code, text) = tessera(&args);
            let bad: Vec<char> = text.chars().filter(|&c| is_unsafe(c)).collect();
            assert!(
                bad.is_empty(),
                "{ext} {:?} (exit {code:?}) printed raw controls {bad:?}:\n{text}",
                args[0].as_ref()
            );
        }
        // The escaped forms are there: the user sees that the name is hostile.
        let (_, text) = tessera(&[&"inspect", &a]);
        assert!(text.contains("\\u001b]52;"), "{ext}: {text}");
        assert!(
            text.contains("\\u202e") && text.contains("\\u009b"),
            "{ext}: {text}"
        );
        // JSON output stays valid JSON and round-trips the real name.
        let (_, text) = tessera(&[&"inspect", &"--json", &a]);
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["tensors"][0]["name"], HOSTILE_NAME, "{ext}");
    }
    for must in ["safetensors", "zt", "fold", "aero", "gguf"] {
        assert!(
            written.contains(&must),
            "{must} did not take the hostile name: {written:?}"
        );
    }
}

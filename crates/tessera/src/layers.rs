//! The floor plan, checked: the library's top-level modules import each other without a
//! cycle, [`crate::format`] — every format's identity — imports nothing of the
//! library, and no module but `formats` names a format (`Format::Gguf`,
//! `formats::gguf::…`) outside its tests. Read from the source text (`crate::<module>`
//! paths, and calls of the methods the codec table adds to `Format`), so it fails the
//! moment a change draws a cycle or a format branch, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the `.rs` files that make it up.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut mods: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            walk(&p, mods.entry(stem).or_default());
        } else if p.extension().is_some_and(|x| x == "rs") && stem != "lib" {
            mods.entry(stem).or_default().push(p);
        }
    }
    mods
}

/// The code of a file without its comments and its `#[cfg(test)] mod tests` block.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module → the modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let mut edges = BTreeMap::new();
    for (m, files) in &mods {
        let mut to = BTreeSet::new();
        for f in files {
            let c = code(f);
            // `crate::x`, and `crate::{x, y::z}`.
            let mut names: Vec<&str> = Vec::new();
            for (i, _) in c.match_indices("crate::") {
                let rest = &c[i + 7..];
                if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    names.extend(
                        group
                            .split(',')
                            .map(|p| p.trim().split("::").next().unwrap()),
                    );
                } else {
                    names.push(
                        rest.split(|ch: char| !ch.is_alphanumeric() && ch != '_')
                            .next()
                            .unwrap(),
                    );
                }
            }
            // The methods `formats` adds to `Format` (the codec table).
            let codec = [
                ".codec()",
                ".can_read()",
                ".can_write()",
                "not_supported_yet",
                "detect_or_err",
            ];
            if m != "formats" && codec.iter().any(|k| c.contains(k)) {
                to.insert("formats".to_string());
            }
            to.extend(
                names
                    .into_iter()
                    .filter(|n| mods.contains_key(*n) && *n != m)
                    .map(String::from),
            );
        }
        edges.insert(m.clone(), to);
    }
    edges
}

/// A cycle through `start`, if any (depth-first).
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut c = path[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_top_level_modules_import_without_a_cycle() {
    let edges = graph();
    assert!(edges.len() > 20, "{} modules found", edges.len());
    if let Some(c) = cycle(&edges) {
        panic!("import cycle among top-level modules: {}", c.join(" -> "));
    }
}

#[test]
fn format_is_a_leaf() {
    let edges = graph();
    assert_eq!(
        edges["format"],
        BTreeSet::new(),
        "crate::format imports {:?}",
        edges["format"]
    );
    // The codec table and the readers sit above what they implement.
    for low in [
        "error", "tensor", "model", "any", "options", "write", "metadata", "source",
    ] {
        assert!(!edges[low].contains("formats"), "{low} names the formats");
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut edges = graph();
    edges.get_mut("format").unwrap().insert("formats".into());
    let c = cycle(&edges).expect("format -> formats -> format is a cycle");
    assert!(c.contains(&"format".to_string()), "{c:?}");
}

/// `text` without comments, string and char literals (emptied) and the items under
/// `#[cfg(test)]` (a `mod`, a `fn`, a `use`): the code a build compiles.
fn non_test_code(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = rest
            .strip_prefix('r')
            .map(|r| r.len() - r.trim_start_matches('#').len())
            .filter(|&h| rest[1 + h..].starts_with('"'))
        {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len(), |e| e + close.len());
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            i += j + 1;
            out.push_str("\"\"");
        } else if let Some(esc) = rest.strip_prefix("'\\") {
            // `'\n'`, `'\''`, `'\u{..}'`: the escaped char, then up to the quote.
            let after = esc.chars().next().map_or(0, char::len_utf8);
            i += 2 + after + esc[after..].find('\'').map_or(esc.len(), |e| e + 1);
            out.push_str("' '");
        } else if rest.len() >= 3
            && rest.starts_with('\'')
            && rest[1..].chars().nth(1) == Some('\'')
        {
            i += 1 + rest[1..].chars().next().map_or(1, char::len_utf8) + 1;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Drop each `#[cfg(test)]` item: up to its `;`, or its balanced braces.
    while let Some(at) = out.find("#[cfg(test)]") {
        let item = &out[at..];
        let end = match (item.find('{'), item.find(';')) {
            (Some(open), semi) if semi.is_none_or(|s| open < s) => {
                let mut depth = 0usize;
                let mut end = item.len();
                for (k, ch) in item[open..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => semi + 1,
            _ => item.len(),
        };
        out.replace_range(at..at + end, "");
    }
    out
}

/// Where `code` names a format: a `Format::<Variant>` (not `Format::ALL`) or a path
/// into a format's folder (`formats::gguf`).
fn format_names(code: &str, folders: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in code.match_indices("Format::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = code[i + 8..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut cs = name.chars();
        if cs.next().is_some_and(|c| c.is_ascii_uppercase())
            && cs.next().is_some_and(|c| c.is_ascii_lowercase())
        {
            found.push(format!("Format::{name}"));
        }
    }
    for (i, _) in code.match_indices("formats::") {
        let rest = &code[i + 9..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(g) => g[..g.find('}').unwrap_or(g.len())]
                .split(',')
                .map(|p| p.trim().split("::").next().unwrap_or(""))
                .collect(),
            None => vec![rest
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap_or("")],
        };
        for n in names {
            if folders.iter().any(|f| f == n) {
                found.push(format!("formats::{n}"));
            }
        }
    }
    found
}

/// No module but `formats` (and `format`, the identity table) names a format outside
/// its tests: what generic code needs of one is a `Codec`/`Capabilities`/`SetStyle`
/// field, or a hook whose code is in the format's folder.
#[test]
fn generic_modules_name_no_format() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folders: Vec<String> = std::fs::read_dir(src.join("formats"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert!(folders.iter().any(|f| f == "gguf"), "{folders:?}");
    let mut named = Vec::new();
    for (m, files) in modules(&src) {
        if m == "formats" || m == "format" || m == "layers" {
            continue;
        }
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let rel = f.strip_prefix(&src).unwrap().display().to_string();
            for n in format_names(&non_test_code(&text), &folders) {
                named.push(format!("{rel}: {n}"));
            }
        }
    }
    assert!(
        named.is_empty(),
        "generic code names a format (declare it in the format's codec instead):\n{}",
        named.join("\n")
    );
}

#[test]
fn the_format_scan_sees_what_it_must() {
    let folders = vec!["gguf".to_string(), "aero".to_string()];
    let code = non_test_code(
        "fn a(f: Format) -> bool { f == Format::Gguf } // Format::Wtxt\n\
         const S: &str = \"Format::Npy formats::gguf::x\";\n\
         fn all() { let _ = Format::ALL; let c = '{'; let q = '\\''; }\n\
         use crate::formats::{aero::write, Codec};\n\
         #[cfg(test)]\nmod tests { fn t() { let _ = Format::Fold; } }\n\
         #[cfg(test)]\nuse crate::formats::gguf;\n\
         fn b() { crate::formats::gguf::quants::x() }\n",
    );
    assert_eq!(
        format_names(&code, &folders),
        ["Format::Gguf", "formats::aero", "formats::gguf"]
    );
}

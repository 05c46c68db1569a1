//! The floor plan, checked: the library's top-level modules import each other without a
//! cycle, and [`crate::format`] — every format's identity — imports nothing of the
//! library. Read from the source text (`crate::<module>` paths, and calls of the methods
//! the codec table adds to `Format`), so it fails the moment a change draws a cycle,
//! naming it.

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

//! The modules of raidlab-raid form a one-way chain: no module imports (by
//! `crate::` path) one that imports it back, directly or through others. A
//! circle is how one object ends up deciding everything; this test names it.
//!
//! Two views: top-level modules (a folder's files counted as its module), and
//! every file as its own node (`assemble::create`, `assemble::create_zoned`),
//! so that two files of one folder cannot lean on each other unseen. In the
//! file view `super::` and `self::` paths count too, and a `use` group
//! (`super::{a, b::c}`) counts each of its paths; a folder's `mod.rs` naming
//! its own files is structure, not an import, so it is not counted.

#[path = "support/import_graph.rs"]
mod import_graph;

use import_graph::{inline_mods, tree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // (module, file): a top-level file is its module; every file of a
    // directory module (array/mod.rs, array/rebuild.rs) counts as that module.
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            // Every file below it, at any depth (grow/backup_file/*.rs).
            let mut dirs = vec![path.clone()];
            while let Some(d) = dirs.pop() {
                for sub in std::fs::read_dir(&d).unwrap() {
                    let sub = sub.unwrap().path();
                    if sub.is_dir() {
                        dirs.push(sub);
                    } else if sub.extension() == Some(std::ffi::OsStr::new("rs")) {
                        files.push((name.clone(), sub));
                    }
                }
            }
        } else if path.extension() == Some(std::ffi::OsStr::new("rs")) {
            files.push((name, path));
        }
    }
    for (name, path) in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let deps = out.entry(name.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let module: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !module.is_empty() && module != name {
                deps.insert(module);
            }
        }
    }
    out
}

/// A circle through `at`, if there is one: the modules on it, in order.
fn circle(
    g: &BTreeMap<String, BTreeSet<String>>,
    at: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|m| m == at) {
        let mut c = path[i..].to_vec();
        c.push(at.to_string());
        return Some(c);
    }
    if done.contains(at) {
        return None;
    }
    path.push(at.to_string());
    for d in g.get(at).into_iter().flatten() {
        if let Some(c) = circle(g, d, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(at.to_string());
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = imports();
    assert!(g.len() > 10, "read the modules: {g:?}");
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = circle(&g, m, &mut Vec::new(), &mut done) {
            panic!("an import circle in raidlab-raid: {}", c.join(" -> "));
        }
    }
}

#[test]
fn use_trees_are_read_whole() {
    assert_eq!(tree("a::b;"), vec![vec!["a", "b"]]);
    assert_eq!(
        tree("{a, b::{c, d}}, x"),
        vec![vec!["a"], vec!["b", "c"], vec!["b", "d"]]
    );
    assert_eq!(tree("*;"), vec![Vec::<String>::new()]);
}

#[test]
fn inline_modules_are_found() {
    let text = "mod a { mod b { {} } } mod c; fn d() {}";
    let names: Vec<(String, &str)> = inline_mods(text)
        .into_iter()
        .map(|(x, y, n)| (n, &text[x..y]))
        .collect();
    assert_eq!(
        names,
        vec![
            ("a".to_string(), " mod b { {} } "),
            ("b".to_string(), " {} ")
        ]
    );
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = import_graph::file_imports(&src);
    assert!(
        g.keys().any(|m| m.contains("::")),
        "read the files inside module folders: {g:?}"
    );
    let found = import_graph::circles(&src);
    assert!(
        found.is_empty(),
        "import circles between files of raidlab-raid:\n{}",
        found.join("\n")
    );
}

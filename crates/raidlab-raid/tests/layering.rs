//! The modules of raidlab-raid form a one-way chain: no module imports (by
//! `crate::` path) one that imports it back, directly or through others. A
//! circle is how one object ends up deciding everything; this test names it.

use std::collections::{BTreeMap, BTreeSet};

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
            for sub in std::fs::read_dir(&path).unwrap() {
                files.push((name.clone(), sub.unwrap().path()));
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

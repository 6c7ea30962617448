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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// Every `.rs` file under `dir`, with its module path (`array` for
/// `array/mod.rs`, `array::rebuild` for `array/rebuild.rs`); the crate root
/// (`lib.rs`) is left out: a path that ends there names the crate's
/// re-exported vocabulary, not a module.
fn files(dir: &Path, prefix: &[String], out: &mut Vec<(Vec<String>, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            let mut p = prefix.to_vec();
            p.push(stem);
            files(&path, &p, out);
        } else if path.extension() == Some(std::ffi::OsStr::new("rs")) {
            let module = match stem.as_str() {
                "lib" if prefix.is_empty() => continue,
                "mod" => prefix.to_vec(),
                _ => prefix.iter().cloned().chain([stem]).collect(),
            };
            out.push((module, path));
        }
    }
}

fn ident(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths a use tree (or an expression path) starting at `s` names, each
/// as its segments: `a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`.
fn tree(s: &str) -> Vec<Vec<String>> {
    let mut segs = Vec::new();
    let mut rest = s.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut out = Vec::new();
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.extend(tree(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(tree(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return out
                .into_iter()
                .map(|t| segs.iter().cloned().chain(t).collect())
                .collect();
        }
        let n = ident(rest);
        if n == 0 {
            break;
        }
        segs.push(rest[..n].to_string());
        match rest[n..].strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    vec![segs]
}

/// The inline modules of a file (`mod tests { .. }`): the byte range of each
/// body and its name, so that a `super::` inside one counts from it. Braces
/// are counted, not parsed; a lone brace in a string would mislead it.
fn inline_mods(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("mod ") {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[i + 4..];
        let n = ident(rest);
        let Some(body) = rest[n..].trim_start().strip_prefix('{') else {
            continue;
        };
        if n == 0 {
            continue;
        }
        let start = text.len() - body.len();
        let mut depth = 0usize;
        let end = body
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => return true,
                    '}' => depth -= 1,
                    _ => {}
                }
                false
            })
            .map_or(text.len(), |(j, _)| start + j);
        out.push((start, end, rest[..n].to_string()));
    }
    out
}

/// File-level imports: for each file's module, the modules (files) it names.
/// A path resolves to the longest module it starts with.
fn file_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &[], &mut all);
    let nodes: BTreeSet<Vec<String>> = all.iter().map(|(m, _)| m.clone()).collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &all {
        let text = std::fs::read_to_string(path).unwrap();
        let deps = out.entry(module.join("::")).or_default();
        let inline = inline_mods(&text);
        for start in ["crate::", "super::", "self::"] {
            for (i, _) in text.match_indices(start) {
                // `super::super::x` is read once, from its first `super`.
                let before = text[..i].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut rest = &text[i + start.len()..];
                // The module the path is written in: the file's, or an
                // inline module inside it.
                let here: Vec<String> = module
                    .iter()
                    .cloned()
                    .chain(
                        inline
                            .iter()
                            .filter(|(a, b, _)| *a <= i && i < *b)
                            .map(|(_, _, name)| name.clone()),
                    )
                    .collect();
                let mut base: Vec<String> = match start {
                    "crate::" => Vec::new(),
                    "self::" => here,
                    _ => here[..here.len().saturating_sub(1)].to_vec(),
                };
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                for p in tree(rest) {
                    let full: Vec<String> = base.iter().cloned().chain(p).collect();
                    let target = (1..=full.len())
                        .rev()
                        .map(|n| &full[..n])
                        .find(|m| nodes.contains(*m));
                    // A folder's `mod.rs` naming its own files is how a folder
                    // module is built (it declares them and hands work to
                    // them), not an import; that the files lean back on their
                    // `mod.rs` with `super::` is counted.
                    let own = |t: &&[String]| t.starts_with(module);
                    if let Some(t) = target.filter(|t| !own(t)) {
                        deps.insert(t.join("::"));
                    }
                }
            }
        }
    }
    out
}

/// The shortest way from `at` back to itself, if any: every circle shows up
/// once per member, so none hides behind another.
fn shortest_circle(g: &BTreeMap<String, BTreeSet<String>>, at: &str) -> Option<Vec<String>> {
    let mut from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([at]);
    while let Some(m) = queue.pop_front() {
        for d in g.get(m).into_iter().flatten() {
            if d == at {
                // Walk back from `m` to `at`, then read it forwards.
                let mut back = Vec::new();
                let mut x = m;
                while x != at {
                    back.push(x.to_string());
                    x = from[x];
                }
                back.reverse();
                let mut c = vec![at.to_string()];
                c.extend(back);
                c.push(at.to_string());
                return Some(c);
            }
            if !from.contains_key(d.as_str()) {
                from.insert(d, m);
                queue.push_back(d);
            }
        }
    }
    None
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
    let g = file_imports();
    assert!(
        g.keys().any(|m| m.contains("::")),
        "read the files inside module folders: {g:?}"
    );
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = shortest_circle(&g, m) {
            let key: BTreeSet<&String> = c.iter().collect();
            if seen.insert(key.into_iter().cloned().collect::<Vec<_>>()) {
                found.push(c.join(" -> "));
            }
        }
    }
    assert!(
        found.is_empty(),
        "import circles between files of raidlab-raid:\n{}",
        found.join("\n")
    );
}

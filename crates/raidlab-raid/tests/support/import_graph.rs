//! The import graph of one crate's sources, one node per file, for the
//! layering tests (raidlab-raid's, and raidlab-cache's through `#[path]`).
//!
//! Decides what counts as one file importing another: `crate::`, `super::`
//! and `self::` paths (counted from an inline `mod tests { .. }` when written
//! inside one) and each path of a `use` group, resolved to the longest module
//! they start with; a folder's `mod.rs` naming its own files is structure,
//! not an import, and neither is a path in a `//` comment (a doc link). It
//! reads text and never parses Rust: a path in a string counts too, which
//! errs towards reporting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
pub fn tree(s: &str) -> Vec<Vec<String>> {
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
pub fn inline_mods(text: &str) -> Vec<(usize, usize, String)> {
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

/// `text` without its `//` comments: a doc link to the module that decides
/// something else ("that is [`crate::clean`]'s decision") points the reader
/// on; it is not an import. A `//` after an odd number of quotes on its line
/// is taken to be inside a string and kept.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let cut = line
            .match_indices("//")
            .map(|(i, _)| i)
            .find(|&i| line[..i].matches('"').count() % 2 == 0);
        out.push_str(&line[..cut.unwrap_or(line.len())]);
        out.push('\n');
    }
    out
}

/// File-level imports: for each file's module, the modules (files) it names.
/// A path resolves to the longest module it starts with.
pub fn file_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(src, &[], &mut all);
    let nodes: BTreeSet<Vec<String>> = all.iter().map(|(m, _)| m.clone()).collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &all {
        let text = code(&std::fs::read_to_string(path).unwrap());
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

/// Every import circle between the files under `src`, each once, as
/// `a -> b -> a`.
pub fn circles(src: &Path) -> Vec<String> {
    let g = file_imports(src);
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
    found
}

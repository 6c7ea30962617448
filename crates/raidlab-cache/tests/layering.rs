//! The files of raidlab-cache form a one-way chain: no file imports one that
//! imports it back, directly or through others. A circle is how one object
//! ends up deciding everything; this test names it. The graph is read as for
//! raidlab-raid (see its `tests/support/import_graph.rs`).

#[path = "../../raidlab-raid/tests/support/import_graph.rs"]
mod import_graph;

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert!(
        import_graph::file_imports(&src).len() > 5,
        "read the files of raidlab-cache"
    );
    let found = import_graph::circles(&src);
    assert!(
        found.is_empty(),
        "import circles between files of raidlab-cache:\n{}",
        found.join("\n")
    );
}

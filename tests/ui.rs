//! Compile-time behaviour of `#[tool]` and `#[derive(ToolSchema)]`, pinned with trybuild.
//!
//! `fail/` holds one mistake per file, named after it, with the expected compiler output
//! beside it (`.stderr`); `pass/` holds programs that must compile and run. Regenerate
//! the `.stderr` files with `TRYBUILD=overwrite cargo test -p klaw --test ui`, then read
//! every one of them.

/// A pass test's tool named like a built-in one would fail at start-up (names are unique
/// in the registry, and the facade links every built-in group): pass tests name theirs
/// otherwise.
#[cfg(feature = "builtins")]
#[test]
fn pass_tools_are_not_named_like_built_in_ones() {
    let registry = klaw::ToolRegistry::collect().expect("the built-in tools are valid");
    let built_in: Vec<&str> = registry.names().collect();
    assert!(built_in.contains(&"file_read") && built_in.contains(&"memory_search"));
    for entry in std::fs::read_dir("tests/ui/pass").expect("tests/ui/pass is readable") {
        let path = entry.expect("a directory entry").path();
        let text = std::fs::read_to_string(&path).expect("a pass test is readable");
        for attr in text.split("#[tool(").skip(1) {
            let Some(name) = attr
                .split("name = \"")
                .nth(1)
                .and_then(|n| n.split('"').next())
            else {
                continue;
            };
            assert!(
                !built_in.contains(&name),
                "{}: the tool `{name}` is named like a built-in one; rename it",
                path.display()
            );
        }
    }
}

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

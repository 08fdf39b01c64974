//! Compile-time behaviour of `#[tool]` and `#[derive(ToolSchema)]`, pinned with trybuild.
//!
//! `fail/` holds one mistake per file, named after it, with the expected compiler output
//! beside it (`.stderr`); `pass/` holds programs that must compile and run. Regenerate
//! the `.stderr` files with `TRYBUILD=overwrite cargo test -p klaw --test ui`, then read
//! every one of them.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

//! Links the engine's binaries and benches with packed relative relocations
//! (`-z pack-relative-relocs`, ELF `DT_RELR`) where the linker and the C library can
//! (GNU ld 2.38+, lld 15+, mold; glibc 2.36+), found by linking and running a probe.
//!
//! The engine is a position-independent executable of some 40 MB whose pointers in
//! read-only data (every vtable, every string slice in a static) are fixed up when it
//! starts: in a release build 68,000 `R_X86_64_RELATIVE` entries of 24 bytes, 1.6 MB the
//! loader reads (and keeps resident) before `main` runs. Packed they take 21 KB (issue 48:
//! the served engine's RSS 21.9 → 19.6 MB, cold start −3%). Nothing else changes: the
//! binary is still PIE, still `BIND_NOW` and RELRO.
//!
//! Where the probe fails (an older linker, another C library, a cross build) the binaries
//! are linked as before. `KLAW_PACK_RELOCS=0` turns it off (a binary to copy to a machine
//! with a glibc older than 2.36, which cannot load `DT_RELR`).
//!
//! A release build also places the functions an engine runs to start and answer MCP
//! requests side by side, before the rest of `.text` (`hot-text.ld`, a linker script
//! `scripts/hot-text.py` writes from a profile of the start, `tools/list` and 200
//! `tools/call`s). Spread over 22 MB of code, the 1.3 MB of them sat on 196 of its 64 KB
//! windows, and the kernel maps a window around every page fault: 12.6 MB of code
//! resident before the first call (issue 48). A function the script names but the build
//! does not have (renamed, another dependency version) is simply not moved; where the
//! linker rejects the script, or `KLAW_HOT_TEXT=0`, the binaries are linked as before.

use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KLAW_PACK_RELOCS");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-changed=hot-text.ld");
    println!("cargo:rerun-if-env-changed=KLAW_HOT_TEXT");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("PROFILE") == "release"
        && var("KLAW_HOT_TEXT") != "0"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("HOST") == var("TARGET")
    {
        let script = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("hot-text.ld");
        let flag = format!("-Wl,-T,{}", script.display());
        if probe(&var("RUSTC_LINKER"), &flag, "hot_text_probe") {
            println!("cargo:rustc-link-arg-bins={flag}");
            println!("cargo:rustc-link-arg-benches={flag}");
        }
    }
    if var("KLAW_PACK_RELOCS") == "0"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("HOST") != var("TARGET")
    {
        return;
    }
    if probe(&var("RUSTC_LINKER"), FLAG, "relr_probe") {
        println!("cargo:rustc-link-arg-bins={FLAG}");
        println!("cargo:rustc-link-arg-benches={FLAG}");
    }
}

/// Whether `linker` (the C compiler driver rustc links with; `cc` when unset) links a
/// PIE with `flag`, and the result runs here (`name`: the probe's files).
fn probe(linker: &str, flag: &str, name: &str) -> bool {
    let linker = if linker.is_empty() { "cc" } else { linker };
    let Some(dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = dir.join(format!("{name}.c"));
    let binary = dir.join(name);
    // A pointer in initialised data: a relative relocation to pack.
    let code = "static const char *p = \"x\";\nint main(void) { return p[0] == 'x' ? 0 : 1; }\n";
    if std::fs::write(&source, code).is_err() {
        return false;
    }
    let linked = Command::new(linker)
        .args(["-pie", "-fPIE", flag, "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&binary).status().is_ok_and(|s| s.success())
}

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
//! `scripts/hot-text.py` writes from a profile of the start, `tools/list`, 200
//! `tools/call`s and the idle seconds after). Spread over 22 MB of code, the 1.3 MB of
//! them sat on 196 of its 64 KB windows, and the kernel maps a window around every page
//! fault: 12.6 MB of code resident before the first call (issue 48). A function the script names but the build
//! does not have (renamed, another dependency version) is simply not moved; where the
//! linker rejects the script, or `KLAW_HOT_TEXT=0`, the binaries are linked as before.
//! Many of its names carry the build hash Cargo derives from the dependencies, so the
//! list keeps a fingerprint of `Cargo.lock`, the workspace's manifests and `rustc -V`,
//! and a release build whose own differs warns that it is stale (`make hot-text`).

use std::path::{Path, PathBuf};
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
            warn_if_stale(&script, &var("RUSTC"));
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

/// Warns (a `cargo:warning`) when `hot-text.ld` was made for other dependencies or
/// another compiler than this build's: most of its names would then match nothing.
fn warn_if_stale(script: &Path, rustc: &str) {
    let Some(root) = script.parent().and_then(Path::parent) else {
        return;
    };
    let Some((files, now)) = fingerprint(root, rustc) else {
        return;
    };
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let made = std::fs::read_to_string(script).unwrap_or_default();
    let made = made
        .split("fingerprint: ")
        .nth(1)
        .and_then(|rest| rest.get(..16))
        .unwrap_or("none");
    if made != now {
        println!(
            "cargo:warning=klaw-engine/hot-text.ld is stale (made for fingerprint {made}, this build's is {now}: Cargo.lock, a manifest or the compiler changed); regenerate it with `make hot-text` before measuring"
        );
    }
}

/// The fingerprint `scripts/hot-text.py` writes into `hot-text.ld` (FNV-1a, 64 bits, over
/// each file's path and bytes, then `rustc -V`), with the files it covers.
fn fingerprint(root: &Path, rustc: &str) -> Option<(Vec<String>, String)> {
    let mut members: Vec<String> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|d| root.join(d).join("Cargo.toml").is_file())
        .map(|d| format!("{d}/Cargo.toml"))
        .collect();
    members.sort();
    let mut files = vec!["Cargo.lock".to_owned(), "Cargo.toml".to_owned()];
    files.append(&mut members);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in &files {
        eat(file.as_bytes());
        eat(b"\0");
        eat(&std::fs::read(root.join(file)).ok()?);
        eat(b"\0");
    }
    let rustc = if rustc.is_empty() { "rustc" } else { rustc };
    let version = Command::new(rustc).arg("-V").output().ok()?.stdout;
    eat(version.trim_ascii());
    Some((files, format!("{hash:016x}")))
}

//! The example engine serves its own tools beside the built-in ones.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    let home = std::env::temp_dir().join("my-engine-test-home");
    Command::new(env!("CARGO_BIN_EXE_my-engine"))
        .args(args)
        .env_remove("KLAW_CONFIG")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("KLAW_DATA", home.join("data"))
        .output()
        .expect("run my-engine")
}

#[test]
fn linked_tools_are_listed_with_the_built_in_ones() {
    let o = run(&["tools"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for name in ["convert_temperature", "wind_chill", "current_time"] {
        assert!(out.contains(name), "{name} missing from:\n{out}");
    }
}

#[test]
fn linked_tools_can_be_called() {
    let o = run(&[
        "call",
        "convert_temperature",
        r#"{"value": 212, "from": "F"}"#,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "100.00 C");
    let o = run(&["call", "wind_chill", r#"{"temp_c": -10, "windKmh": 30}"#]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "-19.5 °C");
    let o = run(&[
        "call",
        "convert_temperature",
        r#"{"value": 1, "from": "X"}"#,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scale `X`: use C, F or K"));
}

//! `close_inherited_fds_on_exec` changes the whole process's descriptors, so it is tested
//! in a process of its own (this test binary has one test).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed test

use std::os::fd::AsRawFd;
use std::process::Command;

#[test]
fn no_inherited_descriptor_reaches_a_later_child() {
    let file = tempfile::tempfile().unwrap();
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
    let probe = format!(
        "test -e /proc/self/fd/{} && echo open || echo closed",
        file.as_raw_fd()
    );
    let run = || {
        let out = Command::new("sh").args(["-c", &probe]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(), "open\n", "the test itself must leak the fd");
    klaw_sandbox::close_inherited_fds_on_exec();
    assert_eq!(run(), "closed\n");
    // The descriptor itself still works in this process.
    assert!(rustix::io::fcntl_getfd(&file).is_ok());
}

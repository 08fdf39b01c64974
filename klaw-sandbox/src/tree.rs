//! Ending a whole process tree, including descendants that left the process group
//! with `setsid`.
//!
//! Every command runs under a root that keeps its orphans: the command itself as PID 1
//! of a private PID namespace, or the sandbox helper marked as child subreaper. While
//! that root lives, every descendant is found by following parent links in `/proc`,
//! whatever its session or group; they are killed first, then the root.

use std::collections::HashMap;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// Parent pid and state of every live process (zombies left out).
fn parents() -> HashMap<i32, i32> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid
            && state != "Z"
            && state != "X"
        {
            out.insert(pid, ppid);
        }
    }
    out
}

/// The live children of `parent`.
pub(crate) fn children(parent: i32) -> Vec<i32> {
    parents()
        .into_iter()
        .filter_map(|(pid, ppid)| (ppid == parent).then_some(pid))
        .collect()
}

/// Every live descendant of `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<i32> {
    let map = parents();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &ppid) in &map {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                if k != root && !out.contains(&k) {
                    out.push(k);
                    stack.push(k);
                }
            }
        }
    }
    out
}

/// Kills every descendant of `root`, repeating until none is left (a fork bomb cannot
/// outrun it: a killed process forks no more), then `root`'s process group and `root`.
pub fn kill_tree(root: i32) {
    let _ = kill_descendants(root);
    if let Some(pid) = Pid::from_raw(root) {
        let _ = kill_process_group(pid, Signal::KILL);
        let _ = kill_process(pid, Signal::KILL);
    }
}

/// Kills every descendant of `root` but not `root`. True when a last look found none
/// left; false when processes kept appearing (one that keeps moving to a new PID can
/// stay ahead of the walk), so the tree could not be proven dead.
pub fn kill_descendants(root: i32) -> bool {
    for _ in 0..1000 {
        let found = descendants(root);
        if found.is_empty() {
            return true;
        }
        for p in found {
            if let Some(pid) = Pid::from_raw(p) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
    descendants(root).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_a_grandchild_that_left_the_session() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & wait"])
            .spawn()
            .unwrap();
        let root = i32::try_from(child.id()).unwrap();
        let grandchild = loop {
            if let Some(g) = descendants(root).into_iter().next() {
                break g;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        kill_tree(root);
        let _ = child.wait();
        // The grandchild is re-parented and reaped by someone else; it must not live on.
        for _ in 0..200 {
            if !parents().contains_key(&grandchild) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("grandchild {grandchild} survived");
    }
}

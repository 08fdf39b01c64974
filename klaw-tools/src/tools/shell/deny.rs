//! A deny-list of obviously destructive commands, checked before anything runs.
//!
//! It is a courtesy, not the boundary: it answers quickly and clearly when a model asks
//! for something no agent should do (`rm -rf /`, `sudo`, `mkfs`, a fork bomb). The OS
//! sandbox is what actually stops a command that slips past it.

/// Why `command` is refused, or `None` when the deny-list has nothing against it.
/// `command` is the shell line, or the argument vector joined with spaces.
pub(crate) fn refuse(command: &str) -> Option<&'static str> {
    let lower = command.to_lowercase();
    if is_fork_bomb(&lower) {
        return Some("a fork bomb");
    }
    for words in segments(&lower) {
        let Some(first) = words.first() else { continue };
        let prog = first.rsplit('/').next().unwrap_or(first);
        let reason = match prog {
            "sudo" | "su" | "doas" | "pkexec" => Some("privilege escalation (sudo/su)"),
            "shutdown" | "reboot" | "poweroff" | "halt" => Some("shutting down the machine"),
            "init" | "telinit" if words.get(1).is_some_and(|a| a == "0" || a == "6") => {
                Some("shutting down the machine")
            }
            p if p == "mkfs" || p.starts_with("mkfs.") || p == "mke2fs" || p == "mkswap" => {
                Some("formatting a file system (mkfs)")
            }
            "dd" if words.iter().any(|w| w.starts_with("if=")) => Some("raw disk copies (dd if=)"),
            "rm" if removes_root(&words[1..]) => Some("removing the root directory (rm -rf /)"),
            _ => None,
        };
        if reason.is_some() {
            return reason;
        }
    }
    None
}

/// Splits a shell line into simple commands (at `;`, `&`, `|`, newlines, parentheses,
/// backquotes and `$(`), each as words with quotes removed.
fn segments(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut words = Vec::new();
    let mut word = String::new();
    let flush_word = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    for c in line.chars() {
        match c {
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' | '{' | '}' => {
                flush_word(&mut word, &mut words);
                // `$(` starts a command: drop the `$` word it leaves behind.
                if words.last().is_some_and(|w| w == "$") {
                    words.pop();
                }
                if !words.is_empty() {
                    out.push(std::mem::take(&mut words));
                }
            }
            '\'' | '"' | '\\' => {}
            c if c.is_whitespace() => flush_word(&mut word, &mut words),
            c => word.push(c),
        }
    }
    flush_word(&mut word, &mut words);
    if !words.is_empty() {
        out.push(words);
    }
    // `env X=1 sudo ...`, `nohup sudo ...`, `exec sudo ...`: look at the real program.
    for words in &mut out {
        while let Some(first) = words.first() {
            let wrapper = matches!(
                first.as_str(),
                "env" | "nohup" | "exec" | "command" | "time" | "nice" | "builtin" | "xargs"
            ) || (first.contains('=') && !first.starts_with('='));
            if wrapper && words.len() > 1 {
                words.remove(0);
            } else {
                break;
            }
        }
    }
    out
}

/// `rm` with a recursive flag aimed at `/` (or `/*`, or told not to preserve root).
fn removes_root(args: &[String]) -> bool {
    let recursive = args.iter().any(|a| {
        a == "--recursive" || (a.starts_with('-') && !a.starts_with("--") && a.contains('r'))
    });
    let at_root = args.iter().any(|a| {
        matches!(
            a.as_str(),
            "/" | "/*" | "/." | "/.." | "//" | "--no-preserve-root"
        )
    });
    recursive && at_root
}

/// `:(){ :|:& };:` and its renamed variants: a function that pipes itself into itself in
/// the background.
fn is_fork_bomb(line: &str) -> bool {
    let squeezed: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    let mut rest = squeezed.as_str();
    while let Some(at) = rest.find("(){") {
        let name: String = rest[..at]
            .chars()
            .rev()
            .take_while(|c| !matches!(c, ';' | '&' | '|' | '(' | ')' | '{' | '}'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let body = &rest[at + 3..];
        let body = body.split('}').next().unwrap_or(body);
        if !name.is_empty() && body.contains(&format!("{name}|{name}")) && body.contains('&') {
            return true;
        }
        rest = &rest[at + 3..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_the_classics() {
        for bad in [
            "rm -rf /",
            "rm -rf /*",
            "rm -fr / ",
            "RM -Rf /",
            "cd /tmp && rm -rf --no-preserve-root /",
            "sudo apt-get install x",
            "echo hi; sudo -s",
            "/usr/bin/sudo ls",
            "env FOO=1 sudo ls",
            "mkfs.ext4 /dev/sda1",
            "mkfs -t ext4 /dev/sda",
            "dd if=/dev/zero of=/dev/sda",
            ":(){ :|:& };:",
            "bomb(){ bomb|bomb& }; bomb",
            "shutdown -h now",
            "reboot",
            "poweroff",
            "echo $(sudo id)",
        ] {
            assert!(refuse(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn lets_ordinary_commands_through() {
        for ok in [
            "rm -rf /tmp/build",
            "rm -rf ./target",
            "rm -r build/",
            "echo 'pseudo code'",
            "ls /",
            "grep -r sudo docs/",
            "cargo test",
            "dd of=out.bin bs=1",
            "echo reboot-notes.md",
            "f(){ echo hi; }; f",
        ] {
            assert_eq!(refuse(ok), None, "{ok}");
        }
    }
}

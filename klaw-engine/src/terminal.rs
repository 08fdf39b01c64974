//! Text the model or a tool wrote, on its way to a terminal. A terminal obeys control
//! characters instead of showing them: OSC 52 writes the clipboard, OSC 0 the title,
//! `ESC [2J` clears the screen, a carriage return overwrites a line. Whatever the model
//! or a tool result puts on stdout or stderr goes through [`terminal_safe`]; what a
//! person must read exactly (an approval question) goes through [`escape_invisible`].

use std::borrow::Cow;
use std::fmt::Write;

/// `text` without the characters a terminal would obey: the C0 controls but newline and
/// tab (ESC, BEL, carriage return among them: CRLF becomes LF), DEL, and the C1 controls
/// U+0080–U+009F (U+009B is a CSI to some terminals). What an escape sequence leaves
/// behind is plain text. Characters are dropped one at a time, so a stream cut anywhere
/// (the model's answer, piece by piece) is made safe piece by piece.
pub(crate) fn terminal_safe(text: &str) -> Cow<'_, str> {
    if text.chars().any(is_obeyed) {
        Cow::Owned(text.chars().filter(|&c| !is_obeyed(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// A control character a terminal acts on (all of Unicode's `Cc` but `\n` and `\t`).
fn is_obeyed(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `text` with every character that could hide or disguise what it says written out as
/// `\u{…}`: control characters but newline (C0, DEL, C1), the Unicode bidi controls
/// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what is shown,
/// and the invisible ones (zero-width spaces and joiners, U+2060, U+FEFF, the line and
/// paragraph separators).
pub(crate) fn escape_invisible(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| (c.is_control() && c != '\n') || is_bidi_or_invisible(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn is_bidi_or_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// `text` cut into lines of at most `width` characters: each line that is longer breaks
/// after its last space within the width (or, without one, at the width). Joined again
/// without the added line breaks, the lines are `text` exactly.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut out = String::with_capacity(text.len() + text.len() / width + 1);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut rest = line;
        while rest.chars().count() > width {
            let cut = rest
                .char_indices()
                .nth(width)
                .map_or(rest.len(), |(at, _)| at);
            let head = &rest[..cut];
            // After the last space, unless that leaves little on the line.
            let at = match head.rfind(' ') {
                Some(space) if head[..space].chars().count() >= width / 2 => space + 1,
                _ => cut,
            };
            out.push_str(&rest[..at]);
            out.push('\n');
            rest = &rest[at..];
        }
        out.push_str(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_lose_their_controls() {
        let hostile =
            "a\x1b]52;c;cm0gLXJmIH4=\x07b\x1b]0;pwned\x07c\x1b[2Jd\u{9b}31me\r\nf\tg\x7fh\0";
        let safe = terminal_safe(hostile);
        assert_eq!(safe, "a]52;c;cm0gLXJmIH4=b]0;pwnedc[2Jd31me\nf\tgh");
        assert!(
            !safe
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert!(matches!(terminal_safe("plain\ttext\n"), Cow::Borrowed(_)));
        // Bidi controls are no terminal commands: an answer in Arabic keeps them.
        assert_eq!(terminal_safe("\u{202e}abc"), "\u{202e}abc");
    }

    #[test]
    fn invisible_characters_are_written_out() {
        assert_eq!(
            escape_invisible("ls \u{202e}fdp.exe\u{202c} x\u{200b}y\r\x1b[2J\u{9b}\t\n"),
            "ls \\u{202e}fdp.exe\\u{202c} x\\u{200b}y\\u{d}\\u{1b}[2J\\u{9b}\\u{9}\n"
        );
        for c in [
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{2066}', '\u{2069}', '\u{feff}',
        ] {
            assert!(
                escape_invisible(&c.to_string()).starts_with("\\u{"),
                "{c:?}"
            );
        }
        assert!(matches!(escape_invisible("héllo\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let line = format!("{}; touch PAYLOAD", "a".repeat(290));
        let wrapped = wrap(&line, 100);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 100),
            "{wrapped}"
        );
        assert_eq!(wrapped.replace('\n', ""), line);
        let words = "one two three four five six seven";
        assert_eq!(wrap(words, 10), "one two \nthree \nfour five \nsix seven");
        assert_eq!(wrap("жжжжж\nx", 2), "жж\nжж\nж\nx");
    }
}

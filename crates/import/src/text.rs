//! Text conversions between Serial Studio's conventions and Sextant's.
//!
//! Serial Studio resolves a small set of C escapes (`\a \b \f \n \r \t \v \\`, anything
//! else is kept as written) and reads hex delimiters by dropping spaces. Sextant stores
//! delimiters either as escaped text (`\n`, `\r`, `\t`, `\\`, `\xHH`) or as hex bytes
//! (`AA 55`). Converting through the exact bytes keeps both meanings identical.

/// Qt's `QString::simplified`: trimmed, inner whitespace runs collapsed to one space.
pub(crate) fn simplified(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Serial Studio's `resolveEscapeSequences`, returning the UTF-8 bytes of the result.
pub(crate) fn resolve_escapes(text: &str) -> Vec<u8> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => out.push('\\'),
            Some('a') => out.push('\u{7}'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('v') => out.push('\u{b}'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out.into_bytes()
}

/// Bytes as a Sextant text delimiter: printable ASCII as is, the rest escaped.
pub(crate) fn escape_delimiter(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02X}")),
        }
    }
    out
}

/// Bytes as Sextant hex text, e.g. `AA 55`.
pub(crate) fn hex_text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a lenient hex read found.
pub(crate) struct HexRead {
    pub bytes: Vec<u8>,
    /// Characters that are neither hex digits nor separators were present and skipped.
    pub skipped_junk: bool,
    /// An odd number of digits; the last nibble was dropped.
    pub odd: bool,
}

/// Hex digits in `text`, two per byte, ignoring spaces, commas, colons and `0x` prefixes.
///
/// Serial Studio drops spaces and hands the rest to `QByteArray::fromHex`, which skips
/// anything that is not a hex digit; this does the same but says when it happened.
pub(crate) fn read_hex(text: &str) -> HexRead {
    let mut digits = Vec::with_capacity(text.len());
    let mut skipped_junk = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '0' && matches!(chars.peek(), Some('x') | Some('X')) {
            chars.next();
            continue;
        }
        if let Some(d) = c.to_digit(16) {
            digits.push(d as u8);
        } else if !(c.is_whitespace() || c == ',' || c == ':' || c == ';' || c == '-') {
            skipped_junk = true;
        }
    }
    let odd = digits.len() % 2 == 1;
    let bytes = digits
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => (hi << 4) | lo,
            _ => 0,
        })
        .collect();
    HexRead {
        bytes,
        skipped_junk,
        odd,
    }
}

/// A Rust/JSON string literal that JavaScript and Lua both read back as `text`.
pub(crate) fn script_string_literal(text: &str) -> String {
    // JSON escapes are a subset of both languages' string escapes, except `\/` and
    // `\uXXXX`; serde_json never emits `\/` and only uses `\u` for control characters,
    // which Lua 5.4 reads as `\u{XXXX}`, so control characters are spelled as `\xHH`.
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Splits a command line into arguments: whitespace separates, quotes group, a backslash
/// escapes the next character outside single quotes.
pub(crate) fn split_args(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => current.push(c),
            (_, '\\') => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => current.push(c),
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    args.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        args.push(current);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_resolve_like_serial_studio() {
        assert_eq!(resolve_escapes("\\n"), b"\n");
        assert_eq!(resolve_escapes("\r\n"), b"\r\n");
        assert_eq!(resolve_escapes("a\\qb"), b"a\\qb");
        assert_eq!(resolve_escapes("\\"), b"\\");
        assert_eq!(resolve_escapes("\\\\n"), b"\\n");
    }

    #[test]
    fn delimiters_escape_for_sextant() {
        assert_eq!(escape_delimiter(b"\r\n"), "\\r\\n");
        assert_eq!(escape_delimiter(b"*/"), "*/");
        assert_eq!(escape_delimiter(&[0xAA, b'\\']), "\\xAA\\\\");
    }

    #[test]
    fn hex_reads_leniently() {
        let h = read_hex("0xAA, 0x55");
        assert_eq!(h.bytes, vec![0xAA, 0x55]);
        assert!(!h.skipped_junk && !h.odd);
        let h = read_hex("AA5");
        assert_eq!(h.bytes, vec![0xAA]);
        assert!(h.odd);
        assert!(read_hex("zz").skipped_junk);
    }

    #[test]
    fn args_split_like_a_shell() {
        assert_eq!(
            split_args(r#"-v --name "two words" 'a b' c\ d"#),
            vec!["-v", "--name", "two words", "a b", "c d"]
        );
        assert!(split_args("   ").is_empty());
        assert_eq!(split_args(r#""""#), vec![""]);
    }

    #[test]
    fn literals_quote_safely() {
        assert_eq!(script_string_literal("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(script_string_literal("\u{1}"), r#""\x01""#);
    }
}

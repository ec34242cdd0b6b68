//! What the fuzz targets check text against, written here independently of the code they
//! check, so a target and its subject cannot share a mistake.

/// Characters a person cannot see but a model reads: Unicode's format characters
/// (general category Cf: soft hyphen, zero-width, bidi controls, Arabic and other number
/// signs, the tag characters of plane 14), the variation selectors, and the invisible
/// fillers.
pub fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891
        | 0x08E2 | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

/// Byte offsets in `text` of everything a reader could take for an envelope tag: a `<`
/// (ASCII, fullwidth `＜` or small-form `﹤`), any whitespace and slashes (ASCII or
/// fullwidth), then `untrusted` in any case, in ASCII or fullwidth letters.
pub fn tag_likes(text: &str) -> Vec<usize> {
    let ascii = |c: char| -> char {
        let c = match c as u32 {
            0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            0xFE64 => '<',
            _ => c,
        };
        c.to_ascii_lowercase()
    };
    let mut found = Vec::new();
    for (at, c) in text.char_indices() {
        if ascii(c) != '<' {
            continue;
        }
        let mut rest = text[at + c.len_utf8()..]
            .chars()
            .map(ascii)
            .skip_while(|c| c.is_whitespace() || *c == '/');
        if "untrusted".chars().all(|want| rest.next() == Some(want)) {
            found.push(at);
        }
    }
    found
}

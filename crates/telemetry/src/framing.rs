//! Frame detection: cutting a byte stream, delivered in arbitrary chunks, into frames.
//!
//! A [`Framer`] owns one bounded buffer per source. It never grows past the frame limit:
//! an over-long frame is discarded and counted, and the bytes after it are skipped up to
//! the next delimiter, so a device that stops sending newlines cannot exhaust memory.
//! Frames that fail their checksum are dropped and counted too. The framer hands payloads
//! out through a callback borrowing its buffer, so the common case (several whole frames
//! in one chunk) copies nothing.

use memchr::memmem;

use crate::project::{ChecksumKind, DelimiterFormat, FrameMode, Framing};

/// A delimiter or hex payload that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelimiterError {
    #[error("`{0}` is not a valid escape; use \\n, \\r, \\t, \\0, \\\\ or \\xHH")]
    BadEscape(String),
    #[error("`{0}` is not hex bytes; write them like `AA 55` or `0xAA,0x55`")]
    BadHex(String),
}

/// Parses a delimiter as written in a project: text with escapes, or hex bytes.
///
/// Text delimiters may be stored escaped (`"\\n"`) or literal (`"\n"`); both give `0x0A`.
pub fn parse_delimiter(text: &str, format: DelimiterFormat) -> Result<Vec<u8>, DelimiterError> {
    match format {
        DelimiterFormat::Hex => parse_hex_bytes(text),
        DelimiterFormat::Text => unescape(text),
    }
}

/// Text with `\n`, `\r`, `\t`, `\0`, `\\`, `\xHH` escapes → bytes.
pub fn unescape(text: &str) -> Result<Vec<u8>, DelimiterError> {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let bad = || DelimiterError::BadEscape(text.to_string());
        let esc = *bytes.get(i + 1).ok_or_else(bad)?;
        i += 2;
        out.push(match esc {
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'0' => 0,
            b'\\' => b'\\',
            b'x' | b'X' => {
                let hex = text.get(i..i + 2).ok_or_else(bad)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad()); // `from_str_radix` would take `\x+1`
                }
                i += 2;
                u8::from_str_radix(hex, 16).map_err(|_| bad())?
            }
            _ => return Err(bad()),
        });
    }
    Ok(out)
}

/// `AA 55`, `AA55`, `0xAA,0x55`, `aa:55` → bytes.
pub fn parse_hex_bytes(text: &str) -> Result<Vec<u8>, DelimiterError> {
    let bad = || DelimiterError::BadHex(text.to_string());
    let mut digits = String::with_capacity(text.len());
    for token in text.split(|c: char| c.is_whitespace() || c == ',' || c == ':' || c == ';') {
        let token = token
            .strip_prefix("0x")
            .or_else(|| token.strip_prefix("0X"))
            .unwrap_or(token);
        // Only hex digits: `from_str_radix` would also take a sign, and slicing other text
        // two bytes at a time could split a character.
        if !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        if token.len() % 2 == 1 {
            // A lone nibble like `A` in `A 55` means 0x0A.
            digits.push('0');
        }
        digits.push_str(token);
    }
    if digits.is_empty() {
        return Err(bad());
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).map_err(|_| bad()))
        .collect()
}

/// Counters a framer keeps; all monotonically increasing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FramingStats {
    /// Frames delivered (checksum passed).
    pub frames: u64,
    /// Frames discarded for exceeding the frame limit.
    pub oversize_dropped: u64,
    /// Frames discarded because their checksum did not match.
    pub checksum_failed: u64,
    /// Bytes thrown away: noise outside frames, and every byte (delimiters and checksum
    /// included) of an over-long frame.
    pub bytes_discarded: u64,
}

/// A framer configuration with its delimiters already resolved to bytes.
#[derive(Debug, Clone)]
pub struct FramerConfig {
    pub mode: FrameMode,
    pub start: Vec<u8>,
    pub ends: Vec<Vec<u8>>,
    pub checksum: ChecksumKind,
    pub max_frame_bytes: usize,
}

impl FramerConfig {
    /// Resolves a project's framing settings.
    pub fn from_project(f: &Framing) -> Result<Self, DelimiterError> {
        let start = match f.mode {
            FrameMode::StartEnd | FrameMode::StartOnly => {
                parse_delimiter(&f.start, f.delimiter_format)?
            }
            _ => Vec::new(),
        };
        let ends = match f.mode {
            FrameMode::EndOnly | FrameMode::StartEnd => f
                .end
                .iter()
                .filter(|e| !e.is_empty())
                .map(|e| parse_delimiter(e, f.delimiter_format))
                .collect::<Result<Vec<_>, _>>()?,
            _ => Vec::new(),
        };
        Ok(FramerConfig {
            mode: f.mode,
            start,
            ends,
            checksum: f.checksum,
            max_frame_bytes: f.max_frame_bytes.max(1),
        })
    }

    /// Lines ending in `\n`, `\r\n` or `\r` (the quick-plot default).
    pub fn lines(max_frame_bytes: usize) -> Self {
        FramerConfig {
            mode: FrameMode::EndOnly,
            start: Vec::new(),
            ends: vec![b"\r\n".to_vec(), b"\n".to_vec(), b"\r".to_vec()],
            checksum: ChecksumKind::None,
            max_frame_bytes,
        }
    }
}

/// Multi-pattern search that stays a single `memchr` for the usual one-byte delimiter.
#[derive(Debug, Clone)]
struct Patterns {
    finders: Vec<memmem::Finder<'static>>,
    single_byte: Option<u8>,
    longest: usize,
}

/// Why a match found in the bytes so far may not be the one the whole stream gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undecided {
    /// A longer pattern may still complete at the same position (`\r` now, `\r\n` later).
    Longer,
    /// A pattern may still complete at an earlier position.
    Earlier,
}

impl Patterns {
    fn new(patterns: &[Vec<u8>]) -> Self {
        let mut sorted: Vec<Vec<u8>> = patterns.iter().filter(|p| !p.is_empty()).cloned().collect();
        // At equal positions, the longer pattern wins (`\r\n` before `\r`).
        sorted.sort_by_key(|p| std::cmp::Reverse(p.len()));
        sorted.dedup();
        let single_byte = match sorted.as_slice() {
            [p] if p.len() == 1 => Some(p[0]),
            _ => None,
        };
        Patterns {
            longest: sorted.iter().map(|p| p.len()).max().unwrap_or(0),
            finders: sorted
                .into_iter()
                .map(|p| memmem::Finder::new(&p).into_owned())
                .collect(),
            single_byte,
        }
    }

    fn needles(&self) -> impl Iterator<Item = &[u8]> {
        self.finders.iter().map(|f| f.needle())
    }

    /// Earliest match in `hay` as (position, length).
    fn find(&self, hay: &[u8]) -> Option<(usize, usize)> {
        if let Some(b) = self.single_byte {
            return memchr::memchr(b, hay).map(|p| (p, 1));
        }
        let mut best: Option<(usize, usize)> = None;
        for f in &self.finders {
            let limit = best.map_or(hay.len(), |(p, _)| (p + f.needle().len()).min(hay.len()));
            if let Some(p) = f.find(&hay[..limit]) {
                if best.is_none_or(|(bp, _)| p < bp) {
                    best = Some((p, f.needle().len()));
                }
            }
        }
        best
    }

    /// Whether bytes after the end of `hay` could still replace the match `(at, len)` that
    /// [`find`](Self::find) gave: only a pattern that `hay` ends partway through can.
    fn undecided(&self, hay: &[u8], at: usize, len: usize) -> Option<Undecided> {
        // A pattern cut off by the end of `hay` starts within its last `longest - 1` bytes.
        let from = (hay.len() + 1).saturating_sub(self.longest);
        let mut longer = false;
        for q in from..=at {
            let tail = &hay[q..];
            for needle in self.needles() {
                if needle.len() > tail.len() && needle.starts_with(tail) {
                    if q < at {
                        return Some(Undecided::Earlier);
                    }
                    longer |= needle.len() > len;
                }
            }
        }
        longer.then_some(Undecided::Longer)
    }
}

/// An end delimiter that closed a frame but that a longer end delimiter could still extend
/// (`\r` of `\r\n`): the bytes that follow decide how many of them belong to it.
#[derive(Debug, Clone)]
struct OpenEnd {
    matched: Vec<u8>,
    /// The frame it closed was discarded, so the rest of its delimiter is discarded too.
    discarded: bool,
}

/// Cuts one source's byte stream into checksum-verified frame payloads.
///
/// With delimiters, the frames and counters never depend on how the stream was split into
/// chunks: a delimiter match that later bytes could still change waits for them.
#[derive(Debug, Clone)]
pub struct Framer {
    mode: FrameMode,
    start: Patterns,
    ends: Patterns,
    checksum: ChecksumKind,
    max_frame: usize,
    buf: Vec<u8>,
    /// Inside an over-long frame: drop bytes until its end delimiter.
    skipping: bool,
    open_end: Option<OpenEnd>,
    stats: FramingStats,
}

impl Framer {
    pub fn new(config: FramerConfig) -> Self {
        Framer {
            mode: config.mode,
            start: Patterns::new(std::slice::from_ref(&config.start)),
            ends: Patterns::new(&config.ends),
            checksum: config.checksum,
            max_frame: config.max_frame_bytes,
            buf: Vec::new(),
            skipping: false,
            open_end: None,
            stats: FramingStats::default(),
        }
    }

    pub fn stats(&self) -> FramingStats {
        self.stats
    }

    /// Bytes waiting for the rest of their frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Forgets any partial frame (after a reconnect, say).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.skipping = false;
        self.open_end = None;
    }

    /// Feeds one chunk; calls `emit` with each complete, verified payload in order.
    pub fn push(&mut self, chunk: &[u8], emit: &mut dyn FnMut(&[u8])) {
        if self.mode == FrameMode::None {
            self.whole_chunk(chunk, emit);
            return;
        }
        // Work on the chunk in place when nothing is pending; copy only the leftover tail.
        let mut buf = std::mem::take(&mut self.buf);
        let consumed;
        if buf.is_empty() {
            consumed = self.scan(chunk, emit);
            buf.extend_from_slice(&chunk[consumed..]);
        } else {
            buf.extend_from_slice(chunk);
            consumed = self.scan(&buf, emit);
            buf.drain(..consumed);
        }
        self.buf = buf;
        self.bound_buffer();
    }

    /// Keeps the pending buffer within the frame limit, discarding an over-long frame.
    ///
    /// The limit is the most a frame within `max_frame_bytes` can leave pending, so only a
    /// frame that is certain to be too long is cut; what is kept is what could still be its
    /// end delimiter and checksum (or, start-only, the beginning of the next start delimiter).
    fn bound_buffer(&mut self) {
        let n = self.checksum.len();
        let (slen, elen) = (self.start.longest, self.ends.longest);
        let (limit, keep) = match self.mode {
            FrameMode::EndOnly => (self.max_frame + elen + n, elen + n),
            FrameMode::StartEnd => (self.max_frame + slen + elen + n, elen + n),
            FrameMode::StartOnly => {
                let partial_start = slen.saturating_sub(1);
                (self.max_frame + slen + n + partial_start, partial_start)
            }
            FrameMode::None => return,
        };
        if self.skipping {
            // Still inside the over-long frame: drop its bytes as they come, so what is
            // pending (and counted) does not depend on how reads fell.
        } else if self.buf.len() > limit {
            self.stats.oversize_dropped += 1;
            // The rest of an end-delimited frame is garbage until its end delimiter; a
            // start-only frame ends where the next start delimiter begins, which scanning
            // finds by itself.
            self.skipping = self.mode != FrameMode::StartOnly;
        } else {
            return;
        }
        let cut = self.buf.len().saturating_sub(keep);
        self.stats.bytes_discarded += cut as u64;
        self.buf.drain(..cut);
    }

    fn whole_chunk(&mut self, chunk: &[u8], emit: &mut dyn FnMut(&[u8])) {
        if chunk.len() > self.max_frame + self.checksum.len() {
            self.stats.oversize_dropped += 1;
            self.stats.bytes_discarded += chunk.len() as u64;
            return;
        }
        self.deliver_trailing_checksum(chunk, chunk.len(), emit);
    }

    /// Frames whose checksum is their last bytes (start-only and whole-chunk modes);
    /// `wire` is the frame's length in the stream, delimiters included.
    fn deliver_trailing_checksum(
        &mut self,
        frame: &[u8],
        wire: usize,
        emit: &mut dyn FnMut(&[u8]),
    ) {
        let n = self.checksum.len();
        if frame.len() < n {
            self.stats.checksum_failed += 1;
            return;
        }
        let (payload, trailer) = frame.split_at(frame.len() - n);
        self.deliver(payload, trailer, wire, emit);
    }

    /// Emits a payload that fits and passes its checksum; returns whether it did.
    fn deliver(
        &mut self,
        payload: &[u8],
        trailer: &[u8],
        wire: usize,
        emit: &mut dyn FnMut(&[u8]),
    ) -> bool {
        if payload.len() > self.max_frame {
            self.stats.oversize_dropped += 1;
            self.stats.bytes_discarded += wire as u64;
            false
        } else if self.checksum.verify(payload, trailer) {
            self.stats.frames += 1;
            emit(payload);
            true
        } else {
            self.stats.checksum_failed += 1;
            false
        }
    }

    /// Emits every complete frame in `data`; returns how many bytes were consumed.
    fn scan(&mut self, data: &[u8], emit: &mut dyn FnMut(&[u8])) -> usize {
        match self.mode {
            FrameMode::EndOnly => self.scan_end_only(data, emit),
            FrameMode::StartEnd => self.scan_start_end(data, emit),
            FrameMode::StartOnly => self.scan_start_only(data, emit),
            FrameMode::None => unreachable!("handled in push"),
        }
    }

    /// Settles an open end delimiter with the bytes that followed it: consumes those that
    /// complete the longest delimiter it begins, or returns `None` while that is unknown.
    fn close_open_end(&mut self, data: &[u8]) -> Option<usize> {
        let Some(open) = &self.open_end else {
            return Some(0);
        };
        let (mut extra, mut waiting) = (0, 0);
        for needle in self.ends.needles() {
            let Some(rest) = needle.strip_prefix(open.matched.as_slice()) else {
                continue;
            };
            if data.starts_with(rest) {
                extra = extra.max(rest.len());
            } else if rest.starts_with(data) {
                waiting = waiting.max(rest.len());
            }
        }
        if waiting > extra {
            return None;
        }
        if open.discarded {
            self.stats.bytes_discarded += extra as u64;
        }
        self.open_end = None;
        Some(extra)
    }

    /// The end of the frame whose payload begins at `body`: (payload end, where the next
    /// frame begins, whether a longer end delimiter could still extend the match), or
    /// `None` until the bytes that decide it have arrived.
    fn find_end(&self, data: &[u8], body: usize) -> Option<(usize, usize, bool)> {
        let n = self.checksum.len();
        let (at, len) = self.ends.find(&data[body..])?;
        let end = body + at;
        let next = end + len + n;
        if next > data.len() {
            return None; // the checksum has not arrived yet
        }
        match self.ends.undecided(&data[body..], at, len) {
            None => Some((end, next, false)),
            // The payload is settled; only where the next frame begins is not. With a
            // checksum, though, its position depends on which delimiter it was.
            Some(Undecided::Longer) if n == 0 => Some((end, next, true)),
            Some(_) => None,
        }
    }

    /// Delivers (or, inside an over-long frame, discards) the frame from `start` to `next`.
    #[allow(clippy::too_many_arguments)]
    fn end_frame(
        &mut self,
        data: &[u8],
        start: usize,
        body: usize,
        end: usize,
        next: usize,
        open: bool,
        emit: &mut dyn FnMut(&[u8]),
    ) {
        let n = self.checksum.len();
        let discarded = if std::mem::take(&mut self.skipping) {
            self.stats.bytes_discarded += (next - start) as u64;
            true
        } else {
            !self.deliver(&data[body..end], &data[next - n..next], next - start, emit)
        };
        if open {
            self.open_end = Some(OpenEnd {
                matched: data[end..next - n].to_vec(),
                discarded,
            });
        }
    }

    fn scan_end_only(&mut self, data: &[u8], emit: &mut dyn FnMut(&[u8])) -> usize {
        let Some(mut pos) = self.close_open_end(data) else {
            return 0;
        };
        while let Some((end, next, open)) = self.find_end(data, pos) {
            self.end_frame(data, pos, pos, end, next, open, emit);
            pos = next;
            if open {
                break;
            }
        }
        pos
    }

    fn scan_start_end(&mut self, data: &[u8], emit: &mut dyn FnMut(&[u8])) -> usize {
        let slen = self.start.longest;
        let Some(mut pos) = self.close_open_end(data) else {
            return 0;
        };
        loop {
            // Inside an over-long frame its payload simply goes on; otherwise a frame
            // begins at the next start delimiter.
            let (start, body) = if self.skipping {
                (pos, pos)
            } else {
                let Some((s, _)) = self.start.find(&data[pos..]) else {
                    // No start: everything but a possible partial start delimiter is noise.
                    let keep = slen.saturating_sub(1).min(data.len() - pos);
                    let noise = data.len() - pos - keep;
                    self.stats.bytes_discarded += noise as u64;
                    return pos + noise;
                };
                self.stats.bytes_discarded += s as u64;
                (pos + s, pos + s + slen)
            };
            let Some((end, next, open)) = self.find_end(data, body) else {
                return start;
            };
            self.end_frame(data, start, body, end, next, open, emit);
            pos = next;
            if open {
                return pos;
            }
        }
    }

    fn scan_start_only(&mut self, data: &[u8], emit: &mut dyn FnMut(&[u8])) -> usize {
        let slen = self.start.longest;
        let Some((first, _)) = self.start.find(data) else {
            let keep = slen.saturating_sub(1).min(data.len());
            self.stats.bytes_discarded += (data.len() - keep) as u64;
            return data.len() - keep;
        };
        self.stats.bytes_discarded += first as u64;
        let mut frame_start = first;
        loop {
            let body = frame_start + slen;
            let Some((next, _)) = self.start.find(&data[body..]) else {
                return frame_start;
            };
            let frame_end = body + next;
            self.deliver_trailing_checksum(&data[body..frame_end], frame_end - frame_start, emit);
            frame_start = frame_end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_escapes() {
        assert_eq!(parse_hex_bytes("AA 55").unwrap(), vec![0xAA, 0x55]);
        assert_eq!(parse_hex_bytes("0xaa,0x55").unwrap(), vec![0xAA, 0x55]);
        assert_eq!(parse_hex_bytes("AA55").unwrap(), vec![0xAA, 0x55]);
        assert!(parse_hex_bytes("GG").is_err());
        assert!(parse_hex_bytes("+A").is_err());
        assert!(
            parse_hex_bytes("€").is_err(),
            "non-ASCII must not split a character"
        );
        assert!(parse_hex_bytes("A€").is_err());
        assert!(unescape("\\x+1").is_err());
        assert!(parse_hex_bytes("").is_err());
        assert_eq!(unescape("\\r\\n").unwrap(), b"\r\n");
        assert_eq!(unescape("\n").unwrap(), b"\n");
        assert_eq!(unescape("*\\x2A").unwrap(), b"**");
        assert!(unescape("\\q").is_err());
        assert!(unescape("\\").is_err());
    }
}

//! A Server-Sent Events parser (the WHATWG `text/event-stream` rules we need).
//!
//! Owns turning arbitrary byte chunks into complete events: lines may end in `\n`, `\r\n`
//! or `\r`, and an event, a line or a UTF-8 character may be split across chunks. Hand-written
//! (small, and every provider quirk stays visible here) rather than a crate, so the client
//! controls buffering and can tell a cleanly finished stream from a cut one.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the server sent none (OpenAI never does).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line not yet terminated.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    started: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse one chunk, appending every event it completes to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            let is_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    // We cannot know yet whether `\n` follows; remember to swallow it.
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            self.line_complete(&line, out);
        }
        self.line.extend_from_slice(rest);
    }

    /// Whether bytes of an event are buffered that no blank line has dispatched yet – at the
    /// end of the stream that means the connection was closed mid-event.
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data || !self.event.is_empty()
    }

    fn line_complete(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        let mut line = line;
        if !self.started {
            self.started = true;
            // A UTF-8 byte order mark may open the stream.
            if let Some(stripped) = line.strip_prefix("\u{feff}".as_bytes()) {
                line = stripped;
            }
        }
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alive)
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // `id`, `retry` and unknown fields mean nothing to a one-shot reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        (out, parser.has_partial())
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    const STREAM: &str = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: ping\ndata: {}\n\ndata: line1\ndata: line2\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            ev("message_start", "{\"a\":1}"),
            ev("ping", "{}"),
            ev("", "line1\nline2"),
        ]
    }

    #[test]
    fn whole_stream_in_one_chunk() {
        let (events, partial) = parse_chunks(&[STREAM.as_bytes()]);
        assert_eq!(events, expected());
        assert!(!partial);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        for ending in ["\n", "\r\n", "\r"] {
            let text = STREAM.replace('\n', ending);
            let bytes = text.as_bytes();
            for split in 0..=bytes.len() {
                let (events, partial) = parse_chunks(&[&bytes[..split], &bytes[split..]]);
                assert_eq!(events, expected(), "ending {ending:?} split at {split}");
                assert!(!partial, "ending {ending:?} split at {split}");
            }
            // And byte by byte.
            let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(
                parse_chunks(&chunks).0,
                expected(),
                "ending {ending:?} byte by byte"
            );
        }
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_end() {
        let (events, _) = parse_chunks(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(events, vec![ev("", "a"), ev("", "b")]);
    }

    #[test]
    fn utf8_split_across_chunks_survives() {
        let text = "data: {\"t\":\"héllo ✓\"}\n\n".as_bytes();
        let split = text.iter().position(|&b| b == 0xc3).unwrap() + 1; // inside `é`
        let (events, _) = parse_chunks(&[&text[..split], &text[split..]]);
        assert_eq!(events, vec![ev("", "{\"t\":\"héllo ✓\"}")]);
    }

    #[test]
    fn data_without_space_and_bom() {
        let (events, _) = parse_chunks(&["\u{feff}data:{\"x\":1}\n\n".as_bytes()]);
        assert_eq!(events, vec![ev("", "{\"x\":1}")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let (events, partial) = parse_chunks(&[b"event: ping\n\nid: 3\nretry: 10\n\n"]);
        assert!(events.is_empty());
        assert!(!partial);
    }

    #[test]
    fn unterminated_event_is_reported_partial() {
        let (events, partial) = parse_chunks(&[b"data: {\"a\":1}\n\ndata: {\"b\":"]);
        assert_eq!(events, vec![ev("", "{\"a\":1}")]);
        assert!(partial);
        // A complete data line still waiting for its blank line is partial too.
        assert!(parse_chunks(&[b"event: x\ndata: 1\n"]).1);
    }
}

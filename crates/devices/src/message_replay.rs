//! Message captures: a recording of a message-based source (UDP datagrams, CAN frames,
//! Modbus responses, BLE notifications, MQTT payloads) as JSON Lines, played back one
//! message at a time, so a project whose frames are whole messages (no delimiters) reads
//! them exactly as it did live.
//!
//! One JSON object per line:
//!
//! | key      | what                                                                  |
//! |----------|-----------------------------------------------------------------------|
//! | `t`      | seconds since the capture began (a number ≥ 0, never going back)      |
//! | `source` | the project source it came from: its id (`"src-2"`) or its index (`1`); absent means the first source |
//! | `hex`    | the message's bytes in hex (`"0a1f"`, spaces between bytes allowed; `""` is an empty message) |
//!
//! A CAN frame is written as the CAN sources hand it to parsers
//! ([`sextant_telemetry::can_frame`]). Blank lines are skipped; anything else that does not
//! read is an error naming its line, so a damaged capture is never replayed in part
//! without saying so.
//!
//! A capture is indexed on open (time and file offset of each of the source's messages),
//! and a message is read when it is due, so memory stays small whatever the file's size.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sextant_telemetry::Timestamp;

use crate::replay::{ReplayControl, ReplayLink, ReplayRecords};
use crate::source::{DeviceError, Driver};

/// The longest line read: a message of up to 1 MiB in hex with room for spaces and keys.
pub const MAX_LINE_BYTES: usize = 3 * 1024 * 1024 + 4096;

/// Whether `path` names a message capture (by its extension, `.jsonl` or `.ndjson`).
pub fn is_message_capture(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson"))
}

/// The source a message names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceRef {
    /// No `source` key: the first source.
    First,
    Index(u64),
    Id(String),
}

impl SourceRef {
    /// The index of the source this names among `ids` (the project's source ids, in order).
    pub fn resolve(&self, ids: &[&str]) -> Option<usize> {
        match self {
            SourceRef::First => (!ids.is_empty()).then_some(0),
            SourceRef::Index(i) => usize::try_from(*i).ok().filter(|&i| i < ids.len()),
            SourceRef::Id(id) => ids.iter().position(|s| s == id),
        }
    }

    /// Whether this names the source at `index` whose id is `id`.
    pub fn is(&self, index: usize, id: &str) -> bool {
        match self {
            SourceRef::First => index == 0,
            SourceRef::Index(i) => *i == index as u64,
            SourceRef::Id(s) => s == id,
        }
    }
}

impl std::fmt::Display for SourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceRef::First => f.write_str("the first source"),
            SourceRef::Index(i) => write!(f, "source {i}"),
            SourceRef::Id(id) => write!(f, "source `{id}`"),
        }
    }
}

/// One message of a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub source: SourceRef,
    /// `t` in ns; the Unix time is not recorded (0).
    pub timestamp: Timestamp,
    pub data: Bytes,
}

/// Reads one line's message; `Ok(None)` for a blank line. The error says what is wrong
/// with the line (the caller adds where it is).
pub fn parse_line(line: &str) -> Result<Option<Message>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e})"))?;
    let object = value
        .as_object()
        .ok_or("not a JSON object with `t` and `hex`")?;
    let t = object
        .get("t")
        .ok_or("no `t` (the time in seconds)")?
        .as_f64()
        .filter(|t| t.is_finite() && *t >= 0.0 && *t < 1e9)
        .ok_or("`t` is not a time in seconds (a number from 0)")?;
    let source = match object.get("source") {
        None | Some(serde_json::Value::Null) => SourceRef::First,
        Some(serde_json::Value::String(id)) => SourceRef::Id(id.clone()),
        Some(v) => SourceRef::Index(
            v.as_u64()
                .ok_or("`source` is neither a source id nor an index")?,
        ),
    };
    let hex = object
        .get("hex")
        .ok_or("no `hex` (the message's bytes)")?
        .as_str()
        .ok_or("`hex` is not a string of hex digits")?;
    let data = decode_hex(hex)?;
    Ok(Some(Message {
        source,
        timestamp: Timestamp {
            elapsed_ns: (t * 1e9).round() as u64,
            unix_ns: 0,
        },
        data: Bytes::from(data),
    }))
}

/// Pairs of hex digits, with spaces allowed between the bytes.
fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 2);
    for token in text.split_ascii_whitespace() {
        if token.len() % 2 == 1 {
            return Err(format!(
                "`hex` has an odd number of digits in `{}`: each byte is two",
                shorten(token)
            ));
        }
        out.extend(hex::decode(token).map_err(|_| {
            format!(
                "`hex` holds something other than hex digits: `{}`",
                shorten(token)
            )
        })?);
    }
    Ok(out)
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= 24 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(24).collect::<String>())
    }
}

/// Reads a capture line by line, with each line's number and file offset.
pub struct MessageReader<R> {
    input: R,
    line: usize,
    offset: u64,
    previous_ns: u64,
    buf: Vec<u8>,
    path: PathBuf,
}

impl<R: BufRead> MessageReader<R> {
    /// `path` names the capture in errors.
    pub fn new(input: R, path: &Path) -> Self {
        MessageReader {
            input,
            line: 0,
            offset: 0,
            previous_ns: 0,
            buf: Vec::new(),
            path: path.to_path_buf(),
        }
    }

    /// The number (from 1) of the line read last.
    pub fn line(&self) -> usize {
        self.line
    }

    fn error(&self, what: impl std::fmt::Display) -> DeviceError {
        DeviceError::fatal(format!(
            "{} line {}: {what}",
            self.path.display(),
            self.line
        ))
    }

    /// The next message and the file offset of its line; `None` at the end.
    pub fn next_message(&mut self) -> Result<Option<(u64, Message)>, DeviceError> {
        loop {
            let offset = self.offset;
            if !self.read_line()? {
                return Ok(None);
            }
            let text =
                std::str::from_utf8(self.line_bytes()).map_err(|_| self.error("not UTF-8 text"))?;
            let parsed = parse_line(text).map_err(|e| self.error(e))?;
            let Some(message) = parsed else { continue };
            let t = message.timestamp.elapsed_ns;
            if t < self.previous_ns {
                return Err(self.error(format!(
                    "`t` goes back from {} s to {} s; the messages must be in time order",
                    self.previous_ns as f64 / 1e9,
                    t as f64 / 1e9
                )));
            }
            self.previous_ns = t;
            return Ok(Some((offset, message)));
        }
    }

    /// Reads one line into the buffer, at most [`MAX_LINE_BYTES`] of it; `false` at the end.
    fn read_line(&mut self) -> Result<bool, DeviceError> {
        self.buf.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| {
                DeviceError::fatal(format!("could not read {}: {e}", self.path.display()))
            })?;
        if read == 0 {
            return Ok(false);
        }
        self.line += 1;
        self.offset += read as u64;
        if self.buf.len() as u64 >= limit && self.buf.last() != Some(&b'\n') {
            return Err(self.error(format!(
                "longer than {} MiB; a message capture holds one message of up to 1 MiB a line",
                MAX_LINE_BYTES / (1024 * 1024)
            )));
        }
        Ok(true)
    }

    /// The line read last, without its end.
    fn line_bytes(&self) -> &[u8] {
        let end = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        end.strip_suffix(b"\r").unwrap_or(end)
    }
}

/// The messages of one source of a capture, indexed by file offset.
pub struct MessageRecords {
    file: BufReader<File>,
    path: PathBuf,
    times: Vec<u64>,
    offsets: Vec<u64>,
}

impl MessageRecords {
    /// Indexes the messages of the source at `index` with id `id`. A capture with messages
    /// but none for this source is an error naming the sources it has.
    pub fn open(path: &Path, index: usize, id: &str) -> Result<MessageRecords, DeviceError> {
        let open = || {
            File::open(path)
                .map_err(|e| DeviceError::fatal(format!("could not open {}: {e}", path.display())))
        };
        let mut reader = MessageReader::new(BufReader::with_capacity(256 * 1024, open()?), path);
        let (mut times, mut offsets) = (Vec::new(), Vec::new());
        let mut others: Vec<SourceRef> = Vec::new();
        while let Some((offset, message)) = reader.next_message()? {
            if message.source.is(index, id) {
                times.push(message.timestamp.elapsed_ns);
                offsets.push(offset);
            } else if others.len() < 8 && !others.contains(&message.source) {
                others.push(message.source);
            }
        }
        if times.is_empty() && !others.is_empty() {
            let named: Vec<String> = others.iter().map(ToString::to_string).collect();
            return Err(DeviceError::fatal(format!(
                "{} has no messages for source `{id}` (index {index}); it has messages for {}. Set each line's `source` to a source id of the project",
                path.display(),
                named.join(", ")
            )));
        }
        Ok(MessageRecords {
            file: BufReader::with_capacity(64 * 1024, open()?),
            path: path.to_path_buf(),
            times,
            offsets,
        })
    }
}

impl ReplayRecords for MessageRecords {
    fn times(&self) -> &[u64] {
        &self.times
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
        self.file
            .seek(SeekFrom::Start(self.offsets[i]))
            .map_err(|e| {
                DeviceError::fatal(format!("could not read {}: {e}", self.path.display()))
            })?;
        let mut reader = MessageReader::new(&mut self.file, &self.path);
        match reader.next_message()? {
            Some((_, m)) if m.timestamp.elapsed_ns == self.times[i] => Ok((m.data, m.timestamp)),
            _ => Err(DeviceError::fatal(format!(
                "{} changed while replaying it",
                self.path.display()
            ))),
        }
    }
}

/// Plays the messages of one source of a message capture.
pub struct MessageReplayDriver {
    pub path: PathBuf,
    /// The source's index and id in the project: a message plays here when its `source`
    /// names either.
    pub index: usize,
    pub id: String,
    pub control: Arc<ReplayControl>,
}

impl Driver for MessageReplayDriver {
    type Link = ReplayLink<MessageRecords>;

    fn describe(&self) -> String {
        format!("message replay {}", self.path.display())
    }

    async fn open(&mut self) -> Result<Self::Link, DeviceError> {
        let (path, index, id) = (self.path.clone(), self.index, self.id.clone());
        let records = tokio::task::spawn_blocking(move || MessageRecords::open(&path, index, &id))
            .await
            .map_err(|e| DeviceError::fatal(format!("indexing failed: {e}")))??;
        Ok(ReplayLink::new(records, self.control.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_into_its_source_time_and_bytes() {
        let m = parse_line(r#"{"t": 1.5, "source": "can0", "hex": "01 02 0a ff"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(m.source, SourceRef::Id("can0".into()));
        assert_eq!(m.timestamp.elapsed_ns, 1_500_000_000);
        assert_eq!(&m.data[..], [1, 2, 10, 255]);
        let m = parse_line(r#"{"t":0,"source":2,"hex":"ABCDEF"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.source, &m.data[..]),
            (SourceRef::Index(2), &[0xab, 0xcd, 0xef][..])
        );
        let m = parse_line(r#"{"t":0,"hex":""}"#).unwrap().unwrap();
        assert_eq!((m.source, m.data.len()), (SourceRef::First, 0));
        assert_eq!(parse_line("   \r").unwrap(), None);
    }

    #[test]
    fn a_bad_line_says_what_is_wrong_with_it() {
        for (line, says) in [
            ("not json", "not a JSON object"),
            ("[1, 2]", "not a JSON object"),
            (r#"{"hex": "00"}"#, "no `t`"),
            (r#"{"t": -1, "hex": "00"}"#, "`t` is not a time"),
            (r#"{"t": "1", "hex": "00"}"#, "`t` is not a time"),
            (r#"{"t": 1}"#, "no `hex`"),
            (r#"{"t": 1, "hex": 12}"#, "`hex` is not a string"),
            (r#"{"t": 1, "hex": "abc"}"#, "odd number of digits"),
            (r#"{"t": 1, "hex": "0x12"}"#, "other than hex digits"),
            (r#"{"t": 1, "hex": "zz"}"#, "other than hex digits"),
            (
                r#"{"t": 1, "hex": "00", "source": -1}"#,
                "`source` is neither",
            ),
            (
                r#"{"t": 1, "hex": "00", "source": true}"#,
                "`source` is neither",
            ),
        ] {
            let e = parse_line(line).expect_err(line);
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn a_source_is_named_by_id_or_index() {
        let ids = ["udp", "can0"];
        assert_eq!(SourceRef::Id("can0".into()).resolve(&ids), Some(1));
        assert_eq!(SourceRef::Index(0).resolve(&ids), Some(0));
        assert_eq!(SourceRef::First.resolve(&ids), Some(0));
        assert_eq!(SourceRef::Index(2).resolve(&ids), None);
        assert_eq!(SourceRef::Id("can1".into()).resolve(&ids), None);
        assert!(SourceRef::Id("can0".into()).is(1, "can0"));
        assert!(SourceRef::Index(1).is(1, "can0"));
        assert!(!SourceRef::First.is(1, "can0"));
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("capture.jsonl");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_capture_indexes_one_sources_messages_and_loads_each_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "{\"t\":0.0,\"source\":\"a\",\"hex\":\"0102\"}\n\
             \n\
             {\"t\":0.5,\"source\":\"b\",\"hex\":\"ff\"}\r\n\
             {\"t\":0.5,\"source\":0,\"hex\":\"\"}\n\
             {\"t\":2,\"source\":\"a\",\"hex\":\"03 04 05\"}",
        );
        let mut a = MessageRecords::open(&path, 0, "a").unwrap();
        assert_eq!(a.times(), [0, 500_000_000, 2_000_000_000]);
        assert_eq!(&a.load(2).unwrap().0[..], [3, 4, 5]);
        assert_eq!(&a.load(0).unwrap().0[..], [1, 2]);
        assert_eq!(a.load(1).unwrap().0.len(), 0);
        let mut b = MessageRecords::open(&path, 1, "b").unwrap();
        assert_eq!(b.times(), [500_000_000]);
        assert_eq!(&b.load(0).unwrap().0[..], [0xff]);

        let e = MessageRecords::open(&path, 2, "c")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("no messages for source `c`") && e.contains("source `a`"),
            "{e}"
        );
    }

    #[test]
    fn a_damaged_or_disordered_capture_is_refused_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        for (text, says) in [
            (
                "{\"t\":1,\"hex\":\"00\"}\n{\"t\":0.5,\"hex\":\"00\"}\n",
                "line 2: `t` goes back",
            ),
            (
                "{\"t\":1,\"hex\":\"00\"}\n\n{\"t\":2,\"hex\":\"0\"}\n",
                "line 3: `hex` has an odd",
            ),
            ("{\"t\":1,\"hex\":\"\u{e9}\"}\n", "line 1: `hex` holds"),
        ] {
            let path = write(dir.path(), text);
            let e = MessageRecords::open(&path, 0, "a")
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let path = dir.path().join("long.jsonl");
        let mut long = b"{\"t\":0,\"hex\":\"".to_vec();
        long.resize(MAX_LINE_BYTES + 10, b'0');
        std::fs::write(&path, &long).unwrap();
        let e = MessageRecords::open(&path, 0, "a")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 1: longer than"), "{e}");
        let path = dir.path().join("binary.jsonl");
        std::fs::write(&path, b"{\"t\":0,\"hex\":\"00\"}\n\xff\xfe\n").unwrap();
        let e = MessageRecords::open(&path, 0, "a")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 2: not UTF-8"), "{e}");
    }
}

//! The MCAP file a session becomes, one message at a time: the channel layout and message
//! encoding shared by the export of a recorded session ([`crate::to_mcap`]) and the live
//! MCAP recording ([`crate::live_mcap`]), so a file recorded live and one exported after
//! the fact read the same in Foxglove Studio and PlotJuggler.
//!
//! - One channel per group, topic `/<group title>`, JSON messages under a JSON Schema: a
//!   frame's `elapsed_s` and each of the group's datasets by title. A dataset with no new
//!   value in the frame is left out of the message, as a plot would not draw a point.
//!   Text stays text; a number that is not finite is `null` (JSON has no NaN).
//! - One channel per source that delivered raw bytes, topic `/<source id>/raw`, each chunk
//!   as `{"data": "<base64>"}` (the schema says `contentEncoding: base64`, which Foxglove
//!   shows as bytes).
//! - A message's log time is the file's start plus its time from the first frame.
//! - Metadata (the session's details) and the project as the attachment `project.json`.
//!
//! Chunks are zstd-compressed (level 1), the compression every MCAP reader knows.

use std::collections::BTreeMap;
use std::io::{BufWriter, Seek, Write};

use base64::Engine as _;
use mcap::records::MessageHeader;
use mcap::{Attachment, WriteOptions, Writer};
use serde_json::json;
use sextant_telemetry::{Project, Value};

use crate::layout::Column;
use crate::{unique, ExportError};

/// The first bytes of every MCAP file.
pub(crate) const MAGIC: &[u8] = b"\x89MCAP0\r\n";

pub(crate) fn mcap_error(e: mcap::McapError) -> ExportError {
    match e {
        // A full disk says so, as every other write does.
        mcap::McapError::Io(io) => ExportError::Io(io),
        other => ExportError::Mcap(other.to_string()),
    }
}

/// A group's channel: the columns it carries and the sources whose frames update it.
struct GroupChannel {
    /// The group's title, as the columns name it.
    group: String,
    channel: u16,
    /// Column index and the message key (JSON-quoted) of each of the group's datasets.
    keys: Vec<(usize, String)>,
    /// `None`: every frame (a dataset of the group may come from any source).
    sources: Option<Vec<usize>>,
    sequence: u32,
}

/// A source's raw-bytes channel.
struct RawChannel {
    source: usize,
    channel: u16,
    sequence: u32,
}

/// An MCAP file being written: its channels, and the buffers its messages are encoded in.
pub(crate) struct McapLog<W: Write + Seek> {
    out: Writer<BufWriter<W>>,
    /// Unix time of the first frame, ns: what log times count from.
    start_ns: u64,
    groups: Vec<GroupChannel>,
    topics: Vec<String>,
    raw_schema: u16,
    raws: Vec<RawChannel>,
    message: Vec<u8>,
    base64: String,
}

impl<W: Write + Seek> McapLog<W> {
    /// Starts the file with its metadata record `metadata` and `project` attached.
    pub(crate) fn create(
        out: W,
        start_ns: u64,
        metadata: (&str, BTreeMap<String, String>),
        project: &serde_json::Value,
    ) -> Result<McapLog<W>, ExportError> {
        let mut out = WriteOptions::new()
            .compression(Some(mcap::Compression::Zstd))
            // zstd's fastest level: 1.5× the default's rate, and smaller files here (the
            // export bench: 79.5 → 75.3 MiB), since JSON digits leave little for its
            // stronger levels to find. Compression was two thirds of the writer's time.
            .compression_level(1)
            .profile("")
            .library(concat!("sextant ", env!("CARGO_PKG_VERSION")))
            .create(BufWriter::with_capacity(1 << 20, out))
            .map_err(mcap_error)?;
        out.write_metadata(&mcap::records::Metadata {
            name: metadata.0.into(),
            metadata: metadata.1,
        })
        .map_err(mcap_error)?;
        let project = serde_json::to_vec_pretty(project)
            .map_err(|e| ExportError::Mcap(format!("the project: {e}")))?;
        out.attach(&Attachment {
            log_time: start_ns,
            create_time: start_ns,
            name: "project.json".into(),
            media_type: "application/json".into(),
            data: project.into(),
        })
        .map_err(mcap_error)?;
        let raw_schema = json!({
            "title": "Raw chunk",
            "description": "Bytes as the device delivered them, in one read.",
            "type": "object",
            "properties": {"data": {"type": "string", "contentEncoding": "base64"}},
        });
        let raw_schema = out
            .add_schema(
                "sextant.RawChunk",
                "jsonschema",
                raw_schema.to_string().as_bytes(),
            )
            .map_err(mcap_error)?;
        Ok(McapLog {
            out,
            start_ns,
            groups: Vec::new(),
            topics: Vec::new(),
            raw_schema,
            raws: Vec::new(),
            message: Vec::with_capacity(1024),
            base64: String::new(),
        })
    }

    /// Channels for the groups of `columns[from..]`, in the order their first column
    /// appears. A group that has a channel already gets a new one on the same topic whose
    /// schema holds all its datasets (datasets Quick Plot found later); its frames go there
    /// from now on.
    pub(crate) fn add_groups(
        &mut self,
        columns: &[Column],
        from: usize,
    ) -> Result<(), ExportError> {
        let mut order: Vec<&str> = Vec::new();
        for c in columns.iter().skip(from) {
            if !order.contains(&c.group.as_str()) {
                order.push(&c.group);
            }
        }
        for group in order {
            let mut properties = serde_json::Map::new();
            properties.insert(
                "elapsed_s".into(),
                json!({"type": "number", "description": "Seconds from the first frame"}),
            );
            let mut keys = Vec::new();
            let mut sources = Some(Vec::new());
            for (i, c) in columns.iter().enumerate().filter(|(_, c)| c.group == group) {
                let key = unique(&c.title, |k| properties.contains_key(k));
                let mut property = json!({"type": ["number", "string", "null"], "title": c.title});
                if !c.units.is_empty() {
                    property["description"] = json!(c.units);
                }
                properties.insert(key.clone(), property);
                keys.push((i, serde_json::to_string(&key).unwrap_or_default()));
                match (c.source, &mut sources) {
                    (Some(s), Some(list)) if !list.contains(&s) => list.push(s),
                    (Some(_), _) => {}
                    (None, _) => sources = None,
                }
            }
            let title = if group.is_empty() { "Datasets" } else { group };
            let schema = json!({"title": title, "type": "object", "properties": properties});
            let schema_id = self
                .out
                .add_schema(
                    &format!("sextant.Group.{title}"),
                    "jsonschema",
                    schema.to_string().as_bytes(),
                )
                .map_err(mcap_error)?;
            let had = self.groups.iter().position(|g| g.group == group);
            let topic = match had {
                Some(i) => self.topics[i].clone(),
                None => unique(&format!("/{title}"), |t| self.topics.iter().any(|x| x == t)),
            };
            let channel = self
                .out
                .add_channel(schema_id, &topic, "json", &BTreeMap::new())
                .map_err(mcap_error)?;
            let made = GroupChannel {
                group: group.to_string(),
                channel,
                keys,
                sources,
                sequence: 0,
            };
            match had {
                Some(i) => {
                    let sequence = self.groups[i].sequence;
                    self.groups[i] = GroupChannel { sequence, ..made };
                }
                None => {
                    self.topics.push(topic);
                    self.groups.push(made);
                }
            }
        }
        Ok(())
    }

    /// The raw channel of source `source`, topic `/<id>/raw`, made on first use.
    fn raw_channel(&mut self, source: usize, id: &str) -> Result<usize, ExportError> {
        if let Some(i) = self.raws.iter().position(|r| r.source == source) {
            return Ok(i);
        }
        let channel = self
            .out
            .add_channel(
                self.raw_schema,
                &format!("/{id}/raw"),
                "json",
                &BTreeMap::new(),
            )
            .map_err(mcap_error)?;
        self.raws.push(RawChannel {
            source,
            channel,
            sequence: 0,
        });
        Ok(self.raws.len() - 1)
    }

    /// Makes the raw channel of each source in `sources` (index, id) now, in that order.
    pub(crate) fn add_sources(&mut self, sources: &[(usize, String)]) -> Result<(), ExportError> {
        for (index, id) in sources {
            self.raw_channel(*index, id)?;
        }
        Ok(())
    }

    /// Writes a chunk of source `source` (named `id`), due `since_ns` after the first frame.
    pub(crate) fn raw(
        &mut self,
        source: usize,
        id: &str,
        since_ns: u64,
        bytes: &[u8],
    ) -> Result<(), ExportError> {
        let i = self.raw_channel(source, id)?;
        self.base64.clear();
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut self.base64);
        self.message.clear();
        self.message.extend_from_slice(b"{\"data\":\"");
        self.message.extend_from_slice(self.base64.as_bytes());
        self.message.extend_from_slice(b"\"}");
        let raw = &mut self.raws[i];
        raw.sequence += 1;
        let header = MessageHeader {
            channel_id: raw.channel,
            sequence: raw.sequence,
            log_time: self.start_ns + since_ns,
            publish_time: self.start_ns + since_ns,
        };
        self.out
            .write_to_known_channel(&header, &self.message)
            .map_err(mcap_error)
    }

    /// Writes a frame of source `source`, `since_ns` after the first: a message on each
    /// group channel the source feeds.
    pub(crate) fn frame(
        &mut self,
        since_ns: u64,
        source: usize,
        values: &[Value],
    ) -> Result<(), ExportError> {
        for group in self.groups.iter_mut() {
            if group.sources.as_ref().is_some_and(|s| !s.contains(&source)) {
                continue;
            }
            group_message(&mut self.message, since_ns, &group.keys, values);
            group.sequence += 1;
            let header = MessageHeader {
                channel_id: group.channel,
                sequence: group.sequence,
                log_time: self.start_ns + since_ns,
                publish_time: self.start_ns + since_ns,
            };
            self.out
                .write_to_known_channel(&header, &self.message)
                .map_err(mcap_error)?;
        }
        Ok(())
    }

    /// Closes the chunk being filled and hands what was written to the file: a reader of
    /// the file as it stands (a crash from now on) finds every message so far.
    pub(crate) fn flush(&mut self) -> Result<(), ExportError> {
        self.out.flush().map_err(mcap_error)
    }

    /// Writes the summary and footer, and flushes: the file is complete.
    pub(crate) fn finish(mut self) -> Result<W, ExportError> {
        self.out.finish().map_err(mcap_error)?;
        self.out
            .into_inner()
            .into_inner()
            .map_err(|e| ExportError::Io(e.into_error()))
    }
}

/// A group's message for one frame: `{"elapsed_s": …, "<title>": value, …}`.
fn group_message(out: &mut Vec<u8>, since_ns: u64, keys: &[(usize, String)], values: &[Value]) {
    let mut number = ryu::Buffer::new();
    out.clear();
    out.extend_from_slice(b"{\"elapsed_s\":");
    out.extend_from_slice(number.format(since_ns as f64 / 1e9).as_bytes());
    for (column, key) in keys {
        let value = match values.get(*column) {
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        out.push(b',');
        out.extend_from_slice(key.as_bytes());
        out.push(b':');
        match value {
            Value::Number(n) if n.is_finite() => {
                out.extend_from_slice(number.format_finite(*n).as_bytes())
            }
            Value::Number(_) => out.extend_from_slice(b"null"),
            // Writing to memory cannot fail.
            Value::Text(t) => {
                let _ = serde_json::to_writer(&mut *out, t);
            }
            Value::Null => {}
        }
    }
    out.push(b'}');
}

/// A project as the JSON attached to the file.
pub(crate) fn project_json(project: &Project) -> serde_json::Value {
    serde_json::to_value(project).unwrap_or(serde_json::Value::Null)
}

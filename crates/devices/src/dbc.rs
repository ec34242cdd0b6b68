//! DBC import: a CAN database file (the format of CANdb++ and most CAN tools) becomes the
//! layout of the built-in `can` parser plus one group per message and one dataset per
//! signal.
//!
//! Reading and parsing the file live here, with the I/O-facing code, because they are
//! file access and a third-party grammar. What the import produces is plain project data
//! ([`ParserConfig::Can`] holding the decoded layout, [`Group`]s, [`Dataset`]s): the pure
//! telemetry core decodes frames from that data and never sees the file, and a saved
//! project keeps working when the DBC file is gone.
//!
//! Slots: parser slot `i + 1` is the `i`-th imported signal, counting messages in file
//! order and each message's signals in file order; the datasets made here carry those
//! slots. Nothing is dropped silently: what cannot be decoded (a signal wider than 64
//! bits, a multiplexed signal without a multiplexor, a duplicate id) is skipped with a
//! note in [`DbcImport::notes`], and so is what Sextant does not show yet (value
//! descriptions, comments).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use can_dbc::{ByteOrder, Dbc, MessageId, MultiplexIndicator, NumericValue, ValueType};
use sextant_telemetry::parse::CanParser;
use sextant_telemetry::project::{
    CanMessage, CanMux, CanSignal, CanValueType, ChecksumKind, Dataset, Decoder, Endian, FrameMode,
    Group, GroupWidget, ParserConfig, Project,
};

use crate::can::MAX_STANDARD_ID;

/// Why a DBC file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum DbcError {
    #[error("could not read the DBC file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("this is not a valid DBC file: {0}")]
    Syntax(String),
    #[error(
        "the DBC file defines no CAN message with a signal Sextant can decode, so there is \
         nothing to import (see the notes for what was skipped)"
    )]
    Empty { notes: Vec<String> },
    #[error("the project has no source with id `{0}` to attach the DBC layout to")]
    NoSuchSource(String),
    #[error("the imported layout was refused: {0}")]
    Layout(String),
}

/// One imported signal: its decoding plus what the dataset shows.
#[derive(Debug, Clone, PartialEq)]
pub struct DbcSignal {
    pub layout: CanSignal,
    pub unit: String,
    /// The physical range, when the file gives one (`[0|0]` means none).
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// One imported message.
#[derive(Debug, Clone, PartialEq)]
pub struct DbcMessage {
    pub id: u32,
    pub extended: bool,
    pub name: String,
    pub signals: Vec<DbcSignal>,
}

/// The result of reading a DBC file.
#[derive(Debug, Clone, PartialEq)]
pub struct DbcImport {
    /// Messages in file order, each with at least one signal.
    pub messages: Vec<DbcMessage>,
    /// What was skipped or not mapped, one sentence each.
    pub notes: Vec<String>,
}

/// Reads a DBC file. DBC files are often Windows-1252 rather than UTF-8; both are read.
pub fn read_dbc(path: &Path) -> Result<DbcImport, DbcError> {
    let bytes = std::fs::read(path).map_err(|source| DbcError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_dbc(&decode_text(bytes))
}

/// The characters Windows-1252 puts at 0x80–0x9F (elsewhere it matches Latin-1).
const CP1252_HIGH: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8D}', 'Ž', '\u{8F}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9D}', 'ž', 'Ÿ',
];

fn decode_text(bytes: Vec<u8>) -> String {
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => e
            .into_bytes()
            .into_iter()
            .map(|b| match b {
                0x80..=0x9F => CP1252_HIGH[(b - 0x80) as usize],
                _ => b as char,
            })
            .collect(),
    }
}

fn number(v: &NumericValue) -> f64 {
    match *v {
        NumericValue::Uint(u) => u as f64,
        NumericValue::Int(i) => i as f64,
        NumericValue::Double(d) => d,
    }
}

fn id_parts(id: MessageId) -> (u32, bool) {
    match id {
        MessageId::Standard(s) => (u32::from(s), false),
        MessageId::Extended(e) => (e, true),
    }
}

/// Why a signal cannot be decoded, if it cannot (the same limits the parser checks).
fn undecodable(s: &can_dbc::Signal, float: bool) -> Option<String> {
    if !(1..=64).contains(&s.size) {
        return Some(format!(
            "it is {} bits wide; Sextant decodes 1 to 64",
            s.size
        ));
    }
    if float && s.size != 32 && s.size != 64 {
        return Some(format!(
            "a float signal must be 32 or 64 bits, not {}",
            s.size
        ));
    }
    // Saturating: the numbers come straight from the file.
    let first_bit = match s.byte_order {
        ByteOrder::LittleEndian => s.start_bit,
        ByteOrder::BigEndian => (s.start_bit / 8 * 8).saturating_add(7 - s.start_bit % 8),
    };
    let last_bit = first_bit.saturating_add(s.size - 1);
    if last_bit / 8 >= 64 {
        return Some("it ends beyond byte 63, past the longest CAN FD frame".into());
    }
    if !s.factor.is_finite() || !s.offset.is_finite() {
        return Some("its factor or offset is not a finite number".into());
    }
    None
}

/// Reads DBC text.
pub fn parse_dbc(text: &str) -> Result<DbcImport, DbcError> {
    let dbc = Dbc::try_from(text).map_err(|e| DbcError::Syntax(e.to_string()))?;
    let mut notes = Vec::new();
    let types = SignalTypes {
        floats: float_signals(&dbc),
        explicit_mux: explicit_muxes(&dbc),
    };

    let mut seen_ids = HashSet::new();
    let mut messages = Vec::new();
    for message in &dbc.messages {
        if let Some(m) = import_message(message, &types, &mut seen_ids, &mut notes) {
            messages.push(m);
        }
    }
    note_not_imported(&dbc, &mut notes);

    if messages.is_empty() {
        return Err(DbcError::Empty { notes });
    }
    let import = DbcImport { messages, notes };
    // The parser's own checks are the final word on whether the layout decodes.
    CanParser::new(&import.layout()).map_err(|e| DbcError::Layout(e.message))?;
    Ok(import)
}

/// What the file says about signals outside their `SG_` lines, keyed by (message, signal).
struct SignalTypes<'a> {
    /// Float signals (SIG_VALTYPE_) and the width they declare.
    floats: HashMap<(MessageId, &'a str), u64>,
    /// Extended multiplexing (SG_MUL_VAL_): the switch and value ranges of a signal.
    explicit_mux: HashMap<(MessageId, &'a str), CanMux>,
}

/// The signals SIG_VALTYPE_ declares as IEEE floats, with their declared width.
fn float_signals(dbc: &Dbc) -> HashMap<(MessageId, &str), u64> {
    dbc.signal_extended_value_type_list
        .iter()
        .filter_map(|v| {
            let size = match v.signal_extended_value_type {
                can_dbc::SignalExtendedValueType::IEEEfloat32Bit => 32,
                can_dbc::SignalExtendedValueType::IEEEdouble64bit => 64,
                can_dbc::SignalExtendedValueType::SignedOrUnsignedInteger => return None,
            };
            Some(((v.message_id, v.signal_name.as_str()), size))
        })
        .collect()
}

/// The switch and value ranges extended multiplexing (SG_MUL_VAL_) gives each signal.
fn explicit_muxes(dbc: &Dbc) -> HashMap<(MessageId, &str), CanMux> {
    let mut explicit_mux: HashMap<(MessageId, &str), CanMux> = HashMap::new();
    for m in &dbc.extended_multiplex {
        let entry = explicit_mux
            .entry((m.message_id, m.signal_name.as_str()))
            .or_insert_with(|| CanMux {
                switch: m.multiplexor_signal_name.clone(),
                ranges: Vec::new(),
            });
        entry
            .ranges
            .extend(m.mappings.iter().map(|r| [r.min_value, r.max_value]));
    }
    explicit_mux
}

/// One message of the file with the signals Sextant can decode, or `None` (with a note)
/// when the message is skipped.
fn import_message(
    message: &can_dbc::Message,
    types: &SignalTypes,
    seen_ids: &mut HashSet<(u32, bool)>,
    notes: &mut Vec<String>,
) -> Option<DbcMessage> {
    if message.name == "VECTOR__INDEPENDENT_SIG_MSG" {
        if !message.signals.is_empty() {
            notes.push(format!(
                "{} signal(s) not attached to any message (VECTOR__INDEPENDENT_SIG_MSG) \
                 were skipped: no frame carries them",
                message.signals.len()
            ));
        }
        return None;
    }
    let (id, extended) = id_parts(message.id);
    if !extended && id > MAX_STANDARD_ID {
        notes.push(format!(
            "message `{}` was skipped: id {id} is neither an 11-bit standard id nor \
             marked extended (bit 31)",
            message.name
        ));
        return None;
    }
    if !seen_ids.insert((id, extended)) {
        notes.push(format!(
            "message `{}` was skipped: another message already uses id 0x{id:X}",
            message.name
        ));
        return None;
    }
    let simple_switch = message
        .signals
        .iter()
        .find(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor)
        .map(|s| s.name.clone());

    let mut signals: Vec<DbcSignal> = message
        .signals
        .iter()
        .filter_map(|s| import_signal(message, s, types, simple_switch.as_deref(), notes))
        .collect();
    drop_orphaned_multiplexed(&message.name, &mut signals, notes);
    if signals.is_empty() {
        notes.push(format!(
            "message `{}` has no signal to decode; no group was made for it",
            message.name
        ));
        return None;
    }
    Some(DbcMessage {
        id,
        extended,
        name: message.name.clone(),
        signals,
    })
}

/// One signal of `message` as the `can` parser decodes it, or `None` (with a note) when
/// it cannot be decoded. `simple_switch` is the message's `M` multiplexor signal.
fn import_signal(
    message: &can_dbc::Message,
    s: &can_dbc::Signal,
    types: &SignalTypes,
    simple_switch: Option<&str>,
    notes: &mut Vec<String>,
) -> Option<DbcSignal> {
    let float = types.floats.get(&(message.id, s.name.as_str())).copied();
    if let Some(why) = undecodable(s, float.is_some()) {
        notes.push(format!(
            "signal `{}.{}` was skipped: {why}",
            message.name, s.name
        ));
        return None;
    }
    if float.is_some_and(|size| size != s.size) {
        notes.push(format!(
            "signal `{}.{}` was skipped: SIG_VALTYPE_ declares a {}-bit float but \
             the signal is {} bits",
            message.name,
            s.name,
            float.unwrap_or(0),
            s.size
        ));
        return None;
    }
    let mux = signal_mux(message, s, types, simple_switch, notes);
    let (min, max) = (number(&s.min), number(&s.max));
    Some(DbcSignal {
        layout: CanSignal {
            name: s.name.clone(),
            start_bit: s.start_bit as u16,
            size: s.size as u8,
            byte_order: match s.byte_order {
                ByteOrder::LittleEndian => Endian::Little,
                ByteOrder::BigEndian => Endian::Big,
            },
            value_type: match (float, s.value_type) {
                (Some(_), _) => CanValueType::Float,
                (None, ValueType::Signed) => CanValueType::Signed,
                (None, ValueType::Unsigned) => CanValueType::Unsigned,
            },
            factor: s.factor,
            offset: s.offset,
            mux,
        },
        unit: s.unit.clone(),
        min: (min < max).then_some(min),
        max: (min < max).then_some(max),
    })
}

/// When a signal is decoded: extended multiplexing if the file has it for the signal,
/// else the message's simple multiplexor; `None` means in every frame.
fn signal_mux(
    message: &can_dbc::Message,
    s: &can_dbc::Signal,
    types: &SignalTypes,
    simple_switch: Option<&str>,
    notes: &mut Vec<String>,
) -> Option<CanMux> {
    match (
        types.explicit_mux.get(&(message.id, s.name.as_str())),
        s.multiplexer_indicator,
    ) {
        (Some(explicit), _) => Some(explicit.clone()),
        (
            None,
            MultiplexIndicator::MultiplexedSignal(v)
            | MultiplexIndicator::MultiplexorAndMultiplexedSignal(v),
        ) => match simple_switch {
            Some(switch) if switch != s.name => Some(CanMux {
                switch: switch.to_string(),
                ranges: vec![[v, v]],
            }),
            _ => {
                notes.push(format!(
                    "signal `{}.{}` is multiplexed (m{v}) but its message has no \
                     multiplexor signal; it is decoded in every frame",
                    message.name, s.name
                ));
                None
            }
        },
        _ => None,
    }
}

/// A multiplexed signal whose switch was skipped can never be decoded: drops it too, and
/// what it switched in turn.
fn drop_orphaned_multiplexed(message: &str, signals: &mut Vec<DbcSignal>, notes: &mut Vec<String>) {
    loop {
        let names: HashSet<String> = signals.iter().map(|s| s.layout.name.clone()).collect();
        let before = signals.len();
        signals.retain(|s| match &s.layout.mux {
            Some(mux) if !names.contains(&mux.switch) => {
                notes.push(format!(
                    "signal `{}.{}` was skipped: its multiplexor `{}` is not an imported \
                     signal of the message",
                    message, s.layout.name, mux.switch
                ));
                false
            }
            _ => true,
        });
        if signals.len() == before {
            break;
        }
    }
}

/// Notes what the file has that Sextant does not show yet: value descriptions, comments.
fn note_not_imported(dbc: &Dbc, notes: &mut Vec<String>) {
    let described: HashSet<(MessageId, &str)> = dbc
        .value_descriptions
        .iter()
        .filter_map(|v| match v {
            can_dbc::ValueDescription::Signal {
                message_id, name, ..
            } => Some((*message_id, name.as_str())),
            _ => None,
        })
        .collect();
    if !described.is_empty() {
        notes.push(format!(
            "value descriptions (VAL_) of {} signal(s) were not imported: those datasets \
             show numbers, not the names",
            described.len()
        ));
    }
    if !dbc.comments.is_empty() {
        notes.push(format!(
            "{} comment(s) (CM_) were not imported",
            dbc.comments.len()
        ));
    }
}

/// The number N of the first free `prefix-N` id.
fn first_free(project: &Project, prefix: &str) -> u64 {
    project
        .next_id(prefix)
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

impl DbcImport {
    /// The decoding layout, as the `can` parser stores it.
    pub fn layout(&self) -> Vec<CanMessage> {
        self.messages
            .iter()
            .map(|m| CanMessage {
                id: m.id,
                extended: m.extended,
                name: m.name.clone(),
                signals: m.signals.iter().map(|s| s.layout.clone()).collect(),
            })
            .collect()
    }

    /// The parser configuration for the source that receives these frames.
    pub fn parser(&self) -> ParserConfig {
        ParserConfig::Can {
            messages: self.layout(),
        }
    }

    /// Signals imported, which is also the parser's row width.
    pub fn signal_count(&self) -> usize {
        self.messages.iter().map(|m| m.signals.len()).sum()
    }

    /// One data-grid group per message, one dataset per signal (slot `i + 1` for the
    /// `i`-th signal), fed by `source_id`, with ids that are free in `project`.
    pub fn groups(&self, project: &Project, source_id: &str) -> Vec<Group> {
        let mut dataset_numbers = first_free(project, "ds")..;
        let mut slots = 1u32..;
        self.messages
            .iter()
            .zip(first_free(project, "grp")..)
            .map(|(m, group_number)| Group {
                id: format!("grp-{group_number}"),
                title: m.name.clone(),
                widget: GroupWidget::DataGrid,
                datasets: m
                    .signals
                    .iter()
                    .zip(&mut dataset_numbers)
                    .zip(&mut slots)
                    .map(|((s, number), slot)| Dataset {
                        id: format!("ds-{number}"),
                        title: s.layout.name.clone(),
                        units: s.unit.clone(),
                        index: slot,
                        source: Some(source_id.to_string()),
                        min: s.min,
                        max: s.max,
                        ..Dataset::default()
                    })
                    .collect(),
                ..Group::default()
            })
            .collect()
    }

    /// Attaches the import to source `source_id`: its parser becomes the DBC layout, each
    /// chunk is one frame (no delimiters, no checksum) handed over as bytes, and the groups
    /// of [`DbcImport::groups`] are appended. Returns the new groups' ids.
    pub fn apply(&self, project: &mut Project, source_id: &str) -> Result<Vec<String>, DbcError> {
        let groups = self.groups(project, source_id);
        let source = project
            .sources
            .iter_mut()
            .find(|s| s.id == source_id)
            .ok_or_else(|| DbcError::NoSuchSource(source_id.to_string()))?;
        source.parser = self.parser();
        source.decoder = Decoder::Binary;
        source.framing.mode = FrameMode::None;
        source.framing.checksum = ChecksumKind::None;
        let ids = groups.iter().map(|g| g.id.clone()).collect();
        project.groups.extend(groups);
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_1252_files_are_read() {
        assert_eq!(decode_text(b"\xEF\xBB\xBFabc".to_vec()), "abc");
        assert_eq!(decode_text("°C".as_bytes().to_vec()), "°C");
        assert_eq!(decode_text(b"\xB0C \x80 \x93x\x94".to_vec()), "°C € “x”");
    }

    #[test]
    fn ids_continue_after_the_projects_own() {
        let mut project = Project::default();
        project.groups.push(Group {
            id: "grp-7".into(),
            datasets: vec![Dataset {
                id: "ds-3".into(),
                ..Dataset::default()
            }],
            ..Group::default()
        });
        assert_eq!(first_free(&project, "grp"), 8);
        assert_eq!(first_free(&project, "ds"), 4);
        assert_eq!(first_free(&Project::default(), "ds"), 1);
    }
}

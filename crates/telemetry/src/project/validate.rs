//! Semantic checks of a project, each reported with the JSON path of the offending value.

use std::collections::HashSet;
use std::fmt;

use super::model::*;
use crate::framing::parse_delimiter;

/// One problem found by [`Project::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    /// Path in the file, e.g. `groups[0].datasets[2].index`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Collects issues and the ids seen so far (ids are unique across the whole project).
#[derive(Default)]
struct Report<'p> {
    issues: Vec<ValidationIssue>,
    ids: HashSet<&'p str>,
}

impl<'p> Report<'p> {
    fn push(&mut self, path: String, message: String) {
        self.issues.push(ValidationIssue { path, message });
    }

    fn id(&mut self, path: String, id: &'p str) {
        if id.is_empty() {
            self.push(path, "id must not be empty".into());
        } else if !self.ids.insert(id) {
            self.push(path, format!("id `{id}` is used more than once"));
        }
    }
}

/// The most alternative end patterns a source may have.
pub const MAX_END_DELIMITERS: usize = 8;

impl Project {
    /// Every semantic problem in the project; empty when it is valid.
    pub fn validate(&self) -> Vec<ValidationIssue> {
        let mut r = Report::default();

        let source_ids: HashSet<&str> = self.sources.iter().map(|s| s.id.as_str()).collect();
        for (i, source) in self.sources.iter().enumerate() {
            let at = format!("sources[{i}]");
            r.id(format!("{at}.id"), &source.id);
            validate_framing(&source.framing, &format!("{at}.framing"), &mut r);
            validate_parser(&source.parser, &format!("{at}.parser"), &mut r);
            validate_can_source(source, &at, &mut r);
        }

        let mut dataset_ids: HashSet<&str> = HashSet::new();
        for d in self.datasets() {
            dataset_ids.insert(d.id.as_str());
        }
        let refs = References {
            source_ids: &source_ids,
            dataset_ids: &dataset_ids,
            has_sources: !self.sources.is_empty(),
        };
        for (g, group) in self.groups.iter().enumerate() {
            let at = format!("groups[{g}]");
            r.id(format!("{at}.id"), &group.id);
            for (k, d) in group.datasets.iter().enumerate() {
                validate_dataset(d, &format!("{at}.datasets[{k}]"), &refs, &mut r);
            }
            if !group.controls.is_empty() && group.widget != GroupWidget::Output {
                r.push(
                    format!("{at}.controls"),
                    "only an output group (widget `output`) shows controls".into(),
                );
            }
            for (c, control) in group.controls.iter().enumerate() {
                validate_control(control, &format!("{at}.controls[{c}]"), &refs, &mut r);
            }
            if !group.painter_code.is_empty() {
                if group.widget != GroupWidget::Painter {
                    r.push(
                        format!("{at}.painterCode"),
                        "only a painter group (widget `painter`) runs painter code".into(),
                    );
                } else if group.painter_code.chars().count() > MAX_PAINTER_CHARS {
                    r.push(
                        format!("{at}.painterCode"),
                        format!("the painter code is longer than {MAX_PAINTER_CHARS} characters"),
                    );
                }
            }
            if let Some(image) = &group.image {
                validate_image(image, group.widget, &format!("{at}.image"), &refs, &mut r);
            }
        }
        for (a, action) in self.actions.iter().enumerate() {
            let at = format!("actions[{a}]");
            r.id(format!("{at}.id"), &action.id);
            if let Some(src) = &action.source {
                if !source_ids.contains(src.as_str()) {
                    r.push(format!("{at}.source"), format!("no source has id `{src}`"));
                }
            }
            if action.hex && crate::framing::parse_hex_bytes(&action.payload).is_err() {
                r.push(
                    format!("{at}.payload"),
                    "payload is marked hex but is not hex bytes".into(),
                );
            }
        }
        let group_ids: HashSet<&str> = self.groups.iter().map(|g| g.id.as_str()).collect();
        for (w, ws) in self.workspaces.iter().enumerate() {
            validate_workspace(
                ws,
                &format!("workspaces[{w}]"),
                &group_ids,
                &dataset_ids,
                &mut r,
            );
        }
        r.issues
    }
}

/// The most characters of an output control's `transmit` script.
const MAX_TRANSMIT_SCRIPT_CHARS: usize = 64 * 1024;

/// The most characters of a painter group's code.
const MAX_PAINTER_CHARS: usize = 256 * 1024;

fn validate_control<'p>(c: &'p Control, at: &str, refs: &References, r: &mut Report<'p>) {
    r.id(format!("{at}.id"), &c.id);
    if c.title.trim().is_empty() {
        r.push(format!("{at}.title"), "a control needs a title".into());
    }
    if let Some(src) = &c.source {
        if !refs.source_ids.contains(src.as_str()) {
            r.push(format!("{at}.source"), format!("no source has id `{src}`"));
        }
    } else if !refs.has_sources {
        r.push(
            format!("{at}.source"),
            "the project has no source for the control to send to".into(),
        );
    }
    if c.transmit.trim().is_empty() {
        r.push(
            format!("{at}.transmit"),
            "a control needs a script defining transmit(value)".into(),
        );
    } else if c.transmit.chars().count() > MAX_TRANSMIT_SCRIPT_CHARS {
        r.push(
            format!("{at}.transmit"),
            format!("the script is longer than {MAX_TRANSMIT_SCRIPT_CHARS} characters"),
        );
    }
    if matches!(c.kind, ControlKind::Slider | ControlKind::Knob) {
        if !(c.min.is_finite() && c.max.is_finite() && c.min < c.max) {
            r.push(
                format!("{at}.max"),
                "min and max must be numbers with min below max".into(),
            );
        }
        if !(c.step.is_finite() && c.step > 0.0) {
            r.push(format!("{at}.step"), "step must be a number above 0".into());
        }
        if c.min < c.max && !(c.min..=c.max).contains(&c.initial) {
            r.push(
                format!("{at}.initial"),
                format!("the initial value must lie between {} and {}", c.min, c.max),
            );
        }
    }
}

fn validate_image(
    image: &ImageStream,
    widget: GroupWidget,
    at: &str,
    refs: &References,
    r: &mut Report,
) {
    if widget != GroupWidget::Image {
        r.push(
            at.to_string(),
            "only an image group (widget `image`) reads an image stream".into(),
        );
    }
    if let Some(src) = &image.source {
        if !refs.source_ids.contains(src.as_str()) {
            r.push(format!("{at}.source"), format!("no source has id `{src}`"));
        }
    }
    if image.detection == ImageDetection::Markers {
        for (key, hex) in [("start", &image.start), ("end", &image.end)] {
            match crate::framing::parse_hex_bytes(hex) {
                Ok(bytes) if !bytes.is_empty() => {}
                Ok(_) => r.push(
                    format!("{at}.{key}"),
                    format!("markers need {key} bytes, in hex (e.g. \"FF D8\")"),
                ),
                Err(_) => r.push(
                    format!("{at}.{key}"),
                    format!("{key} must be hex bytes, e.g. \"FF D8\""),
                ),
            }
        }
    }
}

/// What the rest of the project offers for a dataset to refer to.
struct References<'a> {
    source_ids: &'a HashSet<&'a str>,
    dataset_ids: &'a HashSet<&'a str>,
    has_sources: bool,
}

/// A CAN source's decoder and framing must leave its binary frames intact.
fn validate_can_source(source: &Source, at: &str, r: &mut Report) {
    if !matches!(source.parser, ParserConfig::Can { .. }) {
        return;
    }
    // CAN chunks are binary and self-delimiting: text decoding would mangle
    // bytes >= 0x80 (every extended id), and delimiters would cut frames apart.
    if source.decoder != Decoder::Binary {
        r.push(
            format!("{at}.decoder"),
            "the CAN parser reads raw frame bytes: set the decoder to `binary`".into(),
        );
    }
    if source.framing.mode != FrameMode::None {
        r.push(
            format!("{at}.framing.mode"),
            "a CAN source delivers one frame per chunk: set the frame mode to `none`".into(),
        );
    }
}

/// One dataset: its id, slot, transform, range, alarm bands and what it refers to.
fn validate_dataset<'p>(d: &'p Dataset, at: &str, refs: &References, r: &mut Report<'p>) {
    r.id(format!("{at}.id"), &d.id);
    if !d.is_virtual && d.index == 0 {
        r.push(
            format!("{at}.index"),
            "parser slots start at 1; mark the dataset `virtual` if it is computed".into(),
        );
    }
    if d.is_virtual && d.transform.is_none() {
        r.push(
            format!("{at}.transform"),
            "a virtual dataset needs a transform to compute its value".into(),
        );
    }
    if let Some(src) = &d.source {
        if !refs.source_ids.contains(src.as_str()) {
            r.push(format!("{at}.source"), format!("no source has id `{src}`"));
        }
    }
    if !d.is_virtual && !refs.has_sources {
        r.push(
            format!("{at}.source"),
            "the project has no source to feed this dataset".into(),
        );
    }
    if let (Some(min), Some(max)) = (d.min, d.max) {
        if min > max {
            r.push(
                format!("{at}.min"),
                format!("min {min} is greater than max {max}"),
            );
        }
    }
    for (a, band) in d.alarms.iter().enumerate() {
        if band.min > band.max {
            r.push(
                format!("{at}.alarms[{a}]"),
                format!("band min {} is greater than its max {}", band.min, band.max),
            );
        }
    }
    if let XAxis::Dataset { id } = &d.x_axis {
        if !refs.dataset_ids.contains(id.as_str()) {
            r.push(
                format!("{at}.xAxis.id"),
                format!("no dataset has id `{id}`"),
            );
        }
    }
    if let Some(w) = &d.waterfall {
        if !Waterfall::HISTORY.contains(&w.history) {
            r.push(
                format!("{at}.waterfall.history"),
                format!(
                    "a waterfall keeps {} to {} rows, not {}",
                    Waterfall::HISTORY.start(),
                    Waterfall::HISTORY.end(),
                    w.history
                ),
            );
        }
    }
    if let Some(t) = &d.trigger {
        if !t.level.is_finite() {
            r.push(
                format!("{at}.trigger.level"),
                "the trigger level must be a number".into(),
            );
        }
        if !(0.0..=1.0).contains(&t.pre_trigger) {
            r.push(
                format!("{at}.trigger.preTrigger"),
                format!(
                    "{} is not a share of the window: use 0 (the edge at the left) to 1 (at the right)",
                    t.pre_trigger
                ),
            );
        }
        if let Some(id) = &t.dataset {
            if !refs.dataset_ids.contains(id.as_str()) {
                r.push(
                    format!("{at}.trigger.dataset"),
                    format!("no dataset has id `{id}`"),
                );
            }
        }
    }
    if let Some(t) = &d.transform {
        if t.code.trim().is_empty() {
            r.push(
                format!("{at}.transform.code"),
                "transform code is empty".into(),
            );
        }
    }
}

/// One workspace: its id, and the groups and datasets its tiles show.
fn validate_workspace<'p>(
    ws: &'p Workspace,
    at: &str,
    group_ids: &HashSet<&str>,
    dataset_ids: &HashSet<&str>,
    r: &mut Report<'p>,
) {
    r.id(format!("{at}.id"), &ws.id);
    for (t, tile) in ws.tiles.iter().enumerate() {
        if let Some(g) = &tile.group {
            if !group_ids.contains(g.as_str()) {
                r.push(
                    format!("{at}.tiles[{t}].group"),
                    format!("no group has id `{g}`"),
                );
            }
        }
        if let Some(d) = &tile.dataset {
            if !dataset_ids.contains(d.as_str()) {
                r.push(
                    format!("{at}.tiles[{t}].dataset"),
                    format!("no dataset has id `{d}`"),
                );
            }
        }
    }
}

fn validate_framing(f: &Framing, at: &str, r: &mut Report) {
    if f.end.len() > MAX_END_DELIMITERS {
        r.push(
            format!("{at}.end"),
            format!(
                "at most {MAX_END_DELIMITERS} end patterns are allowed, found {}",
                f.end.len()
            ),
        );
    }
    let needs_end = matches!(f.mode, FrameMode::EndOnly | FrameMode::StartEnd);
    let needs_start = matches!(f.mode, FrameMode::StartEnd | FrameMode::StartOnly);
    if needs_end && f.end.iter().all(|e| e.is_empty()) {
        r.push(
            format!("{at}.end"),
            "this frame mode needs an end delimiter".into(),
        );
    }
    if needs_start && f.start.is_empty() {
        r.push(
            format!("{at}.start"),
            "this frame mode needs a start delimiter".into(),
        );
    }
    if needs_start {
        if let Err(e) = parse_delimiter(&f.start, f.delimiter_format) {
            r.push(format!("{at}.start"), e.to_string());
        }
    }
    if needs_end {
        for (i, end) in f.end.iter().enumerate() {
            if let Err(e) = parse_delimiter(end, f.delimiter_format) {
                r.push(format!("{at}.end[{i}]"), e.to_string());
            }
        }
    }
    if f.max_frame_bytes == 0 {
        r.push(format!("{at}.maxFrameBytes"), "must be at least 1".into());
    }
}

fn validate_parser(p: &ParserConfig, at: &str, r: &mut Report) {
    match p {
        ParserConfig::Delimited { separator } if separator.is_empty() => r.push(
            format!("{at}.separator"),
            "separator must not be empty".into(),
        ),
        ParserConfig::FixedWidth { widths } if widths.is_empty() || widths.contains(&0) => r.push(
            format!("{at}.widths"),
            "widths must be a non-empty list of positive numbers".into(),
        ),
        ParserConfig::KeyValue {
            pair_separator,
            value_separator,
            ..
        } if pair_separator.is_empty() || value_separator.is_empty() => {
            r.push(at.to_string(), "separators must not be empty".into())
        }
        ParserConfig::Binary { fields } if fields.is_empty() => r.push(
            format!("{at}.fields"),
            "a binary layout needs at least one field".into(),
        ),
        ParserConfig::Script { code, .. } if code.trim().is_empty() => {
            r.push(format!("{at}.code"), "the parser script is empty".into())
        }
        ParserConfig::Can { messages } if messages.is_empty() => r.push(
            format!("{at}.messages"),
            "a CAN layout needs at least one message; import a DBC file to get one".into(),
        ),
        _ => {}
    }
}

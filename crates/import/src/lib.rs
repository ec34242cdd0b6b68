//! Import of Serial Studio projects (`.ssproj` / `.json`) into Sextant's project model.
//!
//! This crate owns the translation from Serial Studio's file format — schema 3 files with a
//! `sources` array, and the older single-source shape with frame settings at the top level
//! — to [`Project`], together with an [`ImportReport`] that lists, by JSON path in the
//! source file, everything that could not be carried over exactly. It never panics on any
//! input: a document that is not JSON or not a Serial Studio project is an [`ImportError`];
//! anything else imports, with what was wrong or unsupported in the report.
//!
//! Module map: `json` reads values leniently and tracks unread keys, `text` converts
//! delimiters and escapes, `sources` builds sources (connection, framing, decoder, parser),
//! `shim` adapts old parser scripts that Serial Studio called differently, `groups` builds
//! groups and datasets, `workspaces` builds the dashboard tabs, `actions` builds actions,
//! tables and the MQTT publisher, `report` holds what could not be mapped.

mod actions;
mod groups;
mod json;
mod report;
mod shim;
mod sources;
mod text;
mod workspaces;

use std::collections::HashMap;

use serde_json::{Map, Value};
use sextant_telemetry::project::Project;

use crate::json::{is_blank, show, Obj};
use crate::sources::{RootExtras, Shape};

pub use report::{ImportReport, ReportItem, Severity, Subject, SummaryItem};

/// The newest Serial Studio project schema this importer was written against.
pub const SERIAL_STUDIO_SCHEMA: i64 = 3;

/// A converted project and what did not convert.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub project: Project,
    pub report: ImportReport,
    /// The report as a person reads it ([`ImportReport::summary`]).
    pub summary: Vec<SummaryItem>,
}

/// Why a document could not be imported at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("not a Serial Studio project: {reason}")]
    NotSerialStudio { reason: String },
}

/// Keys only a Serial Studio project has at its top level.
const SIGNATURE_KEYS: [&str; 8] = [
    "groups",
    "sources",
    "frameParser",
    "frameStart",
    "frameEnd",
    "frameDetection",
    "decoder",
    "decoderMethod",
];

/// Converts the text of a Serial Studio project file.
pub fn import_serial_studio(text: &str) -> Result<Imported, ImportError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = serde_json::from_str(text).map_err(|e| ImportError::Syntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let root = match &value {
        Value::Object(map) => map,
        other => {
            return Err(ImportError::NotSerialStudio {
                reason: format!(
                    "the document is {}, but a project is a JSON object",
                    describe(other)
                ),
            })
        }
    };
    if looks_like_sextant(root) {
        let marked = root.get("format").and_then(Value::as_str)
            == Some(sextant_telemetry::project::FORMAT_MARKER);
        // A hand-written Sextant project without its marker lands here too: telling that
        // person to "open it directly" would send them round in a circle.
        let reason = if marked {
            "this is already a Sextant project; open it directly".to_string()
        } else {
            format!(
                "this looks like a Sextant project without its marker; add `\"format\": \"{}\", \"schemaVersion\": {}` to it to open it",
                sextant_telemetry::project::FORMAT_MARKER,
                sextant_telemetry::project::SCHEMA_VERSION
            )
        };
        return Err(ImportError::NotSerialStudio { reason });
    }
    if !SIGNATURE_KEYS.iter().any(|k| root.contains_key(*k)) {
        return Err(ImportError::NotSerialStudio {
            reason: "it has none of the keys a Serial Studio project has (groups, sources, \
                     frameParser, frameStart, frameEnd, …)"
                .into(),
        });
    }
    Ok(import_root(root))
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a JSON array",
        Value::Object(_) => "an object",
    }
}

/// Sextant files have string ids and typed connections; Serial Studio files never do.
fn looks_like_sextant(root: &Map<String, Value>) -> bool {
    if root.get("format").and_then(Value::as_str) == Some(sextant_telemetry::project::FORMAT_MARKER)
    {
        return true;
    }
    let typed_connection = root
        .get("sources")
        .and_then(Value::as_array)
        .and_then(|s| s.first())
        .and_then(|s| s.get("connection"))
        .and_then(|c| c.get("type"))
        .is_some_and(Value::is_string);
    let string_group_ids = root
        .get("groups")
        .and_then(Value::as_array)
        .and_then(|g| g.first())
        .and_then(|g| g.get("id"))
        .is_some_and(Value::is_string);
    typed_connection || string_group_ids
}

/// Hands out `prefix-1`, `prefix-2`, … per prefix, as `Project::next_id` would on a
/// project built in this order.
#[derive(Default)]
pub(crate) struct Ids {
    next: HashMap<&'static str, u64>,
}

impl Ids {
    pub fn next(&mut self, prefix: &'static str) -> String {
        let n = self.next.entry(prefix).or_insert(0);
        *n += 1;
        format!("{prefix}-{n}")
    }
}

/// Top-level frame keys of the legacy single-source shape.
const LEGACY_SOURCE_KEYS: [&str; 9] = [
    "frameStart",
    "frameEnd",
    "frameDetection",
    "hexadecimalDelimiters",
    "checksum",
    "checksumAlgorithm",
    "decoder",
    "decoderMethod",
    "frameParser",
];

fn import_root(root: &Map<String, Value>) -> Imported {
    let mut r = ImportReport::default();
    let mut ids = Ids::default();
    let mut obj = Obj::new(root, "");
    let mut project = Project::default();

    let legacy_ids = import_header(&mut obj, &mut project, &mut r);
    let imported = import_sources(&mut obj, &mut ids, &mut r);

    // Groups and datasets.
    let lookup = groups::SourceLookup {
        sources: imported
            .iter()
            .map(|s| (s.ss_id, s.source.id.clone(), s.transform_language))
            .collect(),
    };
    let groups_path = obj.at("groups");
    let file_groups = obj
        .array("groups", &mut r)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let (groups, origins) = groups::import_groups(
        file_groups,
        &groups_path,
        &lookup,
        legacy_ids,
        &mut ids,
        &mut r,
    );
    project.groups = groups;

    // Dashboard tabs.
    let workspaces_path = obj.at("workspaces");
    if let Some(items) = obj.array("workspaces", &mut r) {
        project.workspaces = workspaces::import_workspaces(
            items,
            &workspaces_path,
            file_groups,
            &project.groups,
            &origins,
            &mut ids,
            &mut r,
        );
    }
    let source_ids: Vec<(i64, String)> = imported
        .iter()
        .map(|s| (s.ss_id, s.source.id.clone()))
        .collect();
    project.sources = imported.into_iter().map(|s| s.source).collect();

    import_actions_tables_publisher(&mut obj, &mut project, &source_ids, &mut ids, &mut r);

    report_root_leftovers(&mut obj, &mut r);
    sources::stray_mqtt_settings(&mut obj, false, &mut r);
    obj.finish(&mut r);

    report_validation(&project, &mut r);
    let summary = r.summary(root);
    Imported {
        project,
        report: r,
        summary,
    }
}

/// Reads the schema version and title, and skips the file's bookkeeping keys. Returns
/// whether the file predates unique dataset ids.
fn import_header(obj: &mut Obj, project: &mut Project, r: &mut ImportReport) -> bool {
    let version_path = obj.at("schemaVersion");
    if let Some(v) = obj.i64("schemaVersion", r) {
        if v > SERIAL_STUDIO_SCHEMA {
            r.push(
                version_path,
                format!(
                    "schema version {v} is newer than {SERIAL_STUDIO_SCHEMA}, the newest this \
                     importer knows; settings it does not know are listed below"
                ),
            );
        }
    }
    let title = text::simplified(&obj.string("title", r).unwrap_or_default());
    if !title.is_empty() {
        project.title = title;
    }
    // File bookkeeping, not settings. Unique ids exist only in files new enough to have
    // `nextUniqueId`; older files refer to datasets by parser index.
    let legacy_ids = !obj.has("nextUniqueId");
    obj.skip(&["writerVersion", "writerVersionAtCreation", "nextUniqueId"]);
    legacy_ids
}

/// Builds the project's sources: from the `sources` array when it has usable entries,
/// otherwise from the legacy single-source settings at the top level.
fn import_sources(
    obj: &mut Obj,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Vec<sources::ImportedSource> {
    let sources_path = obj.at("sources");
    let source_items = obj.array("sources", r).map(Vec::as_slice).unwrap_or(&[]);
    let separator = obj.string("separator", r);
    if source_items.is_empty() {
        let extras = RootExtras {
            separator,
            ..RootExtras::default()
        };
        let id = ids.next("src");
        return vec![sources::import_source(obj, Shape::Legacy, id, 0, extras, r)];
    }
    let mut imported = import_source_array(obj, source_items, &sources_path, separator, ids, r);
    if imported.is_empty() {
        // Every entry was unusable: fall back to the top-level settings.
        let id = ids.next("src");
        imported.push(sources::import_source(
            obj,
            Shape::Legacy,
            id,
            0,
            RootExtras::default(),
            r,
        ));
    } else {
        report_top_level_frame_copies(obj, source_items, r);
    }
    imported
}

/// Converts each usable entry of a schema 3 `sources` array; the first one converted also
/// receives the legacy top-level parser and separator.
fn import_source_array(
    obj: &mut Obj,
    source_items: &[Value],
    sources_path: &str,
    separator: Option<String>,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Vec<sources::ImportedSource> {
    let mut imported: Vec<sources::ImportedSource> = Vec::new();
    let legacy_parser = obj
        .string("frameParser", r)
        .filter(|c| !c.trim().is_empty());
    let parser_path = obj.at("frameParser");
    let mut separator = separator;
    let mut legacy_parser = legacy_parser.map(|c| (parser_path.as_str(), c));
    for (i, item) in source_items.iter().enumerate() {
        let spath = json::index(sources_path, i);
        let Some(map) = item.as_object().filter(|m| !m.is_empty()) else {
            r.push(
                spath,
                format!("expected a source object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut sobj = Obj::new(map, spath);
        let extras = if imported.is_empty() {
            RootExtras {
                legacy_parser: legacy_parser.take(),
                separator: separator.take(),
            }
        } else {
            RootExtras::default()
        };
        let id = ids.next("src");
        let src = sources::import_source(&mut sobj, Shape::Schema3, id, i, extras, r);
        if imported.iter().any(|s| s.ss_id == src.ss_id) {
            r.push(
                sobj.at("sourceId"),
                format!(
                    "sourceId {} is used by an earlier source; groups that name it read the \
                     earlier one",
                    src.ss_id
                ),
            );
        }
        sobj.finish(r);
        imported.push(src);
    }
    imported
}

/// Newer files may repeat the first source's frame settings at the top level for older
/// readers; only disagreeing copies are worth a line in the report.
fn report_top_level_frame_copies(obj: &mut Obj, source_items: &[Value], r: &mut ImportReport) {
    let first = source_items.first().and_then(Value::as_object);
    for key in LEGACY_SOURCE_KEYS {
        let Some(value) = obj.raw(key) else { continue };
        if key == "frameParser" {
            continue;
        }
        let same = first
            .and_then(|f| f.get(key))
            .is_some_and(|v| json::same(v, value));
        if !same && !is_blank(value) {
            r.push(
                obj.at(key),
                format!(
                    "top-level {} is ignored: the sources array defines each source's \
                     frame settings",
                    show(value)
                ),
            );
        }
    }
}

/// Converts the actions, tables and MQTT publisher sections.
fn import_actions_tables_publisher(
    obj: &mut Obj,
    project: &mut Project,
    source_ids: &[(i64, String)],
    ids: &mut Ids,
    r: &mut ImportReport,
) {
    let actions_path = obj.at("actions");
    if let Some(items) = obj.array("actions", r) {
        project.actions = actions::import_actions(items, &actions_path, source_ids, ids, r);
    }
    let tables_path = obj.at("tables");
    if let Some(items) = obj.array("tables", r) {
        project.tables = actions::import_tables(items, &tables_path, r);
    }
    let publisher_path = obj.at("mqttPublisher");
    if let Some(map) = obj.object("mqttPublisher", r) {
        let mut p = Obj::new(map, publisher_path);
        project.mqtt_publisher = actions::import_publisher(&mut p, r);
        p.finish(r);
    }
}

/// Reports every way the converted project fails Sextant's own validation.
fn report_validation(project: &Project, r: &mut ImportReport) {
    for issue in project.validate() {
        r.push(
            "",
            format!(
                "the imported project does not validate at {}: {}",
                issue.path, issue.message
            ),
        );
    }
}

/// Top-level settings Sextant has no place for.
fn report_root_leftovers(obj: &mut Obj, r: &mut ImportReport) {
    // The tabs are imported whether the person customised them or Serial Studio made them:
    // either way they are what the dashboard showed.
    obj.skip(&["customizeWorkspaces"]);
    obj.unmapped(
        "workspaceFolders",
        &[],
        "workspace folders are not imported; the workspaces are tabs side by side",
        r,
    );
    obj.unmapped_lost(
        "controlScriptCode",
        &[],
        "project control scripts (setup/loop) are not supported by Sextant",
        r,
    );
    if obj.raw("passwordHash").is_some_and(|v| !is_blank(v)) {
        r.push(
            obj.at("passwordHash"),
            "the project lock (password) is not imported; the imported project is unlocked",
        );
    }
    for key in ["mapTilerApiKey", "thunderforestApiKey"] {
        if obj.raw(key).is_some_and(|v| !is_blank(v)) {
            // An API key is a secret: say that it exists, never what it is.
            r.push(
                obj.at(key),
                "map tile API key not imported; Sextant's map works offline",
            );
        }
    }
    let layout = "dashboard layout and editor state are not imported; Sextant lays out its own";
    for key in [
        "widgetSettings",
        "widgetDisplay",
        "dashboardLayout",
        "activeGroupId",
        "hiddenGroups",
        "treeExpansion",
        "diagramCollapse",
        "groupFolders",
        "tableFolders",
    ] {
        obj.unmapped(key, &[], layout, r);
    }
    obj.unmapped(
        "pointCount",
        &[],
        "the plot history length is a dashboard setting in Sextant",
        r,
    );
    obj.unmapped(
        "plotTimeRange",
        &[],
        "the plot time range is a dashboard setting in Sextant",
        r,
    );
    obj.unmapped("frozen", &[], "Sextant has no frozen dashboards", r);
    obj.unmapped(
        "changeDrivenTransforms",
        &[],
        "Sextant runs transforms on every frame",
        r,
    );
    obj.unmapped("luaFastMode", &[], "Sextant has one Lua engine mode", r);
    obj.unmapped(
        "apiCallAllowFullSurface",
        &[],
        "scripts cannot call Sextant's API",
        r,
    );
    obj.unmapped_lost(
        "influxSink",
        &[],
        "InfluxDB export is not supported by Sextant",
        r,
    );
}

//! Groups and datasets: widgets, role tags, ranges, alarms, transforms, virtual datasets
//! and X axes.
//!
//! Serial Studio gives a dataset one widget string that is either a widget (`gauge`) or a
//! role inside its group's widget (`lat` in a GPS group, `x` in an accelerometer), three
//! ranges (plot, widget, FFT) where Sextant has one, and alarms either as bands or as the
//! older `alarmEnabled/alarmLow/alarmHigh` thresholds. Datasets refer to each other (X axis)
//! by Serial Studio's numeric unique id, or by parser index in files that predate unique ids;
//! those references are resolved after every dataset has its Sextant id.

use std::collections::HashMap;

use serde_json::{json, Value};
use sextant_telemetry::project::{
    AlarmBand, Control, ControlKind, Dataset, DatasetWidget, Group, GroupWidget, ImageDetection,
    ImageStream, Role, Severity, Transform, TransformLanguage, Waterfall, XAxis,
};

use crate::json::{index, show, Obj};
use crate::report::ImportReport;
use crate::text::simplified;
use crate::Ids;

/// What the group import needs to know about the sources.
pub(crate) struct SourceLookup {
    /// Serial Studio `sourceId` → (Sextant id, default transform language), in file order.
    pub sources: Vec<(i64, String, TransformLanguage)>,
}

impl SourceLookup {
    fn find(&self, ss_id: i64) -> Option<&(i64, String, TransformLanguage)> {
        self.sources.iter().find(|(id, _, _)| *id == ss_id)
    }

    fn first(&self) -> Option<&(i64, String, TransformLanguage)> {
        self.sources.first()
    }

    fn multi(&self) -> bool {
        self.sources.len() > 1
    }
}

/// A dataset whose reference to another dataset is resolved once all ids exist.
struct Pending {
    group: usize,
    dataset: usize,
    path: String,
    x_axis: i64,
    ss_source: i64,
}

/// A non-virtual dataset without a usable parser slot.
struct Unfed {
    group: usize,
    dataset: usize,
    source: String,
}

/// Where an imported group came from, for the workspaces that refer to it.
#[derive(Debug, Clone)]
pub(crate) struct GroupOrigin {
    /// Index in the file's `groups` array.
    pub json_index: usize,
    /// The group's `uniqueId`, when the file has one.
    pub unique_id: Option<i64>,
    /// (index in the group's `datasets` array, Sextant id) of every imported dataset.
    pub datasets: Vec<(usize, String)>,
}

#[derive(Default)]
pub(crate) struct GroupImport {
    pub groups: Vec<Group>,
    /// Parallel to `groups`.
    pub origins: Vec<GroupOrigin>,
    /// Serial Studio unique id → Sextant dataset id.
    by_uid: HashMap<i64, String>,
    /// (Serial Studio source id, parser index) → Sextant dataset id, for legacy X axes.
    by_index: HashMap<(i64, i64), String>,
    pending: Vec<Pending>,
    unfed: Vec<Unfed>,
}

pub(crate) fn import_groups(
    items: &[Value],
    path: &str,
    sources: &SourceLookup,
    legacy_ids: bool,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> (Vec<Group>, Vec<GroupOrigin>) {
    let mut out = GroupImport::default();
    for (g, item) in items.iter().enumerate() {
        let gpath = index(path, g);
        let Some(map) = item.as_object() else {
            r.push(
                gpath,
                format!("expected a group object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut obj = Obj::new(map, gpath.clone());
        import_group(&mut obj, g, sources, ids, &mut out, r);
        obj.finish(r);
    }
    resolve(&mut out, sources, legacy_ids, r);
    (out.groups, out.origins)
}

/// Group widget strings of Serial Studio that leave datasets meaningful without data
/// (they draw something else), so an empty group is still worth keeping.
fn needs_no_datasets(widget: &str) -> bool {
    matches!(widget, "image" | "painter" | "webview")
}

fn import_group(
    obj: &mut Obj,
    g: usize,
    sources: &SourceLookup,
    ids: &mut Ids,
    out: &mut GroupImport,
    r: &mut ImportReport,
) {
    let gpath = obj.path().to_string();
    let title = simplified(&obj.string("title", r).unwrap_or_default());
    let widget_path = obj.at("widget");
    let widget_text = simplified(&obj.string("widget", r).unwrap_or_default()).to_ascii_lowercase();
    let group_type = obj.i64("groupType", r).unwrap_or(0);
    let unique_id = obj.i64("uniqueId", r);
    obj.skip(&["groupId"]);

    if skipped_before_source(&gpath, &title, r) {
        mark_all(obj);
        return;
    }

    let Some((ss_source, source_id, transform_language)) = group_source(obj, sources, r) else {
        mark_all(obj);
        return;
    };

    if group_type == 1 {
        let group = output_group(obj, title, sources, ids, r);
        out.groups.push(group);
        out.origins.push(GroupOrigin {
            json_index: g,
            unique_id,
            datasets: Vec::new(),
        });
        return;
    }

    let widget = group_widget(obj, &widget_text, &widget_path, r);
    let image =
        (widget == GroupWidget::Image).then(|| image_stream(obj, &source_id, sources.multi(), r));
    let painter_code = if widget == GroupWidget::Painter {
        painter_code(obj, r)
    } else {
        String::new()
    };

    let dpath = obj.at("datasets");
    let datasets = obj.array("datasets", r).map(Vec::as_slice).unwrap_or(&[]);
    if datasets.is_empty() && !needs_no_datasets(&widget_text) {
        r.push(
            gpath,
            "Serial Studio ignores a group without datasets; skipped",
        );
        mark_all(obj);
        return;
    }

    group_settings_not_imported(obj, r);

    let slot = GroupSlot {
        json_index: g,
        index: out.groups.len(),
        ss_source,
        source_id: &source_id,
    };
    let mut origin = GroupOrigin {
        json_index: g,
        unique_id,
        datasets: Vec::new(),
    };
    let mut group = Group {
        id: ids.next("grp"),
        title,
        widget,
        datasets: Vec::new(),
        controls: Vec::new(),
        image,
        painter_code,
        extra: Default::default(),
    };
    let ctx = DatasetCtx {
        group_widget: widget,
        source_id: &source_id,
        multi_source: sources.multi(),
        transform_language,
    };

    for (d, item) in datasets.iter().enumerate() {
        let path = index(&dpath, d);
        let Some(map) = item.as_object().filter(|m| !m.is_empty()) else {
            r.push(
                path,
                format!("expected a dataset object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut dobj = Obj::new(map, path.clone());
        let imported = import_dataset(&mut dobj, &ctx, ids, r);
        dobj.finish(r);

        register_dataset(out, &slot, d, group.datasets.len(), &path, &imported);
        origin.datasets.push((d, imported.dataset.id.clone()));
        group.datasets.push(imported.dataset);
    }
    out.groups.push(group);
    out.origins.push(origin);
}

/// What a painter script may call in Serial Studio that Sextant's painters do not offer,
/// and why: a painter draws, it never acts.
const PAINTER_UNMAPPED: &[(&str, &str)] = &[
    (
        "deviceWrite",
        "a painter cannot write to the device in Sextant; use an output control",
    ),
    (
        "actionFire",
        "a painter cannot fire actions in Sextant; use the action's button",
    ),
    (
        "drawImageScaled",
        "a painter cannot draw image files in Sextant",
    ),
    (
        "clearPlots",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setPlotPoints",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setTerminalVisible",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setActiveWorkspace",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setNotificationLogVisible",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setClockVisible",
        "a painter cannot change the dashboard in Sextant",
    ),
    (
        "setStopwatchVisible",
        "a painter cannot change the dashboard in Sextant",
    ),
];

/// A painter group's code, kept as written; each Serial Studio call it makes that Sextant's
/// painters do not offer is reported (the call fails at run time and the tile says so).
fn painter_code(obj: &mut Obj, r: &mut ImportReport) -> String {
    let path = obj.at("painterCode");
    let code = obj.string("painterCode", r).unwrap_or_default();
    for (name, why) in PAINTER_UNMAPPED {
        if code.contains(&format!("{name}(")) {
            r.lost(path.clone(), format!("painter calls {name}(): {why}"));
        }
    }
    if code.contains("drawImage(\"") || code.contains("drawImage('") {
        r.lost(
            path.clone(),
            "painter draws an image file: a painter cannot read files in Sextant",
        );
    }
    code
}

/// An image group's stream settings: Serial Studio's `autodetect` (magic bytes) or `manual`
/// (start and end sequences in hex).
fn image_stream(
    obj: &mut Obj,
    source_id: &str,
    multi_source: bool,
    r: &mut ImportReport,
) -> ImageStream {
    let mode_path = obj.at("imgDetectionMode");
    let mode = obj
        .raw("imgDetectionMode")
        .map(|v| match v {
            Value::String(s) => s.trim().to_ascii_lowercase(),
            Value::Number(n) if n.as_i64() == Some(1) => "manual".into(),
            _ => "autodetect".into(),
        })
        .unwrap_or_else(|| "autodetect".into());
    let start = obj.string("imgStartSequence", r).unwrap_or_default();
    let end = obj.string("imgEndSequence", r).unwrap_or_default();
    let hex_ok =
        |h: &str| sextant_telemetry::framing::parse_hex_bytes(h).is_ok_and(|b| !b.is_empty());
    let detection = match mode.as_str() {
        "manual" if hex_ok(&start) && hex_ok(&end) => ImageDetection::Markers,
        "manual" => {
            r.push(
                mode_path,
                "manual image delimiters that are not hex bytes; the image view finds \
                 pictures by their magic bytes instead",
            );
            ImageDetection::Auto
        }
        "autodetect" | "" => ImageDetection::Auto,
        other => {
            r.push(
                mode_path,
                format!("image detection mode {other:?} is unknown; pictures are found by their magic bytes"),
            );
            ImageDetection::Auto
        }
    };
    let markers = detection == ImageDetection::Markers;
    ImageStream {
        source: multi_source.then(|| source_id.to_string()),
        detection,
        start: if markers { start } else { String::new() },
        end: if markers { end } else { String::new() },
        extra: Default::default(),
    }
}

/// An output group (Serial Studio's `groupType` 1): its `outputWidgets` as controls.
fn output_group(
    obj: &mut Obj,
    title: String,
    sources: &SourceLookup,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Group {
    let _ = obj.raw("widget");
    obj.skip(&["datasets"]);
    obj.unmapped(
        "outputColumns",
        &[json!(2)],
        "Sextant lays controls out by the tile's width",
        r,
    );
    for key in ["hideOnDashboard", "disabled"] {
        obj.unmapped(key, &[json!(false)], "Sextant shows every group", r);
    }
    let wpath = obj.at("outputWidgets");
    let widgets = obj
        .array("outputWidgets", r)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut controls = Vec::new();
    for (k, item) in widgets.iter().enumerate() {
        let path = index(&wpath, k);
        let Some(map) = item.as_object().filter(|m| !m.is_empty()) else {
            r.push(
                path,
                format!(
                    "expected an output widget object, found {}; skipped",
                    show(item)
                ),
            );
            continue;
        };
        let mut wobj = Obj::new(map, path);
        if let Some(control) = output_control(&mut wobj, sources, ids, r) {
            controls.push(control);
        }
        wobj.finish(r);
    }
    if controls.is_empty() {
        r.push(
            obj.path().to_string(),
            "output group without a control Sextant can show; kept empty",
        );
    }
    Group {
        id: ids.next("grp"),
        title,
        widget: GroupWidget::Output,
        datasets: Vec::new(),
        controls,
        image: None,
        painter_code: String::new(),
        extra: Default::default(),
    }
}

/// One of Serial Studio's output widgets as a control; `None` (reported) for a kind Sextant
/// has no control for.
fn output_control(
    obj: &mut Obj,
    sources: &SourceLookup,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Option<Control> {
    obj.skip(&["widgetId", "groupId"]);
    let title = simplified(&obj.string("title", r).unwrap_or_default());
    let kind_path = obj.at("outputType");
    let kind = match obj.i64("outputType", r).unwrap_or(0) {
        0 => ControlKind::Button,
        1 => ControlKind::Slider,
        2 => ControlKind::Toggle,
        3 => ControlKind::TextField,
        4 => ControlKind::Knob,
        5 => {
            r.lost(
                kind_path,
                "ramp generator: Sextant has no control that sends by itself; skipped",
            );
            mark_all(obj);
            return None;
        }
        other => {
            r.lost(
                kind_path,
                format!("output widget type {other} is unknown; skipped"),
            );
            mark_all(obj);
            return None;
        }
    };
    let source_path = obj.at("sourceId");
    let ss_source = obj.i64("sourceId", r).unwrap_or(0);
    let source = match sources.find(ss_source) {
        Some((_, id, _)) if sources.multi() => Some(id.clone()),
        Some(_) => None,
        None => {
            r.push(
                source_path,
                format!(
                    "no source has sourceId {ss_source}; the control sends to the first source"
                ),
            );
            None
        }
    };
    let defaults = Control::default();
    let min = obj.f64("outputMin", r).unwrap_or(defaults.min);
    let max = obj.f64("outputMax", r).unwrap_or(defaults.max);
    let step = obj.f64("outputStep", r).unwrap_or(defaults.step);
    let initial = obj.f64("initialValue", r).unwrap_or(defaults.initial);
    let label = |obj: &mut Obj, key: &str, r: &mut ImportReport| {
        obj.string(key, r)
            .map(|s| simplified(&s))
            .filter(|s| !s.is_empty())
    };
    let on_label = label(obj, "onLabel", r);
    let off_label = label(obj, "offLabel", r);
    let transmit = obj.string("transmitFunction", r).unwrap_or_default();
    obj.unmapped("icon", &[], "Sextant's controls show their title", r);
    obj.unmapped(
        "monoIcon",
        &[json!(false)],
        "Sextant's controls show their title",
        r,
    );
    obj.unmapped_lost(
        "outputTxEncoding",
        &[json!(0)],
        "the transmit encoding is not imported: the script's string is sent as bytes (one per \
         character up to U+00FF, else UTF-8)",
        r,
    );
    if transmit.trim().is_empty() {
        r.push(
            obj.path().to_string(),
            "output widget without a transmit script; kept, it sends nothing until one is written",
        );
    }
    // A range Serial Studio would accept but Sextant refuses is widened, not dropped.
    let min = if min.is_finite() { min } else { defaults.min };
    let max = if max.is_finite() && max > min {
        max
    } else {
        min + (defaults.max - defaults.min)
    };
    Some(Control {
        id: ids.next("ctl"),
        title: if title.is_empty() {
            "Control".into()
        } else {
            title
        },
        kind,
        source,
        min,
        max,
        step: if step.is_finite() && step > 0.0 {
            step
        } else {
            defaults.step
        },
        initial: if initial.is_finite() {
            initial.clamp(min, max)
        } else {
            min
        },
        on_label,
        off_label,
        transmit: if transmit.trim().is_empty() {
            "function transmit(value) {\n  return null;\n}\n".into()
        } else {
            transmit
        },
        extra: Default::default(),
    })
}

/// Whether the group is skipped for what it lacks (a title), before its source is looked
/// up; reports why.
fn skipped_before_source(gpath: &str, title: &str, r: &mut ImportReport) -> bool {
    if title.is_empty() {
        r.push(
            gpath,
            "Serial Studio ignores a group without a title; skipped",
        );
        return true;
    }
    false
}

/// The source a group reads: the one its `sourceId` names, else the first source (reported).
/// `None` only when the project has no source at all.
fn group_source(
    obj: &mut Obj,
    sources: &SourceLookup,
    r: &mut ImportReport,
) -> Option<(i64, String, TransformLanguage)> {
    let source_path = obj.at("sourceId");
    let ss_source = obj.i64("sourceId", r).unwrap_or(0);
    match sources.find(ss_source) {
        Some((s, id, lang)) => Some((*s, id.clone(), *lang)),
        None => {
            let (s, id, lang) = sources.first()?;
            r.push(
                source_path,
                format!("no source has sourceId {ss_source}; the group reads the first source"),
            );
            Some((*s, id.clone(), *lang))
        }
    }
}

/// Group settings Sextant has no place for, noted unless blank or Serial Studio's default.
fn group_settings_not_imported(obj: &mut Obj, r: &mut ImportReport) {
    obj.unmapped("hideOnDashboard", &[], "Sextant shows every group", r);
    obj.unmapped(
        "disabled",
        &[],
        "Sextant has no disabled groups; imported enabled",
        r,
    );
    obj.unmapped(
        "outputColumns",
        &[json!(2)],
        "only used by output groups",
        r,
    );
    obj.unmapped_lost(
        "outputWidgets",
        &[],
        "output widgets are not supported by Sextant",
        r,
    );
}

/// Where an imported group sits, for the dataset references resolved after all groups.
struct GroupSlot<'a> {
    /// Index in the file's `groups` array.
    json_index: usize,
    /// Index in the imported groups.
    index: usize,
    /// The Serial Studio `sourceId` the group reads.
    ss_source: i64,
    /// The Sextant id of that source.
    source_id: &'a str,
}

/// Records an imported dataset's ids, and its X axis and parser slot when they can only
/// be settled once every dataset is imported.
fn register_dataset(
    out: &mut GroupImport,
    slot: &GroupSlot,
    d: usize,
    dataset_index: usize,
    path: &str,
    imported: &ImportedDataset,
) {
    let ss_source = slot.ss_source;
    // Serial Studio's derived unique id when the file has none.
    let uid = imported.unique_id.unwrap_or_else(|| {
        ss_source
            .saturating_mul(1_000_000)
            .saturating_add((slot.json_index as i64).saturating_mul(10_000))
            .saturating_add(d as i64)
    });
    out.by_uid
        .entry(uid)
        .or_insert_with(|| imported.dataset.id.clone());
    if !imported.dataset.is_virtual && !imported.unfed {
        out.by_index
            .entry((ss_source, imported.dataset.index as i64))
            .or_insert_with(|| imported.dataset.id.clone());
    }
    if let Some(x) = imported.x_axis {
        out.pending.push(Pending {
            group: slot.index,
            dataset: dataset_index,
            path: crate::json::join(path, "xAxis"),
            x_axis: x,
            ss_source,
        });
    }
    if imported.unfed {
        out.unfed.push(Unfed {
            group: slot.index,
            dataset: dataset_index,
            source: slot.source_id.to_string(),
        });
    }
}

/// Marks every key of a skipped object as handled, so the skip is reported once.
fn mark_all(obj: &mut Obj) {
    for key in obj.keys() {
        let _ = obj.raw(&key);
    }
}

fn group_widget(obj: &mut Obj, widget: &str, path: &str, r: &mut ImportReport) -> GroupWidget {
    match widget {
        "" => GroupWidget::None,
        "datagrid" => GroupWidget::DataGrid,
        "multiplot" => GroupWidget::MultiPlot,
        "accelerometer" => GroupWidget::Accelerometer,
        "gyro" | "gyroscope" => GroupWidget::Gyroscope,
        "map" | "gps" => GroupWidget::Gps,
        "plot3d" => GroupWidget::Plot3d,
        "barpanel" => {
            obj.unmapped(
                "barPanelStyle",
                &[json!(0)],
                "Sextant's bar panel has one style",
                r,
            );
            GroupWidget::BarPanel
        }
        "ledpanel" | "led-panel" => GroupWidget::LedPanel,
        "terminal" => GroupWidget::Terminal,
        "painter" => GroupWidget::Painter,
        "image" => GroupWidget::Image,
        "webview" => {
            let url = obj.string("webViewUrl", r).unwrap_or_default();
            r.lost(
                path.to_string(),
                if url.trim().is_empty() {
                    "web view widget: not supported by Sextant; the group is kept without it"
                        .to_string()
                } else {
                    format!(
                        "web view widget showing {}: not supported by Sextant; the group is kept \
                         without it",
                        show(&Value::String(url))
                    )
                },
            );
            GroupWidget::WebView
        }
        other => {
            r.lost(
                path.to_string(),
                format!(
                    "group widget {:?} has no Sextant equivalent; the group has no widget",
                    other
                ),
            );
            GroupWidget::None
        }
    }
}

struct DatasetCtx<'a> {
    group_widget: GroupWidget,
    source_id: &'a str,
    multi_source: bool,
    transform_language: TransformLanguage,
}

struct ImportedDataset {
    dataset: Dataset,
    unique_id: Option<i64>,
    x_axis: Option<i64>,
    /// Non-virtual without a valid parser slot; gets an unused slot later.
    unfed: bool,
}

/// A dataset widget string: a widget of its own, or a role inside the group's widget.
fn dataset_widget(text: &str, group: GroupWidget) -> Option<(DatasetWidget, Option<Role>)> {
    let gyro = group == GroupWidget::Gyroscope;
    Some(match text {
        "" => (DatasetWidget::None, None),
        "bar" => (DatasetWidget::Bar, None),
        "gauge" => (DatasetWidget::Gauge, None),
        "compass" => (DatasetWidget::Compass, None),
        "meter" => (DatasetWidget::Meter, None),
        "clock" => (DatasetWidget::Clock, None),
        "lat" => (DatasetWidget::None, Some(Role::Lat)),
        "lon" | "lng" => (DatasetWidget::None, Some(Role::Lon)),
        "alt" => (DatasetWidget::None, Some(Role::Alt)),
        // Serial Studio's gyroscope reads x as pitch, y as roll and z as yaw.
        "x" if gyro => (DatasetWidget::None, Some(Role::Pitch)),
        "y" if gyro => (DatasetWidget::None, Some(Role::Roll)),
        "z" if gyro => (DatasetWidget::None, Some(Role::Yaw)),
        "x" => (DatasetWidget::None, Some(Role::X)),
        "y" => (DatasetWidget::None, Some(Role::Y)),
        "z" => (DatasetWidget::None, Some(Role::Z)),
        "yaw" => (DatasetWidget::None, Some(Role::Yaw)),
        "pitch" => (DatasetWidget::None, Some(Role::Pitch)),
        "roll" => (DatasetWidget::None, Some(Role::Roll)),
        _ => return None,
    })
}

/// A `[min, max]` pair that says something (Serial Studio writes `0, 0` for "automatic").
fn range(lo: Option<f64>, hi: Option<f64>) -> Option<(f64, f64)> {
    match (lo, hi) {
        (Some(a), Some(b)) if a != 0.0 || b != 0.0 => Some((a.min(b), a.max(b))),
        _ => None,
    }
}

/// One dataset of a group, its keys read section by section in the order below (the
/// report lists problems in that order).
fn import_dataset(
    obj: &mut Obj,
    ctx: &DatasetCtx,
    ids: &mut Ids,
    r: &mut ImportReport,
) -> ImportedDataset {
    let mut d = new_dataset(obj, ctx, ids, r);
    let unique_id = obj.i64("uniqueId", r).filter(|u| *u >= 0);
    obj.skip(&[
        "value",
        "numericValue",
        "datasetId",
        "groupId",
        "datasetSourceId",
    ]);
    widget_and_role(obj, ctx.group_widget, &mut d, r);
    fft_and_led(obj, &mut d, r);
    let alarm_range = ranges(obj, &mut d, r);
    d.alarms = alarms(obj, alarm_range, r);
    transform_and_virtual(obj, ctx.transform_language, &mut d, r);
    let unfed = !parser_slot(obj, &mut d, r);
    let x_axis = x_axis_reference(obj, r);
    display_only_settings(obj, r);
    ImportedDataset {
        dataset: d,
        unique_id,
        x_axis,
        unfed,
    }
}

/// A new dataset with its id, title, units and source, and its flags (plot, FFT, LED, log).
fn new_dataset(obj: &mut Obj, ctx: &DatasetCtx, ids: &mut Ids, r: &mut ImportReport) -> Dataset {
    Dataset {
        id: ids.next("ds"),
        title: simplified(&obj.string("title", r).unwrap_or_default()),
        units: simplified(&obj.string("units", r).unwrap_or_default()),
        source: ctx.multi_source.then(|| ctx.source_id.to_string()),
        // Serial Studio plots nothing unless asked.
        graph: obj.bool("graph", r).unwrap_or(false),
        fft: obj.bool("fft", r).unwrap_or(false),
        led: obj.bool("led", r).unwrap_or(false),
        log: obj.bool("log", r).unwrap_or(false),
        waterfall: obj
            .bool("waterfall", r)
            .unwrap_or(false)
            .then(Waterfall::default),
        ..Dataset::default()
    }
}

/// The widget string: a widget of the dataset's own, or its role in the group's widget.
fn widget_and_role(obj: &mut Obj, group: GroupWidget, d: &mut Dataset, r: &mut ImportReport) {
    let widget_path = obj.at("widget");
    let widget_text = simplified(&obj.string("widget", r).unwrap_or_default()).to_ascii_lowercase();
    match dataset_widget(&widget_text, group) {
        Some((widget, role)) => {
            d.widget = widget;
            d.role = role;
        }
        None => r.push(
            widget_path,
            format!("dataset widget {widget_text:?} has no Sextant equivalent; no widget"),
        ),
    }
}

/// The FFT window (256 when missing or invalid), the sampling rate Sextant does not need,
/// and the LED threshold.
fn fft_and_led(obj: &mut Obj, d: &mut Dataset, r: &mut ImportReport) {
    let fft_path = obj.at("fftSamples");
    match obj.i64("fftSamples", r) {
        Some(n) if n >= 1 => d.fft_samples = u32::try_from(n).unwrap_or(u32::MAX),
        Some(n) => {
            if d.fft {
                r.push(fft_path, format!("FFT window {n} is not valid; using 256"));
            }
            d.fft_samples = 256;
        }
        // Serial Studio's default window.
        None => d.fft_samples = 256,
    }
    if d.fft {
        obj.unmapped(
            "fftSamplingRate",
            &[],
            "Sextant derives the FFT frequency axis from the receive timestamps",
            r,
        );
    } else {
        obj.skip(&["fftSamplingRate"]);
    }
    d.led_threshold = obj.f64("ledHigh", r);
}

/// The dataset's one range, from Serial Studio's legacy, widget, plot and FFT ranges (the
/// first that says something), reporting the others where they differ. Returns the range
/// the older alarm thresholds are relative to.
fn ranges(obj: &mut Obj, d: &mut Dataset, r: &mut ImportReport) -> Option<(f64, f64)> {
    let legacy = range(obj.f64("min", r), obj.f64("max", r));
    let widget_range = range(obj.f64("widgetMin", r), obj.f64("widgetMax", r));
    let plot_range = range(obj.f64("plotMin", r), obj.f64("plotMax", r));
    let fft_range = range(obj.f64("fftMin", r), obj.f64("fftMax", r));
    let chosen = legacy.or(widget_range).or(plot_range).or(fft_range);
    if let Some((lo, hi)) = chosen {
        d.min = Some(lo);
        d.max = Some(hi);
        for (name, other) in [
            ("widgetMin", widget_range),
            ("plotMin", plot_range),
            ("fftMin", fft_range),
        ] {
            if let Some(o) = other.filter(|o| *o != (lo, hi)) {
                r.push(
                    obj.at(name),
                    format!(
                        "range {}…{} differs from the range used ({}…{}); Sextant has one \
                         range per dataset",
                        o.0, o.1, lo, hi
                    ),
                );
            }
        }
    }
    widget_range.or(legacy).or(chosen)
}

/// The transform (in the source's language unless the dataset names one), and whether the
/// dataset is virtual: said so, or implied by a transform that never reads `value`.
fn transform_and_virtual(
    obj: &mut Obj,
    default_language: TransformLanguage,
    d: &mut Dataset,
    r: &mut ImportReport,
) {
    let code_path = obj.at("transformCode");
    let code = obj.string("transformCode", r).unwrap_or_default();
    let lang_path = obj.at("transformLanguage");
    let lang = obj.i64("transformLanguage", r);
    if !code.trim().is_empty() {
        let language = match lang {
            None | Some(-1) => Some(default_language),
            Some(0) => Some(TransformLanguage::JavaScript),
            Some(1) => Some(TransformLanguage::Lua),
            Some(other) => {
                r.lost(
                    lang_path,
                    format!(
                        "transform language {other} is not supported by Sextant; the transform \
                         is not imported"
                    ),
                );
                None
            }
        };
        if let Some(language) = language {
            d.transform = Some(Transform {
                language,
                code: code.clone(),
            });
        }
    }
    let explicit_virtual = obj.bool("virtual", r).unwrap_or(false);
    // Serial Studio treats a transform that never reads `value` as computed from elsewhere.
    let implied_virtual = d
        .transform
        .as_ref()
        .is_some_and(|t| !references_value(&t.code, t.language));
    d.is_virtual = explicit_virtual || implied_virtual;
    if d.is_virtual && d.transform.is_none() {
        r.push(
            code_path,
            "virtual dataset without a usable transform; imported as a regular dataset",
        );
        d.is_virtual = false;
    }
}

/// The parser slot (they start at 1; a virtual dataset without one reads slot 1), and
/// whether there is a usable one: Serial Studio never fills a regular dataset without.
fn parser_slot(obj: &mut Obj, d: &mut Dataset, r: &mut ImportReport) -> bool {
    let index_path = obj.at("index");
    let slot = obj.i64("index", r);
    match slot.and_then(|i| u32::try_from(i).ok()).filter(|i| *i >= 1) {
        Some(i) => d.index = i,
        None if d.is_virtual => d.index = 1,
        None => {
            r.push(
                index_path,
                format!(
                    "{} is not a parser slot (they start at 1), so Serial Studio never fills \
                     this dataset; it reads an unused slot",
                    slot.map_or("no index".to_string(), |i| format!("index {i}"))
                ),
            );
            return false;
        }
    }
    true
}

/// The dataset the X axis follows, by its Serial Studio id; -2 (time) and -1 (samples,
/// which Serial Studio shows as time too) leave the default time axis.
fn x_axis_reference(obj: &mut Obj, r: &mut ImportReport) -> Option<i64> {
    match obj.i64("xAxis", r) {
        Some(x) if x > 0 => Some(x),
        _ => None,
    }
}

/// Display-only settings Sextant does not have, noted unless blank or Serial Studio's
/// default.
fn display_only_settings(obj: &mut Obj, r: &mut ImportReport) {
    obj.unmapped("alias", &[], "Sextant looks datasets up by id only", r);
    obj.unmapped("color", &[], "Sextant picks dataset colours itself", r);
    // The waterfall itself is read with the FFT settings (`import_dataset`).
    obj.unmapped(
        "waterfallYAxis",
        &[],
        "Sextant's waterfall runs down in time, one spectrum per drawn frame",
        r,
    );
    obj.unmapped(
        "overviewDisplay",
        &[],
        "Sextant builds its overview itself",
        r,
    );
    obj.unmapped("hideOnDashboard", &[], "Sextant shows every dataset", r);
    obj.unmapped(
        "disabled",
        &[],
        "Sextant has no disabled datasets; imported enabled",
        r,
    );
    obj.unmapped(
        "displayFormat",
        &[json!("0d")],
        "Sextant formats widget labels itself",
        r,
    );
    obj.unmapped(
        "displayTickCount",
        &[json!(5)],
        "Sextant picks widget tick counts itself",
        r,
    );
    obj.unmapped("decimalPoints", &[], "Sextant formats values itself", r);
    // Serial Studio writes its default window (5) into every dataset.
    obj.unmapped(
        "fftWindow",
        &[json!(5)],
        "plot display option not supported by Sextant",
        r,
    );
    for key in [
        "fftMarkers",
        "fftLogX",
        "fftBallistics",
        "fftBallisticsRelease",
        "plotLogX",
        "plotLogY",
        "extremeHold",
    ] {
        obj.unmapped(key, &[], "plot display option not supported by Sextant", r);
    }
}

/// Alarm bands from `alarmBands`, or from the older `alarmEnabled/alarmLow/alarmHigh` (and
/// the even older single `alarm` threshold) relative to the dataset's range.
fn alarms(obj: &mut Obj, range: Option<(f64, f64)>, r: &mut ImportReport) -> Vec<AlarmBand> {
    let bands_path = obj.at("alarmBands");
    if let Some(items) = obj.array("alarmBands", r) {
        let bands = alarm_bands(items, &bands_path, r);
        obj.skip(&["alarmEnabled", "alarmLow", "alarmHigh", "alarm"]);
        return bands;
    }
    threshold_alarms(obj, range, r)
}

/// The entries of an `alarmBands` array, skipping (and reporting) unusable ones.
fn alarm_bands(items: &[Value], bands_path: &str, r: &mut ImportReport) -> Vec<AlarmBand> {
    let mut bands = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = index(bands_path, i);
        let Some(map) = item.as_object() else {
            r.push(
                path,
                format!("expected an alarm band, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut b = Obj::new(map, path.clone());
        let lo = b.f64("min", r).unwrap_or(0.0);
        let hi = b.f64("max", r).unwrap_or(0.0);
        let sev_path = b.at("severity");
        let severity = match b.i64("severity", r).unwrap_or(2) {
            i64::MIN..=0 => Severity::Info,
            1 => {
                r.push(
                    sev_path,
                    "severity \"ok\" (a healthy range) has no Sextant equivalent; imported \
                     as info",
                );
                Severity::Info
            }
            2 => Severity::Warning,
            _ => Severity::Critical,
        };
        let label = simplified(&b.string("label", r).unwrap_or_default());
        b.unmapped("blink", &[], "Sextant alarms do not blink", r);
        b.unmapped("color", &[], "Sextant colours alarms by severity", r);
        b.finish(r);
        if lo == hi {
            r.push(
                path,
                "empty alarm band (min equals max); Serial Studio ignores it too",
            );
            continue;
        }
        bands.push(AlarmBand {
            min: lo.min(hi),
            max: lo.max(hi),
            severity,
            label,
        });
    }
    bands
}

/// Bands from the older thresholds (`alarmEnabled/alarmLow/alarmHigh`, or the single
/// `alarm` of files older still), relative to the dataset's range.
fn threshold_alarms(
    obj: &mut Obj,
    range: Option<(f64, f64)>,
    r: &mut ImportReport,
) -> Vec<AlarmBand> {
    let mut bands = Vec::new();
    let enabled_path = obj.at("alarmEnabled");
    let enabled = obj.bool("alarmEnabled", r);
    let low = obj.f64("alarmLow", r);
    let high = obj.f64("alarmHigh", r);
    let alarm_path = obj.at("alarm");
    let single = obj.f64("alarm", r);
    // Without a range, a threshold still means "below" or "above"; the band runs to the
    // largest finite number, which saves and loads exactly.
    let (rmin, rmax) = range.unwrap_or((-f64::MAX, f64::MAX));
    match enabled {
        Some(true) => {
            let high = high.or(single);
            if let Some(lo) = low {
                if lo > rmin && lo < rmax {
                    bands.push(AlarmBand {
                        min: rmin,
                        max: lo,
                        severity: Severity::Warning,
                        label: "Low".into(),
                    });
                } else {
                    r.push(
                        obj.at("alarmLow"),
                        format!("low alarm {lo} is outside the range {rmin}…{rmax}; not imported"),
                    );
                }
            }
            if let Some(hi) = high {
                if hi > rmin && hi < rmax {
                    bands.push(AlarmBand {
                        min: hi,
                        max: rmax,
                        severity: Severity::Warning,
                        label: "High".into(),
                    });
                } else {
                    r.push(
                        obj.at("alarmHigh"),
                        format!("high alarm {hi} is outside the range {rmin}…{rmax}; not imported"),
                    );
                }
            }
        }
        Some(false) => {
            if low.is_some() || high.is_some() {
                r.push(
                    enabled_path,
                    "alarm thresholds are set but disabled; not imported",
                );
            }
        }
        None => {
            if let Some(hi) = single.filter(|a| *a != 0.0) {
                // Files older than alarm bands had one threshold that raised the alarm above it.
                r.push(
                    alarm_path,
                    format!("legacy alarm threshold {hi} imported as a warning band above it"),
                );
                bands.push(AlarmBand {
                    min: hi,
                    max: rmax.max(hi),
                    severity: Severity::Warning,
                    label: "High".into(),
                });
            } else if low.is_some() || high.is_some() {
                r.push(
                    enabled_path,
                    "alarm thresholds without alarmEnabled; Serial Studio ignores them, not imported",
                );
            }
        }
    }
    bands
}

/// Whether transform code reads `value` as a free identifier outside strings and comments,
/// as Serial Studio checks to decide that a dataset is computed (virtual).
fn references_value(code: &str, language: TransformLanguage) -> bool {
    let lua = language == TransformLanguage::Lua;
    let chars: Vec<char> = code.chars().collect();
    let n = chars.len();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < n {
        let c = at(i);
        let next = at(i + 1);
        // Comments.
        if lua && c == '-' && next == '-' {
            if at(i + 2) == '[' && at(i + 3) == '[' {
                i += 4;
                while i < n && !(at(i) == ']' && at(i + 1) == ']') {
                    i += 1;
                }
                i += 2;
            } else {
                while i < n && at(i) != '\n' {
                    i += 1;
                }
            }
            continue;
        }
        if !lua && c == '/' && next == '/' {
            while i < n && at(i) != '\n' {
                i += 1;
            }
            continue;
        }
        if !lua && c == '/' && next == '*' {
            i += 2;
            while i < n && !(at(i) == '*' && at(i + 1) == '/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        // Strings.
        if c == '"' || c == '\'' || (!lua && c == '`') {
            i += 1;
            while i < n && at(i) != c {
                if at(i) == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < n && (at(i).is_alphanumeric() || at(i) == '_') {
                i += 1;
            }
            let word: String = chars
                .get(start..i)
                .map(|s| s.iter().collect())
                .unwrap_or_default();
            let prev = if start > 0 { at(start - 1) } else { '\0' };
            if word == "value" && prev != '.' && prev != ':' {
                return true;
            }
            continue;
        }
        i += 1;
    }
    false
}

/// Second pass: X axes that name other datasets, and slots for datasets Serial Studio
/// would never fill.
fn resolve(out: &mut GroupImport, sources: &SourceLookup, legacy_ids: bool, r: &mut ImportReport) {
    for p in std::mem::take(&mut out.pending) {
        let target = if legacy_ids {
            out.by_index.get(&(p.ss_source, p.x_axis))
        } else {
            out.by_uid.get(&p.x_axis)
        };
        let Some(target) = target.cloned() else {
            r.push(
                p.path,
                format!(
                    "no dataset has {} {}; the X axis is time",
                    if legacy_ids { "index" } else { "unique id" },
                    p.x_axis
                ),
            );
            continue;
        };
        if let Some(d) = out
            .groups
            .get_mut(p.group)
            .and_then(|g| g.datasets.get_mut(p.dataset))
        {
            if d.id != target {
                d.x_axis = XAxis::Dataset { id: target };
            }
        }
    }

    let mut highest: HashMap<String, u32> = HashMap::new();
    let first = sources.first().map(|s| s.1.clone()).unwrap_or_default();
    for d in out.groups.iter().flat_map(|g| g.datasets.iter()) {
        let src = d.source.clone().unwrap_or_else(|| first.clone());
        let e = highest.entry(src).or_insert(0);
        *e = (*e).max(d.index);
    }
    for u in std::mem::take(&mut out.unfed) {
        let e = highest.entry(u.source).or_insert(0);
        *e = e.saturating_add(1);
        let slot = *e;
        if let Some(d) = out
            .groups
            .get_mut(u.group)
            .and_then(|g| g.datasets.get_mut(u.dataset))
        {
            d.index = slot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_references_are_found_like_serial_studio() {
        let js = TransformLanguage::JavaScript;
        let lua = TransformLanguage::Lua;
        assert!(references_value(
            "function transform(value) { return value * 2; }",
            js
        ));
        assert!(!references_value(
            "function transform(v) { return tableGet('a', 'b'); }",
            js
        ));
        assert!(!references_value(
            "function transform(v) { return x.value; } // value",
            js
        ));
        assert!(!references_value(
            "function transform(v) return \"value\" end -- value",
            lua
        ));
        assert!(references_value(
            "function transform(value) return value end",
            lua
        ));
    }

    #[test]
    fn widgets_and_roles() {
        assert_eq!(
            dataset_widget("x", GroupWidget::Gyroscope),
            Some((DatasetWidget::None, Some(Role::Pitch)))
        );
        assert_eq!(
            dataset_widget("x", GroupWidget::Accelerometer),
            Some((DatasetWidget::None, Some(Role::X)))
        );
        assert_eq!(
            dataset_widget("gauge", GroupWidget::None),
            Some((DatasetWidget::Gauge, None))
        );
        assert_eq!(dataset_widget("sparkline", GroupWidget::None), None);
    }
}

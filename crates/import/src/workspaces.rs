//! Workspaces: Serial Studio's dashboard tabs (`workspaces[].widgetRefs`) as Sextant
//! workspaces with tiles laid out on the 12-column grid.
//!
//! A widget reference names a group (`groupId`, the group's `uniqueId`), a dashboard widget
//! type and `relativeIndex`, the widget's position among all widgets of that type on the
//! whole dashboard (the third plot, the second gauge), in group and dataset order. A group
//! widget (data grid, multi-plot, GPS, …) becomes a group tile; a dataset widget (plot, FFT,
//! LED, gauge, …) becomes a tile of the dataset it counts to, showing that view. Serial
//! Studio's pixel geometry is not kept: tiles are packed in reference order, sized by what
//! they show, and a tab of one to four tiles shares the width between them.

use serde_json::Value;
use sextant_telemetry::project::{Group, GroupWidget, Tile, TileView, Workspace};

use crate::groups::GroupOrigin;
use crate::json::{index, show, Obj};
use crate::report::ImportReport;
use crate::text::simplified;
use crate::Ids;

/// Grid columns of a workspace (the UI's `COLS`).
const COLUMNS: u32 = 12;

/// What a widget reference shows, by Serial Studio's `DashboardWidget` number.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shown {
    Terminal,
    Group,
    /// A dataset view; `widget` names the dataset widget string it counts, for gauges/bars.
    Dataset(Kind),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Plot,
    Fft,
    Led,
    Widget(&'static str),
    Waterfall,
}

fn shown(widget_type: i64) -> Shown {
    match widget_type {
        0 => Shown::Terminal,
        7 => Shown::Dataset(Kind::Fft),
        8 => Shown::Dataset(Kind::Led),
        9 => Shown::Dataset(Kind::Plot),
        10 => Shown::Dataset(Kind::Widget("bar")),
        11 => Shown::Dataset(Kind::Widget("gauge")),
        12 => Shown::Dataset(Kind::Widget("compass")),
        13 => Shown::Dataset(Kind::Widget("meter")),
        // The numbers after Serial Studio's free widgets moved between versions; only the
        // waterfall is a dataset widget among them, recognised by the group's datasets.
        20 | 21 => Shown::Dataset(Kind::Waterfall),
        _ => Shown::Group,
    }
}

/// Whether a dataset of the file has a widget of `kind`.
fn has(dataset: &Value, kind: Kind) -> bool {
    let flag = |k: &str| dataset.get(k).and_then(Value::as_bool).unwrap_or(false);
    match kind {
        Kind::Plot => flag("graph"),
        Kind::Fft => flag("fft"),
        Kind::Led => flag("led"),
        Kind::Waterfall => flag("waterfall"),
        Kind::Widget(w) => dataset
            .get("widget")
            .and_then(Value::as_str)
            .is_some_and(|s| s.trim().eq_ignore_ascii_case(w)),
    }
}

/// The workspaces of `items` (the file's `workspaces`), their tiles naming `groups`.
pub(crate) fn import_workspaces(
    items: &[Value],
    path: &str,
    file_groups: &[Value],
    groups: &[Group],
    origins: &[GroupOrigin],
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Vec<Workspace> {
    let mut out = Vec::new();
    for (w, item) in items.iter().enumerate() {
        let wpath = index(path, w);
        let Some(map) = item.as_object() else {
            r.push(
                wpath,
                format!("expected a workspace object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut obj = Obj::new(map, wpath.clone());
        let title = simplified(&obj.string("title", r).unwrap_or_default());
        obj.skip(&["icon", "workspaceId"]);
        let refs_path = obj.at("widgetRefs");
        let refs = obj.array("widgetRefs", r).map(Vec::as_slice).unwrap_or(&[]);
        let mut placed: Vec<(Tile, Size)> = Vec::new();
        for (i, reference) in refs.iter().enumerate() {
            let rpath = index(&refs_path, i);
            let tile = resolve(reference, &rpath, file_groups, groups, origins, r);
            if let Some(tile) = tile {
                // One tile per widget: Serial Studio lists a widget once per tab.
                if !placed.iter().any(|(t, _)| same_tile(t, &tile.0)) {
                    placed.push(tile);
                }
            }
        }
        obj.finish(r);
        if placed.is_empty() {
            r.push(
                wpath,
                format!("workspace {title:?} shows nothing Sextant can draw; skipped"),
            );
            continue;
        }
        out.push(Workspace {
            id: ids.next("ws"),
            title: if title.is_empty() {
                format!("Workspace {}", w + 1)
            } else {
                title
            },
            tiles: lay_out(placed),
            extra: Default::default(),
        });
    }
    out
}

fn same_tile(a: &Tile, b: &Tile) -> bool {
    a.group == b.group && a.dataset == b.dataset && a.view == b.view
}

/// A tile's natural size in grid cells (columns, rows).
type Size = (u32, u32);

fn resolve(
    reference: &Value,
    path: &str,
    file_groups: &[Value],
    groups: &[Group],
    origins: &[GroupOrigin],
    r: &mut ImportReport,
) -> Option<(Tile, Size)> {
    let num = |k: &str| reference.get(k).and_then(Value::as_i64);
    let (Some(group_id), Some(widget_type)) = (num("groupId"), num("widgetType")) else {
        r.push(
            path,
            format!(
                "expected a widget reference with groupId and widgetType, found {}; skipped",
                show(reference)
            ),
        );
        return None;
    };
    let relative = num("relativeIndex").unwrap_or(0);
    let Some(position) = referenced_group(origins, group_id) else {
        r.push(
            path,
            format!("refers to group {group_id}, which was not imported; skipped"),
        );
        return None;
    };
    let (group, origin) = (&groups[position], &origins[position]);
    let kind = match shown(widget_type) {
        Shown::Terminal => {
            r.push(
                path,
                "the terminal is not a dashboard tile in Sextant; it is in the Console",
            );
            return None;
        }
        Shown::Group => return Some(group_tile(group)),
        Shown::Dataset(kind) => kind,
    };
    let Some(dataset) = counted_dataset(file_groups, origins, origin, kind, relative) else {
        // A type this group has no dataset for (a newer widget number): show the group.
        return Some(group_tile(group));
    };
    Some(dataset_tile(dataset, kind))
}

/// The position among the imported groups of the group a reference names. Files with
/// unique ids refer to groups by them, older ones by position.
fn referenced_group(origins: &[GroupOrigin], group_id: i64) -> Option<usize> {
    origins
        .iter()
        .position(|o| o.unique_id == Some(group_id))
        .or_else(|| {
            origins
                .iter()
                .position(|o| o.unique_id.is_none() && o.json_index as i64 == group_id)
        })
}

/// A tile showing a whole group, sized by the group's widget.
fn group_tile(group: &Group) -> (Tile, Size) {
    let size = match group.widget {
        GroupWidget::MultiPlot | GroupWidget::Plot3d | GroupWidget::Terminal => (8, 4),
        GroupWidget::Gps | GroupWidget::Accelerometer => (6, 4),
        GroupWidget::Painter | GroupWidget::Image | GroupWidget::WebView => (6, 4),
        _ => (4, 4),
    };
    (
        Tile {
            group: Some(group.id.clone()),
            ..Tile::default()
        },
        size,
    )
}

/// The dataset of `origin`'s group a dataset widget reference shows: the one `relative`
/// counts to among all widgets of `kind` on the dashboard, if it is in this group;
/// otherwise this group's first such dataset.
fn counted_dataset(
    file_groups: &[Value],
    origins: &[GroupOrigin],
    origin: &GroupOrigin,
    kind: Kind,
    relative: i64,
) -> Option<String> {
    let file_datasets = |g: usize| {
        file_groups
            .get(g)
            .and_then(|g| g.get("datasets"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    };
    let with_kind = |o: &GroupOrigin| -> Vec<String> {
        let file = file_datasets(o.json_index);
        o.datasets
            .iter()
            .filter(|(d, _)| file.get(*d).is_some_and(|v| has(v, kind)))
            .map(|(_, id)| id.clone())
            .collect()
    };
    let counted = origins
        .iter()
        .flat_map(with_kind)
        .nth(relative.max(0) as usize);
    let own = with_kind(origin);
    counted
        .filter(|id| own.contains(id))
        .or_else(|| own.first().cloned())
}

/// A tile showing one dataset in the view `kind` maps to, at that view's natural size.
fn dataset_tile(dataset: String, kind: Kind) -> (Tile, Size) {
    let (view, size) = match kind {
        Kind::Plot => (TileView::Plot, (4, 3)),
        Kind::Fft => (TileView::Fft, (4, 3)),
        Kind::Led => (TileView::Led, (3, 2)),
        Kind::Widget(_) => (TileView::Widget, (3, 3)),
        Kind::Waterfall => (TileView::Waterfall, (4, 4)),
    };
    (
        Tile {
            dataset: Some(dataset),
            view: Some(view),
            ..Tile::default()
        },
        size,
    )
}

/// Places tiles row by row on the grid. One to four tiles share the width equally (a tab
/// with one plot shows it large); more are packed in rows at their natural sizes, each row
/// then widened to the full grid.
fn lay_out(placed: Vec<(Tile, Size)>) -> Vec<Tile> {
    let n = placed.len() as u32;
    if n <= 4 {
        let w = COLUMNS / n;
        let h = placed
            .iter()
            .map(|(_, (_, h))| *h)
            .max()
            .unwrap_or(3)
            .max(4)
            + if n == 1 { 2 } else { 0 };
        return placed
            .into_iter()
            .enumerate()
            .map(|(i, (t, _))| Tile {
                x: i as u32 * w,
                y: 0,
                w,
                h,
                ..t
            })
            .collect();
    }
    // Rows of natural sizes, then each row stretched to the full width and its height, so
    // the tab has no holes.
    let mut rows: Vec<Vec<(Tile, Size)>> = vec![Vec::new()];
    let mut used = 0;
    for (t, (w, h)) in placed {
        if used + w > COLUMNS && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = 0;
        }
        used += w;
        rows.last_mut().expect("a row").push((t, (w, h)));
    }
    let mut out = Vec::new();
    let mut y = 0;
    for mut row in rows {
        let mut spare = COLUMNS - row.iter().map(|(_, (w, _))| *w).sum::<u32>().min(COLUMNS);
        let mut k = 0;
        while spare > 0 {
            let n = row.len();
            row[k % n].1 .0 += 1;
            spare -= 1;
            k += 1;
        }
        let height = row.iter().map(|(_, (_, h))| *h).max().unwrap_or(3);
        let mut x = 0;
        for (t, (w, _)) in row {
            out.push(Tile {
                x,
                y,
                w,
                h: height,
                ..t
            });
            x += w;
        }
        y += height;
    }
    out
}

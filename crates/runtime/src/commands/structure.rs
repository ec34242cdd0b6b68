//! Sources, groups, datasets, actions and workspaces: adding, changing, removing.
//!
//! Changes are JSON merge patches over the object, re-validated against its type and then
//! against the whole project, so a partial update can never leave a half-valid project.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};
use sextant_commands::{CommandError, Registry, Tier};
use sextant_telemetry::project::{
    Action, Dataset, Group, GroupWidget, Project, Source, Tile, Workspace as Tab,
};

use super::merge_patch;
use super::project::{Done, NoParams};
use crate::Workspace;

#[derive(Serialize, JsonSchema)]
struct Created {
    /// The id assigned to the new object.
    id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdParams {
    id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateParams {
    id: String,
    /// Fields to change (JSON merge patch: `null` removes an optional field).
    changes: Map<String, Json>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SourceAdd {
    /// The new source; its `id` is assigned when empty.
    source: Source,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GroupAdd {
    title: String,
    #[serde(default)]
    widget: GroupWidget,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DatasetAdd {
    /// Id of the group the dataset joins.
    group: String,
    /// The new dataset; its `id` is assigned when empty.
    dataset: Dataset,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DatasetMove {
    id: String,
    /// Id of the group to move to.
    group: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActionAdd {
    action: Action,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TabAdd {
    title: String,
    #[serde(default)]
    tiles: Vec<Tile>,
}

fn find_dataset<'p>(p: &'p mut Project, id: &str) -> Result<&'p mut Dataset, CommandError> {
    p.groups
        .iter_mut()
        .flat_map(|g| g.datasets.iter_mut())
        .find(|d| d.id == id)
        .ok_or_else(|| {
            CommandError::not_found(format!(
                "no dataset has id `{id}`; `project.get` shows them"
            ))
        })
}

/// Datasets, tiles and axes that point at `id`, for refusing a removal that would dangle.
fn references(p: &Project, id: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let first_source = p.sources.first().map(|s| s.id.as_str());
    for d in p.datasets() {
        // A dataset without an explicit source reads the first one.
        let source = d
            .source
            .as_deref()
            .or(if d.is_virtual { None } else { first_source });
        if source == Some(id) {
            refs.push(format!("dataset `{}`", d.id));
        }
        if matches!(&d.x_axis, sextant_telemetry::project::XAxis::Dataset { id: x } if x == id) {
            refs.push(format!("the x axis of dataset `{}`", d.id));
        }
    }
    for w in &p.workspaces {
        for t in &w.tiles {
            if t.group.as_deref() == Some(id) || t.dataset.as_deref() == Some(id) {
                refs.push(format!("a tile of workspace `{}`", w.id));
            }
        }
    }
    for a in &p.actions {
        if a.source.as_deref() == Some(id) {
            refs.push(format!("action `{}`", a.id));
        }
    }
    refs
}

fn refuse_if_referenced(p: &Project, id: &str) -> Result<(), CommandError> {
    let refs = references(p, id);
    if refs.is_empty() {
        Ok(())
    } else {
        Err(CommandError::failed(format!(
            "`{id}` is still used by {}; change or remove those first",
            refs.join(", ")
        )))
    }
}

/// Sources, groups, datasets, actions and workspaces, one line each; the handler of
/// `project.source.add` is `project_source_add`, and so on, below in the same order. Kept out of
/// rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    // Sources.
    r.register("project.source.list", Tier::Safe, "Every source of the project.", project_source_list);
    r.register("project.source.add", Tier::Confirm, "Adds a device source (connection, framing, decoder, parser).", project_source_add)
        .example("a serial device sending CSV lines", json!({"source": {"title": "Rover", "connection": {"type": "serial", "port": "/dev/ttyUSB0", "baud": 115200}, "parser": {"kind": "delimited", "separator": ","}}}));
    r.register("project.source.update", Tier::Confirm, "Changes fields of a source (merge patch).", project_source_update)
        .example("switch to 921600 baud", json!({"id": "src-1", "changes": {"connection": {"baud": 921600}}}));
    r.register("project.source.remove", Tier::Confirm, "Removes a source no dataset or action uses.", project_source_remove);

    // Groups.
    r.register("project.group.add", Tier::Confirm, "Adds a group of datasets (a dashboard widget such as a multiplot or GPS map).", project_group_add)
        .example("a multiplot", json!({"title": "Battery", "widget": "multiPlot"}));
    r.register("project.quickPlot.keep", Tier::Confirm, PROJECT_QUICK_PLOT_KEEP, project_quick_plot_keep);
    r.register("project.group.update", Tier::Confirm, "Changes fields of a group (merge patch; datasets are edited with project.dataset.*).", project_group_update);
    r.register("project.group.remove", Tier::Confirm, "Removes a group and its datasets.", project_group_remove);

    // Datasets.
    r.register("project.dataset.add", Tier::Confirm, "Adds a dataset (a value from a parser slot, or a virtual one computed by a transform) to a group.", project_dataset_add)
        .example("a battery voltage gauge fed by parser slot 3", json!({"group": "grp-1", "dataset": {"title": "Battery", "units": "V", "index": 3, "widget": "gauge", "min": 0, "max": 5}}));
    r.register("project.dataset.get", Tier::Safe, "One dataset by id.", project_dataset_get);
    r.register("project.dataset.update", Tier::Confirm, "Changes fields of a dataset (merge patch).", project_dataset_update)
        .example("make it a gauge from 0 to 5", json!({"id": "ds-3", "changes": {"widget": "gauge", "min": 0, "max": 5}}));
    r.register("project.dataset.move", Tier::Confirm, "Moves a dataset to another group.", project_dataset_move);
    r.register("project.dataset.remove", Tier::Confirm, "Removes a dataset nothing else refers to.", project_dataset_remove);

    // Actions.
    r.register("project.action.add", Tier::Confirm, "Adds an action button.", project_action_add);
    r.register("project.action.update", Tier::Confirm, "Changes fields of an action (merge patch): title, payload, hex, line ending, source.", project_action_update);
    r.register("project.action.remove", Tier::Confirm, "Removes an action.", project_action_remove);

    // Workspaces (dashboard tabs).
    r.register("project.workspace.list", Tier::Safe, "Dashboard workspaces (tabs).", project_workspace_list);
    r.register("project.workspace.add", Tier::Confirm, "Adds a dashboard workspace.", project_workspace_add);
    r.register("project.workspace.update", Tier::Confirm, "Changes a workspace's title or tiles (merge patch).", project_workspace_update);
    r.register("project.workspace.remove", Tier::Confirm, "Removes a workspace.", project_workspace_remove);
}

fn project_source_list(ws: &mut Workspace, _: NoParams) -> Result<Vec<Source>, CommandError> {
    Ok(ws.project().sources.clone())
}

fn project_source_add(ws: &mut Workspace, p: SourceAdd) -> Result<Created, CommandError> {
    ws.edit("add source", |proj| {
        let mut s = p.source;
        if s.id.is_empty() {
            s.id = proj.next_id("src");
        }
        let id = s.id.clone();
        proj.sources.push(s);
        Ok(Created { id })
    })
}

fn project_source_update(ws: &mut Workspace, p: UpdateParams) -> Result<Done, CommandError> {
    ws.edit(&format!("update source {}", p.id), |proj| {
        let s = proj
            .sources
            .iter_mut()
            .find(|s| s.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{}`", p.id)))?;
        *s = merge_patch(s, &p.changes, "source")?;
        Ok(Done::ok())
    })
}

fn project_source_remove(ws: &mut Workspace, p: IdParams) -> Result<Done, CommandError> {
    ws.edit(&format!("remove source {}", p.id), |proj| {
        let i = proj
            .sources
            .iter()
            .position(|s| s.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{}`", p.id)))?;
        refuse_if_referenced(proj, &p.id)?;
        proj.sources.remove(i);
        Ok(Done::ok())
    })
}

fn project_group_add(ws: &mut Workspace, p: GroupAdd) -> Result<Created, CommandError> {
    ws.edit("add group", |proj| {
        let id = proj.next_id("grp");
        proj.groups.push(Group {
            id: id.clone(),
            title: p.title,
            widget: p.widget,
            ..Group::default()
        });
        Ok(Created { id })
    })
}

const PROJECT_QUICK_PLOT_KEEP: &str =
    "Keeps what Quick plot found: the channels seen so far become a multi-plot group per \
    source, one dataset per channel (named by the header line), on the dashboard from \
    now on. The datasets keep the ids the live data already has, so they show at once.";

fn project_quick_plot_keep(ws: &mut Workspace, _: NoParams) -> Result<Json, CommandError> {
    let seen: Vec<_> = ws
        .live
        .as_ref()
        .and_then(|l| l.wiring.as_ref())
        .map(|w| w.snapshot().datasets)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.id.starts_with("auto-") && d.slot.is_some())
        .collect();
    if seen.is_empty() {
        return Err(CommandError::failed(
            "Quick plot has found no channels yet; connect a device that sends \
             comma-separated lines first",
        ));
    }
    ws.edit("keep the quick-plot channels", |proj| {
        let mut created = Vec::new();
        for (index, source) in proj.sources.clone().iter().enumerate() {
            let mut channels: Vec<_> = seen.iter().filter(|d| d.source == Some(index)).collect();
            if channels.is_empty() {
                continue;
            }
            channels.sort_by_key(|d| d.slot);
            let id = proj.next_id("grp");
            let title = if source.title.trim().is_empty() {
                "Quick plot".to_string()
            } else {
                source.title.clone()
            };
            let multi = proj.sources.len() > 1;
            let datasets = channels
                .iter()
                .filter(|d| !proj.datasets().any(|x| x.id == d.id))
                .map(|d| Dataset {
                    id: d.id.clone(),
                    title: d.title.clone(),
                    index: d.slot.unwrap_or(0) as u32 + 1,
                    source: multi.then(|| source.id.clone()),
                    graph: true,
                    ..Dataset::default()
                })
                .collect::<Vec<_>>();
            if datasets.is_empty() {
                continue;
            }
            proj.groups.push(Group {
                id: id.clone(),
                title,
                widget: GroupWidget::MultiPlot,
                datasets,
                ..Group::default()
            });
            created.push(id);
        }
        if created.is_empty() {
            return Err(CommandError::failed(
                "the quick-plot channels are in the project already",
            ));
        }
        Ok(json!({ "groups": created }))
    })
}

fn project_group_update(ws: &mut Workspace, p: UpdateParams) -> Result<Done, CommandError> {
    if p.changes.contains_key("datasets") {
        return Err(CommandError::invalid(
            "changes.datasets",
            "edit datasets with project.dataset.* commands",
        ));
    }
    ws.edit(&format!("update group {}", p.id), |proj| {
        let g = proj
            .groups
            .iter_mut()
            .find(|g| g.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no group has id `{}`", p.id)))?;
        *g = merge_patch(g, &p.changes, "group")?;
        Ok(Done::ok())
    })
}

fn project_group_remove(ws: &mut Workspace, p: IdParams) -> Result<Done, CommandError> {
    ws.edit(&format!("remove group {}", p.id), |proj| {
        let i = proj
            .groups
            .iter()
            .position(|g| g.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no group has id `{}`", p.id)))?;
        let group = proj.groups.remove(i);
        refuse_if_referenced(proj, &p.id)?;
        for d in &group.datasets {
            refuse_if_referenced(proj, &d.id)?;
        }
        Ok(Done::ok())
    })
}

fn project_dataset_add(ws: &mut Workspace, p: DatasetAdd) -> Result<Created, CommandError> {
    ws.edit("add dataset", |proj| {
        let mut d = p.dataset;
        if d.id.is_empty() {
            d.id = proj.next_id("ds");
        }
        let id = d.id.clone();
        let g = proj
            .groups
            .iter_mut()
            .find(|g| g.id == p.group)
            .ok_or_else(|| CommandError::not_found(format!("no group has id `{}`", p.group)))?;
        g.datasets.push(d);
        Ok(Created { id })
    })
}

fn project_dataset_get(ws: &mut Workspace, p: IdParams) -> Result<Dataset, CommandError> {
    ws.project()
        .datasets()
        .find(|d| d.id == p.id)
        .cloned()
        .ok_or_else(|| CommandError::not_found(format!("no dataset has id `{}`", p.id)))
}

fn project_dataset_update(ws: &mut Workspace, p: UpdateParams) -> Result<Done, CommandError> {
    ws.edit(&format!("update dataset {}", p.id), |proj| {
        let d = find_dataset(proj, &p.id)?;
        *d = merge_patch(d, &p.changes, "dataset")?;
        Ok(Done::ok())
    })
}

fn project_dataset_move(ws: &mut Workspace, p: DatasetMove) -> Result<Done, CommandError> {
    ws.edit(&format!("move dataset {}", p.id), |proj| {
        if !proj.groups.iter().any(|g| g.id == p.group) {
            return Err(CommandError::not_found(format!(
                "no group has id `{}`",
                p.group
            )));
        }
        let mut moved = None;
        for g in &mut proj.groups {
            if let Some(i) = g.datasets.iter().position(|d| d.id == p.id) {
                moved = Some(g.datasets.remove(i));
            }
        }
        let d = moved
            .ok_or_else(|| CommandError::not_found(format!("no dataset has id `{}`", p.id)))?;
        if let Some(g) = proj.groups.iter_mut().find(|g| g.id == p.group) {
            g.datasets.push(d);
        }
        Ok(Done::ok())
    })
}

fn project_dataset_remove(ws: &mut Workspace, p: IdParams) -> Result<Done, CommandError> {
    ws.edit(&format!("remove dataset {}", p.id), |proj| {
        let mut removed = false;
        for g in &mut proj.groups {
            let before = g.datasets.len();
            g.datasets.retain(|d| d.id != p.id);
            removed |= g.datasets.len() != before;
        }
        if !removed {
            return Err(CommandError::not_found(format!(
                "no dataset has id `{}`",
                p.id
            )));
        }
        refuse_if_referenced(proj, &p.id)?;
        Ok(Done::ok())
    })
}

fn project_action_add(ws: &mut Workspace, p: ActionAdd) -> Result<Created, CommandError> {
    ws.edit("add action", |proj| {
        let mut a = p.action;
        if a.id.is_empty() {
            a.id = proj.next_id("act");
        }
        let id = a.id.clone();
        proj.actions.push(a);
        Ok(Created { id })
    })
}

fn project_action_update(ws: &mut Workspace, p: UpdateParams) -> Result<Done, CommandError> {
    if p.changes.contains_key("id") {
        return Err(CommandError::invalid(
            "changes.id",
            "an action's id never changes",
        ));
    }
    ws.edit(&format!("update action {}", p.id), |proj| {
        let a = proj
            .actions
            .iter_mut()
            .find(|a| a.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no action has id `{}`", p.id)))?;
        *a = merge_patch(a, &p.changes, "action")?;
        Ok(Done::ok())
    })
}

fn project_action_remove(ws: &mut Workspace, p: IdParams) -> Result<Done, CommandError> {
    ws.edit(&format!("remove action {}", p.id), |proj| {
        let before = proj.actions.len();
        proj.actions.retain(|a| a.id != p.id);
        if proj.actions.len() == before {
            return Err(CommandError::not_found(format!(
                "no action has id `{}`",
                p.id
            )));
        }
        Ok(Done::ok())
    })
}

fn project_workspace_list(ws: &mut Workspace, _: NoParams) -> Result<Vec<Tab>, CommandError> {
    Ok(ws.project().workspaces.clone())
}

fn project_workspace_add(ws: &mut Workspace, p: TabAdd) -> Result<Created, CommandError> {
    ws.edit("add workspace", |proj| {
        let id = proj.next_id("ws");
        proj.workspaces.push(Tab {
            id: id.clone(),
            title: p.title,
            tiles: p.tiles,
            ..Tab::default()
        });
        Ok(Created { id })
    })
}

fn project_workspace_update(ws: &mut Workspace, p: UpdateParams) -> Result<Done, CommandError> {
    ws.edit(&format!("update workspace {}", p.id), |proj| {
        let w = proj
            .workspaces
            .iter_mut()
            .find(|w| w.id == p.id)
            .ok_or_else(|| CommandError::not_found(format!("no workspace has id `{}`", p.id)))?;
        *w = merge_patch(w, &p.changes, "workspace")?;
        Ok(Done::ok())
    })
}

fn project_workspace_remove(ws: &mut Workspace, p: IdParams) -> Result<Done, CommandError> {
    ws.edit(&format!("remove workspace {}", p.id), |proj| {
        let before = proj.workspaces.len();
        proj.workspaces.retain(|w| w.id != p.id);
        if proj.workspaces.len() == before {
            return Err(CommandError::not_found(format!(
                "no workspace has id `{}`",
                p.id
            )));
        }
        Ok(Done::ok())
    })
}

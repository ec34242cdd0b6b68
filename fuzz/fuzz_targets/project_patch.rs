//! Any merge patch on any object of a real project: a clear error, or a project that either
//! fails validation (the edit is refused) or saves and reloads to exactly itself.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use sextant_telemetry::project::{merge_patch, PatchError};
use sextant_telemetry::Project;

/// Serial Studio's own example projects, as imported, beside the demo.
const IMPORTED: [&str; 4] = [
    include_str!("../../fixtures/serial-studio/binary-crc.ssproj"),
    include_str!("../../fixtures/serial-studio/js-csv.ssproj"),
    include_str!("../../fixtures/serial-studio/lua-kv.ssproj"),
    include_str!("../../fixtures/serial-studio/multi-source.ssproj"),
];

fn project(pick: u8) -> &'static Project {
    static PROJECTS: OnceLock<Vec<Project>> = OnceLock::new();
    let all = PROJECTS.get_or_init(|| {
        let mut all: Vec<Project> = IMPORTED
            .iter()
            .map(|text| {
                sextant_import::import_serial_studio(text)
                    .expect("the fixture imports")
                    .project
            })
            .collect();
        all.push(sextant_devices::simulator::demo_project());
        all
    });
    &all[pick as usize % all.len()]
}

/// Patches item `i` (modulo their count) of `items`; `None` when there are none.
fn patch_one<T>(
    items: &mut [T],
    i: usize,
    changes: &Map<String, Value>,
    what: &str,
) -> Option<Result<(), PatchError>>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let n = items.len().max(1);
    let item = items.get_mut(i % n)?;
    Some(merge_patch(item, changes, what).map(|new| *item = new))
}

fn patched(
    project: &Project,
    kind: u8,
    index: u8,
    changes: &Map<String, Value>,
) -> Option<Project> {
    let mut p = project.clone();
    let i = index as usize;
    let done = match kind % 5 {
        0 => patch_one(&mut p.sources, i, changes, "source"),
        1 => patch_one(&mut p.groups, i, changes, "group"),
        2 => {
            let group = i % p.groups.len().max(1);
            let datasets = &mut p.groups.get_mut(group)?.datasets;
            patch_one(datasets, i / 7, changes, "dataset")
        }
        3 => patch_one(&mut p.actions, i, changes, "action"),
        _ => patch_one(&mut p.workspaces, i, changes, "workspace"),
    };
    match done? {
        Ok(()) => Some(p),
        Err(e) => {
            assert!(
                e.path.starts_with("changes"),
                "an error that names no field: {e:?}"
            );
            assert!(!e.message.is_empty());
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let Ok(changes) = serde_json::from_slice::<Map<String, Value>>(&data[3..]) else {
        return;
    };
    let project = project(data[0]);
    let Some(after) = patched(project, data[1], data[2], &changes) else {
        return;
    };
    if !after.validate().is_empty() {
        return; // the edit is refused as a whole
    }
    let saved = after.to_json_string();
    let again = Project::from_json_str(&saved).expect("an accepted edit saves and reloads");
    assert_eq!(again, after, "an accepted edit reloads differently");
});

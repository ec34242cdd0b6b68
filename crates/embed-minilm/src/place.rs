//! Where the model is looked for: the one list every entry point reads – the desktop app,
//! `sextant serve`, `sextant eval` and `sextant models` – so a model put in one place is
//! found by all of them, and the Health view can name every place it looked.
//!
//! In order: the folder given on the command line, `SEXTANT_EMBEDDING_MODEL_DIR`, the
//! per-user models folder (`<user data>/sextant/models/all-minilm-l6-v2`; `./dev demo` and
//! `sextant models install` put it there), the app's own data folder (where earlier
//! versions looked), and beside the installed program (`<prefix>/share/sextant/models/…`,
//! which the `.deb` carries). The first folder holding every model file wins.

use std::path::{Path, PathBuf};

use sextant_retrieval::diagnostics::{ModelPlace, SearchedPlace};

use crate::MODEL_FILES;

/// Where the model lives under a data folder.
pub const MODEL_FOLDER: &str = "models/all-minilm-l6-v2";

/// The environment variable that names a model folder.
pub const MODEL_DIR_ENV: &str = "SEXTANT_EMBEDDING_MODEL_DIR";

/// The per-user models folder every entry point shares; `None` on a system without a
/// per-user data folder.
pub fn user_models_dir() -> Option<PathBuf> {
    Some(dirs::data_dir()?.join("sextant").join(MODEL_FOLDER))
}

/// The folder a package installs the model in, for a program at `exe`:
/// `<prefix>/bin/program` → `<prefix>/share/sextant/models/all-minilm-l6-v2`.
pub fn installed_dir_for(exe: &Path) -> Option<PathBuf> {
    Some(
        exe.parent()?
            .parent()?
            .join("share/sextant")
            .join(MODEL_FOLDER),
    )
}

/// Whether `dir` holds every model file.
pub fn is_complete(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// Every place, in order, and whether the model is there. `explicit`: a `--model-dir`;
/// `app_data`: the caller's own data folder.
pub fn search(explicit: Option<&Path>, app_data: Option<&Path>) -> Vec<SearchedPlace> {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok());
    search_in(
        explicit,
        std::env::var_os(MODEL_DIR_ENV).map(PathBuf::from),
        user_models_dir(),
        app_data.map(|d| d.join(MODEL_FOLDER)),
        exe.as_deref().and_then(installed_dir_for),
    )
}

fn search_in(
    explicit: Option<&Path>,
    env: Option<PathBuf>,
    user: Option<PathBuf>,
    app_data: Option<PathBuf>,
    installed: Option<PathBuf>,
) -> Vec<SearchedPlace> {
    let places = [
        (ModelPlace::CommandLine, explicit.map(Path::to_path_buf)),
        (
            ModelPlace::Environment,
            env.filter(|p| !p.as_os_str().is_empty()),
        ),
        (ModelPlace::UserModels, user),
        (ModelPlace::AppData, app_data),
        (ModelPlace::Installed, installed),
    ];
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (place, dir) in places {
        let Some(dir) = dir else { continue };
        // The same folder reached two ways is one place (the first way names it).
        if seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        out.push(SearchedPlace {
            place,
            found: is_complete(&dir),
            path: dir.display().to_string(),
        });
    }
    out
}

/// The model folder: the first place of [`search`] that holds every file; `None` when
/// none does (the caller falls back to the lexicon embedder and says so).
pub fn locate(explicit: Option<&Path>, app_data: &Path) -> Option<PathBuf> {
    first_found(&search(explicit, Some(app_data)))
}

/// The first place of a search that holds the model.
pub fn first_found(searched: &[SearchedPlace]) -> Option<PathBuf> {
    searched
        .iter()
        .find(|p| p.found)
        .map(|p| PathBuf::from(&p.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_in(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for f in MODEL_FILES {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
    }

    #[test]
    fn every_place_in_order_and_the_first_complete_one_wins() {
        let root = tempfile::tempdir().unwrap();
        let at = |name: &str| root.path().join(name);
        model_in(&at("user"));
        model_in(&at("installed"));
        std::fs::create_dir_all(at("env")).unwrap(); // a folder without the files
        let searched = search_in(
            None,
            Some(at("env")),
            Some(at("user")),
            Some(at("app")),
            Some(at("installed")),
        );
        let places: Vec<_> = searched.iter().map(|s| (s.place, s.found)).collect();
        assert_eq!(
            places,
            [
                (ModelPlace::Environment, false),
                (ModelPlace::UserModels, true),
                (ModelPlace::AppData, false),
                (ModelPlace::Installed, true),
            ]
        );
        assert_eq!(first_found(&searched), Some(at("user")));
        // A command line's folder comes first; the same folder twice is listed once.
        model_in(&at("flag"));
        let searched = search_in(
            Some(&at("flag")),
            Some(at("flag")),
            Some(at("user")),
            None,
            None,
        );
        assert_eq!(searched.len(), 2);
        assert_eq!(first_found(&searched), Some(at("flag")));
    }

    #[test]
    fn a_package_carries_it_under_share() {
        assert_eq!(
            installed_dir_for(Path::new("/usr/bin/sextant-desktop")),
            Some(PathBuf::from("/usr/share/sextant/models/all-minilm-l6-v2"))
        );
    }
}

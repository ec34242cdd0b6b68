//! The assistant's retrieval services: the embedder that answers queries – all-MiniLM-L6-v2
//! when its files are in one of the places `sextant_embed_minilm::place` lists (the Health
//! view names each), otherwise the lexicon embedder (`deterministic-lexicon-v2`) – the diagnostics collector every
//! retrieval reports to, and the content-free health snapshot the settings' Health view
//! shows. The memory and the chat archive take their embedder and collector from here.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sextant_retrieval::diagnostics::{Collector, EmbedderHealth, Fallback, Health, SearchedPlace};
use sextant_retrieval::{Embedder, LexiconEmbedder, RecentQueries};

pub struct Retrieval {
    collector: Arc<Collector>,
    model_dir: Option<PathBuf>,
    /// Every place the model was looked for (the Health view lists them).
    searched: Vec<SearchedPlace>,
    /// Loaded on first use (reading the model takes a moment; a chat that never retrieves
    /// never pays it).
    embedder: OnceLock<(Arc<dyn Embedder>, Option<Fallback>)>,
}

impl Retrieval {
    /// Looks for the neural model (files only; nothing is loaded yet).
    pub fn open(data_dir: &Path) -> Retrieval {
        #[cfg(feature = "minilm")]
        let searched = sextant_embed_minilm::place::search(None, Some(data_dir));
        #[cfg(not(feature = "minilm"))]
        let searched: Vec<SearchedPlace> = {
            let _ = data_dir;
            Vec::new()
        };
        Retrieval {
            model_dir: searched
                .iter()
                .find(|p| p.found)
                .map(|p| PathBuf::from(&p.path)),
            searched,
            ..Retrieval::with_model_dir(None)
        }
    }

    /// With the model in `dir` (`None`: no model, the lexicon embedder).
    pub fn with_model_dir(dir: Option<PathBuf>) -> Retrieval {
        Retrieval {
            collector: Arc::new(Collector::new()),
            model_dir: dir,
            searched: Vec::new(),
            embedder: OnceLock::new(),
        }
    }

    /// Always the lexicon embedder (tests, and a person who turned the model off).
    pub fn lexicon() -> Retrieval {
        let r = Retrieval::with_model_dir(None);
        let _ = r.embedder.set((Arc::new(LexiconEmbedder::new()), None));
        r
    }

    /// Whether the embedder has been chosen (and the model loaded, when there is one).
    pub fn is_loaded(&self) -> bool {
        self.embedder.get().is_some()
    }

    pub fn collector(&self) -> &Arc<Collector> {
        &self.collector
    }

    /// The embedder (loading the model the first time; a model that fails to load falls
    /// back to the lexicon embedder, and the health view says so). Blocking.
    pub fn embedder(&self) -> Arc<dyn Embedder> {
        self.chosen().0.clone()
    }

    fn chosen(&self) -> &(Arc<dyn Embedder>, Option<Fallback>) {
        self.embedder.get_or_init(|| {
            let (embedder, fallback) = match &self.model_dir {
                None => (
                    Arc::new(LexiconEmbedder::new()) as Arc<dyn Embedder>,
                    Some(Fallback::ModelNotFound),
                ),
                Some(dir) => load_model(dir),
            };
            // A question is embedded once per scope searched and per request of a turn.
            let remembering: Arc<dyn Embedder> = Arc::new(RecentQueries::new(embedder));
            (remembering, fallback)
        })
    }

    /// What the Health view shows. Blocking (it may load the model).
    pub fn health(&self) -> Health {
        let (embedder, fallback) = self.chosen();
        let profile = embedder.profile();
        self.collector.snapshot(Some(EmbedderHealth {
            kind: profile.kind,
            fallback: *fallback,
            dimensions: profile.dimensions as u64,
            breaker: None,
            searched: self.searched.clone(),
        }))
    }
}

/// The neural model in `dir`, or the lexicon embedder and why.
#[cfg(feature = "minilm")]
fn load_model(dir: &Path) -> (Arc<dyn Embedder>, Option<Fallback>) {
    match sextant_embed_minilm::MiniLmEmbedder::load(dir) {
        Ok(model) => (Arc::new(model), None),
        Err(e) => {
            tracing::warn!(
                "the embedding model in {} did not load, using the lexicon embedder: {e}",
                dir.display()
            );
            (
                Arc::new(LexiconEmbedder::new()),
                Some(Fallback::ModelFailedToLoad),
            )
        }
    }
}

/// Built without the neural embedder: the lexicon one.
#[cfg(not(feature = "minilm"))]
fn load_model(_: &Path) -> (Arc<dyn Embedder>, Option<Fallback>) {
    (
        Arc::new(LexiconEmbedder::new()),
        Some(Fallback::ModelFailedToLoad),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_retrieval::EmbedderKind;

    #[test]
    fn without_a_model_or_with_a_broken_one_the_lexicon_embedder_answers_and_says_why() {
        let none = Retrieval::with_model_dir(None).health();
        let e = none.embedder.unwrap();
        assert_eq!(
            (e.kind, e.fallback),
            (EmbedderKind::Lexicon, Some(Fallback::ModelNotFound))
        );

        let dir = std::env::temp_dir().join(format!("sextant-broken-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["model.safetensors", "tokenizer.json", "config.json"] {
            std::fs::write(dir.join(f), b"not a model").unwrap();
        }
        let broken = Retrieval::with_model_dir(Some(dir.clone()));
        let e = broken.health().embedder.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            (e.kind, e.fallback),
            (EmbedderKind::Lexicon, Some(Fallback::ModelFailedToLoad))
        );
        assert_eq!(
            broken.embedder().profile().id,
            sextant_retrieval::LexiconEmbedder::ID
        );
    }
}

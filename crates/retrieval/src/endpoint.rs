//! An embedder over an OpenAI-compatible `POST {base}/embeddings` (llama.cpp's server,
//! Ollama, LM Studio, vLLM, OpenAI): `{"model", "input": [..]}` → `{"data": [{"index",
//! "embedding"}]}`. Blocking, with a deadline; the store's circuit breaker keeps a dead
//! endpoint from slowing every query.

use std::time::Duration;

use serde_json::{json, Value};

use crate::embed::{l2_normalize, EmbedError, Embedder, EmbedderKind, Profile};

/// How long one request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

pub struct EndpointEmbedder {
    agent: ureq::Agent,
    url: String,
    model: String,
    api_key: Option<String>,
    profile: Profile,
}

impl EndpointEmbedder {
    /// `base_url` with its version path (`http://127.0.0.1:8080/v1`); `dimensions` as the
    /// model gives them (a reply of another length is an error, not a silent mismatch).
    pub fn new(
        base_url: &str,
        model: &str,
        dimensions: usize,
        api_key: Option<String>,
    ) -> EndpointEmbedder {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        EndpointEmbedder {
            agent,
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            model: model.to_string(),
            api_key,
            profile: Profile {
                // The model is part of what a vector means.
                id: format!("endpoint:{model}:{dimensions}"),
                dimensions,
                // Sentence-embedding models put unrelated short texts at 0–0.2.
                min_similarity: 0.25,
                strong_similarity: 0.7,
                semantic_weight: 0.5,
                // Not fitted: the model is the person's choice, unknown here.
                concept_credit: 0.5,
                kind: EmbedderKind::Endpoint,
                // Unknown: the person chose the model; trust it.
                reads_cjk: true,
            },
        }
    }
}

impl Embedder for EndpointEmbedder {
    fn profile(&self) -> &Profile {
        &self.profile
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut request = self.agent.post(&self.url);
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request
            .send_json(json!({ "model": self.model, "input": texts }))
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => EmbedError::Timeout,
                other => EmbedError::Unavailable(format!("{}: {other}", self.url)),
            })?;
        let status = response.status();
        let body: Value = response
            .body_mut()
            .read_json()
            .map_err(|e| EmbedError::Failed(format!("the reply is not JSON ({status}): {e}")))?;
        if !status.is_success() {
            let message = body["error"]["message"]
                .as_str()
                .or(body["error"].as_str())
                .unwrap_or("no message");
            return Err(EmbedError::Failed(format!("{status}: {message}")));
        }
        let data = body["data"]
            .as_array()
            .ok_or_else(|| EmbedError::Failed("the reply has no `data` list".into()))?;
        let mut out = vec![Vec::new(); texts.len()];
        for (position, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map_or(position, |i| i as usize);
            let vector: Vec<f32> = item["embedding"]
                .as_array()
                .ok_or_else(|| EmbedError::Failed(format!("item {index} has no `embedding`")))?
                .iter()
                .map(|x| x.as_f64().unwrap_or(f64::NAN) as f32)
                .collect();
            if vector.len() != self.profile.dimensions || vector.iter().any(|x| !x.is_finite()) {
                return Err(EmbedError::Failed(format!(
                    "item {index}: {} numbers where {} were expected",
                    vector.len(),
                    self.profile.dimensions
                )));
            }
            let slot = out
                .get_mut(index)
                .ok_or_else(|| EmbedError::Failed(format!("item index {index} is out of range")))?;
            *slot = vector;
        }
        if out.iter().any(Vec::is_empty) {
            return Err(EmbedError::Failed(
                "the reply left some inputs without a vector".into(),
            ));
        }
        for v in &mut out {
            l2_normalize(v);
        }
        Ok(out)
    }
}

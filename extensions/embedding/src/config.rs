//! `[extensions.embedding]`: which provider computes the vectors, and its options.

use std::fmt;
use std::path::{Path, PathBuf};

use mnemo_kernel::ValidateConfig;
use serde::{Deserialize, Serialize};

/// Where the local model lives unless `model_dir` says otherwise (`~` is the home directory).
pub const DEFAULT_MODEL_DIR: &str = "~/.cache/mnemo/models/all-MiniLM-L6-v2";
/// Longest input in tokens for the local model (`sentence_bert_config.json` of all-MiniLM-L6-v2).
pub const DEFAULT_MAX_SEQ_LEN: usize = 256;
/// Most passages of `max_seq_len` tokens the local model reads of one text: 8 of 256 tokens
/// cover about 8,000 characters of English.
pub const DEFAULT_MAX_PASSAGES: usize = 8;
/// Most texts per forward pass (local) or per request (remote).
pub const DEFAULT_BATCH_SIZE: usize = 32;
/// OpenAI's API; any OpenAI-compatible server works.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The remote model used when `model` is not set.
pub const DEFAULT_REMOTE_MODEL: &str = "text-embedding-3-small";
/// Remote request timeout in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// The environment variable that overrides `api_key`.
pub const API_KEY_ENV: &str = "MNEMO_EMBEDDING_API_KEY";

/// Which provider computes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    /// A BERT-family sentence model run in-process with candle (all-MiniLM-L6-v2 by default).
    #[default]
    Local,
    /// A server speaking OpenAI's `POST /embeddings` protocol (OpenAI, Ollama, vLLM, llama.cpp).
    Remote,
}

/// `[extensions.embedding]`. Every key is optional; the defaults give the local model.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// `"local"` (in-process model from `model_dir`) or `"remote"` (OpenAI-compatible server).
    pub provider: EmbeddingProvider,
    /// Local: directory holding `config.json`, `tokenizer.json` and `model.safetensors` of a
    /// BERT-family sentence model; a leading `~` is the home directory. `scripts/fetch-model`
    /// installs all-MiniLM-L6-v2 into the default.
    pub model_dir: PathBuf,
    /// Local: longest passage in tokens. At most the model's `max_position_embeddings`.
    pub max_seq_len: usize,
    /// Local: a longer text is read as up to this many passages of `max_seq_len` tokens, whose
    /// vectors are averaged (weighted by length); the rest of the text is not read. 1 truncates
    /// at `max_seq_len`.
    pub max_passages: usize,
    /// Most texts per forward pass (local) or per HTTP request (remote).
    pub batch_size: usize,
    /// Remote: base URL of the API, up to but not including `/embeddings`.
    pub base_url: String,
    /// Remote: model name sent as `model`.
    pub model: String,
    /// Remote: API key sent as a bearer token, if the server needs one. The environment
    /// variable `MNEMO_EMBEDDING_API_KEY` overrides it; prefer the variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Remote: output size, sent as `dimensions` (Matryoshka models such as
    /// text-embedding-3-large at 256). Unset: the model's known size (text-embedding-3-small
    /// 1536, text-embedding-3-large 3072, text-embedding-ada-002 1536) and nothing is sent;
    /// required for other models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    /// Remote: request timeout in seconds.
    pub timeout_secs: u64,
    /// Remote: tries after a batch request the server refused for now (429, 5xx) or could not
    /// take (connection errors); the indexer's batches only, never a search's query, which falls
    /// back to words at once.
    pub max_retries: u32,
    /// Remote: the wait before the first retry in milliseconds; each later one waits twice as
    /// long.
    pub retry_base_ms: u64,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self {
            provider: EmbeddingProvider::Local,
            model_dir: PathBuf::from(DEFAULT_MODEL_DIR),
            max_seq_len: DEFAULT_MAX_SEQ_LEN,
            max_passages: DEFAULT_MAX_PASSAGES,
            batch_size: DEFAULT_BATCH_SIZE,
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: DEFAULT_REMOTE_MODEL.to_owned(),
            api_key: None,
            dimensions: None,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            max_retries: 2,
            retry_base_ms: 500,
        }
    }
}

impl fmt::Debug for EmbeddingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingConfig")
            .field("provider", &self.provider)
            .field("model_dir", &self.model_dir)
            .field("max_seq_len", &self.max_seq_len)
            .field("max_passages", &self.max_passages)
            .field("batch_size", &self.batch_size)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("dimensions", &self.dimensions)
            .field("timeout_secs", &self.timeout_secs)
            .field("max_retries", &self.max_retries)
            .field("retry_base_ms", &self.retry_base_ms)
            .finish()
    }
}

impl EmbeddingConfig {
    /// `model_dir` with a leading `~` replaced by the home directory.
    pub fn resolved_model_dir(&self) -> PathBuf {
        expand_tilde(&self.model_dir)
    }

    /// Applies `MNEMO_EMBEDDING_API_KEY` from `lookup` (empty values are ignored).
    pub fn apply_env(&mut self, lookup: impl Fn(&str) -> Option<String>) {
        if let Some(key) = lookup(API_KEY_ENV).filter(|value| !value.trim().is_empty()) {
            self.api_key = Some(key);
        }
    }

    /// The vector size of the remote provider: `dimensions`, or the known size of `model`.
    pub fn remote_dimensions(&self) -> Option<usize> {
        match self.dimensions {
            Some(dimensions) => usize::try_from(dimensions).ok(),
            None => known_dimensions(&self.model),
        }
    }
}

impl ValidateConfig for EmbeddingConfig {
    /// Checks values serde cannot: every problem at once, each naming its key, such as
    /// ``key `batch_size`: must be at least 1``.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.batch_size == 0 {
            problems.push("key `batch_size`: must be at least 1".to_owned());
        }
        match self.provider {
            EmbeddingProvider::Local => {
                if self.max_seq_len < 3 {
                    problems.push(
                        "key `max_seq_len`: must be at least 3 ([CLS], a token of text, [SEP])"
                            .to_owned(),
                    );
                }
                if self.max_passages == 0 {
                    problems.push(
                        "key `max_passages`: must be at least 1 (1 truncates long texts)"
                            .to_owned(),
                    );
                }
                if self.model_dir.as_os_str().is_empty() {
                    problems.push("key `model_dir`: must not be empty".to_owned());
                }
                if self.dimensions.is_some() {
                    problems.push(
                        "key `dimensions`: applies to provider = \"remote\" only; the local \
                         model's size comes from its config.json"
                            .to_owned(),
                    );
                }
            }
            EmbeddingProvider::Remote => {
                if self.base_url.trim().is_empty() {
                    problems.push("key `base_url`: must not be empty".to_owned());
                }
                if self.model.trim().is_empty() {
                    problems.push("key `model`: must not be empty".to_owned());
                }
                if self.timeout_secs == 0 {
                    problems.push("key `timeout_secs`: must be at least 1".to_owned());
                }
                match self.dimensions {
                    Some(0) => problems.push("key `dimensions`: must be at least 1".to_owned()),
                    Some(_) => {}
                    None if known_dimensions(&self.model).is_none() => problems.push(format!(
                        "key `dimensions`: required for model `{}` (its size is known only for \
                         text-embedding-3-small, text-embedding-3-large and \
                         text-embedding-ada-002)",
                        self.model
                    )),
                    None => {}
                }
            }
        }
        problems
    }
}

/// The output size of well-known OpenAI embedding models.
pub fn known_dimensions(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        _ => None,
    }
}

/// Replaces a leading `~` (alone or followed by `/`) with the home directory; other paths, and
/// every path when the home directory is unknown, stay as they are.
pub fn expand_tilde(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else {
        return path.to_path_buf();
    };
    match dirs::home_dir() {
        Some(home) if rest.as_os_str().is_empty() => home,
        Some(home) => home.join(rest),
        None => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_kernel::ExtensionSection;

    fn parse(text: &str) -> Result<EmbeddingConfig, mnemo_kernel::ConfigError> {
        let table: toml::Table = toml::from_str(text).expect("test TOML is valid");
        ExtensionSection::new("embedding", table).parse()
    }

    #[test]
    fn defaults_round_trip_through_toml() {
        let defaults = EmbeddingConfig::default();
        let text = toml::to_string(&defaults).expect("defaults serialise");
        assert_eq!(parse(&text).expect("defaults parse"), defaults);
        assert_eq!(parse("").expect("empty section parses"), defaults);
        assert!(defaults.problems().is_empty());
    }

    #[test]
    fn default_values_are_the_documented_ones() {
        let defaults = EmbeddingConfig::default();
        assert_eq!(defaults.provider, EmbeddingProvider::Local);
        assert_eq!(defaults.model_dir, Path::new(DEFAULT_MODEL_DIR));
        assert_eq!(defaults.max_seq_len, 256);
        assert_eq!(defaults.max_passages, 8);
        assert_eq!(defaults.batch_size, 32);
        assert_eq!(defaults.model, "text-embedding-3-small");
        assert_eq!(defaults.timeout_secs, 30);
        assert_eq!(defaults.api_key, None);
        assert_eq!(defaults.dimensions, None);
        assert_eq!(defaults.remote_dimensions(), Some(1536));
    }

    #[test]
    fn every_option_parses() {
        let config = parse(
            r#"
            provider = "remote"
            model_dir = "/models/bge"
            max_seq_len = 128
            max_passages = 2
            batch_size = 8
            base_url = "http://localhost:11434/v1"
            model = "text-embedding-3-large"
            api_key = "sk-test"
            dimensions = 256
            timeout_secs = 5
            "#,
        )
        .expect("valid section");
        assert_eq!(config.provider, EmbeddingProvider::Remote);
        assert_eq!(config.model_dir, Path::new("/models/bge"));
        assert_eq!(config.max_passages, 2);
        assert_eq!(config.remote_dimensions(), Some(256));
        assert!(config.problems().is_empty());
        assert!(
            !format!("{config:?}").contains("sk-test"),
            "Debug hides the key"
        );
    }

    #[test]
    fn unknown_keys_and_providers_are_rejected() {
        let error = parse("modle = \"x\"").expect_err("unknown key");
        assert!(error.to_string().contains("modle"), "{error}");
        let error = parse("provider = \"cloud\"").expect_err("unknown provider");
        assert!(error.to_string().contains("provider"), "{error}");
    }

    #[test]
    fn check_lists_every_problem() {
        let config = parse(
            "provider = \"remote\"\nmodel = \"nomic-embed-text\"\nbatch_size = 0\ntimeout_secs = 0",
        )
        .expect("valid TOML");
        let problems = config.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems
            .iter()
            .any(|problem| problem.contains("`dimensions`")));

        let local = parse("dimensions = 256").expect("valid TOML");
        assert!(!local.problems().is_empty(), "dimensions is remote-only");

        let none = parse("max_passages = 0").expect("valid TOML");
        let problems = none.problems();
        assert!(
            problems.len() == 1 && problems[0].contains("`max_passages`"),
            "{problems:?}"
        );
    }

    #[test]
    fn environment_key_overrides_the_file() {
        let mut config = parse("api_key = \"from-file\"").expect("valid section");
        config.apply_env(|_| Some("   ".to_owned()));
        assert_eq!(
            config.api_key.as_deref(),
            Some("from-file"),
            "blank is ignored"
        );
        config.apply_env(|name| (name == API_KEY_ENV).then(|| "from-env".to_owned()));
        assert_eq!(config.api_key.as_deref(), Some("from-env"));
    }

    #[test]
    fn tilde_expands_to_the_home_directory() {
        let home = dirs::home_dir().expect("the test machine has a home directory");
        assert_eq!(expand_tilde(Path::new("~")), home);
        assert_eq!(
            expand_tilde(Path::new("~/.cache/mnemo")),
            home.join(".cache/mnemo")
        );
        assert_eq!(
            EmbeddingConfig::default().resolved_model_dir(),
            home.join(".cache/mnemo/models/all-MiniLM-L6-v2")
        );
        assert_eq!(expand_tilde(Path::new("/abs/~x")), Path::new("/abs/~x"));
        assert_eq!(expand_tilde(Path::new("~user/x")), Path::new("~user/x"));
        assert_eq!(expand_tilde(Path::new("rel/dir")), Path::new("rel/dir"));
    }
}

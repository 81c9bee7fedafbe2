//! `config.toml`: the kernel's own sections and one strict section per extension.
//!
//! ```toml
//! [kernel]
//! queue_capacity = 256
//! [llm]
//! provider = "none"
//! [extensions.memory]
//! enabled = true
//! # ...the memory extension's own keys
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

mod telemetry;

pub use telemetry::{MetricsAccess, TelemetryConfig};

/// A configuration problem; the message names the file, the key and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<embedded config.toml>`).
    pub file: String,
    /// Every problem found, each naming its key.
    pub problems: Vec<String>,
}

impl ConfigError {
    /// One problem in `file`.
    pub fn new(file: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            problems: vec![problem.into()],
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "{}: {}", self.file, one),
            many => {
                write!(f, "{}: {} problems", self.file, many.len())?;
                for problem in many {
                    write!(f, "\n  - {problem}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// The whole configuration, as read from one file.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from, for error messages.
    pub file: String,
    /// `[kernel]`.
    pub kernel: KernelConfig,
    /// `[llm]`.
    pub llm: LlmConfig,
    /// `[telemetry]`.
    pub telemetry: TelemetryConfig,
    /// `[extensions.<name>]`, in file order.
    pub extensions: Vec<ExtensionSection>,
}

/// `[kernel]`: the router, the agent turn and where data lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// Where extensions keep their files; empty means the platform's data directory + `mnemo`.
    pub data_dir: Option<PathBuf>,
    /// The first part of every system prompt; context blocks follow it.
    pub system_prompt: String,
    /// Capacity of each subscriber's event queue; a full queue makes the publisher wait.
    pub queue_capacity: usize,
    /// How long a whole shutdown may take, in milliseconds: a server's requests in flight, the
    /// event queues and the extensions share it (an orchestrator's own grace is often 30 s).
    pub shutdown_grace_ms: u64,
    /// Most LLM round trips with tool calls in one agent turn.
    pub max_tool_rounds: usize,
    /// The user `mnemo chat` and `mnemo mcp` act for when no `--user` is given.
    pub default_user: String,
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            data_dir: None,
            system_prompt: "You are a helpful assistant with long-term memory.".to_owned(),
            queue_capacity: 256,
            shutdown_grace_ms: 10_000,
            max_tool_rounds: 8,
            default_user: "me".to_owned(),
        }
    }
}

/// Which language model the kernel offers extensions and the agent turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LlmProvider {
    /// No model: features that need one report that they are not configured.
    #[default]
    None,
    /// Any server speaking OpenAI's chat-completions protocol (OpenAI, Ollama, llama.cpp, vLLM).
    Openai,
    /// Replies queued in advance (replay and demos).
    Scripted,
}

/// `[llm]`: the model used by consolidation, reflection, LLM NER and `mnemo chat`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `none`, `openai` or `scripted`.
    pub provider: LlmProvider,
    /// Base URL of the API, ending before `/chat/completions`; `MNEMO_LLM_BASE_URL` overrides.
    pub base_url: String,
    /// Model name; `MNEMO_LLM_MODEL` overrides.
    pub model: String,
    /// API key, if the server needs one; `MNEMO_LLM_API_KEY` overrides. Prefer the variable.
    pub api_key: Option<String>,
    /// Request timeout in seconds.
    pub timeout_secs: u64,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens in any reply, for requests that set no bound of their own: a runaway local
    /// model otherwise generates long after the timeout, and the requests queued behind it fail.
    pub max_tokens: u32,
    /// Tries after a failed request when the server is overloaded, restarting or unreachable
    /// (429, 5xx, connection errors); 0 turns retrying off. Timeouts are not retried.
    pub max_retries: u32,
    /// The wait before the first retry, in milliseconds; each later one waits twice as long.
    pub retry_base_ms: u64,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("max_retries", &self.max_retries)
            .field("retry_base_ms", &self.retry_base_ms)
            .finish()
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: LlmProvider::None,
            base_url: "https://api.openai.com/v1".to_owned(),
            model: "gpt-4o-mini".to_owned(),
            api_key: None,
            timeout_secs: 60,
            temperature: 0.2,
            max_tokens: 1_024,
            max_retries: 2,
            retry_base_ms: 500,
        }
    }
}

/// The values of an extension's config that parse but are not usable (a limit of 0, two
/// options that exclude each other). Every extension's config implements it and its factory
/// reads the config with [`ExtensionSection::parse_checked`].
pub trait ValidateConfig {
    /// Every problem with the values, each naming its key: ``key `batch_size`: must be at least
    /// 1``. The kernel adds the file and the section. Empty when the config is usable.
    fn problems(&self) -> Vec<String>;
}

/// One `[extensions.<name>]` table, handed to the extension's factory.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionSection {
    /// The extension's name (the table key).
    pub name: String,
    /// The `enabled` key; `true` when absent.
    pub enabled: bool,
    /// The file, for error messages.
    pub file: String,
    table: toml::Table,
}

impl ExtensionSection {
    /// A section built in code, for tests and hosts without a file.
    pub fn new(name: impl Into<String>, table: toml::Table) -> Self {
        Self {
            name: name.into(),
            enabled: true,
            file: "<code>".to_owned(),
            table,
        }
    }

    /// Deserialises the section into the extension's config type.
    ///
    /// Use `#[serde(deny_unknown_fields)]` on `C`, so that a misspelt key stops start-up.
    ///
    /// # Errors
    /// A [`ConfigError`] listing every key of the section that is unknown or has a value of the
    /// wrong type, each with the file, `[extensions.<name>]`, the key and the reason.
    pub fn parse<C: DeserializeOwned>(&self) -> Result<C, ConfigError> {
        let (parsed, problems) = deserialize_all::<C>(&self.table);
        match parsed {
            Some(config) if problems.is_empty() => Ok(config),
            _ => Err(ConfigError {
                file: self.file.clone(),
                problems: problems
                    .into_iter()
                    .map(|problem| {
                        let key = problem
                            .path
                            .map_or(String::new(), |path| format!(" key `{path}`"));
                        format!("[extensions.{}]{key}: {}", self.name, problem.reason)
                    })
                    .collect(),
            }),
        }
    }

    /// Deserialises the section like [`ExtensionSection::parse`], then checks its values with
    /// [`ValidateConfig::problems`]: the one way an extension's factory reads its config.
    ///
    /// # Errors
    /// A [`ConfigError`] listing every problem: the keys [`ExtensionSection::parse`] refuses, or
    /// else every value [`ValidateConfig::problems`] refuses, each under `[extensions.<name>]`.
    pub fn parse_checked<C: DeserializeOwned + ValidateConfig>(&self) -> Result<C, ConfigError> {
        self.check(self.parse()?)
    }

    /// Checks `config`, parsed from this section and perhaps adjusted since (from the
    /// environment, say), with [`ValidateConfig::problems`].
    ///
    /// # Errors
    /// A [`ConfigError`] listing every problem, each under `[extensions.<name>]`.
    pub fn check<C: ValidateConfig>(&self, config: C) -> Result<C, ConfigError> {
        let problems = config.problems();
        if problems.is_empty() {
            return Ok(config);
        }
        Err(ConfigError {
            file: self.file.clone(),
            problems: problems
                .into_iter()
                .map(|problem| format!("[extensions.{}] {problem}", self.name))
                .collect(),
        })
    }

    /// The raw keys of the section (without `enabled`).
    pub fn table(&self) -> &toml::Table {
        &self.table
    }
}

const TOP_LEVEL_KEYS: [&str; 4] = ["kernel", "llm", "telemetry", "extensions"];

impl Config {
    /// Reads and checks a configuration file.
    ///
    /// # Errors
    /// The file cannot be read, is not TOML, or a kernel key is unknown or has a bad value.
    /// Extension sections are checked by [`crate::host::KernelBuilder::start`], which knows the factories.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|err| ConfigError::new(file.clone(), format!("cannot read: {err}")))?;
        Self::parse(&text, &file)
    }

    /// Parses configuration text; `file` names it in errors.
    ///
    /// # Errors
    /// As [`Config::load`]; every problem found is reported at once.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        let root: toml::Table = toml::from_str(text)
            .map_err(|err| ConfigError::new(file, format!("not valid TOML: {err}")))?;
        let mut problems = Vec::new();
        for key in root.keys() {
            if !TOP_LEVEL_KEYS.contains(&key.as_str()) {
                problems.push(format!(
                    "unknown section `{key}`, expected one of {}",
                    TOP_LEVEL_KEYS.join(", ")
                ));
            }
        }
        let kernel: KernelConfig = section(&root, "kernel", &mut problems).unwrap_or_default();
        let llm: LlmConfig = section(&root, "llm", &mut problems).unwrap_or_default();
        let telemetry: TelemetryConfig =
            section(&root, "telemetry", &mut problems).unwrap_or_default();
        problems.extend(telemetry.problems());
        if kernel.queue_capacity == 0 {
            problems.push("key `kernel.queue_capacity`: must be at least 1".to_owned());
        }
        if kernel.default_user.trim().is_empty() {
            problems.push("key `kernel.default_user`: must not be empty".to_owned());
        }
        if kernel.max_tool_rounds == 0 {
            problems.push("key `kernel.max_tool_rounds`: must be at least 1".to_owned());
        }
        if !(0.0..=2.0).contains(&llm.temperature) {
            problems.push("key `llm.temperature`: must be between 0 and 2".to_owned());
        }
        if llm.max_tokens == 0 {
            problems.push("key `llm.max_tokens`: must be at least 1".to_owned());
        }
        if llm.timeout_secs == 0 {
            problems.push("key `llm.timeout_secs`: must be at least 1".to_owned());
        }
        let mut extensions = Vec::new();
        match root.get("extensions") {
            None => {}
            Some(toml::Value::Table(tables)) => {
                for (name, value) in tables {
                    match value {
                        toml::Value::Table(table) => {
                            let mut table = table.clone();
                            let enabled = match table.remove("enabled") {
                                None => true,
                                Some(toml::Value::Boolean(enabled)) => enabled,
                                Some(other) => {
                                    problems.push(format!(
                                        "[extensions.{name}] key `enabled`: expected true or false, found {}",
                                        other.type_str()
                                    ));
                                    false
                                }
                            };
                            extensions.push(ExtensionSection {
                                name: name.clone(),
                                enabled,
                                file: file.to_owned(),
                                table,
                            });
                        }
                        other => problems.push(format!(
                            "key `extensions.{name}`: expected a table, found {}",
                            other.type_str()
                        )),
                    }
                }
            }
            Some(other) => problems.push(format!(
                "key `extensions`: expected a table, found {}",
                other.type_str()
            )),
        }
        if problems.is_empty() {
            Ok(Self {
                file: file.to_owned(),
                kernel,
                llm,
                telemetry,
                extensions,
            })
        } else {
            Err(ConfigError {
                file: file.to_owned(),
                problems,
            })
        }
    }

    /// Applies `MNEMO_LLM_BASE_URL`, `MNEMO_LLM_MODEL` and `MNEMO_LLM_API_KEY` from `lookup`.
    ///
    /// A base URL from the environment switches a `none` provider to `openai`.
    pub fn apply_env(&mut self, lookup: impl Fn(&str) -> Option<String>) {
        let non_empty = |key: &str| lookup(key).filter(|value| !value.trim().is_empty());
        if let Some(base_url) = non_empty("MNEMO_LLM_BASE_URL") {
            self.llm.base_url = base_url;
            if self.llm.provider == LlmProvider::None {
                self.llm.provider = LlmProvider::Openai;
            }
        }
        if let Some(model) = non_empty("MNEMO_LLM_MODEL") {
            self.llm.model = model;
        }
        if let Some(api_key) = non_empty("MNEMO_LLM_API_KEY") {
            self.llm.api_key = Some(api_key);
        }
    }

    /// The section of extension `name`, if the file has one.
    pub fn extension(&self, name: &str) -> Option<&ExtensionSection> {
        self.extensions.iter().find(|section| section.name == name)
    }

    /// Sets `[extensions.<name>] enabled`, adding an empty section if there is none.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) {
        match self
            .extensions
            .iter_mut()
            .find(|section| section.name == name)
        {
            Some(section) => section.enabled = enabled,
            None => self.extensions.push(ExtensionSection {
                name: name.to_owned(),
                enabled,
                file: self.file.clone(),
                table: toml::Table::new(),
            }),
        }
    }

    /// Sets one key of `[extensions.<name>]`, adding the section (enabled) if there is none.
    /// The value is checked when the kernel starts, like a value from the file.
    pub fn set_extension_key(&mut self, name: &str, key: &str, value: toml::Value) {
        if self.extension(name).is_none() {
            self.set_enabled(name, true);
        }
        if let Some(section) = self
            .extensions
            .iter_mut()
            .find(|section| section.name == name)
        {
            section.table.insert(key.to_owned(), value);
        }
    }

    /// The data directory: `[kernel] data_dir`, or the platform's data directory + `mnemo`.
    pub fn data_dir(&self) -> PathBuf {
        match &self.kernel.data_dir {
            Some(dir) if !dir.as_os_str().is_empty() => dir.clone(),
            _ => dirs::data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("mnemo"),
        }
    }
}

/// `[key]` of the file, with every problem of its keys added to `problems`. When some keys are
/// bad, the section as the other keys give it, so that their values can be checked too.
fn section<T: DeserializeOwned + Default>(
    root: &toml::Table,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    let table = match root.get(key)? {
        toml::Value::Table(table) => table,
        other => {
            problems.push(format!(
                "key `{key}`: expected a table, found {}",
                other.type_str()
            ));
            return None;
        }
    };
    let (parsed, found) = deserialize_all::<T>(table);
    for problem in found {
        let full = problem
            .path
            .map_or_else(|| key.to_owned(), |path| format!("{key}.{path}"));
        problems.push(format!("key `{full}`: {}", problem.reason));
    }
    parsed
}

/// One problem [`deserialize_all`] found.
struct KeyProblem {
    /// Where, as `key` or `key.inner.0`; `None` for the table as a whole.
    path: Option<String>,
    /// Why, in serde's words.
    reason: String,
}

/// Deserialises `table` into `T`, collecting the problem of every key rather than stopping at
/// the first: each key an error names is set aside and the others are tried again, so a section
/// with two wrong-typed keys reports both. Returns what the keys without problems give (`None`
/// when even they do not make a `T`, as when a required key is missing) and the problems.
fn deserialize_all<T: DeserializeOwned>(table: &toml::Table) -> (Option<T>, Vec<KeyProblem>) {
    let mut table = table.clone();
    let mut problems = Vec::new();
    let mut set_aside: Vec<String> = Vec::new();
    // Each round sets one key aside, so this ends; the bound is a guard.
    for _ in 0..=table.len() {
        let err = match serde_path_to_error::deserialize::<_, T>(toml::Value::Table(table.clone()))
        {
            Ok(parsed) => return (Some(parsed), problems),
            Err(err) => err,
        };
        let path = err.path().to_string();
        let inner = err.into_inner();
        let reason = inner.message().trim().to_owned();
        // The key at fault: the path's first segment, or the key an `unknown field` names.
        let key = match err_first_key(&path) {
            Some(key) if table.contains_key(key) => Some(key.to_owned()),
            _ => named_in(&reason, "unknown field `").filter(|key| table.contains_key(key)),
        };
        let Some(key) = key else {
            // A required key that was set aside is not missing: its problem is listed already.
            if named_in(&reason, "missing field `").is_some_and(|key| set_aside.contains(&key)) {
                return (None, problems);
            }
            problems.push(KeyProblem {
                path: (path != ".").then_some(path),
                reason,
            });
            return (None, problems);
        };
        table.remove(&key);
        problems.push(KeyProblem {
            path: Some(if path == "." { key.clone() } else { path }),
            reason,
        });
        set_aside.push(key);
    }
    (None, problems)
}

/// The first key of a `serde_path_to_error` path (`a.b[0]` gives `a`), if it starts with one.
fn err_first_key(path: &str) -> Option<&str> {
    if path == "." {
        return None;
    }
    let end = path.find(['.', '[']).unwrap_or(path.len());
    Some(&path[..end]).filter(|key| !key.is_empty())
}

/// The key named in serde's `unknown field `name`, expected …` or `missing field `name``, when
/// `reason` starts with `prefix` (up to the opening backtick).
fn named_in(reason: &str, prefix: &str) -> Option<String> {
    let rest = reason.strip_prefix(prefix)?;
    rest.split_once('`').map(|(key, _)| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        low: u32,
        high: u32,
    }

    impl ValidateConfig for Sample {
        fn problems(&self) -> Vec<String> {
            let mut problems = Vec::new();
            if self.low == 0 {
                problems.push("key `low`: must be at least 1".to_owned());
            }
            if self.high > 100 {
                problems.push("key `high`: must be at most 100".to_owned());
            }
            problems
        }
    }

    fn section(text: &str) -> ExtensionSection {
        let mut section = ExtensionSection::new("sample", toml::from_str(text).unwrap());
        section.file = "mnemo.toml".to_owned();
        section
    }

    #[test]
    fn parse_checked_lists_every_problem_under_the_section() {
        let sample: Sample = section("low = 1\nhigh = 2").parse_checked().unwrap();
        assert_eq!((sample.low, sample.high), (1, 2));
        let error = section("low = 0\nhigh = 200")
            .parse_checked::<Sample>()
            .unwrap_err();
        assert_eq!(error.file, "mnemo.toml");
        assert_eq!(
            error.problems,
            [
                "[extensions.sample] key `low`: must be at least 1",
                "[extensions.sample] key `high`: must be at most 100",
            ]
        );
        // Keys that do not parse are reported before any value is checked.
        let error = section("low = \"x\"\nhigh = 0\nextra = 1")
            .parse_checked::<Sample>()
            .unwrap_err();
        assert!(
            error
                .problems
                .iter()
                .all(|problem| !problem.contains("at least")),
            "{error}"
        );
        assert!(error.to_string().contains("extra"), "{error}");
    }

    #[test]
    fn defaults_round_trip() {
        let config = Config::parse("", "empty.toml").unwrap();
        assert_eq!(config.kernel, KernelConfig::default());
        let text = toml::to_string(&config.kernel).unwrap();
        let again: KernelConfig = toml::from_str(&text).unwrap();
        assert_eq!(again, config.kernel);
    }

    #[test]
    fn names_file_key_and_reason() {
        let err = Config::parse("[kernel]\nqueue_capacit = 3\n", "c.toml").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("c.toml: "), "{text}");
        assert!(text.contains("queue_capacit"), "{text}");
        assert!(text.contains("unknown field"), "{text}");

        let err = Config::parse("[kernel]\nqueue_capacity = \"many\"\n", "c.toml").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("kernel.queue_capacity"), "{text}");
        assert!(text.contains("invalid type"), "{text}");

        let err = Config::parse("[colour]\n", "c.toml").unwrap_err();
        assert!(err.to_string().contains("unknown section `colour`"));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let err = Config::parse(
            "[kernel]\nqueue_capacity = 0\n[llm]\ntemperature = 9.0\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }

    #[test]
    fn every_problem_of_a_section_is_listed() {
        let err = Config::parse(
            "[kernel]\nqueue_capacity = \"many\"\nqueue_capacit = 3\nmax_tool_rounds = \"x\"\n\
             default_user = \"\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(err.problems.len(), 4, "{err}");
        for (key, reason) in [
            ("kernel.queue_capacity", "invalid type: string \"many\""),
            ("kernel.queue_capacit", "unknown field `queue_capacit`"),
            ("kernel.max_tool_rounds", "invalid type: string \"x\""),
            ("kernel.default_user", "must not be empty"),
        ] {
            assert!(
                err.problems
                    .iter()
                    .any(|p| p.starts_with(&format!("key `{key}`: {reason}"))),
                "{key}: {err}"
            );
        }
        assert!(err.problems.iter().all(|p| !p.contains('\n')), "{err}");
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // Only deserialised.
    struct Shape {
        name: String,
        #[serde(default)]
        sizes: Vec<u8>,
        #[serde(default)]
        ratio: f32,
    }

    #[test]
    fn every_problem_of_an_extension_section_is_listed() {
        let table: toml::Table =
            toml::from_str("name = 1\nsizes = [1, 300]\nratio = \"half\"\ncolour = 2\n").unwrap();
        let err = ExtensionSection::new("shapes", table)
            .parse::<Shape>()
            .unwrap_err();
        assert_eq!(err.problems.len(), 4, "{err}");
        for key in ["name", "sizes[1]", "ratio", "colour"] {
            assert!(
                err.problems
                    .iter()
                    .any(|p| p.starts_with(&format!("[extensions.shapes] key `{key}`: "))),
                "{key}: {err}"
            );
        }
        // With every key set aside, a required one is missing: that is said too, once.
        let table: toml::Table = toml::from_str("colour = 2\n").unwrap();
        let err = ExtensionSection::new("shapes", table)
            .parse::<Shape>()
            .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
        assert!(err.problems[1].contains("missing field `name`"), "{err}");
    }

    #[test]
    fn environment_overrides_secrets() {
        let mut config = Config::parse("", "c.toml").unwrap();
        config.apply_env(|key| match key {
            "MNEMO_LLM_BASE_URL" => Some("http://127.0.0.1:8080/v1".into()),
            "MNEMO_LLM_API_KEY" => Some("sk-test".into()),
            _ => None,
        });
        assert_eq!(config.llm.provider, LlmProvider::Openai);
        assert_eq!(config.llm.api_key.as_deref(), Some("sk-test"));
        assert!(
            !format!("{:?}", config.llm).contains("sk-test"),
            "keys stay out of logs"
        );
    }

    #[test]
    fn extension_sections_keep_order_and_enabled_flag() {
        let config = Config::parse(
            "[extensions.b]\nenabled = false\nx = 1\n[extensions.a]\n",
            "c.toml",
        )
        .unwrap();
        let names: Vec<_> = config.extensions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert!(!config.extensions[0].enabled);
        assert!(config.extensions[1].enabled);
        assert!(config.extensions[0].table().contains_key("x"));
        assert!(!config.extensions[0].table().contains_key("enabled"));
    }
}

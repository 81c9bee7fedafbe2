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

mod deserialize;
mod extension;
mod kernel;
mod llm;
mod telemetry;

pub use extension::{ExtensionSection, ValidateConfig};
pub use kernel::KernelConfig;
pub use llm::{LlmConfig, LlmProvider};
pub use telemetry::{MetricsAccess, TelemetryConfig};

use deserialize::section;

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

#[cfg(test)]
mod tests {
    use super::*;

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

//! `[extensions.<name>]`: one strict section per extension, and the checks of its values.

use serde::de::DeserializeOwned;

use super::deserialize::deserialize_all;
use super::ConfigError;

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
    pub(super) table: toml::Table,
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

#[cfg(test)]
mod tests {
    use serde::Deserialize;

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
}

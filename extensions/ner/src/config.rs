//! `[extensions.ner]`: which providers each strategy runs, and the confidence floor.

use mnemo_kernel::ValidateConfig;
use serde::{Deserialize, Serialize};

/// A provider a strategy can list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderName {
    /// @mentions, #hashtags, e-mail addresses, URLs and absolute dates. No I/O.
    Regex,
    /// People (with relations), organisations and places from chat phrasings. No I/O.
    Pattern,
    /// The kernel's language model (`[llm]`); needs a configured model; for `accurate` only.
    Llm,
}

impl ProviderName {
    /// The name in config and in [`crate::ExtractedEntity::provider`].
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderName::Regex => "regex",
            ProviderName::Pattern => "pattern",
            ProviderName::Llm => "llm",
        }
    }

    /// Whether the provider runs without I/O, so that the fast strategy may list it.
    pub fn is_fast(self) -> bool {
        matches!(self, ProviderName::Regex | ProviderName::Pattern)
    }
}

/// `[extensions.ner]`. Every key is optional; an unknown key or provider name stops start-up with
/// a message naming the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NerConfig {
    /// Providers of the fast strategy (the hot path: every stored memory). Only `regex` and
    /// `pattern`: it runs synchronously, without I/O. Default `["regex", "pattern"]`.
    pub fast: Vec<ProviderName>,
    /// Providers of the accurate strategy (nightly enrichment). Default
    /// `["regex", "pattern", "llm"]`; accurate extraction is available only when a provider
    /// beyond `regex`/`pattern` is listed and usable (`llm` needs a model in `[llm]`). Without a
    /// model, the default list is noted at `info` level at start, a list the user changed with a
    /// warning: only the latter asked for a model.
    pub accurate: Vec<ProviderName>,
    /// Entities found with a lower confidence (0.0 to 1.0) are dropped. Default 0.0 (keep all);
    /// the weakest pattern guesses score 0.65, LLM entities 0.8, regex matches 0.8 and above.
    pub min_confidence: f32,
}

impl Default for NerConfig {
    fn default() -> Self {
        Self {
            fast: vec![ProviderName::Regex, ProviderName::Pattern],
            accurate: vec![
                ProviderName::Regex,
                ProviderName::Pattern,
                ProviderName::Llm,
            ],
            min_confidence: 0.0,
        }
    }
}

impl ValidateConfig for NerConfig {
    /// Every problem with the values, each naming its key; empty when the config is usable.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, providers) in [("fast", &self.fast), ("accurate", &self.accurate)] {
            for (index, provider) in providers.iter().enumerate() {
                if providers[..index].contains(provider) {
                    problems.push(format!(
                        "key `{key}`: provider `{}` is listed twice",
                        provider.as_str()
                    ));
                }
            }
        }
        for provider in self.fast.iter().filter(|provider| !provider.is_fast()) {
            problems.push(format!(
                "key `fast`: provider `{}` needs I/O, so it cannot run in \
                 `fast`; list it in `accurate`",
                provider.as_str()
            ));
        }
        if !(0.0..=1.0).contains(&self.min_confidence) {
            problems.push(format!(
                "key `min_confidence`: must be between 0.0 and 1.0, not {}",
                self.min_confidence
            ));
        }
        problems
    }
}

impl NerConfig {
    /// Whether the accurate strategy lists a provider beyond the fast ones.
    pub fn accurate_has_slow_provider(&self) -> bool {
        self.accurate.iter().any(|provider| !provider.is_fast())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NAME;
    use mnemo_kernel::ExtensionSection;

    fn parse(toml_text: &str) -> Result<NerConfig, String> {
        let table: toml::Table = toml::from_str(toml_text).map_err(|err| err.to_string())?;
        ExtensionSection::new(NAME, table)
            .parse::<NerConfig>()
            .map_err(|err| err.to_string())
    }

    #[test]
    fn the_default_round_trips() {
        let config = NerConfig::default();
        let text = toml::to_string(&config).unwrap();
        assert_eq!(parse(&text).unwrap(), config);
        assert_eq!(parse("").unwrap(), config);
        assert!(config.problems().is_empty());
        assert!(config.accurate_has_slow_provider());
    }

    #[test]
    fn config_toml_shows_every_option_with_its_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let root: toml::Table = toml::from_str(&text).unwrap();
        let mut section = root["extensions"][NAME].as_table().unwrap().clone();
        section.remove("enabled");
        let shown: Vec<&String> = section.keys().collect();
        let defaults = toml::Table::try_from(NerConfig::default()).unwrap();
        assert_eq!(shown, defaults.keys().collect::<Vec<_>>());
        assert_eq!(
            ExtensionSection::new(NAME, section)
                .parse::<NerConfig>()
                .unwrap(),
            NerConfig::default()
        );
    }

    #[test]
    fn keys_parse() {
        let config =
            parse("fast = [\"regex\"]\naccurate = [\"regex\", \"llm\"]\nmin_confidence = 0.7")
                .unwrap();
        assert_eq!(config.fast, vec![ProviderName::Regex]);
        assert_eq!(
            config.accurate,
            vec![ProviderName::Regex, ProviderName::Llm]
        );
        assert!((config.min_confidence - 0.7).abs() < 1e-6);
        assert_eq!(parse("min_confidence = 1").unwrap().min_confidence, 1.0);
    }

    #[test]
    fn unknown_provider_names_the_key() {
        let err = parse("accurate = [\"regex\", \"spacy\"]").unwrap_err();
        assert!(err.contains("[extensions.ner]"), "{err}");
        assert!(err.contains("accurate"), "{err}");
        assert!(err.contains("spacy"), "{err}");
        let err = parse("fats = [\"regex\"]").unwrap_err();
        assert!(err.contains("fats"), "{err}");
    }

    #[test]
    fn problems_name_their_keys() {
        let config = NerConfig {
            fast: vec![ProviderName::Regex, ProviderName::Llm, ProviderName::Regex],
            accurate: vec![],
            min_confidence: 1.5,
        };
        let problems = config.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("key `fast`") && problems[0].contains("twice"));
        assert!(problems[1].contains("key `fast`") && problems[1].contains("`llm`"));
        assert!(problems[2].contains("key `min_confidence`"));
        assert!(!config.accurate_has_slow_provider());
        let nan = NerConfig {
            min_confidence: f32::NAN,
            ..NerConfig::default()
        };
        assert_eq!(nan.problems().len(), 1);
    }
}

//! [`NerService`]: the strategies over the providers, published as `dyn NerApi`.

use std::fmt;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use mnemo_kernel::LlmClient;

use crate::config::{NerConfig, ProviderName};
use crate::merge::merge;
use crate::providers::{llm, pattern::PatternProvider, regex::RegexProvider, LLM_PROVIDER};
use mnemo_ner_api::{ExtractedEntity, NerApi, NerError, Strategy};

/// Named-entity extraction with the strategies of a [`NerConfig`].
///
/// The fast strategy runs its providers synchronously; the accurate one also asks the language
/// model when its list holds `llm` and a model was attached with [`NerService::attach_llm`]
/// (the extension does so at start when `[llm]` configures one).
pub struct NerService {
    fast: Vec<ProviderName>,
    accurate: Vec<ProviderName>,
    min_confidence: f32,
    llm: OnceLock<Arc<dyn LlmClient>>,
}

impl fmt::Debug for NerService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NerService")
            .field("fast", &self.fast)
            .field("accurate", &self.accurate)
            .field("min_confidence", &self.min_confidence)
            .field("llm", &self.llm.get().map(|llm| llm.model().to_owned()))
            .finish()
    }
}

impl Default for NerService {
    fn default() -> Self {
        Self::new(&NerConfig::default())
    }
}

impl NerService {
    /// A service with `config`'s strategies and no language model yet. Check the config with
    /// [`NerConfig::problems`] first: a slow provider listed in `fast` is ignored here.
    pub fn new(config: &NerConfig) -> Self {
        Self {
            fast: config
                .fast
                .iter()
                .copied()
                .filter(|p| p.is_fast())
                .collect(),
            accurate: config.accurate.clone(),
            min_confidence: config.min_confidence,
            llm: OnceLock::new(),
        }
    }

    /// Attaches the language model the `llm` provider uses; returns false (and keeps the first)
    /// when one is attached already.
    pub fn attach_llm(&self, llm: Arc<dyn LlmClient>) -> bool {
        self.llm.set(llm).is_ok()
    }

    /// The same service with `llm` attached, builder style.
    pub fn with_llm(self, llm: Arc<dyn LlmClient>) -> Self {
        self.attach_llm(llm);
        self
    }

    fn run_fast_providers(&self, providers: &[ProviderName], text: &str) -> Vec<ExtractedEntity> {
        let mut found = Vec::new();
        for provider in providers {
            match provider {
                ProviderName::Regex => found.extend(RegexProvider.extract(text)),
                ProviderName::Pattern => found.extend(PatternProvider.extract(text)),
                ProviderName::Llm => {}
            }
        }
        found
    }

    fn finish(&self, mut found: Vec<ExtractedEntity>) -> Vec<ExtractedEntity> {
        found.retain(|entity| entity.confidence >= self.min_confidence);
        merge(found)
    }
}

#[async_trait]
impl NerApi for NerService {
    fn extract_fast(&self, text: &str) -> Vec<ExtractedEntity> {
        self.finish(self.run_fast_providers(&self.fast, text))
    }

    /// Runs a strategy. `Accurate` does not fall back to the fast providers' results when the
    /// language model fails or is missing: it returns [`NerError::Provider`] so that nightly
    /// enrichment leaves the memory as it was and tries again later. Call
    /// [`NerApi::extract_fast`] for what the fast providers find.
    async fn extract(
        &self,
        text: &str,
        strategy: Strategy,
    ) -> Result<Vec<ExtractedEntity>, NerError> {
        match strategy {
            Strategy::Fast => Ok(self.extract_fast(text)),
            Strategy::Accurate => {
                let mut found = self.run_fast_providers(&self.accurate, text);
                if self.accurate.contains(&ProviderName::Llm) && !text.trim().is_empty() {
                    let Some(model) = self.llm.get() else {
                        return Err(NerError::Provider {
                            provider: LLM_PROVIDER.to_owned(),
                            reason: "no language model is configured ([llm] provider)".to_owned(),
                        });
                    };
                    found.extend(llm::extract(model.as_ref(), text).await?);
                }
                Ok(self.finish(found))
            }
        }
    }

    fn accurate_available(&self) -> bool {
        self.accurate.iter().any(|provider| match provider {
            ProviderName::Llm => self.llm.get().is_some(),
            ProviderName::Regex | ProviderName::Pattern => false,
        })
    }
}

//! Replaying a scenario against a real kernel.

mod checks;
mod saved;
mod step;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel, ScriptedLlm, TurnInput};
use mnemo_kernel::{LlmClient, ToolScope};
use serde_json::Value;

use crate::parse::{parse_scenario, Scenario, Who};
use checks::shorten;

/// The result of one expectation (or of a step that failed unexpectedly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// 1-based line in the scenario; 0 for the scenario as a whole.
    pub line: usize,
    /// What was checked.
    pub label: String,
    /// Whether it held.
    pub passed: bool,
    /// Why it failed, or what was seen.
    pub detail: String,
}

/// Everything that happened in one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScenarioReport {
    /// The scenario's name (its path).
    pub name: String,
    /// One per expectation and per unexpected failure.
    pub outcomes: Vec<Outcome>,
    /// A readable account of each step, for `--verbose` and the demo.
    pub log: Vec<String>,
}

impl ScenarioReport {
    /// Expectations that held.
    pub fn passed(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|outcome| outcome.passed)
            .count()
    }

    /// Expectations that failed, malformed lines and unexpected errors.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }
}

/// Totals over several scenarios; prints as `N passed, M failed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Expectations that held.
    pub passed: usize,
    /// Everything that did not.
    pub failed: usize,
}

impl Summary {
    /// Adds a scenario's counts.
    pub fn add(&mut self, report: &ScenarioReport) {
        self.passed += report.passed();
        self.failed += report.failed();
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} passed, {} failed", self.passed, self.failed)
    }
}

/// Replays scenarios against kernels built from one base config and one extension registry.
#[derive(Debug, Clone)]
pub struct Replayer {
    registry: ExtensionRegistry,
    base_text: String,
    base_file: String,
    real_llm: Option<mnemo_kernel::host::LlmConfig>,
}

struct Run<'a> {
    kernel: &'a Kernel,
    /// A real model answers; scripted replies are skipped.
    real_llm: bool,
    /// Tool results kept with `save_as`.
    saved: std::collections::HashMap<String, Value>,
    llm: &'a ScriptedLlm,
    report: ScenarioReport,
    user_id: String,
    session_id: String,
    chat_id: Option<String>,
}

fn merge(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(existing)), toml::Value::Table(incoming)) => {
                merge(existing, incoming)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl Replayer {
    /// A replayer for `registry`'s extensions, configured by `base_text` (read from `base_file`).
    pub fn new(
        registry: ExtensionRegistry,
        base_text: impl Into<String>,
        base_file: impl Into<String>,
    ) -> Self {
        Self {
            registry,
            base_text: base_text.into(),
            base_file: base_file.into(),
            real_llm: None,
        }
    }

    /// Uses this real model instead of the scripted one: `llm_reply` lines are then skipped,
    /// and expectations about the model's words may not hold (the demo with a configured LLM).
    pub fn with_real_llm(mut self, llm: mnemo_kernel::host::LlmConfig) -> Self {
        self.real_llm = Some(llm);
        self
    }

    /// Reads and replays one scenario file. Never fails: problems are failed outcomes.
    pub async fn run_file(&self, path: &Path) -> ScenarioReport {
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => self.run_text(&text, &name).await,
            Err(err) => ScenarioReport {
                name: name.clone(),
                outcomes: vec![Outcome {
                    line: 0,
                    label: "read scenario".to_owned(),
                    passed: false,
                    detail: format!("cannot read {name}: {err}"),
                }],
                log: Vec::new(),
            },
        }
    }

    /// Parses and replays scenario text.
    pub async fn run_text(&self, text: &str, name: &str) -> ScenarioReport {
        match parse_scenario(text, name) {
            Ok(scenario) => self.run(&scenario).await,
            Err(errors) => ScenarioReport {
                name: name.to_owned(),
                outcomes: errors
                    .into_iter()
                    .map(|error| Outcome {
                        line: error.line,
                        label: "parse".to_owned(),
                        passed: false,
                        detail: error.message,
                    })
                    .collect(),
                log: Vec::new(),
            },
        }
    }

    fn config_for(&self, scenario: &Scenario) -> Result<Config, String> {
        let Some(overlay) = &scenario.config else {
            return Config::parse(&self.base_text, &self.base_file).map_err(|err| err.to_string());
        };
        let mut base: toml::Table = toml::from_str(&self.base_text)
            .map_err(|err| format!("{}: not valid TOML: {err}", self.base_file))?;
        let overlay = match toml::Value::try_from(overlay) {
            Ok(toml::Value::Table(table)) => table,
            Ok(_) => return Err("the config line's `set` must be an object".to_owned()),
            Err(err) => return Err(format!("the config line's `set` is not TOML-shaped: {err}")),
        };
        merge(&mut base, overlay);
        let text = toml::to_string(&base).map_err(|err| err.to_string())?;
        let file = format!("{} + config line of {}", self.base_file, scenario.name);
        Config::parse(&text, &file).map_err(|err| err.to_string())
    }

    /// Replays a parsed scenario on a fresh kernel with a temporary data directory.
    pub async fn run(&self, scenario: &Scenario) -> ScenarioReport {
        let mut report = ScenarioReport {
            name: scenario.name.clone(),
            ..ScenarioReport::default()
        };
        let fail_whole = |mut report: ScenarioReport, label: &str, detail: String| {
            report.outcomes.push(Outcome {
                line: 0,
                label: label.to_owned(),
                passed: false,
                detail,
            });
            report
        };
        let config = match self.config_for(scenario) {
            Ok(config) => config,
            Err(err) => return fail_whole(report, "config", err),
        };
        let data_dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(err) => return fail_whole(report, "data directory", err.to_string()),
        };
        let llm = Arc::new(ScriptedLlm::new());
        let mut builder = Kernel::builder(self.registry.clone(), config.clone())
            .virtual_clock(scenario.start)
            .data_dir(data_dir.path());
        builder = match &self.real_llm {
            Some(real) => match mnemo_kernel::host::OpenAiClient::new(real) {
                Ok(client) => builder.llm(Arc::new(client) as Arc<dyn LlmClient>),
                Err(err) => return fail_whole(report, "real model", err.to_string()),
            },
            None if scenario.with_llm => builder.llm(llm.clone() as Arc<dyn LlmClient>),
            None => builder,
        };
        let kernel = match builder.start().await {
            Ok(kernel) => kernel,
            Err(err) => return fail_whole(report, "start kernel", err.to_string()),
        };
        report.log.push(format!(
            "kernel started at {} with extensions: {}",
            scenario.start.format("%Y-%m-%d %H:%M"),
            kernel.extension_names().join(", ")
        ));
        let mut run = Run {
            kernel: &kernel,
            real_llm: self.real_llm.is_some(),
            saved: std::collections::HashMap::new(),
            llm: &llm,
            report,
            user_id: "user".to_owned(),
            session_id: "session".to_owned(),
            chat_id: None,
        };
        for (line, step) in &scenario.steps {
            run.step(*line, step).await;
        }
        kernel.shutdown().await;
        run.report
    }
}

impl Run<'_> {
    fn outcome(&mut self, line: usize, label: String, problems: Vec<String>, seen: String) {
        let passed = problems.is_empty();
        self.report.outcomes.push(Outcome {
            line,
            label,
            passed,
            detail: if passed {
                seen
            } else {
                format!("{}; got: {}", problems.join("; "), shorten(&seen))
            },
        });
    }

    fn unexpected(&mut self, line: usize, label: String, detail: String) {
        self.report
            .log
            .push(format!("line {line}: {label} failed: {detail}"));
        self.report.outcomes.push(Outcome {
            line,
            label,
            passed: false,
            detail,
        });
    }

    fn scope(&self, who: &Who) -> ToolScope {
        ToolScope {
            user_id: who.user_id.clone().unwrap_or_else(|| self.user_id.clone()),
            session_id: Some(
                who.session_id
                    .clone()
                    .unwrap_or_else(|| self.session_id.clone()),
            ),
            chat_id: who.chat_id.clone().or_else(|| self.chat_id.clone()),
            at: self.kernel.context().now(),
            caller: mnemo_kernel::ToolCaller::Client,
        }
    }

    fn turn_input(&self, who: &Who, text: &str) -> TurnInput {
        let scope = self.scope(who);
        TurnInput {
            user_id: scope.user_id,
            session_id: scope.session_id.unwrap_or_default(),
            chat_id: scope.chat_id,
            text: text.to_owned(),
        }
    }

    async fn advance(&mut self, line: usize, to: DateTime<Utc>) {
        match self.kernel.advance_to(to).await {
            Ok(runs) => {
                for job_run in runs {
                    let outcome = match &job_run.outcome {
                        Ok(report) => report.clone(),
                        Err(error) => format!("FAILED: {error}"),
                    };
                    self.report.log.push(format!(
                        "{} job {}: {}",
                        job_run.at.format("%Y-%m-%d %H:%M"),
                        job_run.job,
                        outcome
                    ));
                }
            }
            Err(err) => self.unexpected(line, "advance clock".to_owned(), err.to_string()),
        }
    }
}

//! Replaying a scenario against a real kernel.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use mnemo_kernel::host::{Config, ExtensionRegistry, Kernel, ScriptedLlm, TurnInput};
use mnemo_kernel::{LlmClient, ToolScope};
use serde_json::Value;

use crate::parse::{parse_scenario, CountOf, Expect, Scenario, Step, Who};

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

fn lower_contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The texts of a search-like result: an array, or an object with `results`; each item's
/// `content`, or the item itself.
fn result_texts(value: &Value) -> Vec<String> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::Object(object) => match object.get("results").and_then(Value::as_array) {
            Some(items) => items.as_slice(),
            None => return vec![value.to_string()],
        },
        other => return vec![other.to_string()],
    };
    items
        .iter()
        .map(|item| match item.get("content").and_then(Value::as_str) {
            Some(content) => content.to_owned(),
            None => item
                .as_str()
                .map_or_else(|| item.to_string(), str::to_owned),
        })
        .collect()
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

/// Checks `text` against an expectation's text parts; returns the failures.
fn check_text(expect: &Expect, text: &str, problems: &mut Vec<String>) {
    for needle in &expect.contains {
        if !lower_contains(text, needle) {
            problems.push(format!("missing {needle:?}"));
        }
    }
    for needle in &expect.not_contains {
        if lower_contains(text, needle) {
            problems.push(format!("unexpected {needle:?}"));
        }
    }
}

fn shorten(text: &str) -> String {
    const LIMIT: usize = 160;
    let flat = text.replace('\n', " ⏎ ");
    match flat.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
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

/// Looks up `name.field.0.field` in the saved results.
fn lookup(saved: &std::collections::HashMap<String, Value>, reference: &str) -> Option<Value> {
    let mut parts = reference.split('.');
    let mut value = saved.get(parts.next()?)?;
    for part in parts {
        value = match part.parse::<usize>() {
            Ok(index) => value.get(index)?,
            Err(_) => value.get(part)?,
        };
    }
    Some(value.clone())
}

/// Replaces every string `"${name.path}"` in `value` by the saved value it names.
fn substitute(
    saved: &std::collections::HashMap<String, Value>,
    value: &Value,
) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => match text
            .strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Some(reference) => lookup(saved, reference)
                .ok_or_else(|| format!("nothing saved under `{reference}`"))?,
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute(saved, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, item)| Ok((key.clone(), substitute(saved, item)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
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

    async fn step(&mut self, line: usize, step: &Step) {
        match step {
            Step::Event(event) => {
                if event.at > self.kernel.context().now() {
                    self.advance(line, event.at).await;
                }
                self.user_id = event.user_id.clone();
                self.session_id = event.session_id.clone();
                self.chat_id = event.chat_id.clone();
                let kind = match event.kind {
                    mnemo_kernel::ConversationKind::UserMessage => "user",
                    mnemo_kernel::ConversationKind::AgentResponse => "agent",
                };
                self.report.log.push(format!(
                    "{} {kind} [{}/{}]: {}",
                    event.at.format("%Y-%m-%d %H:%M"),
                    event.user_id,
                    event.session_id,
                    shorten(&event.text)
                ));
                match self.kernel.publish(event.clone().into_event()).await {
                    Ok(_) => self.kernel.settle().await,
                    Err(err) => self.unexpected(line, "publish event".to_owned(), err.to_string()),
                }
            }
            Step::Advance { to } => self.advance(line, *to).await,
            Step::AdvanceBy { by } => {
                let to = self.kernel.context().now() + *by;
                self.advance(line, to).await;
            }
            Step::LlmReply(reply) => {
                if self.real_llm {
                    self.report
                        .log
                        .push("(a real model answers: the scripted reply is not used)".to_owned());
                } else {
                    self.llm.push(reply.clone());
                }
            }
            Step::ToolCall {
                tool,
                args,
                who,
                expect,
                save_as,
            } => {
                let scope = self.scope(who);
                let args = match substitute(&self.saved, args) {
                    Ok(args) => args,
                    Err(err) => {
                        self.unexpected(line, format!("tool_call {tool}"), err);
                        return;
                    }
                };
                let result = self.kernel.call_tool(&scope, tool, args.clone()).await;
                if let (Some(name), Ok(value)) = (save_as, &result) {
                    self.saved.insert(name.clone(), value.clone());
                }
                self.kernel.settle().await;
                let shown = match &result {
                    Ok(value) => value.to_string(),
                    Err(err) => format!("error: {err}"),
                };
                self.report
                    .log
                    .push(format!("tool {tool} {args} → {}", shorten(&shown)));
                let label = format!("tool_call {tool}");
                match expect {
                    None => {
                        if let Err(err) = result {
                            self.unexpected(line, label, err.to_string());
                        }
                    }
                    Some(expect) => {
                        let mut problems = Vec::new();
                        match &result {
                            Ok(value) => {
                                if expect.ok == Some(false) || expect.error_contains.is_some() {
                                    problems.push("expected an error".to_owned());
                                }
                                if let Some(equals) = &expect.equals {
                                    if value != equals {
                                        problems.push(format!("expected {equals}"));
                                    }
                                }
                                check_text(expect, &value.to_string(), &mut problems);
                            }
                            Err(err) => {
                                let message = err.to_string();
                                match &expect.error_contains {
                                    Some(needle) if lower_contains(&message, needle) => {}
                                    Some(needle) => {
                                        problems.push(format!("error lacks {needle:?}"))
                                    }
                                    None if expect.ok == Some(false) => {}
                                    None => problems.push("unexpected error".to_owned()),
                                }
                            }
                        }
                        self.outcome(line, label, problems, shown);
                    }
                }
            }
            Step::RunJob { job, expect } => {
                let label = format!("run_job {job}");
                match self.kernel.run_job(job).await {
                    Ok(job_run) => {
                        self.kernel.settle().await;
                        let shown = match &job_run.outcome {
                            Ok(report) => report.clone(),
                            Err(error) => format!("error: {error}"),
                        };
                        self.report.log.push(format!("job {job}: {shown}"));
                        let mut problems = Vec::new();
                        let expect = expect.clone().unwrap_or(Expect {
                            ok: Some(true),
                            ..Expect::default()
                        });
                        match (&job_run.outcome, expect.ok) {
                            (Ok(_), Some(false)) => {
                                problems.push("expected the job to fail".to_owned())
                            }
                            (Err(_), Some(true)) | (Err(_), None)
                                if expect.error_contains.is_none() =>
                            {
                                problems.push("the job failed".to_owned())
                            }
                            _ => {}
                        }
                        if let (Err(error), Some(needle)) =
                            (&job_run.outcome, &expect.error_contains)
                        {
                            if !lower_contains(error, needle) {
                                problems.push(format!("error lacks {needle:?}"));
                            }
                        }
                        check_text(&expect, &shown, &mut problems);
                        self.outcome(line, label, problems, shown);
                    }
                    Err(err) => {
                        let message = err.to_string();
                        match expect
                            .as_ref()
                            .and_then(|expect| expect.error_contains.as_ref())
                        {
                            Some(needle) if lower_contains(&message, needle) => {
                                self.outcome(line, label, Vec::new(), message)
                            }
                            _ => self.unexpected(line, label, message),
                        }
                    }
                }
            }
            Step::AgentTurn { text, who, expect } => {
                let input = self.turn_input(who, text);
                self.report.log.push(format!(
                    "agent turn [{}/{}]: {}",
                    input.user_id,
                    input.session_id,
                    shorten(text)
                ));
                let result = self.kernel.run_turn(&input, &[]).await;
                self.kernel.settle().await;
                let label = "agent_turn".to_owned();
                // The calls that ran are shown for a failed turn too: what they did stands.
                let calls = match &result {
                    Ok(outcome) => outcome.tool_calls.as_slice(),
                    Err(mnemo_kernel::KernelError::TurnFailedAfterTools { tool_calls, .. }) => {
                        tool_calls.as_slice()
                    }
                    Err(_) => &[],
                };
                for (call, result) in calls {
                    let shown = match result {
                        Ok(value) => value.to_string(),
                        Err(err) => format!("error: {err}"),
                    };
                    self.report.log.push(format!(
                        "  model called {} {} → {}",
                        call.name,
                        call.arguments,
                        shorten(&shown)
                    ));
                }
                match (result, expect) {
                    (Ok(outcome), expect) => {
                        self.report
                            .log
                            .push(format!("  agent replied: {}", shorten(&outcome.reply)));
                        if let Some(expect) = expect {
                            let mut problems = Vec::new();
                            if expect.ok == Some(false) || expect.error_contains.is_some() {
                                problems.push("expected the turn to fail".to_owned());
                            }
                            if let Some(count) = expect.tool_calls {
                                if outcome.tool_calls.len() != count {
                                    problems.push(format!(
                                        "expected {count} tool calls, saw {}",
                                        outcome.tool_calls.len()
                                    ));
                                }
                            }
                            check_text(expect, &outcome.reply, &mut problems);
                            self.outcome(line, label, problems, outcome.reply);
                        }
                    }
                    (Err(err), Some(expect))
                        if expect.ok == Some(false) || expect.error_contains.is_some() =>
                    {
                        let message = err.to_string();
                        let mut problems = Vec::new();
                        if let Some(needle) = &expect.error_contains {
                            if !lower_contains(&message, needle) {
                                problems.push(format!("error lacks {needle:?}"));
                            }
                        }
                        self.outcome(line, label, problems, message);
                    }
                    (Err(err), _) => self.unexpected(line, label, err.to_string()),
                }
            }
            Step::ExpectContext {
                prompt,
                who,
                contains,
                not_contains,
            } => {
                let input = self.turn_input(who, prompt);
                let prepared = self.kernel.prepare_turn(&input, 0).await;
                self.report.log.push(format!(
                    "context for {prompt:?} ({} blocks):\n{}",
                    prepared.blocks.len(),
                    prepared.system_prompt
                ));
                let expect = Expect {
                    contains: contains.clone(),
                    not_contains: not_contains.clone(),
                    ..Expect::default()
                };
                let mut problems = Vec::new();
                check_text(&expect, &prepared.system_prompt, &mut problems);
                self.outcome(
                    line,
                    format!("expect_context {prompt:?}"),
                    problems,
                    prepared.system_prompt,
                );
            }
            Step::ExpectLlmRequest {
                index,
                contains,
                not_contains,
            } => {
                let requests = self.llm.requests();
                let label = format!("expect_llm_request {index}");
                let position = if *index < 0 {
                    requests.len().checked_sub(index.unsigned_abs() as usize)
                } else {
                    (*index as usize).checked_sub(1)
                };
                let Some(request) = position.and_then(|position| requests.get(position)) else {
                    let problem = format!(
                        "there is no request {index}: the model got {}",
                        requests.len()
                    );
                    self.outcome(line, label, vec![problem], String::new());
                    return;
                };
                let sent = request
                    .messages
                    .iter()
                    .map(|message| message.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let expect = Expect {
                    contains: contains.clone(),
                    not_contains: not_contains.clone(),
                    ..Expect::default()
                };
                let mut problems = Vec::new();
                check_text(&expect, &sent, &mut problems);
                self.outcome(line, label, problems, sent);
            }
            Step::ExpectSearch {
                tool,
                query,
                args,
                who,
                contains,
                not_contains,
                top,
                count,
            } => {
                let mut arguments = args.clone();
                arguments.insert("query".to_owned(), Value::String(query.clone()));
                let scope = self.scope(who);
                let label = format!("expect_search {query:?}");
                match self
                    .kernel
                    .call_tool(&scope, tool, Value::Object(arguments))
                    .await
                {
                    Ok(value) => {
                        let texts = result_texts(&value);
                        self.report.log.push(format!(
                            "search {query:?} → {} results{}",
                            texts.len(),
                            listing(&texts)
                        ));
                        let mut problems = text_problems(&texts, contains, not_contains, "result");
                        if let Some(needle) = top {
                            if !texts
                                .first()
                                .is_some_and(|text| lower_contains(text, needle))
                            {
                                problems.push(format!("first result lacks {needle:?}"));
                            }
                        }
                        if let Some(count) = count {
                            if texts.len() != *count {
                                problems
                                    .push(format!("expected {count} results, got {}", texts.len()));
                            }
                        }
                        self.outcome(line, label, problems, texts.join(" | "));
                    }
                    Err(err) => self.unexpected(line, label, err.to_string()),
                }
            }
            Step::ExpectMemories {
                user_id,
                chat_id,
                kind,
                inactive,
                contains,
                not_contains,
                count,
            } => {
                let owner = user_id.clone().unwrap_or_else(|| self.user_id.clone());
                let label = format!("expect_memories {owner}");
                let Some(memory) = self
                    .kernel
                    .context()
                    .services()
                    .get::<dyn mnemo_memory_api::MemoryApi>()
                else {
                    self.unexpected(
                        line,
                        label,
                        "the memory extension is not enabled".to_owned(),
                    );
                    return;
                };
                let request = mnemo_memory_api::ListRequest {
                    chat_id: chat_id.clone(),
                    kinds: kind.iter().copied().collect(),
                    include_inactive: *inactive,
                    ..mnemo_memory_api::ListRequest::active(owner.clone(), 1_000)
                };
                match memory.list_memories(request).await {
                    Ok(memories) => {
                        let texts: Vec<&str> = memories
                            .iter()
                            .map(|memory| memory.content.as_str())
                            .collect();
                        self.report.log.push(format!(
                            "{owner} has {} memories{}",
                            texts.len(),
                            listing(&texts)
                        ));
                        let mut problems = text_problems(&texts, contains, not_contains, "memory");
                        if let Some(count) = count {
                            if texts.len() != *count {
                                problems.push(format!(
                                    "expected {count} memories, found {}",
                                    texts.len()
                                ));
                            }
                        }
                        self.outcome(line, label, problems, texts.join(" | "));
                    }
                    Err(err) => self.unexpected(line, label, err.to_string()),
                }
            }
            Step::WriteFile { path, text } => {
                let full = self.kernel.context().data_dir().join(path);
                let written = match full.parent() {
                    Some(parent) => std::fs::create_dir_all(parent),
                    None => Ok(()),
                }
                .and_then(|()| std::fs::write(&full, text));
                match written {
                    Ok(()) => self.report.log.push(format!("wrote {path}")),
                    Err(err) => {
                        self.unexpected(line, format!("write_file {path}"), err.to_string())
                    }
                }
            }
            Step::ExpectFile {
                path,
                exists,
                contains,
                not_contains,
            } => {
                let full = self.kernel.context().data_dir().join(path);
                let label = format!("expect_file {path}");
                let mut problems = Vec::new();
                let seen = match std::fs::read_to_string(&full) {
                    Ok(text) => {
                        if !exists {
                            problems.push("the file exists".to_owned());
                        }
                        for needle in contains {
                            if !text.contains(needle.as_str()) {
                                problems.push(format!("missing {needle:?}"));
                            }
                        }
                        for needle in not_contains {
                            if text.contains(needle.as_str()) {
                                problems.push(format!("unexpected {needle:?}"));
                            }
                        }
                        text
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                        if *exists {
                            problems.push("no such file".to_owned());
                        }
                        "(no file)".to_owned()
                    }
                    Err(err) => {
                        problems.push(format!("cannot read it: {err}"));
                        String::new()
                    }
                };
                self.outcome(line, label, problems, seen);
            }
            Step::ExpectCount { of, equals } => {
                let (label, actual) = match of {
                    CountOf::Events(topic) => (
                        format!("expect_count events {topic}"),
                        Ok(self.kernel.context().router().published(topic)),
                    ),
                    CountOf::JobRuns(job) => (
                        format!("expect_count job_runs {job}"),
                        self.kernel
                            .job_totals(job)
                            .map(|totals| totals.runs)
                            .ok_or_else(|| format!("no job `{job}`")),
                    ),
                    CountOf::JobFailures(job) => (
                        format!("expect_count job_failures {job}"),
                        self.kernel
                            .job_totals(job)
                            .map(|totals| totals.failures)
                            .ok_or_else(|| format!("no job `{job}`")),
                    ),
                    CountOf::LlmRequests => (
                        "expect_count llm_requests".to_owned(),
                        Ok(self.llm.requests().len() as u64),
                    ),
                    CountOf::LlmRepliesLeft => (
                        "expect_count llm_replies_left".to_owned(),
                        Ok(self.llm.remaining() as u64),
                    ),
                    CountOf::Tools => (
                        "expect_count tools".to_owned(),
                        Ok(self.kernel.tools().len() as u64),
                    ),
                    CountOf::Jobs => (
                        "expect_count jobs".to_owned(),
                        Ok(self.kernel.jobs().len() as u64),
                    ),
                    CountOf::ToolResults { tool, args, who } => {
                        let scope = self.scope(who);
                        let result = self.kernel.call_tool(&scope, tool, args.clone()).await;
                        (
                            format!("expect_count tool_results {tool}"),
                            result
                                .map(|value| result_texts(&value).len() as u64)
                                .map_err(|err| err.to_string()),
                        )
                    }
                };
                match actual {
                    Ok(actual) => {
                        let problems = if actual == *equals {
                            Vec::new()
                        } else {
                            vec![format!("expected {equals}")]
                        };
                        self.outcome(line, label, problems, actual.to_string());
                    }
                    Err(err) => self.unexpected(line, label, err),
                }
            }
        }
    }
}

/// One indented line per text, shortened, for the scenario's log.
fn listing(texts: &[impl AsRef<str>]) -> String {
    texts
        .iter()
        .map(|text| format!("\n  - {}", shorten(text.as_ref())))
        .collect()
}

/// What is wrong with `texts` (search results, stored memories, each a `what`): a text of
/// `contains` that none holds, or one of `not_contains` that some holds (case-insensitive).
fn text_problems(
    texts: &[impl AsRef<str>],
    contains: &[String],
    not_contains: &[String],
    what: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for needle in contains {
        if !texts
            .iter()
            .any(|text| lower_contains(text.as_ref(), needle))
        {
            problems.push(format!("no {what} contains {needle:?}"));
        }
    }
    for needle in not_contains {
        if texts
            .iter()
            .any(|text| lower_contains(text.as_ref(), needle))
        {
            problems.push(format!("a {what} contains {needle:?}"));
        }
    }
    problems
}

//! Reading scenario files.

use chrono::{DateTime, Duration, Utc};
use mnemo_kernel::host::ScriptedReply;
use mnemo_kernel::ConversationEvent;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A parsed scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Where it came from.
    pub name: String,
    /// Keys merged into the base config, from a leading `config` line.
    pub config: Option<Value>,
    /// The virtual clock's start.
    pub start: DateTime<Utc>,
    /// Whether the kernel gets the scripted model; `"llm": false` in the `config` line runs it
    /// with no model at all, as a user without `[llm]` would.
    pub with_llm: bool,
    /// The steps, with their 1-based line numbers.
    pub steps: Vec<(usize, Step)>,
}

/// A malformed line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct LineError {
    /// The scenario file.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Who a step acts for; missing ids default to the last conversation event's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Who {
    /// The user.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The chat.
    #[serde(default)]
    pub chat_id: Option<String>,
}

/// What a tool call, job run or agent turn must produce.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Must succeed (`true`) or fail (`false`).
    #[serde(default)]
    pub ok: Option<bool>,
    /// Must fail with an error containing this text.
    #[serde(default)]
    pub error_contains: Option<String>,
    /// The result (or reply, or job report) must contain each text (case-insensitive).
    #[serde(default)]
    pub contains: Vec<String>,
    /// The result must contain none of these texts.
    #[serde(default)]
    pub not_contains: Vec<String>,
    /// The result must equal this JSON value.
    #[serde(default)]
    pub equals: Option<Value>,
    /// The agent turn must make exactly this many tool calls.
    #[serde(default)]
    pub tool_calls: Option<usize>,
}

/// One scenario step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Publish a conversation event; the clock first moves to its time (firing due jobs).
    Event(ConversationEvent),
    /// Move the virtual clock, firing every job that comes due.
    Advance {
        /// The new time.
        to: DateTime<Utc>,
    },
    /// Move the virtual clock by a duration.
    AdvanceBy {
        /// How far.
        by: Duration,
    },
    /// Queue a scripted LLM reply.
    LlmReply(ScriptedReply),
    /// Call a tool as the agent would.
    ToolCall {
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Value,
        /// Caller.
        who: Who,
        /// Expectation, if any; without one, an error fails the step.
        expect: Option<Expect>,
        /// Keep the result under this name; later arguments may say `"${name.field}"`.
        save_as: Option<String>,
    },
    /// Run a job by name now.
    RunJob {
        /// Job name.
        job: String,
        /// Expectation on the run's outcome.
        expect: Option<Expect>,
    },
    /// Run a whole agent turn on the scripted model.
    AgentTurn {
        /// The user's message.
        text: String,
        /// Speaker.
        who: Who,
        /// Expectation on the reply.
        expect: Option<Expect>,
    },
    /// The system prompt for `prompt` must (not) contain texts.
    ExpectContext {
        /// The user's message.
        prompt: String,
        /// Speaker.
        who: Who,
        /// Texts that must appear.
        contains: Vec<String>,
        /// Texts that must not appear.
        not_contains: Vec<String>,
    },
    /// What the scripted model was sent in one request must (not) contain texts.
    ExpectLlmRequest {
        /// Which request: 1 for the first, -1 for the last (the default).
        index: i64,
        /// Texts that must appear in its messages.
        contains: Vec<String>,
        /// Texts that must not appear in its messages.
        not_contains: Vec<String>,
    },
    /// A search tool's results must (not) contain texts, in order or count.
    ExpectSearch {
        /// The search tool.
        tool: String,
        /// The query.
        query: String,
        /// Extra arguments.
        args: Map<String, Value>,
        /// Caller.
        who: Who,
        /// Texts some result must contain.
        contains: Vec<String>,
        /// Texts no result may contain.
        not_contains: Vec<String>,
        /// Text the first result must contain.
        top: Option<String>,
        /// Exact number of results.
        count: Option<usize>,
    },
    /// One user's stored memories, as the memory service lists them, must (not) hold texts.
    ExpectMemories {
        /// The owner; the last event's user by default.
        user_id: Option<String>,
        /// Only this chat's memories; every scope of the owner when absent.
        chat_id: Option<String>,
        /// Only this kind.
        kind: Option<mnemo_memory_api::MemoryKind>,
        /// Also memories no longer active (decayed, corrected, superseded, expired).
        inactive: bool,
        /// Texts some memory must contain.
        contains: Vec<String>,
        /// Texts no memory may contain.
        not_contains: Vec<String>,
        /// Exact number of memories.
        count: Option<usize>,
    },
    /// A count must equal a number.
    ExpectCount {
        /// What is counted.
        of: CountOf,
        /// The expected number.
        equals: u64,
    },
    /// Write a file in the data directory, as a person editing it by hand would.
    WriteFile {
        /// Relative to the data directory; never leaves it.
        path: String,
        /// The whole new text.
        text: String,
    },
    /// A file in the data directory must (not) exist and (not) contain texts.
    ExpectFile {
        /// Relative to the data directory; never leaves it.
        path: String,
        /// Whether it must exist.
        exists: bool,
        /// Texts that must appear (exact case).
        contains: Vec<String>,
        /// Texts that must not appear.
        not_contains: Vec<String>,
    },
}

/// What an `expect_count` counts.
#[derive(Debug, Clone, PartialEq)]
pub enum CountOf {
    /// Events published on a topic.
    Events(String),
    /// Runs of a job.
    JobRuns(String),
    /// Failed runs of a job.
    JobFailures(String),
    /// Requests the scripted model received.
    LlmRequests,
    /// Scripted replies not used yet.
    LlmRepliesLeft,
    /// Tools offered by enabled extensions.
    Tools,
    /// Jobs registered by enabled extensions.
    Jobs,
    /// Items a tool call returns.
    ToolResults {
        /// The tool.
        tool: String,
        /// Its arguments.
        args: Value,
        /// Caller.
        who: Who,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RawStep {
    Config {
        #[serde(default)]
        set: Option<Value>,
        #[serde(default)]
        start: Option<DateTime<Utc>>,
        #[serde(default)]
        llm: Option<bool>,
    },
    Advance {
        #[serde(default)]
        to: Option<DateTime<Utc>>,
        #[serde(default)]
        by: Option<String>,
    },
    LlmReply {
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        tool_calls: Option<Vec<mnemo_kernel::LlmToolCall>>,
        #[serde(default)]
        error: Option<String>,
    },
    ToolCall {
        tool: String,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        expect: Option<Expect>,
        #[serde(default)]
        save_as: Option<String>,
    },
    RunJob {
        job: String,
        #[serde(default)]
        expect: Option<Expect>,
    },
    AgentTurn {
        text: String,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        expect: Option<Expect>,
    },
    ExpectContext {
        prompt: String,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
    },
    ExpectLlmRequest {
        #[serde(default = "last_request")]
        index: i64,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
    },
    ExpectSearch {
        #[serde(default = "default_search_tool")]
        tool: String,
        query: String,
        #[serde(default)]
        args: Map<String, Value>,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
        #[serde(default)]
        top: Option<String>,
        #[serde(default)]
        count: Option<usize>,
    },
    ExpectMemories {
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        inactive: bool,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
        #[serde(default)]
        count: Option<usize>,
    },
    WriteFile {
        path: String,
        text: String,
    },
    ExpectFile {
        path: String,
        #[serde(default = "yes")]
        exists: bool,
        #[serde(default)]
        contains: Vec<String>,
        #[serde(default)]
        not_contains: Vec<String>,
    },
    ExpectCount {
        of: String,
        equals: u64,
        #[serde(default)]
        topic: Option<String>,
        #[serde(default)]
        job: Option<String>,
        #[serde(default)]
        tool: Option<String>,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        user_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        chat_id: Option<String>,
    },
}

fn yes() -> bool {
    true
}

/// A path a scenario may name: relative, and with no `..`, so it stays in the data directory.
fn inside_data_dir(path: &str) -> bool {
    !path.is_empty()
        && std::path::Path::new(path)
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)))
}

fn last_request() -> i64 {
    -1
}

fn default_search_tool() -> String {
    "search_memory".to_owned()
}

/// When a scenario names no time at all, its clock starts here.
fn default_start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .map(|time| time.with_timezone(&Utc))
        .unwrap_or_default()
}

/// Longest `advance` step accepted: a hundred years, far beyond any scenario, and far from the
/// end of the clock's range.
const MAX_DURATION_DAYS: i64 = 36_500;

fn max_duration() -> Duration {
    Duration::days(MAX_DURATION_DAYS)
}

/// Parses a duration such as `10d`, `3h`, `90m`, `45s`, `2w` or `1d12h`, up to
/// [`MAX_DURATION_DAYS`].
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = Duration::zero();
    let mut digits = String::new();
    let mut saw_unit = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let amount: i64 = digits
            .parse()
            .map_err(|_| format!("`{text}`: expected a number before `{c}`"))?;
        digits.clear();
        let unit = match c {
            'w' => Duration::try_weeks(amount),
            'd' => Duration::try_days(amount),
            'h' => Duration::try_hours(amount),
            'm' => Duration::try_minutes(amount),
            's' => Duration::try_seconds(amount),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}`; use w, d, h, m or s"
                ))
            }
        };
        total = unit
            .and_then(|unit| total.checked_add(&unit))
            .filter(|total| *total <= max_duration())
            .ok_or_else(|| format!("`{text}`: longer than {} days", MAX_DURATION_DAYS))?;
        saw_unit = true;
    }
    if !digits.is_empty() || !saw_unit {
        return Err(format!(
            "`{text}`: expected amounts with units, such as 10d or 1d12h"
        ));
    }
    Ok(total)
}

fn who(user_id: Option<String>, session_id: Option<String>, chat_id: Option<String>) -> Who {
    Who {
        user_id,
        session_id,
        chat_id,
    }
}

/// Parses a scenario; every malformed line is reported with its number.
///
/// Blank lines and lines starting with `#` or `//` are comments. A `config` line may come only
/// before every other step.
///
/// # Errors
/// Every malformed line.
pub fn parse_scenario(text: &str, name: &str) -> Result<Scenario, Vec<LineError>> {
    let mut errors = Vec::new();
    let mut steps = Vec::new();
    let mut config = None;
    let mut start = None;
    let mut with_llm = true;
    let mut first_time = None;
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw_line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("//") {
            continue;
        }
        let mut fail = |message: String| {
            errors.push(LineError {
                file: name.to_owned(),
                line,
                message,
            })
        };
        let value: Value = match serde_json::from_str(trimmed) {
            Ok(value) => value,
            Err(err) => {
                fail(format!("malformed line: not JSON: {err}"));
                continue;
            }
        };
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind == "user_message" || kind == "agent_response" {
            match ConversationEvent::from_value(value) {
                Ok(event) => {
                    first_time.get_or_insert(event.at);
                    steps.push((line, Step::Event(event)));
                }
                Err(err) => fail(format!("malformed line: {err}")),
            }
            continue;
        }
        let raw: RawStep = match serde_json::from_value(value) {
            Ok(raw) => raw,
            Err(err) => {
                fail(format!("malformed line: {err}"));
                continue;
            }
        };
        let step = match raw {
            RawStep::Config {
                set,
                start: at,
                llm,
            } => {
                if !steps.is_empty() || config.is_some() || start.is_some() {
                    fail("malformed line: a `config` line must come first, once".to_owned());
                    continue;
                }
                if let Some(set) = &set {
                    if !set.is_object() {
                        fail(
                            "malformed line: `set` must be an object of config sections".to_owned(),
                        );
                        continue;
                    }
                }
                config = set;
                start = at;
                with_llm = llm.unwrap_or(true);
                continue;
            }
            RawStep::Advance {
                to: Some(to),
                by: None,
            } => {
                first_time.get_or_insert(to);
                Step::Advance { to }
            }
            RawStep::Advance {
                to: None,
                by: Some(by),
            } => match parse_duration(&by) {
                Ok(by) => Step::AdvanceBy { by },
                Err(err) => {
                    fail(format!("malformed line: `by`: {err}"));
                    continue;
                }
            },
            RawStep::Advance { .. } => {
                fail("malformed line: `advance` takes exactly one of `to` and `by`".to_owned());
                continue;
            }
            RawStep::LlmReply {
                text,
                tool_calls,
                error,
            } => match (text, tool_calls, error) {
                (Some(text), None, None) => Step::LlmReply(ScriptedReply::Text(text)),
                (None, Some(calls), None) => Step::LlmReply(ScriptedReply::ToolCalls(calls)),
                (None, None, Some(error)) if error == "timeout" => {
                    Step::LlmReply(ScriptedReply::Timeout)
                }
                (None, None, Some(error)) => Step::LlmReply(ScriptedReply::Error(error)),
                _ => {
                    fail("malformed line: `llm_reply` takes exactly one of `text`, `tool_calls` and `error`".to_owned());
                    continue;
                }
            },
            RawStep::ToolCall {
                tool,
                args,
                user_id,
                session_id,
                chat_id,
                expect,
                save_as,
            } => Step::ToolCall {
                tool,
                args,
                who: who(user_id, session_id, chat_id),
                expect,
                save_as,
            },
            RawStep::RunJob { job, expect } => Step::RunJob { job, expect },
            RawStep::AgentTurn {
                text,
                user_id,
                session_id,
                chat_id,
                expect,
            } => Step::AgentTurn {
                text,
                who: who(user_id, session_id, chat_id),
                expect,
            },
            RawStep::ExpectContext {
                prompt,
                user_id,
                session_id,
                chat_id,
                contains,
                not_contains,
            } => Step::ExpectContext {
                prompt,
                who: who(user_id, session_id, chat_id),
                contains,
                not_contains,
            },
            RawStep::ExpectLlmRequest {
                index,
                contains,
                not_contains,
            } => Step::ExpectLlmRequest {
                index,
                contains,
                not_contains,
            },
            RawStep::ExpectMemories {
                user_id,
                chat_id,
                kind,
                inactive,
                contains,
                not_contains,
                count,
            } => {
                if contains.is_empty() && not_contains.is_empty() && count.is_none() {
                    fail(
                        "malformed line: `expect_memories` needs `contains`, `not_contains` or \
                         `count`, or it checks nothing"
                            .to_owned(),
                    );
                    continue;
                }
                let kind = match kind.as_deref().map(mnemo_memory_api::MemoryKind::parse) {
                    None => None,
                    Some(Some(kind)) => Some(kind),
                    Some(None) => {
                        fail(
                            "malformed line: `kind` must be episode, fact or reflection".to_owned(),
                        );
                        continue;
                    }
                };
                Step::ExpectMemories {
                    user_id,
                    chat_id,
                    kind,
                    inactive,
                    contains,
                    not_contains,
                    count,
                }
            }
            RawStep::ExpectSearch {
                tool,
                query,
                args,
                user_id,
                session_id,
                chat_id,
                contains,
                not_contains,
                top,
                count,
            } => Step::ExpectSearch {
                tool,
                query,
                args,
                who: who(user_id, session_id, chat_id),
                contains,
                not_contains,
                top,
                count,
            },
            RawStep::WriteFile { path, .. } | RawStep::ExpectFile { path, .. }
                if !inside_data_dir(&path) =>
            {
                fail(format!(
                    "malformed line: path {path:?} must be relative to the data directory, without `..`"
                ));
                continue;
            }
            RawStep::WriteFile { path, text } => Step::WriteFile { path, text },
            RawStep::ExpectFile {
                path,
                exists,
                contains,
                not_contains,
            } => Step::ExpectFile {
                path,
                exists,
                contains,
                not_contains,
            },
            RawStep::ExpectCount {
                of,
                equals,
                topic,
                job,
                tool,
                args,
                user_id,
                session_id,
                chat_id,
            } => {
                let of = match (of.as_str(), topic, job, tool) {
                    ("events", Some(topic), None, None) => CountOf::Events(topic),
                    ("job_runs", None, Some(job), None) => CountOf::JobRuns(job),
                    ("job_failures", None, Some(job), None) => CountOf::JobFailures(job),
                    ("llm_requests", None, None, None) => CountOf::LlmRequests,
                    ("llm_replies_left", None, None, None) => CountOf::LlmRepliesLeft,
                    ("tools", None, None, None) => CountOf::Tools,
                    ("jobs", None, None, None) => CountOf::Jobs,
                    ("tool_results", None, None, Some(tool)) => CountOf::ToolResults {
                        tool,
                        args,
                        who: who(user_id, session_id, chat_id),
                    },
                    (of, ..) => {
                        fail(format!(
                            "malformed line: `expect_count` of `{of}` with these fields; use events+topic, job_runs+job, job_failures+job, llm_requests, llm_replies_left, tools, jobs or tool_results+tool"
                        ));
                        continue;
                    }
                };
                Step::ExpectCount { of, equals }
            }
        };
        steps.push((line, step));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Scenario {
        name: name.to_owned(),
        config,
        start: start.or(first_time).unwrap_or_else(default_start),
        with_llm,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10d").unwrap(), Duration::days(10));
        assert_eq!(
            parse_duration("1d12h").unwrap(),
            Duration::days(1) + Duration::hours(12)
        );
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("3y").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999d")
            .unwrap_err()
            .contains("longer than"));
        assert!(parse_duration("36501d").is_err());
    }

    #[test]
    fn reports_every_malformed_line_by_number() {
        let text = "# a comment\n\
            {\"type\":\"user_message\",\"at\":\"2026-01-05T10:00:00Z\",\"session_id\":\"s\",\"user_id\":\"u\",\"text\":\"hi\"}\n\
            {not json\n\
            {\"type\":\"advance\",\"by\":\"3 parsecs\"}\n\
            {\"type\":\"teleport\"}\n\
            {\"type\":\"expect_count\",\"of\":\"events\",\"equals\":1}\n";
        let errors = parse_scenario(text, "s.jsonl").unwrap_err();
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 4, 5, 6], "{errors:?}");
        assert!(errors[2]
            .to_string()
            .starts_with("s.jsonl:5: malformed line"));
        assert!(
            errors[2].message.contains("teleport"),
            "{}",
            errors[2].message
        );
    }

    #[test]
    fn start_is_first_time_mentioned() {
        let text = "{\"type\":\"expect_count\",\"of\":\"tools\",\"equals\":0}\n\
            {\"type\":\"advance\",\"to\":\"2026-02-01T00:00:00Z\"}\n";
        let scenario = parse_scenario(text, "s").unwrap();
        assert_eq!(scenario.start.to_rfc3339(), "2026-02-01T00:00:00+00:00");
        assert_eq!(scenario.steps.len(), 2);
    }

    #[test]
    fn file_paths_stay_in_the_data_directory() {
        for path in ["/etc/passwd", "../x", "a/../../x", ""] {
            let line = format!(r#"{{"type":"write_file","path":{path:?},"text":"x"}}"#);
            let errors = parse_scenario(&line, "t").unwrap_err();
            assert!(errors[0].message.contains("relative"), "{path}: {errors:?}");
        }
        let scenario = parse_scenario(
            r#"{"type":"expect_file","path":"markdown/MEMORY.md","contains":["x"]}"#,
            "t",
        )
        .unwrap();
        assert!(matches!(
            &scenario.steps[0].1,
            Step::ExpectFile { exists: true, .. }
        ));
    }

    #[test]
    fn config_must_come_first() {
        let text = "{\"type\":\"expect_count\",\"of\":\"tools\",\"equals\":0}\n{\"type\":\"config\",\"set\":{}}\n";
        let errors = parse_scenario(text, "s").unwrap_err();
        assert_eq!(errors[0].line, 2);
    }
}

//! Reading scenario files.

mod duration;
mod raw;
mod steps;

use chrono::{DateTime, Utc};
use mnemo_kernel::host::ScriptedReply;
use mnemo_kernel::ConversationEvent;
use serde_json::Value;

pub(crate) use duration::parse_duration;
use raw::RawStep;
pub(crate) use steps::{CountOf, Who};
pub use steps::{Expect, LineError, Scenario, Step};

/// A path a scenario may name: relative, and with no `..`, so it stays in the data directory.
fn inside_data_dir(path: &str) -> bool {
    !path.is_empty()
        && std::path::Path::new(path)
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)))
}

/// When a scenario names no time at all, its clock starts here.
fn default_start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .map(|time| time.with_timezone(&Utc))
        .unwrap_or_default()
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
                in_order,
            } => Step::ExpectContext {
                prompt,
                who: who(user_id, session_id, chat_id),
                contains,
                not_contains,
                in_order,
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
            RawStep::ExpectSession {
                user_id,
                session_id,
                chat_id,
                provider,
            } => Step::ExpectSession {
                who: who(user_id, session_id, chat_id),
                provider,
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

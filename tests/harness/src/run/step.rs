//! What each scenario step does on the kernel, and what it checks.

use serde_json::Value;

use super::checks::{check_text, listing, lower_contains, result_texts, shorten, text_problems};
use super::saved::substitute;
use super::Run;
use crate::parse::{CountOf, Expect, Step};

impl Run<'_> {
    pub(super) async fn step(&mut self, line: usize, step: &Step) {
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
                                    match substitute(&self.saved, equals) {
                                        Ok(equals) if value != &equals => {
                                            problems.push(format!("expected {equals}"));
                                        }
                                        Ok(_) => {}
                                        Err(err) => problems.push(err),
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
                in_order,
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
                    in_order: in_order.clone(),
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
            Step::ExpectSession { who, provider } => {
                let scope = self.scope(who);
                let session = mnemo_memory_api::SessionKey::new(
                    scope.user_id,
                    scope.chat_id,
                    scope.session_id.unwrap_or_default(),
                );
                let label = format!("expect_session {session}");
                let Some(memory) = self
                    .kernel
                    .context()
                    .services()
                    .get::<dyn mnemo_memory_api::MemoryHost>()
                else {
                    let detail = "the memory extension is not enabled".to_owned();
                    self.unexpected(line, label, detail);
                    return;
                };
                match memory.session_provider(&session).await {
                    Ok(found) => {
                        let seen = format!("provider {found:?}");
                        self.report.log.push(format!("session {session}: {seen}"));
                        let mut problems = Vec::new();
                        if found != *provider {
                            problems.push(format!("expected provider {provider:?}"));
                        }
                        self.outcome(line, label, problems, seen);
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

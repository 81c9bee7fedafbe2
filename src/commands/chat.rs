//! `mnemo chat`: an interactive agent on the configured LLM, with memory context and tools.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{bail, Context as _};
use mnemo_kernel::host::{Config, TurnInput};
use mnemo_kernel::ChatMessage;
use serde_json::Value;

use super::start;

/// A session id that differs from every earlier one: the start time in microseconds.
fn new_session_id() -> String {
    format!("chat-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%6f"))
}

/// `mnemo chat`: an interactive agent on the configured LLM, memory context and tools included.
/// `/new` starts a new session; an empty line or end of input quits.
pub(crate) async fn chat(
    config: Config,
    user: &str,
    chat_id: Option<&str>,
) -> anyhow::Result<bool> {
    if config.llm.provider == mnemo_kernel::host::LlmProvider::None {
        bail!(
            "no LLM is configured: set [llm] provider = \"openai\" with base_url and model in config.toml, \
             or MNEMO_LLM_BASE_URL and MNEMO_LLM_MODEL (and MNEMO_LLM_API_KEY if the server needs one)"
        );
    }
    let kernel = start(config).await?;
    let mut session = new_session_id();
    let mut history: Vec<ChatMessage> = Vec::new();
    let stdin = std::io::stdin();
    // A prompt and a sign of activity only for a person at a terminal; piped input and output
    // stay clean for scripts.
    let prompt = stdin.is_terminal();
    let thinking = std::io::stderr().is_terminal();
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "mnemo chat as {user} (session {session}); /new starts a new session, an empty line quits."
    )?;
    let mut ok = true;
    let mut lines = stdin.lock().lines();
    loop {
        if prompt {
            write!(stdout, "> ")?;
            stdout.flush()?;
        }
        let Some(line) = lines.next() else {
            break;
        };
        let line = line.context("reading standard input")?;
        let text = line.trim();
        if text.is_empty() {
            break;
        }
        let input = TurnInput {
            user_id: user.to_owned(),
            session_id: session.clone(),
            chat_id: chat_id.map(str::to_owned),
            text: text.to_owned(),
        };
        if thinking {
            eprint!("thinking…");
        }
        let result = kernel.run_turn(&input, &history).await;
        if thinking {
            // Erases the sign: back to the line's start, clear to its end.
            eprint!("\r\x1b[K");
        }
        match result {
            // The kernel published /new and waited for the extensions (a consolidation
            // included): the conversation goes on in a new session.
            Ok(outcome) if text == mnemo_kernel::NEW_SESSION_COMMAND => {
                session = new_session_id();
                history.clear();
                writeln!(stdout, "{} (new session {session})", outcome.reply)?;
            }
            Ok(outcome) => {
                show_tool_calls(&mut stdout, &outcome.tool_calls)?;
                writeln!(stdout, "{}", outcome.reply)?;
                history.push(ChatMessage::user(text));
                history.push(ChatMessage::assistant(outcome.reply));
            }
            Err(error) => {
                // What the tools did before the failure stands (facts saved, say): show it.
                if let mnemo_kernel::KernelError::TurnFailedAfterTools { tool_calls, .. } = &error {
                    show_tool_calls(&mut stdout, tool_calls)?;
                }
                stdout.flush()?;
                eprintln!("mnemo: {error}");
                ok = false;
            }
        }
        stdout.flush()?;
        kernel.context().router().settle().await;
    }
    kernel.shutdown().await;
    Ok(ok)
}

/// One line per tool call of a chat turn: its name, arguments and whether it worked.
fn show_tool_calls(
    out: &mut impl Write,
    tool_calls: &[(
        mnemo_kernel::LlmToolCall,
        Result<Value, mnemo_kernel::ToolError>,
    )],
) -> std::io::Result<()> {
    for (call, result) in tool_calls {
        let shown = match result {
            Ok(_) => "ok".to_owned(),
            Err(error) => format!("error: {error}"),
        };
        writeln!(out, "  [{} {}: {shown}]", call.name, call.arguments)?;
    }
    Ok(())
}

//! `mnemo replay` and `mnemo demo`: scenario files, or the bundled demo conversation, through the
//! replay harness on [`crate::dev_extensions`].

use std::path::PathBuf;

use mnemo_kernel::host::{Config, LlmConfig, LlmProvider};
use mnemo_replay::{Replayer, ScenarioReport, Summary};

/// The scenario `mnemo demo` replays.
pub const DEMO_SCENARIO: &str = include_str!("demo.jsonl");

fn print_report(report: &ScenarioReport, steps: bool) {
    println!(
        "{}: {} passed, {} failed",
        report.name,
        report.passed(),
        report.failed()
    );
    if steps {
        for line in &report.log {
            println!("    {}", line.replace('\n', "\n    "));
        }
    }
    for outcome in &report.outcomes {
        if !outcome.passed {
            println!(
                "  FAIL line {}: {}: {}",
                outcome.line, outcome.label, outcome.detail
            );
        } else if steps {
            println!("  ok   line {}: {}", outcome.line, outcome.label);
        }
    }
}

/// Replays `files` on the config text `config` (reported as `file`), printing one report each
/// (every step too with `steps`) and the summary; true when every expectation passed.
///
/// # Errors
/// The config does not parse.
pub async fn run(
    config: String,
    file: String,
    files: &[PathBuf],
    steps: bool,
) -> anyhow::Result<bool> {
    // Check the base config once, so a bad file is one clear error rather than one per scenario.
    Config::parse(&config, &file)?;
    let replayer = Replayer::new(crate::dev_extensions(), config, file);
    let mut summary = Summary::default();
    for path in files {
        let report = replayer.run_file(path).await;
        print_report(&report, steps);
        summary.add(&report);
    }
    println!("{summary}");
    Ok(summary.failed == 0)
}

/// Replays [`DEMO_SCENARIO`] on the config text `config` and shows what the kernel did. With a
/// real model in `llm` (provider `openai`), it answers instead of the scripted replies; its words
/// differ, so the expectations then only inform.
///
/// # Errors
/// The config does not parse.
pub async fn demo(config: String, file: String, llm: LlmConfig) -> anyhow::Result<bool> {
    Config::parse(&config, &file)?;
    println!("mnemo demo: replaying a short conversation through the kernel on a virtual clock.\n");
    let mut replayer = Replayer::new(crate::dev_extensions(), config, file);
    // With a real model configured ([llm] or MNEMO_LLM_*), it writes the facts and the
    // reflection instead of the scripted replies; its words differ, so expectations inform only.
    let with_real_model = llm.provider == LlmProvider::Openai;
    if with_real_model {
        println!(
            "Using the configured model {} at {} instead of scripted replies.\n",
            llm.model, llm.base_url
        );
        replayer = replayer.with_real_llm(llm);
    }
    let report = replayer.run_text(DEMO_SCENARIO, "demo").await;
    let mut quiet = 0;
    for line in &report.log {
        if is_quiet_job_line(line) {
            quiet += 1;
            continue;
        }
        println!("{line}");
    }
    if quiet > 0 {
        println!("({quiet} nightly job runs that found nothing to do are not shown)");
    }
    println!();
    for outcome in &report.outcomes {
        let mark = if outcome.passed { "ok  " } else { "FAIL" };
        println!(
            "{mark} {}: {}",
            outcome.label,
            outcome.detail.replace('\n', " ⏎ ")
        );
    }
    let mut summary = Summary::default();
    summary.add(&report);
    println!("\n{summary}");
    Ok(summary.failed == 0 || with_real_model)
}

/// A job line whose report holds only zeros, or says it skipped: nothing happened.
fn is_quiet_job_line(line: &str) -> bool {
    let Some((_, report)) = line
        .split_once(" job ")
        .and_then(|(_, rest)| rest.split_once(": "))
    else {
        return false;
    };
    report.starts_with("skipped")
        || report
            .split(|c: char| !c.is_ascii_digit())
            .filter(|number| !number.is_empty())
            .all(|number| number.chars().all(|digit| digit == '0'))
}

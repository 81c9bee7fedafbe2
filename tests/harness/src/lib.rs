//! The event-replay harness: a scenario is a JSONL file of conversation events, clock moves,
//! scripted LLM replies, tool calls and expectations, replayed against a real kernel built from a
//! config, on a virtual clock and a fresh temporary data directory. The format is documented in
//! `docs/replay.md`.

mod parse;
mod run;

pub use parse::{parse_scenario, Expect, LineError, Scenario, Step};
pub use run::{Outcome, Replayer, ScenarioReport, Summary};

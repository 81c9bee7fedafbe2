//! "As of" questions, bi-temporal: a memory records when it was true in the world
//! (`valid_from`, `valid_to`) apart from when it was recorded (`created_at`), and a search may
//! ask what the user believed at a past time or what was true then.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which past an "as of" search asks about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TimeAxis {
    /// What the user believed then: the memories recorded by then, as they stood then (a fact
    /// corrected or superseded later still counts, its correction or successor does not).
    #[default]
    Believed,
    /// What was true then, by what is known now: the memories whose time of truth holds then
    /// (a corrected fact was never true; its correction holds from the old fact's start).
    True,
}

impl TimeAxis {
    /// The name used in requests (`believed`, `true`).
    pub fn as_str(self) -> &'static str {
        match self {
            TimeAxis::Believed => "believed",
            TimeAxis::True => "true",
        }
    }
}

/// A search's "as of": the time, and which past it asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsOf {
    /// The past time asked about.
    pub at: DateTime<Utc>,
    /// Belief then, or truth then.
    pub axis: TimeAxis,
}

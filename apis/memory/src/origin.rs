//! Where a memory came from, and how much each origin is trusted: the user's own words above
//! the agent's, what someone stated above what a model inferred.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The attribute of a model's fact that lists the facts someone stated which it contradicts:
/// they stand, and it is marked unconfirmed, until the user confirms it.
pub const CONTRADICTS: &str = "contradicts";

/// Whose words a memory is. Recorded when it is written and never guessed later; confirming a
/// model's fact makes it the user's (`told`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A turn the user said.
    #[default]
    User,
    /// A turn the agent said, or a memory the chat's model wrote that the user's words in the
    /// conversation do not bear out.
    Agent,
    /// Told through `remember` (or `store_memory`, a correction, a confirmation): by the user,
    /// through the CLI or an MCP client, or by the chat's model in the user's own words.
    Told,
    /// Drawn from conversations by the consolidation's model.
    Inferred,
    /// A weekly reflection's summary.
    Reflected,
    /// Brought in by `mnemo import` from a file of conversations.
    Imported,
    /// Written through the HTTP API by a service.
    Service,
}

impl Origin {
    /// Every origin, in the order above.
    pub const ALL: [Origin; 7] = [
        Origin::User,
        Origin::Agent,
        Origin::Told,
        Origin::Inferred,
        Origin::Reflected,
        Origin::Imported,
        Origin::Service,
    ];

    /// The stored name (`inferred`).
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Agent => "agent",
            Origin::Told => "told",
            Origin::Inferred => "inferred",
            Origin::Reflected => "reflected",
            Origin::Imported => "imported",
            Origin::Service => "service",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|origin| origin.as_str() == name)
    }

    /// True for a model's words: the agent's, the consolidation's and a reflection's. Everything
    /// else someone stated.
    pub fn is_model_made(self) -> bool {
        matches!(self, Origin::Agent | Origin::Inferred | Origin::Reflected)
    }

    /// Whether a memory of this origin may supersede (or lower) one of `older`'s: a model's
    /// words never override what someone stated, until the user confirms them.
    pub fn may_supersede(self, older: Origin) -> bool {
        !self.is_model_made() || older.is_model_made()
    }

    /// How the context block marks a memory of this origin, if it does: a model's words are
    /// labelled as such, so the agent does not take them for the user's.
    pub fn context_mark(self) -> Option<&'static str> {
        match self {
            Origin::Agent => Some("said by the agent"),
            Origin::Inferred => Some("inferred"),
            Origin::Reflected => Some("reflected"),
            _ => None,
        }
    }
}

/// How much search trusts each origin: a hit's score is multiplied by its origin's weight (and
/// its `why` shows it). `[extensions.memory.origin_weights]` in `config.toml`; each from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct OriginWeights {
    /// The user's own turns.
    pub user: f64,
    /// The agent's turns and unconfirmed claims (weighed like `user` when a query asks what the
    /// agent said, or for its advice).
    pub agent: f64,
    /// Told through `remember` and the like.
    pub told: f64,
    /// The consolidation's facts.
    pub inferred: f64,
    /// Reflections.
    pub reflected: f64,
    /// Imported conversations.
    pub imported: f64,
    /// Written by a service through the HTTP API.
    pub service: f64,
}

impl Default for OriginWeights {
    fn default() -> Self {
        Self {
            user: 1.0,
            agent: 0.9,
            told: 1.0,
            inferred: 0.9,
            reflected: 0.85,
            imported: 1.0,
            service: 1.0,
        }
    }
}

impl OriginWeights {
    /// The weight of `origin`.
    pub fn of(&self, origin: Origin) -> f64 {
        match origin {
            Origin::User => self.user,
            Origin::Agent => self.agent,
            Origin::Told => self.told,
            Origin::Inferred => self.inferred,
            Origin::Reflected => self.reflected,
            Origin::Imported => self.imported,
            Origin::Service => self.service,
        }
    }

    /// The first weight outside 0 to 1, named as `config.toml` names it.
    pub fn invalid(&self) -> Option<(&'static str, f64)> {
        Origin::ALL
            .into_iter()
            .map(|origin| (origin.as_str(), self.of(origin)))
            .find(|(_, weight)| !(0.0..=1.0).contains(weight))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_model_words_never_override_stated_ones() {
        for origin in Origin::ALL {
            assert_eq!(Origin::parse(origin.as_str()), Some(origin));
            assert_eq!(
                serde_json::to_value(origin).unwrap(),
                serde_json::json!(origin.as_str())
            );
        }
        assert_eq!(Origin::parse("someone"), None);
        assert!(!Origin::Inferred.may_supersede(Origin::Told));
        assert!(!Origin::Agent.may_supersede(Origin::User));
        assert!(Origin::Inferred.may_supersede(Origin::Inferred));
        assert!(Origin::Told.may_supersede(Origin::Inferred));
        assert!(Origin::Service.may_supersede(Origin::Told));
    }

    #[test]
    fn stated_words_weigh_more_than_inferred_ones_by_default() {
        let weights = OriginWeights::default();
        assert!(weights.of(Origin::User) > weights.of(Origin::Agent));
        assert!(weights.of(Origin::Told) > weights.of(Origin::Inferred));
        assert_eq!(weights.invalid(), None);
        let wrong = OriginWeights {
            inferred: 1.5,
            ..OriginWeights::default()
        };
        assert_eq!(wrong.invalid(), Some(("inferred", 1.5)));
    }
}

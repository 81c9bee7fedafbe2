//! The page the fact extraction reads, and the facts read from the model's reply. A fact is kept
//! only when it is a statement grounded in what the user said on the page: the user's turns it
//! cites, or else the user's turns the words of it are in (its sources then, not the model's
//! citation). The assistant's turns are shown to the model as context and are never evidence.

use mnemo_memory_api::grounding::{grounded, grounding_sources, is_statement};
use mnemo_memory_api::{Memory, NewFact};
use serde_json::Value;

/// The confidence of an extracted fact whose model states none: below an explicitly
/// remembered fact's 1.0, since a model's reading of a conversation can be wrong.
pub(super) const DEFAULT_EXTRACTED_CONFIDENCE: f64 = 0.8;

/// The page's turns numbered from 1, as the extracted facts cite them, with when and who.
pub(super) fn transcript(page: &[Memory]) -> String {
    page.iter()
        .enumerate()
        .map(|(index, episode)| {
            format!(
                "{}. [{}] {}: {}",
                index + 1,
                episode.event_time.format("%Y-%m-%d %H:%M"),
                episode.source_role.as_deref().unwrap_or("user"),
                episode.content
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The user's turns of `page` that `content` stands on: the ones among `cited` (turn numbers
/// from 1) when they ground it; else the fewest of the page's user turns that do, best match
/// first. A cited number outside the page, or of a turn the user did not say, is no evidence.
/// `None` when no user turn of the page grounds it.
fn evidence<'a>(content: &str, cited: &[u64], page: &'a [Memory]) -> Option<Vec<&'a Memory>> {
    let mut cited_turns: Vec<&Memory> = Vec::new();
    for &number in cited {
        let turn = usize::try_from(number)
            .ok()
            .and_then(|number| number.checked_sub(1))
            .and_then(|index| page.get(index));
        if let Some(turn) = turn.filter(|turn| turn.is_users_own_words()) {
            if !cited_turns.iter().any(|kept| kept.id == turn.id) {
                cited_turns.push(turn);
            }
        }
    }
    if !cited_turns.is_empty()
        && grounded(
            content,
            cited_turns.iter().map(|turn| turn.content.as_str()),
        )
    {
        return Some(cited_turns);
    }
    let user_turns: Vec<&Memory> = page
        .iter()
        .filter(|turn| turn.is_users_own_words())
        .collect();
    let texts: Vec<&str> = user_turns
        .iter()
        .map(|turn| turn.content.as_str())
        .collect();
    let found = grounding_sources(content, &texts)?;
    tracing::info!(
        cited = cited.len(),
        found = found.len(),
        "an extracted fact cites no user's turn it is in; kept with the user's turns it is in"
    );
    Some(
        found
            .into_iter()
            .filter_map(|index| user_turns.get(index).copied())
            .collect(),
    )
}

/// Facts from a model's JSON, field by field: a malformed item is skipped, not fatal; a fragment
/// (not a statement) and a fact most of whose content words are in none of the user's turns of
/// the page are refused (counted, second). `None` when the reply has no `facts` list at all
/// (nonsense).
pub(super) fn parse_facts(reply: &Value, page: &[Memory]) -> Option<(Vec<NewFact>, usize)> {
    let items = match reply {
        Value::Object(object) => object.get("facts")?.as_array()?,
        Value::Array(items) => items,
        _ => return None,
    };
    let mut facts = Vec::new();
    let mut refused = 0;
    for item in items {
        let (content, sources, confidence) = match item {
            Value::String(text) => (text.as_str(), None, None),
            Value::Object(object) => match object.get("content").and_then(Value::as_str) {
                Some(text) => (
                    text,
                    object.get("sources").and_then(Value::as_array),
                    object.get("confidence").and_then(Value::as_f64),
                ),
                None => continue,
            },
            _ => continue,
        };
        let content = content.trim();
        if content.is_empty() {
            continue;
        }
        if !is_statement(content) {
            tracing::info!(
                fact_chars = content.len(),
                "an extracted fact is a fragment, not a statement; not saved"
            );
            refused += 1;
            continue;
        }
        let cited: Vec<u64> = sources
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        let Some(turns) = evidence(content, &cited, page) else {
            tracing::info!(
                fact_chars = content.len(),
                "an extracted fact is mostly not in the user's turns; not saved"
            );
            refused += 1;
            continue;
        };
        facts.push(NewFact {
            content: content.to_owned(),
            source_ids: turns.iter().map(|turn| turn.id.clone()).collect(),
            confidence: Some(
                confidence
                    .filter(|value| (0.0..=1.0).contains(value))
                    .unwrap_or(DEFAULT_EXTRACTED_CONFIDENCE),
            ),
            ..NewFact::default()
        });
    }
    Some((facts, refused))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_memory_api::{MemoryKind, Origin};
    use serde_json::json;

    fn turn(id: &str, role: &str, text: &str) -> Memory {
        let at = chrono::DateTime::parse_from_rfc3339("2026-04-06T09:00:00Z")
            .map(|at| at.to_utc())
            .unwrap_or_default();
        Memory {
            id: id.to_owned(),
            kind: MemoryKind::Episode,
            content: text.to_owned(),
            session_id: Some("s1".to_owned()),
            user_id: Some("ana".to_owned()),
            chat_id: None,
            event_time: at,
            created_at: at,
            valid_until: None,
            confidence: 1.0,
            access_count: 0,
            last_accessed: None,
            decay_rate: 0.1,
            source_ids: Vec::new(),
            source_role: Some(role.to_owned()),
            entity_ids: Vec::new(),
            tags: Vec::new(),
            attributes: serde_json::Map::new(),
            memory_type: None,
            expires_at: None,
            shared: false,
            superseded_at: None,
            superseded_by_id: None,
            faded_at: None,
            subject_ids: Vec::new(),
            quarantine: None,
            origin: if role == "user" {
                Origin::User
            } else {
                Origin::Agent
            },
            valid_from: None,
            valid_to: None,
        }
    }

    fn page() -> Vec<Memory> {
        vec![
            turn("ep_1", "user", "My sister Dana moved to Lisbon last spring"),
            turn("ep_2", "user", "I love hiking in the Alps every August"),
        ]
    }

    /// A page where the assistant says things the user never did.
    fn page_with_the_assistant() -> Vec<Memory> {
        vec![
            turn("ep_1", "user", "My brother Ben adopted a dog named Pixel"),
            turn(
                "ep_2",
                "assistant",
                "Pixel must be a golden retriever who loves swimming in the lake",
            ),
            turn("ep_3", "user", "I have been vegetarian for ten years now"),
        ]
    }

    fn sources(fact: &NewFact) -> Vec<&str> {
        fact.source_ids.iter().map(String::as_str).collect()
    }

    #[test]
    fn facts_keep_their_cited_turns_and_the_model_s_confidence_within_bounds() {
        let reply = json!({"facts": [
            {"content": "The user's sister Dana moved to Lisbon", "sources": [1], "confidence": 0.9},
            {"content": "The user loves hiking in the Alps", "sources": [2], "confidence": 7.0},
            {"content": "The user hikes in the Alps every August", "sources": [2, 2]},
        ]});
        let (facts, refused) = parse_facts(&reply, &page()).unwrap();
        assert_eq!(refused, 0);
        assert_eq!(facts.len(), 3);
        assert_eq!(sources(&facts[0]), ["ep_1"]);
        assert_eq!(facts[0].confidence, Some(0.9));
        // Out of range or missing: the default for extracted facts, below a remembered 1.0.
        assert_eq!(facts[1].confidence, Some(DEFAULT_EXTRACTED_CONFIDENCE));
        assert_eq!(facts[2].confidence, Some(DEFAULT_EXTRACTED_CONFIDENCE));
        assert_eq!(
            sources(&facts[2]),
            ["ep_2"],
            "a turn cited twice is one source"
        );
    }

    #[test]
    fn a_fact_mostly_absent_from_the_user_s_turns_is_dropped_and_counted() {
        let reply = json!({"facts": [
            {"content": "The user works as a surgeon at the city hospital", "sources": [1]},
            {"content": "Dana lives in Lisbon", "sources": [1]},
        ]});
        let (facts, refused) = parse_facts(&reply, &page()).unwrap();
        assert_eq!(refused, 1);
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].content, "Dana lives in Lisbon");
    }

    #[test]
    fn the_assistant_s_words_are_never_evidence() {
        let page = page_with_the_assistant();
        let reply = json!({"facts": [
            // Only the assistant said it, cited or not, or cited past the page.
            {"content": "Pixel is a golden retriever who loves swimming", "sources": [2]},
            {"content": "Pixel is a golden retriever who loves swimming in the lake"},
            {"content": "Ben's dog Pixel is a golden retriever that swims in the lake", "sources": [9]},
            // The user's words, cited with the assistant's: the user's turn alone is its source.
            {"content": "Ben adopted a dog named Pixel", "sources": [1, 2]},
        ]});
        let (facts, refused) = parse_facts(&reply, &page).unwrap();
        assert_eq!(refused, 3);
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].content, "Ben adopted a dog named Pixel");
        assert_eq!(sources(&facts[0]), ["ep_1"]);
    }

    #[test]
    fn a_turn_the_user_did_not_say_is_not_the_user_s_even_when_it_claims_so() {
        let mut page = page_with_the_assistant();
        // A turn the chat's model stored as the user's, which the user's words did not bear out.
        page[1].source_role = Some("user".to_owned());
        let reply = json!({"facts": [
            {"content": "Pixel is a golden retriever who loves swimming", "sources": [2]},
        ]});
        assert_eq!(
            parse_facts(&reply, &page).map(|(facts, refused)| (facts.len(), refused)),
            Some((0, 1))
        );
        page[1].origin = Origin::User;
        assert_eq!(
            parse_facts(&reply, &page).map(|(facts, refused)| (facts.len(), refused)),
            Some((1, 0))
        );
    }

    #[test]
    fn a_fact_citing_the_wrong_turn_or_none_is_kept_with_the_user_s_turn_it_is_in() {
        let page = page_with_the_assistant();
        let reply = json!({"facts": [
            {"content": "The user has been vegetarian for ten years", "sources": [1]},
            {"content": "The user has been vegetarian for ten years now", "sources": [2]},
            {"content": "The user has been a vegetarian for ten years", "sources": [7, 0, -1]},
            {"content": "The user is vegetarian for ten years"},
            "Ben adopted a dog named Pixel",
        ]});
        let (facts, refused) = parse_facts(&reply, &page).unwrap();
        assert_eq!(refused, 0);
        let found: Vec<Vec<&str>> = facts.iter().map(sources).collect();
        assert_eq!(
            found,
            [
                vec!["ep_3"],
                vec!["ep_3"],
                vec!["ep_3"],
                vec!["ep_3"],
                vec!["ep_1"]
            ]
        );
    }

    #[test]
    fn a_fact_spread_over_user_turns_cites_them_best_match_first() {
        let reply = json!({"facts": [
            {"content": "The user loves hiking with friends in the Alps every August; Dana moved to Lisbon", "sources": [5]},
        ]});
        let (facts, refused) = parse_facts(&reply, &page()).unwrap();
        assert_eq!(refused, 0);
        // Four of its nine stems are in the second turn, three in the first: neither is enough.
        assert_eq!(sources(&facts[0]), ["ep_2", "ep_1"]);
    }

    #[test]
    fn fragments_are_refused_and_short_statements_kept() {
        let page = vec![
            turn("ep_1", "user", "My brother Ben has a dog named Pixel"),
            turn(
                "ep_2",
                "user",
                "Ana is vegetarian, and the company moved to Porto",
            ),
        ];
        let reply = json!({"facts": [
            {"content": "Ben", "sources": [1]},
            {"content": "the company", "sources": [2]},
            {"content": "Ben has a dog named Pixel", "sources": [1]},
            {"content": "Ana is vegetarian", "sources": [2]},
        ]});
        let (facts, refused) = parse_facts(&reply, &page).unwrap();
        assert_eq!(refused, 2);
        let kept: Vec<&str> = facts.iter().map(|fact| fact.content.as_str()).collect();
        assert_eq!(kept, ["Ben has a dog named Pixel", "Ana is vegetarian"]);
    }

    #[test]
    fn malformed_items_are_skipped_and_a_reply_without_facts_is_nonsense() {
        let reply = json!([
            "Dana moved to Lisbon",
            {"content": "   "},
            {"text": "no content key"},
            42,
        ]);
        let (facts, refused) = parse_facts(&reply, &page()).unwrap();
        assert_eq!((facts.len(), refused), (1, 0));
        assert_eq!(sources(&facts[0]), ["ep_1"]);
        assert_eq!(parse_facts(&json!({"notes": []}), &page()), None);
        assert_eq!(parse_facts(&json!("facts"), &page()), None);
    }

    #[test]
    fn the_transcript_numbers_turns_as_the_sources_cite_them() {
        let text = transcript(&page_with_the_assistant());
        assert!(
            text.starts_with("1. [2026-04-06 09:00] user: My brother Ben"),
            "{text}"
        );
        assert!(
            text.contains("\n2. [2026-04-06 09:00] assistant: Pixel must be"),
            "{text}"
        );
    }
}

//! The `llm` provider: entity extraction by the kernel's language model, with a JSON reply
//! (`{"entities":[{"text","type","relation"?}]}`) read tolerantly (fenced blocks, JSON inside
//! prose). Spans are found by searching each entity's text in the input; entities whose text is
//! not in the input are dropped.

use std::collections::HashSet;

use mnemo_kernel::{extract_json, ChatRequest, LlmClient};
use serde_json::Value;

use mnemo_ner_api::{EntityType, ExtractedEntity, NerError};

use super::{canonical, LLM_PROVIDER};

/// Confidence given to every entity the model names: above the pattern provider's guesses from
/// cues, below its relations and titles and below the regex provider.
pub(crate) const LLM_CONFIDENCE: f32 = 0.8;

/// Tokens of the reply's frame (`{"entities": [...]}`) and of each word of the message: an
/// entity written back (`{"text": "Sarah", "type": "person", "relation": "wife"}`) takes about
/// 20 tokens, and a message rarely names more than one entity in three words.
const REPLY_FRAME_TOKENS: u32 = 64;
const REPLY_TOKENS_PER_WORD: u32 = 8;
/// The bounds of [`reply_tokens`]: the kernel's `[llm] max_tokens` (1,024 by default) let a
/// small model write 1,024 tokens of junk for a one-line message, and one enrichment run of 43
/// memories took an hour.
const MIN_REPLY_TOKENS: u32 = 96;
const MAX_REPLY_TOKENS: u32 = 512;

/// Most tokens the model may write for the entities of `text`: in proportion to its words (or
/// a sixth of its characters, for writing without spaces), within [`MIN_REPLY_TOKENS`] and
/// [`MAX_REPLY_TOKENS`] (and never above `[llm] max_tokens`).
fn reply_tokens(text: &str) -> u32 {
    let words = text
        .split_whitespace()
        .count()
        .max(text.chars().count() / 6);
    let words = u32::try_from(words).unwrap_or(u32::MAX);
    REPLY_FRAME_TOKENS
        .saturating_add(words.saturating_mul(REPLY_TOKENS_PER_WORD))
        .clamp(MIN_REPLY_TOKENS, MAX_REPLY_TOKENS)
}

const SYSTEM_PROMPT: &str = "You extract named entities from one chat message written by a user \
to their assistant, for a long-term memory. Reply with JSON only, in this shape: \
{\"entities\": [{\"text\": \"...\", \"type\": \"...\", \"relation\": \"...\"}]}.\n\
- text: the entity exactly as written in the message (same spelling and case), without titles \
such as Dr. or Mr.\n\
- type: one of person, organization, location, project, date, email, url, other.\n\
- relation: only for people, and only when the message says how the user relates to them \
(wife, boss, sister, friend); leave it out otherwise.\n\
Name people, organisations, places, projects, absolute dates, e-mail addresses and URLs. Leave \
out the user and the assistant, pronouns, family words used without a name (mom), weekdays, \
months alone and relative dates (tomorrow, next Tuesday). With no entities, reply \
{\"entities\": []}.";

/// Why the provider failed, as [`NerError::Provider`].
fn failure(reason: impl Into<String>) -> NerError {
    NerError::Provider {
        provider: LLM_PROVIDER.to_owned(),
        reason: reason.into(),
    }
}

/// The entity type a model wrote, with the usual synonyms; anything unknown is `Other`.
fn entity_type(name: &str) -> EntityType {
    let name = name.trim().to_lowercase();
    match name.as_str() {
        "per" | "people" | "human" => EntityType::Person,
        "org" | "organisation" | "company" | "institution" | "school" | "university" | "team" => {
            EntityType::Organization
        }
        "loc" | "place" | "city" | "country" | "gpe" | "region" | "address" => EntityType::Location,
        "e-mail" | "mail" | "email_address" => EntityType::Email,
        "link" | "website" => EntityType::Url,
        "hashtag" => EntityType::Project,
        _ => EntityType::parse(&name),
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Byte ranges where `needle` occurs in `text` as a whole word (not inside a longer word);
/// case-sensitive first, then case-insensitive when lowercasing keeps byte offsets.
fn occurrences(text: &str, needle: &str) -> Vec<(usize, usize)> {
    let find_all = |haystack: &str, needle: &str| -> Vec<(usize, usize)> {
        let mut ranges = Vec::new();
        let mut from = 0;
        while let Some(offset) = haystack.get(from..).and_then(|rest| rest.find(needle)) {
            let start = from + offset;
            let end = start + needle.len();
            let starts_word = needle.starts_with(is_word_char);
            let ends_word = needle.ends_with(is_word_char);
            let clean_start =
                !starts_word || !super::has_char_before(haystack, start, is_word_char);
            let clean_end = !ends_word || !super::has_char_after(haystack, end, is_word_char);
            if clean_start && clean_end {
                ranges.push((start, end));
                from = end;
            } else {
                from = start + needle.chars().next().map_or(1, char::len_utf8);
            }
        }
        ranges
    };
    let exact = find_all(text, needle);
    if !exact.is_empty() {
        return exact;
    }
    let (lower_text, lower_needle) = (text.to_lowercase(), needle.to_lowercase());
    if lower_text.len() == text.len() && lower_needle.len() == needle.len() {
        find_all(&lower_text, &lower_needle)
            .into_iter()
            .filter(|&(start, end)| text.is_char_boundary(start) && text.is_char_boundary(end))
            .collect()
    } else {
        Vec::new()
    }
}

/// Turns the model's reply into entities located in `text`.
///
/// # Errors
/// A reply without JSON, or without an `entities` list.
pub(crate) fn parse_reply(text: &str, reply: &str) -> Result<Vec<ExtractedEntity>, NerError> {
    let value = extract_json(reply).ok_or_else(|| failure("the model's reply holds no JSON"))?;
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(object) => object
            .get("entities")
            .and_then(Value::as_array)
            .ok_or_else(|| failure("the model's reply has no `entities` list"))?,
        _ => return Err(failure("the model's reply is not a JSON object")),
    };
    let mut seen = HashSet::new();
    let mut entities = Vec::new();
    for item in items {
        let Some(surface) = item
            .get("text")
            .or_else(|| item.get("name"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|surface| !surface.is_empty())
        else {
            tracing::debug!(%item, "ner: llm entity without text skipped");
            continue;
        };
        let entity_type = item
            .get("type")
            .and_then(Value::as_str)
            .map_or(EntityType::Other, entity_type);
        if !seen.insert((surface.to_owned(), entity_type)) {
            continue;
        }
        let relation = item
            .get("relation")
            .and_then(Value::as_str)
            .map(|relation| relation.trim().to_lowercase())
            .filter(|relation| !relation.is_empty() && entity_type == EntityType::Person);
        let ranges = occurrences(text, surface);
        if ranges.is_empty() {
            tracing::debug!(surface, "ner: llm entity not found in the text, dropped");
        }
        for (start, end) in ranges {
            let written = &text[start..end];
            entities.push(ExtractedEntity {
                surface: written.to_owned(),
                canonical: canonical(entity_type, written),
                entity_type,
                start,
                end,
                confidence: LLM_CONFIDENCE,
                relation: relation.clone(),
                provider: LLM_PROVIDER.to_owned(),
            });
        }
    }
    Ok(entities)
}

/// Asks the model for the entities of `text`.
///
/// # Errors
/// [`NerError::Provider`] when the model fails or its reply cannot be read.
pub(crate) async fn extract(
    llm: &dyn LlmClient,
    text: &str,
) -> Result<Vec<ExtractedEntity>, NerError> {
    let mut request = ChatRequest::new(SYSTEM_PROMPT, text);
    request.json_reply = true;
    request.max_tokens = Some(reply_tokens(text));
    let response = llm.complete(request).await.map_err(|err| {
        tracing::warn!(model = llm.model(), error = %err, "ner: llm extraction failed");
        failure(err.to_string())
    })?;
    let reply = response.content.unwrap_or_default();
    let entities = parse_reply(text, &reply).inspect_err(|err| {
        tracing::warn!(model = llm.model(), error = %err, "ner: unreadable llm reply");
    })?;
    tracing::debug!(
        model = llm.model(),
        n_entities = entities.len(),
        "ner: llm extraction"
    );
    Ok(entities)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_with_synonyms_and_unknowns() {
        assert_eq!(entity_type("Person"), EntityType::Person);
        assert_eq!(entity_type("ORG"), EntityType::Organization);
        assert_eq!(entity_type("city"), EntityType::Location);
        assert_eq!(entity_type("date"), EntityType::Date);
        assert_eq!(entity_type("spaceship"), EntityType::Other);
    }

    #[test]
    fn the_reply_is_bounded_by_the_message_s_length() {
        assert_eq!(reply_tokens("Lunch with Sarah"), MIN_REPLY_TOKENS);
        let twenty_words = "word ".repeat(20);
        assert_eq!(reply_tokens(&twenty_words), 64 + 20 * 8);
        assert_eq!(reply_tokens(&"word ".repeat(5_000)), MAX_REPLY_TOKENS);
        // Writing without spaces counts a word for six characters.
        assert_eq!(reply_tokens(&"字".repeat(120)), 64 + 20 * 8);
    }

    #[tokio::test]
    async fn an_extraction_asks_for_no_more_than_its_bound() {
        let llm = mnemo_kernel::host::ScriptedLlm::new();
        llm.push(mnemo_kernel::host::ScriptedReply::Text(
            "{\"entities\": [{\"text\": \"Sarah\", \"type\": \"person\"}]}".to_owned(),
        ));
        let found = extract(&llm, "I had lunch with Sarah").await.unwrap();
        assert_eq!(found.len(), 1);
        let requests = llm.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].max_tokens, Some(64 + 5 * 8));
    }

    #[test]
    fn occurrences_are_whole_words() {
        assert_eq!(
            occurrences("Ann met Anna and Ann", "Ann"),
            vec![(0, 3), (17, 20)]
        );
        assert_eq!(occurrences("ping @dana now", "dana"), vec![(6, 10)]);
        assert_eq!(occurrences("met SARAH", "Sarah"), vec![(4, 9)]);
        assert_eq!(occurrences("Zoë and zoë", "Zoë"), vec![(0, 4)]);
        assert!(occurrences("nobody", "Sarah").is_empty());
        assert_eq!(occurrences("a.b.c", "."), vec![(1, 2), (3, 4)]);
    }

    #[test]
    fn replies_are_read_tolerantly() {
        let text = "My wife Sarah works at Acme in Lisbon.";
        let reply = "Here you go:\n```json\n{\"entities\": [\
            {\"text\": \"Sarah\", \"type\": \"person\", \"relation\": \"Wife\"},\
            {\"text\": \"Acme\", \"type\": \"company\"},\
            {\"text\": \"Lisbon\", \"type\": \"location\", \"relation\": \"home\"},\
            {\"text\": \"Narnia\", \"type\": \"location\"},\
            {\"type\": \"person\"}]}\n```";
        let entities = parse_reply(text, reply).unwrap();
        let summary: Vec<_> = entities
            .iter()
            .map(|e| {
                (
                    e.surface.as_str(),
                    e.entity_type,
                    e.relation.as_deref(),
                    e.start,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("Sarah", EntityType::Person, Some("wife"), 8),
                ("Acme", EntityType::Organization, None, 23),
                ("Lisbon", EntityType::Location, None, 31),
            ]
        );
        assert!(parse_reply(text, "[]").unwrap().is_empty());
        assert!(parse_reply(text, "no entities, sorry").is_err());
        assert!(parse_reply(text, "{\"people\": []}").is_err());
    }
}

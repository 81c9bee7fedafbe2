//! People: resolving "my wife", "Sarah" or "my wife Sarah" to person entities (seed 000).

use crate::error::Result;
use crate::store::{MemoryBackend, Person};

/// Relations people use for the people in their lives.
pub(crate) const RELATIONS: &[&str] = &[
    "wife",
    "husband",
    "spouse",
    "partner",
    "girlfriend",
    "boyfriend",
    "fiance",
    "fiancé",
    "fiancee",
    "fiancée",
    "boss",
    "manager",
    "colleague",
    "coworker",
    "co-worker",
    "assistant",
    "mother",
    "mom",
    "mum",
    "father",
    "dad",
    "sister",
    "brother",
    "son",
    "daughter",
    "child",
    "kid",
    "baby",
    "grandmother",
    "grandma",
    "grandfather",
    "grandpa",
    "aunt",
    "uncle",
    "cousin",
    "niece",
    "nephew",
    "friend",
    "neighbor",
    "neighbour",
    "roommate",
    "flatmate",
    "doctor",
    "dentist",
    "therapist",
    "teacher",
    "coach",
    "landlord",
    "mentor",
    "lawyer",
];

/// What a reference names: a relation, a name, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reference {
    pub(crate) relation: Option<String>,
    pub(crate) name: Option<String>,
}

fn clean(word: &str) -> &str {
    let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'');
    word.strip_suffix("'s")
        .or_else(|| word.strip_suffix("’s"))
        .unwrap_or(word)
}

/// The few character references a model writes into JSON strings ("&#34;Sarah&#34;"), decoded.
fn decode_entities(text: &str) -> String {
    [
        ("&#34;", "\""),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&apos;", "'"),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(text.to_owned(), |text, (entity, plain)| {
        text.replace(entity, plain)
    })
}

/// Parses "my wife", "Sarah", "my wife Sarah", "my boss, Michael" to look a person up: a
/// lowercase word that is no relation counts as a name too ("marco").
pub(crate) fn parse_reference(text: &str) -> Reference {
    parse(text, true)
}

/// Parses a reference to a person that may be created: it must name a relation or hold a
/// capitalised name. A model's subjects are not always people ("family", "food"), and some
/// come as markup ("&#34;beverages&#34;", "<b>Sarah</b>"): those name nobody.
pub(crate) fn parse_person_to_create(text: &str) -> Reference {
    let decoded = decode_entities(text);
    if decoded.contains(['<', '>', '&', ';', '{', '}', '[', ']', '='])
        || decoded.chars().any(|c| c.is_ascii_digit())
        || decoded.split_whitespace().count() > 6
    {
        return Reference::default();
    }
    parse(&decoded, false)
}

fn parse(text: &str, lowercase_names: bool) -> Reference {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(clean)
        .filter(|w| !w.is_empty())
        .collect();
    let mut rest: &[&str] = &words;
    if rest
        .first()
        .is_some_and(|first| first.eq_ignore_ascii_case("my"))
    {
        rest = &rest[1..];
    }
    let relation = rest
        .first()
        .map(|word| word.to_lowercase())
        .filter(|word| RELATIONS.contains(&word.as_str()));
    if relation.is_some() {
        rest = &rest[1..];
    }
    let name_words: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|word| word.chars().next().is_some_and(char::is_uppercase))
        .collect();
    let name = if lowercase_names && relation.is_none() && name_words.is_empty() && !rest.is_empty()
    {
        Some(rest.join(" "))
    } else if name_words.is_empty() {
        None
    } else {
        Some(name_words.join(" "))
    };
    Reference { relation, name }
}

/// Every "my <relation>" in a text, e.g. "what does my wife like" gives "wife".
pub(crate) fn relations_in(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| clean(w).to_lowercase())
        .collect();
    words
        .windows(2)
        .filter(|pair| pair[0] == "my" && RELATIONS.contains(&pair[1].as_str()))
        .map(|pair| pair[1].clone())
        .collect()
}

/// Finds the owner's person for a reference, without creating one.
pub(crate) async fn find_person(
    store: &dyn MemoryBackend,
    owner: &str,
    reference: &str,
) -> Result<Option<Person>> {
    let parsed = parse_reference(reference);
    if let Some(name) = &parsed.name {
        if let Some(person) = store.person_by_name(owner, name).await? {
            return Ok(Some(person));
        }
    }
    match &parsed.relation {
        Some(relation) => store.person_by_relation(owner, relation).await,
        None => Ok(None),
    }
}

/// Finds or creates the owner's person for a reference; `name_hint` names a person known only by
/// relation (from what the user said, e.g. "my wife's name is Sarah"). Returns it and whether it
/// was created.
pub(crate) async fn resolve_or_create_person(
    store: &dyn MemoryBackend,
    owner: &str,
    reference: &str,
    name_hint: Option<&str>,
) -> Result<Option<(Person, bool)>> {
    let parsed = parse_person_to_create(reference);
    let name = parsed.name.clone().or_else(|| name_hint.map(str::to_owned));
    if let Some(relation) = &parsed.relation {
        if let Some(person) = store.person_by_relation(owner, relation).await? {
            // "my wife Sarah" when "my wife" was known without her name: name her now.
            if let Some(name) = &name {
                if person.name.eq_ignore_ascii_case(relation)
                    && !name.eq_ignore_ascii_case(relation)
                {
                    store.rename_person(&person, name).await?;
                    return Ok(store.person_by_name(owner, name).await?.map(|p| (p, false)));
                }
            }
            return Ok(Some((person, false)));
        }
    }
    let name = match (name, &parsed.relation) {
        (Some(name), _) => name,
        (None, Some(relation)) => relation.clone(),
        (None, None) => return Ok(None),
    };
    let existed = store.person_by_name(owner, &name).await?.is_some();
    let person = store
        .upsert_person(owner, &name, parsed.relation.as_deref())
        .await?;
    Ok(Some((person, !existed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_references() {
        assert_eq!(
            parse_reference("my wife"),
            Reference {
                relation: Some("wife".into()),
                name: None
            }
        );
        assert_eq!(
            parse_reference("Sarah"),
            Reference {
                relation: None,
                name: Some("Sarah".into())
            }
        );
        assert_eq!(
            parse_reference("my wife Sarah"),
            Reference {
                relation: Some("wife".into()),
                name: Some("Sarah".into())
            }
        );
        assert_eq!(
            parse_reference("my boss, Michael"),
            Reference {
                relation: Some("boss".into()),
                name: Some("Michael".into())
            }
        );
        assert_eq!(
            parse_reference("my wife's").relation.as_deref(),
            Some("wife")
        );
        assert_eq!(relations_in("What does my wife like?"), ["wife"]);
        assert_eq!(parse_reference("marco").name.as_deref(), Some("marco"));
        assert!(relations_in("my car is red").is_empty());
    }

    /// A model's subjects that are no person, or come as markup, create nobody; a name in
    /// quotes or escaped quotes is still the name.
    #[test]
    fn only_people_and_relations_become_people() {
        for subject in [
            "family",
            "food",
            "&#34;beverages&#34;",
            "<b>Sarah</b>",
            "the user",
            "user123",
            "{\"name\": \"Sarah\"}",
        ] {
            assert_eq!(
                parse_person_to_create(subject),
                Reference::default(),
                "{subject}"
            );
        }
        assert_eq!(
            parse_person_to_create("&#34;Sarah&#34;").name.as_deref(),
            Some("Sarah")
        );
        assert_eq!(
            parse_person_to_create("my sister").relation.as_deref(),
            Some("sister")
        );
        assert_eq!(
            parse_person_to_create("Dr. Ana Lima").name.as_deref(),
            Some("Dr Ana Lima")
        );
    }
}

//! People: resolving "my wife", "Sarah" or "my wife Sarah" to person entities, and a person's
//! external id (seed 000's identity anchoring: "stable IDs across username changes").

use crate::error::{MemoryError, Result};
use crate::store::{MemoryBackend, Person};
use crate::types::{ExternalId, Subject};

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

/// The refusal of an external id that anchors `holder`, another of the owner's people.
pub(crate) fn already_anchors(external: &ExternalId, holder: &Person) -> MemoryError {
    MemoryError::Invalid(format!(
        "{external} already anchors `{}` ({}), another person: one external id names one \
         person; nothing was changed",
        holder.name, holder.id
    ))
}

/// The refusal of `external` for `person`, who carries `carried`.
pub(crate) fn carries_another(
    person: &Person,
    carried: &ExternalId,
    external: &ExternalId,
) -> MemoryError {
    MemoryError::Invalid(format!(
        "`{}` ({}) carries {carried}, not {external}: a person carries one external id; \
         nothing was changed",
        person.name, person.id
    ))
}

/// The name a subject with an external id is called by: its name, or its text as given when it
/// names no relation (a platform's user name such as "sally_99" is a name too); `None` for a
/// reference by relation alone ("my wife").
fn called_by(reference: &str) -> Option<String> {
    let parsed = parse_person_to_create(reference);
    match (parsed.name, parsed.relation) {
        (Some(name), _) => Some(name),
        (None, Some(_)) => None,
        (None, None) => Some(reference.trim().to_owned()).filter(|name| !name.is_empty()),
    }
}

/// The person [`resolve_or_create_person`] would take for `reference`, if they exist: the
/// person of its relation, else the one of its name (or of `name_hint`, or, with an external
/// id, of the text as given). Reads only.
async fn person_to_anchor(
    store: &dyn MemoryBackend,
    owner: &str,
    reference: &str,
    name_hint: Option<&str>,
) -> Result<Option<Person>> {
    let parsed = parse_person_to_create(reference);
    if let Some(relation) = &parsed.relation {
        if let Some(person) = store.person_by_relation(owner, relation).await? {
            return Ok(Some(person));
        }
    }
    let name = parsed
        .name
        .or_else(|| name_hint.map(str::to_owned))
        .or(parsed.relation)
        .or_else(|| called_by(reference));
    match name {
        Some(name) => store.person_by_name(owner, &name).await,
        None => Ok(None),
    }
}

/// Checks subjects before anything is written: each has a name or an external id; one name is
/// not given two external ids; an external id no person carries yet comes with a name, and that
/// name's person carries no other. A subject whose external id is known names its person.
///
/// # Errors
/// [`MemoryError::Invalid`] naming the subject and the problem; or the store fails.
pub(crate) async fn check_subjects(
    store: &dyn MemoryBackend,
    owner: &str,
    subjects: &[Subject],
    name_hint: Option<&str>,
) -> Result<()> {
    for (index, subject) in subjects.iter().enumerate() {
        let name = subject.name.as_deref().map(str::trim);
        let Some(external) = &subject.external else {
            if name.is_none() {
                return Err(MemoryError::Invalid(format!(
                    "subject {}: give a `name`, or an `external_id` with its `provider`",
                    index + 1
                )));
            }
            continue;
        };
        let twin = subjects[..index].iter().find(|other| {
            other
                .name
                .as_deref()
                .map(str::trim)
                .zip(name)
                .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
                && other
                    .external
                    .as_ref()
                    .is_some_and(|theirs| theirs != external)
        });
        if let (Some(twin), Some(name)) = (twin, name) {
            return Err(MemoryError::Invalid(format!(
                "subject {}: `{name}` is given {external} and {} in one call; a person carries \
                 one external id",
                index + 1,
                twin.external
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )));
        }
        if store
            .person_by_external_id(owner, external)
            .await?
            .is_some()
        {
            continue;
        }
        let Some(name) = name.filter(|name| !name.is_empty()) else {
            return Err(MemoryError::Invalid(format!(
                "subject {}: no person carries {external} yet; give the subject a `name` to \
                 make them",
                index + 1
            )));
        };
        if let Some(person) = person_to_anchor(store, owner, name, name_hint).await? {
            if let Some(carried) = ExternalId::of(&person) {
                return Err(carries_another(&person, &carried, external));
            }
        }
    }
    Ok(())
}

/// Finds or creates the owner's person for a subject: a known external id names its person
/// whatever the subject calls them (a new name becomes an alias); an unknown one anchors the
/// person the name resolves to or creates. Returns the person and whether it was created.
///
/// # Errors
/// The external id conflicts with the owner's people (see [`check_subjects`]), or the store
/// fails.
pub(crate) async fn resolve_subject(
    store: &dyn MemoryBackend,
    owner: &str,
    subject: &Subject,
    name_hint: Option<&str>,
) -> Result<Option<(Person, bool)>> {
    let Some(external) = &subject.external else {
        return match subject.name.as_deref() {
            Some(name) => resolve_or_create_person(store, owner, name, name_hint).await,
            None => Ok(None),
        };
    };
    if let Some(person) = store.person_by_external_id(owner, external).await? {
        let called = subject.name.as_deref().and_then(called_by);
        let person = store
            .anchor_person(owner, &person.id, external, called.as_deref())
            .await?;
        return Ok(Some((person, false)));
    }
    check_subjects(store, owner, std::slice::from_ref(subject), name_hint).await?;
    let Some(name) = subject.name.as_deref() else {
        return Ok(None);
    };
    let (person, created) = match resolve_or_create_person(store, owner, name, name_hint).await? {
        Some(found) => found,
        None => {
            let Some(name) = called_by(name) else {
                return Ok(None);
            };
            let existed = store.person_by_name(owner, &name).await?.is_some();
            (store.upsert_person(owner, &name, None).await?, !existed)
        }
    };
    let person = store
        .anchor_person(owner, &person.id, external, None)
        .await?;
    Ok(Some((person, created)))
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

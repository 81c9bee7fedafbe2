//! The pattern provider's guesses on chat phrasings: people with their relations, cues, words
//! that are not names, organisations, places and byte offsets.

use super::*;

/// (surface, type, relation) after the merge, in text order.
fn found(text: &str) -> Vec<(String, EntityType, Option<String>)> {
    crate::merge::merge(PatternProvider.extract(text))
        .into_iter()
        .map(|e| (e.surface, e.entity_type, e.relation))
        .collect()
}

fn person(name: &str) -> (String, EntityType, Option<String>) {
    (name.to_owned(), EntityType::Person, None)
}

fn related(name: &str, relation: &str) -> (String, EntityType, Option<String>) {
    (
        name.to_owned(),
        EntityType::Person,
        Some(relation.to_owned()),
    )
}

fn of(name: &str, entity_type: EntityType) -> (String, EntityType, Option<String>) {
    (name.to_owned(), entity_type, None)
}

#[test]
fn a_speaker_label_names_a_person() {
    assert_eq!(
        found("Caroline: I went to a support group yesterday."),
        vec![person("Caroline")]
    );
    assert_eq!(found("Mel Jones: see you then"), vec![person("Mel Jones")]);
    // Only before more text, and not a common word.
    assert_eq!(found("Note: buy milk"), vec![]);
    assert_eq!(found("Update: the build is green"), vec![]);
    assert_eq!(found("Noted: vegetarian-friendly and mild."), vec![]);
    assert_eq!(found("Warning: the oven is hot"), vec![]);
    assert_eq!(found("Honestly: no idea"), vec![]);
    assert_eq!(found("Done: all three tickets"), vec![]);
    assert_eq!(found("Caroline:"), vec![]);
}

#[test]
fn relations_before_and_after() {
    assert_eq!(
        found("My wife Sarah wants to go."),
        vec![related("Sarah", "wife")]
    );
    assert_eq!(
        found("My boss, Michael, keeps calling."),
        vec![related("Michael", "boss")]
    );
    assert_eq!(
        found("my sister Dana Kim is here"),
        vec![related("Dana Kim", "sister")]
    );
    assert_eq!(
        found("I saw my best friend Ana."),
        vec![related("Ana", "best friend")]
    );
    assert_eq!(
        found("My landlord, Mr. Novak, still hasn't"),
        vec![related("Novak", "landlord")]
    );
    assert_eq!(
        found("I called my therapist Dr. Alvarez"),
        vec![related("Alvarez", "therapist")]
    );
    assert_eq!(
        found("Sarah, my wife, says hi"),
        vec![related("Sarah", "wife")]
    );
    assert_eq!(
        found("My wife's name is Anna, by the way."),
        vec![related("Anna", "wife")]
    );
    assert_eq!(found("his wife Maria called"), vec![person("Maria")]);
    assert_eq!(
        found("My older brother Leo"),
        vec![related("Leo", "brother")]
    );
    assert_eq!(
        found("Uncle Bob is visiting"),
        vec![related("Bob", "uncle")]
    );
}

#[test]
fn cues_for_people() {
    assert_eq!(
        found("I had lunch with Tom Hardy yesterday."),
        vec![person("Tom Hardy")]
    );
    assert_eq!(
        found("I met with Priya and Omar."),
        vec![person("Priya"), person("Omar")]
    );
    assert_eq!(
        found("Sarah and John are coming."),
        vec![person("Sarah"), person("John")]
    );
    assert_eq!(found("Olivia said it was fine."), vec![person("Olivia")]);
    assert_eq!(found("Hi Mark, thanks!"), vec![person("Mark")]);
    assert_eq!(found("Thank you, Anna!"), vec![person("Anna")]);
    assert_eq!(found("Thanks so much, Priya!"), vec![person("Priya")]);
    assert_eq!(found("Can you pay Lucas back?"), vec![person("Lucas")]);
    assert_eq!(found("Dr. Patel said so."), vec![person("Patel")]);
    for text in [
        "I saw Dr. Patel today",
        "I saw Mrs Okafor today",
        "I saw Prof. Li Wei",
    ] {
        let entities = crate::merge::merge(PatternProvider.extract(text));
        assert_eq!(entities.len(), 1, "{text}: {entities:?}");
        assert_eq!(
            entities[0].confidence, 0.9,
            "{text}: a title is a strong cue"
        );
    }
    assert_eq!(found("It is at Hannah's place."), vec![person("Hannah")]);
    assert_eq!(found("Jamie and I adopted a cat."), vec![person("Jamie")]);
    assert_eq!(
        found("The new hire, Wei Zhang, starts."),
        vec![person("Wei Zhang")]
    );
}

#[test]
fn names_given_to_animals_and_things_are_not_people() {
    for (text, name) in [
        ("My dog is called Pixel.", "Pixel"),
        ("My dog's called Pixel", "Pixel"),
        ("We adopted a cat named Luna", "Luna"),
        ("our boat Seabird needs paint", "Seabird"),
        ("my brother's dog Pixel barks", "Pixel"),
        ("Sarah's cat Luna sleeps", "Luna"),
    ] {
        assert!(
            !found(text)
                .iter()
                .any(|(found, entity_type, _)| found == name && *entity_type == EntityType::Person),
            "{text}: {:?}",
            found(text)
        );
    }
    assert_eq!(found("Sarah's cat Luna sleeps"), vec![person("Sarah")]);
    // The same cues before a person still name one.
    assert_eq!(found("My sister is called Maya"), vec![person("Maya")]);
    assert_eq!(found("I called Maya yesterday"), vec![person("Maya")]);
    assert_eq!(
        found("Did you show Maria Lopez the plan"),
        vec![person("Maria Lopez")]
    );
    // A thing's word before a name that is not given to it.
    for (text, name) in [
        ("I met a guy at the bar called Sofia", "Sofia"),
        ("We met the team Maria Lopez leads", "Maria Lopez"),
        ("the company Sarah Kim founded", "Sarah Kim"),
    ] {
        assert!(
            found(text)
                .iter()
                .any(|(found, entity_type, _)| found == name && *entity_type == EntityType::Person),
            "{text}: {:?}",
            found(text)
        );
    }
}

#[test]
fn capitalised_words_that_are_not_names() {
    for text in [
        "I think I'll take Monday off.",
        "Next Tuesday I have a call with the bank.",
        "June is my favourite month.",
        "Remind me to call Grandma on Sunday.",
        "Christmas at my parents' place was lovely.",
        "Do you think I should learn Spanish or French?",
        "Please note: The Q3 review got pushed back.",
        "I'm reading Thinking, Fast and Slow right now.",
        "Mark my words, this will ship late.",
        "Happy New Year!",
        "Ok so I talked to HR and they said it's fine.",
        "I had a call with Google and Microsoft.",
        "Hey, how are you?",
        "Yesterday Was Rough And Long Anyway",
        "I watched Star Wars with the kids.",
    ] {
        assert_eq!(found(text), vec![], "{text}");
    }
}

#[test]
fn organisations() {
    assert_eq!(
        found("Acme Corp finally paid."),
        vec![of("Acme Corp", EntityType::Organization)]
    );
    assert_eq!(
        found("I'm interviewing with Globex Inc on Thursday."),
        vec![of("Globex Inc", EntityType::Organization)]
    );
    assert_eq!(
        found("She did her PhD at the University of Toronto."),
        vec![of("University of Toronto", EntityType::Organization)]
    );
    assert_eq!(
        found("Harvard University rejected me but I got into Boston College."),
        vec![
            of("Harvard University", EntityType::Organization),
            of("Boston College", EntityType::Organization)
        ]
    );
    assert_eq!(
        found("My husband works at Google."),
        vec![of("Google", EntityType::Organization)]
    );
    assert_eq!(
        found("I graduated from MIT in 2015."),
        vec![of("MIT", EntityType::Organization)]
    );
    assert_eq!(
        found("We signed with Johnson & Johnson Ltd."),
        vec![of("Johnson & Johnson Ltd", EntityType::Organization)]
    );
    assert_eq!(found("The University is closed."), vec![]);
}

#[test]
fn places() {
    assert_eq!(
        found("We moved to Lisbon last year."),
        vec![of("Lisbon", EntityType::Location)]
    );
    assert_eq!(
        found("I'm from Porto, but I live in Berlin now."),
        vec![
            of("Porto", EntityType::Location),
            of("Berlin", EntityType::Location)
        ]
    );
    assert_eq!(
        found("I'm flying to New York on Friday."),
        vec![of("New York", EntityType::Location)]
    );
    assert_eq!(
        found("We met at the Berlin office."),
        vec![of("Berlin", EntityType::Location)]
    );
    assert_eq!(
        found("I lived in London and Paris."),
        vec![
            of("London", EntityType::Location),
            of("Paris", EntityType::Location)
        ]
    );
    assert_eq!(found("I'm going to Sarah's party."), vec![person("Sarah")]);
    assert_eq!(
        found("New York is lovely."),
        vec![of("New York", EntityType::Location)]
    );
}

#[test]
fn offsets_are_bytes_of_the_original_text() {
    let text = "Café talk: my friend Zoë Ångström’s dog";
    let entities = crate::merge::merge(PatternProvider.extract(text));
    assert_eq!(entities.len(), 1);
    let entity = &entities[0];
    assert_eq!(&text[entity.start..entity.end], "Zoë Ångström");
    assert_eq!(entity.relation.as_deref(), Some("friend"));
}

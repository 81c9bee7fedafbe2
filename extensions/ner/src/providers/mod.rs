//! The providers strategies are composed of: `regex` and `pattern` (fast, no I/O) and `llm`.

pub(crate) mod dates;
pub(crate) mod llm;
pub(crate) mod pattern;
pub(crate) mod regex;
mod words;

use mnemo_ner_api::EntityType;

/// The name the regex provider puts in [`crate::ExtractedEntity::provider`].
pub(crate) const REGEX_PROVIDER: &str = "regex";
/// The name the pattern provider puts in [`crate::ExtractedEntity::provider`].
pub(crate) const PATTERN_PROVIDER: &str = "pattern";
/// The name the LLM provider puts in [`crate::ExtractedEntity::provider`].
pub(crate) const LLM_PROVIDER: &str = "llm";

/// Whether the character just before byte `at` satisfies `test` (false at the start).
pub(crate) fn has_char_before(text: &str, at: usize, test: impl Fn(char) -> bool) -> bool {
    text.get(..at)
        .and_then(|before| before.chars().next_back())
        .is_some_and(test)
}

/// Whether the character at byte `at` satisfies `test` (false at the end).
pub(crate) fn has_char_after(text: &str, at: usize, test: impl Fn(char) -> bool) -> bool {
    text.get(at..)
        .and_then(|after| after.chars().next())
        .is_some_and(test)
}

/// Runs of whitespace as one space.
pub(crate) fn normalise_space(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The name an entity of `entity_type` written as `surface` is matched on.
pub(crate) fn canonical(entity_type: EntityType, surface: &str) -> String {
    let surface = normalise_space(surface);
    match entity_type {
        EntityType::Email => surface.to_lowercase(),
        EntityType::Person if surface.starts_with('@') && surface.len() > 1 => {
            surface[1..].to_owned()
        }
        EntityType::Project if surface.starts_with('#') && surface.len() > 1 => {
            surface[1..].to_owned()
        }
        EntityType::Date => dates::canonical_date(&surface).unwrap_or(surface),
        _ => surface,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(canonical(EntityType::Email, "A@B.Com"), "a@b.com");
        assert_eq!(canonical(EntityType::Person, "@dana"), "dana");
        assert_eq!(canonical(EntityType::Person, "Dana \n Kim"), "Dana Kim");
        assert_eq!(canonical(EntityType::Project, "#apollo"), "apollo");
        assert_eq!(canonical(EntityType::Date, "3 March 2026"), "2026-03-03");
        assert_eq!(canonical(EntityType::Date, "next week"), "next week");
        assert_eq!(canonical(EntityType::Other, "@"), "@");
    }

    #[test]
    fn neighbours_at_the_edges() {
        assert!(!has_char_before("abc", 0, |_| true));
        assert!(!has_char_after("abc", 3, |_| true));
        assert!(has_char_before("aé", 3, |c| c == 'é'));
        assert!(!has_char_before("aé", 2, |_| true), "not a char boundary");
    }
}

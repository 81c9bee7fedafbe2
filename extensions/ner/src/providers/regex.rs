//! The `regex` provider: @mentions, #hashtags, e-mail addresses, URLs and absolute dates. Always
//! available; no I/O.

use std::sync::LazyLock;

use regex::Regex;

use mnemo_ner_api::{EntityType, ExtractedEntity};

use super::dates::date_entities;
use super::{has_char_after, has_char_before, REGEX_PROVIDER};

static MENTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"@([A-Za-z][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*)").expect("literal regex")
});
static HASHTAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"#([\p{L}\p{N}_][\p{L}\p{N}_\-]*)").expect("literal regex"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"[A-Za-z0-9][A-Za-z0-9._%+\-]*@",
        r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?",
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}",
    ))
    .expect("literal regex")
});
static URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)(?:https?://|www\.)[^\s<>"'`]+"#).expect("literal regex"));
/// `github.com/acme/widgets`, `example.org`: lowercase, with a well-known top-level domain.
static BARE_DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+",
        r"(?:com|org|net|io|dev|app|ai|co|edu|gov|info|uk|de|fr|eu|us|ca|nl|ch|se|es|au|jp|xyz|gg)",
        r#"(?:/[^\s<>"'`]*)?"#,
    ))
    .expect("literal regex")
});

/// The regex provider.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RegexProvider;

impl RegexProvider {
    /// Every match, possibly overlapping (the merge keeps the best).
    pub(crate) fn extract(self, text: &str) -> Vec<ExtractedEntity> {
        let mut found = Vec::new();
        mentions(text, &mut found);
        hashtags(text, &mut found);
        emails(text, &mut found);
        urls(text, &mut found);
        found.extend(date_entities(text));
        found
    }
}

fn entity(
    text: &str,
    start: usize,
    end: usize,
    entity_type: EntityType,
    canonical: String,
    confidence: f32,
) -> ExtractedEntity {
    ExtractedEntity {
        surface: text[start..end].to_owned(),
        canonical,
        entity_type,
        start,
        end,
        confidence,
        relation: None,
        provider: REGEX_PROVIDER.to_owned(),
    }
}

fn mentions(text: &str, found: &mut Vec<ExtractedEntity>) {
    for captures in MENTION.captures_iter(text) {
        let (Some(whole), Some(name)) = (captures.get(0), captures.get(1)) else {
            continue;
        };
        // Not the `@` of an e-mail address or of a path.
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "._%+-@/".contains(c)
        }) || has_char_after(text, whole.end(), |c| c == '@')
        {
            continue;
        }
        found.push(entity(
            text,
            whole.start(),
            whole.end(),
            EntityType::Person,
            name.as_str().to_owned(),
            0.95,
        ));
    }
}

fn hashtags(text: &str, found: &mut Vec<ExtractedEntity>) {
    for captures in HASHTAG.captures_iter(text) {
        let (Some(whole), Some(tag)) = (captures.get(0), captures.get(1)) else {
            continue;
        };
        // Not a URL fragment, an HTML entity, C# or an issue number (#42).
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "&/#_".contains(c)
        }) {
            continue;
        }
        let tag = tag.as_str().trim_end_matches('-');
        if !tag.chars().any(char::is_alphabetic) {
            continue;
        }
        let end = whole.start() + 1 + tag.len();
        found.push(entity(
            text,
            whole.start(),
            end,
            EntityType::Project,
            tag.to_owned(),
            0.95,
        ));
    }
}

fn emails(text: &str, found: &mut Vec<ExtractedEntity>) {
    for whole in EMAIL.find_iter(text) {
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "._%+-@".contains(c)
        }) {
            continue;
        }
        found.push(entity(
            text,
            whole.start(),
            whole.end(),
            EntityType::Email,
            whole.as_str().to_lowercase(),
            0.99,
        ));
    }
}

/// The URL without the punctuation that ends the sentence around it, and without a closing
/// bracket it did not open.
fn trim_url(url: &str) -> &str {
    let mut url = url;
    loop {
        let Some(last) = url.chars().last() else {
            return url;
        };
        let unbalanced = |open: char, close: char| {
            last == close && url.matches(open).count() < url.matches(close).count()
        };
        if ".,;:!?*'\"".contains(last)
            || unbalanced('(', ')')
            || unbalanced('[', ']')
            || unbalanced('{', '}')
        {
            url = &url[..url.len() - last.len_utf8()];
        } else {
            return url;
        }
    }
}

fn urls(text: &str, found: &mut Vec<ExtractedEntity>) {
    for whole in URL.find_iter(text) {
        if has_char_before(text, whole.start(), |c| c.is_alphanumeric() || c == '@') {
            continue;
        }
        let surface = trim_url(whole.as_str());
        if surface.len() <= "www.".len() || surface.ends_with("://") {
            continue;
        }
        let end = whole.start() + surface.len();
        found.push(entity(
            text,
            whole.start(),
            end,
            EntityType::Url,
            surface.to_owned(),
            0.98,
        ));
    }
    for whole in BARE_DOMAIN.find_iter(text) {
        if has_char_before(text, whole.start(), |c| {
            c.is_alphanumeric() || "@/.-_:".contains(c)
        }) {
            continue;
        }
        let surface = trim_url(whole.as_str());
        let end = whole.start() + surface.len();
        // The domain must end where the match ends: not `example.community`, not a mailbox.
        if has_char_after(text, end, |c| c.is_alphanumeric() || "@-_".contains(c))
            || !surface.contains('.')
        {
            continue;
        }
        found.push(entity(
            text,
            whole.start(),
            end,
            EntityType::Url,
            surface.to_owned(),
            0.85,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, EntityType, String)> {
        let mut entities: Vec<_> = crate::merge::merge(RegexProvider.extract(text))
            .into_iter()
            .map(|e| (e.surface, e.entity_type, e.canonical))
            .collect();
        entities.sort_by(|a, b| a.0.cmp(&b.0));
        entities
    }

    fn one(
        surface: &str,
        entity_type: EntityType,
        canonical: &str,
    ) -> Vec<(String, EntityType, String)> {
        vec![(surface.to_owned(), entity_type, canonical.to_owned())]
    }

    #[test]
    fn mentions_are_people_without_the_at() {
        assert_eq!(
            found("@marco can you review?"),
            one("@marco", EntityType::Person, "marco")
        );
        assert_eq!(
            found("Tell @sam.lee that it works."),
            one("@sam.lee", EntityType::Person, "sam.lee")
        );
        assert_eq!(
            found("ask (@Priya_R)"),
            one("@Priya_R", EntityType::Person, "Priya_R")
        );
        assert!(found("meet @ 5pm, or at 5@home").is_empty());
    }

    #[test]
    fn hashtags_are_projects_without_the_hash() {
        assert_eq!(
            found("tracking it under #apollo."),
            one("#apollo", EntityType::Project, "apollo")
        );
        assert_eq!(
            found("the #q3-roadmap- doc"),
            one("#q3-roadmap", EntityType::Project, "q3-roadmap")
        );
        assert!(found("issue #42, C# and &#39;").is_empty());
    }

    #[test]
    fn emails_are_lowercased() {
        assert_eq!(
            found("Email me at JOHN.DOE@Example.COM please."),
            one(
                "JOHN.DOE@Example.COM",
                EntityType::Email,
                "john.doe@example.com"
            )
        );
        assert_eq!(
            found("send to ops@northwind.io."),
            one("ops@northwind.io", EntityType::Email, "ops@northwind.io")
        );
    }

    #[test]
    fn urls_lose_sentence_punctuation() {
        assert_eq!(
            found("see https://example.com/reports?id=42&view=full."),
            one(
                "https://example.com/reports?id=42&view=full",
                EntityType::Url,
                "https://example.com/reports?id=42&view=full"
            )
        );
        assert_eq!(
            found("(see https://en.wikipedia.org/wiki/Rust_(language))"),
            one(
                "https://en.wikipedia.org/wiki/Rust_(language)",
                EntityType::Url,
                "https://en.wikipedia.org/wiki/Rust_(language)"
            )
        );
        assert_eq!(
            found("The repo is github.com/acme/widgets, look."),
            one(
                "github.com/acme/widgets",
                EntityType::Url,
                "github.com/acme/widgets"
            )
        );
        assert_eq!(
            found("go to www.example.org!"),
            one("www.example.org", EntityType::Url, "www.example.org")
        );
        assert!(found("ASP.NET, Node.js, main.rs, e.g. this, example.community").is_empty());
    }

    #[test]
    fn a_url_wins_over_the_date_and_hashtag_inside_it() {
        let text = "https://example.com/2026-03-01#notes";
        assert_eq!(found(text), one(text, EntityType::Url, text));
    }
}

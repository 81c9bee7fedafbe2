//! Turning names given by the model or the config into file names that stay inside the workspace.
//!
//! Topic names are sanitised (lowercase letters and digits, runs of anything else become one
//! dash); a name that tries to leave the workspace (`..`, a path separator, an absolute path), holds
//! a NUL character or is too long is refused with an error saying so, never silently rewritten.

use crate::error::{MarkdownError, Result};

/// Longest topic or agent name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Longest readable part of a session buffer's file name.
const MAX_SESSION_STEM: usize = 48;

/// The name quoted and shortened for an error message (it may be huge or hold control characters).
fn shown(raw: &str) -> String {
    const LIMIT: usize = 40;
    let mut text: String = raw.chars().take(LIMIT).collect();
    if raw.chars().count() > LIMIT {
        text.push('…');
    }
    format!("{text:?}")
}

fn invalid(what: &'static str, raw: &str, reason: impl Into<String>) -> MarkdownError {
    MarkdownError::InvalidName {
        what,
        name: shown(raw),
        reason: reason.into(),
    }
}

/// Lowercase letters and digits; every run of other characters becomes one dash; no dash at
/// either end.
fn slug(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Refuses what could escape the workspace; `what` names the kind of name in the error.
fn refuse_escapes(what: &'static str, raw: &str) -> Result<()> {
    if raw.contains('\0') {
        return Err(invalid(what, raw, "contains a NUL character"));
    }
    let length = raw.chars().count();
    if length > MAX_NAME_CHARS {
        return Err(invalid(
            what,
            raw,
            format!("is {length} characters long; the limit is {MAX_NAME_CHARS}"),
        ));
    }
    let trimmed = raw.trim();
    let drive = trimmed.as_bytes().get(1) == Some(&b':')
        && trimmed
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_alphabetic);
    if trimmed.starts_with('/') || trimmed.starts_with('\\') || trimmed.starts_with('~') || drive {
        return Err(invalid(
            what,
            raw,
            "is an absolute path; give a plain name such as `people`",
        ));
    }
    if trimmed.contains("..") {
        return Err(invalid(
            what,
            raw,
            "contains `..`; names cannot point outside the memory workspace",
        ));
    }
    if trimmed.contains('/') || trimmed.contains('\\') {
        return Err(invalid(
            what,
            raw,
            "contains a path separator; names are flat, such as `people-family`",
        ));
    }
    Ok(())
}

/// The file stem of a world topic: `"Home Network"` becomes `home-network`.
///
/// # Errors
/// [`MarkdownError::InvalidName`] for a name with `..`, a path separator, an absolute path, a NUL
/// character, more than [`MAX_NAME_CHARS`] characters, or no letter or digit at all.
///
/// ```
/// use mnemo_markdown_memory::sanitize_topic;
///
/// assert_eq!(sanitize_topic("Home Network").unwrap(), "home-network");
/// let refused = sanitize_topic("../../etc/passwd").unwrap_err();
/// assert!(refused.to_string().contains("contains `..`"));
/// ```
pub fn sanitize_topic(raw: &str) -> Result<String> {
    refuse_escapes("topic", raw)?;
    let name = slug(raw);
    if name.is_empty() {
        return Err(invalid(
            "topic",
            raw,
            "has no letters or digits; give a name such as `people`",
        ));
    }
    Ok(name)
}

/// Checks an agent id from the config: it must already be in sanitised form (`assistant`,
/// `research-bot`), since it names a directory other tools may share.
///
/// # Errors
/// [`MarkdownError::InvalidName`] naming the problem and the sanitised form to use instead.
pub fn check_agent_id(raw: &str) -> Result<String> {
    refuse_escapes("agent_id", raw)?;
    let name = slug(raw);
    if name.is_empty() {
        return Err(invalid("agent_id", raw, "has no letters or digits"));
    }
    if name != raw {
        return Err(invalid(
            "agent_id",
            raw,
            format!("must be lowercase letters, digits and dashes, such as `{name}`"),
        ));
    }
    Ok(name)
}

/// FNV-1a, 64 bits: a hash that never changes between builds, for file names kept on disk.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The file stem of a session's buffer: the id itself when it is already a short slug, else a
/// slug of it plus `.` and a hash of the whole id (so distinct ids never share a file). Never fails.
pub(crate) fn session_stem(session_id: &str) -> String {
    let readable: String = slug(session_id).chars().take(MAX_SESSION_STEM).collect();
    if !readable.is_empty() && readable == session_id {
        return readable;
    }
    let readable = if readable.is_empty() {
        "session".to_owned()
    } else {
        readable.trim_end_matches('-').to_owned()
    };
    format!("{readable}.{:016x}", fnv1a(session_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_become_slugs() {
        assert_eq!(sanitize_topic("People").unwrap(), "people");
        assert_eq!(sanitize_topic("  Home Network ").unwrap(), "home-network");
        assert_eq!(sanitize_topic("C++ & Rust!").unwrap(), "c-rust");
        assert_eq!(sanitize_topic("under_score").unwrap(), "under-score");
        assert_eq!(sanitize_topic(".hidden").unwrap(), "hidden");
        assert_eq!(sanitize_topic("Ärzte").unwrap(), "ärzte");
    }

    #[test]
    fn escapes_are_refused_with_the_reason() {
        let cases = [
            ("../etc/passwd", "`..`"),
            ("..", "`..`"),
            ("/etc/passwd", "absolute path"),
            ("\\\\server\\share", "absolute path"),
            ("C:\\Windows", "absolute path"),
            ("~/secrets", "absolute path"),
            ("a/b", "path separator"),
            ("a\\b", "path separator"),
            ("bad\0name", "NUL"),
            ("---", "no letters or digits"),
            ("", "no letters or digits"),
        ];
        for (raw, reason) in cases {
            let error = sanitize_topic(raw).unwrap_err().to_string();
            assert!(error.contains(reason), "{raw:?}: {error}");
            assert!(error.starts_with("invalid topic"), "{error}");
        }
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        let error = sanitize_topic(&long).unwrap_err().to_string();
        assert!(
            error.contains("65 characters long; the limit is 64"),
            "{error}"
        );
        assert!(
            error.len() < 200,
            "the name is shortened in the message: {error}"
        );
    }

    #[test]
    fn agent_ids_must_already_be_clean() {
        assert_eq!(check_agent_id("assistant").unwrap(), "assistant");
        assert_eq!(check_agent_id("research-bot-2").unwrap(), "research-bot-2");
        let error = check_agent_id("Research Bot").unwrap_err().to_string();
        assert!(error.contains("such as `research-bot`"), "{error}");
        assert!(check_agent_id("../x").is_err());
    }

    #[test]
    fn session_stems_are_safe_and_distinct() {
        assert_eq!(session_stem("s1"), "s1");
        let upper = session_stem("S1");
        assert!(upper.starts_with("s1."), "{upper}");
        assert_ne!(upper, session_stem("s1"));
        let hostile = session_stem("../../etc/passwd");
        assert!(hostile.starts_with("etc-passwd."), "{hostile}");
        assert!(!hostile.contains('/'));
        assert!(session_stem("").starts_with("session."));
        assert!(session_stem(&"y".repeat(500)).len() < 70);
        assert_eq!(session_stem("a b"), session_stem("a b"));
        assert_ne!(session_stem("a b"), session_stem("a_b"));
    }
}

//! A search's scope as SQLite's full-text index matches it: the scope tokens of
//! `memories.fts_scope` and the owners' ranges of index row ids. The visibility rule and a
//! request's filters are written once, in `store/sql/scope.rs`.

use std::fmt::Write as _;

use sqlx::{QueryBuilder, Sqlite};

use crate::store::TextScope;

/// The token `memories.fts_scope` holds for an id (migration 0014): `kind` (`u` owner, `c`
/// chat, `s` shared with the chat), the id's UTF-8 bytes in hex as SQLite's `hex()` spells
/// them, and `x`.
fn scope_token(kind: char, id: &str) -> String {
    let mut token = String::with_capacity(id.len() * 2 + 2);
    token.push(kind);
    for byte in id.bytes() {
        let _ = write!(token, "{byte:02X}");
    }
    token.push('x');
    token
}

/// How the full-text index keeps the rows a scope may see (and some it may not: an owner's
/// memories of other chats, which the visibility rule drops after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum IndexScope {
    /// Every row: a search of the whole store.
    Whole,
    /// One owner's memories: their range of index row ids (migration 0019), which FTS5 seeks
    /// to in each word's list, so a match reads the owner's entries and not everyone's.
    Owner(String),
    /// The rows whose scope tokens this FTS5 condition on `fts_scope` names: a chat's, which
    /// are several owners'.
    Tokens(String),
}

/// The FTS5 rows `scope` searches.
pub(super) fn index_scope(scope: TextScope<'_>) -> IndexScope {
    let tokens = match (scope.user_id, scope.chat_id) {
        (Some(user), Some(chat)) => format!(
            "\"{}\" OR \"{}\"",
            scope_token('u', user),
            scope_token('s', chat)
        ),
        (Some(user), None) => return IndexScope::Owner(user.to_owned()),
        (None, Some(chat)) => format!("\"{}\"", scope_token('c', chat)),
        (None, None) => return IndexScope::Whole,
    };
    IndexScope::Tokens(format!("fts_scope : ({tokens})"))
}

/// The FTS5 condition that matches every memory of `owner` by their scope token: for a figure
/// that needs a match to read (an auxiliary function reads nothing on a scan of row ids).
pub(super) fn owner_condition(owner: &str) -> String {
    format!("fts_scope : (\"{}\")", scope_token('u', owner))
}

/// The first and the last index row id of the owner bound as `?N`, for SQL text with numbered
/// parameters: `NULL` for an owner with no memory, which matches nothing.
macro_rules! owner_rows {
    ($n:literal) => {
        concat!(
            "BETWEEN (SELECT number << 32 FROM fts_owners WHERE owner = ?",
            $n,
            ") AND (SELECT (number << 32) + 4294967295 FROM fts_owners WHERE owner = ?",
            $n,
            ")"
        )
    };
}
pub(super) use owner_rows;

/// Appends ` AND memories_fts.rowid BETWEEN …` for the range of `owner` (see [`owner_rows`]).
fn push_owner_rows(builder: &mut QueryBuilder<Sqlite>, owner: &str) {
    builder
        .push(" AND memories_fts.rowid BETWEEN (SELECT number << 32 FROM fts_owners WHERE owner = ")
        .push_bind(owner.to_owned())
        .push(") AND (SELECT (number << 32) + 4294967295 FROM fts_owners WHERE owner = ")
        .push_bind(owner.to_owned())
        .push(")");
}

impl IndexScope {
    /// Appends `memories_fts MATCH <query>` kept within the scope, for a query over
    /// `memories_fts` (the innermost one of that name).
    pub(super) fn push_match(&self, builder: &mut QueryBuilder<Sqlite>, query: &str) {
        builder.push("memories_fts MATCH ");
        match self {
            Self::Whole => {
                builder.push_bind(query.to_owned());
            }
            Self::Tokens(condition) => {
                builder.push_bind(within(Some(condition), query));
            }
            Self::Owner(owner) => {
                builder.push_bind(query.to_owned());
                push_owner_rows(builder, owner);
            }
        }
    }
}

/// `query` within the rows a scope's token `condition` keeps; all rows for none.
pub(super) fn within(condition: Option<&str>, query: &str) -> String {
    match condition {
        Some(condition) => format!("{condition} AND ({query})"),
        None => query.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens_spell_ids_as_sqlite_hex_does() {
        assert_eq!(scope_token('u', "ana"), "u616E61x");
        // Any id is one token of letters and digits, whatever its characters.
        assert_eq!(scope_token('s', "té am\""), "s74C3A920616D22x");
        let ana = TextScope {
            user_id: Some("ana"),
            chat_id: None,
        };
        assert_eq!(index_scope(ana), IndexScope::Owner("ana".into()));
        let in_chat = TextScope {
            user_id: Some("ana"),
            chat_id: Some("team"),
        };
        assert_eq!(
            index_scope(in_chat),
            IndexScope::Tokens("fts_scope : (\"u616E61x\" OR \"s7465616Dx\")".into())
        );
        assert_eq!(index_scope(TextScope::default()), IndexScope::Whole);
    }
}

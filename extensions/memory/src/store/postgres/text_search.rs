//! Full-text queries in PostgreSQL's words. The search layer writes its queries in the small
//! part of FTS5's syntax it uses (see `crate::search::fts_query`): double-quoted terms (a quote
//! inside doubled), `AND`, `OR`, `NOT` and brackets, with terms side by side meaning AND. That
//! is turned into the text of a `tsquery` that `to_tsquery('mnemo_english', …)` reads, which stems
//! each word as the `search_text` column was stemmed. A quoted term of several words becomes a
//! phrase, as in FTS5.

/// The text search configuration of `memories.search_text`; queries must use the same one.
pub(super) const CONFIG: &str = "mnemo_english";

#[derive(Debug, PartialEq)]
enum Token {
    Term(String),
    And,
    Or,
    Not,
    Open,
    Close,
}

fn tokens(query: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut term = String::new();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            term.push('"');
                        }
                        Some('"') | None => break,
                        Some(other) => term.push(other),
                    }
                }
                tokens.push(Token::Term(term));
            }
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            c if c.is_whitespace() => {}
            first => {
                let mut word = String::from(first);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '"' | '(' | ')') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                tokens.push(match word.as_str() {
                    "AND" => Token::And,
                    "OR" => Token::Or,
                    "NOT" => Token::Not,
                    _ => Token::Term(word),
                });
            }
        }
    }
    tokens
}

/// A term as a quoted tsquery operand: its words only (letters and digits), so that nothing in
/// it is tsquery syntax; several words make a phrase. `None` when it has no word.
fn operand(term: &str) -> Option<String> {
    let words: Vec<&str> = term
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    (!words.is_empty()).then(|| format!("'{}'", words.join(" ")))
}

/// The tsquery text for an FTS5 query of the shape described in the module docs; `None` when it
/// has no term.
pub(super) fn tsquery(fts5: &str) -> Option<String> {
    let mut out = String::new();
    // Whether the last thing written can be followed by an operand only through an operator.
    let mut after_operand = false;
    let mut any_term = false;
    for token in tokens(fts5) {
        match token {
            Token::Term(term) => {
                let Some(operand) = operand(&term) else {
                    continue;
                };
                if after_operand {
                    out.push_str(" & ");
                }
                out.push_str(&operand);
                after_operand = true;
                any_term = true;
            }
            Token::Open => {
                if after_operand {
                    out.push_str(" & ");
                }
                out.push('(');
                after_operand = false;
            }
            Token::Close => {
                out.push(')');
                after_operand = true;
            }
            Token::And => {
                out.push_str(" & ");
                after_operand = false;
            }
            Token::Or => {
                out.push_str(" | ");
                after_operand = false;
            }
            Token::Not => {
                out.push_str(" & !");
                after_operand = false;
            }
        }
    }
    any_term.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_search_layers_queries() {
        assert_eq!(
            tsquery("\"coffee\" OR \"tea\"").as_deref(),
            Some("'coffee' | 'tea'")
        );
        assert_eq!(
            tsquery("\"zebra\" OR (\"dana\" AND \"lis\"\"bon\")").as_deref(),
            Some("'zebra' | ('dana' & 'lis bon')")
        );
        assert_eq!(
            tsquery("\"sarah connor\"").as_deref(),
            Some("'sarah connor'")
        );
        assert_eq!(tsquery("\"a\" \"b\"").as_deref(), Some("'a' & 'b'"));
        assert_eq!(tsquery("\"a\" NOT \"b\"").as_deref(), Some("'a' & !'b'"));
        assert_eq!(tsquery("").as_deref(), None);
        assert_eq!(tsquery("\"'\\\\\"").as_deref(), None);
        assert_eq!(tsquery("\"it's\"").as_deref(), Some("'it s'"));
    }
}

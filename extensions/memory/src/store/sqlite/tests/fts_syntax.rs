//! Every query the search layer builds from hostile text is valid FTS5 syntax, checked
//! against an FTS5 table with the store's tokenizer, in memory.

use proptest::prelude::*;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::SqlitePool;

use crate::search::fts_query::properties::hostile_text;
use crate::search::fts_query::{match_any, match_rare_or_all_common, query_terms};
use crate::text::terms;

/// A runtime and an FTS5 table with the store's tokenizer, in memory.
fn fixture() -> &'static (tokio::runtime::Runtime, SqlitePool) {
    static FIXTURE: std::sync::OnceLock<(tokio::runtime::Runtime, SqlitePool)> =
        std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let pool = runtime.block_on(async {
            let options: SqliteConnectOptions = "sqlite::memory:".parse().unwrap();
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .unwrap();
            sqlx::query(
                "CREATE VIRTUAL TABLE t USING fts5(content, \
                 tokenize = 'porter unicode61 remove_diacritics 2')",
            )
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query("INSERT INTO t(content) VALUES ('the garden note'), ('quartz and tea')")
                .execute(&pool)
                .await
                .unwrap();
            pool
        });
        (runtime, pool)
    })
}

/// Runs `expression` as a MATCH; the error, if FTS5 refuses it.
fn run(expression: &str) -> Result<i64, String> {
    let (runtime, pool) = fixture();
    runtime
        .block_on(
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM t WHERE t MATCH ?")
                .bind(expression)
                .fetch_one(pool),
        )
        .map_err(|error| error.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_built_query_is_valid_fts5(rare in hostile_text(), common in hostile_text()) {
        // Terms as the store makes them, and also raw words that were never split.
        let rare_terms = query_terms(&rare);
        let common_terms = terms(&common);
        if let Some(expression) = match_any(&rare_terms) {
            prop_assert!(run(&expression).is_ok(), "{expression:?}: {:?}", run(&expression));
        }
        if let Some(expression) = match_rare_or_all_common(&rare_terms, &common_terms) {
            prop_assert!(run(&expression).is_ok(), "{expression:?}: {:?}", run(&expression));
        }
        let raw = vec![rare.clone(), common.clone()];
        if let Some(expression) = match_rare_or_all_common(&raw, &raw) {
            prop_assert!(run(&expression).is_ok(), "{expression:?}: {:?}", run(&expression));
        }
    }
}

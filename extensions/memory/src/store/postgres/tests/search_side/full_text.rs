//! Full text: stemming, ranking by `ts_rank`, the request's filters, and counts.

use super::super::open_fresh;
use super::{ana, insert, row, sql, Row};
use crate::search::{search_fts, CorpusStats};
use crate::store::backend::{FullTextIndex, MemoryRecords};
use crate::store::TextScope;
use crate::types::SearchRequest;

#[tokio::test]
async fn full_text_ranks_stems_and_filters() {
    let store = open_fresh().await;
    for memory in [
        row("run", "I run every morning before work"),
        row(
            "runs",
            "She runs and runs and runs along the river, running all day",
        ),
        row("coffee", "Coffee with oat milk, no sugar"),
        Row {
            user: Some("bo"),
            ..row("bo_run", "Bo will run a marathon")
        },
        row("gone", "run run run"),
        row("empty", ""),
    ] {
        insert(&store, &memory).await;
    }
    sql(
        &store,
        "UPDATE memories SET valid_until = 1 WHERE id = 'gone'",
    )
    .await;
    // "running" is stemmed as "run" was.
    let matches = store
        .fts_best_matches("\"running\"", &ana(), 10)
        .await
        .unwrap();
    let ids: Vec<&str> = matches.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["runs", "run"], "more occurrences rank higher");
    assert!(matches.iter().all(|(_, score)| *score > 0.0));
    assert!(matches[0].1 > matches[1].1);
    let all = store
        .fts_all_matches("\"running\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(all, matches);
    // A memory with more of the query's words ranks above one with fewer.
    let both = store
        .fts_best_matches("\"coffee\" OR \"sugar\" OR \"river\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(both[0].0, "coffee");
    assert_eq!(both.len(), 2);
    // Filters: another owner's, and soft-deleted memories, are left out unless asked.
    let everyone = SearchRequest {
        include_deleted: true,
        ..SearchRequest::default()
    };
    let all_runs = store
        .fts_all_matches("\"run\"", &everyone, 10)
        .await
        .unwrap();
    assert_eq!(all_runs.len(), 4);
    assert_eq!(all_runs[0].0, "gone", "three runs in three words");
    let limited = store
        .fts_best_matches("\"run\"", &everyone, 2)
        .await
        .unwrap();
    assert_eq!(limited, all_runs[..2]);
    let bo = SearchRequest {
        user_id: Some("bo".into()),
        ..SearchRequest::default()
    };
    let bo_runs = store.fts_best_matches("\"run\"", &bo, 10).await.unwrap();
    assert_eq!(bo_runs.len(), 1);
    assert_eq!(bo_runs[0].0, "bo_run");
    // NOT, AND and phrases.
    let not = store
        .fts_all_matches("\"run\" NOT \"river\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(not.len(), 1);
    assert_eq!(not[0].0, "run");
    assert!(not[0].1 > 0.0);
    let phrase = store
        .fts_all_matches("\"oat milk\"", &ana(), 10)
        .await
        .unwrap();
    assert_eq!(phrase.len(), 1);
    assert!(store
        .fts_all_matches("\"milk oat\"", &ana(), 10)
        .await
        .unwrap()
        .is_empty());
    // Counts: every memory is a document; as in FTS5, no word is a stop word ("no", "the"), and
    // empty queries match nothing.
    let everyone = TextScope::default();
    assert_eq!(store.fts_document_count(everyone).await.unwrap(), 6);
    assert_eq!(
        store
            .fts_match_count("\"running\"", everyone)
            .await
            .unwrap(),
        4
    );
    assert_eq!(store.fts_match_count("\"the\"", everyone).await.unwrap(), 1);
    assert_eq!(
        store
            .fts_match_count("\"no\" AND \"sugar\"", everyone)
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.fts_match_count("", everyone).await.unwrap(), 0);
    assert!(store
        .fts_best_matches("", &ana(), 5)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .fts_all_matches("\"'\"", &ana(), 5)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn full_text_finds_the_best_few_among_many() {
    let store = open_fresh().await;
    sql(
        &store,
        "INSERT INTO memories (id, kind, content, user_id, event_time, created_at) \
         SELECT 'm' || n, 'fact', 'note ' || n || CASE WHEN n % 100 = 0 THEN ' garden garden' \
         ELSE ' garden' END, CASE WHEN n % 2 = 0 THEN 'ana' ELSE 'bo' END, n, n \
         FROM generate_series(1, 3000) n",
    )
    .await;
    let best = store
        .fts_best_matches("\"gardening\"", &ana(), 5)
        .await
        .unwrap();
    // The 30 memories with the word twice come first, newest first among equals.
    assert_eq!(best.len(), 5);
    assert_eq!(best[0].0, "m3000");
    assert_eq!(best[1].0, "m2900");
    let all = store
        .fts_all_matches("\"gardening\"", &ana(), 5)
        .await
        .unwrap();
    assert_eq!(best, all);
    assert_eq!(
        store
            .fts_match_count("\"garden\"", TextScope::default())
            .await
            .unwrap(),
        3000
    );
    // Counted within one owner's scope: Ana has half of them.
    let of_ana = TextScope {
        user_id: Some("ana"),
        chat_id: None,
    };
    assert_eq!(store.fts_document_count(of_ana).await.unwrap(), 1500);
    assert_eq!(
        store.fts_match_count("\"garden\"", of_ana).await.unwrap(),
        1500
    );

    // Through the search layer: over 2,000 memories, words in half of them or more ("garden"
    // and "note" are in all) are left out of the query; Ana has no "17", so they are searched
    // after all.
    let request = SearchRequest {
        query: "gardens, notes and 17".into(),
        ..ana()
    };
    let found = search_fts(&store, &CorpusStats::default(), &request, 3)
        .await
        .unwrap();
    assert_eq!(found.len(), 3);
    let mut contents = Vec::new();
    for (id, _) in &found {
        contents.push(store.get(id).await.unwrap().unwrap().content);
    }
    assert!(
        contents.iter().all(|content| content.contains("garden")),
        "{contents:?}"
    );
    // The query's form can use the GIN index (a table this small is read whole otherwise).
    let mut tx = store.pool().begin().await.unwrap();
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT id FROM memories WHERE search_text @@ to_tsquery('mnemo_english', $1)",
    )
    .bind("'note' & '17'")
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert!(
        plan.join("\n").contains("idx_memories_search_text"),
        "{plan:?}"
    );
}

#[tokio::test]
async fn any_query_text_is_answered_without_an_error() {
    let store = open_fresh().await;
    insert(
        &store,
        &row(
            "m",
            "Lisbon's café: naïve \"quotes\" and O'Brien (2024) AND/OR NOT",
        ),
    )
    .await;
    for text in [
        "",
        "\"",
        "'",
        "''' \"\"\" \\",
        "AND OR NOT",
        "( ) ( (",
        "a & b | !c <-> d:*",
        "café naïve 東京 Ωμέγα",
        "O'Brien's",
        "NEAR(a b) col:term ^x *",
        "the of and",
        "2024-01-01 12:00",
        "x\u{1}y",
    ] {
        let request = SearchRequest {
            query: text.to_owned(),
            ..ana()
        };
        let found = search_fts(&store, &CorpusStats::default(), &request, 5).await;
        assert!(found.is_ok(), "{text:?}: {found:?}");
    }
    let request = SearchRequest {
        query: "what about o'brien and the cafes?".into(),
        ..ana()
    };
    let found = search_fts(&store, &CorpusStats::default(), &request, 5)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

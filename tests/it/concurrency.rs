//! Concurrency: eight users' sessions ingest at once while consolidation (through an
//! OpenAI-compatible LLM on a local HTTP server), decay, a full re-index and searches run. No
//! caller sees an error ("database is locked" or any other), no event is lost, the totals add
//! up, and the store is consistent afterwards. Writers are serialised inside the store (one
//! write lock); readers run beside them under WAL.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use mnemo_kernel::host::{Config, Kernel};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use mnemo_kernel::ConversationEvent;
use mnemo_memory::{MemoryService, SearchRequest};
use serde_json::json;

const USERS: usize = 8;
const SESSIONS: usize = 3;
const TURNS: usize = 20;

/// The model's words for every LLM call: one fact, and no contradictions (the consolidation
/// prompt reads `facts`, the conflict check `contradictions`).
fn llm_reply(index: usize) -> CannedAnswer {
    let content = json!({
        "facts": [{"content": format!("The user discussed the Lisbon budget, note {index}"), "sources": [1]}],
        "contradictions": []
    })
    .to_string();
    CannedAnswer::json(
        &json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}),
    )
}

fn turn(user: usize, session: usize, index: usize) -> ConversationEvent {
    let at = Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap()
        + Duration::minutes((session * 100 + index) as i64);
    let value = json!({
        "type": if index.is_multiple_of(2) { "user_message" } else { "agent_response" },
        "id": format!("u{user}-s{session}-t{index}"),
        "at": at.to_rfc3339(),
        "session_id": format!("u{user}-s{session}"),
        "user_id": format!("user{user}"),
        "text": format!("User {user} session {session} turn {index}: the budget for Lisbon and Priya's review"),
    });
    ConversationEvent::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_sessions_ingest_while_consolidation_decay_and_reindex_run() {
    let server = HttpTestServer::start((0..400).map(llm_reply).collect()).await;
    let config = Config::parse(
        &format!(
            "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
             [extensions.embedding]\n[extensions.ner]\n[extensions.memory]\n\
             [extensions.memory_maintenance]\n",
            server.base_url
        ),
        "test.toml",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Arc::new(
        Kernel::builder(mnemo_host::builtin_extensions(), config)
            .data_dir(dir.path())
            .start()
            .await
            .unwrap(),
    );
    let service: Arc<MemoryService> = kernel.context().services().get::<MemoryService>().unwrap();

    // Eight writers, one per user: each session's turns in order, sessions one after another
    // (each new session closes the last and sets off its consolidation).
    let writers: Vec<_> = (0..USERS)
        .map(|user| {
            let service = Arc::clone(&service);
            tokio::spawn(async move {
                let mut errors = Vec::new();
                for session in 0..SESSIONS {
                    for index in 0..TURNS {
                        let event = turn(user, session, index).into_event();
                        match service.ingest(&event).await {
                            Ok(Some(_)) => {}
                            Ok(None) => errors.push(format!("{}: not stored", event.id)),
                            Err(error) => errors.push(format!("{}: {error}", event.id)),
                        }
                    }
                }
                errors
            })
        })
        .collect();

    // Beside them: the maintenance jobs, a full re-index, and searches.
    let maintenance = {
        let kernel = Arc::clone(&kernel);
        tokio::spawn(async move {
            let mut errors = Vec::new();
            for _ in 0..3 {
                for job in ["execute_consolidation", "execute_decay"] {
                    match kernel.run_job(job).await {
                        Ok(run) => {
                            if let Err(error) = run.outcome {
                                errors.push(format!("{job}: {error}"));
                            }
                        }
                        Err(error) => errors.push(format!("{job}: {error}")),
                    }
                }
            }
            errors
        })
    };
    let reindex = {
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            let mut errors = Vec::new();
            if let Err(error) = service.prepare_reindex(true).await {
                errors.push(format!("prepare_reindex: {error}"));
            }
            loop {
                match service.index_one_batch().await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(error) => {
                        errors.push(format!("index_one_batch: {error}"));
                        break;
                    }
                }
            }
            errors
        })
    };
    let searches = {
        let service = Arc::clone(&service);
        tokio::spawn(async move {
            let mut errors = Vec::new();
            for round in 0..40 {
                let request = SearchRequest {
                    query: "budget for Lisbon".to_owned(),
                    user_id: Some(format!("user{}", round % USERS)),
                    limit: 5,
                    ..SearchRequest::default()
                };
                if let Err(error) = service.search(&request).await {
                    errors.push(format!("search: {error}"));
                }
            }
            errors
        })
    };

    let mut errors = Vec::new();
    for writer in writers {
        errors.extend(writer.await.unwrap());
    }
    for task in [maintenance, reindex, searches] {
        errors.extend(task.await.unwrap());
    }
    assert!(errors.is_empty(), "callers saw errors: {errors:#?}");

    // Every turn stored once; the LLM was really asked; the store is consistent once the
    // indexer has caught up.
    kernel.settle().await;
    while service.index_one_batch().await.unwrap() > 0 {}
    let stats = service.stats(None).await.unwrap();
    assert_eq!(stats.episodes, (USERS * SESSIONS * TURNS) as i64);
    assert!(
        !server.received().is_empty(),
        "consolidation never reached the LLM"
    );
    assert!(stats.facts > 0, "consolidation stored no fact");
    let report = service.check_integrity().await.unwrap();
    assert_eq!(report.problems(), Vec::<String>::new(), "{report:?}");
    assert_eq!(report.queued, 0);
    assert_eq!(report.vectors, Some(report.active));
    for user in 0..USERS {
        for session in 0..SESSIONS {
            for index in 0..TURNS {
                // Resending is a no-op: each event is stored exactly once.
                let again = service
                    .ingest(&turn(user, session, index).into_event())
                    .await
                    .unwrap();
                assert_eq!(again, None);
            }
        }
    }
    Arc::try_unwrap(kernel)
        .unwrap_or_else(|_| panic!("kernel still shared"))
        .shutdown()
        .await;
}

/// Turns sent at once commit together (group commit), and a caller whose turn the database
/// refuses fails alone: every other caller's turn is stored and acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_turns_commit_together_and_a_refused_one_fails_alone() {
    let config = Config::parse("[extensions.memory]\n", "test.toml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let service: Arc<MemoryService> = kernel.context().services().get::<MemoryService>().unwrap();
    // The database itself refuses one turn, after every check of ours has passed.
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("memory.db").display()
    ))
    .await
    .unwrap();
    sqlx::query(
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON memories WHEN NEW.content LIKE '%poison%' \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let callers: Vec<_> = (0..48)
        .map(|index| {
            let service = Arc::clone(&service);
            tokio::spawn(async move {
                let mut event = turn(index % 6, 0, index);
                if index == 17 {
                    event.text = "this one is poison".into();
                }
                service.ingest(&event.into_event()).await
            })
        })
        .collect();
    let mut stored = 0;
    let mut refused = Vec::new();
    for (index, caller) in callers.into_iter().enumerate() {
        match caller.await.unwrap() {
            Ok(Some(_)) => stored += 1,
            Ok(None) => panic!("turn {index} was not stored"),
            Err(error) => refused.push((index, error.to_string())),
        }
    }
    assert_eq!(stored, 47);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, 17);
    assert!(refused[0].1.contains("refused by the test"), "{refused:?}");
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memories")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        count, 47,
        "every acknowledged turn, and only those, is stored"
    );
    pool.close().await;
    kernel.shutdown().await;
}

/// Searches count their recalls without writing on the request path: the counts are written in
/// the background and on close, each recall once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_counts_are_written_after_the_searches_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let start = || async {
        let config = Config::parse("[extensions.memory]\n", "test.toml").unwrap();
        let kernel = Kernel::builder(mnemo_host::builtin_extensions(), config)
            .data_dir(dir.path())
            .start()
            .await
            .unwrap();
        let service: Arc<MemoryService> =
            kernel.context().services().get::<MemoryService>().unwrap();
        (kernel, service)
    };
    let search = |touch: bool| SearchRequest {
        query: "Lisbon budget".into(),
        user_id: Some("user1".into()),
        limit: 5,
        touch,
        ..SearchRequest::default()
    };
    let (kernel, service) = start().await;
    let stored = service
        .ingest(&turn(1, 0, 0).into_event())
        .await
        .unwrap()
        .unwrap();
    let searches: Vec<_> = (0..7)
        .map(|_| {
            let service = Arc::clone(&service);
            let request = search(true);
            tokio::spawn(async move { service.search(&request).await.unwrap().len() })
        })
        .collect();
    for search in searches {
        assert_eq!(search.await.unwrap(), 1);
    }
    kernel.shutdown().await;

    let (kernel, service) = start().await;
    let hits = service.search(&search(false)).await.unwrap();
    assert_eq!(hits[0].memory.id, stored);
    assert_eq!(hits[0].memory.access_count, 7, "each recall counted once");
    assert!(hits[0].memory.last_accessed.is_some());
    kernel.shutdown().await;
}

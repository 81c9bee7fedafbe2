//! The web inspector in a real browser: headless Chromium loads `/` from a real `mnemo serve`,
//! signs in with a user's key, lists memories, searches, opens a fact's provenance (made by a
//! consolidation job run from its source turns), forgets it and checks it is gone; then signs
//! in with an admin key for the same user and reads the job history. Screenshots of each step
//! are saved in `target/inspector-screenshots/`.
//!
//! The model that consolidates is a local OpenAI-compatible server with a scripted reply (the
//! model's words only); the server, the store and the page are the real ones.

use std::path::PathBuf;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::browser::Browser;
use crate::common::server::{create_key, Served};

/// The fact the scripted model draws from the two turns.
const FACT: &str = "Maria teaches surfing in Lisbon";

fn model(request: &ReceivedRequest) -> CannedAnswer {
    let system = request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    let content = if system.contains("extract durable facts") {
        json!({"facts": [{"content": FACT, "sources": [1, 2]}]}).to_string()
    } else if system.contains("contradict") {
        json!({"contradictions": []}).to_string()
    } else {
        "ok".to_owned()
    };
    CannedAnswer::json(&json!({"choices": [{"message": {"role": "assistant",
        "content": content}, "finish_reason": "stop"}]}))
}

/// Where the screenshots go: `target/inspector-screenshots`, beside the test binaries.
fn screenshot_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/inspector_browser-HASH
    let target = exe.ancestors().nth(3).unwrap().to_owned();
    target.join("inspector-screenshots")
}

fn turn(id: &str, minute: u32, text: &str) -> Value {
    json!({"id": id, "type": "user_message", "at": format!("2026-11-20T10:{minute:02}:00Z"),
           "session_id": "s1", "provider": "telegram", "text": text})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_inspects_searches_and_forgets_in_a_real_browser() {
    let llm = HttpTestServer::respond_with(model).await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\ntimeout_secs = 5\n\
         [extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n\
         [extensions.memory_maintenance]\n",
        llm.base_url
    );
    let served = Served::start(dir.path(), &config, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);

    // Ana's memory: two turns of a session, a fact she told directly, and the fact the nightly
    // consolidation draws from the turns (run now, by an admin).
    let (status, stored) = served
        .call(
            Some(&ana),
            None,
            Method::POST,
            "/v1/events",
            Some(json!({"events": [
                turn("e1", 0, "My sister Maria moved to Lisbon last spring."),
                turn("e2", 1, "She teaches surfing there on weekends."),
            ]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    let (status, told) = served
        .call(
            Some(&ana),
            None,
            Method::POST,
            "/v1/memories",
            Some(json!({"content": "Ana is allergic to peanuts"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{told}");
    let (status, run) = served
        .call(
            Some(&served.admin_key),
            None,
            Method::POST,
            "/v1/jobs/execute_consolidation/run",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["ok"], true, "{run}");
    let (_, facts) = served
        .call(
            Some(&ana),
            None,
            Method::GET,
            "/v1/memories?kind=fact",
            None,
        )
        .await;
    let fact = facts["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|memory| memory["content"] == FACT)
        .unwrap_or_else(|| panic!("consolidation made no fact `{FACT}`: {facts} (run: {run})"))
        .clone();
    let fact_id = fact["id"].as_str().unwrap().to_owned();
    let fact_path = format!("/v1/memories/{fact_id}");
    let fact_status = || async {
        served
            .call(Some(&ana), None, Method::GET, &fact_path, None)
            .await
            .0
    };

    let shots = screenshot_dir();
    let browser = Browser::start(&shots).await;

    // The page loads without a key and asks for one.
    browser.open(&format!("{}/", served.url)).await;
    browser
        .wait_for("#sign-in", "the key prompt", |text| {
            text.contains("API key")
        })
        .await;
    assert_eq!(
        browser.text("#app").await,
        None,
        "nothing shown before a key"
    );
    browser.screenshot("01-sign-in").await;

    // A wrong key is refused with the server's words.
    browser.type_into("#key", "mnemo_not_a_key").await;
    browser.click("#connect").await;
    browser
        .wait_for("#sign-in-error", "the refusal", |text| !text.is_empty())
        .await;
    assert_eq!(
        browser.text("#app").await,
        None,
        "a wrong key opens nothing"
    );

    // Ana's key: her memories, newest first, with the consolidated fact.
    browser.type_into("#key", &ana).await;
    browser.click("#connect").await;
    let rows = browser
        .wait_for("#memory-rows", "Ana's memories", |text| text.contains(FACT))
        .await;
    for expected in [
        "Ana is allergic to peanuts",
        "She teaches surfing there on weekends.",
    ] {
        assert!(
            rows.contains(expected),
            "{expected:?} missing from {rows:?}"
        );
    }
    assert_eq!(
        browser.text("#who").await.as_deref(),
        Some("ana"),
        "a user key opens its own user"
    );
    browser.screenshot("02-memories").await;

    // Filtered to facts only: the turns go.
    browser
        .run(
            "document.getElementById('filter-kind').value = 'fact';",
            json!([]),
        )
        .await;
    browser.click("#filter-go").await;
    let facts_only = browser
        .wait_for("#memory-rows", "facts only", |text| {
            !text.contains("She teaches surfing there")
        })
        .await;
    assert!(facts_only.contains(FACT), "{facts_only:?}");
    assert!(
        facts_only.contains("Ana is allergic to peanuts"),
        "{facts_only:?}"
    );

    // Search, with each hit's score breakdown.
    browser.click("#tab-search").await;
    browser.type_into("#search-query", "surfing Lisbon").await;
    browser.click("#search-go").await;
    let hits = browser
        .wait_for("#hits", "hits", |text| text.contains(FACT))
        .await;
    assert!(hits.contains("fts #"), "each hit names its lists: {hits:?}");
    assert!(hits.contains("fused"), "and the fusion: {hits:?}");
    assert!(
        hits.contains("× confidence"),
        "and the confidence: {hits:?}"
    );
    browser.screenshot("03-search").await;

    // The fact's provenance: made by the consolidation run, from the two turns.
    browser
        .click(&format!("li.hit[data-id=\"{fact_id}\"]"))
        .await;
    let made_by = browser
        .wait_for("#made-by", "the fact's origin", |text| {
            text.contains("consolidation")
        })
        .await;
    assert!(
        made_by.contains("job run execute_consolidation"),
        "the run that made it: {made_by:?}"
    );
    assert!(
        made_by.contains("in session s1 via telegram"),
        "the session it was drawn from, and the provider that session came through: {made_by:?}"
    );
    let detail = browser.text("#detail-body").await.unwrap();
    assert!(
        detail.contains("My sister Maria moved to Lisbon last spring."),
        "its source turns: {detail:?}"
    );
    assert!(
        detail.contains("She teaches surfing there on weekends."),
        "{detail:?}"
    );
    browser.screenshot("04-provenance").await;

    // Forget it: the page asks first; cancelling keeps it.
    browser.click("#forget").await;
    browser
        .wait_for("#ask-text", "the question", |text| text.contains("Forget"))
        .await;
    browser.click("#ask-no").await;
    assert_eq!(
        fact_status().await,
        StatusCode::OK,
        "cancelled: the fact stays"
    );
    browser.click("#forget").await;
    browser
        .wait_for("#ask-text", "the question", |text| text.contains("Forget"))
        .await;
    browser.click("#ask-yes").await;
    browser
        .wait_for("#status", "the forgetting", |text| {
            // The receipt names it: a forgotten fact drawn from turns, nothing derived from it.
            text.contains("Forgotten, receipt rcpt_")
                && text.contains(&format!("fact {fact_id} (forgotten)"))
        })
        .await;
    browser.screenshot("05-forgotten").await;

    // Gone: from the server, from search, and from the page's list.
    assert_eq!(
        fact_status().await,
        StatusCode::NOT_FOUND,
        "the fact is gone"
    );
    browser.click("#search-go").await;
    browser
        .wait_for("#status", "the search again", |text| {
            text.contains("hits") || text.contains("Nothing")
        })
        .await;
    let hits = browser.text("#hits").await.unwrap_or_default();
    assert!(!hits.contains(FACT), "search no longer finds it: {hits:?}");
    browser.click("#tab-memories").await;
    browser
        .run(
            "document.getElementById('filter-kind').value = '';",
            json!([]),
        )
        .await;
    browser.click("#filter-go").await;
    let rows = browser
        .wait_for("#memory-rows", "the list again", |text| {
            text.contains("Ana is allergic to peanuts")
        })
        .await;
    assert!(!rows.contains(FACT), "the list no longer has it: {rows:?}");

    // An admin key opens Ana's memory by name, and sees the job history.
    browser.click("#sign-out").await;
    browser
        .wait_for("#sign-in", "the key prompt", |text| {
            text.contains("API key")
        })
        .await;
    browser.type_into("#key", &served.admin_key).await;
    browser.click("#connect").await;
    browser
        .wait_for("#sign-in-error", "the question whose memory", |text| {
            text.contains("admin key")
        })
        .await;
    browser.type_into("#act-for", "ana").await;
    browser.click("#connect").await;
    browser
        .wait_for("#who", "the admin acting for Ana", |text| {
            text == "admin, as ana"
        })
        .await;
    browser.click("#tab-jobs").await;
    let runs = browser
        .wait_for("#run-rows", "the job history", |text| {
            text.contains("execute_consolidation")
        })
        .await;
    assert!(runs.contains("done"), "its outcome: {runs:?}");
    browser.screenshot("06-jobs").await;
    browser.quit().await;
    eprintln!("screenshots in {}", shots.display());
}

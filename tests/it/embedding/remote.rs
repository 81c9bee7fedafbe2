//! The remote provider against a real local HTTP server with canned OpenAI-style answers.

use std::time::Duration;

use mnemo_embedding::{
    EmbeddingApi, EmbeddingConfig, EmbeddingError, EmbeddingProvider, RemoteEmbedder,
};
use mnemo_kernel::testing::{CannedAnswer, HttpTestServer};
use serde_json::json;

fn config(base_url: &str) -> EmbeddingConfig {
    EmbeddingConfig {
        provider: EmbeddingProvider::Remote,
        base_url: base_url.to_owned(),
        model: "text-embedding-3-large".to_owned(),
        api_key: Some("sk-test-key".to_owned()),
        dimensions: Some(3),
        timeout_secs: 1,
        ..EmbeddingConfig::default()
    }
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

#[tokio::test]
async fn sends_model_input_dimensions_and_key_and_orders_by_index() {
    let server = HttpTestServer::start(vec![CannedAnswer::json(&json!({
        "object": "list",
        "model": "text-embedding-3-large",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 0.0, 5.0]},
            {"object": "embedding", "index": 0, "embedding": [3.0, 4.0, 0.0]},
        ],
        "usage": {"prompt_tokens": 4, "total_tokens": 4},
    }))])
    .await;
    let embedder = RemoteEmbedder::new(&config(&format!("{}/", server.base_url)));
    assert_eq!(embedder.model_id(), "text-embedding-3-large@3");
    assert_eq!(embedder.dimensions(), 3);

    let vectors = embedder
        .embed_batch(&texts(&["first", "second"]))
        .await
        .expect("embeddings");
    assert_eq!(vectors, vec![vec![0.6, 0.8, 0.0], vec![0.0, 0.0, 1.0]]);

    let received = server.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert!(
        request.request_line.starts_with("POST /v1/embeddings "),
        "{}",
        request.request_line
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(
        request.body,
        json!({"model": "text-embedding-3-large", "input": ["first", "second"], "dimensions": 3})
    );
}

#[tokio::test]
async fn omits_dimensions_and_key_when_not_configured_and_splits_batches() {
    let answer = |values: [[f32; 2]; 2]| {
        CannedAnswer::json(&json!({"data": [
            {"index": 0, "embedding": values[0]},
            {"index": 1, "embedding": values[1]},
        ]}))
    };
    let server = HttpTestServer::start(vec![
        answer([[1.0, 0.0], [0.0, 2.0]]),
        CannedAnswer::json(&json!({"data": [{"index": 0, "embedding": [-2.0, 0.0]}]})),
    ])
    .await;
    let embedder = RemoteEmbedder::new(&EmbeddingConfig {
        model: "local-model".to_owned(),
        api_key: None,
        dimensions: None,
        batch_size: 2,
        ..config(&server.base_url)
    });
    // Unknown model without `dimensions`: unusable until configured.
    assert!(matches!(
        embedder.embed("x").await,
        Err(EmbeddingError::Unavailable(reason)) if reason.contains("dimensions")
    ));
    assert!(server.received().is_empty());

    // The factory would demand `dimensions` for such a model; a known model needs none.
    let embedder = RemoteEmbedder::new(&EmbeddingConfig {
        model: "text-embedding-3-small".to_owned(),
        api_key: None,
        dimensions: None,
        batch_size: 2,
        ..config(&server.base_url)
    });
    assert_eq!(embedder.dimensions(), 1536);
    let error = embedder
        .embed_batch(&texts(&["a", "b", "c"]))
        .await
        .expect_err("2-dimensional answers for a 1536-dimensional model");
    assert!(error.to_string().contains("expected 1536"), "{error}");
    let received = server.received();
    assert_eq!(received[0].header("authorization"), None);
    assert_eq!(
        received[0].body,
        json!({"model": "text-embedding-3-small", "input": ["a", "b"]})
    );
}

#[tokio::test]
async fn batches_larger_than_batch_size_become_several_requests() {
    let server = HttpTestServer::start(vec![
        CannedAnswer::json(&json!({"data": [
            {"index": 0, "embedding": [1.0, 0.0, 0.0]},
            {"index": 1, "embedding": [0.0, 1.0, 0.0]},
        ]})),
        CannedAnswer::json(&json!({"data": [{"index": 0, "embedding": [0.0, 0.0, 1.0]}]})),
    ])
    .await;
    let embedder = RemoteEmbedder::new(&EmbeddingConfig {
        batch_size: 2,
        ..config(&server.base_url)
    });
    let vectors = embedder
        .embed_batch(&texts(&["a", "b", "c"]))
        .await
        .expect("two requests");
    assert_eq!(
        vectors,
        vec![
            vec![1.0, 0.0, 0.0],
            vec![0.0, 1.0, 0.0],
            vec![0.0, 0.0, 1.0]
        ]
    );
    let inputs: Vec<_> = server
        .received()
        .iter()
        .map(|request| request.body["input"].clone())
        .collect();
    assert_eq!(inputs, vec![json!(["a", "b"]), json!(["c"])]);
}

#[tokio::test]
async fn an_error_status_names_the_status_and_the_body() {
    let server = HttpTestServer::start(vec![CannedAnswer::raw(
        401,
        r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#,
    )])
    .await;
    let embedder = RemoteEmbedder::new(&config(&server.base_url));
    let error = embedder.embed("hello").await.expect_err("401");
    let message = error.to_string();
    assert!(matches!(error, EmbeddingError::Failed(_)), "{error:?}");
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = HttpTestServer::start(vec![
        CannedAnswer::json(&json!({"data": []})).delayed(Duration::from_secs(3))
    ])
    .await;
    let embedder = RemoteEmbedder::new(&config(&server.base_url));
    let started = std::time::Instant::now();
    let error = embedder.embed("hello").await.expect_err("timeout");
    assert_eq!(error, EmbeddingError::Timeout(1));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let embedder = RemoteEmbedder::new(&config(&format!("http://{address}/v1")));
    assert!(matches!(
        embedder.embed("hello").await,
        Err(EmbeddingError::Unavailable(_))
    ));
}

/// A base URL without `/v1` reaches a server that has no `/embeddings`: the error says what to
/// try instead of a bare 404.
#[tokio::test]
async fn a_404_suggests_the_missing_v1() {
    let server =
        HttpTestServer::start(vec![CannedAnswer::raw(404, "{\"detail\":\"Not Found\"}")]).await;
    let without_v1 = server.base_url.trim_end_matches("/v1").to_owned();
    let embedder = RemoteEmbedder::new(&config(&without_v1));
    let error = embedder.embed("hello").await.unwrap_err().to_string();
    assert!(
        error.contains(&format!("has no {without_v1}/embeddings")),
        "{error}"
    );
    assert!(error.contains("end in /v1"), "{error}");
}

/// The indexer's batches wait out a server that is restarting or rate-limiting; a search's
/// single query does not wait, it falls back to words at once.
#[tokio::test]
async fn batches_are_tried_again_while_the_server_says_later_and_queries_are_not() {
    let vectors = json!({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]});
    let server = HttpTestServer::start(vec![
        CannedAnswer::raw(503, "{\"error\": \"loading\"}"),
        CannedAnswer::raw(429, "{\"error\": \"slow down\"}"),
        CannedAnswer::json(&vectors),
        CannedAnswer::raw(503, "{\"error\": \"loading again\"}"),
        CannedAnswer::json(&vectors),
    ])
    .await;
    let embedder = RemoteEmbedder::new(&EmbeddingConfig {
        max_retries: 2,
        retry_base_ms: 10,
        ..config(&server.base_url)
    });
    let batch = embedder.embed_batch(&texts(&["hello"])).await.unwrap();
    assert_eq!(batch, vec![vec![1.0, 0.0, 0.0]]);
    assert_eq!(server.received().len(), 3, "two retries, then the vectors");
    let error = embedder.embed("hello").await.unwrap_err().to_string();
    assert!(error.contains("loading again"), "{error}");
    assert_eq!(server.received().len(), 4, "a query is asked once");
}

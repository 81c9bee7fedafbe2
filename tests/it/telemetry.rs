//! Traces and metrics of `mnemo serve`, as an operator meets them: a real server process sends
//! its spans over OTLP/HTTP to a receiver this test runs on a loopback port, its model is a
//! local OpenAI-compatible server that counts the words it reads and writes as tokens, and
//! `/metrics` is scraped over HTTP and read as Prometheus exposition text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_kernel::testing::{CannedAnswer, HttpTestServer, ReceivedRequest};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use prost::Message as _;
use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::server::{create_key, Served};

/// An OTLP/HTTP receiver on a loopback port that records every request and answers 200 with
/// an empty body (an empty `ExportTraceServiceResponse`). Returns its base URL and itself.
async fn otlp_receiver() -> (String, HttpTestServer) {
    let server = HttpTestServer::respond_with(|_| CannedAnswer::raw(200, "")).await;
    let url = server
        .base_url
        .strip_suffix("/v1")
        .unwrap_or(&server.base_url)
        .to_owned();
    (url, server)
}

/// The tokens the model server reported, per request: (input, output).
type Usage = Arc<Mutex<Vec<(u64, u64)>>>;

/// A local OpenAI-compatible server: it answers every chat request with no facts, and reports
/// as tokens the words it read (every message's content) and the words it wrote.
async fn counting_model() -> (HttpTestServer, Usage) {
    let usage: Usage = Arc::default();
    let log = usage.clone();
    let server = HttpTestServer::respond_with(move |request| {
        let read: usize = request.body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter_map(|message| message["content"].as_str())
                    .map(|content| content.split_whitespace().count())
                    .sum()
            })
            .unwrap_or(0);
        let reply = json!({"facts": [], "contradictions": []}).to_string();
        let written = reply.split_whitespace().count();
        let (read, written) = (read as u64, written as u64);
        log.lock().unwrap().push((read, written));
        CannedAnswer::json(&json!({
            "model": "test-model-0613",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": read, "completion_tokens": written,
                "total_tokens": read + written},
        }))
    })
    .await;
    (server, usage)
}

/// One sample of the exposition: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// Reads Prometheus/OpenMetrics exposition text, failing on any line that is neither a comment
/// nor `name{label="value",...} number`.
fn parse_exposition(text: &str) -> Vec<Sample> {
    assert!(text.trim_end().ends_with("# EOF"), "no `# EOF`: {text}");
    let mut samples = Vec::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if line.starts_with('#') {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(
                matches!(words.get(1), Some(&("HELP" | "TYPE" | "UNIT" | "EOF"))),
                "bad comment line: {line}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels: {line}"));
                (name, parse_labels(inner, line))
            }
        };
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name: {line}"
        );
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

/// `a="x",b="y"` as pairs; values may hold escaped quotes.
fn parse_labels(inner: &str, line: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad label: {line}"));
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                Some((index, '"')) => break index,
                Some((_, other)) => value.push(other),
                None => panic!("unclosed label value: {line}"),
            }
        };
        labels.push((name.to_owned(), value));
        rest = after[end + 1..].trim_start_matches(',');
    }
    labels
}

/// The sum of the samples named `name` whose labels include `labels`.
fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|sample| sample.name == name)
        .filter(|sample| {
            labels.iter().all(|(key, value)| {
                sample
                    .labels
                    .iter()
                    .any(|(have_key, have)| have_key == key && have == value)
            })
        })
        .map(|sample| sample.value)
        .sum()
}

/// `/metrics` with `key`: status, content type and body.
async fn scrape(served: &Served, key: Option<&str>) -> (StatusCode, String, String) {
    let mut request = reqwest::Client::new().get(format!("{}/metrics", served.url));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, response.text().await.unwrap())
}

/// `/metrics`, open, parsed.
async fn metrics(served: &Served) -> Vec<Sample> {
    let (status, content_type, text) = scrape(served, None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    parse_exposition(&text)
}

fn turn(id: &str, session: &str, text: &str) -> Value {
    json!({"id": id, "type": "user_message", "at": "2026-11-20T10:00:00Z",
           "session_id": session, "text": text})
}

/// A span as the receiver got it.
#[derive(Debug, Clone)]
struct ReceivedSpan {
    name: String,
    id: Vec<u8>,
    parent: Vec<u8>,
    attributes: HashMap<String, any_value::Value>,
    resource: HashMap<String, any_value::Value>,
}

impl ReceivedSpan {
    fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(any_value::Value::StringValue(text)) => Some(text),
            _ => None,
        }
    }

    fn number(&self, key: &str) -> Option<i64> {
        match self.attributes.get(key) {
            Some(any_value::Value::IntValue(number)) => Some(*number),
            _ => None,
        }
    }
}

fn attribute_map(attributes: Vec<KeyValue>) -> HashMap<String, any_value::Value> {
    attributes
        .into_iter()
        .filter_map(|pair| Some((pair.key, pair.value?.value?)))
        .collect()
}

/// Every span in the requests sent to `/v1/traces`, decoded as OTLP protobuf.
fn decode_spans(received: &[ReceivedRequest]) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for request in received {
        assert_eq!(request.request_line, "POST /v1/traces HTTP/1.1");
        assert_eq!(
            request.header("content-type"),
            Some("application/x-protobuf")
        );
        let request = ExportTraceServiceRequest::decode(request.raw_body.as_slice()).unwrap();
        for resource_spans in request.resource_spans {
            let resource = attribute_map(
                resource_spans
                    .resource
                    .map(|resource| resource.attributes)
                    .unwrap_or_default(),
            );
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(ReceivedSpan {
                        name: span.name,
                        id: span.span_id,
                        parent: span.parent_span_id,
                        attributes: attribute_map(span.attributes),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
    spans
}

/// Posts one JSON-RPC message to `/mcp` with `key` (and the session, once there is one);
/// returns the session the server named, if any.
async fn mcp_post(
    served: &Served,
    key: &str,
    session: Option<&str>,
    message: Value,
) -> Option<String> {
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", served.url))
        .bearer_auth(key)
        .header(ACCEPT, "application/json, text/event-stream")
        .json(&message);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let response = request.send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{message}: {}",
        response.status()
    );
    let named = response.headers().get("mcp-session-id");
    let named = named.map(|session| session.to_str().unwrap().to_owned());
    response.text().await.unwrap();
    named
}

/// Calls the tool `name` over MCP as a client would: the handshake, then `tools/call`.
async fn call_tool_over_mcp(served: &Served, key: &str, name: &str, arguments: Value) {
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let session = mcp_post(served, key, None, hello).await.unwrap();
    let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_post(served, key, Some(&session), ready).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    mcp_post(served, key, Some(&session), call).await;
}

/// Waits until the model server has had no new request for a second (consolidation runs in
/// the background after a session closes), at most 60 s.
async fn wait_for_quiet_model(usage: &Usage) {
    let mut last = usize::MAX;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = usage.lock().unwrap().len();
        if now == last && now > 0 {
            return;
        }
        last = now;
    }
    panic!("the model server never went quiet, or was never called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_spans_over_otlp_and_counts_them_at_metrics() {
    let (otlp_url, received) = otlp_receiver().await;
    let (model, usage) = counting_model().await;
    let config = format!(
        "[llm]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"test-model\"\n\
         [telemetry]\notlp_endpoint = \"{otlp_url}\"\nservice_name = \"mnemo-under-test\"\n\
         [extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n\
         [extensions.memory_maintenance]\n",
        model.base_url
    );
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &config, &[]);
    let ana = create_key(dir.path(), &["--user", "ana"]);
    let key = Some(ana.as_str());
    let before = metrics(&served).await;

    // Three turns of one session, then a turn of a new one, which closes the first: memory
    // announces it, and maintenance consolidates it with the model.
    let events = json!({"events": [
        turn("e1", "s1", "My sister Maria moved to Lisbon last spring."),
        turn("e2", "s1", "She teaches surfing there on weekends."),
        turn("e3", "s1", "I visit her in August with Tom."),
    ]});
    let (status, body) = served
        .call(key, None, Method::POST, "/v1/events", Some(events))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = served
        .call(
            key,
            None,
            Method::POST,
            "/v1/events",
            Some(turn("e4", "s2", "What should I pack for Lisbon?")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, hits) = served
        .call(
            key,
            None,
            Method::POST,
            "/v1/search",
            Some(json!({"query": "sister Lisbon surfing"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{hits}");
    assert!(!hits["hits"].as_array().unwrap().is_empty(), "{hits}");

    // Two requests stored four events (a batch is one ingest, one transaction) and one search:
    // the histograms counted exactly those.
    let after_search = metrics(&served).await;
    let count = |samples: &[Sample], name: &str, labels: &[(&str, &str)]| {
        total(samples, &format!("{name}_count"), labels)
    };
    let stored = [("outcome", "stored")];
    let ok = [("outcome", "ok")];
    assert_eq!(
        count(&after_search, "mnemo_ingest_duration_seconds", &stored)
            - count(&before, "mnemo_ingest_duration_seconds", &stored),
        2.0
    );
    assert_eq!(
        count(&after_search, "mnemo_search_duration_seconds", &ok)
            - count(&before, "mnemo_search_duration_seconds", &ok),
        1.0
    );
    // The same, by the GenAI semantic conventions' duration metric and operation names.
    let gen_ai_count = |samples: &[Sample], operation: &str| {
        count(
            samples,
            "gen_ai_client_operation_duration_seconds",
            &[("gen_ai_operation_name", operation)],
        )
    };
    for (operation, requests) in [("create_memory", 2.0), ("search_memory", 1.0)] {
        assert_eq!(
            gen_ai_count(&after_search, operation) - gen_ai_count(&before, operation),
            requests,
            "{operation}"
        );
    }
    for stage in ["fts", "vector", "entity", "fusion"] {
        assert_eq!(
            count(
                &after_search,
                "mnemo_search_stage_duration_seconds",
                &[("stage", stage)]
            ),
            1.0,
            "{stage}"
        );
    }

    let (status, context) = served
        .call(
            key,
            None,
            Method::POST,
            "/v1/context",
            Some(json!({"query": "Where does my sister live?", "session_id": "s2"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    call_tool_over_mcp(&served, &ana, "search_memory", json!({"query": "sister"})).await;
    let admin = served.admin_key.clone();
    let (status, run) = served
        .call(
            Some(&admin),
            None,
            Method::POST,
            "/v1/jobs/execute_consolidation/run",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    wait_for_quiet_model(&usage).await;

    let after = metrics(&served).await;
    assert_eq!(
        count(&after, "mnemo_context_duration_seconds", &[])
            - count(&before, "mnemo_context_duration_seconds", &[]),
        1.0
    );
    assert_eq!(
        total(
            &after,
            "mnemo_job_runs_total",
            &[("job", "execute_consolidation")]
        ),
        1.0
    );
    let reported = usage.lock().unwrap().clone();
    let (input, output) = reported
        .iter()
        .fold((0, 0), |(input, output), (read, written)| {
            (input + read, output + written)
        });
    assert!(input > 0 && output > 0, "{reported:?}");
    let tokens = |direction: &str| {
        total(
            &after,
            "mnemo_llm_tokens_total",
            &[("direction", direction), ("model", "test-model")],
        )
    };
    assert_eq!(tokens("input"), input as f64);
    assert_eq!(tokens("output"), output as f64);
    assert_eq!(total(&after, "mnemo_llm_failures_total", &[]), 0.0);
    assert_eq!(
        gen_ai_count(&after, "retrieval") - gen_ai_count(&before, "retrieval"),
        1.0
    );
    let chats = [
        ("gen_ai_operation_name", "chat"),
        ("gen_ai_provider_name", "openai"),
        ("gen_ai_request_model", "test-model"),
    ];
    let chat_count = count(&after, "gen_ai_client_operation_duration_seconds", &chats);
    assert_eq!(chat_count, reported.len() as f64);
    let tool = [("gen_ai_tool_name", "search_memory")];
    let tool_count = count(&after, "gen_ai_execute_tool_duration_seconds", &tool);
    assert_eq!(tool_count, 1.0);
    assert!(total(&after, "mnemo_index_queue_pending", &[]) >= 0.0);
    assert!(
        after
            .iter()
            .any(|sample| sample.name == "mnemo_events_in_flight"),
        "no event queue gauge"
    );

    // Stopping the server sends the spans not sent yet.
    assert!(served.stop(), "mnemo serve did not stop cleanly");
    let spans = decode_spans(&received.received());
    let named = |name: &str| -> Vec<&ReceivedSpan> {
        spans.iter().filter(|span| span.name == name).collect()
    };
    assert!(
        spans.iter().all(|span| matches!(
            span.resource.get("service.name"),
            Some(any_value::Value::StringValue(name)) if name == "mnemo-under-test"
        )),
        "a span without the configured service.name"
    );

    let ingests = named("memory.ingest");
    let stored_ingests = ingests
        .iter()
        .filter(|span| span.text("mnemo.ingest.outcome") == Some("stored"))
        .count();
    // One span per request: the batch of three is one ingest.
    assert_eq!(stored_ingests, 2, "{ingests:#?}");
    // Each also a GenAI `create_memory`, counting the events it was given.
    let mut created: Vec<_> = ingests
        .iter()
        .inspect(|span| assert_eq!(span.text("gen_ai.operation.name"), Some("create_memory")))
        .filter_map(|span| span.number("gen_ai.memory.record.count"))
        .collect();
    created.sort_unstable();
    assert_eq!(created, [1, 3], "{ingests:#?}");

    // The one search of /v1/search is the search with no context span above it; its lists and
    // the fusion are its children.
    let context_spans = named("context.assemble");
    assert_eq!(context_spans.len(), 1);
    let context_span = context_spans[0];
    assert_eq!(
        context_span.number("blocks").map(|blocks| blocks >= 1),
        Some(true)
    );
    assert_eq!(
        context_span.text("gen_ai.operation.name"),
        Some("retrieval")
    );
    // The MCP tool call: a GenAI tool execution span, its search under it.
    let tool_calls = named("execute_tool search_memory");
    assert_eq!(tool_calls.len(), 1, "{tool_calls:#?}");
    let tool_call = tool_calls[0];
    assert_eq!(
        tool_call.text("gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(tool_call.text("gen_ai.tool.name"), Some("search_memory"));
    assert!(tool_call.text("error.type").is_none(), "{tool_call:#?}");
    let searches = named("memory.search");
    let (by_tool, searches): (Vec<&ReceivedSpan>, Vec<&ReceivedSpan>) = searches
        .into_iter()
        .partition(|search| search.parent == tool_call.id);
    assert_eq!(by_tool.len(), 1, "{by_tool:#?}");
    let (in_context, direct): (Vec<&ReceivedSpan>, Vec<&ReceivedSpan>) =
        searches.iter().partition(|search| {
            // A search under context assembly has the memory extension's `context` span as
            // its parent, itself a child of `context.assemble`.
            spans.iter().any(|parent| {
                parent.id == search.parent
                    && parent.name == "context"
                    && parent.parent == context_span.id
            })
        });
    assert!(!in_context.is_empty(), "context assembly searched nothing");
    assert_eq!(direct.len(), 1, "{searches:#?}");
    let search = direct[0];
    assert_eq!(search.text("mnemo.search.mode"), Some("Hybrid"));
    let hit_count = Some(hits["hits"].as_array().unwrap().len() as i64);
    assert_eq!(search.number("mnemo.search.hits"), hit_count);
    assert_eq!(search.text("gen_ai.operation.name"), Some("search_memory"));
    assert_eq!(search.number("gen_ai.memory.record.count"), hit_count);
    for list in [
        "memory.search.fts",
        "memory.search.vector",
        "memory.search.entity",
        "memory.search.fusion",
    ] {
        let children: Vec<_> = named(list)
            .into_iter()
            .filter(|span| span.parent == search.id)
            .collect();
        assert_eq!(children.len(), 1, "{list} under the search");
    }
    let fts = named("memory.search.fts")
        .into_iter()
        .find(|span| span.parent == search.id)
        .unwrap();
    assert!(fts.number("mnemo.search.candidates").unwrap_or(0) >= 1);

    let jobs: Vec<_> = named("job")
        .into_iter()
        .filter(|span| span.text("job") == Some("execute_consolidation"))
        .collect();
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert!(
        matches!(jobs[0].text("outcome"), Some("ok" | "partial")),
        "{jobs:#?}"
    );

    // Every model call is a GenAI client span named after the model, with the tokens the
    // server reported for it.
    let calls = named("chat test-model");
    assert_eq!(calls.len(), reported.len(), "{calls:#?}");
    for call in &calls {
        assert_eq!(call.text("gen_ai.operation.name"), Some("chat"));
        assert_eq!(call.text("gen_ai.provider.name"), Some("openai"));
        assert_eq!(call.text("gen_ai.request.model"), Some("test-model"));
        assert_eq!(call.text("gen_ai.response.model"), Some("test-model-0613"));
        assert!(call.text("error.type").is_none(), "{call:#?}");
    }
    let sum = |key: &str| -> i64 { calls.iter().filter_map(|call| call.number(key)).sum() };
    assert_eq!(sum("gen_ai.usage.input_tokens"), input as i64);
    assert_eq!(sum("gen_ai.usage.output_tokens"), output as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_need_an_admin_key_or_be_off() {
    const MEMORY: &str =
        "[extensions.embedding]\nenabled = false\n[extensions.ner]\n[extensions.memory]\n";
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        dir.path(),
        &format!("[telemetry]\nmetrics = \"admin\"\n{MEMORY}"),
        &[],
    );
    let user_key = create_key(dir.path(), &["--user", "ana"]);
    let (status, _, body) = scrape(&served, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _, body) = scrape(&served, Some(&user_key)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, body) = scrape(&served, Some(&served.admin_key)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let samples = parse_exposition(&body);
    assert!(
        samples.iter().any(
            |sample| sample.name == "mnemo_ingest_duration_seconds_count"
                || sample.name == "mnemo_index_queue_pending"
        ),
        "{body}"
    );
    assert!(served.stop());

    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        dir.path(),
        &format!("[telemetry]\nmetrics = \"off\"\n{MEMORY}"),
        &[],
    );
    let (status, _, body) = scrape(&served, Some(&served.admin_key)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

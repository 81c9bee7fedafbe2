//! Test support for extension authors (feature `testing`): a real local HTTP server that answers
//! OpenAI-style (or any JSON) requests with canned bodies, for testing protocol clients without
//! mock objects.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One canned answer: status, body, and a delay before answering.
#[derive(Debug, Clone)]
pub struct CannedAnswer {
    /// HTTP status code.
    pub status: u16,
    /// Response body.
    pub body: String,
    /// Wait this long before answering (to provoke client timeouts).
    pub delay: Duration,
}

impl CannedAnswer {
    /// A 200 answer with a JSON body.
    pub fn json(body: &Value) -> Self {
        Self {
            status: 200,
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    /// An answer with any status and raw body.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// The same answer after `delay`.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// e.g. `POST /v1/chat/completions HTTP/1.1`.
    pub request_line: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` if it was not JSON).
    pub body: Value,
    /// The body as it came (protobuf, say).
    pub raw_body: Vec<u8>,
}

impl ReceivedRequest {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A minimal HTTP/1.1 server on 127.0.0.1: one request per connection, canned answers in order.
#[derive(Debug)]
pub struct HttpTestServer {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    received: Arc<Mutex<Vec<ReceivedRequest>>>,
}

impl HttpTestServer {
    /// Starts a server that gives `answers` to the first requests, in order, then stops accepting.
    ///
    /// # Panics
    /// If no local port can be bound (a broken test machine).
    pub async fn start(answers: Vec<CannedAnswer>) -> Self {
        let (listener, address) = bind_local().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            for answer in answers {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let Some(request) = read_request(&mut stream).await else {
                    continue;
                };
                log.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(request);
                write_answer(&mut stream, &answer).await;
            }
        });
        Self {
            base_url: format!("http://{address}/v1"),
            received,
        }
    }

    /// Starts a server that answers every request with what `answer` says for it, each
    /// connection on its own task, until the runtime ends: a provider that can go down and come
    /// back while a test runs.
    ///
    /// # Panics
    /// If no local port can be bound (a broken test machine).
    pub async fn respond_with<F>(answer: F) -> Self
    where
        F: Fn(&ReceivedRequest) -> CannedAnswer + Send + Sync + 'static,
    {
        let (listener, address) = bind_local().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut stream).await else {
                        return;
                    };
                    let reply = answer(&request);
                    log.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push(request);
                    write_answer(&mut stream, &reply).await;
                });
            }
        });
        Self {
            base_url: format!("http://{address}/v1"),
            received,
        }
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.received
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// A listener on a free local port, and its address.
async fn bind_local() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port for the test server");
    let address = listener
        .local_addr()
        .expect("local address of a bound socket");
    (listener, address)
}

async fn write_answer(stream: &mut tokio::net::TcpStream, answer: &CannedAnswer) {
    tokio::time::sleep(answer.delay).await;
    let response = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        answer.status,
        answer.body.len(),
        answer.body
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<ReceivedRequest> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let end = buffer.len().min(header_end + length);
    let raw_body = buffer[header_end..end].to_vec();
    let body = serde_json::from_slice(&raw_body).unwrap_or(Value::Null);
    Some(ReceivedRequest {
        request_line,
        headers,
        body,
        raw_body,
    })
}

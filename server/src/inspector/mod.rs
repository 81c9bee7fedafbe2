//! The web inspector at `/`: a page for people who look at a memory before they trust it. Its
//! three files are compiled into the binary, so it works offline with nothing from a CDN; it
//! loads without a key, asks for one, and then reads the memory through the `/v1` API with that
//! key, so it sees exactly what the key may see.

use axum::http::header::{self, HeaderName, HeaderValue};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/inspector.js");
const STYLE: &str = include_str!("assets/inspector.css");

/// Only this server's own script, style and API; no inline script, no frames.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// One of the inspector's files, with its type and headers that keep it to itself.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let headers: [(HeaderName, HeaderValue); 5] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body)
}

/// `/` and the page's script and style; none of them needs a key.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/inspector/inspector.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/inspector/inspector.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

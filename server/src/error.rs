//! The server's one error type: a status, a stable code and a message that names the problem,
//! sent as `{"error": {"code": ..., "message": ...}}`.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mnemo_memory_api::MemoryApiError;
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// Stable, for programs: `invalid_json`, `invalid_request`, `unauthorized`, `forbidden`,
    /// `user_required`, `not_found`, `method_not_allowed`, `payload_too_large`,
    /// `unsupported_media_type`, `timeout`, `unavailable`, `internal`.
    pub(crate) code: String,
    /// For people: what was wrong, naming the field or header.
    pub(crate) message: String,
}

/// A request that failed, and why.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`: the input was understood but not acceptable.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 503 `unavailable`: the memory store cannot be reached now; the client retries (every
    /// 503 carries `Retry-After`).
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The answer to a store failure: 503 when the database cannot be reached, else 500.
    fn store_unavailable(error: &dyn std::fmt::Display) -> Self {
        tracing::warn!(%error, "the memory store's database does not answer");
        Self::unavailable(format!(
            "the memory store's database does not answer ({error}); retry shortly"
        ))
    }

    /// 404 `not_found`.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 403 `forbidden`: the key is valid but may not do this.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 401 `unauthorized`: no key, or not a valid one.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 500 `internal`; the cause is logged, and the client hears only that it happened.
    pub(crate) fn internal(error: &dyn std::fmt::Display) -> Self {
        tracing::error!(%error, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the server failed: {error}"),
        )
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The same error, with status and code, about one item of a request (`events[2]`,
    /// `line 5`).
    pub(crate) fn prefixed(self, item: &str) -> Self {
        Self {
            message: format!("{item}: {}", self.message),
            ..self
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.status, self.code, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"mnemo\""),
            );
        }
        response
    }
}

impl From<crate::keys::KeyError> for ApiError {
    fn from(error: crate::keys::KeyError) -> Self {
        use crate::keys::KeyError as E;
        match error {
            E::Store(error) => error.into(),
            E::Unavailable(_) => Self::unavailable(error.to_string()),
            E::NoSuchKey(id) => Self::not_found(format!("no key `{id}`")),
            E::Invalid(message) => Self::invalid(message),
            other => Self::internal(&other),
        }
    }
}

impl From<MemoryApiError> for ApiError {
    fn from(error: MemoryApiError) -> Self {
        use MemoryApiError as E;
        match error {
            E::Invalid(message) => Self::invalid(message),
            E::NotFound(message) => Self::not_found(message),
            E::NotOpen => Self::unavailable("the memory store is not open"),
            E::Unavailable(source) => Self::store_unavailable(&source),
            other => Self::internal(&other),
        }
    }
}

impl From<mnemo_kernel::EventError> for ApiError {
    fn from(error: mnemo_kernel::EventError) -> Self {
        Self::invalid(error.to_string())
    }
}

/// A rejected body: bad JSON, the wrong shape, too large, or not JSON at all.
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let code = match (&rejection, status) {
            (_, StatusCode::PAYLOAD_TOO_LARGE) => "payload_too_large",
            (_, StatusCode::UNSUPPORTED_MEDIA_TYPE) => "unsupported_media_type",
            (JsonRejection::JsonSyntaxError(_), _) => "invalid_json",
            _ => "invalid_request",
        };
        let status = if status.is_server_error() || code == "invalid_request" {
            StatusCode::BAD_REQUEST
        } else {
            status
        };
        let message = if code == "payload_too_large" {
            "the request body is larger than this server takes (`mnemo serve --max-body-bytes`, \
             16 MiB by default); send fewer events per request"
                .to_owned()
        } else {
            rejection.body_text()
        };
        Self::new(status, code, message)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::invalid(rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::invalid(rejection.body_text())
    }
}

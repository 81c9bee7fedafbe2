//! The HTTP API under `/v1`, the probes, `/metrics`, and the OpenAPI document that describes
//! the API and the probes, derived from the handlers and their types.

pub(crate) mod admin;
pub(crate) mod chats;
pub(crate) mod events;
pub(crate) mod keys;
pub(crate) mod memories;
pub(crate) mod metrics;
pub(crate) mod provenance;
pub(crate) mod search;
pub(crate) mod views;

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ApiError;
use crate::AppState;

/// A JSON body; a bad one is answered with [`ApiError`]'s JSON.
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(value) = axum::Json::<T>::from_request(request, state).await?;
        Ok(Self(value))
    }
}

/// Query parameters; bad ones are answered with [`ApiError`]'s JSON.
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Query(value) =
            axum::extract::Query::<T>::from_request_parts(parts, state)
                .await
                .map_err(|rejection: QueryRejection| ApiError::from(rejection))?;
        Ok(Self(value))
    }
}

/// A path parameter; a bad one is answered with [`ApiError`]'s JSON.
pub(crate) struct ApiPath<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(value) = axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map_err(|rejection: PathRejection| ApiError::from(rejection))?;
        Ok(Self(value))
    }
}

/// The OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "mnemo",
        description = "Long-term memory for LLM agents. Every `/v1` call needs `Authorization: \
            Bearer KEY` (`mnemo keys create --user U`); an admin key (`--admin`) acts for the \
            user named in the `X-Mnemo-User` header.",
    ),
    paths(
        events::post_events,
        events::import,
        events::export,
        memories::remember,
        memories::list,
        memories::get,
        memories::forget,
        memories::correct,
        memories::confirm,
        memories::release,
        provenance::provenance,
        provenance::entities,
        search::search,
        search::context,
        search::people,
        admin::stats,
        admin::users,
        admin::erase_user,
        admin::jobs,
        admin::job_runs,
        admin::run_job,
        chats::add_member,
        chats::remove_member,
        keys::create,
        keys::list,
        keys::revoke,
        admin::healthz,
        admin::readyz,
    ),
    modifiers(&BearerKeys),
    security(("api_key" = [])),
)]
pub(crate) struct ApiDoc;

/// Adds the bearer-key security scheme.
struct BearerKeys;

impl Modify for BearerKeys {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Writes this server's configured limits into the document, where the derived schemas have the
/// defaults: the longest memory text (`max_content_chars`) and the most hits of a search
/// (`max_search_limit`); and the pattern of memory text (not blank, no NUL), which derive
/// attributes cannot spell.
fn fit_to_config(document: &mut utoipa::openapi::OpenApi, config: &mnemo_memory_api::HostLimits) {
    use utoipa::openapi::{RefOr, Schema};
    let Some(components) = document.components.as_mut() else {
        return;
    };
    let mut property =
        |schema: &str, property: &str, fit: &dyn Fn(&mut utoipa::openapi::Object)| {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(schema) {
                if let Some(RefOr::T(Schema::Object(field))) = object.properties.get_mut(property) {
                    fit(field);
                }
            }
        };
    let content = |field: &mut utoipa::openapi::Object| {
        field.max_length = Some(config.max_content_chars);
        field.pattern = Some(views::content_pattern());
    };
    property("EventBody", "text", &content);
    property("RememberBody", "content", &content);
    property("CorrectBody", "content", &content);
    property("SearchBody", "limit", &|field| {
        field.maximum = Some(config.max_search_limit.into());
    });
}

/// The API's routes, the probes and `/openapi.json`.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let mut document = ApiDoc::openapi();
    fit_to_config(&mut document, &state.memory.limits());
    Router::new()
        .route("/v1/events", post(events::post_events))
        .route("/v1/import", post(events::import))
        .route("/v1/export", get(events::export))
        .route("/v1/memories", post(memories::remember).get(memories::list))
        .route(
            "/v1/memories/{id}",
            get(memories::get).delete(memories::forget),
        )
        .route("/v1/memories/{id}/provenance", get(provenance::provenance))
        .route("/v1/memories/{id}/correct", post(memories::correct))
        .route("/v1/memories/{id}/confirm", post(memories::confirm))
        .route("/v1/memories/{id}/release", post(memories::release))
        .route("/v1/search", post(search::search))
        .route("/v1/context", post(search::context))
        .route("/v1/people", get(search::people))
        .route("/v1/entities", get(provenance::entities))
        .route("/v1/stats", get(admin::stats))
        .route("/v1/users", get(admin::users))
        .route(
            "/v1/users/{user_id}",
            axum::routing::delete(admin::erase_user),
        )
        .route(
            "/v1/chats/{chat_id}/members/{user_id}",
            axum::routing::put(chats::add_member).delete(chats::remove_member),
        )
        .route("/v1/keys", post(keys::create).get(keys::list))
        .route("/v1/keys/{id}", axum::routing::delete(keys::revoke))
        .route("/v1/jobs", get(admin::jobs))
        .route("/v1/jobs/runs", get(admin::job_runs))
        .route("/v1/jobs/{name}/run", post(admin::run_job))
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/metrics", get(metrics::metrics))
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move { axum::Json(document) }
            }),
        )
        .fallback(|| async {
            ApiError::not_found("no such endpoint; GET /openapi.json lists them")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method; GET /openapi.json lists them",
            )
        })
        .with_state(state)
}

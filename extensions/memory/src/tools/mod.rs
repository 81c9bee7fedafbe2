//! The orchestrator's memory tools, each a typed [`Tool`], and the profiles that pick them.
//!
//! Every tool's argument struct gives its schema and its parsing; the limits that come from
//! config (`max_content_chars`, `max_search_limit`, `max_batch_size`) are set by its
//! [`Tool::limits`]. Every read and write is the caller's own (`scope.user_id`).

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use mnemo_kernel::prelude::*;
use mnemo_ner_api::{EntityType, ExtractedEntity};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::config::ToolProfile;
use crate::error::MemoryError;
use crate::service::{FactInput, MemoryService, Written};
use crate::types::{
    AsOf, ExternalId, MemoryKind, MemoryType, SearchHit, SearchMode, SearchRequest, Subject,
    TimeAxis, MAX_EXTERNAL_ID_CHARS,
};

mod people;
mod reference;
mod typed;

use people::{Recall, Remember};
use reference::{ConfirmFact, CorrectFact, GetEntityInfo, MemoryStats, RememberFact, SearchMemory};
use typed::{ForgetMemory, GetContext, SearchMemories, SetContext, StoreMemory};

/// Every memory tool's name, in the order the model sees them.
pub(crate) const ALL_TOOLS: [&str; 13] = [
    "search_memory",
    "remember",
    "correct_fact",
    "forget_memory",
    "remember_fact",
    "confirm_fact",
    "memory_stats",
    "get_entity_info",
    "recall",
    "search_memories",
    "store_memory",
    "set_context",
    "get_context",
];

impl ToolProfile {
    /// The names of the profile's tools.
    pub(crate) fn tool_names(self) -> &'static [&'static str] {
        match self {
            ToolProfile::Default => &["search_memory", "remember", "correct_fact", "forget_memory"],
            ToolProfile::People => &["remember", "recall"],
            ToolProfile::Typed => &[
                "search_memories",
                "store_memory",
                "forget_memory",
                "set_context",
                "get_context",
            ],
            ToolProfile::Reference => &[
                "search_memory",
                "remember_fact",
                "correct_fact",
                "confirm_fact",
                "memory_stats",
                "get_entity_info",
            ],
            ToolProfile::All => &ALL_TOOLS,
        }
    }
}

/// The tools of `profile`.
///
/// # Errors
/// A tool's config limits do not fit its arguments (a bug, reported at start-up).
pub(crate) fn tool_set(
    service: &Arc<MemoryService>,
    profile: ToolProfile,
) -> Result<ToolSet, ToolError> {
    let mut tools = ToolSet::new();
    for &name in profile.tool_names() {
        let service = service.clone();
        match name {
            "search_memory" => tools.add(SearchMemory(service))?,
            "remember" => tools.add(Remember(service))?,
            "correct_fact" => tools.add(CorrectFact(service))?,
            "forget_memory" => tools.add(ForgetMemory {
                service,
                seed_answer: profile == ToolProfile::Typed,
            })?,
            "remember_fact" => tools.add(RememberFact(service))?,
            "confirm_fact" => tools.add(ConfirmFact(service))?,
            "memory_stats" => tools.add(MemoryStats(service))?,
            "get_entity_info" => tools.add(GetEntityInfo(service))?,
            "recall" => tools.add(Recall(service))?,
            "search_memories" => tools.add(SearchMemories(service))?,
            "store_memory" => tools.add(StoreMemory(service))?,
            "set_context" => tools.add(SetContext(service))?,
            "get_context" => tools.add(GetContext(service))?,
            other => return Err(ToolError::UnknownTool(other.to_owned())),
        };
    }
    Ok(tools)
}

/// The most bytes `store_memory`'s `metadata` may take as JSON. It is kept with the memory and
/// exported on the memory's line, which must stay under `max_event_bytes` (1 MiB by default)
/// for the export to import back: 16 KiB leaves room for the content and the escaping.
pub(crate) const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Longest memory or fact id accepted.
const MAX_ID_CHARS: usize = 64;
/// Longest entity or person name accepted.
const MAX_NAME_CHARS: usize = 200;
/// Longest `set_context` key.
const MAX_KEY_CHARS: usize = 100;
/// Most tags, entities or aliases in one call.
const MAX_LIST_ITEMS: usize = 20;
/// Most subjects of one fact.
const MAX_SUBJECTS: usize = 10;
/// Longest expiry, in days (100 years).
const MAX_EXPIRY_DAYS: i64 = 36_500;

/// Refuses to change, by id, a memory the caller keeps in another chat than the one they act
/// in: the tools change what the caller's conversation sees (their personal memories and what
/// they keep in this chat), as over HTTP a key changes a chat's memories only while its user
/// is a member, and a client over MCP acts in the chat its key was checked for. Unknown ids and
/// other users' memories are left to the tool, which says "not yours" without telling which.
async fn check_in_conversation(
    tool: &str,
    service: &MemoryService,
    scope: &ToolScope,
    id: &str,
) -> Result<(), ToolError> {
    let memory = service
        .store()
        .map_err(|error| tool_error(tool, error))?
        .get(id)
        .await
        .map_err(|error| tool_error(tool, error))?;
    match memory {
        Some(memory)
            if memory.user_id.as_deref() == Some(scope.user_id.as_str())
                && memory.chat_id.is_some()
                && memory.chat_id != scope.chat_id =>
        {
            Err(ToolError::failed(
                tool,
                format!(
                    "memory `{id}` is kept in chat `{}`, not in this conversation: change it there",
                    memory.chat_id.unwrap_or_default()
                ),
            ))
        }
        _ => Ok(()),
    }
}

fn tool_error(tool: &str, error: MemoryError) -> ToolError {
    match error {
        MemoryError::Invalid(reason) => ToolError::invalid(tool, reason),
        other => ToolError::failed(tool, other),
    }
}

fn parse_time(
    tool: &str,
    field: &str,
    text: Option<&str>,
) -> Result<Option<DateTime<Utc>>, ToolError> {
    let Some(text) = text else {
        return Ok(None);
    };
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(time.with_timezone(&Utc)));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).map(|time| time.and_utc()));
    }
    Err(ToolError::invalid(
        tool,
        format!("argument `{field}`: `{text}` is not an RFC 3339 time or a YYYY-MM-DD date"),
    ))
}

/// Searches for the caller with the tool's own filters; the hits as the model sees them.
async fn search(
    service: &MemoryService,
    tool: &str,
    request: SearchRequest,
) -> Result<Vec<SearchHit>, ToolError> {
    service
        .search(&request)
        .await
        .map_err(|error| tool_error(tool, error))
}

/// The caller's own scope of a search: their memories, in this chat, without the quarantined
/// ones (the agent reads what its tools return as it reads its context).
fn caller_request(service: &MemoryService, scope: &ToolScope, query: String) -> SearchRequest {
    SearchRequest {
        exclude_quarantined: true,
        ..SearchRequest::for_caller(
            query,
            &scope.user_id,
            scope.chat_id.as_deref(),
            service.config().search_limit,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;

    fn specs(profile: ToolProfile) -> Vec<ToolSpec> {
        let service = Arc::new(MemoryService::new(MemoryConfig {
            max_content_chars: 123,
            max_search_limit: 7,
            max_batch_size: 3,
            ..MemoryConfig::default()
        }));
        tool_set(&service, profile).unwrap().tools()
    }

    #[test]
    fn every_profile_builds_and_all_has_every_tool_once() {
        for profile in [
            ToolProfile::Default,
            ToolProfile::People,
            ToolProfile::Typed,
            ToolProfile::Reference,
        ] {
            let names: Vec<String> = specs(profile).into_iter().map(|spec| spec.name).collect();
            assert_eq!(names, profile.tool_names(), "{profile:?}");
        }
        let all: Vec<String> = specs(ToolProfile::All)
            .into_iter()
            .map(|spec| spec.name)
            .collect();
        assert_eq!(all, ALL_TOOLS);
    }

    /// The default offers one search and one way to store: no look-alikes for a small model.
    #[test]
    fn the_default_profile_has_one_search_and_one_store() {
        let names = ToolProfile::Default.tool_names();
        let searches = ["search_memory", "recall", "search_memories"];
        let stores = ["remember", "remember_fact", "store_memory"];
        assert_eq!(
            names.iter().filter(|name| searches.contains(name)).count(),
            1
        );
        assert_eq!(names.iter().filter(|name| stores.contains(name)).count(), 1);
    }

    #[test]
    fn config_limits_are_in_the_schemas() {
        let specs = specs(ToolProfile::All);
        let spec = |name: &str| {
            specs
                .iter()
                .find(|spec| spec.name == name)
                .map(|spec| spec.parameters.clone())
                .unwrap()
        };
        assert_eq!(spec("search_memory")["properties"]["limit"]["maximum"], 7);
        assert_eq!(spec("search_memories")["properties"]["limit"]["maximum"], 7);
        let remember = spec("remember");
        assert_eq!(remember["properties"]["content"]["maxLength"], 123);
        assert_eq!(remember["properties"]["facts"]["maxItems"], 3);
        assert_eq!(
            remember["properties"]["facts"]["items"]["properties"]["content"]["maxLength"],
            123
        );
        assert_eq!(remember.get("required"), None);
        assert_eq!(spec("set_context")["properties"]["value"]["maxLength"], 123);
        assert_eq!(
            spec("remember_fact")["properties"]["entities"]["items"]["properties"]["type"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(8)
        );
        let metadata = &spec("store_memory")["properties"]["metadata"];
        assert_eq!(metadata["type"], "object");
        assert!(metadata["description"]
            .as_str()
            .unwrap()
            .contains(&MAX_METADATA_BYTES.to_string()));
        assert_eq!(
            spec("memory_stats"),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }
}

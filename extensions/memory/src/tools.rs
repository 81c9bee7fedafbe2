//! The orchestrator's memory tools: specs and dispatch.

use chrono::{DateTime, NaiveDate, Utc};
use mnemo_kernel::{ToolError, ToolScope, ToolSpec};
use mnemo_ner::{EntityType, ExtractedEntity};
use serde_json::{json, Value};

use crate::error::MemoryError;
use crate::service::MemoryService;
use crate::types::{MemoryKind, SearchHit, SearchMode, SearchRequest};

const ENTITY_TYPES: [&str; 8] = [
    "person",
    "project",
    "organization",
    "location",
    "email",
    "url",
    "date",
    "other",
];

/// The tool specs; limits in the schemas come from config.
pub(crate) fn specs(service: &MemoryService) -> Vec<ToolSpec> {
    let config = service.config();
    let content = json!({"type": "string", "minLength": 1, "maxLength": config.max_content_chars});
    let id = json!({"type": "string", "minLength": 1, "maxLength": 64});
    vec![
        ToolSpec {
            name: "search_memory".to_owned(),
            description: "Search long-term memory (facts, past conversation turns, reflections) by keywords, meaning and named entities.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "kind": {"type": "string", "enum": ["episode", "fact", "reflection"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": config.max_search_limit},
                    "mode": {"type": "string", "enum": ["hybrid", "fts", "vector", "entity"], "description": "ranking; hybrid fuses the others"},
                    "since": {"type": "string", "description": "only memories from this time on (RFC 3339 or YYYY-MM-DD)"},
                    "until": {"type": "string", "description": "only memories before this time (RFC 3339 or YYYY-MM-DD)"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "remember_fact".to_owned(),
            description: "Save a durable fact about the user or the world to long-term memory.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": content,
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 20},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "entities": {
                        "type": "array", "maxItems": 20,
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                                "type": {"type": "string", "enum": ENTITY_TYPES},
                                "aliases": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}, "maxItems": 20}
                            },
                            "required": ["name"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["content"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "correct_fact".to_owned(),
            description: "Replace a wrong fact: the old one is retired (kept for history) and the correction saved.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"id": id, "content": content},
                "required": ["id", "content"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "confirm_fact".to_owned(),
            description: "Mark a fact as confirmed: full confidence, and it never fades.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"id": id},
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "memory_stats".to_owned(),
            description: "Count the user's memories by kind, with the newest memory's time.".to_owned(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        ToolSpec {
            name: "get_entity_info".to_owned(),
            description: "Everything memory holds about a person, project, place or other named entity.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["name"],
                "additionalProperties": false
            }),
        },
    ]
}

fn parse_time(tool: &str, field: &str, value: &Value) -> Result<Option<DateTime<Utc>>, ToolError> {
    let Some(text) = value.as_str() else {
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

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// One search hit as the model sees it.
pub(crate) fn hit_json(hit: &SearchHit) -> Value {
    let memory = &hit.memory;
    json!({
        "id": memory.id,
        "kind": memory.kind.as_str(),
        "content": memory.content,
        "score": (hit.score * 1e6).round() / 1e6,
        "event_time": memory.event_time.to_rfc3339(),
        "session_id": memory.session_id,
        "tags": memory.tags,
        "confidence": memory.confidence,
        "matched_by": hit.ranks.iter().map(|(list, _)| list.clone()).collect::<Vec<_>>(),
        "supersedes": memory.attributes.get("supersedes"),
    })
}

fn tool_error(tool: &str, error: MemoryError) -> ToolError {
    match error {
        MemoryError::Invalid(reason) => ToolError::invalid(tool, reason),
        other => ToolError::failed(tool, other),
    }
}

/// Runs one memory tool for the caller in `scope`; every read and write is the caller's own.
pub(crate) async fn call(
    service: &MemoryService,
    scope: &ToolScope,
    name: &str,
    arguments: Value,
) -> Result<Value, ToolError> {
    let user = Some(scope.user_id.as_str());
    match name {
        "search_memory" => {
            let kinds = match arguments["kind"].as_str() {
                Some(kind) => vec![MemoryKind::parse(kind).ok_or_else(|| {
                    ToolError::invalid(name, format!("argument `kind`: unknown kind `{kind}`"))
                })?],
                None => Vec::new(),
            };
            let mode = match arguments["mode"].as_str() {
                Some(mode) => SearchMode::parse(mode).ok_or_else(|| {
                    ToolError::invalid(name, format!("argument `mode`: unknown mode `{mode}`"))
                })?,
                None => SearchMode::Hybrid,
            };
            let request = SearchRequest {
                query: arguments["query"].as_str().unwrap_or_default().to_owned(),
                user_id: Some(scope.user_id.clone()),
                kinds,
                since: parse_time(name, "since", &arguments["since"])?,
                until: parse_time(name, "until", &arguments["until"])?,
                tags: strings(&arguments["tags"]),
                limit: arguments["limit"]
                    .as_u64()
                    .map_or(service.config().search_limit, |limit| limit as usize),
                mode,
                touch: true,
                ..SearchRequest::default()
            };
            let hits = service
                .search(&request)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(Value::Array(hits.iter().map(hit_json).collect()))
        }
        "remember_fact" => {
            let content = arguments["content"].as_str().unwrap_or_default();
            let mut entities = Vec::new();
            for entity in arguments["entities"].as_array().into_iter().flatten() {
                let canonical = entity["name"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                let entity_type = EntityType::parse(entity["type"].as_str().unwrap_or("other"));
                let mut surfaces = vec![canonical.clone()];
                surfaces.extend(strings(&entity["aliases"]));
                for surface in surfaces {
                    entities.push(ExtractedEntity {
                        surface,
                        canonical: canonical.clone(),
                        entity_type,
                        start: 0,
                        end: 0,
                        confidence: 1.0,
                        relation: None,
                        provider: "tool".to_owned(),
                    });
                }
            }
            let id = service
                .save_fact(
                    user,
                    scope.session_id.as_deref(),
                    scope.chat_id.as_deref(),
                    content,
                    strings(&arguments["tags"]),
                    Vec::new(),
                    arguments["confidence"].as_f64().unwrap_or(1.0),
                    entities,
                )
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": id, "saved": true}))
        }
        "correct_fact" => {
            let old_id = arguments["id"].as_str().unwrap_or_default();
            let content = arguments["content"].as_str().unwrap_or_default();
            let id = service
                .correct_fact(user, old_id, content)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": id, "replaces": old_id}))
        }
        "confirm_fact" => {
            let id = arguments["id"].as_str().unwrap_or_default();
            service
                .store()
                .map_err(|error| tool_error(name, error))?
                .confirm(id, user)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": id, "confirmed": true}))
        }
        "memory_stats" => {
            let stats = service
                .store()
                .map_err(|error| tool_error(name, error))?
                .stats(user)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({
                "counts": {"episode": stats.episodes, "fact": stats.facts, "reflection": stats.reflections},
                "entities": stats.entities,
                "latest": stats.latest.map(|time| time.to_rfc3339()),
                "pending_index": stats.pending_index,
            }))
        }
        "get_entity_info" => {
            let entity_name = arguments["name"].as_str().unwrap_or_default();
            let info = service
                .store()
                .map_err(|error| tool_error(name, error))?
                .entity_info(user, entity_name, service.config().entity_memory_limit)
                .await
                .map_err(|error| tool_error(name, error))?
                .ok_or_else(|| {
                    ToolError::failed(name, format!("no entity named `{entity_name}` in memory"))
                })?;
            Ok(json!({
                "id": info.id,
                "name": info.name,
                "type": info.entity_type,
                "aliases": info.aliases,
                "mention_count": info.mention_count,
                "summary": info.summary,
                "memories": info.memories.iter().map(|memory| json!({
                    "id": memory.id,
                    "kind": memory.kind.as_str(),
                    "content": memory.content,
                    "event_time": memory.event_time.to_rfc3339(),
                })).collect::<Vec<_>>(),
            }))
        }
        other => Err(ToolError::UnknownTool(other.to_owned())),
    }
}

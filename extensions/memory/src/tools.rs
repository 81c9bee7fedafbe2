//! The orchestrator's memory tools: specs and dispatch.

use chrono::{DateTime, NaiveDate, Utc};
use mnemo_kernel::{ToolError, ToolScope, ToolSpec};
use mnemo_ner_api::{EntityType, ExtractedEntity};
use serde_json::{json, Value};

use crate::error::MemoryError;
use crate::service::{FactInput, MemoryService};
use crate::types::{MemoryKind, SearchHit, SearchMode, SearchRequest};

const MEMORY_TYPES: [&str; 3] = ["conversation", "fact", "context"];

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
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
                    "include_superseded": {"type": "boolean", "description": "also return memories a newer one replaced"}
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
            name: "remember".to_owned(),
            description: "Store one or more facts, each about the people it concerns (subjects such as \"my wife\" or \"Sarah\"). People are created on first mention and linked afterwards.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": config.max_content_chars, "description": "a single fact"},
                    "facts": {
                        "type": "array", "maxItems": config.max_batch_size,
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1, "maxLength": config.max_content_chars},
                                "subjects": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}, "maxItems": 10},
                                "expires_in_days": {"type": "integer", "minimum": 1, "maximum": 36500},
                                "shared": {"type": "boolean"}
                            },
                            "required": ["content"],
                            "additionalProperties": false
                        }
                    },
                    "subjects": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}, "maxItems": 10, "description": "who the fact is about"},
                    "expires_in_days": {"type": "integer", "minimum": 1, "maximum": 36500, "description": "days until it expires"},
                    "shared": {"type": "boolean", "description": "true for group/team facts everyone in this chat may see"}
                },
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "recall".to_owned(),
            description: "Search memory, optionally only about one person (\"my wife\", \"Sarah\").".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to search for"},
                    "about": {"type": "string", "maxLength": 200, "description": "filter to a person, e.g. 'my wife' or 'Sarah'"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "search_memories".to_owned(),
            description: "Search memories by meaning and keywords, optionally of one type.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "memory_type": {"type": "string", "enum": MEMORY_TYPES},
                    "limit": {"type": "integer", "minimum": 1, "maximum": config.max_search_limit}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "store_memory".to_owned(),
            description: "Store a memory: conversation (kept 30 days), fact (permanent) or context (until the end of the day).".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": config.max_content_chars},
                    "memory_type": {"type": "string", "enum": MEMORY_TYPES},
                    "metadata": {"type": "object", "description": format!("free-form JSON kept with the memory: at most {MAX_METADATA_BYTES} bytes as JSON, nested at most 32 deep")}
                },
                "required": ["content"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "forget_memory".to_owned(),
            description: "Forget one of the user's memories for good: it is removed from the store and every index.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"memory_id": id},
                "required": ["memory_id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "set_context".to_owned(),
            description: "Remember a value for today under a key (e.g. current_task); it expires at the end of the day.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "minLength": 1, "maxLength": 100},
                    "value": {"type": "string", "minLength": 1, "maxLength": config.max_content_chars}
                },
                "required": ["key", "value"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "get_context".to_owned(),
            description: "The value remembered today under a key, or null.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 100}},
                "required": ["key"],
                "additionalProperties": false
            }),
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
                chat_id: scope.chat_id.clone(),
                kinds,
                since: parse_time(name, "since", &arguments["since"])?,
                until: parse_time(name, "until", &arguments["until"])?,
                tags: strings(&arguments["tags"]),
                limit: arguments["limit"]
                    .as_u64()
                    .map_or(service.config().search_limit, |limit| limit as usize),
                mode,
                include_superseded: arguments["include_superseded"].as_bool().unwrap_or(false),
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
                .save_fact(FactInput {
                    user_id: user.map(str::to_owned),
                    session_id: scope.session_id.clone(),
                    chat_id: scope.chat_id.clone(),
                    content: content.to_owned(),
                    tags: strings(&arguments["tags"]),
                    confidence: arguments["confidence"].as_f64().unwrap_or(1.0),
                    extra_entities: entities,
                    supersede: true,
                    ..FactInput::default()
                })
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
            let store = service.store().map_err(|error| tool_error(name, error))?;
            let limit = service.config().entity_memory_limit;
            // A person by name or by relation ("my brother"), as `recall(about)` finds them;
            // any other entity by its name or alias.
            let person = service
                .find_person(&scope.user_id, entity_name)
                .await
                .map_err(|error| tool_error(name, error))?;
            let info = match person {
                Some(person) => {
                    store
                        .entity_info_by_id(user, scope.chat_id.as_deref(), &person.id, limit)
                        .await
                }
                None => {
                    store
                        .entity_info(user, scope.chat_id.as_deref(), entity_name, limit)
                        .await
                }
            }
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
        "remember" => remember(service, scope, name, &arguments).await,
        "recall" => {
            let query = arguments["query"].as_str().unwrap_or_default().to_owned();
            let mut about = Vec::new();
            if let Some(reference) = arguments["about"].as_str() {
                match service
                    .find_person(&scope.user_id, reference)
                    .await
                    .map_err(|error| tool_error(name, error))?
                {
                    Some(person) => about.push(person.id),
                    // Seed 000: a person that cannot be found gives unfiltered results.
                    None => {
                        tracing::debug!(%reference, "recall: no such person; searching everything")
                    }
                }
            }
            let request = SearchRequest {
                query,
                user_id: Some(scope.user_id.clone()),
                chat_id: scope.chat_id.clone(),
                about,
                limit: service.config().search_limit,
                touch: true,
                ..SearchRequest::default()
            };
            let hits = service
                .search(&request)
                .await
                .map_err(|error| tool_error(name, error))?;
            attributed(service, name, &hits).await
        }
        "search_memories" => {
            let request = SearchRequest {
                query: arguments["query"].as_str().unwrap_or_default().to_owned(),
                user_id: Some(scope.user_id.clone()),
                chat_id: scope.chat_id.clone(),
                memory_type: arguments["memory_type"].as_str().map(str::to_owned),
                limit: arguments["limit"]
                    .as_u64()
                    .map_or(service.config().search_limit, |limit| limit as usize),
                touch: true,
                ..SearchRequest::default()
            };
            let hits = service
                .search(&request)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(Value::Array(hits.iter().map(hit_json).collect()))
        }
        "store_memory" => {
            let memory_type = arguments["memory_type"].as_str().unwrap_or("fact");
            check_metadata(name, &arguments["metadata"])?;
            let metadata = arguments["metadata"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let id = service
                .store_typed(
                    scope,
                    memory_type,
                    arguments["content"].as_str().unwrap_or_default(),
                    metadata,
                )
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": id, "memory_type": memory_type}))
        }
        "forget_memory" => {
            let memory_id = arguments["memory_id"].as_str().unwrap_or_default();
            service
                .forget(&scope.user_id, memory_id)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": memory_id, "forgotten": true}))
        }
        "set_context" => {
            let key = arguments["key"].as_str().unwrap_or_default();
            let value = arguments["value"].as_str().unwrap_or_default();
            let mut metadata = serde_json::Map::new();
            metadata.insert("key".to_owned(), json!(key));
            metadata.insert("value".to_owned(), json!(value));
            let id = service
                .store_typed(scope, "context", &format!("{key}: {value}"), metadata)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(json!({"id": id, "key": key}))
        }
        "get_context" => {
            let key = arguments["key"].as_str().unwrap_or_default();
            let found = service
                .context_value(&scope.user_id, scope.chat_id.as_deref(), key)
                .await
                .map_err(|error| tool_error(name, error))?;
            Ok(
                json!({"key": key, "value": found.and_then(|memory| memory.attributes.get("value").cloned())}),
            )
        }
        other => Err(ToolError::UnknownTool(other.to_owned())),
    }
}

/// The most bytes `store_memory`'s `metadata` may take as JSON. It is kept with the memory and
/// exported on the memory's line, which must stay under `max_event_bytes` (1 MiB by default)
/// for the export to import back: 16 KiB leaves room for the content and the escaping.
pub(crate) const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Refuses `metadata` larger than [`MAX_METADATA_BYTES`] as JSON; the error names the argument
/// and the limit. (Its nesting is bounded by the kernel's check of every tool argument.)
fn check_metadata(tool: &str, metadata: &Value) -> Result<(), ToolError> {
    // Counted while serialising, stopping at the limit rather than building a copy of it all.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_METADATA_BYTES {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    if serde_json::to_writer(&mut counter, metadata).is_err() {
        return Err(ToolError::invalid(
            tool,
            format!("argument `metadata`: more than {MAX_METADATA_BYTES} bytes as JSON; the limit is {MAX_METADATA_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Search hits with the names of the people each is about.
async fn attributed(
    service: &MemoryService,
    tool: &str,
    hits: &[SearchHit],
) -> Result<Value, ToolError> {
    let subject_ids: Vec<String> = hits
        .iter()
        .flat_map(|hit| hit.memory.subject_ids.clone())
        .collect();
    let names = service
        .store()
        .map_err(|error| tool_error(tool, error))?
        .entity_names(&subject_ids)
        .await
        .map_err(|error| tool_error(tool, error))?;
    Ok(Value::Array(
        hits.iter()
            .map(|hit| {
                let mut item = hit_json(hit);
                let about: Vec<&String> = hit
                    .memory
                    .subject_ids
                    .iter()
                    .filter_map(|id| names.get(id))
                    .collect();
                item["about"] = json!(about);
                item
            })
            .collect(),
    ))
}

/// The `remember` tool: one fact or a batch, each linked to its subjects.
async fn remember(
    service: &MemoryService,
    scope: &ToolScope,
    tool: &str,
    arguments: &Value,
) -> Result<Value, ToolError> {
    let mut items: Vec<Value> = arguments["facts"].as_array().cloned().unwrap_or_default();
    if let Some(content) = arguments["content"].as_str() {
        items.insert(0, json!({"content": content}));
    }
    if items.is_empty() {
        return Err(ToolError::invalid(
            tool,
            "give `content` or a non-empty `facts` list",
        ));
    }
    for (index, item) in items.iter().enumerate() {
        service
            .check_content(
                &format!("facts[{index}].content"),
                item["content"].as_str().unwrap_or_default(),
            )
            .map_err(|error| tool_error(tool, error))?;
    }
    let mut saved = Vec::new();
    for item in items {
        let content = item["content"].as_str().unwrap_or_default();
        let subjects = if item.get("subjects").is_some() {
            strings(&item["subjects"])
        } else {
            strings(&arguments["subjects"])
        };
        let days = item["expires_in_days"]
            .as_i64()
            .or_else(|| arguments["expires_in_days"].as_i64());
        let shared = item["shared"]
            .as_bool()
            .or_else(|| arguments["shared"].as_bool())
            .unwrap_or(false);
        let (id, people) = service
            .remember(scope, content, &subjects, days, shared)
            .await
            .map_err(|error| tool_error(tool, error))?;
        saved.push(json!({"id": id, "subjects": people}));
    }
    Ok(json!({"saved": saved}))
}

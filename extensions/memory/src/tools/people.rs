//! Seed 000's tools, which tie facts to the people they are about: `remember` and `recall`.

use super::*;

/// `remember` (seed 000): one fact or a batch, each linked to the people it is about.
pub(super) struct Remember(pub(super) Arc<MemoryService>);

/// Arguments of `remember`: `content` or `facts`; `subjects`, `expires_in_days` and `shared`
/// apply to every fact that does not set its own.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RememberArgs {
    /// a single fact
    #[schemars(length(min = 1))]
    content: Option<String>,
    facts: Option<Vec<FactArg>>,
    /// who the fact is about
    #[schemars(length(max = MAX_SUBJECTS), inner(length(min = 1, max = MAX_NAME_CHARS)))]
    subjects: Option<Vec<String>>,
    /// days until it expires
    #[schemars(range(min = 1, max = MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
    /// true for group/team facts everyone in this chat may see
    shared: Option<bool>,
}

/// One fact of `remember`'s batch.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FactArg {
    #[schemars(length(min = 1))]
    content: String,
    #[schemars(length(max = MAX_SUBJECTS), inner(length(min = 1, max = MAX_NAME_CHARS)))]
    subjects: Option<Vec<String>>,
    #[schemars(range(min = 1, max = MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
    shared: Option<bool>,
}

#[async_trait]
impl Tool for Remember {
    type Args = RememberArgs;

    fn name(&self) -> &str {
        "remember"
    }

    fn description(&self) -> String {
        "Store one or more facts, each about the people it concerns (subjects such as \"my wife\" or \"Sarah\"). People are created on first mention and linked afterwards.".to_owned()
    }

    fn limits(&self) -> Limits {
        let config = self.0.config();
        Limits::default()
            .max_chars("content", config.max_content_chars)
            .max_items("facts", config.max_batch_size)
            .max_chars("facts[].content", config.max_content_chars)
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: RememberArgs,
    ) -> Result<Value, ToolError> {
        let tool = self.name();
        let mut items = args.facts.unwrap_or_default();
        if let Some(content) = args.content {
            items.insert(
                0,
                FactArg {
                    content,
                    subjects: None,
                    expires_in_days: None,
                    shared: None,
                },
            );
        }
        if items.is_empty() {
            return Err(ToolError::invalid(
                tool,
                "give `content` or a non-empty `facts` list",
            ));
        }
        // Every fact is checked before any is saved: a bad one saves none.
        for (index, item) in items.iter().enumerate() {
            self.0
                .check_content(&format!("facts[{index}].content"), &item.content)
                .map_err(|error| tool_error(tool, error))?;
        }
        let mut saved = Vec::new();
        for item in items {
            let subjects = item
                .subjects
                .as_ref()
                .or(args.subjects.as_ref())
                .cloned()
                .unwrap_or_default();
            let expires_at = item
                .expires_in_days
                .or(args.expires_in_days)
                .map(|days| scope.at + chrono::Duration::days(days));
            let shared = item.shared.or(args.shared).unwrap_or(false);
            let (id, people) = self
                .0
                .remember(scope, &item.content, &subjects, expires_at, shared)
                .await
                .map_err(|error| tool_error(tool, error))?;
            saved.push(json!({"id": id, "subjects": people}));
        }
        Ok(json!({"saved": saved}))
    }
}

/// `recall` (seed 000): search, optionally only about one person.
pub(super) struct Recall(pub(super) Arc<MemoryService>);

/// Arguments of `recall`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RecallArgs {
    /// what to search for
    query: String,
    /// filter to a person, e.g. 'my wife' or 'Sarah'
    #[schemars(length(max = MAX_NAME_CHARS))]
    about: Option<String>,
}

#[async_trait]
impl Tool for Recall {
    type Args = RecallArgs;

    fn name(&self) -> &str {
        "recall"
    }

    fn description(&self) -> String {
        "Search memory, optionally only about one person (\"my wife\", \"Sarah\").".to_owned()
    }

    async fn call(
        &self,
        _ctx: &KernelContext,
        scope: &ToolScope,
        args: RecallArgs,
    ) -> Result<Value, ToolError> {
        let name = self.name();
        let mut about = Vec::new();
        if let Some(reference) = args.about.as_deref() {
            match self
                .0
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
            about,
            ..caller_request(&self.0, scope, args.query)
        };
        let hits = search(&self.0, name, request).await?;
        attributed(&self.0, name, &hits).await
    }
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
                let mut item = hit.summary();
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

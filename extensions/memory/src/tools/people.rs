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
    /// who the fact is about: names ('my wife', 'Sarah'), or a person with their id on a
    /// messaging platform ({"name": "Sarah", "external_id": "12345", "provider": "telegram"})
    #[schemars(length(max = MAX_SUBJECTS))]
    subjects: Option<Vec<SubjectArg>>,
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
    #[schemars(length(max = MAX_SUBJECTS))]
    subjects: Option<Vec<SubjectArg>>,
    #[schemars(range(min = 1, max = MAX_EXPIRY_DAYS))]
    expires_in_days: Option<i64>,
    shared: Option<bool>,
}

/// Who a fact is about (or a search is filtered to): how the user calls them, or a person with
/// their stable id on a messaging platform, the same person whatever name they go by.
#[derive(Clone, JsonSchema)]
#[serde(untagged)]
pub(super) enum SubjectArg {
    /// how the user calls them: 'my wife', 'Sarah'
    Name(String),
    /// a person by their id on a messaging platform
    Anchored(AnchoredArg),
}

/// A person with their id on a messaging platform.
#[derive(Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AnchoredArg {
    /// how the user calls them; needed the first time the id is given
    #[schemars(length(min = 1, max = MAX_NAME_CHARS))]
    name: Option<String>,
    /// their stable id on the platform, e.g. a Telegram user id
    #[schemars(length(min = 1, max = MAX_EXTERNAL_ID_CHARS))]
    external_id: String,
    /// the platform: 'telegram', 'slack', ...
    #[schemars(length(min = 1, max = MAX_EXTERNAL_ID_CHARS))]
    provider: String,
}

impl<'de> Deserialize<'de> for SubjectArg {
    /// A string is a name; an object a person with an external id; anything else is refused
    /// with what a subject may be.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        match Value::deserialize(deserializer)? {
            Value::String(name) => Ok(Self::Name(name)),
            object @ Value::Object(_) => AnchoredArg::deserialize(object)
                .map(Self::Anchored)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "a subject is a name or an object {{\"name\", \"external_id\", \"provider\"}}, not `{other}`"
            ))),
        }
    }
}

impl SubjectArg {
    /// The subject as the service takes it; a name too long or blank, or a bad external id, is
    /// refused naming the problem.
    fn subject(self, tool: &str) -> Result<Subject, ToolError> {
        let (name, external) = match self {
            Self::Name(name) => (Some(name), None),
            Self::Anchored(AnchoredArg {
                name,
                external_id,
                provider,
            }) => {
                let external = ExternalId::new(&provider, &external_id)
                    .map_err(|error| ToolError::invalid(tool, format!("subject: {error}")))?;
                (name, Some(external))
            }
        };
        if let Some(name) = &name {
            let chars = name.chars().count();
            if name.is_empty() || chars > MAX_NAME_CHARS {
                return Err(ToolError::invalid(
                    tool,
                    format!("subject `{name}`: a name is 1 to {MAX_NAME_CHARS} characters"),
                ));
            }
        }
        Ok(Subject { name, external })
    }
}

#[async_trait]
impl Tool for Remember {
    type Args = RememberArgs;

    fn name(&self) -> &str {
        "remember"
    }

    fn description(&self) -> String {
        "Store one or more facts, each about the people it concerns (subjects such as \"my wife\" or \"Sarah\"). People are created on first mention and linked afterwards; a subject with the person's id on a messaging platform is that person whatever name it gives.".to_owned()
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
        let mut checked = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            self.0
                .check_content(&format!("facts[{index}].content"), &item.content)
                .map_err(|error| tool_error(tool, error))?;
            let subjects = item
                .subjects
                .as_ref()
                .or(args.subjects.as_ref())
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|subject| subject.subject(tool))
                .collect::<Result<Vec<Subject>, ToolError>>()?;
            self.0
                .check_subjects(&scope.user_id, &item.content, &subjects)
                .await
                .map_err(|error| tool_error(tool, error))?;
            checked.push((item, subjects));
        }
        let mut saved = Vec::new();
        for (item, subjects) in checked {
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
    /// filter to a person, e.g. 'my wife' or 'Sarah', or a person by their id on a messaging
    /// platform ({"external_id": "12345", "provider": "telegram"})
    about: Option<SubjectArg>,
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
        // An empty `about` (a model filling every field) filters nothing.
        let about_given = args
            .about
            .filter(|about| !matches!(about, SubjectArg::Name(text) if text.trim().is_empty()));
        if let Some(subject) = about_given {
            let subject = subject.subject(name)?;
            let mut person = None;
            if let Some(external) = &subject.external {
                person = self
                    .0
                    .person_by_external_id(&scope.user_id, external)
                    .await
                    .map_err(|error| tool_error(name, error))?;
            }
            if let (None, Some(reference)) = (&person, subject.name.as_deref()) {
                person = self
                    .0
                    .find_person(&scope.user_id, reference)
                    .await
                    .map_err(|error| tool_error(name, error))?;
            }
            match person {
                Some(person) => about.push(person.id),
                // Seed 000: a person that cannot be found gives unfiltered results.
                None => {
                    tracing::debug!(?subject, "recall: no such person; searching everything")
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

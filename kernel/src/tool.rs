//! Typed tools: one argument struct gives a tool both its JSON schema and its parsing.
//!
//! An extension writes each tool as a type implementing [`Tool`], whose [`Tool::Args`] derive
//! `serde::Deserialize` and `schemars::JsonSchema`:
//!
//! ```ignore
//! /// Arguments of `add_note`.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct AddNote {
//!     /// The note's text.
//!     #[schemars(length(min = 1, max = 2000))]
//!     text: String,
//! }
//! ```
//!
//! The struct is the one source of truth. Field docs become the argument descriptions; serde's
//! `deny_unknown_fields`, `Option` and `rename` become `additionalProperties`, `required` and
//! the property names; schemars' `length(...)` and `range(...)` become `minLength`/`maxLength`,
//! `minItems`/`maxItems` and `minimum`/`maximum`. Limits known only at run time (from config)
//! are declared by [`Tool::limits`] and written into the same schema. A [`ToolSet`] checks the
//! arguments of every call against that schema (the kernel's checker, [`crate::schema`], with its
//! nesting bound) and then parses them into `Args`; every error names the argument.
//!
//! The schema is kept simple for small local models and MCP clients: no `$schema`, `title`,
//! `format` or `$defs` (subschemas are inlined), no description of the whole (the tool has one), and an optional argument is its type alone (it
//! is left out of `required` rather than made nullable).

use async_trait::async_trait;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::extension::{ToolError, ToolProvider, ToolScope, ToolSpec};
use crate::kernel::KernelContext;

/// A tool the agent may call, with typed arguments.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The arguments: a struct deriving `Deserialize` and `JsonSchema`, with
    /// `#[serde(deny_unknown_fields)]` and its limits as schemars attributes.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The tool's name, unique across all enabled extensions.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> String;

    /// Limits that come from config, set on the generated schema (and so enforced with it).
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// Runs the tool with arguments already checked and parsed.
    ///
    /// # Errors
    /// A [`ToolError`] whose message names the problem.
    async fn call(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        args: Self::Args,
    ) -> Result<Value, ToolError>;
}

/// Limits known only at run time, each set on one argument of the generated schema.
///
/// An argument is named by its path: `content`, or `facts[].content` for a field of every item
/// of the list `facts`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    entries: Vec<(String, &'static str, Value)>,
}

impl Limits {
    /// At most `max` characters in the string argument at `path`.
    pub fn max_chars(self, path: &str, max: usize) -> Self {
        self.with(path, "maxLength", Value::from(max))
    }

    /// At most `max` items in the list argument at `path`.
    pub fn max_items(self, path: &str, max: usize) -> Self {
        self.with(path, "maxItems", Value::from(max))
    }

    /// At most `max` for the number argument at `path`.
    pub fn maximum(self, path: &str, max: usize) -> Self {
        self.with(path, "maximum", Value::from(max))
    }

    fn with(mut self, path: &str, keyword: &'static str, value: Value) -> Self {
        self.entries.push((path.to_owned(), keyword, value));
        self
    }

    /// Writes every limit into `schema`; the error names a path the schema does not have.
    fn apply(&self, schema: &mut Value) -> Result<(), String> {
        for (path, keyword, value) in &self.entries {
            let mut at = &mut *schema;
            for segment in path.split('.') {
                let (name, items) = match segment.strip_suffix("[]") {
                    Some(name) => (name, true),
                    None => (segment, false),
                };
                at = at
                    .get_mut("properties")
                    .and_then(|properties| properties.get_mut(name))
                    .ok_or_else(|| format!("no argument `{path}` to set `{keyword}` on"))?;
                if items {
                    at = at
                        .get_mut("items")
                        .ok_or_else(|| format!("argument `{name}` of `{path}` is not a list"))?;
                }
            }
            let Some(object) = at.as_object_mut() else {
                return Err(format!("argument `{path}` has no schema object"));
            };
            object.insert((*keyword).to_owned(), value.clone());
        }
        Ok(())
    }
}

/// The JSON schema of `A`, simplified for models and MCP clients (see the module doc).
pub fn schema_for<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    simplify(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        // The tool's own description says what the struct's doc would.
        for keyword in ["title", "description", "$defs"] {
            root.remove(keyword);
        }
        if root.get("type").and_then(Value::as_str) == Some("object") {
            root.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    schema
}

/// Drops `format`, `title` and nullability from a schema and its subschemas.
fn simplify(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("format");
    // `Option<T>` of a schema with subschemas: `{"anyOf": [T, {"type": "null"}]}`.
    if let Some(Value::Array(options)) = object.get("anyOf") {
        let rest: Vec<&Value> = options.iter().filter(|option| !is_null(option)).collect();
        if object.len() == 1 && rest.len() == 1 {
            if let Some(inner) = rest[0].as_object() {
                let inner = inner.clone();
                object.clear();
                object.extend(inner);
            }
        }
    }
    // An enum whose variants have docs: `{"oneOf": [{"const": "a", "description": ..}, ..]}`.
    if let Some(Value::Array(options)) = object.get("oneOf") {
        let constants: Option<Vec<Value>> = options
            .iter()
            .map(|option| {
                option
                    .get("const")
                    .filter(|value| value.is_string())
                    .cloned()
            })
            .collect();
        if let Some(constants) = constants.filter(|constants| !constants.is_empty()) {
            object.remove("oneOf");
            object.insert("type".to_owned(), Value::from("string"));
            object.insert("enum".to_owned(), Value::Array(constants));
        }
    }
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|name| name != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            object.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(options)) = object.get_mut("enum") {
        options.retain(|option| !option.is_null());
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(simplify);
    }
    for keyword in ["items", "additionalProperties"] {
        if let Some(inner) = object.get_mut(keyword) {
            simplify(inner);
        }
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(options)) = object.get_mut(keyword) {
            options.iter_mut().for_each(simplify);
        }
    }
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// Checks `arguments` against `schema` (the tool's spec) and parses them into `A`.
///
/// `null` stands for no arguments. The check bounds nesting and enforces the schema's types,
/// `required`, unknown keys and limits; parsing then catches what the schema does not say.
///
/// # Errors
/// [`ToolError::InvalidArguments`] naming the argument and the problem.
pub fn parse_arguments<A: DeserializeOwned>(
    tool: &str,
    schema: &Value,
    arguments: Value,
) -> Result<A, ToolError> {
    let arguments = if arguments.is_null() {
        Value::Object(Map::new())
    } else {
        arguments
    };
    crate::schema::check(schema, &arguments).map_err(|reason| ToolError::invalid(tool, reason))?;
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let path = error.path().to_string();
        let reason = error.into_inner().to_string();
        if path == "." {
            ToolError::invalid(tool, format!("arguments: {reason}"))
        } else {
            ToolError::invalid(tool, format!("argument `{path}`: {reason}"))
        }
    })
}

/// A tool with its arguments' type erased, as a [`ToolSet`] keeps it.
#[async_trait]
trait ErasedTool: Send + Sync {
    async fn run(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        spec: &ToolSpec,
        arguments: Value,
    ) -> Result<Value, ToolError>;
}

#[async_trait]
impl<T: Tool> ErasedTool for T {
    async fn run(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        spec: &ToolSpec,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let args = parse_arguments::<T::Args>(&spec.name, &spec.parameters, arguments)?;
        self.call(ctx, scope, args).await
    }
}

/// An extension's tools: their specs, generated once, and typed dispatch by name.
///
/// It is a [`ToolProvider`]: an extension returns `Some(&self.tools)` from
/// [`crate::Extension::tool_provider`].
#[derive(Default)]
pub struct ToolSet {
    tools: Vec<(ToolSpec, Box<dyn ErasedTool>)>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|(spec, _)| &spec.name))
            .finish()
    }
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `tool`, its spec generated from its arguments' type and limits.
    ///
    /// # Errors
    /// A limit naming an argument the type does not have (a programming error, reported at
    /// start-up rather than at the first call).
    pub fn add<T: Tool>(&mut self, tool: T) -> Result<&mut Self, ToolError> {
        let mut parameters = schema_for::<T::Args>();
        tool.limits()
            .apply(&mut parameters)
            .map_err(|reason| ToolError::failed(tool.name(), reason))?;
        let spec = ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description(),
            parameters,
        };
        self.tools.push((spec, Box::new(tool)));
        Ok(self)
    }

    /// Adds `tool`, builder style; see [`ToolSet::add`].
    ///
    /// # Errors
    /// As [`ToolSet::add`].
    pub fn with<T: Tool>(mut self, tool: T) -> Result<Self, ToolError> {
        self.add(tool)?;
        Ok(self)
    }

    /// The tools' names, in the order they were added.
    pub fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .map(|(spec, _)| spec.name.as_str())
            .collect()
    }
}

#[async_trait]
impl ToolProvider for ToolSet {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    async fn call_tool(
        &self,
        ctx: &KernelContext,
        scope: &ToolScope,
        name: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let Some((spec, tool)) = self.tools.iter().find(|(spec, _)| spec.name == name) else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        tool.run(ctx, scope, spec, arguments).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Fact,
        Episode,
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Item {
        #[schemars(length(min = 1, max = 5))]
        name: String,
    }

    /// Search the test memory.
    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// What to look for.
        #[schemars(length(min = 1, max = 10))]
        query: String,
        #[schemars(range(min = 1, max = 50))]
        limit: Option<u32>,
        kind: Option<Kind>,
        #[schemars(length(max = 2), inner(length(max = 3)))]
        tags: Option<Vec<String>>,
        items: Option<Vec<Item>>,
        #[serde(rename = "type")]
        kind_name: Option<String>,
    }

    fn schema() -> Value {
        schema_for::<Args>()
    }

    fn parse(arguments: Value) -> Result<Args, String> {
        parse_arguments::<Args>("t", &schema(), arguments).map_err(|error| error.to_string())
    }

    #[test]
    fn the_schema_comes_from_the_struct_inline_and_plain() {
        let schema = schema();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for.",
                              "minLength": 1, "maxLength": 10},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "kind": {"type": "string", "enum": ["fact", "episode"]},
                    "tags": {"type": "array", "maxItems": 2,
                             "items": {"type": "string", "maxLength": 3}},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 5}},
                        "required": ["name"],
                        "additionalProperties": false
                    }},
                    "type": {"type": "string"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            "{schema:#}"
        );
    }

    #[test]
    fn valid_arguments_parse_into_the_struct() {
        let args = parse(
            json!({"query": "tea", "limit": 5, "kind": "fact", "tags": ["a"],
                                "items": [{"name": "ana"}], "type": "x"}),
        )
        .unwrap();
        assert_eq!(args.limit, Some(5));
        assert_eq!(args.kind, Some(Kind::Fact));
        assert_eq!(args.items, Some(vec![Item { name: "ana".into() }]));
        assert_eq!(args.kind_name.as_deref(), Some("x"));
        assert_eq!(parse(json!({"query": "tea"})).unwrap().tags, None);
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_field() {
        let cases = [
            (json!({}), "missing required argument `query`"),
            (json!(null), "missing required argument `query`"),
            (
                json!({"query": "tea", "colour": 1}),
                "unknown argument `colour`",
            ),
            (json!({"query": 3}), "argument `query`: expected string"),
            (json!({"query": ""}), "argument `query`: must be at least 1"),
            (
                json!({"query": "x".repeat(11)}),
                "argument `query`: 11 characters",
            ),
            (
                json!({"query": "x", "limit": 0}),
                "argument `limit`: must be at least 1",
            ),
            (
                json!({"query": "x", "limit": 51}),
                "argument `limit`: must be at most 50",
            ),
            (
                json!({"query": "x", "kind": "dream"}),
                "argument `kind`: must be one of",
            ),
            (
                json!({"query": "x", "tags": ["a", "b", "c"]}),
                "argument `tags`: 3 items",
            ),
            (
                json!({"query": "x", "tags": ["abcd"]}),
                "argument `tags[0]`: 4 characters",
            ),
            (
                json!({"query": "x", "items": [{"name": "toolong"}]}),
                "argument `items[0].name`",
            ),
            (
                json!({"query": "x", "items": [{"name": "a", "nom": "b"}]}),
                "unknown argument `items[0].nom`",
            ),
            (
                json!({"query": "x", "items": [{}]}),
                "missing required argument `items[0].name`",
            ),
            (
                json!({"query": "x", "kind": null}),
                "argument `kind`: expected string",
            ),
            (json!("tea"), "arguments: expected object"),
        ];
        for (arguments, expected) in cases {
            let error = parse(arguments.clone()).unwrap_err();
            assert!(
                error.starts_with("invalid arguments for `t`: ") && error.contains(expected),
                "{arguments}: {error}"
            );
        }
    }

    /// What the schema cannot say, parsing still refuses by name (a fraction for an integer).
    #[test]
    fn parsing_names_the_field_the_schema_let_through() {
        let error = parse(json!({"query": "x", "limit": 2.5})).unwrap_err();
        assert!(error.contains("argument `limit`"), "{error}");
    }

    #[test]
    fn nesting_is_bounded_in_typed_tools_too() {
        let mut deep = json!("leaf");
        for _ in 0..40 {
            deep = Value::Array(vec![deep]);
        }
        let error = parse(json!({"query": "x", "tags": deep})).unwrap_err();
        assert!(error.contains("nested more than 32"), "{error}");
    }

    #[test]
    fn limits_from_config_are_written_into_the_schema_and_enforced() {
        let mut schema = schema();
        Limits::default()
            .max_chars("query", 3)
            .max_items("items", 1)
            .max_chars("items[].name", 2)
            .maximum("limit", 7)
            .apply(&mut schema)
            .unwrap();
        assert_eq!(schema["properties"]["query"]["maxLength"], 3);
        assert_eq!(
            schema["properties"]["items"]["items"]["properties"]["name"]["maxLength"],
            2
        );
        let refused = |arguments: Value| {
            parse_arguments::<Args>("t", &schema, arguments)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(json!({"query": "abcd"})).contains("argument `query`"));
        assert!(refused(json!({"query": "a", "limit": 8})).contains("at most 7"));
        assert!(refused(json!({"query": "a", "items": [{"name": "abc"}]}))
            .contains("argument `items[0].name`"));
        let error = Limits::default()
            .max_chars("nope", 1)
            .apply(&mut schema)
            .unwrap_err();
        assert!(error.contains("`nope`"), "{error}");
    }

    /// Variant docs would make schemars emit `oneOf` of `const`s; models get a plain `enum`.
    #[test]
    fn documented_enums_are_plain_string_enums() {
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(rename_all = "lowercase")]
        enum Colour {
            /// The sky.
            Blue,
            /// Grass.
            Green,
        }
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct Paint {
            colour: Option<Colour>,
        }
        assert_eq!(
            schema_for::<Paint>()["properties"]["colour"],
            json!({"type": "string", "enum": ["blue", "green"]})
        );
        let paint: Paint =
            parse_arguments("t", &schema_for::<Paint>(), json!({"colour": "green"})).unwrap();
        assert!(matches!(paint.colour, Some(Colour::Green)));
        let error = parse_arguments::<Paint>("t", &schema_for::<Paint>(), json!({"colour": "red"}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("argument `colour`: must be one of"),
            "{error}"
        );
    }

    #[test]
    fn arguments_free_tools_have_an_empty_closed_object() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct NoArgs {}
        assert_eq!(
            schema_for::<NoArgs>(),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }
}

//! [`AnswerSchema`]: a JSON Schema an agent's final answer must match. With one, `FINAL`
//! (and a ready `answer` table) converts its value to JSON through the one Lua ↔ JSON
//! mapping ([`lua_json`](super::lua_json)) and checks it; a value that does not match is
//! refused with every [`Violation`], so the model can fix it and answer again.

use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use super::lua_json;

/// The most violations one refusal lists; the rest are counted.
const LISTED_VIOLATIONS: usize = 10;

/// A compiled JSON Schema (draft 2020-12 unless its `$schema` names another: 2019-09, 7,
/// 6 or 4). References to other documents are not fetched: a schema must be whole.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::environment::AnswerSchema;
///
/// let schema = AnswerSchema::new(json!({
///     "type": "object",
///     "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
///     "required": ["items"]
/// }))?;
/// assert!(schema.check(&json!({"items": [1, 2]})).is_ok());
/// let violations = schema.check(&json!({"items": [1, "two"]})).unwrap_err();
/// assert_eq!(violations[0].path, "answer.items[2]");
/// assert_eq!(violations[0].to_string(), r#"at answer.items[2]: "two" is not of type "integer""#);
/// assert!(AnswerSchema::new(json!({"type": "strin"})).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone)]
pub struct AnswerSchema {
    schema: Arc<Json>,
    validator: Arc<jsonschema::Validator>,
}

/// One way an answer fails its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Where, as the Lua ↔ JSON mapping names a place in a value: `answer`, then `.key`,
    /// `["odd key"]` and `[n]` (positions from 1, as Lua counts).
    pub path: String,
    /// What was expected, as the validator says it (`"two" is not of type "integer"`).
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {}: {}", self.path, self.message)
    }
}

impl AnswerSchema {
    /// Compiles `schema`; an invalid schema is an error saying where and why.
    pub fn new(schema: Json) -> Result<AnswerSchema, String> {
        let validator = jsonschema::validator_for(&schema).map_err(|error| {
            match error.instance_path().as_str() {
                "" => format!("not a valid JSON Schema: {error}"),
                at => format!("not a valid JSON Schema: {error} (at {at})"),
            }
        })?;
        Ok(AnswerSchema {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
        })
    }

    /// Parses and compiles the JSON text of a schema (the contents of `--schema FILE`).
    ///
    /// ```
    /// use rlm_registry::environment::AnswerSchema;
    /// assert!(AnswerSchema::parse(r#"{"type": "integer"}"#).is_ok());
    /// assert!(AnswerSchema::parse("{type: integer}").unwrap_err().starts_with("not JSON"));
    /// ```
    pub fn parse(text: &str) -> Result<AnswerSchema, String> {
        let schema: Json =
            serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
        AnswerSchema::new(schema)
    }

    /// The schema, as given.
    pub fn schema(&self) -> &Json {
        &self.schema
    }

    /// Checks `answer`: every violation, in the validator's order, when it does not match.
    pub fn check(&self, answer: &Json) -> Result<(), Vec<Violation>> {
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(answer)
            .map(|error| Violation {
                path: lua_json::lua_path("answer", answer, error.instance_path().as_str()),
                message: explain(error.to_string(), error.instance()),
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// The message a refused answer gets: each violation on a line of its own (at most
    /// ten, the rest counted), and what to do.
    pub(crate) fn refusal(violations: &[Violation]) -> String {
        let count = violations.len();
        let mut text = format!(
            "the answer does not match its schema ({count} problem{}):",
            if count == 1 { "" } else { "s" }
        );
        for violation in violations.iter().take(LISTED_VIOLATIONS) {
            text.push_str(&format!("\n- {violation}"));
        }
        if count > LISTED_VIOLATIONS {
            text.push_str(&format!("\n- … and {} more", count - LISTED_VIOLATIONS));
        }
        text.push_str("\nFix the value and give the answer again.");
        text
    }
}

/// The validator's message, with the Lua way when the value is an empty table where an
/// array was expected: an unmarked empty table is the JSON object `{}`.
fn explain(message: String, instance: &Json) -> String {
    let empty_object = instance.as_object().is_some_and(|map| map.is_empty());
    if empty_object && message.contains("\"array\"") {
        format!(
            "{message} (an empty Lua table is the object {{}}: write json.array() for an empty array)"
        )
    } else {
        message
    }
}

impl fmt::Debug for AnswerSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AnswerSchema").field(&self.schema).finish()
    }
}

impl PartialEq for AnswerSchema {
    fn eq(&self, other: &AnswerSchema) -> bool {
        self.schema == other.schema
    }
}

impl Eq for AnswerSchema {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn violations_name_their_place_the_lua_way_and_what_was_expected() {
        let schema = AnswerSchema::new(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array"},
                "odd key": {"type": "integer"}
            },
            "required": ["name"]
        }))
        .unwrap();
        let violations = schema
            .check(&json!({"tags": {}, "odd key": 1.5}))
            .unwrap_err();
        let shown: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert!(
            shown.contains(&"at answer: \"name\" is a required property".to_string()),
            "{shown:?}"
        );
        assert!(
            shown.iter().any(
                |v| v.starts_with("at answer.tags: {} is not of type \"array\"")
                    && v.ends_with("write json.array() for an empty array)")
            ),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|v| v.starts_with("at answer[\"odd key\"]: 1.5")),
            "{shown:?}"
        );
        let refusal = AnswerSchema::refusal(&violations);
        assert!(refusal.starts_with("the answer does not match its schema (3 problems):\n- at "));
        assert!(refusal.ends_with("\nFix the value and give the answer again."));
    }

    #[test]
    fn long_lists_of_violations_are_cut_and_counted() {
        let schema =
            AnswerSchema::new(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let violations = schema
            .check(&json!((0..12).collect::<Vec<_>>()))
            .unwrap_err();
        assert_eq!(violations.len(), 12);
        assert_eq!(violations[11].path, "answer[12]");
        let refusal = AnswerSchema::refusal(&violations);
        assert_eq!(refusal.matches("\n- at ").count(), LISTED_VIOLATIONS);
        assert!(refusal.contains("\n- … and 2 more\n"));
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused_with_the_reason() {
        let error = AnswerSchema::new(json!({"type": 12})).unwrap_err();
        assert!(error.starts_with("not a valid JSON Schema"), "{error}");
        assert!(
            AnswerSchema::new(json!(true)).is_ok(),
            "a boolean is a schema"
        );
    }
}

//! openapi.yaml (OpenAPI 3.1) as an OpenAPI 3.0.3 document for progenitor, which reads 3.0 only
//! (progenitor#1268). Two passes over a `serde_yaml::Value`, so no OpenAPI model is needed:
//!
//! 1. `downgrade`: the 3.1 constructs the file uses (and a few it may) rewritten to their 3.0
//!    spelling. Where 3.0 has no equivalent a keyword is dropped only if that loosens the schema
//!    (a client then accepts more, never refuses a valid answer); otherwise it is an error.
//! 2. `adapt_for_progenitor`: valid 3.0 that progenitor 0.15 still refuses or panics on,
//!    reshaped for the client. Each rule says which behaviour of progenitor it works around.
//!    (Two such rules are about schemas and run in pass 1's schema walk; their docs begin
//!    "For progenitor".)

use serde_yaml::{Mapping, Value};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Openapi30Error {
    #[error("the OpenAPI document is not a mapping")]
    NotAMapping,
    #[error("expected an OpenAPI 3.1 document, found openapi: {0:?}")]
    NotOpenapi31(String),
    #[error("{path}: `{keyword}` has no OpenAPI 3.0 equivalent")]
    Unsupported { path: String, keyword: &'static str },
}

/// The 3.0.3 equivalent of a 3.1 document, adapted for progenitor.
pub fn to_openapi_30(mut doc: Value) -> Result<Value, Openapi30Error> {
    downgrade(&mut doc)?;
    adapt_for_progenitor(&mut doc);
    Ok(doc)
}

// ---------------------------------------------------------------------------------------------
// Pass 1: 3.1 -> 3.0.3
// ---------------------------------------------------------------------------------------------

/// Schema keywords that only annotate: a 3.1 `$ref` with only these beside it means the `$ref`.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "deprecated",
    "readOnly",
    "writeOnly",
    "example",
    "examples",
    "$comment",
];

/// 3.1 schema keywords with no 3.0 equivalent whose removal only makes a schema accept more.
const LOOSENED_BY_DROPPING: &[&str] = &[
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "minContains",
    "maxContains",
    "if",
    "then",
    "else",
    "contentSchema",
    "$comment",
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
];

/// 3.1 schema keywords whose removal would break references or refuse valid values.
const REFUSED: &[&str] = &["$defs", "$dynamicRef", "patternProperties"];

fn downgrade(doc: &mut Value) -> Result<(), Openapi30Error> {
    let root = doc.as_mapping_mut().ok_or(Openapi30Error::NotAMapping)?;
    match root.get("openapi").and_then(Value::as_str) {
        Some(version) if version.starts_with("3.1.") => {}
        other => {
            return Err(Openapi30Error::NotOpenapi31(
                other.unwrap_or_default().to_owned(),
            ))
        }
    }
    root.insert("openapi".into(), "3.0.3".into());
    // Root fields 3.0 does not have: a client calls no webhooks, and 3.0's dialect is fixed.
    root.shift_remove("webhooks");
    root.shift_remove("jsonSchemaDialect");
    if let Some(info) = root.get_mut("info").and_then(Value::as_mapping_mut) {
        info.shift_remove("summary");
        if let Some(license) = info.get_mut("license").and_then(Value::as_mapping_mut) {
            license.shift_remove("identifier");
        }
    }
    inline_path_item_refs(root);
    convert_structure(doc, "#")
}

/// 3.0 has no `components.pathItems`: a path referring to one gets a copy of it.
fn inline_path_item_refs(root: &mut Mapping) {
    let Some(items) = root
        .get_mut("components")
        .and_then(Value::as_mapping_mut)
        .and_then(|components| components.shift_remove("pathItems"))
    else {
        return;
    };
    let Some(paths) = root.get_mut("paths").and_then(Value::as_mapping_mut) else {
        return;
    };
    for (_, item) in paths.iter_mut() {
        let target = ref_of(item)
            .and_then(|r| r.strip_prefix("#/components/pathItems/"))
            .and_then(|name| items.get(name));
        if let Some(target) = target {
            *item = target.clone();
        }
    }
}

/// Walks the non-schema part of the document (paths, operations, parameters, responses...) and
/// converts every schema it reaches: `components.schemas.*` and any `schema:` field.
fn convert_structure(node: &mut Value, path: &str) -> Result<(), Openapi30Error> {
    match node {
        Value::Mapping(map) => {
            // A 3.1 Reference Object may carry `summary`/`description`; 3.0 allows `$ref` alone.
            if map.contains_key("$ref") {
                map.retain(|key, _| key == "$ref");
                return Ok(());
            }
            for (key, value) in map.iter_mut() {
                let key = key.as_str().unwrap_or_default();
                let child = format!("{path}/{key}");
                match key {
                    // Extensions and example values are data, not OpenAPI objects (parameter
                    // and media type `examples` are 3.0 Example Objects already).
                    _ if key.starts_with("x-") => {}
                    "example" | "examples" => {}
                    // Parameter, Header and Media Type objects hold their schema here. (A map keyed
                    // by user names, e.g. a header called `schema`, would be misread; none is.)
                    "schema" => convert_schema(value, &child)?,
                    "schemas" if path == "#/components" => {
                        if let Some(schemas) = value.as_mapping_mut() {
                            for (name, schema) in schemas.iter_mut() {
                                let name = name.as_str().unwrap_or_default();
                                convert_schema(schema, &format!("{child}/{name}"))?;
                            }
                        }
                    }
                    _ => convert_structure(value, &child)?,
                }
            }
            Ok(())
        }
        Value::Sequence(items) => items
            .iter_mut()
            .enumerate()
            .try_for_each(|(i, item)| convert_structure(item, &format!("{path}/{i}"))),
        _ => Ok(()),
    }
}

fn convert_schema(schema: &mut Value, path: &str) -> Result<(), Openapi30Error> {
    // 3.1 allows `true`/`false` as a schema anywhere; 3.0 only as additionalProperties.
    if let Value::Bool(accept) = schema {
        *schema = if *accept {
            empty()
        } else {
            mapping([("not", empty())])
        };
        return Ok(());
    }
    let Some(map) = schema.as_mapping_mut() else {
        return Ok(());
    };
    if let Some(keyword) = REFUSED.iter().find(|k| map.contains_key(**k)) {
        return Err(Openapi30Error::Unsupported {
            path: path.to_owned(),
            keyword,
        });
    }
    // Order matters: the `$ref` rule may move keywords under allOf, and the `type: 'null'`
    // alternatives must be recognised before the alternatives themselves are converted.
    ref_with_siblings(map);
    map.retain(|key, _| !LOOSENED_BY_DROPPING.iter().any(|k| key == *k));
    type_array_to_nullable(map);
    null_alternatives_to_nullable(map);
    const_to_enum(map);
    numeric_exclusive_bound(
        map,
        "exclusiveMinimum",
        "minimum",
        |inclusive, exclusive| inclusive > exclusive,
    );
    numeric_exclusive_bound(
        map,
        "exclusiveMaximum",
        "maximum",
        |inclusive, exclusive| inclusive < exclusive,
    );
    examples_to_example(map);
    content_keywords_to_format(map);
    prefix_items_to_items(map);
    // For progenitor (typify), not for 3.0:
    scalar_range_alternatives_dropped(map);
    any_json_alternatives_to_any(map);

    for (key, value) in map.iter_mut() {
        let key = key.as_str().unwrap_or_default();
        let child = format!("{path}/{key}");
        match key {
            "properties" => {
                for (name, property) in value.as_mapping_mut().into_iter().flatten() {
                    let name = name.as_str().unwrap_or_default();
                    convert_schema(property, &format!("{child}/{name}"))?;
                }
            }
            // `additionalProperties: true|false` is valid 3.0 as it is.
            "additionalProperties" if value.is_bool() => {}
            "items" | "not" | "additionalProperties" => convert_schema(value, &child)?,
            "allOf" | "anyOf" | "oneOf" => {
                for (i, alternative) in value.as_sequence_mut().into_iter().flatten().enumerate() {
                    convert_schema(alternative, &format!("{child}/{i}"))?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A 3.1 `$ref` may have siblings (3.0 ignores them). Only annotations: the `$ref` alone means
/// the same. Constraints: the 3.0 idiom `allOf: [{$ref}]` keeps them.
fn ref_with_siblings(map: &mut Mapping) {
    if !map.contains_key("$ref") || map.len() == 1 {
        return;
    }
    if map.keys().all(|key| key == "$ref" || is_annotation(key)) {
        map.retain(|key, _| key == "$ref");
    } else if let Some(reference) = map.shift_remove("$ref") {
        push_all_of(map, mapping([("$ref", reference)]));
    }
}

/// `type: [X, 'null']` -> `type: X, nullable: true`; `type: 'null'` -> only null allowed;
/// several non-null types -> an anyOf of them (3.0's `type` is a single string).
fn type_array_to_nullable(map: &mut Mapping) {
    let types: Vec<Value> = match map.get("type") {
        Some(Value::Sequence(types)) => types.clone(),
        Some(single) if single == "null" => vec![single.clone()],
        _ => return,
    };
    let (nulls, others): (Vec<Value>, Vec<Value>) = types.into_iter().partition(|t| t == "null");
    map.shift_remove("type");
    match others.len() {
        // 3.0.3 spells "null only" as a nullable enum of null.
        0 => map.insert("enum".into(), Value::Sequence(vec![Value::Null])),
        1 => map.insert("type".into(), others[0].clone()),
        _ => {
            let alternatives = others.into_iter().map(|t| mapping([("type", t)])).collect();
            map.insert("anyOf".into(), Value::Sequence(alternatives))
        }
    };
    if !nulls.is_empty() {
        map.insert("nullable".into(), true.into());
    }
}

/// A `{type: 'null'}` alternative of anyOf/oneOf becomes `nullable: true` on the schema. With
/// one alternative left: `allOf: [it]` (3.0's nullable reference), not a one-armed anyOf.
fn null_alternatives_to_nullable(map: &mut Mapping) {
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Sequence(alternatives)) = map.get_mut(key) else {
            continue;
        };
        let before = alternatives.len();
        alternatives.retain(|alternative| !is_null_schema(alternative));
        if alternatives.len() == before {
            continue;
        }
        let left = (alternatives.len() == 1).then(|| alternatives.remove(0));
        map.insert("nullable".into(), true.into());
        if let Some(only) = left {
            map.shift_remove(key);
            push_all_of(map, only);
        }
    }
}

fn is_null_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_mapping() else {
        return false;
    };
    let null_type = match map.get("type") {
        Some(Value::Sequence(types)) => types.len() == 1 && types[0] == "null",
        Some(single) => single == "null",
        None => false,
    };
    null_type && map.keys().all(|key| key == "type" || is_annotation(key))
}

/// `const: v` -> `enum: [v]`. A string constant also gets `type: string` when it has no type,
/// so that generators make a one-variant string enum of it rather than an untyped value.
fn const_to_enum(map: &mut Mapping) {
    let Some(value) = map.shift_remove("const") else {
        return;
    };
    if value.is_string() && !map.contains_key("type") {
        map.insert("type".into(), "string".into());
    }
    map.insert("enum".into(), Value::Sequence(vec![value]));
}

/// 3.1 numeric `exclusiveMinimum: n` -> 3.0 `minimum: n, exclusiveMinimum: true` (same for the
/// maximum). If an inclusive bound is there too, the tighter of the two is kept.
fn numeric_exclusive_bound(
    map: &mut Mapping,
    exclusive: &str,
    inclusive: &str,
    inclusive_is_tighter: fn(f64, f64) -> bool,
) {
    let Some(Value::Number(limit)) = map.get(exclusive).cloned() else {
        return;
    };
    match (map.get(inclusive).and_then(Value::as_f64), limit.as_f64()) {
        (Some(current), Some(limit)) if inclusive_is_tighter(current, limit) => {
            map.shift_remove(exclusive);
        }
        _ => {
            map.insert(inclusive.into(), Value::Number(limit));
            map.insert(exclusive.into(), true.into());
        }
    }
}

/// Schema `examples: [a, ...]` (3.1) -> `example: a` (3.0 has one example per schema).
fn examples_to_example(map: &mut Mapping) {
    let Some(Value::Sequence(examples)) = map.shift_remove("examples") else {
        return;
    };
    if let (false, Some(first)) = (map.contains_key("example"), examples.into_iter().next()) {
        map.insert("example".into(), first);
    }
}

/// `contentEncoding: base64` -> `format: byte`; `contentMediaType: application/octet-stream`
/// -> `format: binary` (3.0's spellings); another media type is documentation only.
fn content_keywords_to_format(map: &mut Mapping) {
    let encoding = map.shift_remove("contentEncoding");
    let media_type = map.shift_remove("contentMediaType");
    let format = if encoding.as_ref().is_some_and(|e| e == "base64") {
        "byte"
    } else if encoding.is_none() && media_type.is_some_and(|m| m == "application/octet-stream") {
        "binary"
    } else {
        return;
    };
    if !map.contains_key("format") {
        map.insert("format".into(), format.into());
    }
}

/// 3.0 has no tuples: `prefixItems` becomes `items: {anyOf: [each position, the rest]}`, which
/// accepts every valid tuple (and more); `items: false` becomes `maxItems`.
fn prefix_items_to_items(map: &mut Mapping) {
    let Some(Value::Sequence(mut alternatives)) = map.shift_remove("prefixItems") else {
        return;
    };
    let positions = alternatives.len() as u64;
    match map.shift_remove("items") {
        Some(Value::Bool(false)) => {
            if !map.contains_key("maxItems") {
                map.insert("maxItems".into(), positions.into());
            }
        }
        None | Some(Value::Bool(true)) => alternatives.push(empty()),
        Some(rest) => alternatives.push(rest),
    }
    map.insert(
        "items".into(),
        mapping([("anyOf", Value::Sequence(alternatives))]),
    );
}

/// For progenitor (valid 3.0, but typify 0.8 panics on it, "invalid (or unexpected) schema"): a
/// scalar's anyOf/oneOf whose alternatives only narrow its values, e.g. a price `type: number,
/// anyOf: [{const: 0}, {minimum: 1e-6, maximum: 1e12}]`. Dropping them loosens the schema to
/// the plain scalar (`f64`); the server still checks the range.
fn scalar_range_alternatives_dropped(map: &mut Mapping) {
    let scalar = map
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| matches!(t, "number" | "integer" | "string" | "boolean"));
    if !scalar {
        return;
    }
    let parent_type = map.get("type").cloned();
    for key in ["anyOf", "oneOf"] {
        let narrows_only = map
            .get(key)
            .and_then(Value::as_sequence)
            .is_some_and(|alternatives| {
                alternatives.iter().all(|alternative| {
                    alternative.as_mapping().is_some_and(|a| {
                        !a.contains_key("$ref")
                            && a.get("type")
                                .is_none_or(|t| Some(t) == parent_type.as_ref())
                    })
                })
            });
        if narrows_only {
            map.shift_remove(key);
        }
    }
}

/// For progenitor: an anyOf/oneOf with an alternative for each JSON type (null included, as
/// `nullable`) is any JSON value, spelled `{}`, which progenitor types as `serde_json::Value`.
/// Kept as it is, typify 0.8 emits two types for such a named schema (DocumentValue): a newtype
/// over `Option<DocumentValue>` and the enum, under the same name (E0428). Loosens the schema.
fn any_json_alternatives_to_any(map: &mut Mapping) {
    const EVERY_JSON_TYPE: [&str; 5] = ["boolean", "string", "number", "array", "object"];
    for key in ["anyOf", "oneOf"] {
        let Some(alternatives) = map.get(key).and_then(Value::as_sequence) else {
            continue;
        };
        let types: Vec<&str> = alternatives
            .iter()
            .filter_map(|alternative| alternative.get("type")?.as_str())
            .collect();
        let nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
        if nullable && EVERY_JSON_TYPE.iter().all(|t| types.contains(t)) {
            map.shift_remove(key);
            map.shift_remove("nullable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 2: what progenitor 0.15 refuses in valid 3.0
// ---------------------------------------------------------------------------------------------

fn adapt_for_progenitor(doc: &mut Value) {
    let Some(root) = doc.as_mapping_mut() else {
        return;
    };
    if let Some(components) = root.get_mut("components").and_then(Value::as_mapping_mut) {
        if let Some(problem) = components
            .get_mut("schemas")
            .and_then(|schemas| schemas.get_mut("Problem"))
            .and_then(Value::as_mapping_mut)
        {
            loosen_problem(problem);
        }
        for (section, adapt) in [
            ("responses", json_suffix_as_json as fn(&mut Value)),
            ("requestBodies", one_request_content_type),
        ] {
            if let Some(entries) = components.get_mut(section).and_then(Value::as_mapping_mut) {
                entries.iter_mut().for_each(|(_, entry)| adapt(entry));
            }
        }
    }
    // The shared responses, renamed above: operations' `$ref`s to them are judged on these.
    let components = root.get("components").cloned().unwrap_or_default();
    let Some(paths) = root.get_mut("paths").and_then(Value::as_mapping_mut) else {
        return;
    };
    for (_, item) in paths.iter_mut() {
        for (method, operation) in item.as_mapping_mut().into_iter().flatten() {
            let is_operation = matches!(
                method.as_str(),
                Some("get" | "put" | "post" | "delete" | "options" | "head" | "patch" | "trace")
            );
            if let (true, Some(operation)) = (is_operation, operation.as_mapping_mut()) {
                adapt_operation(operation, &components);
            }
        }
    }
}

/// For the client, a refusal's body is read as a `Problem` whatever its members: API Gateway's own
/// refusals (`{"message": "Unauthorized"}` on a 401, 403, 429 or 5xx before any function runs) are
/// no problem+json, and a client that could not read them would report a refusal as a broken
/// answer. Loosens only: every member optional, others allowed.
fn loosen_problem(problem: &mut Mapping) {
    problem.remove("required");
    problem.remove("additionalProperties");
}

fn adapt_operation(operation: &mut Mapping, components: &Value) {
    if let Some(body) = operation.get_mut("requestBody") {
        one_request_content_type(body);
    }
    let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_mapping_mut)
    else {
        return;
    };
    responses
        .iter_mut()
        .for_each(|(_, response)| json_suffix_as_json(response));
    // progenitor asserts that the success responses (2xx and default) share one body type, and
    // the error responses another (`assert!(response_types.len() <= 1)`: a build.rs panic).
    one_body_kind(responses, components, is_success);
    one_body_kind(responses, components, |code| !is_success(code));
}

fn is_success(code: &str) -> bool {
    code.starts_with('2') || code == "default"
}

/// progenitor types a response body only when it is `application/json`; other content comes back
/// as a byte stream. The errors here are `application/problem+json`: read as JSON, they surface as
/// `Error::ErrorResponse(ResponseValue<types::Problem>)` instead of bytes to decode. So a
/// `<type>/<subtype>+json` body of a response without an `application/json` one is renamed.
fn json_suffix_as_json(response: &mut Value) {
    let Some(content) = response.get_mut("content").and_then(Value::as_mapping_mut) else {
        return;
    };
    if content.contains_key("application/json") {
        return;
    }
    let is_json_suffixed = |key: &&Value| {
        key.as_str()
            .and_then(|k| k.split(';').next())
            .is_some_and(|essence| essence.trim().ends_with("+json"))
    };
    if let Some(key) = content.keys().find(is_json_suffixed).cloned() {
        let media = content.shift_remove(&key).unwrap_or_default();
        content.insert("application/json".into(), media);
    }
}

/// progenitor panics (`todo!("more media types than expected")`) on a request body with more
/// than one content type: `application/json` is kept if there is one, else the first.
fn one_request_content_type(body: &mut Value) {
    let Some(content) = body.get_mut("content").and_then(Value::as_mapping_mut) else {
        return;
    };
    if content.len() <= 1 {
        return;
    }
    let keep = if content.contains_key("application/json") {
        Value::from("application/json")
    } else {
        content.keys().next().cloned().unwrap_or_default()
    };
    content.retain(|key, _| *key == keep);
}

/// What progenitor makes of a response body: nothing, raw bytes, or a type (by its schema).
#[derive(Clone, PartialEq)]
enum BodyKind {
    None,
    Raw,
    Json(Value),
}

fn body_kind(response: &Value, components: &Value) -> BodyKind {
    let shared = ref_of(response)
        .and_then(|r| r.strip_prefix("#/components/responses/"))
        .and_then(|name| components.get("responses")?.get(name));
    let content = shared
        .unwrap_or(response)
        .get("content")
        .and_then(Value::as_mapping);
    match content {
        None => BodyKind::None,
        Some(content) if content.is_empty() => BodyKind::None,
        Some(content) => match content.get("application/json") {
            Some(media) => BodyKind::Json(media.get("schema").cloned().unwrap_or_default()),
            None => BodyKind::Raw,
        },
    }
}

/// Among the responses `in_group` selects, keeps those of the most common body kind (on a tie,
/// the kind of the lowest status) and removes the others from the operation: the client answers
/// them with `Error::UnexpectedResponse(reqwest::Response)`, status and body intact, rather than
/// decoding them as a type they do not have.
fn one_body_kind(responses: &mut Mapping, components: &Value, in_group: fn(&str) -> bool) {
    let mut group: Vec<(String, BodyKind)> = responses
        .iter()
        .map(|(code, response)| (code_string(code), response))
        .filter(|(code, _)| in_group(code))
        .map(|(code, response)| (code, body_kind(response, components)))
        .collect();
    group.sort_by(|a, b| a.0.cmp(&b.0));
    let count = |kind: &BodyKind| group.iter().filter(|(_, k)| k == kind).count();
    let mut kept: Option<&BodyKind> = None;
    for (_, kind) in &group {
        if kept.is_none_or(|best| count(kind) > count(best)) {
            kept = Some(kind);
        }
    }
    let Some(kept) = kept.cloned() else {
        return;
    };
    responses.retain(|code, response| {
        !in_group(&code_string(code)) || body_kind(response, components) == kept
    });
}

/// Status codes are strings when quoted (`'200'`), numbers otherwise (`200`).
fn code_string(code: &Value) -> String {
    match code {
        Value::Number(n) => n.to_string(),
        other => other.as_str().unwrap_or_default().to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn is_annotation(key: &Value) -> bool {
    ANNOTATIONS.iter().any(|annotation| key == *annotation)
}

fn ref_of(node: &Value) -> Option<&str> {
    node.get("$ref").and_then(Value::as_str)
}

fn push_all_of(map: &mut Mapping, schema: Value) {
    match map.get_mut("allOf") {
        Some(Value::Sequence(all_of)) => all_of.push(schema),
        _ => {
            map.insert("allOf".into(), Value::Sequence(vec![schema]));
        }
    }
}

fn mapping<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Mapping(
        entries
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
    )
}

fn empty() -> Value {
    Value::Mapping(Mapping::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_schema_is_read_whatever_its_members() {
        let mut doc: Value = serde_yaml::from_str(
            "openapi: 3.1.0\npaths: {}\ncomponents:\n  schemas:\n    Problem:\n      type: object\n      required: [title]\n      additionalProperties: false\n      properties: {title: {type: string}}\n",
        )
        .unwrap();
        doc = to_openapi_30(doc).unwrap();
        let problem = &doc["components"]["schemas"]["Problem"];
        assert!(problem.get("required").is_none() && problem.get("additionalProperties").is_none());
        assert_eq!(problem["properties"]["title"]["type"], "string");
    }

    fn yaml(text: &str) -> Value {
        serde_yaml::from_str(text).unwrap()
    }

    fn convert(text: &str) -> Value {
        to_openapi_30(yaml(text)).unwrap()
    }

    /// `schema` (flow YAML) converted as `components.schemas.S` of a 3.1 document.
    fn schema_30(schema: &str) -> Value {
        let doc = convert(&format!(
            "openapi: 3.1.0\ncomponents: {{schemas: {{S: {schema}}}}}"
        ));
        doc["components"]["schemas"]["S"].clone()
    }

    #[test]
    fn version_becomes_303_and_other_versions_are_refused() {
        assert_eq!(
            convert("openapi: 3.1.0\npaths: {}"),
            yaml("openapi: 3.0.3\npaths: {}")
        );
        assert!(matches!(
            to_openapi_30(yaml("openapi: 3.0.3")),
            Err(Openapi30Error::NotOpenapi31(v)) if v == "3.0.3"
        ));
        assert!(matches!(
            to_openapi_30(yaml("[]")),
            Err(Openapi30Error::NotAMapping)
        ));
    }

    #[test]
    fn root_fields_without_30_equivalent_are_dropped() {
        assert_eq!(
            convert(
                "openapi: 3.1.1\njsonSchemaDialect: x\nwebhooks: {}\n\
                 info: {title: t, version: '1', summary: s, license: {name: MIT, identifier: MIT}}"
            ),
            yaml("openapi: 3.0.3\ninfo: {title: t, version: '1', license: {name: MIT}}")
        );
    }

    #[test]
    fn path_item_refs_are_inlined() {
        assert_eq!(
            convert(
                "openapi: 3.1.0\npaths: {/a: {$ref: '#/components/pathItems/A'}}\n\
                 components: {pathItems: {A: {get: {operationId: a}}}}"
            ),
            yaml("openapi: 3.0.3\npaths: {/a: {get: {operationId: a}}}\ncomponents: {}")
        );
    }

    #[test]
    fn type_with_null_becomes_nullable() {
        assert_eq!(
            schema_30("{type: [string, 'null'], maxLength: 4}"),
            yaml("{type: string, maxLength: 4, nullable: true}")
        );
        assert_eq!(
            schema_30("{type: 'null'}"),
            yaml("{enum: [null], nullable: true}")
        );
        assert_eq!(
            schema_30("{type: [string, integer]}"),
            yaml("{anyOf: [{type: string}, {type: integer}]}")
        );
    }

    #[test]
    fn null_alternative_becomes_nullable() {
        assert_eq!(
            schema_30("{anyOf: [{type: 'null'}, {type: boolean}, {type: string}]}"),
            yaml("{anyOf: [{type: boolean}, {type: string}], nullable: true}")
        );
        assert_eq!(
            schema_30("{oneOf: [{$ref: '#/components/schemas/T'}, {type: 'null'}]}"),
            yaml("{allOf: [{$ref: '#/components/schemas/T'}], nullable: true}")
        );
    }

    #[test]
    fn const_becomes_enum() {
        assert_eq!(
            schema_30("{const: custom}"),
            yaml("{type: string, enum: [custom]}")
        );
        assert_eq!(
            schema_30("{type: number, const: 0}"),
            yaml("{type: number, enum: [0]}")
        );
    }

    #[test]
    fn numeric_exclusive_bounds_become_boolean_flags() {
        assert_eq!(
            schema_30("{type: number, exclusiveMinimum: 0, exclusiveMaximum: 9.99e+125}"),
            yaml(
                "{type: number, minimum: 0, exclusiveMinimum: true, \
                 maximum: 9.99e+125, exclusiveMaximum: true}"
            )
        );
        // With both kinds of bound, the tighter one is kept.
        assert_eq!(
            schema_30("{type: integer, minimum: 5, exclusiveMinimum: 0}"),
            yaml("{type: integer, minimum: 5}")
        );
        assert_eq!(
            schema_30("{type: integer, maximum: 9, exclusiveMaximum: 9}"),
            yaml("{type: integer, maximum: 9, exclusiveMaximum: true}")
        );
        // Already 3.0 (boolean): untouched.
        assert_eq!(
            schema_30("{type: integer, minimum: 0, exclusiveMinimum: true}"),
            yaml("{type: integer, minimum: 0, exclusiveMinimum: true}")
        );
    }

    #[test]
    fn schema_examples_become_one_example_but_parameter_examples_stay() {
        assert_eq!(
            schema_30("{type: string, examples: [eng, ops]}"),
            yaml("{type: string, example: eng}")
        );
        let parameter = "{name: id, in: path, required: true, \
                         schema: {type: string}, examples: {seeded: {value: acme}}}";
        let doc = convert(&format!(
            "openapi: 3.1.0\ncomponents: {{parameters: {{P: {parameter}}}}}"
        ));
        assert_eq!(doc["components"]["parameters"]["P"], yaml(parameter));
    }

    #[test]
    fn ref_siblings() {
        // Annotations beside a schema $ref are dropped (3.0 ignores siblings of $ref anyway)...
        assert_eq!(
            schema_30("{$ref: '#/components/schemas/T', description: d}"),
            yaml("{$ref: '#/components/schemas/T'}")
        );
        // ...constraints are kept, through allOf.
        assert_eq!(
            schema_30("{$ref: '#/components/schemas/T', maxItems: 2}"),
            yaml("{maxItems: 2, allOf: [{$ref: '#/components/schemas/T'}]}")
        );
        // A Reference Object outside schemas keeps its $ref only.
        let doc = convert(
            "openapi: 3.1.0\npaths: {/a: {get: {responses: \
             {'409': {$ref: '#/components/responses/C', description: d}}}}}",
        );
        assert_eq!(
            doc["paths"]["/a"]["get"]["responses"]["409"],
            yaml("{$ref: '#/components/responses/C'}")
        );
    }

    #[test]
    fn keywords_without_30_equivalent() {
        assert_eq!(
            schema_30(
                "{type: object, propertyNames: {minLength: 1}, \
                 additionalProperties: {type: integer}}"
            ),
            yaml("{type: object, additionalProperties: {type: integer}}")
        );
        assert_eq!(
            schema_30("{type: string, contentEncoding: base64}"),
            yaml("{type: string, format: byte}")
        );
        assert_eq!(
            schema_30("{type: string, contentMediaType: application/octet-stream}"),
            yaml("{type: string, format: binary}")
        );
        assert_eq!(
            schema_30(
                "{type: array, prefixItems: [{type: string}, {type: integer}], items: false}"
            ),
            yaml("{type: array, maxItems: 2, items: {anyOf: [{type: string}, {type: integer}]}}")
        );
        assert_eq!(
            schema_30("{type: array, items: true}"),
            yaml("{type: array, items: {}}")
        );
        assert!(matches!(
            to_openapi_30(yaml("openapi: 3.1.0\ncomponents: {schemas: {S: {$defs: {}}}}")),
            Err(Openapi30Error::Unsupported { path, keyword: "$defs" })
                if path == "#/components/schemas/S"
        ));
    }

    #[test]
    fn rules_apply_at_any_depth_but_not_inside_extensions() {
        assert_eq!(
            schema_30(
                "{type: object, x-window: {exclusiveMinimum: 0}, properties: \
                 {a: {type: array, items: {anyOf: [{const: 0}, {type: 'null'}]}}}}"
            ),
            yaml(
                "{type: object, x-window: {exclusiveMinimum: 0}, properties: \
                 {a: {type: array, items: {allOf: [{enum: [0]}], nullable: true}}}}"
            )
        );
    }

    #[test]
    fn progenitor_scalar_ranges_and_any_json() {
        assert_eq!(
            schema_30("{type: number, anyOf: [{const: 0}, {minimum: 1.0e-6, maximum: 1.0e+12}]}"),
            yaml("{type: number}")
        );
        assert_eq!(
            schema_30(
                "{description: d, anyOf: [{type: 'null'}, {type: boolean}, {type: string}, \
                 {type: number, anyOf: [{const: 0}, {minimum: 1.0e-130}]}, \
                 {type: array, items: {$ref: '#/components/schemas/S'}}, \
                 {type: object, additionalProperties: {$ref: '#/components/schemas/S'}}]}"
            ),
            yaml("{description: d}")
        );
        // Not every type: kept.
        assert_eq!(
            schema_30("{anyOf: [{type: 'null'}, {type: string}, {type: integer}]}"),
            yaml("{anyOf: [{type: string}, {type: integer}], nullable: true}")
        );
    }

    /// A 3.1 document with one operation GET /a whose responses are `responses` (flow YAML) and a
    /// shared response Bad (problem+json), converted.
    fn operation_30(responses: &str) -> Value {
        convert(&format!(
            "openapi: 3.1.0\npaths: {{/a: {{get: {{responses: {responses}}}}}}}\n\
             components: {{responses: {{Bad: {{description: bad, content: \
             {{application/problem+json: {{schema: {{$ref: '#/components/schemas/Problem'}}}}}}}}}}}}"
        ))
    }

    #[test]
    fn problem_json_is_read_as_json() {
        let doc =
            operation_30("{'200': {description: ok}, '400': {$ref: '#/components/responses/Bad'}}");
        assert_eq!(
            doc["components"]["responses"]["Bad"]["content"],
            yaml("{application/json: {schema: {$ref: '#/components/schemas/Problem'}}}")
        );
    }

    #[test]
    fn responses_of_a_minority_body_kind_are_left_to_unexpected_response() {
        let doc = operation_30(
            "{'200': {description: a, content: {application/json: {schema: {type: string}}}}, \
             '202': {description: b, content: {application/json: {schema: {type: integer}}}}, \
             '204': {description: c}, \
             '400': {$ref: '#/components/responses/Bad'}, \
             '409': {description: d, content: {application/problem+json: \
                    {schema: {$ref: '#/components/schemas/Problem'}}}}, \
             '500': {description: e, content: {text/plain: {schema: {type: string}}}}}",
        );
        let responses = doc["paths"]["/a"]["get"]["responses"].as_mapping().unwrap();
        let codes: Vec<String> = responses.keys().map(code_string).collect();
        assert_eq!(codes, ["200", "400", "409"]);
    }

    #[test]
    fn request_body_keeps_one_content_type() {
        let doc = convert(
            "openapi: 3.1.0\npaths: {/a: {post: {responses: {}, requestBody: {content: \
             {text/plain: {schema: {type: string}}, application/json: {schema: {type: object}}}}}}}",
        );
        assert_eq!(
            doc["paths"]["/a"]["post"]["requestBody"]["content"],
            yaml("{application/json: {schema: {type: object}}}")
        );
    }
}

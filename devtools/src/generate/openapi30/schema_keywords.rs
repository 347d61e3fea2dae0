//! Pass 1's rules for one schema: each rewrites a 3.1 keyword to its 3.0 spelling (or, for the last
//! two, a shape of valid 3.0 that progenitor refuses), in the order pass 1's schema walk
//! (`downgrade.rs`) applies them.

use serde_yaml::{Mapping, Value};

use super::{empty, mapping};

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

/// A 3.1 `$ref` may have siblings (3.0 ignores them). Only annotations: the `$ref` alone means
/// the same. Constraints: the 3.0 idiom `allOf: [{$ref}]` keeps them.
pub(super) fn ref_with_siblings(map: &mut Mapping) {
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
pub(super) fn type_array_to_nullable(map: &mut Mapping) {
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
pub(super) fn null_alternatives_to_nullable(map: &mut Mapping) {
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
pub(super) fn const_to_enum(map: &mut Mapping) {
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
pub(super) fn numeric_exclusive_bound(
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
pub(super) fn examples_to_example(map: &mut Mapping) {
    let Some(Value::Sequence(examples)) = map.shift_remove("examples") else {
        return;
    };
    if let (false, Some(first)) = (map.contains_key("example"), examples.into_iter().next()) {
        map.insert("example".into(), first);
    }
}

/// `contentEncoding: base64` -> `format: byte`; `contentMediaType: application/octet-stream`
/// -> `format: binary` (3.0's spellings); another media type is documentation only.
pub(super) fn content_keywords_to_format(map: &mut Mapping) {
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
pub(super) fn prefix_items_to_items(map: &mut Mapping) {
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
pub(super) fn scalar_range_alternatives_dropped(map: &mut Mapping) {
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
pub(super) fn any_json_alternatives_to_any(map: &mut Mapping) {
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

fn is_annotation(key: &Value) -> bool {
    ANNOTATIONS.iter().any(|annotation| key == *annotation)
}

fn push_all_of(map: &mut Mapping, schema: Value) {
    match map.get_mut("allOf") {
        Some(Value::Sequence(all_of)) => all_of.push(schema),
        _ => {
            map.insert("allOf".into(), Value::Sequence(vec![schema]));
        }
    }
}

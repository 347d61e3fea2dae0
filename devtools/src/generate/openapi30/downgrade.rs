//! Pass 1: 3.1 -> 3.0.3. The walk that finds every schema of the document, and what it does with
//! each; `schema_keywords.rs` rewrites their keywords one by one.

use serde_yaml::{Mapping, Value};

use super::schema_keywords::{
    any_json_alternatives_to_any, const_to_enum, content_keywords_to_format, examples_to_example,
    null_alternatives_to_nullable, numeric_exclusive_bound, prefix_items_to_items,
    ref_with_siblings, scalar_range_alternatives_dropped, type_array_to_nullable,
};
use super::{empty, mapping, ref_of, Openapi30Error};

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

pub(super) fn downgrade(doc: &mut Value) -> Result<(), Openapi30Error> {
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

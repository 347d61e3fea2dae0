//! Pass 2: what progenitor 0.15 refuses in valid 3.0.

use serde_yaml::{Mapping, Value};

use super::ref_of;

pub(super) fn adapt_for_progenitor(doc: &mut Value) {
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
pub(super) fn code_string(code: &Value) -> String {
    match code {
        Value::Number(n) => n.to_string(),
        other => other.as_str().unwrap_or_default().to_owned(),
    }
}

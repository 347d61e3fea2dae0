//! Request parsing and response building shared by every handler.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde::Serialize;

use crate::identity::ids::{EntityId, SessionId, TenantId};
use crate::service::error::ApiError;

/// The API's cap on a request document. DynamoDB's item limit is 400 KB; we keep well below it.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
pub const DEFAULT_LIMIT: u32 = 25;
pub const MAX_LIMIT: u32 = 100;

/// A path parameter, as API Gateway (or cargo lambda's router) filled it.
pub fn path_param(req: &Request, name: &str) -> Result<String, ApiError> {
    req.path_parameters_ref()
        .and_then(|p| p.first(name))
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request(name, format!("path parameter {name} is missing")))
}

pub fn path_entity_id(req: &Request, name: &str) -> Result<EntityId, ApiError> {
    let raw = path_param(req, name)?;
    EntityId::parse(&raw).map_err(|e| ApiError::bad_request(name, format!("{name} {e}")))
}

/// The `{tenantId}` of an operator route's path.
pub fn path_tenant_id(req: &Request) -> Result<TenantId, ApiError> {
    let raw = path_param(req, "tenantId")?;
    TenantId::parse(&raw).map_err(|e| ApiError::bad_request("tenantId", format!("tenantId {e}")))
}

pub fn path_session_id(req: &Request, name: &str) -> Result<SessionId, ApiError> {
    let raw = path_param(req, name)?;
    SessionId::parse(&raw).map_err(|e| ApiError::bad_request(name, format!("{name} {e}")))
}

/// `?name=`'s value, `None` when the query has none; 400 when it is given more than once. API
/// Gateway's single-value view of a repeated parameter holds its last value and `lambda_http` hands
/// over the first, so a cache key, a WAF rule or a log could read one and the handler the other:
/// neither is picked.
pub fn query_param(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    let values = req
        .query_string_parameters_ref()
        .and_then(|q| q.all(name))
        .unwrap_or_default();
    match values.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).to_owned())),
        _ => Err(ApiError::bad_request(
            name,
            format!("query parameter {name} is given more than once"),
        )),
    }
}

/// `?limit=`: 1 to 100, default 25.
pub fn page_limit(req: &Request) -> Result<u32, ApiError> {
    page_limit_up_to(req, MAX_LIMIT)
}

/// `?limit=` from 1 to `max` (default [`DEFAULT_LIMIT`]), shrunk to what the request's capacity
/// budget pays: a page under a nearly empty quota bucket is short, with a cursor.
pub fn page_limit_up_to(req: &Request, max: u32) -> Result<u32, ApiError> {
    requested_limit(req, max).map(crate::store::client::meter::page_limit)
}

/// The page size a request asks for (its `?limit=`, else the default), before any budget.
pub fn requested_limit(req: &Request, max: u32) -> Result<u32, ApiError> {
    match query_param(req, "limit")? {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::bad_request(
                "limit",
                format!("limit must be a whole number from 1 to {max}"),
            )),
        },
    }
}

/// The largest page of a sharded listing (`?limit=` up to this): whole-collection readers walk in
/// pages this large, so a walk costs about one Query per shard.
pub const MAX_SHARDED_LIMIT: u32 = 1000;

/// How a sharded listing is read: `?order=id` (the default) merges every shard into id order;
/// `?order=unordered` walks shard after shard, the cheap way through a whole collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    ById,
    Unordered,
}

pub fn list_order(req: &Request) -> Result<ListOrder, ApiError> {
    match query_param(req, "order")?.as_deref() {
        None | Some("id") => Ok(ListOrder::ById),
        Some("unordered") => Ok(ListOrder::Unordered),
        Some(_) => Err(ApiError::bad_request(
            "order",
            "order must be id (the default) or unordered",
        )),
    }
}

/// The JSON body as `T`. Unknown fields are refused by the input types (`deny_unknown_fields`).
/// Errors name the field at fault; a body over 64 KB answers 413.
pub fn json_body<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    json_body_up_to(req, MAX_BODY_BYTES)
}

/// The bytes `body` takes in the Lambda event that carries it: a JSON string, where a quote, a
/// backslash and a newline, tab, carriage return, backspace or form feed take two, another control
/// character six (`\u00XX`). Lambda's limit on a synchronous event (6 MB) counts these, not the
/// body's own bytes.
pub fn bytes_in_event(body: &[u8]) -> usize {
    body.iter()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\t' | b'\r' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// The bytes a request's `body` takes in its Lambda event: text as a JSON string
/// ([`bytes_in_event`]); a binary body (API Gateway's `isBase64Encoded`, which `lambda_http`
/// decodes) in base64, four bytes for every three.
pub fn request_bytes_in_event(body: &Body) -> usize {
    match body {
        Body::Text(text) => bytes_in_event(text.as_bytes()),
        Body::Binary(bytes) => bytes.len().div_ceil(3) * 4,
        _ => 0,
    }
}

/// [`json_body`], for a route that takes bodies of up to `max_bytes`.
pub fn json_body_up_to<T: DeserializeOwned>(
    req: &Request,
    max_bytes: usize,
) -> Result<T, ApiError> {
    let bytes: &[u8] = match req.body() {
        Body::Empty => b"",
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => b"",
    };
    if bytes.len() > max_bytes {
        return Err(ApiError::PayloadTooLarge(format!(
            "The request body is {} bytes; the limit is {max_bytes}.",
            bytes.len()
        )));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest {
            detail: "A JSON request body is required.".into(),
            field: None,
        });
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        if matches!(
            e.inner().classify(),
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
        ) {
            // serde_json also reports a value of the wrong type for an enum (`{"tier": 5}`) as a
            // syntax error. When the body is valid JSON, deserializing it again from its value
            // names the field and the type expected.
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
                return match serde_path_to_error::deserialize::<_, T>(value) {
                    Err(e) => wrong_shape(e),
                    Ok(_) => ApiError::BadRequest {
                        detail: format!("Invalid request body: {}", e.inner()),
                        field: Some(e.path().to_string()),
                    },
                };
            }
            // Not JSON at all: no field to name, but say where parsing stopped.
            let inner = e.inner();
            return ApiError::BadRequest {
                detail: format!(
                    "The request body is not valid JSON: parsing stopped at line {}, column {} ({}).",
                    inner.line(),
                    inner.column(),
                    inner
                ),
                field: None,
            };
        }
        wrong_shape(e)
    })
}

/// A 400 for valid JSON of the wrong shape: the field (by its path) and what it should be.
fn wrong_shape(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    // serde_json's message for an enum given another type names serde's own model ("string or
    // map"); a unit variant is written as a string.
    let message = e
        .inner()
        .to_string()
        .replace("expected string or map", "expected a string");
    // serde reports missing and unknown fields at the parent's path; name the field itself.
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|lead| {
            let rest = message.split_once(lead)?.1;
            Some(rest.split_once('`')?.0.to_owned())
        });
    let field = match (path.as_str(), named) {
        (".", named) => named,
        (_, Some(named)) if !path.ends_with(named.as_str()) => Some(format!("{path}.{named}")),
        _ => Some(path),
    };
    ApiError::BadRequest {
        detail: format!("Invalid request body: {message}"),
        field,
    }
}

pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let body = serde_json::to_string(value).unwrap_or_default();
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::Text(body))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

pub fn no_content() -> Response<Body> {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

/// A bounded free-text field (names, SKUs, emails as typed): 1 to 256 characters, not blank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl<'de> serde::Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() || s.chars().count() > 256 {
            return Err(serde::de::Error::custom("must be 1 to 256 characters"));
        }
        Ok(Self(s))
    }
}

/// `{items, nextCursor}`: the body of every list route.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageBody<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// The largest list response body, counted as it travels inside the Lambda response (quotes and
/// backslashes escaped once more): Lambda refuses responses over 6 MB, so a page stops before this.
pub const MAX_PAGE_BYTES: usize = 5 * 1024 * 1024;

/// What a page needs to hand out a cursor of its own when it stops early for size.
pub struct PageCursor<'a> {
    pub keys: &'a crate::identity::cursor::CursorKeys,
    pub tenant: &'a crate::identity::ids::TenantId,
    pub route: &'a str,
}

/// 200 with `{items, nextCursor}`: one page of a listing, each item turned into its view. A page whose
/// body would pass [`MAX_PAGE_BYTES`] stops before the item that would pass it, with a cursor after
/// the last item it holds (the listing's own cursor shape: that item's `PK` and `SK`), so large items
/// make pages shorter, never a failed response.
pub fn page_response<V: Serialize>(
    items: Vec<crate::store::client::query::Item>,
    next_cursor: Option<String>,
    view: impl Fn(crate::store::client::query::Item) -> Result<V, ApiError>,
    cursor: PageCursor<'_>,
) -> Result<Response<Body>, ApiError> {
    use crate::identity::keys::{Key, PK, SK};
    let mut parts: Vec<String> = Vec::with_capacity(items.len());
    let mut bytes = 64 + next_cursor.as_deref().map_or(0, str::len);
    let mut last_key: Option<Key> = None;
    let mut next_cursor = next_cursor;
    for item in items {
        let key: Key = [PK, SK]
            .into_iter()
            .filter_map(|k| item.get(k).map(|v| (k.to_owned(), v.clone())))
            .collect();
        let part = serde_json::to_string(&view(item)?)
            .map_err(|e| ApiError::Internal(format!("serialize page item: {e}")))?;
        // The body travels in Lambda's response as a JSON string (`bytes_in_event`).
        let size = bytes_in_event(part.as_bytes()) + 1;
        if let Some(last) = last_key.as_ref().filter(|_| bytes + size > MAX_PAGE_BYTES) {
            next_cursor = Some(crate::identity::cursor::encode(
                cursor.keys,
                cursor.tenant,
                cursor.route,
                last,
            ));
            break;
        }
        bytes += size;
        parts.push(part);
        last_key = Some(key);
    }
    if next_cursor.is_some() {
        crate::store::client::meter::page_returned(parts.len());
    }
    let body = format!(
        "{{\"items\":[{}],\"nextCursor\":{}}}",
        parts.join(","),
        serde_json::to_string(&next_cursor).unwrap_or_else(|_| "null".into())
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::Text(body))
        .map_err(|e| ApiError::Internal(format!("build response: {e}")))
}

/// 200 when `replaced` an existing item, 201 when the item is new, with `body`.
pub fn put_response<V: Serialize>(replaced: bool, body: &V) -> Response<Body> {
    let status = if replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    json_response(status, body)
}

/// A whole number as JSON Schema counts one: `3` or `3.0` (not `3.5`), within `T`'s range. serde's own
/// integers refuse `3.0`, but the OpenAPI contract (`type: integer`) admits it.
pub fn whole_number<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error;
    let value = serde_json::Number::deserialize(deserializer)?;
    let whole = match (value.as_u64(), value.as_f64()) {
        (Some(n), _) => Some(n),
        (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => Some(f as u64),
        _ => None,
    };
    whole
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| D::Error::custom(format!("expected a whole number in range, found {value}")))
}

/// [`whole_number`] for an optional field.
pub fn optional_whole_number<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    #[derive(serde::Deserialize)]
    struct Wrapped<T: TryFrom<u64>>(#[serde(deserialize_with = "whole_number")] T);
    Option::<Wrapped<T>>::deserialize(deserializer).map(|w| w.map(|Wrapped(v)| v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bodys_bytes_in_the_event_are_its_json_string_escapes() {
        // GIVEN every ASCII byte, and a pretty-printed JSON body
        let ascii: String = (0u8..=0x7f).map(char::from).collect();
        let pretty = "{\n\t\"a\": \"b\\\\c\"\r\n}";
        for body in [ascii.as_str(), pretty] {
            // WHEN it is measured
            // THEN it takes what JSON's string escapes make of it (a newline two, not six)
            let escaped = serde_json::to_string(body).unwrap().len() - 2;
            assert_eq!(bytes_in_event(body.as_bytes()), escaped, "{body:?}");
        }
    }

    #[test]
    fn a_binary_request_body_is_measured_as_the_base64_its_event_carries() {
        // GIVEN the same quotes as text and as a binary body (API Gateway's base64 event)
        let quotes = "\"".repeat(300);
        // THEN text takes its escapes, binary its base64 (before the mend: the escapes of the
        // decoded bytes, refusing a binary body at a third of what its event takes)
        assert_eq!(request_bytes_in_event(&Body::Text(quotes.clone())), 600);
        assert_eq!(
            request_bytes_in_event(&Body::Binary(quotes.into_bytes())),
            400
        );
        assert_eq!(request_bytes_in_event(&Body::Binary(vec![0; 301])), 404);
        assert_eq!(request_bytes_in_event(&Body::Empty), 0);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Input {
        name: String,
    }

    fn parse(body: &str) -> ApiError {
        let req = Request::new(Body::Text(body.to_owned()));
        json_body::<Input>(&req).unwrap_err()
    }

    #[test]
    fn a_body_that_is_not_json_says_so_and_where_parsing_stopped() {
        // GIVEN a body cut off inside an object; WHEN it is parsed; THEN 400 saying it is not JSON
        let ApiError::BadRequest { detail, field } = parse("{\"name\": \"a\",\n  oops") else {
            panic!("400 expected");
        };
        assert!(detail.contains("not valid JSON"), "{detail}");
        assert!(detail.contains("line 2, column 3"), "{detail}");
        assert_eq!(field, None);
    }

    #[derive(Debug, serde::Deserialize)]
    struct Counted {
        #[serde(deserialize_with = "whole_number")]
        qty: u32,
        #[serde(default, deserialize_with = "optional_whole_number")]
        shards: Option<u32>,
    }

    #[test]
    fn whole_numbers_may_be_written_with_a_zero_fraction() {
        let ok: Counted = serde_json::from_str(r#"{"qty": 352172.0, "shards": 4.0}"#).unwrap();
        assert_eq!((ok.qty, ok.shards), (352172, Some(4)));
        let ok: Counted = serde_json::from_str(r#"{"qty": 3}"#).unwrap();
        assert_eq!((ok.qty, ok.shards), (3, None));
        for bad in [
            r#"{"qty": 3.5}"#,
            r#"{"qty": -1}"#,
            r#"{"qty": 4294967296}"#,
            r#"{"qty": "3"}"#,
        ] {
            assert!(serde_json::from_str::<Counted>(bad).is_err(), "{bad}");
        }
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Level {
        Low,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct WithEnum {
        level: Option<Level>,
        #[serde(default, deserialize_with = "optional_whole_number")]
        count: Option<u32>,
    }

    #[test]
    fn valid_json_with_an_enum_of_the_wrong_type_names_the_field_and_the_type() {
        // GIVEN valid JSON whose enum field holds a number, a boolean, or an object
        for (body, shown) in [
            (r#"{"level": 5}"#, "integer `5`"),
            (r#"{"level": true}"#, "boolean `true`"),
            (r#"{"level": [1]}"#, "sequence"),
        ] {
            let req = Request::new(Body::Text(body.to_owned()));
            // WHEN it is parsed
            let Err(ApiError::BadRequest { detail, field }) = json_body::<WithEnum>(&req) else {
                panic!("400 expected for {body}");
            };
            // THEN the answer names the field and the type expected, and does not call it invalid JSON
            assert_eq!(field.as_deref(), Some("level"), "{body}: {detail}");
            assert!(!detail.contains("not valid JSON"), "{body}: {detail}");
            assert!(detail.contains(shown), "{body}: {detail}");
            assert!(detail.contains("expected a string"), "{body}: {detail}");
        }
        // AND an unknown variant still lists the known ones; a number field still takes 3.0
        let req = Request::new(Body::Text(r#"{"level": "high"}"#.into()));
        let Err(ApiError::BadRequest { detail, .. }) = json_body::<WithEnum>(&req) else {
            panic!("400 expected");
        };
        assert!(detail.contains("`low`"), "{detail}");
        let req = Request::new(Body::Text(r#"{"level": "low", "count": 3.0}"#.into()));
        assert_eq!(json_body::<WithEnum>(&req).unwrap().count, Some(3));
    }

    #[test]
    fn a_json_body_of_the_wrong_shape_names_the_field() {
        let ApiError::BadRequest { field, .. } = parse("{\"name\": 5}") else {
            panic!("400 expected");
        };
        assert_eq!(field.as_deref(), Some("name"));
        let ApiError::BadRequest { field, .. } = parse("{\"name\": \"a\", \"x\": 1}") else {
            panic!("400 expected");
        };
        assert_eq!(field.as_deref(), Some("x"));
    }
}

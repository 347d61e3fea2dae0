//! Tooling for the local stack and the tests. The table is always created from `template.yaml`'s
//! `AWS::DynamoDB::Table` resource, so local tables cannot drift from what is deployed.

pub mod cli;
pub mod generate;
pub mod import;
pub mod plan;
pub mod routes;
pub mod scaffold;
pub mod usage_plan;

use std::path::Path;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use serde_yaml::Value;
use thiserror::Error;

/// A declaration file of the repo (`routes.yaml`, `template.yaml`) that cannot be used, with the
/// file's name.
#[derive(Debug, Error)]
pub enum DeclarationError {
    #[error("cannot read {0}: {1}")]
    Io(&'static str, #[source] std::io::Error),
    #[error("{0} is not valid YAML of its shape: {1}")]
    Yaml(&'static str, #[source] serde_yaml::Error),
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
}

const TEMPLATE: &str = "template.yaml";

/// The table as `template.yaml` defines it.
#[derive(Debug, Clone)]
pub struct TableDefinition {
    pub attributes: Vec<AttributeDefinition>,
    pub key_schema: Vec<KeySchemaElement>,
    pub gsis: Vec<GlobalSecondaryIndex>,
    pub billing: BillingMode,
    pub ttl_attribute: Option<String>,
    /// The stream's view type (`NEW_AND_OLD_IMAGES`), when the table has a stream.
    pub stream_view_type: Option<String>,
}

impl TableDefinition {
    /// The same table without its stream. DynamoDB Local slows every write about tenfold on a
    /// table with a stream (1,500 PutItems: 4 s without, 50 s with, on these machines), so local
    /// tables have one only where a test reads it (`tests/tests/lifecycle_events.rs`).
    pub fn without_stream(self) -> Self {
        Self {
            stream_view_type: None,
            ..self
        }
    }
}

fn shape(msg: &str) -> DeclarationError {
    DeclarationError::Invalid(TEMPLATE, msg.to_owned())
}

fn str_at<'a>(v: &'a Value, key: &str) -> Result<&'a str, DeclarationError> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| shape(&format!("{key} missing or not a string")))
}

fn parse_key_schema(v: &Value) -> Result<Vec<KeySchemaElement>, DeclarationError> {
    let keys = v
        .as_sequence()
        .ok_or_else(|| shape("KeySchema is not a list"))?;
    parse_attributes(keys, "KeyType", |name, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(KeyType::from(key_type))
            .build()
    })
}

/// Each `{AttributeName, <field>}` entry of `list`, built by `build(name, field's value)`.
fn parse_attributes<T, E: std::fmt::Display>(
    list: &[Value],
    field: &str,
    build: impl Fn(&str, &str) -> Result<T, E>,
) -> Result<Vec<T>, DeclarationError> {
    list.iter()
        .map(|a| {
            build(str_at(a, "AttributeName")?, str_at(a, field)?).map_err(|e| shape(&e.to_string()))
        })
        .collect()
}

/// The logical id of the one table of tenant items in the template.
pub const POOL_TABLE: &str = "Table";
/// The logical id of the key table (`shared::store::keys`): wrapped tenant keys, never items.
pub const KEY_TABLE: &str = "TenantKeysTable";

/// Reads the pool's table, the template's [`POOL_TABLE`], from the template at `path`.
pub fn table_from_template(path: &Path) -> Result<TableDefinition, DeclarationError> {
    table_resource(path, POOL_TABLE)
}

/// Reads the key table, the template's [`KEY_TABLE`], from the template at `path`.
pub fn key_table_from_template(path: &Path) -> Result<TableDefinition, DeclarationError> {
    table_resource(path, KEY_TABLE)
}

/// Reads the `AWS::DynamoDB::Table` resource `logical_id` of the template at `path`. The template
/// holds exactly two tables: the pool and the key table.
fn table_resource(path: &Path, logical_id: &str) -> Result<TableDefinition, DeclarationError> {
    let text = std::fs::read_to_string(path).map_err(|e| DeclarationError::Io(TEMPLATE, e))?;
    let doc: Value =
        serde_yaml::from_str(&text).map_err(|e| DeclarationError::Yaml(TEMPLATE, e))?;
    let resources = doc
        .get("Resources")
        .and_then(Value::as_mapping)
        .ok_or_else(|| shape("no Resources"))?;
    let tables: Vec<_> = resources
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some("AWS::DynamoDB::Table"))
        .collect();
    if tables.len() > 2 {
        return Err(shape(
            "more than two tables: pooltable is single-table (and its key table)",
        ));
    }
    let table = tables
        .iter()
        .find(|(name, _)| name.as_str() == Some(logical_id))
        .map(|(_, table)| *table)
        .ok_or_else(|| shape(&format!("no AWS::DynamoDB::Table {logical_id}")))?;
    let p = table
        .get("Properties")
        .ok_or_else(|| shape("table has no Properties"))?;
    let attributes = parse_attributes(
        p.get("AttributeDefinitions")
            .and_then(Value::as_sequence)
            .ok_or_else(|| shape("no AttributeDefinitions"))?,
        "AttributeType",
        |name, attribute_type| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::from(attribute_type))
                .build()
        },
    )?;
    let key_schema = parse_key_schema(p.get("KeySchema").ok_or_else(|| shape("no KeySchema"))?)?;
    let gsis = p
        .get("GlobalSecondaryIndexes")
        .and_then(Value::as_sequence)
        .map(|s| s.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|g| {
            let projection = g
                .get("Projection")
                .ok_or_else(|| shape("GSI without Projection"))?;
            GlobalSecondaryIndex::builder()
                .index_name(str_at(g, "IndexName")?)
                .set_key_schema(Some(parse_key_schema(
                    g.get("KeySchema")
                        .ok_or_else(|| shape("GSI without KeySchema"))?,
                )?))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(str_at(
                            projection,
                            "ProjectionType",
                        )?))
                        .build(),
                )
                .build()
                .map_err(|e| shape(&e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    let billing = BillingMode::from(str_at(p, "BillingMode")?);
    let ttl_attribute = p
        .get("TimeToLiveSpecification")
        .filter(|t| t.get("Enabled").and_then(Value::as_bool) == Some(true))
        .and_then(|t| t.get("AttributeName"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let stream_view_type = p
        .get("StreamSpecification")
        .and_then(|s| s.get("StreamViewType"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(TableDefinition {
        attributes,
        key_schema,
        gsis,
        billing,
        ttl_attribute,
        stream_view_type,
    })
}

/// Whether table `name` (active or being made) has `def`'s key schema, indexes (their names, keys
/// and projections) and stream, and its TTL on: `Ok(true)` when it does; `Ok(false)` when only the
/// TTL is off; an error naming the table otherwise.
async fn existing_table_matches(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    def: &TableDefinition,
) -> Result<bool, aws_sdk_dynamodb::Error> {
    use aws_sdk_dynamodb::types::{KeySchemaElement, Projection, TableStatus};
    /// An index as compared: its name, keys, projection type and non-key attributes (sorted).
    type IndexShape = (String, Vec<KeySchemaElement>, Option<String>, Vec<String>);
    fn shape(name: Option<&str>, keys: &[KeySchemaElement], p: Option<&Projection>) -> IndexShape {
        let mut non_key = p.map_or_else(Vec::new, |p| p.non_key_attributes().to_vec());
        non_key.sort();
        let kind = p
            .and_then(|p| p.projection_type())
            .map(|t| t.as_str().to_owned());
        (
            name.unwrap_or_default().to_owned(),
            keys.to_vec(),
            kind,
            non_key,
        )
    }
    let table = client.describe_table().table_name(name).send().await?.table;
    let indexes = |t: &aws_sdk_dynamodb::types::TableDescription| {
        let mut shapes: Vec<IndexShape> = t
            .global_secondary_indexes()
            .iter()
            .map(|g| shape(g.index_name(), g.key_schema(), g.projection()))
            .collect();
        shapes.sort_by(|a, b| a.0.cmp(&b.0));
        shapes
    };
    let mut wanted: Vec<IndexShape> = def
        .gsis
        .iter()
        .map(|g| shape(Some(g.index_name()), g.key_schema(), g.projection()))
        .collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    // The stream's view type, when one is on.
    let stream = |t: &aws_sdk_dynamodb::types::TableDescription| {
        t.stream_specification()
            .filter(|s| s.stream_enabled())
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str().to_owned())
    };
    // (A table being deleted answers ResourceInUseException too: it is not the one asked for.)
    let same = table.as_ref().is_some_and(|t| {
        matches!(
            t.table_status(),
            Some(TableStatus::Active | TableStatus::Creating)
        ) && t.key_schema() == def.key_schema.as_slice()
            && indexes(t) == wanted
            && stream(t) == def.stream_view_type
    });
    if !same {
        return Err(aws_sdk_dynamodb::Error::ResourceInUseException(
            aws_sdk_dynamodb::types::error::ResourceInUseException::builder()
                .message(format!(
                    "table {name} exists with other keys, indexes or stream than template.yaml's"
                ))
                .build(),
        ));
    }
    let ttl = client
        .describe_time_to_live()
        .table_name(name)
        .send()
        .await?;
    Ok(ttl
        .time_to_live_description()
        .and_then(|d| d.time_to_live_status())
        .is_some_and(|s| {
            matches!(
                s,
                aws_sdk_dynamodb::types::TimeToLiveStatus::Enabled
                    | aws_sdk_dynamodb::types::TimeToLiveStatus::Enabling
            )
        }))
}

/// The repository's `template.yaml`, wherever the caller runs from.
pub fn default_template_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml")
}

/// Creates table `name` from `def` with an admin client and waits until it is active. A table of
/// that name already there with `def`'s keys, indexes and stream is taken as made (a retried
/// attempt finds the one its first made), one with others refused.
pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    def: &TableDefinition,
) -> Result<(), aws_sdk_dynamodb::Error> {
    let stream = def
        .stream_view_type
        .as_deref()
        .map(|view| {
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(view))
                .build()
        })
        .transpose()
        .map_err(aws_sdk_dynamodb::Error::from)?;
    let created = client
        .create_table()
        .table_name(name)
        .set_attribute_definitions(Some(def.attributes.clone()))
        .set_key_schema(Some(def.key_schema.clone()))
        .set_global_secondary_indexes((!def.gsis.is_empty()).then(|| def.gsis.clone()))
        .billing_mode(def.billing.clone())
        .set_stream_specification(stream)
        .send()
        .await;
    let found = match created {
        Ok(_) => false,
        // An attempt that timed out after DynamoDB took it (a DynamoDB Local just started, on a
        // loaded machine) is retried by the SDK, which then finds the table the first one made.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            true
        }
        Err(e) => return Err(e.into()),
    };
    // A table found stands when it has the definition's keys and indexes.
    let ttl_on = found && existing_table_matches(client, name, def).await?;
    if let Some(attr) = def.ttl_attribute.as_ref().filter(|_| !ttl_on) {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attr)
                    .enabled(true)
                    .build()
                    .map_err(aws_sdk_dynamodb::Error::from)?,
            )
            .send()
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key schema as (attribute, key type) pairs.
    fn names(keys: &[KeySchemaElement]) -> Vec<(&str, &str)> {
        keys.iter()
            .map(|k| (k.attribute_name(), k.key_type().as_str()))
            .collect()
    }

    #[test]
    fn template_defines_the_table_and_its_inverted_gsi() {
        let def = table_from_template(&default_template_path()).unwrap();
        assert_eq!(names(&def.key_schema), [("PK", "HASH"), ("SK", "RANGE")]);
        for (gsi, name, keys, projection) in [
            (
                &def.gsis[0],
                "GSI1",
                [("SK", "HASH"), ("PK", "RANGE")],
                ProjectionType::All,
            ),
            (
                &def.gsis[1],
                shared::identity::keys::CATALOG_INDEX,
                [("catalog", "HASH"), ("PK", "RANGE")],
                ProjectionType::KeysOnly,
            ),
        ] {
            assert_eq!(gsi.index_name(), name);
            assert_eq!(names(gsi.key_schema()), keys);
            assert_eq!(
                gsi.projection().and_then(|p| p.projection_type()),
                Some(&projection)
            );
        }
        assert_eq!(def.billing, BillingMode::PayPerRequest);
        assert_eq!(def.ttl_attribute.as_deref(), Some("expiresAt"));
    }
}

//! `doc.requests` of routes.yaml: the DynamoDB requests a route's common case sends, by operation.

use serde::Deserialize;

/// The DynamoDB operations a route can send: what the request meter counts
/// (`shared::store::meter`), and DescribeTable (a restore checks its source table). Scan is not
/// among them: a tenant may never scan.
pub const OPERATIONS: [&str; 10] = [
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactGetItems",
    "TransactWriteItems",
    "DescribeTable",
];

/// How many requests of one operation a route's common case sends: `fixed`, plus `per_shard` for
/// each shard of the tenant's layout. Written `2`, `1 per shard` or `2 per shard + 26`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub per_shard: u32,
    pub fixed: u32,
}

impl Count {
    /// The count for a tenant of `shards` shards.
    pub fn for_shards(self, shards: u32) -> u32 {
        self.per_shard * shards + self.fixed
    }

    fn parse(value: &serde_yaml::Value) -> Option<Self> {
        let count = match value {
            serde_yaml::Value::Number(n) => Count {
                per_shard: 0,
                fixed: n.as_u64().and_then(|n| u32::try_from(n).ok())?,
            },
            serde_yaml::Value::String(s) => {
                let (per_shard, fixed) = match s.split_once(" per shard") {
                    Some((k, rest)) => (
                        k,
                        rest.strip_prefix(" + ")
                            .or(rest.is_empty().then_some("0"))?,
                    ),
                    None => ("0", s.as_str()),
                };
                Count {
                    per_shard: per_shard.parse().ok()?,
                    fixed: fixed.parse().ok()?,
                }
            }
            _ => return None,
        };
        (count.for_shards(1) > 0).then_some(count)
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.per_shard, self.fixed) {
            (0, n) => write!(f, "{n}"),
            (1, 0) => write!(f, "N"),
            (k, 0) => write!(f, "{k}N"),
            (1, n) => write!(f, "N + {n}"),
            (k, n) => write!(f, "{k}N + {n}"),
        }
    }
}

/// `doc.requests`: the DynamoDB requests of a route's common case, by operation, in the order
/// written (`{Query: 1, TransactWriteItems: 1}`; `{Query: 1 per shard}`), and `note`, free text on
/// the other cases (pages, a 404, a re-sharding) and on anything else it sends (SQS, STS), which
/// README shows after the counts. Only DynamoDB requests are counted; `tests/tests/request_counts.rs`
/// checks every route's common case against them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_yaml::Mapping")]
pub struct Requests {
    pub operations: Vec<(String, Count)>,
    pub note: Option<String>,
}

impl Requests {
    /// Operation → count for a tenant of `shards` shards.
    pub fn expected(&self, shards: u32) -> std::collections::BTreeMap<String, u32> {
        self.operations
            .iter()
            .map(|(op, c)| (op.clone(), c.for_shards(shards)))
            .collect()
    }
}

impl std::fmt::Display for Requests {
    /// README's cell: `GetItem`, `Query + TransactWriteItems`, `N × Query`, then `; <note>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ops: Vec<String> = self
            .operations
            .iter()
            .map(|(op, c)| match c {
                Count {
                    per_shard: 0,
                    fixed: 1,
                } => op.clone(),
                c if c.per_shard > 0 && c.fixed > 0 => format!("({c}) × {op}"),
                c => format!("{c} × {op}"),
            })
            .collect();
        let ops = if ops.is_empty() {
            "none".to_owned()
        } else {
            ops.join(" + ")
        };
        match &self.note {
            Some(note) => write!(f, "{ops}; {note}"),
            None => write!(f, "{ops}"),
        }
    }
}

impl TryFrom<serde_yaml::Mapping> for Requests {
    type Error = String;

    fn try_from(map: serde_yaml::Mapping) -> Result<Self, String> {
        let mut requests = Requests::default();
        for (key, value) in map {
            let Some(key) = key.as_str() else {
                return Err(format!(
                    "requests: a key is an operation or `note`, not {key:?}"
                ));
            };
            if key == "note" {
                match value.as_str() {
                    Some(note) => requests.note = Some(note.to_owned()),
                    None => return Err("requests.note is text".into()),
                }
                continue;
            }
            if !OPERATIONS.contains(&key) {
                return Err(format!(
                    "requests: {key:?} is not a DynamoDB operation a route sends (one of {OPERATIONS:?}, or `note`)"
                ));
            }
            let Some(count) = Count::parse(&value) else {
                return Err(format!(
                    "requests.{key}: {value:?} is not a count (a positive integer, `<k> per shard` or `<k> per shard + <n>`)"
                ));
            };
            requests.operations.push((key.to_owned(), count));
        }
        Ok(requests)
    }
}

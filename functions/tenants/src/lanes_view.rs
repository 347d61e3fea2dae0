//! A walk in lanes as the API shows it: how far it is, how fast it goes, and when it should end.

use serde::Serialize;
use shared::identity::ids::TenantId;
use std::collections::BTreeMap;

use shared::store::lifecycle::lanes::{self, Lane};
use shared::store::lifecycle::tenant_items::Source;

/// The progress of an operation's lanes.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LanesProgress {
    pub lanes: u32,
    pub lanes_done: u32,
    /// The partitions of the tenant walk the lanes have passed, of all of them.
    pub partitions_walked: usize,
    pub partitions: usize,
    /// Items the lanes have done (deleted, for an offboarding).
    pub items_done: u64,
    /// Items a second since the lanes began.
    pub items_per_second: Option<f64>,
    /// When the walk should end at that pace, from the partitions walked (an item count would need
    /// a walk of its own): an estimate, which a tenant's largest partitions make late.
    pub estimated_end: Option<String>,
    /// Items done by kind, with the record's (shown as an offboarding's `deleted`).
    #[serde(skip)]
    pub by_kind: BTreeMap<String, u64>,
}

impl LanesProgress {
    /// `all`, the lanes of a walk over `sources` planned at `since_ms`, at `now_ms`, with what the
    /// record counted before them (`before`: an offboarding's steps before lanes).
    pub fn of(
        tenant: &TenantId,
        sources: &[Source],
        all: &[Lane],
        before: &BTreeMap<String, u64>,
        since_ms: Option<u64>,
        now_ms: u64,
    ) -> Self {
        let (mut by_kind, _) = lanes::totals(all);
        for (kind, n) in before {
            *by_kind.entry(kind.clone()).or_default() += n;
        }
        let items_done: u64 = by_kind.values().sum();
        let walked = lanes::sources_walked(tenant, sources, all);
        let elapsed_ms = since_ms
            .map(|since| now_ms.saturating_sub(since))
            .filter(|ms| *ms > 0);
        let items_per_second = elapsed_ms.map(|ms| items_done as f64 * 1000.0 / ms as f64);
        let estimated_end = match elapsed_ms {
            Some(ms) if walked > 0 => {
                let left = (sources.len().saturating_sub(walked)) as u64;
                Some(shared::identity::clock::rfc3339(
                    now_ms + ms * left / walked as u64,
                ))
            }
            _ => None,
        };
        Self {
            lanes: all.len() as u32,
            lanes_done: all.iter().filter(|lane| lane.done).count() as u32,
            partitions_walked: walked,
            partitions: sources.len(),
            items_done,
            items_per_second: items_per_second.map(|r| (r * 10.0).round() / 10.0),
            estimated_end,
            by_kind,
        }
    }
}

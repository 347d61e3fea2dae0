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
    /// The partitions of the tenant walk the lanes have passed, of all of them (in their current
    /// pass).
    pub partitions_walked: usize,
    pub partitions: usize,
    /// The walk's pass, from 2, once a lane walks its partitions again (a move's, whose source
    /// must be seen empty: a pass that found items is followed by another); absent on the first.
    pub pass: Option<u64>,
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
        let pass = all
            .iter()
            .map(|lane| lane.pass)
            .max()
            .filter(|p| *p > 0)
            .map(|p| p + 1);
        let elapsed_ms = since_ms
            .map(|since| now_ms.saturating_sub(since))
            .filter(|ms| *ms > 0);
        let items_per_second = elapsed_ms.map(|ms| items_done as f64 * 1000.0 / ms as f64);
        // Only on the first pass: how many more a walk takes depends on the writes meanwhile.
        let estimated_end = match elapsed_ms {
            Some(ms) if walked > 0 && pass.is_none() => {
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
            pass,
            items_done,
            items_per_second: items_per_second.map(|r| (r * 10.0).round() / 10.0),
            estimated_end,
            by_kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::store::lifecycle::tenant_items::{sources, RecordInWalk};

    fn lane(n: u32, done: bool, pass: u64) -> Lane {
        Lane {
            pk: format!("lane-{n}"),
            sk: format!("lane-{n}"),
            lane: n,
            steps: 3,
            done,
            position: None,
            counts: BTreeMap::from([("PRODUCT".to_owned(), 10)]),
            stepped_at_ms: 1_000,
            found: 0,
            pass,
            sent_steps: Some(3),
        }
    }

    #[test]
    fn a_walk_begun_again_shows_its_pass_and_no_end_instead_of_going_back() {
        // GIVEN a tenant's walk in two lanes, lane 0 done and lane 1 at the start of a pass
        let tenant = TenantId::parse("acme").unwrap();
        let all = sources(&tenant, 4, 8, RecordInWalk::Excluded);
        let lane_0 = lanes::lane_sources(&all, 0, 2).len();
        let none = BTreeMap::new();
        // WHEN lane 1 begins its first pass, and when it begins again after one that found items
        let first = LanesProgress::of(
            &tenant,
            &all,
            &[lane(0, true, 0), lane(1, false, 0)],
            &none,
            Some(0),
            10_000,
        );
        let again = LanesProgress::of(
            &tenant,
            &all,
            &[lane(0, true, 0), lane(1, false, 1)],
            &none,
            Some(0),
            10_000,
        );
        // THEN the first shows no pass and an estimated end
        assert_eq!((first.partitions_walked, first.pass), (lane_0, None));
        assert!(first.estimated_end.is_some());
        // AND the second says it is the walk's second pass, with no estimate (how many more passes
        // a move takes depends on the writes meanwhile)
        assert_eq!((again.partitions_walked, again.pass), (lane_0, Some(2)));
        assert_eq!(again.estimated_end, None);
        assert_eq!(again.items_done, 20);
    }
}

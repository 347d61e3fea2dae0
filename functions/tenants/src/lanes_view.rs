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
    /// The partitions of the tenant walk the lanes have passed on their first pass, of all of them.
    pub partitions_walked: usize,
    pub partitions: usize,
    /// The lanes walking their partitions again (a move's, whose source must be seen empty: a
    /// pass that moved items is followed by one that finds none, or by another); absent when none.
    pub lanes_confirming: Option<u32>,
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
        let confirming = all.iter().filter(|l| !l.done && l.pass > 0).count() as u32;
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
            lanes_confirming: (confirming > 0).then_some(confirming),
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
    fn a_move_s_lanes_walking_again_count_their_first_pass_done_so_progress_never_goes_back() {
        // GIVEN a tenant's walk in three lanes: lane 0 done, lanes 1 and 2 on their first pass
        let tenant = TenantId::parse("acme").unwrap();
        let all = sources(&tenant, 4, 8, RecordInWalk::Excluded);
        let own = |n| lanes::lane_sources(&all, n, 3).len();
        let view = |lanes: &[Lane]| {
            LanesProgress::of(&tenant, &all, lanes, &BTreeMap::new(), Some(0), 10_000)
        };
        let first = view(&[lane(0, true, 0), lane(1, false, 0), lane(2, false, 0)]);
        // WHEN lane 2, then lane 1, end a pass that moved items and walk their partitions again
        let one_again = view(&[lane(0, true, 0), lane(1, false, 0), lane(2, false, 1)]);
        let two_again = view(&[lane(0, true, 0), lane(1, false, 1), lane(2, false, 1)]);
        // THEN each lane's first pass stays counted: the partitions walked only grow, to all of them
        let walked = [&first, &one_again, &two_again].map(|v| v.partitions_walked);
        assert_eq!(walked, [own(0), own(0) + own(2), all.len()]);
        // AND the lanes walking again are shown, with the estimate of the end still given
        let confirming = [&first, &one_again, &two_again].map(|v| v.lanes_confirming);
        assert_eq!(confirming, [None, Some(1), Some(2)]);
        assert!(two_again.estimated_end.is_some());
        assert_eq!(two_again.items_done, 30);
    }
}

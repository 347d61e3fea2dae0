use super::*;
use crate::identity::fixtures::acme;
use crate::store::lifecycle::tenant_items::{sources, RecordInWalk};

#[test]
fn the_lanes_deal_out_every_source_once_in_walk_order() {
    // GIVEN a 16-shard tenant's walk
    let all = sources(&acme(), 16, 8, RecordInWalk::Excluded);
    for asked in [1, 4, 16, 64, 500] {
        // WHEN it is split into lanes
        let lanes = lane_count(asked, all.len());
        let mut dealt: Vec<(usize, Source)> = (0..lanes)
            .flat_map(|lane| lane_sources(&all, lane, lanes))
            .map(|s| (all.iter().position(|a| *a == s).unwrap_or(usize::MAX), s))
            .collect();
        // THEN every source is in exactly one lane, and each lane keeps walk order
        dealt.sort_by_key(|(i, _)| *i);
        assert_eq!(dealt.into_iter().map(|(_, s)| s).collect::<Vec<_>>(), all);
        assert!(lanes >= 1 && lanes <= MAX_LANES.min(all.len() as u32));
    }
    assert_eq!(lane_count(0, 5), 1);
    assert_eq!(lane_count(16, 5), 5);
}

#[test]
fn a_step_moves_the_position_and_adds_its_counts() {
    let lane = Lane {
        pk: "p".into(),
        sk: "s".into(),
        lane: 2,
        steps: 3,
        done: false,
        position: None,
        counts: BTreeMap::from([("PRODUCT".to_owned(), 5)]),
        stepped_at_ms: 1,
        found: 0,
        pass: 0,
        sent_steps: Some(0),
    };
    let at = ItemKey {
        pk: "a".into(),
        sk: "b".into(),
    };
    let next = lane.after_step(
        Some(at.clone()),
        &BTreeMap::from([("PRODUCT".to_owned(), 2)]),
        9,
    );
    assert_eq!(
        (next.steps, next.done, next.position.clone()),
        (4, false, Some(at.clone()))
    );
    assert_eq!(next.counts["PRODUCT"], 7);
    let last = next.after_step(None, &BTreeMap::new(), 10);
    assert_eq!(
        (last.steps, last.done, last.position),
        (5, true, Some(at.clone()))
    );
    // A confirming walk's pass that found items begins again; one that found none ends it.
    let again = next.after_confirming_step(None, &BTreeMap::new(), 2, 11);
    assert_eq!(
        (again.done, again.position.clone(), again.found, again.pass),
        (false, None, 0, 1)
    );
    let mid = again.after_confirming_step(Some(at), &BTreeMap::new(), 0, 12);
    let end = mid.after_confirming_step(None, &BTreeMap::new(), 0, 13);
    assert_eq!((end.done, end.pass), (true, 1));
}

#[test]
fn a_lanes_pass_is_stored_only_once_its_walk_begins_again() {
    // GIVEN a lane on its first pass, and the same lane begun again
    let first = Lane {
        pk: "p".into(),
        sk: "s".into(),
        lane: 0,
        steps: 1,
        done: false,
        position: None,
        counts: BTreeMap::new(),
        stepped_at_ms: 1,
        found: 0,
        pass: 0,
        sent_steps: None,
    };
    let again = Lane {
        pass: 1,
        ..first.clone()
    };
    // WHEN each is stored
    let (first_item, again_item) = (stored(&first).unwrap(), stored(&again).unwrap());
    // THEN the first holds no `pass` (as a lane written before passes were counted), the second
    // holds it, and each reads back as it was
    assert!(!first_item.contains_key("pass"));
    assert_eq!(again_item["pass"].as_n().map(String::as_str), Ok("1"));
    for (lane, item) in [(first, first_item), (again, again_item)] {
        assert_eq!(serde_dynamo::from_item::<_, Lane>(item).unwrap(), lane);
    }
}

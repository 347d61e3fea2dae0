use super::*;

#[test]
fn custom_limits_need_the_custom_tier_and_the_custom_tier_needs_limits() {
    let l = Limits {
        requests_per_second: 5,
        capacity_units_per_second: 10,
    };
    assert_eq!(
        tier_and_limits(Some(Tier::Premium), None::<Limits>).unwrap(),
        (Tier::Premium, None)
    );
    assert_eq!(
        tier_and_limits(None, Some(l)).unwrap(),
        (Tier::Custom, Some(l))
    );
    assert_eq!(
        tier_and_limits(Some(Tier::Custom), Some(l)).unwrap(),
        (Tier::Custom, Some(l))
    );
    assert!(tier_and_limits(Some(Tier::Custom), None::<Limits>).is_err());
    assert!(tier_and_limits(Some(Tier::Basic), Some(l)).is_err());
    assert!(tier_and_limits(None, None::<Limits>).is_err());
    let zero = Limits {
        requests_per_second: 0,
        ..l
    };
    assert!(tier_and_limits(None, Some(zero)).is_err());
}

#[test]
fn a_moves_view_counts_the_items_its_lanes_moved_once_the_walk_notes_them() {
    // GIVEN a move whose own steps moved 3 items, and whose lanes, ended, moved 7
    let progress = shared::store::tenancy::tenants::MoveProgress {
        requested_at: "2026-12-04T00:00:00Z".into(),
        requested_by: "platform".into(),
        writes_move_at: 1_764_806_400,
        moves_start_at: 1_764_806_470,
        steps: 4,
        moved: 3,
        lanes_moved: 7,
    };
    // WHEN it is shown
    let view = serde_json::to_value(ProgressView::from(&progress)).unwrap();
    // THEN it shows the 10 items moved, as its finished event reports them (before the mend: 3)
    assert_eq!(view["itemsMoved"], 10);
    assert_eq!(view["steps"], 4);
}

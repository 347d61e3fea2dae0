use super::*;
use crate::store::client::query::string_attr;
use aws_sdk_dynamodb::types::AttributeValue;

/// An item with sort key `sk` and a `v` telling which read it came from.
fn item(sk: &str, v: &str) -> Item {
    Item::from([
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
        ("v".to_owned(), AttributeValue::S(v.to_owned())),
    ])
}

fn read(items: &[(&str, &str)], ended_at: Option<&str>) -> Read {
    Read {
        items: items.iter().map(|(sk, v)| item(sk, v)).collect(),
        ended_at: ended_at.map(str::to_owned),
    }
}

fn shown(m: &Merged) -> Vec<String> {
    m.items
        .iter()
        .map(|i| {
            format!(
                "{}{}",
                string_attr(i, SK).unwrap(),
                string_attr(i, "v").unwrap()
            )
        })
        .collect()
}

#[test]
fn a_page_across_layouts_ends_where_the_shorter_read_ended_and_prefers_the_new_copy() {
    // GIVEN an old read that stopped at c, and a new read that went to the end
    let old = read(&[("a", "old"), ("b", "old"), ("c", "old")], Some("c"));
    let new = read(&[("b", "new"), ("d", "new")], None);
    // WHEN they are merged
    let m = merge_layouts(old, new, 10, SK);
    // THEN b is the new copy, d waits for the next page (the old layout was not read past c)
    assert_eq!(shown(&m), ["aold", "bnew", "cold"]);
    assert_eq!(m.next.as_deref(), Some("c"));
}

#[test]
fn a_full_merge_is_cut_at_the_limit_and_a_finished_one_has_no_next_page() {
    let old = read(&[("a", "old"), ("c", "old")], None);
    let new = read(&[("b", "new"), ("d", "new")], None);
    let m = merge_layouts(old, new, 3, SK);
    assert_eq!(shown(&m), ["aold", "bnew", "cold"]);
    assert_eq!(m.next.as_deref(), Some("c"));

    let done = merge_layouts(read(&[("a", "old")], None), read(&[], None), 3, SK);
    assert_eq!(shown(&done), ["aold"]);
    assert_eq!(done.next, None);
}

#[test]
fn a_page_whose_reads_kept_nothing_still_moves_on() {
    // Every item the old read saw was at home in the new layout only (filtered out).
    let m = merge_layouts(read(&[], Some("m")), read(&[], Some("z")), 5, SK);
    assert!(m.items.is_empty());
    assert_eq!(m.next.as_deref(), Some("m"));
}

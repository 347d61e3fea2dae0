//! Two layouts' reads of the same page merged into one (a re-sharding reads both).

use super::*;
use crate::identity::keys::SK;
use crate::store::client::query::{string_attr, Item};

/// One layout's read for [`merge_layouts`]: the items kept, and where the read ended.
pub struct Read {
    /// In ascending sort order.
    pub items: Vec<Item>,
    /// The sort key of the last item read (kept or not) when the read stopped for its limit;
    /// `None` when it read its layout to the end.
    pub ended_at: Option<String>,
}

impl Read {
    /// `page`, keeping the items `keep` accepts.
    pub(super) fn of(page: GatheredPage, keep: impl Fn(&Item) -> bool) -> Self {
        let ended_at = page
            .next_cursor
            .and(page.items.last())
            .and_then(|last| string_attr(last, SK));
        Self {
            items: page.items.into_iter().filter(|i| keep(i)).collect(),
            ended_at,
        }
    }
}

/// A merged page: its items, and the sort key the next page starts after (if any).
#[derive(Debug)]
pub struct Merged {
    pub items: Vec<Item>,
    pub next: Option<String>,
}

/// The page of [`gather_across`] from its two reads: the items of both up to where both reads
/// reached, one per sort key (the new layout's copy preferred), at most `limit`.
pub fn merge_layouts(old: Read, new: Read, limit: usize, sort_attr: &str) -> Merged {
    let sort = |item: &Item| string_attr(item, sort_attr).unwrap_or_default();
    let covered_to = match (old.ended_at, new.ended_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let within = |item: &Item| covered_to.as_ref().is_none_or(|end| sort(item) <= *end);
    let mut old_items = old.items.into_iter().filter(|i| within(i)).peekable();
    let mut new_items = new.items.into_iter().filter(|i| within(i)).peekable();
    let mut items: Vec<Item> = Vec::new();
    loop {
        let take_new = match (old_items.peek(), new_items.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(o), Some(n)) => {
                let (o, n) = (sort(o), sort(n));
                if o == n {
                    old_items.next();
                }
                n <= o
            }
        };
        let next = if take_new {
            new_items.next()
        } else {
            old_items.next()
        };
        // One per sort key, also within one read: the later copy (a move mid-read) replaces it.
        match next {
            Some(item) if items.last().is_some_and(|l| sort(l) == sort(&item)) => {
                if let Some(last) = items.last_mut() {
                    *last = item;
                }
            }
            Some(item) => items.push(item),
            None => {}
        }
    }
    if items.len() > limit {
        items.truncate(limit);
        let next = items.last().map(sort);
        return Merged { items, next };
    }
    Merged {
        items,
        next: covered_to,
    }
}

//! Lifecycle events: what a committed change of a tenant record or an import record means, read
//! from the table's stream (its old and new images).
//!
//! Events come from the stream, never from the code that made the change, so an event exists
//! exactly when its change committed: a write that failed its condition leaves no stream record,
//! and a function that died after its write still leaves one. The publisher
//! (`tenants::publish_events`) puts what [`events_of`] returns on EventBridge.
//!
//! | detail-type | stream record |
//! |---|---|
//! | `tenantOnboarded` | a tenant record inserted |
//! | `tenantTierChanged` | its tier or custom limits changed |
//! | `tenantSuspended`, `tenantResumed` | its status went active → suspended, suspended → active |
//! | `reshardingStarted`, `reshardingFinished` | its `migration` appeared, went |
//! | `offboardingStarted` | its status became `offboarding` |
//! | `tenantMoveStarted`, `tenantMoveFinished` | its `move` appeared, went (with the backfill's count) |
//! | `tenantRestoreStarted`, `tenantRestoreFinished` | its `restore` appeared, went (with its report's counts) |
//! | `offboardingFinished` | the record of an offboarding tenant deleted: the walk deleted everything |
//! | `importFinished` | an import's entry in the lifecycle driver's deadline list noted final (`closedAtMs` set, with its final counts: `driving::note_import_finished`) once the driver closed its record at its deadline, up to an hour after its acceptance. Never the record's own close: it may be in a table of its tenant's own, whose stream is not read, and it moves between the two with its tenant |

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::identity::ids::{EntityId, TenantId};
use crate::identity::keys::{import_due_pk, parse_import_due_sk, parse_tenant_record_key};
use crate::store::tenancy::tenants::{Migration, TenantRecord, TenantStatus};

/// What happened to the item, as the stream names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Insert,
    Modify,
    Remove,
}

impl Change {
    /// The stream's `eventName`: `INSERT`, `MODIFY` or `REMOVE`.
    pub fn parse(event_name: &str) -> Option<Self> {
        match event_name {
            "INSERT" => Some(Self::Insert),
            "MODIFY" => Some(Self::Modify),
            "REMOVE" => Some(Self::Remove),
            _ => None,
        }
    }
}

/// One event to put on the bus.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleEvent {
    pub detail_type: &'static str,
    /// The tenant the event is about (also in `detail.tenantId`).
    pub tenant_id: String,
    /// `tenantId`, `operator` (`{tenantId}` of the operator who asked, or null), `outcome`, and
    /// what the kind of event carries.
    pub detail: Value,
}

/// The images could not be read as what their keys say they are.
#[derive(Debug, thiserror::Error)]
#[error("stream image of {key}: {reason}")]
pub struct ImageError {
    key: String,
    reason: String,
}

#[derive(Deserialize)]
struct Keys {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
}

/// An import's entry in the driver's deadline list, as its note of the import's close
/// (`driving::note_import_finished`) leaves it: every field defaulted (an entry not noted has
/// none of them), the tenant and import being the ones its key names.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct NotedImport {
    item_kind: String,
    accepted: u64,
    closed_at_ms: Option<u64>,
    final_counts: BTreeMap<String, u64>,
}

/// The events one stream record stands for: none for any item but a tenant record or an import
/// record, and none for a change that is not a lifecycle step (a checkpoint, a cache refresh).
/// Every detail gets `eventId`, `<stream record id>#<detail-type>` (one record can stand for two
/// events: a tier change and a suspension in one PATCH): the same on every retry, so a consumer
/// dedupes on it when the publisher's retry sends an event twice.
pub fn events_of(
    change: Change,
    event_id: &str,
    old: Option<&serde_dynamo::Item>,
    new: Option<&serde_dynamo::Item>,
) -> Result<Vec<LifecycleEvent>, ImageError> {
    let Some(image) = new.or(old) else {
        return Ok(Vec::new());
    };
    let Ok(keys) = serde_dynamo::from_item::<_, Keys>(image.clone()) else {
        return Ok(Vec::new());
    };
    let mut events = if keys.pk != keys.sk {
        if change == Change::Modify {
            noted_import_events(&keys, old, new)?
        } else {
            Vec::new()
        }
    } else if let Some(tenant) = parse_tenant_record_key(&keys.pk) {
        tenant_events(change, &tenant, &keys.pk, old, new)?
    } else {
        Vec::new()
    };
    for event in &mut events {
        event.detail["eventId"] = json!(format!("{event_id}#{}", event.detail_type));
    }
    Ok(events)
}

fn parse<T: serde::de::DeserializeOwned>(
    key: &str,
    image: Option<&serde_dynamo::Item>,
) -> Result<Option<T>, ImageError> {
    image
        .map(|i| serde_dynamo::from_item(i.clone()))
        .transpose()
        .map_err(|e| ImageError {
            key: key.to_owned(),
            reason: e.to_string(),
        })
}

fn tenant_events(
    change: Change,
    tenant: &TenantId,
    key: &str,
    old: Option<&serde_dynamo::Item>,
    new: Option<&serde_dynamo::Item>,
) -> Result<Vec<LifecycleEvent>, ImageError> {
    let old: Option<TenantRecord> = parse(key, old)?;
    let new: Option<TenantRecord> = parse(key, new)?;
    let mut out = TenantEvents {
        tenant,
        events: Vec::new(),
    };
    match (change, old, new) {
        (Change::Insert, _, Some(new)) => out.push(
            "tenantOnboarded",
            new.changed_by.as_deref(),
            "onboarded",
            tier_detail(&new),
        ),
        (Change::Modify, Some(old), Some(new)) => {
            out.tier_and_status(&old, &new);
            out.operations(&old, &new);
            out.restore(&old, &new);
        }
        (Change::Remove, Some(old), _) if old.status == TenantStatus::Offboarding => {
            out.offboarded(&old)
        }
        _ => {}
    }
    Ok(out.events)
}

/// The events of one change of a tenant's record, as they are found.
struct TenantEvents<'t> {
    tenant: &'t TenantId,
    events: Vec<LifecycleEvent>,
}

/// A tenant's tier, limits and shard count, as events carry them.
fn tier_detail(r: &TenantRecord) -> Value {
    json!({ "tier": r.tier, "limits": r.limits(), "shardCount": r.shard_count })
}

impl TenantEvents<'_> {
    /// An event of `detail_type`: the tenant, the operator who asked (if one did), the outcome, and
    /// what the kind of event carries (`extra`).
    fn push(
        &mut self,
        detail_type: &'static str,
        operator: Option<&str>,
        outcome: &str,
        extra: Value,
    ) {
        let mut detail = json!({
            "tenantId": self.tenant.as_str(),
            "operator": operator.map(|t| json!({ "tenantId": t })),
            "outcome": outcome,
        });
        if let (Value::Object(detail), Value::Object(extra)) = (&mut detail, extra) {
            detail.extend(extra);
        }
        self.events.push(LifecycleEvent {
            detail_type,
            tenant_id: self.tenant.to_string(),
            detail,
        });
    }

    /// A change of tier or limits, and a suspension, a resumption or an offboarding's start.
    fn tier_and_status(&mut self, old: &TenantRecord, new: &TenantRecord) {
        let by = new.changed_by.as_deref();
        if (old.tier, old.limits) != (new.tier, new.limits) {
            let mut extra = tier_detail(new);
            extra["previousTier"] = json!(old.tier);
            self.push("tenantTierChanged", by, "tierChanged", extra);
        }
        match (old.status, new.status) {
            (TenantStatus::Active, TenantStatus::Suspended) => {
                self.push("tenantSuspended", by, "suspended", json!({}))
            }
            (TenantStatus::Suspended, TenantStatus::Active) => {
                self.push("tenantResumed", by, "resumed", json!({}))
            }
            (before, TenantStatus::Offboarding) if before != TenantStatus::Offboarding => {
                let by = new.offboarding.as_ref().map(|o| o.requested_by.as_str());
                self.push(
                    "offboardingStarted",
                    by,
                    "offboardingStarted",
                    json!({ "deletionStartsAt": new.offboarding.as_ref().map(|o| o.deletion_starts_at) }),
                )
            }
            _ => {}
        }
    }

    /// A re-sharding's or a move's start and end.
    fn operations(&mut self, old: &TenantRecord, new: &TenantRecord) {
        match (&old.migration, &new.migration) {
            (None, Some(Migration { from, to, progress, .. })) => self.push(
                "reshardingStarted",
                Some(&progress.requested_by),
                "reshardingStarted",
                json!({ "from": from, "to": to }),
            ),
            (Some(Migration { from, to, progress, .. }), None) => self.push(
                "reshardingFinished",
                Some(&progress.requested_by),
                "resharded",
                json!({ "from": from, "to": to, "moved": progress.moved_in_all(), "shardCount": new.shard_count }),
            ),
            _ => {}
        }
        match (&old.moving, &new.moving) {
            (None, Some(m)) => self.push(
                "tenantMoveStarted",
                Some(&m.progress.requested_by),
                "moveStarted",
                json!({ "to": m.to, "fromTable": m.from_table, "toTable": m.to_table, "writesMoveAt": m.progress.writes_move_at }),
            ),
            (Some(m), None) => self.push(
                "tenantMoveFinished",
                Some(&m.progress.requested_by),
                "moved",
                json!({ "to": m.to, "fromTable": m.from_table, "toTable": m.to_table, "moved": m.progress.moved_in_all(), "steps": m.progress.steps }),
            ),
            _ => {}
        }
    }

    /// A restore's start and end (restored or abandoned).
    fn restore(&mut self, old: &TenantRecord, new: &TenantRecord) {
        match (&old.restore, &new.restore) {
            (None, Some(r)) => self.push(
                "tenantRestoreStarted",
                Some(&r.requested_by),
                "restoreStarted",
                json!({ "source": r.source_table, "pointInTime": r.point_in_time, "startsAt": r.starts_at }),
            ),
            (Some(r), None) => {
                let report = new.last_restore.as_ref().unwrap_or(r);
                let (outcome, reason) = match &report.phase {
                    crate::store::tenancy::tenants::RestorePhase::Abandoned(why) => {
                        ("restoreAbandoned", Some(why.as_str()))
                    }
                    _ => ("restored", None),
                };
                self.push(
                    "tenantRestoreFinished",
                    Some(&report.requested_by),
                    outcome,
                    json!({
                        "source": report.source_table,
                        "pointInTime": report.point_in_time,
                        "putBack": report.put_back,
                        "overwritten": report.overwritten,
                        "deleted": report.deleted,
                        "reason": reason,
                    }),
                )
            }
            _ => {}
        }
    }

    /// An offboarding's end: the record's removal, with the report's counts.
    fn offboarded(&mut self, old: &TenantRecord) {
        let offboarding = old.offboarding.as_ref();
        let mut deleted = offboarding.map(|o| o.deleted.clone()).unwrap_or_default();
        // The record itself, counted as the report counts it.
        *deleted.entry("TENANT".to_owned()).or_default() += 1;
        self.push(
            "offboardingFinished",
            offboarding.map(|o| o.requested_by.as_str()),
            "offboarded",
            json!({ "deleted": deleted, "createdAt": old.created_at }),
        )
    }
}

/// An import's entry in the driver's deadline list, noted final (`closedAtMs` set) by
/// `driving::note_import_finished`: the `importFinished` of an import whose record is in a table of
/// its tenant's own. The tenant and import are the ones the entry's key names.
fn noted_import_events(
    keys: &Keys,
    old: Option<&serde_dynamo::Item>,
    new: Option<&serde_dynamo::Item>,
) -> Result<Vec<LifecycleEvent>, ImageError> {
    let Some((_, tenant, import)) = parse_import_due_sk(&keys.sk) else {
        return Ok(Vec::new());
    };
    if import_due_pk(&tenant, &import) != keys.pk {
        return Ok(Vec::new());
    }
    let Some(new) = parse::<NotedImport>(&keys.sk, new)? else {
        return Ok(Vec::new());
    };
    let was_noted = parse::<NotedImport>(&keys.sk, old)?.is_some_and(|o| o.closed_at_ms.is_some());
    if new.closed_at_ms.is_none() || was_noted {
        return Ok(Vec::new());
    }
    Ok(vec![import_finished(&tenant, &import, &new)])
}

/// The `importFinished` of `tenant`'s import `import`, closed as `closed` says.
fn import_finished(tenant: &TenantId, import: &EntityId, closed: &NotedImport) -> LifecycleEvent {
    let failed: u64 = closed
        .final_counts
        .iter()
        .filter(|(outcome, _)| !matches!(outcome.as_str(), "written" | "superseded"))
        .map(|(_, n)| n)
        .sum();
    let outcome = if failed == 0 { "complete" } else { "failed" };
    LifecycleEvent {
        detail_type: "importFinished",
        tenant_id: tenant.to_string(),
        detail: json!({
            "tenantId": tenant.as_str(),
            "operator": null,
            "outcome": outcome,
            "importId": import.as_str(),
            "kind": closed.item_kind,
            "accepted": closed.accepted,
            "counts": closed.final_counts,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::keys::import_due_sk;

    /// An import's entry in the deadline list, with `extra` attributes.
    fn entry(pk: &str, sk: &str, extra: Value) -> serde_dynamo::Item {
        let mut item = json!({"PK": pk, "SK": sk, "kind": "IMPORT_DUE", "tenantId": "_platform",
            "createdAtMs": 1});
        if let (Value::Object(item), Value::Object(extra)) = (&mut item, extra) {
            item.extend(extra);
        }
        serde_dynamo::to_item(item).unwrap_or_default()
    }

    fn noted() -> Value {
        json!({"closedAtMs": 9, "importId": "forged", "itemKind": "product", "accepted": 3,
            "finalCounts": {"written": 3}})
    }

    #[test]
    fn an_entry_noted_final_once_is_its_imports_one_finished_event_and_nothing_else_is() {
        // GIVEN an import's entry, as listed and as noted final, and one under a key its import
        // does not hash to
        let (tenant, import) = (TenantId::parse("acme"), EntityId::parse("imp-1"));
        let (Ok(tenant), Ok(import)) = (tenant, import) else {
            panic!("valid ids")
        };
        let (pk, sk) = (
            import_due_pk(&tenant, &import),
            import_due_sk(7, &tenant, &import),
        );
        let listed = entry(&pk, &sk, json!({}));
        let final_ = entry(&pk, &sk, noted());
        let forged_pk = format!("{}x", crate::identity::keys::import_due_pk_prefix());
        let elsewhere = entry(&forged_pk, &sk, noted());
        let events =
            |change, old: Option<&serde_dynamo::Item>, new: Option<&serde_dynamo::Item>| {
                events_of(change, "e-1", old, new)
                    .map(|e| e.len())
                    .unwrap_or(99)
            };

        // WHEN its note is the change
        let finished = events_of(Change::Modify, "e-1", Some(&listed), Some(&final_));

        // THEN it is one importFinished, of the tenant and import its key names
        let Ok([event]) = <[LifecycleEvent; 1]>::try_from(finished.unwrap_or_default()) else {
            panic!("one event")
        };
        assert_eq!(event.detail_type, "importFinished");
        assert_eq!(event.detail["tenantId"], "acme");
        assert_eq!(event.detail["importId"], "imp-1");
        assert_eq!(event.detail["counts"], json!({"written": 3}));
        assert_eq!(event.detail["outcome"], "complete");
        // AND a second note, the entry's listing, its removal and a forged key are none
        assert_eq!(events(Change::Modify, Some(&final_), Some(&final_)), 0);
        assert_eq!(events(Change::Insert, None, Some(&listed)), 0);
        assert_eq!(events(Change::Modify, Some(&listed), Some(&listed)), 0);
        assert_eq!(events(Change::Remove, Some(&final_), None), 0);
        assert_eq!(events(Change::Modify, Some(&listed), Some(&elsewhere)), 0);
    }
}

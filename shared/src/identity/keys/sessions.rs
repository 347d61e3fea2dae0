//! Session keys: a session's partition, its customer's sort key (so GSI1 groups sessions by customer), its children.

use super::*;
use crate::identity::entities::spaces;
use crate::identity::ids::{EntityId, SessionId, TenantId};

pub(super) const SESSION: &str = crate::identity::entities::SESSION.kind;
pub(super) const CUSTOMER: &str = spaces::CUSTOMER.0;
pub(super) const CHILD: &str = spaces::CHILD.0;

/// `TENANT#t#SESSION#<sessionId>`: the partition of a session's item collection.
pub fn session_pk(tenant: &TenantId, session: &SessionId) -> String {
    format!("{}{session}", entity_prefix(tenant, SESSION))
}

pub fn parse_session_pk(tenant: &TenantId, value: &str) -> Result<SessionId, KeyShapeError> {
    SessionId::parse(strip_entity_prefix(tenant, SESSION, value)?).map_err(|_| KeyShapeError)
}

/// `TENANT#t#C`: the sort-key prefix of everything in a session's item collection, which holds only
/// `CHILD#` items and the root's `CUSTOMER#` item (and `CUSTOMER` sorts after `CHILD`).
pub fn session_collection_sk_prefix(tenant: &TenantId) -> String {
    format!("{}C", tenant_prefix(tenant))
}

/// `TENANT#t#CUSTOMER#<customerId>`: a root session's SK, so GSI1 groups sessions by customer.
pub fn customer_sk(tenant: &TenantId, customer: &EntityId) -> String {
    format!("{}{customer}", entity_prefix(tenant, CUSTOMER))
}

pub fn customer_sk_prefix(tenant: &TenantId) -> String {
    entity_prefix(tenant, CUSTOMER)
}

pub fn parse_customer_sk(tenant: &TenantId, value: &str) -> Result<EntityId, KeyShapeError> {
    EntityId::parse(strip_entity_prefix(tenant, CUSTOMER, value)?).map_err(|_| KeyShapeError)
}

/// `TENANT#t#CHILD#<childId>`: a child session's SK inside its parent's item collection.
pub fn child_sk(tenant: &TenantId, child: &SessionId) -> String {
    format!("{}{child}", entity_prefix(tenant, CHILD))
}

pub fn parse_child_sk(tenant: &TenantId, value: &str) -> Result<SessionId, KeyShapeError> {
    SessionId::parse(strip_entity_prefix(tenant, CHILD, value)?).map_err(|_| KeyShapeError)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::fixtures::{id, tenant as t};

    fn sid() -> SessionId {
        SessionId::parse("0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b").unwrap()
    }

    #[test]
    fn golden_session_keys() {
        let acme = t("acme");
        assert_eq!(tenant_prefix(&acme), "TENANT#acme#");
        assert_eq!(
            session_pk(&acme, &sid()),
            "TENANT#acme#SESSION#0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"
        );
        assert_eq!(
            customer_sk(&acme, &id("cust-42")),
            "TENANT#acme#CUSTOMER#cust-42"
        );
        assert_eq!(
            child_sk(&acme, &sid()),
            "TENANT#acme#CHILD#0190f1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"
        );
        assert_eq!(customer_sk_prefix(&acme), "TENANT#acme#CUSTOMER#");
    }

    #[test]
    fn parsers_invert_builders() {
        let acme = t("acme");
        assert_eq!(
            parse_session_pk(&acme, &session_pk(&acme, &sid())),
            Ok(sid())
        );
        assert_eq!(parse_child_sk(&acme, &child_sk(&acme, &sid())), Ok(sid()));
        let cust = id("c1");
        assert_eq!(
            parse_customer_sk(&acme, &customer_sk(&acme, &cust)),
            Ok(cust)
        );
    }

    #[test]
    fn parsers_refuse_another_tenants_or_another_kinds_key() {
        let a = t("a");
        let pk_of_ab = session_pk(&t("a-b"), &sid());
        assert_eq!(parse_session_pk(&a, &pk_of_ab), Err(KeyShapeError));
        assert_eq!(
            parse_session_pk(&a, &child_sk(&a, &sid())),
            Err(KeyShapeError)
        );
        assert_eq!(
            parse_customer_sk(&a, "TENANT#a#CUSTOMER#x#y"),
            Err(KeyShapeError)
        );
        assert_eq!(
            parse_customer_sk(&a, "TENANT#A#CUSTOMER#x"),
            Err(KeyShapeError)
        );
    }
}

//! The entity kinds, declared once: each kind's key segment, the partition space it is stored in
//! (a tenant's fixed, numbered partitions or partitions named by an id), the `kind` attribute it
//! is stored with, how it appears in GSI1, and how the machinery handles it. The keys, the catalog
//! (which partitions carry a catalog entry), the tenant walk (export and offboarding), the
//! re-sharding mover and the telemetry key shape all read these declarations; no list of kinds is
//! written anywhere else, and every key is built from them (`identity::keys::KeySpace`). The key
//! bytes are golden in `identity::keys`' tests and in the generated key table
//! (`docs/key-scheme.md`): declaring a kind changes no stored key.

/// How many partitions of a fixed partition space a tenant has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    /// The tenant record's shard count: write shards, moved by a re-sharding.
    TenantShards,
    /// A constant number.
    Constant(u32),
    /// The quota limiter's windows: as many as the caller of the walk says it wrote.
    QuotaWindows,
    /// One: the tenant record.
    Record,
}

/// A partition space every tenant has a known number of partitions in: `TENANT#t#<kind>#<n>` (or
/// `TENANT#t#TENANT`). Its items carry no catalog entry; the tenant walk reads these spaces in
/// declaration order ([`FIXED_SPACES`]), the record last of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedSpace {
    /// The key segment after the tenant.
    pub kind: &'static str,
    pub partitions: Partitions,
    /// Whether the telemetry key shape keeps the shard number (`PRODUCT#7`); derived from
    /// `partitions` ([`FixedSpace::new`]).
    pub shard_in_key_shape: bool,
}

/// Where an entity kind's items live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// In a fixed partition space (`FixedSpace::kind`), told apart by the sort key's kind.
    Fixed(&'static str),
    /// In partitions named by an id (`TENANT#t#<kind>#<id>…`), found through the catalog.
    ById,
}

/// How an entity kind's items appear in GSI1, whose partition key is the table's `SK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gsi1 {
    /// Under its own sort key: reading by its id (or its owner's) is a GSI1 Query.
    BySortKey,
    /// Under `TENANT#t#<partition>#<month>#<shard>`: a date index written across shards.
    MonthShards { partition: &'static str },
}

/// An entity kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityKind {
    /// The key segment after the tenant in its sort key (or its partition, for a [`Home::ById`]).
    pub kind: &'static str,
    pub home: Home,
    /// The `kind` attribute its items are stored with (offboarding reports count by it).
    pub stored_as: &'static str,
    pub gsi1: Gsi1,
    /// The name bulk imports take it by (`POST /imports {kind}`), when they can import it.
    pub import_as: Option<&'static str>,
    /// Whether its items grant access (sessions, transfer codes, integration tokens): a per-tenant
    /// restore leaves them as they are now, so a session logged out, a code redeemed or a token
    /// revoked since the point in time never comes back.
    pub grants_access: bool,
    /// Whether its document attributes are sealed under the tenant's key (`store::keys`). A kind
    /// whose conditions read a document attribute keeps it plain until the attribute moves to
    /// `store::keys::PLAIN`.
    pub sealed: bool,
}

impl EntityKind {
    /// Whether a re-sharding moves it: its home is a space of write shards.
    pub fn resharded(&self) -> bool {
        match self.home {
            Home::Fixed(space) => {
                fixed_space(space).map(|s| s.partitions) == Some(Partitions::TenantShards)
            }
            Home::ById => false,
        }
    }

    /// Whether its items live in the partitions of key segment `kind`.
    fn lives_in(&self, kind: &str) -> bool {
        match self.home {
            Home::Fixed(space) => space == kind,
            Home::ById => self.kind == kind,
        }
    }

    /// Whether its items carry a catalog entry (export and offboarding find them through it).
    pub fn catalogued(&self) -> bool {
        self.home == Home::ById
    }
}

impl FixedSpace {
    /// The telemetry key shape keeps the shard number only where it says something about load:
    /// write shards and usage counters, not quota windows (per second) or the record (one).
    const fn new(kind: &'static str, partitions: Partitions) -> Self {
        let shard_in_key_shape = matches!(
            partitions,
            Partitions::TenantShards | Partitions::Constant(_)
        );
        Self {
            kind,
            partitions,
            shard_in_key_shape,
        }
    }
}

pub const PRODUCTS: FixedSpace = FixedSpace::new("PRODUCT", Partitions::TenantShards);
/// Employees and departments share it, told apart by the sort key's kind.
pub const HR: FixedSpace = FixedSpace::new("HR", Partitions::TenantShards);
pub const USAGE: FixedSpace = FixedSpace::new("USAGE", Partitions::Constant(8));
pub const RATE: FixedSpace = FixedSpace::new("RATE", Partitions::QuotaWindows);
pub const TENANT_RECORD: FixedSpace = FixedSpace::new("TENANT", Partitions::Record);

/// The fixed partition spaces, in the tenant walk's order. **The order is stored**: an offboarding's
/// or a re-sharding's checkpoint and an export cursor name a position in it, so a new space goes
/// last (before the record), never between two others.
pub const FIXED_SPACES: [FixedSpace; 5] = [PRODUCTS, HR, USAGE, RATE, TENANT_RECORD];

pub const PRODUCT: EntityKind = EntityKind {
    kind: "PRODUCT",
    home: Home::Fixed(PRODUCTS.kind),
    stored_as: "PRODUCT",
    gsi1: Gsi1::BySortKey,
    import_as: Some("products"),
    grants_access: false,
    sealed: true,
};
pub const EMPLOYEE: EntityKind = EntityKind {
    kind: "EMPLOYEE",
    home: Home::Fixed(HR.kind),
    stored_as: "EMPLOYEE",
    gsi1: Gsi1::BySortKey,
    import_as: Some("employees"),
    grants_access: false,
    sealed: true,
};
pub const DEPARTMENT: EntityKind = EntityKind {
    kind: "DEPARTMENT",
    home: Home::Fixed(HR.kind),
    stored_as: "DEPARTMENT",
    gsi1: Gsi1::BySortKey,
    import_as: Some("departments"),
    grants_access: false,
    sealed: true,
};
/// An employee's membership of a department: in the department's own partition
/// (`TENANT#t#DEPARTMENT#<d>#MEMBERS`), sorted by the employee's key.
pub const MEMBER: EntityKind = EntityKind {
    kind: "DEPARTMENT",
    home: Home::ById,
    stored_as: "MEMBER",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
pub const SESSION: EntityKind = EntityKind {
    kind: "SESSION",
    home: Home::ById,
    stored_as: "SESSION",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: true,
    sealed: true,
};
pub const CHILD_SESSION: EntityKind = EntityKind {
    kind: "SESSION",
    home: Home::ById,
    stored_as: "CHILD_SESSION",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: true,
    sealed: true,
};
pub const USER: EntityKind = EntityKind {
    kind: "USER",
    home: Home::ById,
    stored_as: "USER",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
pub const EMAIL: EntityKind = EntityKind {
    kind: "EMAIL",
    home: Home::ById,
    stored_as: "EMAIL",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
pub const ORDER: EntityKind = EntityKind {
    kind: "ORDER",
    home: Home::ById,
    stored_as: "ORDER",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
/// An order's summary in its user's collection (`TENANT#t#USER#<u>`, sorted by the order's key).
pub const ORDER_SUMMARY: EntityKind = EntityKind {
    kind: "USER",
    home: Home::ById,
    stored_as: "ORDER_SUMMARY",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
/// The orders' date index: `TENANT#t#ORDERDATE#<date>#<o>`, under GSI1's month shards.
pub const ORDER_DATE: EntityKind = EntityKind {
    kind: "ORDERDATE",
    home: Home::ById,
    stored_as: "ORDERDATE",
    gsi1: Gsi1::MonthShards {
        partition: "ORDERS",
    },
    import_as: None,
    grants_access: false,
    sealed: true,
};
/// An order's line item, in the order's partition (`TENANT#t#ORDER#<o>`, `SK` = `…#ITEM#<i>`).
pub const ORDER_LINE: EntityKind = EntityKind {
    kind: "ORDER",
    home: Home::ById,
    stored_as: "ITEM",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: false,
    sealed: true,
};
pub const TRANSFER: EntityKind = EntityKind {
    kind: "TRANSFER",
    home: Home::ById,
    stored_as: "TRANSFER",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: true,
    sealed: true,
};
pub const INTEGRATION: EntityKind = EntityKind {
    kind: "INTEGRATION",
    home: Home::ById,
    stored_as: "INTEGRATION",
    gsi1: Gsi1::BySortKey,
    import_as: None,
    grants_access: true,
    sealed: true,
};

/// A key space of the machinery's own (idempotency records, imports, the platform's lists), or a
/// secondary segment of an entity's key (a session's customer, an order's month partitions).
/// Its keys are built through `identity::keys::KeySpace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space(pub &'static str);

/// The machinery's own key spaces, outside the entity kinds: each names the segment after the tenant
/// of the keys it builds (`identity::keys`). The platform's spaces are under the platform's tenant
/// (`TENANT#_platform#…`), which no request can name.
pub mod spaces {
    use super::Space;

    /// A root session's sort key: `TENANT#t#CUSTOMER#<customerId>`.
    pub const CUSTOMER: Space = Space("CUSTOMER");
    /// A child session's sort key in its parent's collection: `TENANT#t#CHILD#<childId>`.
    pub const CHILD: Space = Space("CHILD");
    /// Idempotency records: `TENANT#t#IDEMPOTENCY#<route>#<key>`.
    pub const IDEMPOTENCY: Space = Space("IDEMPOTENCY");
    /// A bulk import's record and item markers: `TENANT#t#IMPORT#<importId>…`.
    pub const IMPORT: Space = Space("IMPORT");
    /// Deletion tombstones: `TENANT#t#DELETED#<kind>#<id>`.
    pub const DELETED: Space = Space("DELETED");
    /// Erasure records, kept for good: `TENANT#t#ERASED#<kind>#<id>` (`store::erasures`).
    pub const ERASED: Space = Space("ERASED");
    /// The tenant's import sealing key: `TENANT#t#SEALING#imports`.
    pub const SEALING: Space = Space("SEALING");
    /// The catalog index's partitions: `TENANT#t#CATALOG#<shard>`.
    pub const CATALOG: Space = Space("CATALOG");
    /// A lifecycle operation's lanes, each with its checkpoint: `TENANT#t#LANE#<operation>…`.
    pub const LANE: Space = Space("LANE");
    /// Offboarding reports, in the platform's partition: `TENANT#_platform#OFFBOARDED#<t>…`.
    pub const OFFBOARDED: Space = Space("OFFBOARDED");
    /// The lifecycle driver's list, in the platform's partition: `TENANT#_platform#DRIVE…`.
    pub const DRIVE: Space = Space("DRIVE");
    /// The point-in-time copies a restore's abort leaves for the lifecycle driver to delete, in the
    /// platform's partition: `TENANT#_platform#COPIES…`.
    pub const COPIES: Space = Space("COPIES");
    /// The imports' deadline list, in the platform's partition: `TENANT#_platform#IMPORTS_DUE#…`.
    pub const IMPORTS_DUE: Space = Space("IMPORTS_DUE");
    /// The control plane's requests, each answered once, in the platform's partition:
    /// `TENANT#_platform#CONTROL…`.
    pub const CONTROL: Space = Space("CONTROL");
}

/// Every entity kind the routes store.
pub const ENTITIES: [EntityKind; 14] = [
    PRODUCT,
    EMPLOYEE,
    DEPARTMENT,
    MEMBER,
    SESSION,
    CHILD_SESSION,
    USER,
    EMAIL,
    ORDER,
    ORDER_SUMMARY,
    ORDER_DATE,
    ORDER_LINE,
    TRANSFER,
    INTEGRATION,
];

/// The fixed partition space of key segment `kind`, if it is one.
pub fn fixed_space(kind: &str) -> Option<FixedSpace> {
    FIXED_SPACES.into_iter().find(|s| s.kind == kind)
}

/// The fixed spaces of write shards (the tenant's shard count), in walk order: what a re-sharding
/// moves.
pub fn write_shard_spaces() -> impl Iterator<Item = FixedSpace> {
    FIXED_SPACES
        .into_iter()
        .filter(|s| s.partitions == Partitions::TenantShards)
}

/// Whether the telemetry key shape of a partition of segment `kind` keeps its shard: a fixed space
/// that says so, or a GSI1 partition sharded by month.
pub fn shard_in_key_shape(kind: &str) -> bool {
    fixed_space(kind).is_some_and(|s| s.shard_in_key_shape)
        || ENTITIES
            .iter()
            .any(|e| matches!(e.gsi1, Gsi1::MonthShards { partition } if partition == kind))
}

/// Whether the partitions of key segment `kind` hold the routes' entities (what a per-tenant
/// restore makes equal to its source): the write shards and the id-named partitions of an entity
/// kind. Not the machinery's own (usage counters, quota windows, the record, idempotency records,
/// imports, tombstones).
pub fn holds_entities(kind: &str) -> bool {
    ENTITIES.iter().any(|e| e.lives_in(kind))
}

/// Whether a per-tenant restore makes the partitions of key segment `kind` equal to its source:
/// they hold the routes' entities ([`holds_entities`]), and none that grants access
/// ([`EntityKind::grants_access`]).
pub fn restored(kind: &str) -> bool {
    holds_entities(kind) && !ENTITIES.iter().any(|e| e.grants_access && e.lives_in(kind))
}

/// The entity kind bulk imports take by `name`.
/// Whether items stored with the `kind` attribute `stored_as` are sealed.
pub fn sealed(stored_as: &str) -> bool {
    ENTITIES
        .iter()
        .any(|e| e.stored_as == stored_as && e.sealed)
}

/// Whether items stored as `stored_as` live in partitions named by an id (`Home::ById`): their
/// partition key never changes (no re-sharding moves them), so sealing may bind it.
pub fn partition_named_by_id(stored_as: &str) -> bool {
    ENTITIES
        .iter()
        .any(|e| e.stored_as == stored_as && e.home == Home::ById)
}

pub fn importable(name: &str) -> Option<EntityKind> {
    ENTITIES.into_iter().find(|e| e.import_as == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_order_is_the_stored_one() {
        // Checkpoints and cursors name positions in this order: it may only grow at the end.
        let kinds: Vec<&str> = FIXED_SPACES.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["PRODUCT", "HR", "USAGE", "RATE", "TENANT"]);
        let moved: Vec<&str> = write_shard_spaces().map(|s| s.kind).collect();
        assert_eq!(moved, ["PRODUCT", "HR"]);
    }

    #[test]
    fn what_each_kind_is_follows_from_its_declaration() {
        let (resharded, by_id): (Vec<EntityKind>, _) =
            ENTITIES.into_iter().partition(|e| e.resharded());
        assert_eq!(resharded, [PRODUCT, EMPLOYEE, DEPARTMENT]);
        assert!(resharded.iter().all(|e| !e.catalogued()));
        assert!(by_id.iter().all(|e| e.catalogued()), "{by_id:?}");
        for kind in ["PRODUCT", "HR", "USAGE", "ORDERS"] {
            assert!(shard_in_key_shape(kind), "{kind}");
        }
        for kind in ["RATE", "TENANT", "SESSION", "USER"] {
            assert!(!shard_in_key_shape(kind), "{kind}");
        }
        for kind in [
            "PRODUCT",
            "HR",
            "SESSION",
            "USER",
            "EMAIL",
            "ORDER",
            "DEPARTMENT",
        ] {
            assert!(holds_entities(kind), "{kind}");
        }
        for kind in [
            "USAGE",
            "RATE",
            "TENANT",
            "IDEMPOTENCY",
            "IMPORT",
            "DELETED",
            "SEALING",
        ] {
            assert!(!holds_entities(kind), "{kind}");
        }
        assert_eq!(importable("products"), Some(PRODUCT));
        assert_eq!(importable("employees"), Some(EMPLOYEE));
        assert_eq!(importable("members"), None);
    }

    #[test]
    fn every_home_is_a_declared_space() {
        for e in ENTITIES {
            if let Home::Fixed(space) = e.home {
                assert!(fixed_space(space).is_some(), "{e:?}");
            }
        }
    }
}

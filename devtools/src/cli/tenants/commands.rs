//! The command line of `pooltable tenants …` (clap): its commands and their options.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum Tenants {
    /// Onboard a tenant: its record, its limits, and (placement own) its own table.
    Onboard {
        tenant: String,
        /// basic, standard, premium, or custom with its limits (standard when left out; custom
        /// when the limits are given).
        #[arg(long)]
        tier: Option<String>,
        #[command(flatten)]
        limits: CustomLimits,
        /// Product and HR shards (4 when left out, whatever the tier).
        #[arg(long)]
        shards: Option<u32>,
        #[arg(long, value_parser = ["pool", "own"])]
        placement: Option<String>,
        /// A KMS key of the tenant's own that wraps its data key (BYOK; where tenants have keys).
        #[arg(long)]
        kms_key_arn: Option<String>,
    },
    /// The tenant's record, with any operation in progress.
    Get { tenant: String },
    /// Refuse every tenant route until resumed.
    Suspend { tenant: String },
    /// Serve a suspended tenant again.
    Resume { tenant: String },
    /// Change the tenant's tier, and so its limits.
    Tier {
        tenant: String,
        /// basic, standard, premium, or custom with its limits.
        tier: String,
        #[command(flatten)]
        limits: CustomLimits,
    },
    /// Seal the items of a tenant onboarded without a key under a key of its own, online.
    Encrypt {
        tenant: String,
        #[command(flatten)]
        wait: Wait,
    },
    /// Make the next version of the tenant's key: it seals from `newestSealsFrom`; nothing sealed is
    /// rewritten.
    RotateKey { tenant: String },
    /// Re-shard the tenant's products and HR items, online.
    Reshard {
        tenant: String,
        shards: u32,
        #[command(flatten)]
        lanes: Lanes,
        #[command(flatten)]
        wait: Wait,
    },
    /// Move the tenant between the pool and its own table, online.
    Move {
        tenant: String,
        #[arg(value_parser = ["own", "pool"])]
        placement: String,
        #[command(flatten)]
        lanes: Lanes,
        #[command(flatten)]
        wait: Wait,
    },
    /// Restore the tenant's items from a restored copy of the table or a point in time, or abort
    /// the restore that runs.
    Restore {
        tenant: String,
        #[command(flatten)]
        source: RestoreSource,
        /// Count what the restore would put and delete; change nothing.
        #[arg(long, conflicts_with = "abort")]
        dry_run: bool,
        /// Restore again from the source the last restore used (without it, that call answers the
        /// last restore's report and restores nothing).
        #[arg(long, conflicts_with = "abort")]
        again: bool,
        #[command(flatten)]
        lanes: Lanes,
        #[command(flatten)]
        wait: Wait,
    },
    /// Offboard the tenant: every item deleted, its report kept.
    Offboard {
        tenant: String,
        #[command(flatten)]
        lanes: Lanes,
        #[command(flatten)]
        wait: Wait,
    },
    /// Every export page, as NDJSON on stdout; a failed page names the cursor to resume from.
    Export {
        tenant: String,
        /// Resume from this page's cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// Items a page (1 to 1,000; the API's default when left out).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: Option<u64>,
    },
    /// Erase one of the tenant's users and every item of its own, for good: no restore brings it
    /// back. Prints what was deleted (the same report on a retry).
    EraseUser { tenant: String, user: String },
    /// Calls and capacity units per route and day.
    Usage {
        tenant: String,
        /// The first day (default: 29 days ago).
        #[arg(long)]
        from: Option<chrono::NaiveDate>,
        /// The last day (default: today).
        #[arg(long)]
        to: Option<chrono::NaiveDate>,
    },
}

/// `--wait`.
#[derive(Debug, Clone, Copy, Args)]
pub struct Wait {
    /// Follow the operation until it has ended, after each Retry-After the API gives.
    #[arg(long)]
    pub(super) wait: bool,
}

/// `--requests-per-second` and `--capacity-units-per-second`: tier custom's limits, both or neither.
#[derive(Debug, Clone, Copy, Args)]
pub struct CustomLimits {
    /// Tier custom: the API requests a second the tenant may make.
    #[arg(long, requires = "capacity_units_per_second")]
    pub(super) requests_per_second: Option<u32>,
    /// Tier custom: the DynamoDB capacity units a second (read and write, table and index) the
    /// tenant may use.
    #[arg(long, requires = "requests_per_second")]
    pub(super) capacity_units_per_second: Option<u32>,
}

impl CustomLimits {
    /// The request's `limits`, when given.
    pub(super) fn limits(self) -> Option<serde_json::Value> {
        let (requests, units) = (self.requests_per_second?, self.capacity_units_per_second?);
        Some(serde_json::json!({"requestsPerSecond": requests, "capacityUnitsPerSecond": units}))
    }

    /// The tier asked: `tier`, else custom when the limits are given, else standard.
    pub(super) fn tier_or_default(self, tier: Option<String>) -> String {
        tier.unwrap_or_else(|| match self.limits() {
            Some(_) => "custom".into(),
            None => "standard".into(),
        })
    }

    /// `body` with the limits, when given (left out otherwise: a named tier's request has none).
    pub(super) fn on(self, mut body: serde_json::Value) -> serde_json::Value {
        if let Some(limits) = self.limits() {
            body["limits"] = limits;
        }
        body
    }
}

/// `--lanes`.
#[derive(Debug, Clone, Copy, Args)]
pub struct Lanes {
    /// The lanes the operation runs in as it starts, 1 to 64: its rate (each lane is paced at a
    /// partition's write rate); the deployment's LIFECYCLE_LANES when left out.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(super) lanes: Option<u64>,
}

impl Lanes {
    /// `call` asking these lanes, when asked.
    pub(super) fn on<C>(self, call: C, ask: impl FnOnce(C, u64) -> C) -> C {
        match self.lanes {
            Some(lanes) => ask(call, lanes),
            None => call,
        }
    }
}

/// Where a restore reads from, or its abort.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct RestoreSource {
    /// A restored copy of the table (`<table>-restore-…`).
    #[arg(long)]
    pub(super) from_table: Option<String>,
    /// A point in time (RFC 3339) within the table's recovery window.
    #[arg(long)]
    pub(super) point_in_time: Option<String>,
    /// Abort the restore that runs: it ends abandoned, with the counts of what it did.
    #[arg(long)]
    pub(super) abort: bool,
}

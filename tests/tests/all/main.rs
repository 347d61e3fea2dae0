//! Every integration test, in one binary: one link of the AWS SDK instead of one per file. Each
//! file is a module (`cargo test -p integration --test all users::` runs one), and its tests run
//! on the threads of this one process, beside every other file's: none may set process-wide state
//! (environment variables, a global subscriber) that another reads.

mod attack_matrix;
mod capacity_quota;
mod churn;
mod cli_walk;
mod cognito;
mod consumed_capacity;
mod control_plane;
mod entities;
mod erasures;
mod events;
mod every_route;
mod fanout_budget;
mod faults;
mod foundation;
mod generated;
mod hot_lists;
mod iam_engine;
mod idempotency;
mod imports;
mod isolation_property;
mod key_rotation;
mod lanes;
mod lifecycle;
mod lifecycle_events;
mod load;
mod logs;
mod lost_success;
mod metrics;
mod moving;
mod offboarding;
mod online_keying;
mod own_table_management;
mod page_size;
mod placement;
mod platform_sessions;
mod quota_fail_open;
mod quotas;
mod read_cache;
mod record_writes;
mod request_counts;
mod resharding;
mod restore;
mod roles;
mod sessions;
mod sharding;
mod signing_keys;
mod table_audit;
mod table_key;
mod tenant_keys;
mod throttling;
mod transactions;
mod usage;
mod users;

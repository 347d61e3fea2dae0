//! The test harness: a fresh table (created from template.yaml) per test on the DynamoDB Local and
//! moto started by `scripts/test.sh`, an `App` wired to them with a controllable clock and a request
//! counter, and API Gateway v2 events built the way API Gateway sends them.
//!
//! A missing local stack is a failure, never a skip.

pub mod api;
mod aside;
pub mod client;
pub mod dispatch;
pub mod fixtures;
pub mod iam;
pub mod import_queue;
pub mod judge;
pub mod keys;
pub mod lane_pump;
pub mod lifecycle_bus;
pub mod process;
pub mod routes;
pub mod runtime_api;
pub mod state;
pub mod template;

mod faults;
mod harness;
mod operations;
mod requests;

pub use aside::{aside, Aside};
pub use faults::{Faults, Phase, StsFaults, TestInterceptor};
pub use harness::{
    http_get_json, real_now_millis, test_cursor_key, test_cursor_keys, unique, Harness,
};
pub use operations::{
    drive, drive_killed_after, drive_runs, drive_to_end, export_page, export_pages,
    offboard_to_end, onboard, onboard_at_max_limits, onboard_custom, onboard_own, onboard_tier,
    onboarded, onboarded_on_shards, sorted_text, step_to_end, step_to_end_with_kills, units_used,
};
pub use requests::{event, resp, Auth, FromEvent, Resp};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use shared::identity::clock::Clock;

pub use api::{operator, Client};
pub use dispatch::dispatch;
pub use state::sending_to;

pub const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/pooltable-test-tenant-access";
/// The role the operator paths' sessions assume (`TENANT_OPERATOR_ROLE_ARN`).
pub const OPERATOR_ROLE_ARN: &str = "arn:aws:iam::123456789012:role/pooltable-test-tenant-operator";

/// The local stack's endpoints, from the environment `scripts/test.sh` sets.
pub fn endpoints() -> (String, String) {
    let get = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: integration tests need DynamoDB Local and moto. \
                 Run them with ./scripts/test.sh, which starts both."
            )
        })
    };
    (
        get("AWS_ENDPOINT_URL_DYNAMODB"),
        get("AWS_ENDPOINT_URL_STS"),
    )
}

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct TestClock(AtomicU64);

impl TestClock {
    pub fn set_millis(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    pub fn advance_seconds(&self, s: u64) {
        self.0.fetch_add(s * 1000, Ordering::SeqCst);
    }
    pub fn advance_millis(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Counts DynamoDB requests that actually went on the wire, by operation, and the peak in flight.
#[derive(Debug, Default)]
pub struct RequestCounter {
    sent: Mutex<HashMap<String, usize>>,
    in_flight: AtomicUsize,
    pub peak_in_flight: AtomicUsize,
}

impl RequestCounter {
    pub fn total(&self) -> usize {
        self.sent.lock().unwrap().values().sum()
    }
    pub fn by_operation(&self) -> HashMap<String, usize> {
        self.sent.lock().unwrap().clone()
    }
    pub fn reset(&self) {
        self.sent.lock().unwrap().clear();
        self.peak_in_flight.store(0, Ordering::SeqCst);
    }
}

/// Log output captured in memory: a `MakeWriter` for the production JSON subscriber in log tests.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Captures this thread's logs in the production JSON format until the guard is dropped (a
    /// thread's default, never the process's: other tests run on other threads).
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let guard = tracing::subscriber::set_default(shared::service::runtime::json_subscriber(
            logs.clone(),
        ));
        // A log line's callsite that another test's thread was registering as this subscriber came
        // in may cache "never" (tracing-core lists a new callsite, then stores the interest of the
        // subscribers it saw, over the rebuild this one's arrival made in between): wait out that
        // window and rebuild every callsite's interest, so no line of this test is dropped by
        // another test's timing.
        std::thread::sleep(std::time::Duration::from_millis(20));
        tracing::callsite::rebuild_interest_cache();
        (logs, guard)
    }

    /// Every line captured so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = tracing_subscriber::fmt::writer::MutexGuardWriter<'a, Vec<u8>>;
    fn make_writer(&'a self) -> Self::Writer {
        self.0.make_writer()
    }
}

/// Declares `struct Tenant<'a> { h, auth }` in a test file, with `new(h, prefix)` (a fresh tenant)
/// and `name()`; each file adds its own route methods to it.
#[macro_export]
macro_rules! tenant_client {
    () => {
        struct Tenant<'a> {
            h: &'a $crate::Harness,
            auth: $crate::Auth,
        }

        impl<'a> Tenant<'a> {
            /// A fresh tenant, onboarded (1 shard): every tenant route needs a tenant record.
            async fn new(h: &'a $crate::Harness, prefix: &str) -> Self {
                Self::with_shards(h, prefix, 1).await
            }

            /// A fresh tenant, onboarded with `shards` shards.
            async fn with_shards(h: &'a $crate::Harness, prefix: &str, shards: u32) -> Self {
                let name = $crate::unique(prefix);
                $crate::onboard(h, &name, shards).await;
                Self {
                    h,
                    auth: $crate::Auth::Tenant(name),
                }
            }

            /// Two fresh tenants on `h` (1 shard each): the isolation tests' owner and other.
            #[allow(dead_code)]
            async fn two(h: &'a $crate::Harness, prefixes: [&str; 2]) -> (Self, Self) {
                let [a, b] = prefixes;
                (Self::new(h, a).await, Self::new(h, b).await)
            }

            /// The tenant's client, for its route methods.
            #[allow(dead_code)]
            fn client(&self) -> $crate::Client<'a> {
                self.h.caller(&self.auth)
            }

            #[allow(dead_code)]
            fn name(&self) -> String {
                match &self.auth {
                    $crate::Auth::Tenant(t) => t.clone(),
                    _ => unreachable!(),
                }
            }
        }
    };
}

/// Every `.rs` file under `dir`, at any depth: for the tests that read the workspace's source.
pub fn rust_files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files_under(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

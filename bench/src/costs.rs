//! Figures 8 and 9, what reads cost: a full walk's Queries and RCU against the raw floor, and the
//! RCU of a page of every list route against the same page read from one partition.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::routes::params;
use integration::{onboard_at_max_limits as onboard, unique, Auth, Harness};
use serde_json::json;
use shared::identity::ids::TenantId;
use shared::identity::keys::{kind, shard_pk};
use shared::App;

use crate::apps::Target;
use crate::big_tenants;
use crate::fixtures::{parent_session, seed_lists, Fixture};
use crate::report::{stat, Report};
use crate::scatter::raw_walk;

/// 8 and 9, products: the full walk against one raw paginated Query per shard, and the RCU of one
/// ordered page against the same page unsharded.
pub(crate) async fn walk_and_page_costs(
    h: &Harness,
    target: &Target,
    fx: &Fixture,
    report: &mut Report,
) {
    let (app, raw) = (&target.app, &target.raw);
    let mut unsharded_page_rcu: BTreeMap<u32, f64> = BTreeMap::new();
    for (shards, st) in &fx.scatter_tenants {
        let shards = *shards;
        let tid = TenantId::parse(st).unwrap();
        let auth = Auth::Tenant(st.clone());
        // ---- 8. full walk: every item through `?order=unordered` in pages of 1,000, against the
        // floor: one raw paginated Query per shard with the same Limit (Queries and RCU from
        // ConsumedCapacity, both in this run)
        let (walk_stat, walk_queries, walk_rcu) = {
            let mut times = Vec::new();
            let (mut queries, mut rcu) = (0u32, 0.0f64);
            for run in 0..4 {
                let (ms, q, r) = big_tenants::walk(app, &tid, shards).await;
                if run > 0 {
                    times.push(ms);
                }
                (queries, rcu) = (q, r);
            }
            (stat(times), queries, rcu)
        };
        let (floor_ms, floor_queries, floor_rcu) = raw_walk(
            raw,
            &h.table,
            &tid,
            shards,
            Some(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total),
        )
        .await;
        report.add(
            &format!("8. full walk {shards:>2} shards: 2,000 items, ?order=unordered, pages of 1,000"),
            &walk_stat,
            format!(
                "{walk_queries} Queries vs floor {floor_queries} ({:.2}x), {walk_rcu:.1} RCU vs floor {floor_rcu:.1} ({:.2}x) (targets <= 1.25x); floor (sequential raw Queries) {floor_ms:.1} ms",
                f64::from(walk_queries) / f64::from(floor_queries),
                walk_rcu / floor_rcu
            ),
        );
        // ---- 9. cost per page: the RCU DynamoDB reports (ConsumedCapacity) for the first ordered
        // page of 25 and of 100 products, next to the same page read unsharded (one raw Query of
        // one partition holding every item: the 1-shard tenant's, measured in its iteration)
        for page in [25u32, 100] {
            let (rcu, queries) = page_rcu(app, "query-tenant-products", page, &[], &auth).await;
            if shards == 1 {
                let unsharded = raw_page_rcu(
                    raw,
                    &h.table,
                    None,
                    ("PK", shard_pk(&tid, kind::PRODUCT, 0)),
                    Some(shared::identity::keys::entity_sk_prefix(
                        &tid,
                        kind::PRODUCT,
                    )),
                    page,
                )
                .await;
                unsharded_page_rcu.insert(page, unsharded);
            }
            let unsharded = unsharded_page_rcu.get(&page).copied().unwrap_or(f64::NAN);
            report.fact(
                &format!(
                    "9. cost per ordered page of {page:>3}, {shards:>2} shards (RCU): products"
                ),
                json!(rcu),
                &format!(
                    "{queries} Queries; unsharded page {unsharded:.1} RCU ({:.2}x)",
                    rcu / unsharded
                ),
            );
        }
    }
}

/// The RCU (and requests) of the first page of `limit` items of list route `bin`, from the
/// ConsumedCapacity DynamoDB returned for the handler's own requests.
async fn page_rcu(
    app: &App,
    bin: &str,
    limit: u32,
    extra: &[(&str, &str)],
    auth: &Auth,
) -> (f64, u32) {
    page_rcu_at(app, bin, &[], limit, extra, auth).await
}

async fn page_rcu_at(
    app: &App,
    bin: &str,
    path: &[(&str, &str)],
    limit: u32,
    extra: &[(&str, &str)],
    auth: &Auth,
) -> (f64, u32) {
    let meta = Arc::new(shared::store::client::meter::RequestMeta::default());
    let limit = limit.to_string();
    let mut query = vec![("limit", limit.as_str())];
    query.extend_from_slice(extra);
    let r = shared::store::client::meter::scope(
        meta.clone(),
        integration::Client::new(app, auth.clone())
            .query(&query)
            .call(bin, &params(path), None),
    )
    .await;
    assert_eq!(r.status, 200, "{bin}: {}", r.body);
    let items = r.body["items"].as_array().map_or(0, Vec::len);
    // a full page, but a session has at most MAX_CHILDREN children
    let full = (limit.parse::<usize>().unwrap()).min(sessions::model::MAX_CHILDREN as usize);
    assert!(items >= full, "{bin}: a page of {items} items, not {full}");
    (meta.read_capacity_units(), meta.dynamodb_requests())
}

/// The RCU of one raw Query of `limit` items from one partition (`index`'s when given), optionally
/// narrowed to sort keys beginning with `prefix`, newest first like the list routes.
async fn raw_page_rcu(
    raw: &aws_sdk_dynamodb::Client,
    table: &str,
    index: Option<&str>,
    (key_attr, key): (&str, String),
    prefix: Option<String>,
    limit: u32,
) -> f64 {
    let sort_attr = if key_attr == "PK" { "SK" } else { "PK" };
    let mut q = raw
        .query()
        .table_name(table)
        .set_index_name(index.map(str::to_owned))
        .expression_attribute_names("#k", key_attr)
        .expression_attribute_values(":k", AttributeValue::S(key))
        .limit(limit as i32)
        .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total);
    q = match prefix {
        Some(p) => q
            .key_condition_expression("#k = :k AND begins_with(#s, :p)")
            .expression_attribute_names("#s", sort_attr)
            .expression_attribute_values(":p", AttributeValue::S(p)),
        None => q.key_condition_expression("#k = :k"),
    };
    let out = q.send().await.unwrap();
    assert_eq!(out.count as u32, limit, "the raw page is full");
    out.consumed_capacity()
        .and_then(|c| c.capacity_units())
        .unwrap_or(0.0)
}

/// A sharded list route, and where the 1-shard tenant holds the same items in one partition.
struct ListCost {
    name: &'static str,
    bin: &'static str,
    query: &'static [(&'static str, &'static str)],
    index: Option<&'static str>,
    partition: (&'static str, String),
    prefix: Option<String>,
}

/// 9b. Cost per page of the other list routes: employees, departments and orders at 1/4/16/64
/// shards next to the same page unsharded; the single-partition lists (a customer's sessions, a
/// session's children, a department's members) once, as shards do not apply to them.
pub(crate) async fn list_route_costs(h: &Harness, target: &Target, report: &mut Report) {
    const ITEMS: usize = 120;
    // Each route's unsharded page, by page size: measured with the 1-shard tenant, the first.
    let mut unsharded: BTreeMap<(&str, u32), f64> = BTreeMap::new();
    for shards in [1u32, 4, 16, 64] {
        let tn = unique(&format!("cost{shards}"));
        onboard(h, &tn, shards).await;
        let t = TenantId::parse(&tn).unwrap();
        let auth = Auth::Tenant(tn.clone());
        seed_lists(&target.app, &auth, ITEMS, shards == 1).await;
        for route in sharded_list_routes(&t) {
            sharded_list_cost(h, target, &auth, shards, route, &mut unsharded, report).await;
        }
        if shards == 1 {
            single_partition_list_costs(&target.app, &auth, report).await;
        }
    }
}

/// The sharded list routes of `t`, each with where the 1-shard tenant holds its items.
fn sharded_list_routes(t: &TenantId) -> [ListCost; 3] {
    let month = shared::identity::keys::tenant_prefix(t) + "ORDERS#2026-11#0";
    [
        ListCost {
            name: "employees",
            bin: "list-employees",
            query: &[],
            index: None,
            partition: ("PK", shard_pk(t, kind::HR, 0)),
            prefix: Some(shared::identity::keys::entity_sk_prefix(t, kind::EMPLOYEE)),
        },
        ListCost {
            name: "departments",
            bin: "list-departments",
            query: &[],
            index: None,
            partition: ("PK", shard_pk(t, kind::HR, 0)),
            prefix: Some(shared::identity::keys::entity_sk_prefix(
                t,
                kind::DEPARTMENT,
            )),
        },
        ListCost {
            name: "orders",
            bin: "list-tenant-orders",
            query: &[("from", "2026-11-01"), ("to", "2026-11-30")],
            index: Some(shared::identity::keys::GSI1),
            partition: ("SK", month),
            prefix: None,
        },
    ]
}

/// The RCU of a page of 25 and of 100 of sharded list `route` for `auth`'s tenant on `shards`
/// shards, next to the same page unsharded (read into `unsharded` when `shards` is 1).
async fn sharded_list_cost(
    h: &Harness,
    target: &Target,
    auth: &Auth,
    shards: u32,
    route: ListCost,
    unsharded: &mut BTreeMap<(&'static str, u32), f64>,
    report: &mut Report,
) {
    let ListCost {
        name,
        bin,
        query: extra,
        index,
        partition: key,
        prefix,
    } = route;
    for page in [25u32, 100] {
        let (rcu, queries) = page_rcu(&target.app, bin, page, extra, auth).await;
        if shards == 1 {
            let one = raw_page_rcu(
                &target.raw,
                &h.table,
                index,
                key.clone(),
                prefix.clone(),
                page,
            )
            .await;
            unsharded.insert((name, page), one);
        }
        let one = unsharded.get(&(name, page)).copied().unwrap_or(f64::NAN);
        report.fact(
            &format!("9. cost per ordered page of {page:>3}, {shards:>2} shards (RCU): {name}"),
            json!(rcu),
            &format!(
                "{queries} Queries; unsharded page {one:.1} RCU ({:.2}x)",
                rcu / one
            ),
        );
    }
}

/// The RCU of a page of 25 and of 100 of the single-partition lists: a customer's sessions, a
/// session's children and a department's members.
async fn single_partition_list_costs(app: &App, auth: &Auth, report: &mut Report) {
    for page in [25u32, 100] {
        for (name, bin, path) in [
            (
                "sessions of a customer",
                "get-sessions-by-customer-id",
                vec![("customerId", "c-cost")],
            ),
            (
                "children of a session",
                "get-child-sessions-by-session-id",
                vec![("sessionId", "")],
            ),
            (
                "members of a department",
                "list-department-employees",
                vec![("departmentId", "d-000")],
            ),
        ] {
            let parent = parent_session(app, auth).await;
            // the children's route is read under the session `seed_lists` gave them
            let path: Vec<(&str, &str)> = path
                .into_iter()
                .map(|(k, v)| {
                    if k == "sessionId" {
                        (k, parent.as_str())
                    } else {
                        (k, v)
                    }
                })
                .collect();
            let (rcu, queries) = page_rcu_at(app, bin, &path, page, &[], auth).await;
            report.fact(
                &format!("9. cost per page of {page:>3} (RCU): {name}"),
                json!(rcu),
                &format!("{queries} Queries; one partition at any shard count"),
            );
        }
    }
}

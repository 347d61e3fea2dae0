//! Issue 58: an offboarding's, a re-sharding's and a move's walk split into lanes, each with its
//! own checkpoint, stepped by the lane worker from the lane queue (`tenants::work_lanes`), planned
//! and sent again by calls and the driver. Every item is deleted or moved exactly once, whoever
//! steps a lane, however often its message is delivered, and wherever a worker dies.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use integration::lane_pump::{Delivery, LanePump};
use integration::{onboard, unique, Auth, Harness, Resp};
use serde_json::{json, Value};
use shared::identity::ids::TenantId;
use shared::identity::keys::raw_key;
use shared::store::lifecycle::offboarding::{kind_of, DELETION_DELAY_SECONDS};

use crate::offboarding::seed_every_kind;

type Item = HashMap<String, AttributeValue>;

async fn offboard(h: &Harness, tenant: &str, operator: &Auth) -> Resp {
    h.caller(operator)
        .call("offboard-tenant", &[("tenantId", tenant)], None)
        .await
}

pub(crate) async fn get_tenant(h: &Harness, tenant: &str, operator: &Auth) -> Resp {
    h.caller(operator)
        .call("get-tenant", &[("tenantId", tenant)], None)
        .await
}

pub(crate) fn sorted(mut items: Vec<Item>) -> Vec<Item> {
    items.sort_by_key(|i| {
        (
            i["PK"].as_s().unwrap().clone(),
            i["SK"].as_s().unwrap().clone(),
        )
    });
    items
}

/// What an offboarding's report must say of `items`: each counted once, by kind.
fn counted(tenant: &str, items: &[Item]) -> Value {
    let t = TenantId::parse(tenant).unwrap();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for item in items {
        *expected.entry(kind_of(&t, item)).or_default() += 1;
    }
    json!(expected)
}

/// Lets the workers take the lane queue, every third delivery twice, while `running()`: the rounds
/// it took (at most 200).
pub(crate) async fn pump_while<F: std::future::Future<Output = bool>>(
    h: &Harness,
    pump: &LanePump,
    running: impl Fn() -> F,
) -> usize {
    let every_third_twice = |i| match i % 3 {
        0 => Delivery::Twice,
        _ => Delivery::Once,
    };
    pump_delivering(h, pump, every_third_twice, running).await
}

/// [`pump_while`], each delivery as `fate` says for its index in a round.
async fn pump_delivering<F: std::future::Future<Output = bool>>(
    h: &Harness,
    pump: &LanePump,
    fate: impl Fn(usize) -> Delivery + Copy,
    running: impl Fn() -> F,
) -> usize {
    let mut rounds = 0;
    while running().await {
        let got = pump.round(&h.app, 10, 4, fate).await;
        if got == 0 {
            // A killed worker's message comes back after the visibility timeout.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        rounds += 1;
        assert!(rounds < 200, "the lanes do not end");
    }
    rounds
}

/// The `moved` of each `kind` event (`reshardingFinished`, `tenantMoveFinished`) about `tenant`
/// that the publisher makes of what `stream` committed since it was last read.
async fn moved_in_finished_events(
    stream: &mut integration::lifecycle_bus::StreamTap,
    tenant: &str,
    kind: &str,
) -> Vec<u64> {
    use shared::store::lifecycle::events::{events_of, Change};
    let image = |i: &serde_dynamo::Item| (!i.is_empty()).then(|| i.clone());
    let mut moved = Vec::new();
    for record in stream.take().await.records {
        let (old, new) = (
            image(&record.change.old_image),
            image(&record.change.new_image),
        );
        let change = Change::parse(&record.event_name).unwrap();
        for event in events_of(change, &record.event_id, old.as_ref(), new.as_ref()).unwrap() {
            if event.detail_type == kind && event.tenant_id == tenant {
                moved.push(event.detail["moved"].as_u64().unwrap());
            }
        }
    }
    moved
}

/// [`pump_while`] the operator's view of `tenant` shows `operation` (`migration`, `move`): until
/// it ends.
pub(crate) async fn pump_until_ended(h: &Harness, pump: &LanePump, tenant: &str, operation: &str) {
    let operator = integration::operator();
    pump_while(h, pump, || async {
        let view = get_tenant(h, tenant, &operator).await;
        view.body.get(operation).is_some()
    })
    .await;
}

/// An operator's re-sharding of `tenant` to `to` (202), and, once items may move, the driver's run
/// that plans its lanes onto `pump`'s queue.
pub(crate) async fn reshard_onto_queue(h: &Harness, pump: &LanePump, tenant: &str, to: u32) {
    use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;
    let started = h.operator().reshard(tenant, to).await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(MOVES_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
}

/// One call's worth of `tenant`'s offboarding (already begun), its lanes as `lanes` says: what a
/// DELETE call does after its first.
async fn advance_on(
    h: &Harness,
    lanes: &tenants::Lanes,
    tenant: &str,
) -> lambda_http::Response<lambda_http::Body> {
    let t = TenantId::parse(tenant).unwrap();
    let db = operator_db(h, &t).await;
    let record = shared::store::tenancy::tenants::read_record_consistent(&db)
        .await
        .unwrap()
        .unwrap();
    tenants::offboard_tenant::advance(&h.app, lanes, &db, record)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_offboarding_in_lanes_deletes_every_item_once_through_duplicates_kills_and_racing_planners(
) {
    // GIVEN a tenant on 16 shards with an item of every kind and 600 products, a neighbour beside
    // it, offboardings split into 4 lanes, and a lane queue whose turns last 150 ms (a lane outlasts
    // a turn) and whose undeleted messages come back after a second
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 4;
    let victim = unique("lanes");
    let neighbour = unique("beside");
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    onboard(&h, &victim, 16).await;
    onboard(&h, &neighbour, 4).await;
    seed_every_kind(&h, &victim, 600).await;
    seed_every_kind(&h, &neighbour, 5).await;
    let victim_prefix = raw_key(&victim, "");
    let neighbour_prefix = raw_key(&neighbour, "");
    let before = h.items_under(&victim_prefix).await;
    let neighbour_before = sorted(h.items_under(&neighbour_prefix).await);
    let pump = LanePump::new(1, Duration::from_millis(150)).await;

    // WHEN an operator offboards it, deletion may start, and the driver and a DELETE call, both
    // with the queue, advance it at the same moment
    assert_eq!(offboard(&h, &victim, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    let (run, call) = tokio::join!(
        integration::drive(&h.app, &pump.lanes),
        advance_on(&h, &pump.lanes, &victim)
    );
    assert_eq!(run.unwrap().pending, 1);
    assert_eq!(call.status(), 202);
    // THEN one of them planned the lanes and sent them, one message a lane; nothing is deleted
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 4);
    assert_eq!(h.items_under(&victim_prefix).await.len(), before.len() + 4);
    // AND GET shows them: four lanes, none done, the walk's partitions, nothing deleted yet
    let shown = get_tenant(&h, &victim, &operator).await;
    let lanes = &shown.body["offboarding"]["lanes"];
    assert_eq!(lanes["lanes"], 4, "{}", shown.body);
    assert_eq!(lanes["lanesDone"], 0, "{}", shown.body);
    assert_eq!(lanes["partitionsWalked"], 0, "{}", shown.body);
    assert!(
        lanes["partitions"].as_u64().unwrap() >= 16 * 2 + 16,
        "{}",
        shown.body
    );
    assert_eq!(shown.body["offboarding"]["deletedTotal"], 0);

    // WHEN the workers take the lanes: the first message delivered twice at once, the second's
    // worker killed 40 ms in
    let received = pump
        .round(&h.app, 10, 4, |i| match i {
            0 => Delivery::Twice,
            1 => Delivery::Killed(40),
            _ => Delivery::Once,
        })
        .await;
    assert_eq!(received, 4);
    // AND, while the offboarding runs, GET shows progress
    let mid = get_tenant(&h, &victim, &operator).await;
    if mid.status == 200 {
        let lanes = &mid.body["offboarding"]["lanes"];
        assert!(lanes["itemsDone"].as_u64().unwrap() > 0, "{}", mid.body);
        assert_eq!(
            mid.body["offboarding"]["deletedTotal"], lanes["itemsDone"],
            "{}",
            mid.body
        );
    }
    // AND every third delivery after is twice, until the tenant is gone
    let rounds = pump_while(&h, &pump, || async {
        get_tenant(&h, &victim, &operator).await.status != 404
    })
    .await;
    // (more turns than lanes: lanes outlasted their turns and went round the queue)
    assert!(rounds > 1, "{rounds}");

    // THEN the report counts every item exactly once, by kind
    let report = offboard(&h, &victim, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(&victim, &before),
        "{}",
        report.body
    );
    assert_eq!(report.body["deletedTotal"], before.len());
    // AND no key of the tenant is left, its lanes included, and the neighbour's items are
    // byte-identical
    assert_eq!(h.items_under(&victim_prefix).await, Vec::<Item>::new());
    assert_eq!(
        sorted(h.items_under(&neighbour_prefix).await),
        neighbour_before
    );
    // AND what is left on the queue is dropped, and nothing reached the dead letters
    pump.drain(&h.app, 4).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

/// A tenant (its id from `name`) of 40 items of every kind, offboarding in 2 lanes past its
/// deletion delay, its lanes not yet planned; with the operator, its items and a queue.
async fn offboarding_in_two_lanes_past_its_delay(
    name: &str,
) -> (Harness, Auth, String, Vec<Item>, LanePump) {
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 2;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let victim = unique(name);
    onboard(&h, &victim, 4).await;
    seed_every_kind(&h, &victim, 40).await;
    let before = h.items_under(&raw_key(&victim, "")).await;
    let pump = LanePump::new(1, Duration::from_secs(5)).await;
    assert_eq!(offboard(&h, &victim, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    (h, operator, victim, before, pump)
}

#[tokio::test]
async fn a_lane_whose_message_is_lost_is_sent_again_once_it_has_not_stepped_for_five_minutes() {
    // GIVEN a tenant offboarding in 2 lanes on the queue, one lane's message lost
    let (h, operator, victim, before, pump) = offboarding_in_two_lanes_past_its_delay("lost").await;
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    let got = pump
        .round(&h.app, 10, 2, |i| match i {
            0 => Delivery::Lost,
            _ => Delivery::Once,
        })
        .await;
    assert_eq!(got, 2);
    // WHEN the driver runs again within five minutes
    h.clock.advance_seconds(60);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN it sends nothing: the lane may still be on its way
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 0);
    let shown = get_tenant(&h, &victim, &operator).await;
    assert_eq!(
        shown.body["offboarding"]["lanes"]["lanesDone"], 1,
        "{}",
        shown.body
    );
    // WHEN five minutes have passed since the lost lane's plan
    h.clock.advance_seconds(5 * 60);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN its lane is sent again, once, and its turn ends the offboarding with every item counted
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);
    pump.drain(&h.app, 2).await;
    let report = offboard(&h, &victim, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(&victim, &before),
        "{}",
        report.body
    );
    assert_eq!(
        h.items_under(&raw_key(&victim, "")).await,
        Vec::<Item>::new()
    );
}

#[tokio::test]
async fn lanes_planned_whose_send_failed_are_sent_by_the_next_driver_run_not_five_minutes_later() {
    use tenants::lane_walk::UNSENT_AFTER_MS;
    // GIVEN a tenant offboarding in 2 lanes, past its deletion delay
    let (h, operator, victim, before, pump) =
        offboarding_in_two_lanes_past_its_delay("unsent").await;
    // WHEN the driver plans its lanes and SQS cannot be reached to take their messages
    let unreachable = pump
        .queues
        .sqs
        .config()
        .to_builder()
        .endpoint_url("http://127.0.0.1:9")
        .build();
    let refusing = tenants::Lanes::on_queue(tenants::LaneQueue {
        client: aws_sdk_sqs::Client::from_conf(unreachable),
        url: pump.queues.url.clone(),
    });
    let _ = integration::drive(&h.app, &refusing).await;
    let shown = get_tenant(&h, &victim, &operator).await;
    assert_eq!(
        shown.body["offboarding"]["lanes"]["lanes"], 2,
        "{}",
        shown.body
    );
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 0);
    // AND the driver runs again within the time a planner's own send takes
    h.clock.advance_seconds(UNSENT_AFTER_MS / 1000 - 1);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN it sends nothing yet
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 0);
    // WHEN the driver's next run comes, a minute on
    h.clock.advance_seconds(60);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN both lanes are sent, once (before the mend: nothing until five minutes had passed)
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 2);
    // AND a later run sends them no more: they are noted sent
    h.clock.advance_seconds(60);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 2);
    // AND their turns end the offboarding, every item deleted and counted once
    offboarded_exactly_once(&h, &pump, &operator, &victim, &before).await;
}

/// `tenant`'s table as the operator reaches it.
async fn operator_db(h: &Harness, tenant: &TenantId) -> shared::store::client::scoped::TenantDb {
    let db = h
        .app
        .operator_db(tenant, shared::isolation::policy::Scope::Operator);
    db.await.unwrap().unwrap()
}

/// A tenant (its id from `name`) offboarding in one lane on the queue, whose turns of 150 ms leave
/// it more to walk, and whose undeleted messages come back after a second: the lane planned and its
/// message sent by the driver. With the operator, the tenant's items, and the pump.
async fn offboarding_in_one_lane_on_the_queue(
    name: &str,
) -> (Harness, Auth, String, Vec<Item>, LanePump) {
    offboarding_in_lanes_on_the_queue(name, 1).await
}

/// [`offboarding_in_one_lane_on_the_queue`], in `lanes` lanes.
async fn offboarding_in_lanes_on_the_queue(
    name: &str,
    lanes: u32,
) -> (Harness, Auth, String, Vec<Item>, LanePump) {
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = lanes;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let victim = unique(name);
    onboard(&h, &victim, 4).await;
    seed_every_kind(&h, &victim, 600).await;
    let before = h.items_under(&raw_key(&victim, "")).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    assert_eq!(offboard(&h, &victim, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(
        pump.queues.backlog(&pump.queues.url).await,
        u64::from(lanes)
    );
    (h, operator, victim, before, pump)
}

/// Lets the workers take the queue until `victim` is gone; then its report counts each of
/// `before` once, none of its keys is left, and nothing is left on the queue or in its dead
/// letters.
async fn offboarded_exactly_once(
    h: &Harness,
    pump: &LanePump,
    operator: &Auth,
    victim: &str,
    before: &[Item],
) {
    pump_while(h, pump, || async {
        get_tenant(h, victim, operator).await.status != 404
    })
    .await;
    let report = offboard(h, victim, operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(victim, before),
        "{}",
        report.body
    );
    assert_eq!(
        h.items_under(&raw_key(victim, "")).await,
        Vec::<Item>::new()
    );
    pump.drain(&h.app, 1).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

#[tokio::test]
async fn a_lane_step_whose_commits_answer_is_lost_and_retried_counts_each_item_once() {
    // GIVEN a tenant offboarding in one lane on the queue, its report counting what each step
    // deleted
    let (h, operator, victim, before, pump) = offboarding_in_one_lane_on_the_queue("lostans").await;

    // WHEN the lane's next three commits take effect and their answers are lost (a 500 after the
    // commit, as after a timeout on the way back), and the SDK retries each
    h.faults.lose_successes_of("TransactWriteItems", 3);
    assert_eq!(pump.round(&h.app, 10, 1, |_| Delivery::Once).await, 1);
    let left = h.faults.lost_successes_left();
    h.faults.lose_successes(0);

    // THEN each retry is answered as the commit it repeats (the SDK sends one client request token
    // per call, and DynamoDB answers a token it has seen with the commit it made; a retry read as
    // a new transaction would fail its checkpoint's condition: the test passes with the token
    // replaced on each attempt too): the offboarding ends with every item deleted and counted once
    assert_eq!(left, 0, "the lane did not commit three times");
    offboarded_exactly_once(&h, &pump, &operator, &victim, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_whose_lanes_were_folded_after_its_record_was_read_reads_the_record_again_never_showing_the_counts_low(
) {
    // GIVEN a tenant offboarding in one lane on the queue, and an operator's view of it from a
    // second container, which has read the record (the lanes running) and whose read of the lane
    // is held
    // WHEN the workers take the lane to its end (its counts folded into the record, the lane
    // deleted, the offboarding ended), and the view's read goes on
    let (view, items) = view_held_at_a_lane_while_the_lanes_end("fold", 1, |body| {
        a_consistent_read_of_lane(body, 0)
    })
    .await;

    // THEN the view found the lanes gone and read the record again: the tenant is gone (before the
    // mend, 200 with the offboarding running and nothing deleted: a stale record beside lanes
    // already folded)
    assert_eq!(view.status, 404, "{} of {items} items", view.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_that_finds_some_of_its_lanes_folded_reads_the_record_again_never_showing_the_counts_low(
) {
    // GIVEN a tenant offboarding in two lanes on the queue, and an operator's view of it from a
    // second container, which has read the record (the lanes running) and read lane 0, and whose
    // read of lane 1 is held (the lanes are read side by side, not as one snapshot)
    // WHEN the workers take both lanes to their end (their counts folded into the record, the
    // lanes deleted, the offboarding ended), and the view's read of lane 1 goes on
    let (view, items) = view_held_at_a_lane_while_the_lanes_end("halffold", 2, |body| {
        a_consistent_read_of_lane(body, 1)
    })
    .await;

    // THEN the view found fewer lanes than planned and read the record again: the tenant is gone
    // (before the mend, 200 with the offboarding running and only lane 0's deletions counted)
    assert_eq!(view.status, 404, "{} of {items} items", view.body);
}

/// Whether a request `body` is the consistent GetItem of an offboarding's lane `n`.
fn a_consistent_read_of_lane(body: &str, n: u32) -> bool {
    body.contains(&format!("#LANE#offboarding#{n:03}"))
        && body.contains("ConsistentRead")
        && !body.contains("KeyConditionExpression")
}

/// An offboarding in `lanes` lanes on the queue, viewed by an operator from a second container
/// whose request matching `held` (a lane's read) is held (aside: the hold blocks the thread that
/// sends it) while the workers take every lane to its end: the view's answer once let go, and how
/// many items the tenant had.
async fn view_held_at_a_lane_while_the_lanes_end(
    name: &str,
    lanes: u32,
    held: fn(&str) -> bool,
) -> (Resp, usize) {
    use std::sync::Arc;
    let (h, operator, victim, before, pump) = offboarding_in_lanes_on_the_queue(name, lanes).await;
    let viewer = Arc::new(h.another_container().await);
    let mut read = viewer.faults.hold_next_matching(held);
    let view = integration::aside({
        let (viewer, victim, operator) = (viewer.clone(), victim.clone(), operator.clone());
        move || async move { get_tenant(&viewer, &victim, &operator).await }
    });
    read.reached().await;
    pump_while(&h, &pump, || async {
        get_tenant(&h, &victim, &operator).await.status != 404
    })
    .await;
    read.release();
    (view.ended().await, before.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_between_a_re_sharding_noting_its_lanes_count_and_folding_them_counts_each_moved_item_once(
) {
    use shared::identity::shard::shard_for;
    use std::sync::Arc;
    // GIVEN a tenant of 60 products on 4 shards, re-sharding to 16 in one lane on the queue
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 1;
    let t = unique("noted");
    onboard(&h, &t, 4).await;
    let ids: Vec<String> = (0..60).map(|i| format!("p{i:02}")).collect();
    let products = ids.iter().map(|id| (id.clone(), json!({"name": id})));
    h.tenant(&t).put_new_products(products).await;
    let moving = ids
        .iter()
        .filter(|id| shard_for(id, 4) != shard_for(id, 16))
        .count() as u64;
    let pump = Arc::new(LanePump::new(1, Duration::from_millis(150)).await);
    reshard_onto_queue(&h, &pump, &t, 16).await;
    let h = Arc::new(h);

    // WHEN the workers take the lane to its end, whose second transaction (the lanes' fold and the
    // new shard count; the first noted the lanes' count on the record) is held (aside: the hold
    // blocks the thread that sends it)
    let is_fold = |body: &str| body.contains("TransactItems") && body.contains("REMOVE #m");
    let mut fold = h.faults.hold_next_matching(is_fold);
    let workers = integration::aside({
        let (h, pump, t) = (h.clone(), pump.clone(), t.clone());
        move || async move { pump_until_ended(&h, &pump, &t, "migration").await }
    });
    fold.reached().await;
    // AND an operator looks meanwhile
    let viewer = h.another_container().await;
    let view = get_tenant(&viewer, &t, &integration::operator()).await;
    fold.release();
    workers.ended().await;

    // THEN the view counts each moved item once, on the record (before the mend, its lanes showed
    // them a second time beside `itemsMoved`)
    let m = &view.body["migration"];
    let lanes_done = m["lanes"]["itemsDone"].as_u64().unwrap_or(0);
    let shown = m["itemsMoved"].as_u64().unwrap_or(0) + lanes_done;
    assert_eq!(shown, moving, "{}", view.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_delivered_before_its_sender_noted_it_keeps_its_lane_going_when_the_note_lands_mid_turn(
) {
    use std::sync::Arc;
    // GIVEN a tenant offboarding in one lane on the queue
    let (h, operator, victim, before, pump) = offboarding_in_one_lane_on_the_queue("noted").await;
    let (h, pump) = (Arc::new(h), Arc::new(pump));
    // WHEN worker A steps the lane for its turn and sends the next, and its note of that turn
    // (`sentSteps`) is held (aside: the hold blocks the thread that sends it)
    let is_note = |body: &str| body.contains("SET #sent = :steps");
    let mut note = h.faults.hold_next_matching(is_note);
    let a = integration::aside({
        let (h, pump) = (h.clone(), pump.clone());
        move || async move { pump.round(&h.app, 1, 1, |_| Delivery::Once).await }
    });
    note.reached().await;
    // AND worker B takes that next turn at once, and its first step is held
    let is_step = |body: &str| body.contains("TransactItems") && body.contains("#done = :false");
    let mut step = h.faults.hold_next_matching(is_step);
    let b = integration::aside({
        let (h, pump) = (h.clone(), pump.clone());
        move || async move { pump.round(&h.app, 1, 1, |_| Delivery::Once).await }
    });
    step.reached().await;
    // AND A's note lands, then B's step goes on
    note.release();
    assert_eq!(a.ended().await, 1);
    step.release();
    assert_eq!(b.ended().await, 1);

    // THEN B's turn stepped the lane and sent its next: one message goes round for the lane (before
    // the mend, A's note cancelled B's step as a stale copy's, B dropped its message, and the lane
    // had none until the driver sent it again five minutes later)
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);
    // AND the workers take it to the end: every item deleted and counted once
    offboarded_exactly_once(&h, &pump, &operator, &victim, &before).await;
}

#[tokio::test]
async fn a_turn_of_an_earlier_lane_of_the_same_key_is_dropped_and_the_lanes_own_turns_end_it() {
    use shared::store::lifecycle::offboarding::OPERATION;
    // GIVEN a tenant offboarding in one lane on the queue
    let (h, operator, victim, before, pump) =
        offboarding_in_one_lane_on_the_queue("leftover").await;
    // AND on the queue beside its turn, a turn of an earlier lane of the same key, ahead of this
    // lane's steps (a copy that outlived its operation: a re-sharding after another, a restore
    // aborted and started again, reuse the key)
    let tenant = TenantId::parse(&victim).unwrap();
    let keys = h.app.cursor_keys().unwrap();
    let leftover = tenants::LaneMessage::new(&tenant, OPERATION, 0, 50);
    pump.lanes.send(&keys, &[leftover]).await.unwrap();

    // WHEN the workers take the queue until the tenant is gone
    // THEN the leftover was dropped, and the lane's own turns deleted and counted every item once
    // (before the mend: the leftover noted itself as the lane's newest turn, every turn of the
    // lane's own was dropped as stale, and the offboarding never ended)
    offboarded_exactly_once(&h, &pump, &operator, &victim, &before).await;
}

#[tokio::test]
async fn a_lane_message_delivered_again_after_its_turn_is_dropped_as_a_stale_copy_and_one_message_a_lane_goes_round(
) {
    // GIVEN a tenant offboarding in one lane on the queue, whose turns of 150 ms leave it more to
    // walk, and whose undeleted messages come back after a second
    let (h, operator, victim, before, pump) = offboarding_in_one_lane_on_the_queue("stale").await;

    // WHEN a worker steps the lane for its turn, sends its next turn, and dies before answering
    let got = pump.round(&h.app, 10, 1, |_| Delivery::Undeleted).await;
    assert_eq!(got, 1);
    // THEN the lane has two messages: its next turn, and the first, which comes back
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 2);

    // WHEN both are delivered, one after the other, once the first is back
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut delivered = 0;
    while delivered < 2 {
        delivered += pump.round(&h.app, 10, 1, |_| Delivery::Once).await;
    }
    // THEN the copy its lane had stepped past was dropped: one message goes round for the lane
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);

    // WHEN the workers take the queue until the tenant is gone
    // THEN every item was deleted and counted once, and nothing is left on the queue
    offboarded_exactly_once(&h, &pump, &operator, &victim, &before).await;
}

#[tokio::test]
async fn a_lane_stepped_with_no_turn_sent_after_is_taken_up_again_by_its_message_delivered_again() {
    // GIVEN a tenant offboarding in one lane on the queue, its message not yet delivered
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 1;
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    let victim = unique("adopt");
    onboard(&h, &victim, 4).await;
    seed_every_kind(&h, &victim, 600).await;
    let before = h.items_under(&raw_key(&victim, "")).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    assert_eq!(offboard(&h, &victim, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);

    // WHEN the lane is stepped for 300 ms and no turn is sent after: what a worker that died
    // between its steps and its next turn leaves (and a caller with no lane queue)
    let t = TenantId::parse(&victim).unwrap();
    let db = operator_db(&h, &t).await;
    let record = shared::store::tenancy::tenants::read_record_consistent(&db)
        .await
        .unwrap()
        .unwrap();
    let sources = tenants::offboard_tenant::walk_sources(&record).unwrap();
    let work = tenants::lane_walk::LaneWork::Delete;
    let read = |db| async move {
        shared::store::lifecycle::lanes::read(
            &db,
            shared::store::lifecycle::offboarding::OPERATION,
            1,
        )
        .await
        .unwrap()
    };
    let pending = read(db.clone()).await;
    let deadline = std::time::Instant::now() + Duration::from_millis(300);
    tenants::lane_walk::run_lanes(&h.app, &db, &work, &sources, 1, pending, deadline)
        .await
        .unwrap();
    let stepped = read(db.clone()).await;
    assert!(stepped[0].steps > 0 && !stepped[0].done, "{stepped:?}");

    // THEN the message, of an older step number but its lane's newest turn sent, takes the lane
    // up again: its next turn is on the queue
    let got = pump.round(&h.app, 10, 1, |_| Delivery::Once).await;
    assert_eq!(got, 1);
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);
    assert!(read(db.clone()).await[0].steps > stepped[0].steps);
    // AND the workers end the offboarding, every item deleted and counted once
    pump_while(&h, &pump, || async {
        get_tenant(&h, &victim, &operator).await.status != 404
    })
    .await;
    let report = offboard(&h, &victim, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(&victim, &before),
        "{}",
        report.body
    );
    assert_eq!(
        h.items_under(&raw_key(&victim, "")).await,
        Vec::<Item>::new()
    );
}

/// What a tenant's operation shows of its progress in `GET /tenants/{id}`: ended (no record, or no
/// operation running), or work committed.
fn progressed(view: &Resp) -> bool {
    let b = &view.body;
    if view.status == 404 {
        return true;
    }
    let committed = |v: &Value| v.as_u64().is_some_and(|n| n > 0);
    match (b.get("offboarding"), b.get("restore"), b.get("move")) {
        (Some(o), ..) => committed(&o["deletedTotal"]),
        (_, Some(r), _) => committed(&r["steps"]),
        (.., Some(m)) => committed(&m["steps"]),
        _ => true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_offboardings_a_restore_and_a_move_listed_at_once_all_progress_within_three_driver_runs_and_all_end(
) {
    use futures::StreamExt;
    // GIVEN 100 tenants of 3 products each, a tenant of 30 products snapshotted and then damaged,
    // and another of 30 products; offboardings in 4 lanes on the lane queue
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 4;
    let pump = LanePump::new(2, Duration::from_secs(2)).await;
    let small: Vec<String> = (0..100).map(|i| unique(&format!("fair{i:03}"))).collect();
    let products = |t: String, n: usize| {
        let h = &h;
        async move {
            for p in 0..n {
                let r = h
                    .tenant(&t)
                    .put_product(&format!("p{p:02}"), json!({"v": p}))
                    .await;
                assert_eq!(r.status, 201, "{}", r.body);
            }
        }
    };
    futures::stream::iter(small.iter().map(|t| async {
        onboard(&h, t, 1).await;
        products(t.clone(), 3).await;
    }))
    .buffer_unordered(8)
    .collect::<Vec<()>>()
    .await;
    let (restored, moved) = (unique("restored"), unique("moved"));
    for t in [&restored, &moved] {
        onboard(&h, t, 4).await;
        products(t.clone(), 30).await;
    }
    let source = h.snapshot("fair").await;
    for p in 0..10 {
        let r = h
            .tenant(&restored)
            .call(
                "delete-product",
                &[("productId", &format!("p{p:02}"))],
                None,
            )
            .await;
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let mut before = BTreeMap::new();
    for t in &small {
        before.insert(t.clone(), h.items_under(&raw_key(t, "")).await);
    }
    let operator = integration::operator();

    // WHEN all of them start at once: the hundred offboarded, the restore from the snapshot, and
    // the move into the tenant's own table
    for t in &small {
        assert_eq!(offboard(&h, t, &operator).await.status, 202);
    }
    let restore = h
        .operator()
        .restore_tenant(&restored, json!({"from": {"table": source}}))
        .await;
    assert_eq!(restore.status, 202, "{}", restore.body);
    let moving = h.operator().move_to(&moved, "own").await;
    assert_eq!(moving.status, 202, "{}", moving.body);
    h.clock
        .advance_seconds(shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS + 1);
    let everyone: Vec<String> = small
        .iter()
        .cloned()
        .chain([restored.clone(), moved.clone()])
        .collect();

    // THEN within three driver runs, each followed by the lane workers taking the queue, every one
    // of them has committed work (or ended)
    let mut waiting: Vec<String> = everyone.clone();
    for round in 0..3 {
        let run = Box::pin(integration::drive(&h.app, &pump.lanes))
            .await
            .unwrap();
        if round == 0 {
            assert_eq!(run.listed, 102, "{run:?}");
        }
        pump.drain(&h.app, 8).await;
        let mut still = Vec::new();
        for t in waiting {
            if !progressed(&get_tenant(&h, &t, &operator).await) {
                still.push(t);
            }
        }
        waiting = still;
    }
    assert!(waiting.is_empty(), "no progress in three runs: {waiting:?}");

    // AND they all end
    let mut runs = 3;
    loop {
        let run = Box::pin(integration::drive(&h.app, &pump.lanes))
            .await
            .unwrap();
        pump.drain(&h.app, 8).await;
        if run.listed == 0 {
            break;
        }
        runs += 1;
        assert!(runs < 40, "the operations do not end: {run:?}");
    }

    // AND nothing is lost: each offboarded tenant's report counts every item it had, and no key of
    // it is left
    for t in &small {
        let report = offboard(&h, t, &operator).await;
        assert_eq!(report.status, 200, "{t}: {}", report.body);
        assert_eq!(
            report.body["deleted"],
            counted(t, &before[t]),
            "{t}: {}",
            report.body
        );
        assert!(h.items_under(&raw_key(t, "")).await.is_empty(), "{t}");
    }
    // AND the restored tenant has its 30 products back, and the moved one reads its 30 from its own
    // table
    for (t, placement) in [(&restored, "pool"), (&moved, "own")] {
        let view = get_tenant(&h, t, &operator).await;
        assert_eq!(view.body["placement"], placement, "{}", view.body);
        assert_eq!(view.body["status"], "active", "{}", view.body);
        let listed = h
            .tenant(t)
            .query(&[("limit", "100"), ("order", "id")])
            .call("query-tenant-products", &integration::api::NO_PATH, None)
            .await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        assert_eq!(
            listed.ids("productId"),
            (0..30).map(|p| format!("p{p:02}")).collect::<Vec<_>>(),
            "{t}"
        );
    }
}

#[tokio::test]
async fn a_re_sharding_in_lanes_on_the_queue_moves_every_item_once_through_duplicates_and_kills() {
    use shared::identity::keys::{kind, shard_pk};
    use shared::identity::shard::shard_for;
    // GIVEN a tenant of 400 products and an employee in a department on 4 shards, re-shardings in
    // 4 lanes, a lane queue whose turns last 150 ms, and the table's stream read
    let mut h = Harness::with_stream().await;
    h.app.settings.lifecycle_lanes = 4;
    let t = unique("reshard");
    onboard(&h, &t, 4).await;
    seed_every_kind(&h, &t, 400).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    let before = sorted(h.items_under(&raw_key(&t, "")).await);
    let tenant = TenantId::parse(&t).unwrap();
    let rehomed = before
        .iter()
        .filter(|i| shared::store::lifecycle::resharding::new_partition(&tenant, i, 16).is_some())
        .count() as u64;
    let mut stream = integration::lifecycle_bus::StreamTap::open(&h.admin, &h.table).await;

    // WHEN an operator re-shards it to 16, items may move, and the driver plans the lanes
    reshard_onto_queue(&h, &pump, &t, 16).await;
    // THEN four lanes are on the queue (4 product and 4 HR shards of the old layout, dealt out),
    // and GET shows them, none done, over the old layout's 8 partitions
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 4);
    let operator = integration::operator();
    let shown = get_tenant(&h, &t, &operator).await;
    let lanes = &shown.body["migration"]["lanes"];
    assert_eq!(
        (&lanes["lanes"], &lanes["lanesDone"], &lanes["partitions"]),
        (&json!(4), &json!(0), &json!(8)),
        "{}",
        shown.body
    );
    // WHEN the workers take them, the first delivered twice and the second's worker killed
    // 40 ms in, then every delivery twice, until the re-sharding ends
    pump.round(&h.app, 10, 4, |i| match i {
        0 => Delivery::Twice,
        1 => Delivery::Killed(40),
        _ => Delivery::Once,
    })
    .await;
    let running = || async {
        let view = get_tenant(&h, &t, &operator).await;
        view.body.get("migration").is_some()
    };
    pump_delivering(&h, &pump, |_| Delivery::Twice, running).await;

    // THEN the tenant has 16 shards, and every item is there once, as it was, each product and HR
    // item on its home among 16, no lane left
    let view = get_tenant(&h, &t, &operator).await;
    assert_eq!(view.body["shardCount"], 16, "{}", view.body);
    let after = sorted(h.items_under(&raw_key(&t, "")).await);
    // (the tenant's data, byte for byte but the partition key, which a move changes; its record,
    // usage counters and quota windows change with the re-sharding and the calls)
    let but_pk = |items: &[Item]| {
        let mut v: Vec<String> = items
            .iter()
            .filter(|i| i.contains_key("kind"))
            .map(|i| {
                let mut rest = i.clone();
                rest.remove("PK");
                // serde_json's maps are sorted: nested maps compare whatever their order.
                let json: Value = serde_dynamo::from_item(rest).unwrap();
                json.to_string()
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(but_pk(&after), but_pk(&before));
    let text = |i: &Item, k: &str| i.get(k).and_then(|v| v.as_s().ok()).cloned();
    let mut products = 0;
    for item in &after {
        let pk = text(item, "PK").unwrap();
        assert!(!pk.contains("#LANE#"), "a lane is left: {pk}");
        if let Some(id) = text(item, "productId") {
            products += 1;
            let home = shard_pk(&tenant, kind::PRODUCT, shard_for(&id, 16));
            assert_eq!(pk, home, "{id}");
        }
    }
    assert_eq!(products, 400);
    // AND every product reads, and lists once
    let listed = h
        .tenant(&t)
        .query(&[("limit", "1000"), ("order", "id")])
        .call("query-tenant-products", &integration::api::NO_PATH, None)
        .await;
    assert_eq!(listed.ids("productId").len(), 400, "{}", listed.body);
    pump.drain(&h.app, 4).await;
    assert!(pump.queues.dead_letters().await.is_empty());
    // AND its finished event counts each item it moved once (before the mend, a step whose
    // checkpoint a second delivery's beat left its moves uncounted)
    let finished = moved_in_finished_events(&mut stream, &t, "reshardingFinished").await;
    assert_eq!(finished, [rehomed]);
}

#[tokio::test]
async fn a_move_in_lanes_on_the_queue_relocates_every_item_once_while_a_call_steps_the_same_lanes()
{
    use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;
    // GIVEN a tenant of 300 products and an employee in a department on 4 shards, a neighbour
    // beside it, a lane queue whose turns last 150 ms, and the table's stream read
    let mut h = Harness::with_stream().await;
    h.app.settings.lifecycle_lanes = 4;
    let (t, neighbour) = (unique("mover"), unique("stayer"));
    onboard(&h, &t, 4).await;
    onboard(&h, &neighbour, 4).await;
    seed_every_kind(&h, &t, 300).await;
    seed_every_kind(&h, &neighbour, 20).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    let data = |items: Vec<Item>| -> Vec<Item> {
        sorted(
            items
                .into_iter()
                .filter(|i| i.contains_key("kind"))
                .collect(),
        )
    };
    let before = data(h.items_under(&raw_key(&t, "")).await);
    let neighbour_before = sorted(h.items_under(&raw_key(&neighbour, "")).await);
    let mut stream = integration::lifecycle_bus::StreamTap::open(&h.admin, &h.table).await;

    // WHEN an operator moves it into its own table in 4 lanes (a move's default is one), items may
    // move, and the driver plans the lanes
    let operator = integration::operator();
    let started = h
        .caller(&operator)
        .query(&[("lanes", "4")])
        .call(
            "update-tenant",
            &[("tenantId", t.as_str())],
            Some(json!({"placement": "own"})),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(MOVES_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN its four lanes are on the queue, and GET shows them, none done
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 4);
    let shown = get_tenant(&h, &t, &operator).await;
    let lanes = &shown.body["move"]["lanes"];
    assert_eq!(
        (&lanes["lanes"], &lanes["lanesDone"]),
        (&json!(4), &json!(0)),
        "{}",
        shown.body
    );
    // WHEN the workers take them, the first delivered twice and the second's worker killed 40 ms
    // in, while a call (with no queue: it steps every lane itself) steps the same lanes
    let (_, call) = tokio::join!(
        pump.round(&h.app, 10, 4, |i| match i {
            0 => Delivery::Twice,
            1 => Delivery::Killed(40),
            _ => Delivery::Once,
        }),
        h.operator().move_to(&t, "own"),
    );
    assert!([200, 202].contains(&call.status), "{}", call.body);
    // AND the workers take the queue, every delivery twice, until the move ends
    let running = || async {
        let view = get_tenant(&h, &t, &operator).await;
        view.body.get("move").is_some()
    };
    pump_delivering(&h, &pump, |_| Delivery::Twice, running).await;

    // THEN the tenant is in its own table, which holds every item of its data once, byte for byte;
    // the pool holds its record and nothing else of it (no lane left), and the neighbour's items
    // are as they were
    let view = get_tenant(&h, &t, &operator).await;
    assert_eq!(view.body["placement"], "own", "{}", view.body);
    let own =
        shared::store::tenancy::placement::own_table_name(&h.table, &TenantId::parse(&t).unwrap())
            .unwrap();
    let prefix = raw_key(&t, "");
    let in_own: Vec<Item> = h
        .admin_scan(&own)
        .await
        .into_iter()
        .filter(|i| i["PK"].as_s().is_ok_and(|pk| pk.starts_with(&prefix)))
        .collect();
    let relocated = in_own.len() as u64;
    assert_eq!(data(in_own), before);
    let left: Vec<String> = h
        .items_under(&prefix)
        .await
        .iter()
        .map(|i| i["PK"].as_s().unwrap().clone())
        .collect();
    assert_eq!(
        left,
        vec![shared::identity::keys::tenant_record_key(
            &TenantId::parse(&t).unwrap()
        )]
    );
    assert_eq!(
        sorted(h.items_under(&raw_key(&neighbour, "")).await),
        neighbour_before
    );
    // AND every product reads and lists once, from its own table
    let listed = h
        .tenant(&t)
        .query(&[("limit", "1000"), ("order", "id")])
        .call("query-tenant-products", &integration::api::NO_PATH, None)
        .await;
    assert_eq!(listed.ids("productId").len(), 300, "{}", listed.body);
    pump.drain(&h.app, 4).await;
    assert!(pump.queues.dead_letters().await.is_empty());
    // AND its finished event counts each item it relocated once (before the mend, a step whose
    // checkpoint another caller's beat left its relocations uncounted)
    let finished = moved_in_finished_events(&mut stream, &t, "tenantMoveFinished").await;
    assert_eq!(finished, [relocated]);
}

/// A tenant of `products` products `sku-000`… (`{"v": 1}`) on 4 shards and a neighbour beside it,
/// a copy of the table taken, then every third product changed, every fifth deleted and 20 new:
/// the harness, the tenant, the neighbour and the copy's name.
async fn damaged_after_a_copy(h: &Harness, products: usize) -> (String, String, String, Vec<Item>) {
    use futures::StreamExt;
    let (t, neighbour) = (unique("restored"), unique("beside"));
    integration::onboard_at_max_limits(h, &t, 4).await;
    integration::onboard_at_max_limits(h, &neighbour, 4).await;
    let put = |tenant: &str, id: String, v: u64| {
        let (h, tenant) = (h, tenant.to_owned());
        async move {
            let r = h
                .tenant(&tenant)
                .put_product(&id, json!({"v": v, "name": id}))
                .await;
            assert!([200, 201].contains(&r.status), "{}", r.body);
        }
    };
    let puts = (0..products).map(|i| put(&t, format!("sku-{i:03}"), 1));
    futures::stream::iter(puts)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    put(&neighbour, "n-1".into(), 1).await;
    let source = h.snapshot(&format!("lanes{}", &t[t.len() - 6..])).await;
    let copy = h.admin_scan(&source).await;
    let changes = (0..products)
        .filter(|i| i % 3 == 0)
        .map(|i| put(&t, format!("sku-{i:03}"), 2));
    futures::stream::iter(changes)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    for i in (0..products).filter(|i| i % 5 == 1) {
        let r = h.tenant(&t).delete_product(&format!("sku-{i:03}")).await;
        assert_eq!(r.status, 204, "{}", r.body);
    }
    for i in 0..20 {
        put(&t, format!("new-{i:02}"), 2).await;
    }
    put(&neighbour, "n-2".into(), 2).await;
    (t, neighbour, source, copy)
}

/// The tenant's products in `items`, by key, as a restore compares them.
fn products_of(tenant: &str, items: &[Item]) -> BTreeMap<(String, String), Item> {
    let t = TenantId::parse(tenant).unwrap();
    items
        .iter()
        .filter(|i| shared::store::lifecycle::restoring::plan::restored(&t, i))
        .map(|i| {
            let key = (
                i["PK"].as_s().unwrap().clone(),
                i["SK"].as_s().unwrap().clone(),
            );
            (key, i.clone())
        })
        .collect()
}

#[tokio::test]
async fn a_restore_in_lanes_on_the_queue_makes_the_tenant_equal_to_its_copy_through_duplicates_and_kills(
) {
    use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;
    // GIVEN a tenant of 240 products on 4 shards, a copy of the table, then 80 changed, 48 deleted
    // and 20 new; a neighbour beside it; restores in 4 lanes; a lane queue whose turns last 150 ms
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 4;
    let (t, neighbour, source, copy) = damaged_after_a_copy(&h, 240).await;
    let model = products_of(&t, &copy);
    let neighbour_before = sorted(h.items_under(&raw_key(&neighbour, "")).await);
    let pump = LanePump::new(1, Duration::from_millis(150)).await;

    // WHEN an operator restores it from the copy, its writes may start, and the driver plans the
    // putting phase's lanes
    let operator = integration::operator();
    let body = json!({"from": {"table": source}});
    let started = h.operator().restore_tenant(&t, body.clone()).await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 4);
    // THEN GET shows the putting phase's four lanes, none done
    let shown = get_tenant(&h, &t, &operator).await;
    let lanes = &shown.body["restore"]["lanes"];
    assert_eq!(
        (
            &shown.body["restore"]["phase"],
            &lanes["lanes"],
            &lanes["lanesDone"]
        ),
        (&json!("putting"), &json!(4), &json!(0)),
        "{}",
        shown.body
    );
    // WHEN the workers take them, the first delivered twice and the second's worker killed 40 ms
    // in, then every third delivery twice, while the driver plans the deleting phase's lanes
    pump.round(&h.app, 10, 4, |i| match i {
        0 => Delivery::Twice,
        1 => Delivery::Killed(40),
        _ => Delivery::Once,
    })
    .await;
    pump_while(&h, &pump, || async {
        integration::drive(&h.app, &pump.lanes).await.unwrap();
        get_tenant(&h, &t, &operator)
            .await
            .body
            .get("restore")
            .is_some()
    })
    .await;

    // THEN the tenant's products are the copy's, byte for byte; its neighbour's items are as they
    // were; no lane is left
    let after = h.items_under(&raw_key(&t, "")).await;
    assert_eq!(products_of(&t, &after), model);
    assert!(after
        .iter()
        .all(|i| !i["PK"].as_s().unwrap().contains("#LANE#")));
    assert_eq!(
        sorted(h.items_under(&raw_key(&neighbour, "")).await),
        neighbour_before
    );
    // AND the report counts each change once: 48 put back (16 of them changed first), 64
    // overwritten, 20 deleted
    let view = get_tenant(&h, &t, &operator).await;
    let last = &view.body["lastRestore"];
    assert_eq!(last["phase"], "finished", "{}", view.body);
    assert_eq!(
        (
            &last["putBack"]["PRODUCT"],
            &last["overwritten"]["PRODUCT"],
            &last["deleted"]["PRODUCT"]
        ),
        (&json!(48), &json!(64), &json!(20)),
        "{last}"
    );
    assert_eq!(view.body["status"], "active");
    pump.drain(&h.app, 4).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

#[tokio::test]
async fn an_abort_in_the_middle_of_a_restores_lanes_stops_every_lane_and_reports_exactly_what_was_done(
) {
    use shared::store::lifecycle::restoring::STARTS_DELAY_SECONDS;
    // GIVEN a tenant of 240 products, a copy, then 80 changed, 48 deleted and 20 new, and its
    // restore from the copy in 4 lanes on the queue, stepped for one round of short turns
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 4;
    let (t, _, source, copy) = damaged_after_a_copy(&h, 240).await;
    let before = products_of(&t, &h.items_under(&raw_key(&t, "")).await);
    let pump = LanePump::new(1, Duration::from_millis(60)).await;
    let operator = integration::operator();
    let started = h
        .operator()
        .restore_tenant(&t, json!({"from": {"table": source}}))
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock.advance_seconds(STARTS_DELAY_SECONDS + 1);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    pump.round(&h.app, 10, 4, |_| Delivery::Once).await;

    // WHEN an operator aborts it, while the lanes' next turns are still on the queue
    let aborted = h
        .operator()
        .restore_tenant(&t, json!({"abort": true}))
        .await;
    assert_eq!(aborted.status, 200, "{}", aborted.body);
    // AND the workers take every message left
    pump.drain(&h.app, 4).await;

    // THEN the restore ended abandoned, the tenant is active, and no lane is left
    let last = &aborted.body["lastRestore"];
    assert_eq!(last["phase"], "abandoned", "{}", aborted.body);
    assert_eq!(aborted.body["status"], "active");
    let after = h.items_under(&raw_key(&t, "")).await;
    assert!(after
        .iter()
        .all(|i| !i["PK"].as_s().unwrap().contains("#LANE#")));
    // AND its counts are exactly the changes in the table: each changed product now the copy's
    let after = products_of(&t, &after);
    let model = products_of(&t, &copy);
    let (mut put_back, mut overwritten) = (0, 0);
    for (key, item) in &after {
        match before.get(key) {
            None => {
                assert_eq!(model.get(key), Some(item), "{key:?}");
                put_back += 1;
            }
            Some(was) if was != item => {
                assert_eq!(model.get(key), Some(item), "{key:?}");
                overwritten += 1;
            }
            Some(_) => {}
        }
    }
    let deleted = before.keys().filter(|k| !after.contains_key(*k)).count();
    let count = |name: &str| last[name]["PRODUCT"].as_u64().unwrap_or(0);
    assert_eq!(
        (count("putBack"), count("overwritten"), count("deleted")),
        (put_back, overwritten, deleted as u64),
        "{last}"
    );
    assert!(put_back + overwritten > 0, "the lanes did something first");
    // AND the messages taken after the abort changed nothing
    assert_eq!(
        products_of(&t, &h.items_under(&raw_key(&t, "")).await),
        after
    );
    let view = get_tenant(&h, &t, &operator).await;
    assert_eq!(view.body["lastRestore"], aborted.body["lastRestore"]);
}

/// The log lines of a throttled lane step in `text`: each one's scope.
fn throttled_steps(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "a lane's step was throttled")
        .map(|l| l["scope"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_lane_backs_off_as_dynamodbs_throttling_reason_says_and_every_item_is_deleted_once() {
    // GIVEN logs captured, a tenant of 600 products and an item of every kind on 4 shards,
    // offboardings in 2 lanes, and a lane queue whose turns last 400 ms and whose lanes wait a
    // second when their table is throttled; the offboarding planned and its lanes sent
    let (logs, _guard) = integration::CapturedLogs::install();
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 2;
    let t = unique("throttled");
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    onboard(&h, &t, 4).await;
    seed_every_kind(&h, &t, 600).await;
    let before = h.items_under(&raw_key(&t, "")).await;
    let mut pump = LanePump::new(1, Duration::from_millis(400)).await;
    pump.lanes = pump
        .lanes
        .clone()
        .with_throttle_wait(Duration::from_secs(1));
    assert_eq!(offboard(&h, &t, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 2);
    // (lane 0's steps each commit with its checkpoint, which names it; its reads name it too)
    let tenant = TenantId::parse(&t).unwrap();
    let lane_0 = shared::identity::keys::lane_key(&tenant, "offboarding", 0);

    // WHEN DynamoDB throttles lane 0's first step by the table's capacity (the SDK tries a step
    // three times before the lane sees it), and the workers take both lanes
    let lane_0_step = [lane_0.as_str(), "TransactItems"];
    h.faults.throttle_containing_all_with_reason(
        &lane_0_step,
        "TableWriteProvisionedThroughputExceeded",
        3,
    );
    pump.round(&h.app, 10, 2, |_| Delivery::Once).await;
    // THEN lane 0 ended its turn at once, and its next turn waits on the queue: only lane 1's is
    // there to take now
    assert_eq!(throttled_steps(&logs.text()), ["Table"]);
    assert_eq!(h.faults.throttles_with_reason_left(), 0);
    let now = pump.queues.receive(10).await;
    assert!(now.len() <= 1, "{now:?}");
    pump.queues.settle(&now, None).await;

    // WHEN DynamoDB throttles lane 0's steps 7 times by their key range, and the workers take the
    // lanes until those are spent
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.faults.throttle_containing_all_with_reason(
        &lane_0_step,
        "TableWriteKeyRangeThroughputExceeded",
        7,
    );
    let mut rounds = 0;
    while h.faults.throttles_with_reason_left() > 0 {
        pump.round(&h.app, 10, 2, |_| Delivery::Once).await;
        rounds += 1;
        assert!(rounds < 50, "lane 0 never stepped again");
    }
    // THEN lane 0 backed off twice for its partition (3 + 3 attempts), and the seventh throttle
    // was one the SDK retried itself
    assert_eq!(
        throttled_steps(&logs.text()),
        ["Table", "Partition", "Partition"]
    );
    // AND the workers take the lanes to the end
    pump_while(&h, &pump, || async {
        get_tenant(&h, &t, &operator).await.status == 200
    })
    .await;

    // THEN every item was deleted once: the report counts each, and nothing of the tenant is left
    let report = offboard(&h, &t, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(&t, &before),
        "{}",
        report.body
    );
    assert!(h.items_under(&raw_key(&t, "")).await.is_empty());
    pump.drain(&h.app, 2).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

/// A turn that sent its lane's next turn but could not note it (the lanes' table throttled) ends as
/// sent: the next turn notes itself when delivered, and the lane keeps one message.
#[tokio::test]
async fn a_turn_whose_note_of_its_next_turn_fails_ends_as_sent_and_its_lane_keeps_one_message() {
    // GIVEN a tenant of 600 products and an item of every kind on 4 shards, offboarded in 1 lane on
    // a queue whose turns last 150 ms; the lane planned, sent and noted
    let mut h = Harness::new().await;
    h.app.settings.lifecycle_lanes = 1;
    let t = unique("unnoted");
    let operator = Auth::Operator(integration::onboarded(&h, "ops").await);
    onboard(&h, &t, 4).await;
    seed_every_kind(&h, &t, 600).await;
    let before = h.items_under(&raw_key(&t, "")).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    assert_eq!(offboard(&h, &t, &operator).await.status, 202);
    h.clock.advance_seconds(DELETION_DELAY_SECONDS);
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);

    // WHEN every note of a turn sent is throttled, and a worker takes the lane's turn: it steps
    // until its time is up, then sends the lane's next turn
    h.faults
        .refuse_requests_containing(Some("SET #sent = :steps"));
    pump.round(&h.app, 10, 1, |_| Delivery::Once).await;
    h.faults.refuse_requests_containing(None);
    let stepped = h.items_under(&raw_key(&t, "")).await.len() < before.len();
    // THEN the lane has one message, its next turn (before the mend the turn failed after its
    // send, and its own message came back beside it: one copy more for every note that failed)
    assert!(stepped);
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 1);

    // AND the workers take the lane to the end: every item deleted once, no dead letter
    pump_while(&h, &pump, || async {
        get_tenant(&h, &t, &operator).await.status == 200
    })
    .await;
    let report = offboard(&h, &t, &operator).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        report.body["deleted"],
        counted(&t, &before),
        "{}",
        report.body
    );
    assert!(h.items_under(&raw_key(&t, "")).await.is_empty());
    pump.drain(&h.app, 1).await;
    assert!(pump.queues.dead_letters().await.is_empty());
}

#[tokio::test]
async fn an_operator_sets_each_operations_lanes_when_it_starts_and_a_count_out_of_range_is_400_writing_nothing(
) {
    use shared::store::lifecycle::resharding::MOVES_DELAY_SECONDS;
    // GIVEN two tenants, a deployment whose operations run in 16 lanes, and a lane queue
    let h = Harness::new().await;
    let (offboarded, resharded) = (unique("asked"), unique("askedrs"));
    let operator = integration::operator();
    onboard(&h, &offboarded, 4).await;
    onboard(&h, &resharded, 4).await;
    seed_every_kind(&h, &offboarded, 20).await;
    seed_every_kind(&h, &resharded, 20).await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    let record_of = |t: &str| {
        let t = t.to_owned();
        let h = &h;
        async move { h.items_under(&raw_key(&t, "TENANT")).await }
    };

    // WHEN an operator asks for 0 or 65 lanes, or for a count that is not one
    for bad in ["0", "65", "many"] {
        let before = record_of(&offboarded).await;
        assert_eq!(before.len(), 1, "its record");
        let refused = h
            .caller(&operator)
            .query(&[("lanes", bad)])
            .call(
                "offboard-tenant",
                &[("tenantId", offboarded.as_str())],
                None,
            )
            .await;
        // THEN each is 400 naming lanes, and nothing is written
        refused.assert_problem_naming(400, "lanes");
        assert_eq!(record_of(&offboarded).await, before);
    }
    let refused = h
        .caller(&operator)
        .query(&[("lanes", "0")])
        .call(
            "update-tenant",
            &[("tenantId", resharded.as_str())],
            Some(json!({"shardCount": 8})),
        )
        .await;
    refused.assert_problem_naming(400, "lanes");

    // WHEN it offboards one in 3 lanes and re-shards the other in 2
    let started = h
        .caller(&operator)
        .query(&[("lanes", "3")])
        .call(
            "offboard-tenant",
            &[("tenantId", offboarded.as_str())],
            None,
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let started = h
        .caller(&operator)
        .query(&[("lanes", "2")])
        .call(
            "update-tenant",
            &[("tenantId", resharded.as_str())],
            Some(json!({"shardCount": 8})),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    h.clock
        .advance_seconds(DELETION_DELAY_SECONDS.max(MOVES_DELAY_SECONDS));
    integration::drive(&h.app, &pump.lanes).await.unwrap();
    // THEN each runs in the lanes asked, not the deployment's 16
    assert_eq!(pump.queues.backlog(&pump.queues.url).await, 5);
    let shown = get_tenant(&h, &offboarded, &operator).await;
    assert_eq!(
        shown.body["offboarding"]["lanes"]["lanes"], 3,
        "{}",
        shown.body
    );
    let shown = get_tenant(&h, &resharded, &operator).await;
    assert_eq!(
        shown.body["migration"]["lanes"]["lanes"], 2,
        "{}",
        shown.body
    );
    // AND both end
    pump_while(&h, &pump, || async {
        get_tenant(&h, &offboarded, &operator).await.status == 200
            || get_tenant(&h, &resharded, &operator)
                .await
                .body
                .get("migration")
                .is_some()
    })
    .await;
    assert_eq!(
        get_tenant(&h, &resharded, &operator).await.body["shardCount"],
        8
    );
}

#[tokio::test]
async fn a_lane_message_not_signed_by_the_platform_steps_nothing_and_ends_in_the_dead_letter_queue()
{
    use aws_sdk_sqs::types::MessageAttributeValue;
    use shared::identity::cursor::CursorKeys;
    use tenants::LaneMessage;
    // GIVEN a tenant of 200 products on 2 shards being re-sharded to 8, its lanes planned and on
    // the lane queue
    let h = Harness::new().await;
    let t = unique("forged");
    onboard(&h, &t, 2).await;
    h.tenant(&t)
        .put_new_products((0..200).map(|i| (format!("p{i:03}"), json!({"n": i}))))
        .await;
    let pump = LanePump::new(1, Duration::from_millis(150)).await;
    reshard_onto_queue(&h, &pump, &t, 8).await;
    assert!(pump.queues.backlog(&pump.queues.url).await > 0);
    let before = sorted(h.items_under(&raw_key(&t, "")).await);

    // WHEN messages for its lanes that no function of ours signed reach the worker: one with no
    // signature, one signed under another key, one with a real signature of another lane's body
    let forged = LanePump::new(1, Duration::from_millis(150)).await;
    let tenant = TenantId::parse(&t).unwrap();
    let body =
        |lane| serde_json::to_string(&LaneMessage::new(&tenant, "resharding", lane, 0)).unwrap();
    let stranger = CursorKeys::new(&[9u8; 32], None).unwrap();
    let ours = integration::test_cursor_keys();
    let sent = [
        (body(0), None),
        (body(1), Some(LaneMessage::sign(&stranger, &body(1)))),
        (body(2), Some(LaneMessage::sign(&ours, &body(3)))),
    ];
    for (body, signature) in sent {
        let mut send = forged
            .queues
            .sqs
            .send_message()
            .queue_url(&forged.queues.url)
            .message_body(body);
        if let Some(signature) = signature {
            let attribute = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(signature)
                .build()
                .unwrap();
            send = send.message_attributes(tenants::LANE_SIGNATURE_ATTRIBUTE, attribute);
        }
        send.send().await.unwrap();
    }
    forged.drain(&h.app, 4).await;

    // THEN nothing of the tenant changed, its lanes' checkpoints included, byte for byte; each of
    // the three was delivered again until it reached the dead-letter queue, none stepped, and
    // nothing else is there
    assert_eq!(sorted(h.items_under(&raw_key(&t, "")).await), before);
    assert_eq!(forged.queues.backlog(&forged.queues.url).await, 0);
    let mut dead: Vec<String> = forged
        .queues
        .dead_letters()
        .await
        .iter()
        .map(|m| m.body().unwrap().to_owned())
        .collect();
    dead.sort();
    assert_eq!(dead, [body(0), body(1), body(2)]);
    // AND the lanes' own messages take the re-sharding to its end
    pump_until_ended(&h, &pump, &t, "migration").await;
    let operator = integration::operator();
    let view = get_tenant(&h, &t, &operator).await;
    assert_eq!(view.body["shardCount"], 8, "{}", view.body);
}

#[tokio::test]
async fn a_lanes_sent_step_number_is_only_ever_raised_and_a_folded_lane_is_never_made_again() {
    use shared::identity::keys::lanes_prefix;
    use shared::store::lifecycle::lanes;
    use shared::store::lifecycle::offboarding::OPERATION;
    // GIVEN a tenant's offboarding planned in one lane, before its first step
    let h = Harness::new().await;
    let (tenant, db) = offboarding_planned_in_one_lane(&h, "sent-steps").await;
    let lanes_at = lanes_prefix(&tenant, OPERATION);
    let lane_items = || h.items_under(&lanes_at);
    let before = lane_items().await;
    assert_eq!(before.len(), 1, "{before:?}");

    // WHEN a late note of an earlier lane of the same key (an offboarding that ended and began
    // again) notes its turn of step 5, ahead of this lane's steps
    let ahead = lanes::mark_sent(&db, OPERATION, 0, 5).await.unwrap();
    // THEN nothing is noted (before the mend sentSteps became 5, every turn of this lane was then
    // stale, and the lane stuck)
    assert!(!ahead);
    assert_eq!(lane_items().await, before);

    // WHEN the lane has committed 5 steps, and its turn of step 5 is noted as sent, then an older
    // copy's turn of step 3, then 5 again
    let key = |name: &str| before[0][name].clone();
    h.admin
        .update_item()
        .table_name(&h.table)
        .key("PK", key("PK"))
        .key("SK", key("SK"))
        .update_expression("SET steps = :five")
        .expression_attribute_values(":five", AttributeValue::N("5".into()))
        .send()
        .await
        .unwrap();
    let raised = lanes::mark_sent(&db, OPERATION, 0, 5).await.unwrap();
    let older = lanes::mark_sent(&db, OPERATION, 0, 3).await.unwrap();
    let same = lanes::mark_sent(&db, OPERATION, 0, 5).await.unwrap();

    // THEN only the first raised it: the lane is as it was but for its steps and sentSteps, 5
    assert_eq!((raised, older, same), (true, false, false));
    let mut expected = before[0].clone();
    expected.insert("steps".into(), AttributeValue::N("5".into()));
    expected.insert("sentSteps".into(), AttributeValue::N("5".into()));
    assert_eq!(lane_items().await, vec![expected]);

    // WHEN the lane is gone (its walk folded it) and a late copy notes its turn of step 7
    h.admin
        .delete_item()
        .table_name(&h.table)
        .key("PK", key("PK"))
        .key("SK", key("SK"))
        .send()
        .await
        .unwrap();
    let late = lanes::mark_sent(&db, OPERATION, 0, 7).await.unwrap();

    // THEN nothing is noted, and no lane is made again
    assert!(!late);
    assert!(lane_items().await.is_empty());
    assert!(lanes::read(&db, OPERATION, 1).await.unwrap().is_empty());
}

/// A step's checkpoint puts its whole lane again: one whose lane was read before a newer turn was
/// noted sent is cancelled, never lowering the lane's `sentSteps` (which would let an older copy
/// of its turn pass for the newest, and two turns of the lane go round).
#[tokio::test]
async fn a_step_of_a_lane_read_before_a_newer_turn_was_sent_never_lowers_its_sent_step_number() {
    use shared::identity::clock::Clock;
    use shared::identity::keys::lanes_prefix;
    use shared::store::client::transact::TransactError;
    use shared::store::lifecycle::lanes;
    use shared::store::lifecycle::offboarding::OPERATION;
    // GIVEN a tenant's offboarding planned in one lane, read by a copy of its turn
    let h = Harness::new().await;
    let (tenant, db) = offboarding_planned_in_one_lane(&h, "sent-kept").await;
    let read = lanes::read(&db, OPERATION, 1).await.unwrap().remove(0);
    let step = |lane: &lanes::Lane| {
        let next = lane.after_step(None, &Default::default(), h.clock.now_millis());
        lanes::checkpoint(&db, lane, &next).unwrap()
    };

    // WHEN another copy's turn is noted sent (its first: the read copy saw none noted), then the
    // first copy's step commits
    assert!(lanes::mark_sent(&db, OPERATION, 0, 0).await.unwrap());
    let stale = db.transact_items(vec![step(&read)]).await;

    // THEN that step is cancelled, and the lane is as the other copy left it
    assert!(
        matches!(stale, Err(TransactError::ConditionFailed { .. })),
        "{stale:?}"
    );
    let lane = lanes::read(&db, OPERATION, 1).await.unwrap().remove(0);
    assert_eq!((lane.steps, lane.sent_steps), (0, Some(0)));
    // AND a step of the lane read again commits, keeping the newest turn's number
    db.transact_items(vec![step(&lane)]).await.unwrap();
    let stepped = h.items_under(&lanes_prefix(&tenant, OPERATION)).await;
    assert_eq!(stepped.len(), 1, "{stepped:?}");
    assert_eq!(stepped[0]["sentSteps"], AttributeValue::N("0".into()));
    assert_eq!(stepped[0]["steps"], AttributeValue::N("1".into()));
}

/// A lane read as never sent is sent again only while it still is: a resend that read it before its
/// planner's note landed sends no second first turn.
#[tokio::test]
async fn a_lane_read_as_never_sent_is_not_sent_again_once_its_planners_note_has_landed() {
    use shared::identity::clock::Clock;
    use shared::store::lifecycle::lanes;
    use shared::store::lifecycle::offboarding::OPERATION;
    // GIVEN a tenant's offboarding planned in one lane, read (past its 10 s) as never sent
    let h = Harness::new().await;
    let (_tenant, db) = offboarding_planned_in_one_lane(&h, "unsent-read").await;
    let read = lanes::read(&db, OPERATION, 1).await.unwrap().remove(0);
    assert_eq!(read.sent_steps, None);
    let later = h.clock.now_millis() + tenants::lane_walk::UNSENT_AFTER_MS;
    // WHEN its planner's note of its first turn lands, then the resend notes the lane as read
    assert!(lanes::mark_sent(&db, OPERATION, 0, 0).await.unwrap());
    let touched = lanes::touch(&db, &read, later).await.unwrap();
    // THEN the resend's note is refused, so nothing is sent again (before the mend: noted, and a
    // second first turn sent)
    assert!(!touched);
    // AND the lane read again can still be noted (sent again once lost)
    let again = lanes::read(&db, OPERATION, 1).await.unwrap().remove(0);
    assert_eq!(again.sent_steps, Some(0));
    assert!(lanes::touch(&db, &again, later).await.unwrap());
}

/// A new tenant (its id from `name`) whose offboarding is planned in one lane, before its first
/// step (the lane alone: the record is left as it is), with its operator session.
async fn offboarding_planned_in_one_lane(
    h: &Harness,
    name: &str,
) -> (TenantId, shared::store::client::scoped::TenantDb) {
    use shared::identity::clock::Clock;
    use shared::store::lifecycle::{lanes, offboarding::OPERATION};
    let t = unique(name);
    onboard(h, &t, 1).await;
    let tenant = TenantId::parse(&t).unwrap();
    let db = operator_db(h, &tenant).await;
    let planned = lanes::plan(&db, OPERATION, 1, None, h.clock.now_millis()).unwrap();
    db.transact_items(planned).await.unwrap();
    (tenant, db)
}

/// Each lane of an operation is alone in its partition (with a checkpoint written for every group
/// of its steps, the lanes under one partition key would add up there past a partition's 1,000
/// write units a second), and an operation planned when its lanes shared one partition goes on
/// there: read, noted sent and stepped where it is.
#[tokio::test]
async fn each_lane_is_its_own_partition_and_lanes_planned_in_one_shared_partition_go_on_there() {
    use shared::identity::clock::Clock;
    use shared::identity::keys::{lane_key, lanes_prefix};
    use shared::store::lifecycle::lanes;
    use shared::store::lifecycle::offboarding::OPERATION;
    // GIVEN a tenant's offboarding planned in three lanes
    let h = Harness::new().await;
    let t = unique("own-partitions");
    onboard(&h, &t, 1).await;
    let tenant = TenantId::parse(&t).unwrap();
    let db = operator_db(&h, &tenant).await;
    let now = h.clock.now_millis();
    let planned = lanes::plan(&db, OPERATION, 3, None, now).unwrap();
    db.transact_items(planned).await.unwrap();
    let prefix = lanes_prefix(&tenant, OPERATION);
    let keys_of = |items: &[HashMap<String, AttributeValue>]| {
        let mut keys: Vec<(String, String)> = items
            .iter()
            .map(|i| {
                (
                    i["PK"].as_s().unwrap().clone(),
                    i["SK"].as_s().unwrap().clone(),
                )
            })
            .collect();
        keys.sort();
        keys
    };

    // THEN each lane is keyed by its own key, as partition and sort key
    let items = h.items_under(&prefix).await;
    let own: Vec<(String, String)> = (0..3)
        .map(|n| {
            (
                lane_key(&tenant, OPERATION, n),
                lane_key(&tenant, OPERATION, n),
            )
        })
        .collect();
    assert_eq!(keys_of(&items), own);
    // AND read with their number, they come back in order
    let read = lanes::read(&db, OPERATION, 3).await.unwrap();
    assert_eq!(read.iter().map(|l| l.lane).collect::<Vec<_>>(), [0, 1, 2]);

    // WHEN the lanes are where an operation planned before kept them: one partition, `prefix`
    for item in &items {
        let mut shared_partition = item.clone();
        shared_partition.insert("PK".into(), AttributeValue::S(prefix.clone()));
        let (pk, sk) = (item["PK"].clone(), item["SK"].clone());
        let raw = h.admin.delete_item().table_name(&h.table).key("PK", pk);
        raw.key("SK", sk).send().await.unwrap();
        let raw = h.admin.put_item().table_name(&h.table);
        raw.set_item(Some(shared_partition)).send().await.unwrap();
    }
    // THEN they are read there, all three in order and each alone
    let read = lanes::read(&db, OPERATION, 3).await.unwrap();
    assert_eq!(read.iter().map(|l| l.lane).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(read.iter().all(|l| l.pk == prefix), "{read:?}");
    let lane = lanes::read_one(&db, OPERATION, 1).await.unwrap().unwrap();
    assert_eq!(lane, read[1]);
    // AND a turn of one is noted sent there, and its step commits there
    assert!(lanes::mark_sent(&db, OPERATION, 1, 0).await.unwrap());
    let lane = lanes::read_one(&db, OPERATION, 1).await.unwrap().unwrap();
    assert_eq!(lane.sent_steps, Some(0));
    let next = lane.after_step(None, &Default::default(), now);
    let step = lanes::checkpoint(&db, &lane, &next).unwrap();
    db.transact_items(vec![step]).await.unwrap();
    // AND nothing was written under the lanes' own keys: the three are where they were, lane 1
    // stepped to its end
    let after = h.items_under(&prefix).await;
    let shared_keys: Vec<(String, String)> = own
        .iter()
        .map(|(_, sk)| (prefix.clone(), sk.clone()))
        .collect();
    assert_eq!(keys_of(&after), shared_keys);
    let stepped = lanes::read_one(&db, OPERATION, 1).await.unwrap().unwrap();
    assert_eq!((stepped.steps, stepped.done), (1, true));
}

//! Figure 6, STS: the AssumeRole calls a container makes for its tenants, and what caching their
//! credentials saves.

use integration::{onboard_at_max_limits as onboard, unique, Auth, Harness};
use serde_json::json;

use crate::apps::production_app;
use crate::fixtures::Fixture;
use crate::report::{stat, time_ms, Report};
use crate::requests;
use crate::runtime::status_of;

/// 6. STS: AssumeRole calls per 1,000 warm requests across 10 tenants, and what caching saves.
pub(crate) async fn sts_figures(
    h: &Harness,
    sdk: &aws_types::SdkConfig,
    fx: &Fixture,
    report: &mut Report,
) {
    let fresh = production_app(sdk, &h.table);
    // Onboarded first: a tenant with no record is refused (403) before any AssumeRole.
    let mut tenants = Vec::new();
    for _ in 0..10 {
        let tn = unique("sts");
        onboard(h, &tn, 1).await;
        tenants.push(tn);
    }
    // Onboarding writes with the new tenant's own scoped credentials: one AssumeRole each, not
    // the figure's.
    let mut by_onboarding = 0;
    for tn in &tenants {
        by_onboarding += h.recorded_policies(tn).await.len();
    }
    let mut cold_first = Vec::new();
    let mut warm_rest = Vec::new();
    for (i, tn) in tenants.iter().cycle().take(1000).enumerate() {
        let ev = requests::get_session(&Auth::Tenant(tn.clone()), &fx.session_id);
        let (ms, r) = time_ms(sessions::get_session_by_session_id::handle(&fresh, ev)).await;
        assert_eq!(
            status_of(&r.unwrap_or_else(shared::ApiError::into_response)),
            404
        );
        if i < 10 {
            cold_first.push(ms)
        } else {
            warm_rest.push(ms)
        }
    }
    let mut assumed = 0;
    for tn in &tenants {
        assumed += h.recorded_policies(tn).await.len();
    }
    report.fact(
        "6. STS: AssumeRole calls per 1,000 requests over 10 tenants",
        json!(assumed - by_onboarding),
        "target 10 (1 per tenant per container)",
    );
    let (c, w) = (stat(cold_first), stat(warm_rest));
    report.fact(
        "6. STS: latency caching saves per request",
        json!(format!("{:.2} ms", c.median - w.median)),
        &format!(
            "first request {:.2} ms (AssumeRole and the tenant record), warm {:.2} ms",
            c.median, w.median
        ),
    );
}

//! The control plane's bus, where this plane's replies go, and what a deployment tells the
//! function about it (`CONTROL_PLANE_*`).

use shared::identity::ids::TenantId;
use shared::service::app::{env_var, env_var_or, lambda_sdk_config, ConfigError};

use super::{ControlPlaneError, TierMap};

/// The source of this plane's replies, unless `CONTROL_PLANE_REPLY_SOURCE` names another.
const DEFAULT_REPLY_SOURCE: &str = "sbt.application.plane";

/// The control plane's bus and the source of this plane's replies.
pub struct ControlPlane {
    client: aws_sdk_eventbridge::Client,
    bus: String,
    source: String,
    /// Tenants no request may suspend or offboard (the operators' own: any principal that may put
    /// events on the control plane's bus could otherwise lock every operator out).
    pub(super) protected: Vec<String>,
    /// The deployment's own tier names, mapped to pooltable's tiers and placements.
    pub(super) tiers: TierMap,
    /// Where an offboarding's lanes run.
    pub(super) lanes: crate::Lanes,
}

impl ControlPlane {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: &str, source: &str) -> Self {
        Self {
            client,
            bus: bus.to_owned(),
            source: source.to_owned(),
            protected: Vec::new(),
            tiers: TierMap::default(),
            lanes: crate::Lanes::in_process(),
        }
    }

    /// The same, onboarding the tiers `tiers` names as it maps them.
    pub fn with_tiers(self, tiers: TierMap) -> Self {
        Self { tiers, ..self }
    }

    /// The same, refusing to suspend or offboard `tenants`.
    pub fn protecting(self, tenants: &[&str]) -> Self {
        Self {
            protected: tenants.iter().map(|t| (*t).to_owned()).collect(),
            ..self
        }
    }

    /// `CONTROL_PLANE_EVENT_BUS` (the bus's name or ARN; required), `CONTROL_PLANE_REPLY_SOURCE`
    /// (default `sbt.application.plane`) and `CONTROL_PLANE_PROTECTED_TENANTS` (comma-separated).
    pub fn from_env() -> Result<Self, ConfigError> {
        let bus = env_var("CONTROL_PLANE_EVENT_BUS")?;
        let source = env_var_or(
            "CONTROL_PLANE_REPLY_SOURCE",
            DEFAULT_REPLY_SOURCE.to_owned(),
        )?;
        let client = aws_sdk_eventbridge::Client::new(&lambda_sdk_config()?);
        let named = std::env::var("CONTROL_PLANE_PROTECTED_TENANTS").unwrap_or_default();
        let protected = protected_tenants(&named)?;
        let tiers = TierMap::parse(&std::env::var("CONTROL_PLANE_TIER_MAP").unwrap_or_default())
            .map_err(|e| ConfigError::Invalid("CONTROL_PLANE_TIER_MAP", e))?;
        let lanes = crate::Lanes::from_env()?;
        Ok(Self {
            lanes,
            ..Self::new(client, &bus, &source)
                .protecting(&protected)
                .with_tiers(tiers)
        })
    }

    pub(super) async fn send(
        &self,
        detail_type: &str,
        detail: &str,
    ) -> Result<(), ControlPlaneError> {
        let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(&self.source)
            .detail_type(detail_type)
            .detail(detail)
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| {
                ControlPlaneError::Bus(
                    aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string(),
                )
            })?;
        match out.failed_entry_count() {
            0 => Ok(()),
            _ => Err(ControlPlaneError::Bus(format!(
                "the reply was not put: {:?}",
                out.entries().first().and_then(|e| e.error_message())
            ))),
        }
    }
}

/// The protected tenants of `CONTROL_PLANE_PROTECTED_TENANTS` (comma-separated): at least one, each
/// a tenant id, so a typo cannot leave the operators unprotected.
pub(super) fn protected_tenants(value: &str) -> Result<Vec<&str>, ConfigError> {
    const NAME: &str = "CONTROL_PLANE_PROTECTED_TENANTS";
    let tenants: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tenants.is_empty() {
        return Err(ConfigError::Invalid(
            NAME,
            "must name the operators' tenants (comma-separated): no control plane request may \
             suspend or offboard them"
                .into(),
        ));
    }
    if let Some(bad) = tenants.iter().find(|t| TenantId::parse(t).is_err()) {
        return Err(ConfigError::Invalid(
            NAME,
            format!("{bad:?} is not a tenant id"),
        ));
    }
    Ok(tenants)
}

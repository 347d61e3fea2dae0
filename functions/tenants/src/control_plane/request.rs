//! What a request is: its event, its kind, the registration it is keyed by, and its reply.

use serde::Deserialize;
use serde_json::{json, Value};

/// An EventBridge event, as a rule's Lambda target gets it.
#[derive(Debug, Deserialize)]
pub(super) struct Envelope {
    pub(super) id: String,
    #[serde(rename = "detail-type")]
    pub(super) detail_type: String,
    #[serde(default)]
    pub(super) detail: Value,
}

/// The four requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Onboarding,
    Offboarding,
    Activate,
    Deactivate,
}

impl Kind {
    pub(super) fn of(name: &str) -> Option<Self> {
        match name {
            "onboardingRequest" => Some(Self::Onboarding),
            "offboardingRequest" => Some(Self::Offboarding),
            "activateRequest" => Some(Self::Activate),
            "deactivateRequest" => Some(Self::Deactivate),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Onboarding => "onboarding",
            Self::Offboarding => "offboarding",
            Self::Activate => "activate",
            Self::Deactivate => "deactivate",
        }
    }

    /// The reply's name, by outcome.
    fn reply(self, success: bool) -> &'static str {
        match (self, success) {
            (Self::Onboarding, true) => "provisionSuccess",
            (Self::Onboarding, false) => "provisionFailure",
            (Self::Offboarding, true) => "deprovisionSuccess",
            (Self::Offboarding, false) => "deprovisionFailure",
            (Self::Activate, true) => "activateSuccess",
            (Self::Activate, false) => "activateFailure",
            (Self::Deactivate, true) => "deactivateSuccess",
            (Self::Deactivate, false) => "deactivateFailure",
        }
    }

    /// The registration status a success leaves (sbt-aws stores it on the registration): a
    /// provisioning's and a deprovisioning's are its reference application plane's (`created`,
    /// `deleted`: `src/core-app-plane/integ.default.ts`), which its own tests wait for.
    fn done(self) -> &'static str {
        match self {
            Self::Onboarding => "created",
            Self::Offboarding => "deleted",
            Self::Activate => "active",
            Self::Deactivate => "suspended",
        }
    }
}

/// A registration id this plane keys a request by: what sbt-aws makes (a UUID), within a sort
/// key's room.
pub(super) fn valid_registration(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// The key a request is answered once by (`<kind>#<id>`): a registration is provisioned and
/// deprovisioned once, so those requests are the registration's (when the event names a valid
/// one); it is activated and deactivated again and again, so each of those events is a request of
/// its own.
pub(super) fn request_key(kind: Kind, detail: &Value, event_id: &str) -> String {
    let registration = match kind {
        Kind::Onboarding | Kind::Offboarding => registration_key(kind, detail),
        Kind::Activate | Kind::Deactivate => None,
    };
    registration.unwrap_or_else(|| format!("{}#{event_id}", kind.name()))
}

/// The key of `detail`'s registration's request of `kind`, when it names a valid registration.
pub(super) fn registration_key(kind: Kind, detail: &Value) -> Option<String> {
    let registration = detail["tenantRegistrationId"]
        .as_str()
        .filter(|r| valid_registration(r))?;
    Some(format!("{}#{registration}", kind.name()))
}

/// The reply to a request: its detail-type and detail (held as one JSON value).
pub(super) fn reply_of(
    prefix: &str,
    kind: Kind,
    event_id: &str,
    request: &Value,
    outcome: Result<(), String>,
) -> Value {
    let mut detail = json!({
        "tenantId": request["tenantId"],
        "requestId": event_id,
    });
    if let Some(registration) = request["tenantRegistrationId"].as_str() {
        detail["tenantRegistrationId"] = registration.into();
    }
    match &outcome {
        Ok(()) => {
            detail["jobOutput"] =
                json!({"tenantRegistrationData": {"registrationStatus": kind.done()}});
        }
        Err(reason) => {
            detail["reason"] = reason.as_str().into();
            detail["jobOutput"] = json!({"tenantRegistrationData": {
                "registrationStatus": "failed",
                "reason": reason,
            }});
        }
    }
    json!({
        "detailType": format!("{prefix}{}", kind.reply(outcome.is_ok())),
        "detail": detail,
    })
}

/// Whether `reply`, a reply held as [`reply_of`] made it, answers a failure.
pub(super) fn reply_failed(reply: &str) -> bool {
    serde_json::from_str::<Value>(reply).is_ok_and(|r| {
        r["detail"]["jobOutput"]["tenantRegistrationData"]["registrationStatus"] == "failed"
    })
}

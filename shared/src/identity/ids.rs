//! Validated identifiers. Every id that can end up inside a key or a policy passes through here first,
//! so no caller can smuggle the key delimiter `#` or an IAM wildcard (`*`, `?`, `${…}`) into either.

use std::fmt;

use serde::Serialize;
use serde_with::{DeserializeFromStr, SerializeDisplay};
use thiserror::Error;

/// Why an id was refused. The message names the rule, never echoes the raw (possibly huge) input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most {max} characters")]
    TooLong { max: usize },
    #[error("may contain only A-Z, a-z, 0-9, '_' and '-'")]
    BadCharacter,
    #[error("is reserved")]
    Reserved,
}

fn check_charset(raw: &str, max: usize) -> Result<(), IdError> {
    if raw.is_empty() {
        return Err(IdError::Empty);
    }
    if raw.len() > max {
        return Err(IdError::TooLong { max });
    }
    // ASCII only on purpose: look-alike letters from other scripts are refused, not normalised.
    if !raw
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(IdError::BadCharacter);
    }
    Ok(())
}

macro_rules! validated_id {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        validated_id!($(#[$doc])* $name, $max, []);
    };
    ($(#[$doc:meta])* $name:ident, $max:expr, [$($reserved:expr),*]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, DeserializeFromStr)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const MAX_LEN: usize = $max;
            /// Ids that match the pattern but no input may name.
            pub const RESERVED: &'static [&'static str] = &[$($reserved),*];

            pub fn parse(raw: &str) -> Result<Self, IdError> {
                check_charset(raw, Self::MAX_LEN)?;
                if Self::RESERVED.contains(&raw) {
                    return Err(IdError::Reserved);
                }
                Ok(Self(raw.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }
    };
}

validated_id!(
    /// A tenant id: `^[A-Za-z0-9_-]{1,64}$`. It becomes the `TENANT#<id>#` key prefix and the
    /// `dynamodb:LeadingKeys` pattern of the tenant's session policy. [`TenantId::PLATFORM`] is
    /// reserved: no claim, path or body can name it.
    TenantId,
    64,
    [TenantId::PLATFORM]
);

impl TenantId {
    /// The platform's own partition: what outlives every tenant (offboarding reports, which are
    /// also the record that a tenant id was offboarded). Valid as a key prefix, a session policy's
    /// `LeadingKeys` and a session tag like any tenant id, and reachable only by operator code.
    pub const PLATFORM: &'static str = "_platform";

    /// The platform's partition ([`TenantId::PLATFORM`]); never a caller's tenant.
    pub fn platform() -> Self {
        Self(Self::PLATFORM.to_owned())
    }
}

validated_id!(
    /// Any entity id that goes into a key (customer, product, user, …): `^[A-Za-z0-9_-]{1,128}$`.
    EntityId,
    128
);

validated_id!(
    /// A client's `Idempotency-Key` header: `^[A-Za-z0-9_-]{1,128}$`. It goes into the key of the
    /// idempotency record, under the caller's tenant prefix.
    IdempotencyKey,
    128
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_id_accepts_the_documented_alphabet() {
        for ok in ["a", "acme", "Tenant_01", "a-b", "A", &"x".repeat(64)] {
            assert!(TenantId::parse(ok).is_ok(), "{ok:?} should be accepted");
        }
    }

    #[test]
    fn tenant_id_rejects_every_dangerous_character_class() {
        // A key delimiter, IAM wildcards and policy variables, a path separator, white space, a
        // look-alike (Cyrillic 'а'), an encoded delimiter.
        let short = [
            "a#b", "*", "a*", "a?", "a$", "{a}", "a}", "a/b", "a b", "a\tb", "a\n", "а", "a%23",
        ];
        let bad_characters = short.into_iter().chain(["${aws:username}"]);
        for raw in bad_characters {
            assert_eq!(TenantId::parse(raw), Err(IdError::BadCharacter), "{raw:?}");
        }
        assert_eq!(TenantId::parse(""), Err(IdError::Empty));
        let too_long = TenantId::parse(&"x".repeat(65));
        assert_eq!(too_long, Err(IdError::TooLong { max: 64 }));
    }

    #[test]
    fn no_input_can_name_the_platform_partition() {
        // GIVEN the platform's reserved id, which matches the tenant id pattern
        // WHEN a claim, a path or a body names it
        // THEN it is refused, and only operator code reaches the partition, through platform()
        assert_eq!(TenantId::parse(TenantId::PLATFORM), Err(IdError::Reserved));
        assert_eq!(TenantId::platform().as_str(), "_platform");
        assert!(TenantId::parse("_platform2").is_ok());
    }

    #[test]
    fn entity_id_rejects_the_key_delimiter_and_wildcards() {
        for bad in ["", "a#b", "TENANT#x", "*", "a?", "x y", &"y".repeat(129)] {
            assert!(EntityId::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(EntityId::parse(&"y".repeat(128)).is_ok());
    }

    #[test]
    fn ids_validate_when_deserialized() {
        assert!(serde_json::from_str::<EntityId>("\"ok-1\"").is_ok());
        assert!(serde_json::from_str::<EntityId>("\"no#pe\"").is_err());
    }
}

/// A session id: a UUIDv7, so that ids sort by creation time (GSI1 sorts a customer's sessions by it).
/// Written and read in the canonical lowercase hyphenated form, so one session has exactly one key.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, SerializeDisplay, DeserializeFromStr,
)]
pub struct SessionId(uuid::Uuid);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("must be a UUID in canonical form")]
pub struct SessionIdError;

impl SessionId {
    /// A new id stamped with `unix_millis`, taken from the injected clock.
    pub fn new_at(unix_millis: u64) -> Self {
        let ts = uuid::Timestamp::from_unix(
            uuid::NoContext,
            unix_millis / 1000,
            ((unix_millis % 1000) * 1_000_000) as u32,
        );
        // The random tail keeps ids created in the same millisecond apart.
        Self(uuid::Uuid::new_v7(ts))
    }

    pub fn parse(raw: &str) -> Result<Self, SessionIdError> {
        let id = uuid::Uuid::try_parse(raw).map_err(|_| SessionIdError)?;
        if id.hyphenated().to_string() != raw {
            return Err(SessionIdError);
        }
        Ok(Self(id))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl std::str::FromStr for SessionId {
    type Err = SessionIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod session_id_tests {
    use super::*;

    #[test]
    fn session_ids_sort_by_the_clock_not_by_creation_order() {
        let later = SessionId::new_at(1_700_000_002_000);
        let earlier = SessionId::new_at(1_700_000_001_000);
        assert!(earlier.to_string() < later.to_string());
    }

    #[test]
    fn session_id_accepts_only_the_canonical_form() {
        let id = SessionId::new_at(1_700_000_000_000);
        assert_eq!(SessionId::parse(&id.to_string()), Ok(id));
        assert!(SessionId::parse(&id.to_string().to_uppercase()).is_err());
        assert!(SessionId::parse(&id.to_string().replace('-', "")).is_err());
        assert!(SessionId::parse("TENANT#a#SESSION#x").is_err());
    }
}

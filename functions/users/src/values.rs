//! The validated values this crate's keys and views are built from: [`Email`], [`TransferCode`],
//! [`Date`] and [`Month`]. None of them can carry `#`, so each is safe inside a key.

use std::fmt;

use serde::Serialize;
use serde_with::{DeserializeFromStr, SerializeDisplay};
use shared::identity::ids::TenantId;
use shared::identity::keys;
use shared::isolation::vault::TenantKey;
use shared::store::keys::email_segment;
use shared::ApiError;

/// An email address: ASCII `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, at most 254 characters.
/// It can never contain `#`, so its lowercased form is safe inside a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, DeserializeFromStr)]
#[serde(transparent)]
pub struct Email(String);

impl Email {
    pub const MAX_LEN: usize = 254;

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        const RULE: &str =
            "must be an email address (local@domain.tld, ASCII, at most 254 characters)";
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(RULE);
        }
        let (local, domain) = raw.split_once('@').ok_or(RULE)?;
        let local_ok = !local.is_empty()
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b));
        let domain_chars_ok = domain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let tld_ok = domain.rsplit_once('.').is_some_and(|(host, tld)| {
            !host.is_empty() && tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic())
        });
        if local_ok && domain_chars_ok && tld_ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(RULE)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lowercased form: uniqueness is case-insensitive.
    pub fn normalized(&self) -> String {
        self.0.to_ascii_lowercase()
    }

    /// What stands for the email in its uniqueness item's key: for a tenant with a key of its own,
    /// `h-` and a keyed digest of the lowercased email under that key (no email is readable in any
    /// key); else the lowercased email.
    pub fn segment(&self, key: Option<&TenantKey>) -> EmailSegment {
        EmailSegment(match key {
            Some(key) => email_segment(key, &self.normalized()),
            None => self.normalized(),
        })
    }

    /// The segment of a tenant without a key: where its email item is until the tenant is keyed.
    pub fn plain_segment(&self) -> EmailSegment {
        self.segment(None)
    }
}

/// The email's part of its uniqueness item's key ([`Email::segment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailSegment(String);

impl EmailSegment {
    /// `TENANT#t#EMAIL#<segment>`: the email uniqueness item's PK and SK.
    pub fn key(&self, t: &TenantId) -> String {
        keys::email_key(t, &self.0)
    }
}

impl std::fmt::Display for EmailSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Email {
    type Err = &'static str;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

/// A one-time transfer code: 32 lowercase hex digits (a random UUIDv4, 122 random bits).
#[derive(Clone, PartialEq, Eq)]
pub struct TransferCode(String);

impl TransferCode {
    pub const LEN: usize = 32;

    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.len() == Self::LEN
            && raw
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(raw.to_owned()))
        } else {
            Err("code must be 32 lowercase hexadecimal digits")
        }
    }

    /// The code itself, for the one response that hands it out. Never log it.
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// `TENANT#t#TRANSFER#<sha256(code)>`: the code's PK and SK (its digest, never the code).
    pub fn key(&self, t: &TenantId) -> String {
        keys::transfer_key(t, &self.0)
    }
}

/// Never prints the code, so it cannot reach a log by accident.
impl fmt::Debug for TransferCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TransferCode(<redacted>)")
    }
}

/// A calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    pub year: u16,
    pub month: u8,
}

impl Month {
    pub fn previous(self) -> Self {
        if self.month == 1 {
            Self {
                year: self.year - 1,
                month: 12,
            }
        } else {
            Self {
                year: self.year,
                month: self.month - 1,
            }
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        let b = raw.as_bytes();
        if b.len() != 7 || b[4] != b'-' {
            return None;
        }
        let year = digits(&b[..4])? as u16;
        let month = digits(&b[5..])? as u8;
        (year >= 1 && (1..=12).contains(&month)).then_some(Self { year, month })
    }

    /// Months from `from`'s to `to`'s, newest first (empty when `from` > `to`).
    pub fn newest_first(from: Date, to: Date) -> Vec<Month> {
        let (first, mut m) = (from.month(), to.month());
        let mut out = Vec::new();
        while m >= first {
            out.push(m);
            if m.year == 1 && m.month == 1 {
                break;
            }
            m = m.previous();
        }
        out
    }

    fn days(self) -> u8 {
        match self.month {
            4 | 6 | 9 | 11 => 30,
            2 if is_leap(self.year) => 29,
            2 => 28,
            _ => 31,
        }
    }
}

impl fmt::Display for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

fn is_leap(y: u16) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

/// A real calendar date, `YYYY-MM-DD` (years 0001 to 9999).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, SerializeDisplay, DeserializeFromStr,
)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Date {
    pub const RULE: &'static str = "must be a calendar date YYYY-MM-DD";

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let b = raw.as_bytes();
        if b.len() != 10 || b[7] != b'-' {
            return Err(Self::RULE);
        }
        let m = Month::parse(&raw[..7]).ok_or(Self::RULE)?;
        let day = digits(&b[8..]).ok_or(Self::RULE)? as u8;
        if day == 0 || day > m.days() {
            return Err(Self::RULE);
        }
        Ok(Self {
            year: m.year,
            month: m.month,
            day,
        })
    }

    pub fn month(self) -> Month {
        Month {
            year: self.year,
            month: self.month,
        }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{:02}", self.month(), self.day)
    }
}

impl std::str::FromStr for Date {
    type Err = &'static str;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

/// `?from=YYYY-MM-DD&to=YYYY-MM-DD`: both required, `from` not after `to`, and the range touching at
/// most `max_months` calendar months (400 naming the parameter otherwise).
pub fn date_range(req: &lambda_http::Request, max_months: usize) -> Result<(Date, Date), ApiError> {
    let param = |name: &str| {
        let raw = shared::service::http::query_param(req, name)?.ok_or_else(|| {
            ApiError::bad_request(
                name,
                format!("query parameter {name} is required (YYYY-MM-DD)"),
            )
        })?;
        Date::parse(&raw).map_err(|rule| ApiError::bad_request(name, format!("{name} {rule}")))
    };
    let (from, to) = (param("from")?, param("to")?);
    if from > to {
        return Err(ApiError::bad_request("from", "from must not be after to"));
    }
    if Month::newest_first(from, to).len() > max_months {
        return Err(ApiError::bad_request(
            "to",
            format!("the range may span at most {max_months} calendar months"),
        ));
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(raw: &str) -> Date {
        Date::parse(raw).unwrap()
    }

    #[test]
    fn emails_follow_the_strict_rule() {
        for ok in ["a@b.co", "Ada.L+x_y%z-1@mail.example.org", "x@1-2.io"] {
            assert!(Email::parse(ok).is_ok(), "{ok}");
        }
        let long = format!("{}@example.com", "a".repeat(243));
        assert_eq!(long.len(), 255);
        for bad in [
            "",
            "a",
            "a@b",
            "a@b.c",
            "@b.co",
            "a@.co",
            "a@b.c0",
            "a#b@c.co",
            "a@b#c.co",
            "a@@b.co",
            "a b@c.co",
            " a@b.co",
            "a@b.co ",
            "é@b.co",
            "a@b.co\n",
            long.as_str(),
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dates_are_real_calendar_dates() {
        for ok in ["2024-02-29", "2026-12-31", "2000-02-29", "0001-01-01"] {
            assert_eq!(date(ok).to_string(), ok);
        }
        for bad in [
            "2026-02-29",
            "1900-02-29",
            "2026-04-31",
            "2026-13-01",
            "2026-00-10",
            "2026-01-00",
            "0000-01-01",
            "2026-1-01",
            "2026/01/01",
            "26-01-01",
            "2026-01-01T00:00:00Z",
            "+026-01-01",
            "",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn months_are_listed_newest_first_across_years() {
        let ms: Vec<String> = Month::newest_first(date("2025-11-30"), date("2026-02-01"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ms, ["2026-02", "2026-01", "2025-12", "2025-11"]);
        assert!(Month::newest_first(date("2026-03-01"), date("2026-02-01")).is_empty());
    }

    #[test]
    fn transfer_codes_are_32_lowercase_hex_and_never_printed() {
        let c = TransferCode::random();
        assert!(TransferCode::parse(c.reveal()).is_ok());
        assert_ne!(c.reveal(), TransferCode::random().reveal());
        assert!(!format!("{c:?}").contains(c.reveal()));
        for bad in [
            "",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
            "01234567-89ab-cdef-0123-456789abcdef",
        ] {
            assert!(TransferCode::parse(bad).is_err(), "{bad}");
        }
    }
}

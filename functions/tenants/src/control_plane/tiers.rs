//! A deployment's own tier names (sbt-aws's reference solution has Basic, Advanced, Premium and
//! Platinum, the last in a silo of its own) mapped to pooltable's tiers and placements.

use serde_json::json;
use shared::store::tenancy::tenants::Tier;

use crate::onboard_tenant::PlacementInput;

/// `CONTROL_PLANE_TIER_MAP`: `<sbt tier>=<pooltable tier>[:own|:pool]`, comma-separated
/// (`Platinum=premium:own,Advanced=standard`), matched without regard to case. A tier the map does
/// not name is read as one of pooltable's own (`basic`, `standard`, `premium`), in the pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierMap(Vec<(String, Tier, PlacementInput)>);

impl TierMap {
    /// The map `value` writes (empty: none); the reason when an entry is not of that form.
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad =
                || format!("{entry:?} is not <sbt tier>=<basic|standard|premium>[:own|:pool]");
            let (name, target) = entry.split_once('=').ok_or_else(bad)?;
            let (tier, placement) = match target.trim().split_once(':') {
                Some((tier, "own")) => (tier, PlacementInput::Own),
                Some((tier, "pool")) => (tier, PlacementInput::Pool),
                Some(_) => return Err(bad()),
                None => (target.trim(), PlacementInput::Pool),
            };
            let tier = pooltable_tier(tier).ok_or_else(bad)?;
            let name = name.trim();
            if name.is_empty() {
                return Err(bad());
            }
            entries.push((name.to_ascii_lowercase(), tier, placement));
        }
        Ok(Self(entries))
    }

    /// The tier and placement of an onboarding request's `tier`; the refusal's reason otherwise.
    pub(crate) fn resolve(&self, requested: &str) -> Result<(Tier, PlacementInput), String> {
        let wanted = requested.to_ascii_lowercase();
        if let Some((_, tier, placement)) = self.0.iter().find(|(name, ..)| *name == wanted) {
            return Ok((*tier, *placement));
        }
        match pooltable_tier(&wanted) {
            Some(tier) => Ok((tier, PlacementInput::Pool)),
            None => Err(format!(
                "tier {requested} is not one of pooltable's (basic, standard, premium) nor in \
                 the deployment's tier map (CONTROL_PLANE_TIER_MAP)"
            )),
        }
    }
}

/// One of the tiers a control plane may ask for (`custom` limits are an operator's to set).
fn pooltable_tier(name: &str) -> Option<Tier> {
    match serde_json::from_value::<Tier>(json!(name.trim().to_ascii_lowercase())) {
        Ok(Tier::Custom) | Err(_) => None,
        Ok(tier) => Some(tier),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployments_tiers_reach_pooltables_tiers_and_placements() {
        // GIVEN the map of a deployment with a siloed Platinum tier
        let map = TierMap::parse("Platinum=premium:own, Advanced=standard").unwrap();
        // THEN its names resolve without regard to case, and pooltable's own names still do
        assert_eq!(
            map.resolve("platinum"),
            Ok((Tier::Premium, PlacementInput::Own))
        );
        assert_eq!(
            map.resolve("ADVANCED"),
            Ok((Tier::Standard, PlacementInput::Pool))
        );
        assert_eq!(
            map.resolve("Basic"),
            Ok((Tier::Basic, PlacementInput::Pool))
        );
        assert!(map.resolve("Bronze").unwrap_err().contains("tier map"));
        assert!(map.resolve("custom").is_err());
        assert_eq!(TierMap::parse(""), Ok(TierMap::default()));
    }

    #[test]
    fn a_map_entry_of_another_form_is_refused() {
        for bad in [
            "Platinum",
            "Platinum=gold",
            "Platinum=premium:silo",
            "=basic",
            "P=custom",
        ] {
            assert!(TierMap::parse(bad).is_err(), "{bad}");
        }
    }
}

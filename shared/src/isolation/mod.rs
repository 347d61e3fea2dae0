//! Layer 2, isolation: the caller's tenant from the authorizer claims, the STS session policy that
//! confines a tenant's credentials to its keys, the in-process key guard that checks every request
//! before it is signed, and the per-container cache of tenant credentials. Uses only `identity`.

pub mod claims;
pub mod credentials;
pub mod guard;
pub mod policy;
pub mod vault;

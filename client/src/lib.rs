//! pooltable's typed client, generated at build time from openapi.yaml (`build.rs`): one builder
//! method per operation (`client.get_product().product_id("p-1").send().await`), answers as
//! [`types`], refusals as [`Error::ErrorResponse`] holding the problem+json body.
//!
//! [`connect`] makes a client for a base URL and a bearer token (a tenant's or an operator's JWT).

#![allow(clippy::all, clippy::pedantic, unused, missing_docs)]

mod generated {
    include!(concat!(env!("OUT_DIR"), "/codegen.rs"));
}

pub use generated::*;

/// A client of the API at `base_url` (no trailing slash) calling with `token` as its bearer token.
pub fn connect(base_url: &str, token: &str) -> Result<Client, reqwest::Error> {
    #[cfg(feature = "https")]
    {
        // Installed once per process; a second install is refused and changes nothing.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let mut headers = reqwest::header::HeaderMap::new();
    let mut bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
        .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
    bearer.set_sensitive(true);
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30))
        .build()?;
    Ok(Client::new_with_client(base_url, http))
}

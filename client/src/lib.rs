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

/// Why [`connect`] made no client.
#[derive(Debug)]
pub enum ConnectError {
    /// The token holds what an HTTP header cannot (a line break, a control character).
    Token,
    /// The HTTP client could not be built.
    Http(reqwest::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token => {
                f.write_str("the token is not a header value (a JWT has no spaces or line breaks)")
            }
            Self::Http(e) => write!(f, "the HTTP client: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

/// A client of the API at `base_url` (no trailing slash) calling with `token` as its bearer token.
pub fn connect(base_url: &str, token: &str) -> Result<Client, ConnectError> {
    #[cfg(feature = "https")]
    {
        // Installed once per process; a second install is refused and changes nothing.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let mut bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ConnectError::Token)?;
    bearer.set_sensitive(true);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(ConnectError::Http)?;
    Ok(Client::new_with_client(base_url, http))
}

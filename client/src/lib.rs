//! pooltable's typed client, generated at build time from openapi.yaml (`build.rs`): one builder
//! method per operation (`client.get_product().product_id("p-1").send().await`), answers as
//! [`types`], refusals as [`Error::ErrorResponse`] holding the problem+json body.
//!
//! [`connect`] makes a client for a base URL and a bearer token (a tenant's or an operator's JWT);
//! [`connect_with`] for a [`Token`] that can be replaced when it is refreshed, every request taking
//! it as it is then. HTTPS is on by default (the `https` feature: rustls on ring).
//!
//! ```toml
//! [dependencies]
//! pooltable-client = { git = "https://github.com/<you>/pooltable" }  # or { path = "…/pooltable/client" }
//! ```

#![allow(clippy::all, clippy::pedantic, unused, missing_docs)]

mod generated {
    include!(concat!(env!("OUT_DIR"), "/codegen.rs"));
}

pub use generated::*;

/// README's examples, compiled as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// A bearer token, shared by every client made with it: [`Token::replace`] refreshes it for every
/// request sent after, from any of them.
#[derive(Debug, Clone)]
pub struct Token(std::sync::Arc<std::sync::RwLock<reqwest::header::HeaderValue>>);

impl Token {
    /// `jwt` as a bearer token.
    pub fn new(jwt: &str) -> Result<Self, ConnectError> {
        Ok(Self(std::sync::Arc::new(std::sync::RwLock::new(bearer(
            jwt,
        )?))))
    }

    /// Replaces the token (a refreshed JWT) for every request sent from now on.
    pub fn replace(&self, jwt: &str) -> Result<(), ConnectError> {
        let value = bearer(jwt)?;
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = value;
        Ok(())
    }

    fn current(&self) -> reqwest::header::HeaderValue {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// `Bearer <jwt>` as a header value, marked sensitive (never logged).
fn bearer(jwt: &str) -> Result<reqwest::header::HeaderValue, ConnectError> {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {jwt}"))
        .map_err(|_| ConnectError::Token)?;
    value.set_sensitive(true);
    Ok(value)
}

/// The generated client's hook before each request: the token as it is now.
async fn authorize(
    token: &Token,
    request: &mut reqwest::Request,
) -> Result<(), std::convert::Infallible> {
    request
        .headers_mut()
        .insert(reqwest::header::AUTHORIZATION, token.current());
    Ok(())
}

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

/// An HTTP client builder with this crate's TLS in place (rustls on ring, the provider installed
/// once per process), for a tool's other calls (a sign-in).
pub fn http_builder() -> reqwest::ClientBuilder {
    #[cfg(feature = "https")]
    {
        // A second install is refused and changes nothing.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
}

/// A client of the API at `base_url` (no trailing slash) calling with `token` as its bearer token.
pub fn connect(base_url: &str, token: &str) -> Result<Client, ConnectError> {
    connect_with(base_url, Token::new(token)?)
}

/// A client of the API at `base_url` calling with `token`, which may be replaced while it is used.
pub fn connect_with(base_url: &str, token: Token) -> Result<Client, ConnectError> {
    let http = http_builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(ConnectError::Http)?;
    Ok(Client::new_with_client(base_url, http, token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers one HTTP request on `listener` with a problem, and returns its Authorization header.
    async fn authorization_of_one_request(listener: &tokio::net::TcpListener) -> String {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0; 8192];
        let n = socket.read(&mut request).await.unwrap();
        let request = String::from_utf8_lossy(&request[..n]).to_string();
        let body = r#"{"title":"Not Found","status":404}"#;
        let answer = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
        request
            .lines()
            .find_map(|l| l.strip_prefix("authorization: "))
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_replaced_token_is_sent_from_the_next_request_on() {
        // GIVEN a client made with a token, and an API that answers each request
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let token = Token::new("first.jwt.value").unwrap();
        let api = connect_with(&base, token.clone()).unwrap();
        // WHEN it calls, the token is replaced (refreshed), and it calls again
        let call = || api.get_tenant().tenant_id("acme").send();
        let (first, _) = tokio::join!(authorization_of_one_request(&listener), call());
        token.replace("second.jwt.value").unwrap();
        let (second, _) = tokio::join!(authorization_of_one_request(&listener), call());
        // THEN each request carried the token as it was when it was sent
        assert_eq!(first, "Bearer first.jwt.value");
        assert_eq!(second, "Bearer second.jwt.value");
        // AND a token no header can hold is refused
        assert!(matches!(
            token.replace("bad\nvalue"),
            Err(ConnectError::Token)
        ));
    }
}

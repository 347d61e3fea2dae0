//! `pooltable login --client-id ID --username NAME [--region R] [--token access|id]`: a token from
//! a Cognito user pool (InitiateAuth with `USER_PASSWORD_AUTH`, which the app client must allow),
//! printed alone, for `export POOLTABLE_TOKEN=$(pooltable login …)`. The password is read from
//! `POOLTABLE_PASSWORD`, else from the first line of stdin; never from the command line, where other
//! users of the machine could read it. `POOLTABLE_COGNITO_ENDPOINT` names another endpoint than
//! `https://cognito-idp.<region>.amazonaws.com/` (a local Cognito). The access token by default: the
//! one the template's pre token generation trigger gives the tenant and, for a `platform-admin`,
//! the operator scope.

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::{Exit, Failure};

/// Sign in with `USER_PASSWORD_AUTH`; the password from POOLTABLE_PASSWORD, else the first line of
/// stdin; the endpoint from POOLTABLE_COGNITO_ENDPOINT, else Cognito's in the region.
#[derive(Debug, Args)]
pub struct Login {
    /// The user pool's app client (it must allow USER_PASSWORD_AUTH).
    #[arg(long)]
    client_id: String,
    #[arg(long)]
    username: String,
    /// The user pool's region (default: AWS_REGION).
    #[arg(long)]
    region: Option<String>,
    /// Which token to print.
    #[arg(long, value_enum, default_value_t = TokenKind::Access)]
    token: TokenKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TokenKind {
    /// The access token: the tenant, and for a platform-admin the operator scope.
    Access,
    /// The ID token.
    Id,
}

impl Login {
    /// Signs in; the token to print.
    pub async fn run(self) -> Result<String, Failure> {
        sign_in(self).await
    }
}

async fn sign_in(login: Login) -> Result<String, Failure> {
    let Login {
        client_id,
        username,
        region,
        token,
    } = login;
    let field = match token {
        TokenKind::Access => "AccessToken",
        TokenKind::Id => "IdToken",
    };
    let endpoint = match std::env::var("POOLTABLE_COGNITO_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => endpoint,
        _ => {
            let region = region
                .or_else(|| std::env::var("AWS_REGION").ok())
                .ok_or_else(|| Failure::usage("--region (or AWS_REGION) is required"))?;
            format!("https://cognito-idp.{region}.amazonaws.com/")
        }
    };
    let password = match std::env::var("POOLTABLE_PASSWORD") {
        Ok(password) if !password.is_empty() => password,
        _ => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| Failure::usage(format!("the password on stdin: {e}")))?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    let body = json!({
        "AuthFlow": "USER_PASSWORD_AUTH",
        "ClientId": client_id,
        "AuthParameters": {"USERNAME": username, "PASSWORD": password},
    });
    let http = pooltable_client::http_builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| Failure {
            exit: Exit::Unavailable,
            message: format!("the HTTP client: {e}"),
        })?;
    let answer = http
        .post(&endpoint)
        .header("Content-Type", "application/x-amz-json-1.1")
        .header(
            "X-Amz-Target",
            "AWSCognitoIdentityProviderService.InitiateAuth",
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| Failure {
            exit: Exit::Unavailable,
            message: format!("{endpoint}: {e}"),
        })?;
    let status = answer.status();
    let text = answer.text().await.unwrap_or_default();
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let why = parsed["message"].as_str().or(parsed["__type"].as_str());
        return Err(Failure {
            exit: match status.as_u16() {
                429 | 500.. => Exit::Unavailable,
                _ => Exit::Refused,
            },
            message: format!("Cognito answered {status}: {}", why.unwrap_or(&text)),
        });
    }
    parsed["AuthenticationResult"][field]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure {
            exit: Exit::Refused,
            message: format!(
                "Cognito answered no {field} (a challenge to answer first, such as a new password): {text}"
            ),
        })
}

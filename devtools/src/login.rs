//! `pooltable login --client-id ID --username NAME [--region R] [--token access|id]`: a token from
//! a Cognito user pool (InitiateAuth with `USER_PASSWORD_AUTH`, which the app client must allow),
//! printed alone, for `export POOLTABLE_TOKEN=$(pooltable login …)`. The password is read from
//! `POOLTABLE_PASSWORD`, else from the first line of stdin; never from the command line, where other
//! users of the machine could read it. `POOLTABLE_COGNITO_ENDPOINT` names another endpoint than
//! `https://cognito-idp.<region>.amazonaws.com/` (a local Cognito). The access token by default: the
//! one the template's pre token generation trigger gives the tenant and, for a `platform-admin`,
//! the operator scope.

use serde_json::{json, Value};

use crate::operator_cli::{Exit, Failure};

/// The usage line.
pub const USAGE: &str = "pooltable login --client-id ID --username NAME [--region R] [--token access|id]
password: POOLTABLE_PASSWORD, else the first line of stdin; endpoint: POOLTABLE_COGNITO_ENDPOINT, else Cognito's in the region";

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        exit: Exit::Usage,
        message: format!("{}\nusage: {USAGE}", message.into()),
    }
}

/// Signs in; the token to print.
pub async fn run(args: &[String]) -> Result<String, Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(USAGE.to_owned());
    }
    let mut flags = std::collections::HashMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| usage(format!("unexpected argument {flag}")))?;
        let value = it
            .next()
            .ok_or_else(|| usage(format!("--{name} needs a value")))?;
        flags.insert(name.to_owned(), value.clone());
    }
    let flag = |name: &str| {
        flags
            .get(name)
            .cloned()
            .ok_or_else(|| usage(format!("--{name} is required")))
    };
    let (client_id, username) = (flag("client-id")?, flag("username")?);
    let field = match flags.get("token").map(String::as_str) {
        None | Some("access") => "AccessToken",
        Some("id") => "IdToken",
        Some(other) => return Err(usage(format!("--token is access or id, not {other}"))),
    };
    let endpoint = match std::env::var("POOLTABLE_COGNITO_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => endpoint,
        _ => {
            let region = flags
                .get("region")
                .cloned()
                .or_else(|| std::env::var("AWS_REGION").ok())
                .ok_or_else(|| usage("--region (or AWS_REGION) is required"))?;
            format!("https://cognito-idp.{region}.amazonaws.com/")
        }
    };
    let password = match std::env::var("POOLTABLE_PASSWORD") {
        Ok(password) if !password.is_empty() => password,
        _ => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| usage(format!("the password on stdin: {e}")))?;
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

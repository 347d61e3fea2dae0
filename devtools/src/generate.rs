//! `pooltable gen`: every file, or part of a file, that names a route, written from `routes.yaml`.
//! A part of a hand-written file lies between two marker lines holding `@generated begin` and
//! `@generated end`; a whole generated file says so in its first line. `pooltable gen --check`
//! (and `tests/tests/generated.rs`) fails when any of them differs from what this writes.

mod log_groups;
pub mod openapi30;
mod roles;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::routes::{Caller, Function, PlatformSessions, Route, RouteTable};

#[derive(Debug, Error)]
pub enum GenerateError {
    #[error(transparent)]
    Routes(#[from] crate::DeclarationError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Shape { path: String, message: String },
}

/// A file as `pooltable gen` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the repository's root.
    pub path: PathBuf,
    pub contents: String,
}

const BEGIN: &str = "@generated begin";
const END: &str = "@generated end";

/// The checkov findings every API function answers the same way.
const API_FUNCTION_SKIPS: &str = "          - id: CKV_AWS_116
            comment: Invoked synchronously by API Gateway; a DLQ only applies to asynchronous invocations.
          - id: CKV_AWS_117
            comment: Reaches only DynamoDB and STS public endpoints; a VPC would add NAT or endpoint cost and cold-start latency.
          - id: CKV_AWS_115
            comment: Reserved concurrency is set per account at deploy time, not fixed in the template.
          - id: CKV_AWS_173
            comment: The environment holds no secrets (table name, role ARN, TTLs, and the ARN of the signing keys' secret, whose value is read from Secrets Manager); AWS-managed encryption applies.
";

fn read(root: &Path, rel: &str) -> Result<String, GenerateError> {
    std::fs::read_to_string(root.join(rel)).map_err(|source| GenerateError::Io {
        path: rel.to_owned(),
        source,
    })
}

/// Every generated file of the repository at `root`, from its routes.yaml (refused while an entry is
/// `TODO`: [`RouteTable::load`]).
pub fn generate(root: &Path) -> Result<Vec<Generated>, GenerateError> {
    generate_from(root, &RouteTable::load(root)?)
}

fn generate_from(root: &Path, table: &RouteTable) -> Result<Vec<Generated>, GenerateError> {
    let mut out = vec![
        Generated {
            path: "template.yaml".into(),
            contents: template(table, &read(root, "template.in.yaml")?)?,
        },
        Generated {
            path: "Cargo.toml".into(),
            contents: splice(
                "Cargo.toml",
                &read(root, "Cargo.toml")?,
                &watch_router(table),
            )?,
        },
        Generated {
            path: "scripts/expected.sh".into(),
            contents: splice(
                "scripts/expected.sh",
                &read(root, "scripts/expected.sh")?,
                &expected(table),
            )?,
        },
        Generated {
            path: "README.md".into(),
            contents: splice("README.md", &read(root, "README.md")?, &readme_table(table))?,
        },
        Generated {
            path: "docs/key-scheme.md".into(),
            contents: splice(
                "docs/key-scheme.md",
                &read(root, "docs/key-scheme.md")?,
                &key_table(),
            )?,
        },
        Generated {
            path: "ARCHITECTURE.md".into(),
            contents: splice(
                "ARCHITECTURE.md",
                &read(root, "ARCHITECTURE.md")?,
                &key_table(),
            )?,
        },
        Generated {
            path: "openapi.yaml".into(),
            contents: openapi(table, &read(root, "openapi.in.yaml")?)?,
        },
        Generated {
            path: OPENAPI_30.into(),
            contents: openapi_30(&openapi(table, &read(root, "openapi.in.yaml")?)?)?,
        },
        Generated {
            path: "scripts/schemathesis.sh".into(),
            contents: splice(
                "scripts/schemathesis.sh",
                &read(root, "scripts/schemathesis.sh")?,
                &operator_routes(table),
            )?,
        },
        Generated {
            path: "tests/src/dispatch.rs".into(),
            contents: splice(
                "tests/src/dispatch.rs",
                &read(root, "tests/src/dispatch.rs")?,
                &dispatch_rows(table),
            )?,
        },
        Generated {
            path: "tests/src/client.rs".into(),
            contents: splice(
                "tests/src/client.rs",
                &read(root, "tests/src/client.rs")?,
                &client_rows(table),
            )?,
        },
    ];
    for r in table.routes() {
        out.push(Generated {
            path: format!("events/{}.json", r.function.bin).into(),
            contents: event(&r),
        });
        out.push(Generated {
            path: format!(
                "functions/{}/src/bin/{}.rs",
                r.function.krate, r.function.bin
            )
            .into(),
            contents: rustfmt(root, &bin_main(r.function))?,
        });
    }
    let mut crates: BTreeMap<&str, Vec<&Function>> = BTreeMap::new();
    for f in &table.functions {
        crates.entry(f.krate.as_str()).or_default().push(f);
    }
    for (krate, functions) in crates {
        let manifest = format!("functions/{krate}/Cargo.toml");
        out.push(Generated {
            contents: splice(&manifest, &read(root, &manifest)?, &bins(&functions))?,
            path: manifest.into(),
        });
        let lib = format!("functions/{krate}/src/lib.rs");
        out.push(Generated {
            contents: splice(&lib, &read(root, &lib)?, &modules(&functions))?,
            path: lib.into(),
        });
    }
    Ok(out)
}

/// The generated files that differ from what is on disk (or are missing), and the [`orphans`].
pub fn stale(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    stale_from(root, &RouteTable::load(root)?)
}

fn stale_from(root: &Path, table: &RouteTable) -> Result<Vec<PathBuf>, GenerateError> {
    let mut stale: Vec<PathBuf> = generate_from(root, table)?
        .into_iter()
        .filter(|g| {
            std::fs::read_to_string(root.join(&g.path)).ok().as_deref() != Some(&g.contents)
        })
        .map(|g| g.path)
        .collect();
    stale.extend(orphans_from(root, table));
    Ok(stale)
}

/// The events and bins of functions routes.yaml no longer (or never) declares: a route removed or
/// renamed leaves them behind. `pooltable gen` never deletes a file; it names them.
pub fn orphans(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    Ok(orphans_from(root, &RouteTable::load_draft(root)?))
}

fn orphans_from(root: &Path, table: &RouteTable) -> Vec<PathBuf> {
    let declared = |bin: &str| table.function(bin).is_some();
    let stems = |dir: &Path, suffix: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().into_owned();
                name.strip_suffix(suffix).map(str::to_owned)
            })
            .collect()
    };
    let mut orphans: Vec<PathBuf> = stems(&root.join("events"), ".json")
        .into_iter()
        .filter(|bin| !declared(bin))
        .map(|bin| format!("events/{bin}.json").into())
        .collect();
    for krate in stems(&root.join("functions"), "") {
        let dir = format!("functions/{krate}/src/bin");
        orphans.extend(
            stems(&root.join(&dir), ".rs")
                .into_iter()
                .filter(|bin| !declared(bin))
                .map(|bin| format!("{dir}/{bin}.rs").into()),
        );
    }
    orphans.sort();
    orphans
}

/// Writes every generated file; returns those it changed. It writes from a draft (an entry of
/// routes.yaml may still be `TODO`: [`RouteTable::unfilled`]), so a scaffolded route builds and
/// serves while `gen --check` and the tests still refuse it.
pub fn write(root: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    let table = RouteTable::load_draft(root)?;
    let orphans = orphans_from(root, &table);
    let changed: Vec<PathBuf> = stale_from(root, &table)?
        .into_iter()
        .filter(|p| !orphans.contains(p))
        .collect();
    for g in generate_from(root, &table)? {
        if changed.contains(&g.path) {
            let path = root.join(&g.path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|source| GenerateError::Io {
                    path: g.path.display().to_string(),
                    source,
                })?;
            }
            std::fs::write(&path, &g.contents).map_err(|source| GenerateError::Io {
                path: g.path.display().to_string(),
                source,
            })?;
        }
    }
    Ok(changed)
}

/// Rust code as `cargo fmt` leaves it, so that formatting the workspace never makes a generated
/// file stale.
pub(crate) fn rustfmt(root: &Path, code: &str) -> Result<String, GenerateError> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let failed = |message: String| GenerateError::Shape {
        path: "rustfmt".into(),
        message,
    };
    // Run in the repository, so its rustfmt.toml (and no one's home configuration) applies.
    let mut child = Command::new("rustfmt")
        .current_dir(root)
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            failed(format!(
                "cannot run rustfmt (rustup component add rustfmt): {e}"
            ))
        })?;
    child
        .stdin
        .take()
        .ok_or_else(|| failed("no stdin".into()))?
        .write_all(code.as_bytes())
        .map_err(|e| failed(e.to_string()))?;
    let out = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    String::from_utf8(out.stdout).map_err(|e| failed(e.to_string()))
}

/// `text` with the lines between its `@generated begin` and `@generated end` marker lines replaced
/// by `body` (which ends with a newline, or is empty).
fn splice(path: &str, text: &str, body: &str) -> Result<String, GenerateError> {
    let shape = |message: &str| GenerateError::Shape {
        path: path.to_owned(),
        message: message.to_owned(),
    };
    let begin = text
        .find(BEGIN)
        .ok_or_else(|| shape("no `@generated begin` marker line"))?;
    let body_start = begin
        + text[begin..]
            .find('\n')
            .ok_or_else(|| shape("nothing after the begin marker"))?
        + 1;
    let end_marker = text[body_start..]
        .find(END)
        .ok_or_else(|| shape("no `@generated end` marker line"))?
        + body_start;
    let end_line = text[..end_marker].rfind('\n').map_or(0, |i| i + 1);
    if text[end_marker..].contains(BEGIN) {
        return Err(shape("more than one generated part"));
    }
    Ok(format!(
        "{}{body}{}",
        &text[..body_start],
        &text[end_line..]
    ))
}

/// Replaces the line holding `marker` (a `# @generate <name>` comment) with `body`.
fn replace_marker(
    path: &str,
    text: &str,
    marker: &str,
    body: &str,
) -> Result<String, GenerateError> {
    let at = text.find(marker).ok_or_else(|| GenerateError::Shape {
        path: path.to_owned(),
        message: format!("no `{marker}` line"),
    })?;
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    Ok(format!(
        "{}{body}{}",
        &text[..line_start],
        &text[line_end..]
    ))
}

fn template(table: &RouteTable, source: &str) -> Result<String, GenerateError> {
    let mut functions = String::new();
    let mut permissions = String::new();
    for r in table.routes() {
        functions.push_str(&function_resource(&r));
        permissions.push_str(&rest_permission(&r));
    }
    let text = replace_marker(
        "template.in.yaml",
        source,
        "# @generate functions",
        &functions,
    )?;
    let text = replace_marker(
        "template.in.yaml",
        &text,
        "# @generate rest-paths",
        &rest_paths(table),
    )?;
    let text = replace_marker(
        "template.in.yaml",
        &text,
        "# @generate rest-permissions",
        &permissions,
    )?;
    let text = replace_marker(
        "template.in.yaml",
        &text,
        "# @generate roles",
        &roles::roles(table),
    )?;
    let (text, groups) = log_groups::add(&text);
    let text = replace_marker("template.in.yaml", &text, "# @generate log-groups", &groups)?;
    Ok(format!(
        "# Generated by `pooltable gen` from template.in.yaml and routes.yaml: edit those, then run it.\n{text}"
    ))
}

fn function_resource(r: &Route) -> String {
    let f = r.function;
    let mut s = format!(
        "  {resource}:
    Type: AWS::Serverless::Function
    Metadata:
      checkov:
        skip:
{API_FUNCTION_SKIPS}      BuildMethod: rust-cargolambda
      BuildProperties:
        Binary: {bin}
    Properties:
      FunctionName: !Sub \"pooltable-${{Stage}}-{bin}\"
      CodeUri: functions/{krate}
",
        resource = f.resource(),
        bin = f.bin,
        krate = f.krate,
    );
    if f.caller.pooled() {
        s.push_str(
            "      # It serves other tenants than the caller's own (an operator route), so it stays pooled.
      TenancyConfig: !Ref AWS::NoValue
",
        );
    }
    let _ = writeln!(s, "      Role: !GetAtt {}.Arn", f.role());
    let mut extra = f.template.clone().unwrap_or_default();
    match f.platform_sessions() {
        Some(p) if p != PlatformSessions::default() => {
            extra = roles::with_platform_access(&extra, p.as_str());
        }
        _ => {}
    }
    for line in extra.lines() {
        let _ = writeln!(s, "      {line}");
    }
    // Safe deploys: each new version takes a share of the traffic first, and the 5xx-rate alarm (with
    // Alarms=enabled) rolls it back.
    s.push_str(
        "      AutoPublishAlias: live
      DeploymentPreference:
        Type: !Ref DeploymentType
        Alarms: !If [AlarmsOn, [!Ref ServerErrorRateAlarm], []]
",
    );
    let _ = write!(
        s,
        "      Events:
        Api:
          Type: HttpApi
          Properties:
            ApiId: !Ref HttpApi
            Method: {method}
            Path: {path}
",
        method = r.method,
        path = r.path
    );
    if f.caller == Caller::Operator {
        s.push_str(
            "            # Operators only, at the gateway as well as in the function: the access token must
            # carry this scope (with UserPool=create, the trigger gives it to platform-admin members
            # and takes it from everyone else; README, \"Cognito\").
            Auth:
              Authorizer: TenantJwt
              AuthorizationScopes:
                - pooltable/admin
",
        );
    }
    s
}

fn rest_paths(table: &RouteTable) -> String {
    let mut by_path: BTreeMap<&str, Vec<Route>> = BTreeMap::new();
    for r in table.routes() {
        by_path.entry(r.path).or_default().push(r);
    }
    let mut s = String::new();
    for (path, routes) in by_path {
        let _ = writeln!(s, "          {path}:");
        for r in routes {
            let _ = writeln!(s, "            {}:", r.method.to_ascii_lowercase());
            let params = r.params();
            if !params.is_empty() {
                s.push_str("              parameters:\n");
                for p in params {
                    let _ = write!(
                        s,
                        "                - name: {p}
                  in: path
                  required: true
                  schema:
                    type: string
"
                    );
                }
            }
            s.push_str("              security:\n");
            if r.function.caller == Caller::Operator {
                s.push_str(
                    "                - TenantCognito:\n                    - pooltable/admin\n",
                );
            } else {
                s.push_str("                - TenantCognito: []\n");
            }
            let _ = write!(
                s,
                "              x-amazon-apigateway-integration:
                type: aws_proxy
                httpMethod: POST
                uri: !Sub \"arn:${{AWS::Partition}}:apigateway:${{AWS::Region}}:lambda:path/2015-03-31/functions/${{{}Aliaslive}}/invocations\"
",
                r.function.resource()
            );
            if !r.function.caller.pooled() {
                s.push_str(
                    "                requestParameters:
                  integration.request.header.X-Amz-Tenant-Id: context.authorizer.claims.custom:tenantId
",
                );
            }
        }
    }
    s
}

fn rest_permission(r: &Route) -> String {
    let resource = r.function.resource();
    let arn_path: Vec<&str> = r
        .path
        .split('/')
        .map(|seg| if seg.starts_with('{') { "*" } else { seg })
        .collect();
    format!(
        "  {resource}RestPermission:
    Type: AWS::Lambda::Permission
    Condition: PerTenantIsolation
    Properties:
      Action: lambda:InvokeFunction
      FunctionName: !Ref {resource}Aliaslive
      Principal: apigateway.amazonaws.com
      SourceArn: !Sub \"arn:${{AWS::Partition}}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{TenantRestApi}}/*/{method}{path}\"
",
        method = r.method,
        path = arn_path.join("/"),
    )
}

fn watch_router(table: &RouteTable) -> String {
    let mut paths: Vec<(&str, Vec<String>)> = Vec::new();
    for r in table.routes() {
        let entry = format!(
            "{{ method = \"{}\", function = \"{}\" }}",
            r.method, r.function.bin
        );
        match paths.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, methods)) => methods.push(entry),
            None => paths.push((r.path, vec![entry])),
        }
    }
    paths
        .into_iter()
        .map(|(path, methods)| format!("\"{path}\" = [{}]\n", methods.join(", ")))
        .collect()
}

/// The routes only an operator may call, which the contract check's tenant pass leaves out.
fn operator_routes(table: &RouteTable) -> String {
    let bins: Vec<&str> = table
        .routes()
        .filter(|r| r.function.caller == Caller::Operator)
        .map(|r| r.function.bin.as_str())
        .collect();
    format!("OPERATOR_ROUTES=({})\n", bins.join(" "))
}

/// openapi.yaml: openapi.in.yaml with its `x-operations` (each route's operation, by bin) made
/// into `paths`, in the route table's order; a route without an operation gets a skeleton.
/// openapi.yaml as OpenAPI 3.0, which the typed client's generator reads (progenitor does not read
/// 3.1: progenitor#1268); `client/build.rs` makes the client from it.
const OPENAPI_30: &str = "client/openapi-3.0.yaml";

fn openapi_30(openapi_31: &str) -> Result<String, GenerateError> {
    let shape = |message: String| GenerateError::Shape {
        path: OPENAPI_30.into(),
        message,
    };
    // The 3.1 text without its first line (the generated-file notice), as a YAML value.
    let doc: serde_yaml::Value =
        serde_yaml::from_str(openapi_31).map_err(|e| shape(e.to_string()))?;
    let doc = openapi30::to_openapi_30(doc).map_err(|e| shape(e.to_string()))?;
    let text = serde_yaml::to_string(&doc).map_err(|e| shape(e.to_string()))?;
    Ok(format!(
        "# Generated by `pooltable gen` from openapi.yaml, as OpenAPI 3.0 for the typed client's generator\n\
         # (devtools/src/generate/openapi30.rs says what each rule changes): edit openapi.in.yaml, then run it.\n{text}"
    ))
}

fn openapi(table: &RouteTable, source: &str) -> Result<String, GenerateError> {
    const PATH: &str = "openapi.in.yaml";
    let shape = |message: String| GenerateError::Shape {
        path: PATH.into(),
        message,
    };
    let start = source
        .find("\nx-operations:\n")
        .ok_or_else(|| shape("no top-level x-operations".into()))?
        + 1;
    let body_start = start + "x-operations:\n".len();
    let mut end = body_start;
    for line in source[body_start..].split_inclusive('\n') {
        if !(line.starts_with(' ') || line.trim().is_empty()) {
            break;
        }
        end += line.len();
    }
    // bin -> its operation's lines, indented as under x-operations.<bin> (4 spaces)
    let mut operations: Vec<(String, Vec<&str>)> = Vec::new();
    for line in source[body_start..end].lines() {
        if let Some(bin) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) {
            if !bin.starts_with(' ') {
                operations.push((bin.to_owned(), Vec::new()));
                continue;
            }
        }
        match operations.last_mut() {
            Some((_, lines)) => lines.push(line),
            None => return Err(shape(format!("x-operations starts with {line:?}"))),
        }
    }
    for (bin, _) in &operations {
        if !table.routes().any(|r| &r.function.bin == bin) {
            return Err(shape(format!(
                "x-operations.{bin} is not a route in routes.yaml"
            )));
        }
    }
    let mut paths: Vec<(&str, Vec<Route>)> = Vec::new();
    for r in table.routes() {
        match paths.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, routes)) => routes.push(r),
            None => paths.push((r.path, vec![r])),
        }
    }
    let mut out = String::from("paths:\n");
    for (path, routes) in paths {
        let _ = writeln!(out, "  {path}:");
        for r in routes {
            let bin = &r.function.bin;
            let _ = writeln!(
                out,
                "    {}:\n      operationId: {bin}",
                r.method.to_ascii_lowercase()
            );
            match operations.iter().find(|(b, _)| b == bin) {
                Some((_, lines)) => {
                    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
                    check_operation(&r, &text)
                        .map_err(|m| shape(format!("x-operations.{bin}: {m}")))?;
                    for line in lines {
                        if line.trim().is_empty() {
                            out.push('\n');
                        } else {
                            let _ = writeln!(out, "  {line}");
                        }
                    }
                }
                None => out.push_str(&operation_skeleton(&r)),
            }
        }
    }
    // The source's own leading comment is about editing it; the generated file says where it comes from.
    let head: String = source[..start]
        .split_inclusive('\n')
        .skip_while(|l| l.starts_with('#'))
        .collect();
    Ok(format!(
        "# Generated by `pooltable gen` from openapi.in.yaml and routes.yaml: edit those, then run it.\n{head}{out}{}",
        &source[end..]
    ))
}

/// A hand-written operation declares the route's path parameters, and the Idempotency-Key exactly
/// when the route takes one.
fn check_operation(r: &Route, text: &str) -> Result<(), String> {
    let op: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let params = op["parameters"].as_sequence().cloned().unwrap_or_default();
    for p in r.params() {
        if !params
            .iter()
            .any(|x| x["name"].as_str() == Some(p) && x["in"].as_str() == Some("path"))
        {
            return Err(format!("path parameter {p} is not declared"));
        }
    }
    let idempotent = params
        .iter()
        .any(|x| x["$ref"].as_str() == Some("#/components/parameters/IdempotencyKey"));
    if idempotent != r.function.idempotent {
        return Err(format!(
            "routes.yaml says idempotent: {}, the operation's Idempotency-Key says {idempotent}",
            r.function.idempotent
        ));
    }
    Ok(())
}

/// The operation of a route openapi.in.yaml does not describe yet: its parameters, its success
/// status and the errors every route can answer.
fn operation_skeleton(r: &Route) -> String {
    let f = r.function;
    let status = f.success_status();
    let mut s = format!("      summary: {}\n", f.bin);
    let params = r.params();
    if !params.is_empty() || f.idempotent {
        s.push_str("      parameters:\n");
        for p in params {
            let _ = write!(
                s,
                "      - name: {p}\n        in: path\n        required: true\n        schema:\n          type: string\n          pattern: ^[A-Za-z0-9_-]{{1,128}}$\n"
            );
        }
        if f.idempotent {
            s.push_str("      - $ref: '#/components/parameters/IdempotencyKey'\n");
        }
    }
    let description = match status {
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        _ => "OK",
    };
    let _ = writeln!(
        s,
        "      responses:\n        '{status}':\n          description: {description}"
    );
    if status != 204 {
        s.push_str("          content:\n            application/json:\n              schema:\n                type: object\n");
    }
    for (code, name) in [
        ("400", "BadRequest"),
        ("401", "Unauthorized"),
        ("403", "Forbidden"),
        ("429", "TooManyRequests"),
        ("503", "Unavailable"),
    ] {
        let _ = writeln!(
            s,
            "        '{code}':\n          $ref: '#/components/responses/{name}'"
        );
    }
    s
}

fn expected(table: &RouteTable) -> String {
    let mut s = String::from("EXPECTED=(\n");
    for f in &table.functions {
        let _ = writeln!(s, "  \"{} {}\"", f.bin, f.expectation());
    }
    s.push_str(")\n");
    s
}

/// The key table, from the builders themselves (`shared::identity::keys::key_table`): every key's
/// bytes for a sample tenant, so `gen --check` fails when one changes.
fn key_table() -> String {
    format!(
        "Every key as the builders write it, for the sample tenant `acme` with {} shards \
         (`shared::identity::keys::key_table`):\n\n{}",
        shared::identity::keys::SAMPLE_SHARDS,
        shared::identity::keys::key_table_markdown()
    )
}

fn readme_table(table: &RouteTable) -> String {
    let mut s = String::from(
        "| bin | route | index | key condition | DynamoDB requests |\n|---|---|---|---|---|\n",
    );
    for f in &table.functions {
        let Some(doc) = &f.doc else { continue };
        let mut route = match f.route() {
            Some(r) => format!(
                "`{} {}{}`",
                r.method,
                r.path,
                doc.query.as_deref().unwrap_or_default()
            ),
            None => String::new(),
        };
        if let Some(about) = &doc.about {
            let joiner = if route.is_empty() || about.starts_with(':') {
                ""
            } else {
                " "
            };
            route = format!("{route}{joiner}{about}");
        }
        let _ = writeln!(
            s,
            "| `{}` | {route} | {} | {} | {} |",
            f.bin, doc.index, doc.keys, doc.requests
        );
    }
    s
}

/// The rows of the tests' dispatch (`tests/src/dispatch.rs`): each route's bin and its handler's
/// module, and the state the handler takes, when it takes one.
fn dispatch_rows(table: &RouteTable) -> String {
    let mut s = String::new();
    for r in table.routes() {
        let f = r.function;
        let state = match &f.state {
            Some(state) => format!(" with {}", state_fn(state)),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "    \"{}\" => {}::{}{state},",
            f.bin,
            f.krate,
            f.module()
        );
    }
    s
}

/// The rows of the tests' typed client (`tests/src/client.rs`): each route's method, named after its
/// function (the bin in snake_case), taking its path parameters in order, and a body when its sample
/// has one.
fn client_rows(table: &RouteTable) -> String {
    let mut s = String::new();
    for r in table.routes() {
        let f = r.function;
        let params: Vec<String> = r
            .params()
            .iter()
            .map(|p| format!("{} = \"{p}\"", snake_case(p)))
            .collect();
        let body = if f.sample.body.is_some() {
            " with body"
        } else {
            ""
        };
        let caller = match f.caller {
            Caller::Tenant => "a tenant",
            Caller::Operator => "an operator",
            Caller::Any => "a tenant or an operator",
        };
        let _ = writeln!(
            s,
            "    /// `{} {}` ({caller}).\n    \"{}\" => {}({}){body};",
            r.method,
            r.path,
            f.bin,
            f.module(),
            params.join(", "),
        );
    }
    s
}

/// `productId` → `product_id`, `ImportQueue` → `import_queue`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `imports::ImportQueue` → `import_queue`: the tests' function that builds a route's state.
fn state_fn(state: &str) -> String {
    snake_case(state.rsplit("::").next().unwrap_or(state))
}

fn bin_main(f: &Function) -> String {
    let handler = format!("{}::{}::handle", f.krate, f.module());
    let (state, call) = match &f.state {
        Some(state) => (
            format!(
                "    let state: &'static {state} = Box::leak(Box::new({state}::from_env()?));\n"
            ),
            format!("{handler}(app, state, req)"),
        ),
        None => (String::new(), format!("{handler}(app, req)")),
    };
    format!(
        "// Generated by `pooltable gen` from routes.yaml: edit that, then run it.
//! `{bin}`: see [`{krate}::{module}`].

#[tokio::main(flavor = \"current_thread\")]
async fn main() -> Result<(), lambda_http::Error> {{
    let app = shared::service::runtime::{start}().await?;
{state}    shared::service::runtime::serve(app, env!(\"CARGO_BIN_NAME\"), |req| {{
        {call}
    }})
    .await
}}
",
        bin = f.bin,
        krate = f.krate,
        module = f.module(),
        start = if f.reads_only() {
            "start_read_only"
        } else {
            "start"
        },
    )
}

fn bins(functions: &[&Function]) -> String {
    let mut sorted: Vec<&&Function> = functions.iter().collect();
    sorted.sort_by(|a, b| a.bin.cmp(&b.bin));
    sorted
        .into_iter()
        .map(|f| {
            format!(
                "[[bin]]\nname = \"{bin}\"\npath = \"src/bin/{bin}.rs\"\ntest = false\n\n",
                bin = f.bin
            )
        })
        .collect()
}

fn modules(functions: &[&Function]) -> String {
    let mut mods: Vec<String> = functions
        .iter()
        .filter(|f| f.route().is_some())
        .map(|f| f.module())
        .collect();
    mods.sort();
    mods.into_iter()
        .map(|m| format!("pub mod {m};\n"))
        .collect()
}

/// The JWT claims API Gateway's authorizer passes for the sample caller: a tenant user's ID token,
/// or an operator's access token (README, "Claims").
fn claims(
    caller: Caller,
) -> (
    BTreeMap<&'static str, &'static str>,
    Option<Vec<&'static str>>,
) {
    let mut claims = BTreeMap::from([
        ("sub", "5f1c2a9e-1111-4c6a-9d7e-0a1b2c3d4e5f"),
        (
            "iss",
            "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE",
        ),
        ("custom:tenantId", "acme"),
        ("email", "dev@acme.example"),
        ("exp", "1795158000"),
        ("iat", "1795154400"),
    ]);
    if caller == Caller::Operator {
        claims.extend([
            ("token_use", "access"),
            ("scope", "pooltable/admin"),
            ("cognito:groups", "[platform-admin]"),
            ("client_id", "3n4b5urk1ft4fl3mg5e62d9ado"),
        ]);
        (claims, Some(vec!["pooltable/admin"]))
    } else {
        claims.extend([("token_use", "id"), ("aud", "3n4b5urk1ft4fl3mg5e62d9ado")]);
        (claims, None)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    version: &'static str,
    route_key: String,
    raw_path: String,
    raw_query_string: String,
    headers: BTreeMap<String, String>,
    request_context: RequestContext,
    is_base64_encoded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_parameters: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    query_string_parameters: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestContext {
    account_id: &'static str,
    api_id: &'static str,
    authorizer: BTreeMap<&'static str, Jwt>,
    domain_name: &'static str,
    domain_prefix: &'static str,
    http: Http,
    request_id: &'static str,
    route_key: String,
    stage: &'static str,
    time: &'static str,
    time_epoch: u64,
}

#[derive(Serialize)]
struct Jwt {
    claims: BTreeMap<&'static str, &'static str>,
    scopes: Option<Vec<&'static str>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Http {
    method: String,
    path: String,
    protocol: &'static str,
    source_ip: &'static str,
    user_agent: &'static str,
}

fn strings(m: &serde_yaml::Mapping) -> Vec<(String, String)> {
    m.iter()
        .map(|(k, v)| {
            let text = |v: &serde_yaml::Value| match v {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            };
            (text(k), text(v))
        })
        .collect()
}

/// A query string's component, percent-encoded as API Gateway's rawQueryString is.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `events/<bin>.json`: the API Gateway (HTTP API, v2) event of the route's sample request.
fn event(r: &Route) -> String {
    const HOST: &str = "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com";
    let sample = &r.function.sample;
    let path_values: BTreeMap<String, String> = strings(&sample.path).into_iter().collect();
    let raw_path = format!(
        "/dev{}",
        r.path
            .split('/')
            .map(
                |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(p) => path_values.get(p).cloned().unwrap_or_default(),
                    None => seg.to_owned(),
                }
            )
            .collect::<Vec<_>>()
            .join("/")
    );
    let query = strings(&sample.query);
    let raw_query = query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = BTreeMap::from([
        ("accept".to_owned(), "application/json".to_owned()),
        ("authorization".to_owned(), "Bearer eyJraWQiOiJleGFtcGxlIiwiYWxnIjoiUlMyNTYifQ.eyJzdWIiOiJ1c2VyLTEiLCJjdXN0b206dGVuYW50SWQiOiJhY21lIn0.c2lnbmF0dXJl".to_owned()),
        ("host".to_owned(), HOST.to_owned()),
        ("user-agent".to_owned(), "curl/8.5.0".to_owned()),
        ("x-amzn-trace-id".to_owned(), "Root=1-673ec2a0-0123456789abcdef01234567".to_owned()),
        ("x-forwarded-for".to_owned(), "198.51.100.7".to_owned()),
        ("x-forwarded-port".to_owned(), "443".to_owned()),
        ("x-forwarded-proto".to_owned(), "https".to_owned()),
    ]);
    if let Some(body) = &sample.body {
        headers.insert("content-length".into(), body.len().to_string());
        headers.insert("content-type".into(), "application/json".into());
    }
    headers.extend(strings(&sample.headers));
    let route_key = format!("{} {}", r.method, r.path);
    let (claims, scopes) = claims(r.function.caller);
    let event = Event {
        version: "2.0",
        route_key: route_key.clone(),
        raw_path: raw_path.clone(),
        raw_query_string: raw_query,
        headers,
        request_context: RequestContext {
            account_id: "123456789012",
            api_id: "a1b2c3d4e5",
            authorizer: BTreeMap::from([("jwt", Jwt { claims, scopes })]),
            domain_name: HOST,
            domain_prefix: "a1b2c3d4e5",
            http: Http {
                method: r.method.to_owned(),
                path: raw_path,
                protocol: "HTTP/1.1",
                source_ip: "198.51.100.7",
                user_agent: "curl/8.5.0",
            },
            request_id: "Bq3hZjH2oAMEbXw=",
            route_key,
            stage: "dev",
            time: "20/Nov/2026:06:00:00 +0000",
            time_epoch: 1_795_154_400_000,
        },
        is_base64_encoded: false,
        path_parameters: (!path_values.is_empty()).then_some(path_values),
        query_string_parameters: (!query.is_empty()).then(|| query.into_iter().collect()),
        body: sample.body.clone(),
    };
    let mut text = serde_json::to_string_pretty(&event).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let text = "a\n# @generated begin\nold\n# @generated end\nb\n";
        assert_eq!(
            splice("f", text, "new\n").unwrap(),
            "a\n# @generated begin\nnew\n# @generated end\nb\n"
        );
        assert!(splice("f", "a\n", "x\n").is_err());
    }

    #[test]
    fn state_fn_is_the_snake_case_type_name() {
        assert_eq!(state_fn("imports::ImportQueue"), "import_queue");
    }

    #[test]
    fn query_components_are_percent_encoded() {
        assert_eq!(encode("ada@acme.example"), "ada%40acme.example");
    }
}

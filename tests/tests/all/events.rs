//! The sample events in `events/` and the template: every function has a realistic API Gateway v2
//! event, it parses with lambda_http, its claims resolve to a tenant, and it names a route that
//! template.yaml really serves with that binary. No local stack needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use devtools::routes::{Caller, RouteTable};
use lambda_http::RequestExt;
use serde_yaml::Value;
use shared::isolation::claims::{caller, AuthMode, DEV_AUTH_ENV};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn binaries() -> BTreeSet<String> {
    let mut bins = BTreeSet::new();
    for crate_dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let bin_dir = crate_dir.unwrap().path().join("src/bin");
        for f in std::fs::read_dir(bin_dir).unwrap() {
            let name = f
                .unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            bins.insert(name);
        }
    }
    bins
}

fn template() -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(root().join("template.yaml")).unwrap()).unwrap()
}

/// `binary → "METHOD /path"` for every function in template.yaml.
fn template_routes() -> BTreeMap<String, String> {
    integration::routes::template_routes()
        .into_iter()
        .map(|(bin, (method, path))| (bin, format!("{method} {path}")))
        .collect()
}

#[test]
fn every_binary_has_a_template_function_and_an_event() {
    let bins = binaries();
    assert_eq!(bins, integration::routes::template_binaries());
    for b in &bins {
        assert!(
            root().join(format!("events/{b}.json")).exists(),
            "events/{b}.json is missing"
        );
    }
}

#[test]
fn every_event_parses_names_its_route_and_carries_a_tenant() {
    let routes = template_routes();
    for (bin, route) in routes {
        // GIVEN the sample event of a function
        let raw = std::fs::read_to_string(root().join(format!("events/{bin}.json"))).unwrap();
        // WHEN lambda_http parses it
        let req = lambda_http::request::from_str(&raw).unwrap_or_else(|e| panic!("{bin}: {e}"));
        // THEN its claims resolve to the demo tenant, with production auth
        let who = caller(&req, AuthMode::Authorizer).unwrap_or_else(|e| panic!("{bin}: {e}"));
        assert_eq!(who.tenant.as_str(), "acme", "{bin}");
        // AND it names the route template.yaml serves with that binary, with its path parameters filled
        let json: serde_json::Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(json["routeKey"], route.as_str(), "{bin}");
        let (_, path) = route.split_once(' ').unwrap();
        let params: Vec<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        for p in params {
            assert!(
                req.path_parameters_ref().and_then(|m| m.first(p)).is_some(),
                "{bin}: {p} missing"
            );
        }
    }
}

#[test]
fn a_deployed_stack_carries_no_local_endpoint() {
    // GIVEN the template and the deploy configuration
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let samconfig = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    // THEN the endpoint variables exist only behind conditions that are false unless a local run sets
    // the parameters, whose defaults are empty, and no deploy environment sets them
    for (var, param, condition) in [
        (
            "AWS_ENDPOINT_URL_DYNAMODB",
            "LocalDynamoDbEndpoint",
            "HasLocalDynamoDbEndpoint",
        ),
        (
            "AWS_ENDPOINT_URL_STS",
            "LocalStsEndpoint",
            "HasLocalStsEndpoint",
        ),
        (
            "AWS_ENDPOINT_URL_SECRETS_MANAGER",
            "LocalSecretsManagerEndpoint",
            "HasLocalSecretsManagerEndpoint",
        ),
    ] {
        assert_eq!(raw.matches(var).count(), 1, "{var} is set once, in Globals");
        assert!(raw.contains(&format!(
            "{var}: !If [{condition}, !Ref {param}, !Ref AWS::NoValue]"
        )));
        assert!(raw.contains(&format!("{condition}: !Not [!Equals [!Ref {param}, \"\"]]")));
        let t = template();
        assert_eq!(
            t["Parameters"][param]["Default"].as_str(),
            Some(""),
            "{param}"
        );
        assert!(
            !samconfig.contains(param),
            "samconfig.toml must not set {param}"
        );
    }
    for local in ["localhost", "127.0.0.1", "host.docker.internal"] {
        assert!(!raw.contains(local), "template.yaml names {local}");
    }
}

#[test]
fn template_never_enables_unsigned_dev_tokens() {
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    assert!(
        !raw.contains(DEV_AUTH_ENV),
        "template.yaml must never set {DEV_AUTH_ENV}"
    );
    assert!(
        !raw.contains("DEV_UNSIGNED"),
        "template.yaml must never set a dev-auth variable"
    );
    // The function accepts the dev JWT inside a Lambda container only beside AWS_SAM_LOCAL=true,
    // which SAM CLI sets for `sam local`; a deployed function must never carry it.
    assert!(
        !raw.contains("AWS_SAM_LOCAL"),
        "template.yaml must never set AWS_SAM_LOCAL"
    );
}

/// The function roles themselves: tests/tests/all/roles.rs (one each, generated from routes.yaml).
#[test]
fn the_tenant_role_allows_no_scan_or_partiql_and_trusts_the_function_roles_by_their_path() {
    let t = template();
    let res = &t["Resources"];
    let tenant_role = serde_yaml::to_string(&res["TenantAccessRole"]["Properties"]).unwrap();
    for forbidden in ["Scan", "PartiQL", "dynamodb:*", "ExecuteStatement"] {
        assert!(
            !tenant_role.contains(forbidden),
            "tenant role allows {forbidden}"
        );
    }
    let trust = &res["TenantAccessRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"];
    let statements = trust.as_sequence().unwrap();
    // One Allow (the function roles under the functions' path, tagged with their platform access,
    // asking with a well-formed TenantId tag), the Deny refusing malformed tags, and the Deny holding
    // each role to its platform access; every one names the account, and its conditions choose.
    assert_eq!(statements.len(), 3);
    for s in statements {
        let principal = serde_yaml::to_string(&s["Principal"]).unwrap();
        assert!(principal.contains(":root"), "{principal}");
    }
    let allows: Vec<&serde_yaml::Value> = statements
        .iter()
        .filter(|s| s["Effect"].as_str() == Some("Allow"))
        .collect();
    assert_eq!(allows.len(), 1);
    let allow = serde_yaml::to_string(&allows[0]).unwrap();
    assert!(allow.contains("aws:PrincipalArn") && allow.contains("role/pooltable-${Stage}/*"));
    let actions = serde_yaml::to_string(&allows[0]["Action"]).unwrap();
    assert!(actions.contains("sts:AssumeRole") && actions.contains("sts:TagSession"));
}

/// The modules of functions/ that name the platform's partition, each with the binaries that run
/// it and the access to the partition they need (`PLATFORM_SESSION_ACCESS`: `all` for the functions
/// that act as the platform). A new one fails
/// [`only_the_functions_that_need_the_platform_partition_can_reach_it`] until it is listed here, and
/// its functions are on a role the tenant-access role admits for that access.
const PLATFORM_MODULES: [(&str, &[&str], &str); 9] = [
    ("control_plane", &["control-plane-events"], "all"),
    ("key_tenant", &["update-tenant", "drive-lifecycle"], "all"),
    ("create_import", &["create-import"], "imports-due"),
    ("drive_lifecycle", &["drive-lifecycle"], "all"),
    ("move_tenant", &["update-tenant", "drive-lifecycle"], "all"),
    (
        "offboard_tenant",
        &["offboard-tenant", "drive-lifecycle", "work-lanes"],
        "all",
    ),
    (
        "reshard_tenant",
        &["update-tenant", "drive-lifecycle", "work-lanes"],
        "all",
    ),
    (
        "restore_tenant",
        &["restore-tenant", "drive-lifecycle"],
        "all",
    ),
    ("get_tenant_usage", &["get-tenant-usage"], "read"),
];

/// Issue 40, item 10, and issue 56, item 3: IAM as narrow as the code, the platform's partition
/// narrowed per function.
#[test]
fn only_the_functions_that_need_the_platform_partition_can_reach_it() {
    // GIVEN the access to the platform's partition each function asks for (its
    // PLATFORM_SESSION_ACCESS, else the Globals' default); which its role admits is
    // tests/tests/all/roles.rs's
    let t = template();
    let default_access = t["Globals"]["Function"]["Environment"]["Variables"]
        ["PLATFORM_SESSION_ACCESS"]
        .as_str()
        .expect("the Globals' PLATFORM_SESSION_ACCESS")
        .to_owned();
    let functions: BTreeMap<String, (String, String)> = t["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|r| {
            let bin = r["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap();
            let role = serde_yaml::to_string(&r["Properties"]["Role"]).unwrap();
            let role = role
                .trim()
                .trim_start_matches("!GetAtt ")
                .trim_end_matches(".Arn");
            let access = r["Properties"]["Environment"]["Variables"]["PLATFORM_SESSION_ACCESS"]
                .as_str()
                .unwrap_or(&default_access);
            (bin.to_owned(), (role.to_owned(), access.to_owned()))
        })
        .collect();
    // THEN the modules that name the partition are exactly those listed, and each of their
    // functions asks for the access listed; no other function asks for the whole partition
    // (a module's private submodules, `src/<module>/*.rs`, count as the module)
    let mut found = BTreeSet::new();
    for crate_dir in std::fs::read_dir(root().join("functions")).unwrap() {
        let src = crate_dir.unwrap().path().join("src");
        for path in integration::rust_files_under(&src) {
            let source = std::fs::read_to_string(&path).unwrap();
            if source.contains("TenantId::platform()") || source.contains("TenantId::PLATFORM") {
                let top = path.strip_prefix(&src).unwrap().iter().next().unwrap();
                let module = Path::new(top).file_stem().unwrap().to_string_lossy();
                found.insert(module.into_owned());
            }
        }
    }
    let listed: BTreeSet<String> = PLATFORM_MODULES
        .iter()
        .map(|(m, ..)| m.to_string())
        .collect();
    assert_eq!(found, listed, "modules naming the platform's partition");
    for (module, bins, access) in PLATFORM_MODULES {
        for bin in bins {
            assert_eq!(functions[*bin].1, access, "{module}: {bin}");
        }
    }
    let whole: BTreeSet<&str> = PLATFORM_MODULES
        .iter()
        .filter(|(.., access)| *access == "all")
        .flat_map(|(_, bins, _)| bins.iter().copied())
        .collect();
    let asking_whole: BTreeSet<&str> = functions
        .iter()
        .filter(|(_, (_, access))| access == "all")
        .map(|(bin, _)| bin.as_str())
        .collect();
    assert_eq!(
        asking_whole, whole,
        "functions that ask for the whole platform partition"
    );
    // AND the tenant-access role allows no batch operation (no code path sends one)
    let tenant_role = serde_yaml::to_string(&t["Resources"]["TenantAccessRole"]).unwrap();
    for batch in ["BatchGetItem", "BatchWriteItem"] {
        assert!(
            !tenant_role.contains(batch),
            "the tenant role allows {batch}"
        );
        assert!(
            !shared::isolation::policy::TENANT_ACTIONS
                .contains(&format!("dynamodb:{batch}").as_str()),
            "the session policy allows {batch}"
        );
    }
}

#[test]
fn in_tenant_isolation_mode_the_functions_accept_only_the_templates_app_clients() {
    // GIVEN template.yaml (the REST API's Cognito authorizer accepts any app client of its pool)
    let t = template();
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    // THEN in tenant isolation mode every function is told the template's app client
    assert!(raw.contains(
        "ACCEPTED_APP_CLIENT_IDS: !If [PerTenantIsolation, !If [CreateUserPool, !Ref TenantAppClient, !Ref JwtAudience], !Ref AWS::NoValue]"
    ));
    let name = shared::isolation::claims::APP_CLIENTS_ENV;
    assert!(!t["Globals"]["Function"]["Environment"]["Variables"][name].is_null());
    // AND no function behind the API overrides it (only the Cognito trigger, which reads no claims)
    for (logical, r) in t["Resources"].as_mapping().unwrap() {
        let own = &r["Properties"]["Environment"]["Variables"][name];
        if !own.is_null() {
            assert_eq!(logical.as_str(), Some("PreTokenGenerationFunction"));
            assert!(r["Properties"]["Events"].is_null());
        }
    }
}

#[test]
fn no_configuration_is_pinned_in_cargo_lambda_metadata() {
    let mut manifests = vec![root().join("Cargo.toml")];
    for dir in std::fs::read_dir(root().join("functions")).unwrap() {
        manifests.push(dir.unwrap().path().join("Cargo.toml"));
    }
    for manifest in manifests {
        let manifest = manifest.display().to_string();
        let raw = std::fs::read_to_string(&manifest).unwrap();
        let doc: toml_like::Doc = toml_like::parse(&raw);
        for var in [
            "TABLE_NAME",
            "TENANT_ROLE_ARN",
            "AWS_",
            "SESSION_TTL_SECONDS",
        ] {
            assert!(
                !doc.metadata_lambda.contains(var),
                "{manifest} pins {var} in lambda metadata"
            );
        }
    }
}

/// Just enough TOML reading for the check above: the text of `[*.metadata.lambda.*]` sections.
mod toml_like {
    pub struct Doc {
        pub metadata_lambda: String,
    }
    pub fn parse(raw: &str) -> Doc {
        let mut in_section = false;
        let mut out = String::new();
        for line in raw.lines() {
            let l = line.trim();
            if l.starts_with('[') {
                in_section = l.contains("metadata.lambda");
            }
            if in_section {
                out.push_str(l);
                out.push('\n');
            }
        }
        Doc {
            metadata_lambda: out,
        }
    }
}

#[test]
fn openapi_describes_exactly_the_template_routes() {
    let api: Value =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("openapi.yaml")).unwrap())
            .unwrap();
    let mut documented = BTreeMap::new();
    for (path, methods) in api["paths"].as_mapping().unwrap() {
        for (method, op) in methods.as_mapping().unwrap() {
            let route = format!(
                "{} {}",
                method.as_str().unwrap().to_uppercase(),
                path.as_str().unwrap()
            );
            let bin = op["operationId"].as_str().unwrap().to_owned();
            // every operation documents its problem+json errors
            for code in ["400", "401", "403", "503"] {
                assert!(op["responses"].get(code).is_some(), "{route} lacks {code}");
            }
            documented.insert(bin, route);
        }
    }
    assert_eq!(documented, template_routes());
}

#[test]
fn every_checkov_skip_in_the_template_gives_a_reason() {
    let t = template();
    let mut skips = 0;
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if let Some(list) = r["Metadata"]["checkov"]["skip"].as_sequence() {
            for s in list {
                skips += 1;
                let comment = s["comment"].as_str().unwrap_or_default();
                assert!(
                    comment.len() > 20,
                    "{name:?}: skip {:?} lacks a reason",
                    s["id"]
                );
            }
        }
    }
    assert!(skips > 0);
}

#[test]
fn only_the_operator_only_routes_demand_the_operator_scope_at_the_gateway() {
    let t = template();
    for (_, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let bin = r["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap();
        if r["Properties"]["Events"]["Api"].is_null() {
            continue; // not behind the API
        }
        let auth = &r["Properties"]["Events"]["Api"]["Properties"]["Auth"];
        if operator_only_bins().contains(bin) {
            assert_eq!(auth["Authorizer"].as_str(), Some("TenantJwt"));
            let scopes: Vec<String> =
                serde_yaml::from_value(auth["AuthorizationScopes"].clone()).unwrap();
            assert_eq!(scopes, [shared::isolation::claims::OPERATOR_SCOPE]);
        } else {
            // Tenant routes (and get-tenant, which serves a tenant its own record) take any token.
            assert!(auth.is_null(), "{bin} has route-level auth: {auth:?}");
        }
    }
}

#[test]
fn no_event_makes_an_operator_of_a_custom_attribute() {
    // The onboarding sample is an operator's access token with the scope; no sample relies on
    // custom:role, which is never read.
    for entry in std::fs::read_dir(root().join("events")).unwrap() {
        let raw = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!raw.contains("custom:role"));
    }
    let raw = std::fs::read_to_string(root().join("events/onboard-tenant.json")).unwrap();
    let event: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        event["requestContext"]["authorizer"]["jwt"]["scopes"],
        serde_json::json!(["pooltable/admin"])
    );
}

/// What each route's handler code says of its callers, read from its source independently of
/// routes.yaml: `app.require_operator(&caller).await?` at the top of `handle` makes a route operators only
/// (`Operator`), inside a branch (another tenant's data) a route for a tenant or an operator (`Any`);
/// none, a tenant's own route. `crate::operator_on_another_tenant(` (which calls it first) at the top
/// of `handle` counts as the call.
fn callers_by_code() -> BTreeMap<String, Caller> {
    let table = RouteTable::load(&root()).unwrap();
    table
        .routes()
        .map(|r| {
            let f = r.function;
            let path = format!("functions/{}/src/{}.rs", f.krate, f.module());
            let source = std::fs::read_to_string(root().join(&path)).unwrap();
            let calls: Vec<&str> = source
                .lines()
                .filter(|l| {
                    l.trim_end().ends_with("require_operator(&caller).await?;")
                        || l.contains("= crate::operator_on_another_tenant(")
                })
                .collect();
            let caller = if calls
                .iter()
                .any(|l| l.starts_with("    ") && !l.starts_with("     "))
            {
                Caller::Operator
            } else if calls.is_empty() {
                Caller::Tenant
            } else {
                Caller::Any
            };
            (f.bin.clone(), caller)
        })
        .collect()
}

/// The functions that stay pooled in tenant isolation mode: the routes an operator may call.
fn operator_bins() -> BTreeSet<String> {
    callers_by_code()
        .into_iter()
        .filter(|(_, c)| *c != Caller::Tenant)
        .map(|(bin, _)| bin)
        .collect()
}

/// The routes no tenant user may call at all: the gateway demands the operator scope on them too.
fn operator_only_bins() -> BTreeSet<String> {
    callers_by_code()
        .into_iter()
        .filter(|(_, c)| *c == Caller::Operator)
        .map(|(bin, _)| bin)
        .collect()
}

#[test]
fn routes_yaml_says_of_each_caller_what_its_handler_does() {
    let table = RouteTable::load(&root()).unwrap();
    let code = callers_by_code();
    for r in table.routes() {
        assert_eq!(
            Some(&r.function.caller),
            code.get(&r.function.bin),
            "{}: routes.yaml's caller is not what its handler checks",
            r.function.bin
        );
    }
    assert!(
        operator_only_bins().len() >= 5,
        "{:?}",
        operator_only_bins()
    );
}

#[test]
fn tenant_isolation_mode_puts_every_tenant_function_in_per_tenant_environments_behind_the_rest_api()
{
    let t = template();
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    // The switch: one parameter, one condition, TenancyConfig in Globals behind it.
    assert_eq!(
        t["Parameters"]["TenantIsolation"]["Default"].as_str(),
        Some("pooled")
    );
    assert!(raw.contains(
        "TenancyConfig: !If [PerTenantIsolation, {TenantIsolationMode: PER_TENANT}, !Ref AWS::NoValue]"
    ));
    assert!(raw.contains("PerTenantIsolation: !Equals [!Ref TenantIsolation, per-tenant]"));
    assert!(raw.contains("DisableExecuteApiEndpoint: !If [PerTenantIsolation, true, false]"));

    let rest = &t["Resources"]["TenantRestApi"];
    assert_eq!(rest["Condition"].as_str(), Some("PerTenantIsolation"));
    let paths = &rest["Properties"]["DefinitionBody"]["paths"];
    let mut functions = 0;
    for (logical, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Serverless::Function")
            || r["Properties"]["Events"]["Api"].is_null()
        {
            continue;
        }
        functions += 1;
        let logical = logical.as_str().unwrap();
        let bin = r["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap();
        let api = &r["Properties"]["Events"]["Api"]["Properties"];
        let (method, path) = (
            api["Method"].as_str().unwrap().to_lowercase(),
            api["Path"].as_str().unwrap(),
        );
        // The REST API serves the same route with the same function.
        let op = &paths[path][method.as_str()];
        let integration = &op["x-amazon-apigateway-integration"];
        assert_eq!(integration["type"].as_str(), Some("aws_proxy"), "{bin}");
        let uri = serde_yaml::to_string(&integration["uri"]).unwrap();
        // (its `live` alias, which the canary deploys shift: never `$LATEST`)
        assert!(
            uri.contains(&format!("${{{logical}Aliaslive}}")),
            "{bin}: {uri}"
        );
        // Tenant functions get the tenant from the verified claim; operator functions stay pooled.
        let header =
            integration["requestParameters"]["integration.request.header.X-Amz-Tenant-Id"].as_str();
        let own_tenancy = &r["Properties"]["TenancyConfig"];
        if operator_bins().contains(bin) {
            assert_eq!(header, None, "{bin}");
            assert!(
                serde_yaml::to_string(own_tenancy)
                    .unwrap()
                    .contains("AWS::NoValue"),
                "{bin} must stay pooled"
            );
        } else {
            assert_eq!(
                header,
                Some("context.authorizer.claims.custom:tenantId"),
                "{bin}"
            );
            assert!(
                own_tenancy.is_null(),
                "{bin} overrides the Globals TenancyConfig"
            );
        }
        // Every operation is behind the Cognito authorizer; the operator-only ones also demand the scope.
        let security = serde_yaml::to_string(&op["security"]).unwrap();
        assert!(security.contains("TenantCognito"), "{bin}");
        assert_eq!(
            security.contains("pooltable/admin"),
            operator_only_bins().contains(bin),
            "{bin}: {security}"
        );
        // And the REST API may invoke it, in that mode only.
        let permission = &t["Resources"][format!("{logical}RestPermission").as_str()];
        assert_eq!(
            permission["Condition"].as_str(),
            Some("PerTenantIsolation"),
            "{bin}"
        );
        let source = serde_yaml::to_string(&permission["Properties"]["SourceArn"]).unwrap();
        assert!(source.contains("${TenantRestApi}"), "{bin}: {source}");
    }
    let operations: usize = paths
        .as_mapping()
        .unwrap()
        .values()
        .map(|ops| ops.as_mapping().unwrap().len())
        .sum();
    assert_eq!(
        operations, functions,
        "the REST API serves exactly the functions' routes"
    );
}

#[test]
fn the_cargo_lambda_watch_router_serves_every_route_of_the_template() {
    // The dev command and the contract check reach the functions through this router: a route
    // missing here answers cargo-lambda's own 404, not the function's.
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let router = cargo
        .split("[workspace.metadata.lambda.watch.router]")
        .nth(1)
        .expect("Cargo.toml has the watch router");
    let router = router.split("\n[").next().unwrap();
    // "path" = [ { method = "M", function = "f" }, ... ] entries, in order
    let mut served = std::collections::BTreeSet::new();
    let mut path = String::new();
    for line in router.lines() {
        if let Some(rest) = line.strip_prefix('"') {
            path = rest.split('"').next().unwrap().to_owned();
        }
        for entry in line.split('{').skip(1) {
            let field = |name: &str| {
                entry
                    .split(&format!("{name} = \""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .map(str::to_owned)
            };
            if let (Some(method), Some(function)) = (field("method"), field("function")) {
                served.insert((function, method, path.clone()));
            }
        }
    }
    for (bin, (method, route)) in integration::routes::template_routes() {
        assert!(
            served.contains(&(bin.clone(), method.clone(), route.clone())),
            "{method} {route} ({bin}) is not in the cargo lambda watch router"
        );
    }
    assert_eq!(served.len(), integration::routes::template_routes().len());
}

/// Issue 60: the documented deploys (`sam deploy --config-env dev|prod`, and `sam deploy --guided`,
/// which offers the default environment's capabilities) have what the template needs.
#[test]
fn every_deploy_environment_has_the_capabilities_tags_and_settings_the_template_needs() {
    // GIVEN samconfig.toml's deploy environments, and the template, whose roles are named
    let samconfig = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    assert!(raw.contains("RoleName:"));
    let section = |name: &str| -> String {
        let start = samconfig
            .find(&format!("[{name}.deploy.parameters]"))
            .unwrap_or_else(|| panic!("samconfig.toml has no {name} deploy environment"));
        let rest = &samconfig[start + 1..];
        rest[..rest.find("\n[").unwrap_or(rest.len())].to_owned()
    };
    for env in ["default", "dev", "prod"] {
        let s = section(env);
        // THEN each grants CAPABILITY_NAMED_IAM (a guided deploy's default, too) and tags the stack
        assert!(
            s.contains("capabilities = \"CAPABILITY_NAMED_IAM\""),
            "{env}: {s}"
        );
        assert!(s.contains("tags = \"project=pooltable"), "{env}: {s}");
    }
    // AND prod deploys its canary with the alarm that rolls it back
    assert!(section("prod").contains("\"Alarms=enabled\""));
    // AND no environment deploys a placeholder identity provider (every request would get 401):
    // dev makes its user pool, and prod's deploy is refused by the template's rule until set
    assert!(
        !samconfig.contains("EXAMPLE"),
        "a placeholder in samconfig.toml"
    );
    assert!(section("dev").contains("\"UserPool=create\""));
    let t = template();
    let rule = &t["Rules"]["AnIdentityProvider"];
    assert_eq!(
        serde_yaml::to_string(&rule["RuleCondition"])
            .unwrap()
            .trim(),
        "!Equals\n- !Ref UserPool\n- none"
    );
    // AND any stage name that fits every name the stack makes is taken
    let stage = t["Parameters"]["Stage"]["AllowedPattern"].as_str().unwrap();
    assert_eq!(stage, "^[a-z][a-z0-9-]{0,14}$");
    let longest_bin = integration::routes::route_table()
        .functions
        .iter()
        .map(|f| f.bin.len())
        .max()
        .unwrap();
    assert!(
        "pooltable-".len() + 15 + 1 + longest_bin <= 64,
        "a function name past 64"
    );
}

/// Issue 56: only the control plane's function may put on the control plane's bus, and only its
/// replies (the application plane's source): no other function can put a request there.
#[test]
fn only_the_control_plane_function_puts_on_its_bus_and_only_as_the_application_plane() {
    // GIVEN the template's control plane policy and function
    let t = template();
    let res = &t["Resources"];
    let policy = &res["ControlPlaneBusPolicy"]["Properties"];
    // THEN exactly one role holds it, the control plane's own, which only its function runs as
    let holders: Vec<&str> = res
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            serde_yaml::to_string(&r["Properties"]["ManagedPolicyArns"])
                .unwrap()
                .contains("!Ref ControlPlaneBusPolicy")
        })
        .map(|(k, _)| k.as_str().unwrap())
        .collect();
    assert_eq!(holders, ["ControlPlaneEventsRole"]);
    let runs_as = |role: &str| {
        res.as_mapping()
            .unwrap()
            .values()
            .filter(|r| {
                serde_yaml::to_string(&r["Properties"]["Role"])
                    .unwrap()
                    .contains(&format!("{role}.Arn"))
            })
            .count()
    };
    assert_eq!(runs_as("ControlPlaneEventsRole"), 1);
    // AND its PutEvents is conditioned on the application plane's source
    let text = serde_yaml::to_string(&policy["PolicyDocument"]).unwrap();
    assert!(text.contains("events:PutEvents"), "{text}");
    assert!(
        text.contains("events:source: !Ref ApplicationPlaneEventSource"),
        "{text}"
    );
}

/// Every dead-letter queue the stack makes has an alarm, and every alarm is on the dashboard and
/// in docs/operating.md's table of what to do: a message nobody is told of is a failure nobody
/// mends (the lane dead-letter queue had none).
#[test]
fn every_dead_letter_queue_has_an_alarm_and_every_alarm_is_on_the_dashboard_and_documented() {
    // GIVEN the template's resources, its raw text, and the operator's guide
    let t = template();
    let raw = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let guide = std::fs::read_to_string(root().join("docs/operating.md")).unwrap();
    let resources = t["Resources"].as_mapping().unwrap();
    let of_type = |kind: &str| -> Vec<(String, Value)> {
        resources
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(kind))
            .map(|(name, r)| (name.as_str().unwrap().to_owned(), r.clone()))
            .collect()
    };
    let alarms = of_type("AWS::CloudWatch::Alarm");
    let watched: BTreeSet<String> = alarms
        .iter()
        .map(|(_, a)| serde_yaml::to_string(&a["Properties"]["Dimensions"]).unwrap())
        .collect();
    // THEN each queue another queue dead-letters into is watched by an alarm on its depth
    for (queue, _) in of_type("AWS::SQS::Queue") {
        // (a redrive policy's deadLetterTargetArn, a function's DeadLetterQueue TargetArn, an event
        // source's on-failure Destination)
        let target = format!("TargetArn: !GetAtt {queue}.Arn");
        let destination = format!("Destination: !GetAtt {queue}.Arn");
        if raw.contains(&target) || raw.contains(&destination) || queue.ends_with("DeadLetterQueue")
        {
            assert!(
                watched
                    .iter()
                    .any(|d| d.contains(&format!("{queue}.QueueName"))),
                "no alarm watches {queue}"
            );
        }
    }
    // AND each alarm is on the dashboard's alarm widget and has its row in docs/operating.md
    for (name, alarm) in &alarms {
        assert!(
            raw.contains(&format!("\"${{{name}.Arn}}\"")),
            "{name} is not on the dashboard"
        );
        let full = serde_yaml::to_string(&alarm["Properties"]["AlarmName"]).unwrap();
        let suffix = full
            .split("${Stage}-")
            .nth(1)
            .and_then(|s| s.split(|c: char| c == '"' || c.is_whitespace()).next())
            .unwrap_or_else(|| panic!("{name}: {full}"));
        assert!(
            guide.contains(&format!("| `…-{suffix}` |")),
            "{name} ({suffix}) has no row in docs/operating.md"
        );
    }
}

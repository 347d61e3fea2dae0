// cognito-local (npm, 5.3), started with the two things Amazon Cognito does that it does not, and
// that pooltable's Cognito setup relies on (tests/tests/all/cognito.rs):
//
// 1. The pre token generation trigger's version 2 (V2_0, the template's): the event says version
//    "2" and carries the user's groups and the access token's scopes; the answer's
//    claimsAndScopeOverrideDetails applies to both tokens (claims added, overridden or suppressed;
//    scopes added or suppressed). cognito-local sends version 0 and applies an answer to the ID
//    token only.
// 2. OAuth scopes: a token issued through the OAuth endpoints (authorization code) carries the
//    scopes of its app client's AllowedOAuthScopes, as Cognito grants the scopes a client asks for
//    and is allowed; other sign-ins carry aws.cognito.signin.user.admin. cognito-local writes that
//    one scope on every access token.
//
// Everything else is cognito-local's own: users, groups, app clients, sign-in, the JWKS, RS256
// signing, and the trigger invoked over the Lambda Invoke API (its config's LambdaClient).
//
//   COGNITO_LOCAL_MODULES=<.tools/node/node_modules> PORT=<port> node cognito-local.cjs
//   (in a directory whose .cognito/config.json names the trigger and the Lambda endpoint)
"use strict";
const path = require("node:path");
const { AsyncLocalStorage } = require("node:async_hooks");

const modules = process.env.COGNITO_LOCAL_MODULES;
if (!modules) throw new Error("COGNITO_LOCAL_MODULES names the node_modules holding cognito-local");
const lib = path.join(modules, "cognito-local", "lib");
const jwt = require(require.resolve("jsonwebtoken", { paths: [lib] }));
const { JwtTokenGenerator } = require(path.join(lib, "services", "tokenGenerator"));
const { LambdaService } = require(path.join(lib, "services", "lambda"));

// Claims a trigger can neither add nor suppress (Cognito's own list for access tokens).
const RESERVED = new Set([
  "acr", "amr", "aud", "auth_time", "azp", "client_id", "exp", "iat", "identities", "iss", "jti",
  "nbf", "nonce", "origin_jti", "scope", "sub", "token_use", "username", "cognito:groups",
  "cognito:username", "event_id",
]);

// The token being issued: its scopes and groups, and the trigger's answer once it came.
const issuing = new AsyncLocalStorage();

const generate = JwtTokenGenerator.prototype.generate;
JwtTokenGenerator.prototype.generate = function (ctx, user, groups, client, metadata, source) {
  const oauth = source === "HostedAuth" ? client.AllowedOAuthScopes ?? [] : ["aws.cognito.signin.user.admin"];
  const state = { scopes: [...oauth], groups: [...(groups ?? [])], details: undefined };
  return issuing.run(state, () => generate.call(this, ctx, user, groups, client, metadata, source));
};

const createLambdaEvent = LambdaService.prototype.createLambdaEvent;
LambdaService.prototype.createLambdaEvent = function (event) {
  const out = createLambdaEvent.call(this, event);
  const state = issuing.getStore();
  if (state && String(event.triggerSource).startsWith("TokenGeneration_")) {
    out.version = "2";
    out.request.scopes = state.scopes;
    out.request.groupConfiguration = { groupsToOverride: state.groups, iamRolesToOverride: [], preferredRole: null };
    out.response = { claimsAndScopeOverrideDetails: null };
  }
  return out;
};

const invoke = LambdaService.prototype.invoke;
LambdaService.prototype.invoke = async function (ctx, trigger, event) {
  const response = await invoke.call(this, ctx, trigger, event);
  const state = issuing.getStore();
  if (trigger !== "PreTokenGeneration" || !state) return response;
  state.details = response?.claimsAndScopeOverrideDetails ?? {};
  // cognito-local applies claimsOverrideDetails to the ID token itself.
  return { claimsOverrideDetails: state.details.idTokenGeneration ?? {} };
};

const sign = jwt.sign;
jwt.sign = function (payload, ...rest) {
  const state = issuing.getStore();
  if (state && payload.token_use === "access") {
    const access = state.details?.accessTokenGeneration ?? {};
    for (const claim of access.claimsToSuppress ?? []) if (!RESERVED.has(claim)) delete payload[claim];
    for (const [claim, value] of Object.entries(access.claimsToAddOrOverride ?? {})) {
      if (!RESERVED.has(claim)) payload[claim] = value;
    }
    const scopes = new Set(state.scopes);
    for (const scope of access.scopesToAdd ?? []) scopes.add(scope);
    for (const scope of access.scopesToSuppress ?? []) scopes.delete(scope);
    payload.scope = [...scopes].join(" ");
  }
  return sign.call(this, payload, ...rest);
};

require(path.join(lib, "bin", "start.js"));

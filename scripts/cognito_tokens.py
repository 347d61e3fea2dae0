"""Sets up, on a local Cognito (scripts/cognito-local.cjs), the user pool the template's UserPool=create
makes, signs its users in, and prints what a test needs as JSON: the issuer, its JWKS, the JWT
authorizer's audience, and each user's ID and access tokens, as Cognito issued them (its pre token
generation trigger included).

    python3 cognito_tokens.py ENDPOINT CALLBACK_URL

Users (password sign-in through the template's app client, unless said):
  tenant_user              alice, custom:tenantId=acme
  tenant_user_asking_admin alice, through the OAuth flow (authorization code with PKCE) of an app
                           client allowed pooltable/admin, which the template has not: the case the
                           trigger guards against (Cognito grants scopes per client, not per user)
  operator_by_group        greg, custom:tenantId=ops, in the group platform-admin
  operator_by_scope        greg, asking for pooltable/admin through that client's OAuth flow
  self_made_admin          eve, custom:tenantId=acme, who wrote custom:role=platform-admin about herself
  no_tenant                nora, no custom:tenantId
  other_client             alice, through an app client the authorizer does not trust
  other_pool               mallet, custom:tenantId=acme, in another user pool
"""
import base64
import hashlib
import http.client
import json
import secrets
import sys
import urllib.parse
import urllib.request

import boto3

endpoint, callback = sys.argv[1], sys.argv[2]
idp = boto3.client("cognito-idp", endpoint_url=endpoint, region_name="us-east-1",
                   aws_access_key_id="local", aws_secret_access_key="local")
PASSWORD = "Correct-Horse-9"
SCHEMA = [
    {"Name": "tenantId", "AttributeDataType": "String", "Mutable": True},
    {"Name": "role", "AttributeDataType": "String", "Mutable": True},
]


def pool(name):
    return idp.create_user_pool(PoolName=name, Schema=SCHEMA)["UserPool"]["Id"]


def client(pool_id, name, scopes):
    return idp.create_user_pool_client(
        UserPoolId=pool_id, ClientName=name, GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        AllowedOAuthFlowsUserPoolClient=True, AllowedOAuthFlows=["code"],
        AllowedOAuthScopes=scopes, CallbackURLs=[callback],
        ReadAttributes=["email", "custom:tenantId", "custom:role"], WriteAttributes=["email", "custom:role"],
    )["UserPoolClient"]["ClientId"]


def user(pool_id, name, attributes, groups=()):
    idp.admin_create_user(
        UserPoolId=pool_id, Username=name, MessageAction="SUPPRESS", TemporaryPassword=PASSWORD,
        UserAttributes=[{"Name": k, "Value": v} for k, v in {"email": f"{name}@example.com", **attributes}.items()],
    )
    idp.admin_set_user_password(UserPoolId=pool_id, Username=name, Password=PASSWORD, Permanent=True)
    for group in groups:
        idp.admin_add_user_to_group(UserPoolId=pool_id, Username=name, GroupName=group)


def password_sign_in(client_id, name):
    result = idp.initiate_auth(ClientId=client_id, AuthFlow="USER_PASSWORD_AUTH",
                               AuthParameters={"USERNAME": name, "PASSWORD": PASSWORD})["AuthenticationResult"]
    return {"id": result["IdToken"], "access": result["AccessToken"]}


def oauth_sign_in(client_id, name, scope):
    """The hosted sign-in's authorization code flow with PKCE, as a browser would drive it."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    host = urllib.parse.urlsplit(endpoint).netloc
    form = urllib.parse.urlencode({
        "client_id": client_id, "redirect_uri": callback, "response_type": "code", "scope": scope,
        "code_challenge": challenge, "code_challenge_method": "S256", "state": "s",
        "username": name, "password": PASSWORD,
    })
    connection = http.client.HTTPConnection(host, timeout=30)
    connection.request("POST", "/oauth2/authorize", form, {"Content-Type": "application/x-www-form-urlencoded"})
    answer = connection.getresponse()
    answer.read()
    location = answer.getheader("Location") or ""
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query).get("code", [None])[0]
    if not code:
        sys.exit(f"the authorize endpoint answered {answer.status} without a code ({location!r})")
    form = urllib.parse.urlencode({
        "grant_type": "authorization_code", "code": code, "redirect_uri": callback,
        "client_id": client_id, "code_verifier": verifier,
    }).encode()
    request = urllib.request.Request(f"{endpoint}/oauth2/token", form,
                                     {"Content-Type": "application/x-www-form-urlencoded"})
    tokens = json.load(urllib.request.urlopen(request, timeout=30))
    return {"id": tokens["id_token"], "access": tokens["access_token"]}


main = pool("pooltable-local")
idp.create_group(UserPoolId=main, GroupName="platform-admin")
tenants = client(main, "tenants", ["openid", "email"])
scoped = client(main, "scoped", ["openid", "email", "pooltable/admin"])
untrusted = client(main, "untrusted", ["openid", "email"])
user(main, "alice", {"custom:tenantId": "acme"})
user(main, "greg", {"custom:tenantId": "ops"}, ["platform-admin"])
user(main, "eve", {"custom:tenantId": "acme", "custom:role": "platform-admin"})
user(main, "nora", {})
other = pool("elsewhere")
other_client = client(other, "tenants", ["openid"])
user(other, "mallet", {"custom:tenantId": "acme"})

jwks_url = f"{endpoint}/{main}/.well-known/jwks.json"
print(json.dumps({
    "issuer": f"{endpoint}/{main}",
    "jwks": json.load(urllib.request.urlopen(jwks_url, timeout=30)),
    "audience": [tenants, scoped],
    "tokens": {
        "tenant_user": password_sign_in(tenants, "alice"),
        "tenant_user_asking_admin": oauth_sign_in(scoped, "alice", "openid pooltable/admin"),
        "operator_by_group": password_sign_in(tenants, "greg"),
        "operator_by_scope": oauth_sign_in(scoped, "greg", "openid pooltable/admin"),
        "self_made_admin": password_sign_in(tenants, "eve"),
        "no_tenant": password_sign_in(tenants, "nora"),
        "other_client": password_sign_in(untrusted, "alice"),
        "other_pool": password_sign_in(other_client, "mallet"),
    },
}))

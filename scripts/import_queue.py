#!/usr/bin/env python3
"""The import queue on the local stack (moto's SQS), for the dev command and the end-to-end runs;
the dev command's lane queue too (`create` and `poll` serve any queue and its consumer).

  import_queue.py create NAME            makes NAME-dlq and NAME (redrive after 5 receives, as
                                          template.yaml); prints NAME's URL
  import_queue.py poll QUEUE_URL INVOKE_URL [--until-empty]
                                          does what an event source mapping does: receives up to 10
                                          messages, delivers them as one SQS event to the consumer
                                          (INVOKE_URL: a Lambda Invoke endpoint, such as cargo lambda
                                          watch's .../functions/import-consumer/invocations), then
                                          deletes those not named in its batchItemFailures; after a
                                          failed invocation it deletes none. Runs until stopped, or
                                          with --until-empty until the queue is empty.
  import_queue.py sign-event IN OUT TABLE
                                          writes IN (an SQS event of import messages) to OUT as
                                          POST /imports would send it now: issuedAt now, tenantSince
                                          the tenant record's createdAt in TABLE, its `items` sealed
                                          (AES-256-GCM) into `sealedItems` with the tenant's import
                                          key: with TENANT_KEYS_TABLE set and a key for the tenant
                                          there, derived from its data key (unwrapped by KMS) with
                                          the version in `keyVersion`; else the one in TABLE (made
                                          if missing); and each message signed
                                          with this run's CURSOR_SIGNING_KEY
                                          (functions/imports/src/lib.rs)
  import_queue.py sign-lane-event IN OUT  writes IN (an SQS event of lane messages) to OUT with each
                                          message signed as a function sends it, with this run's
                                          CURSOR_SIGNING_KEY (functions/tenants/src/lane_queue.rs)

Needs boto3 (the stack's venv has it, with moto) and AWS_ENDPOINT_URL_SQS.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.request

SIGNING_DOMAIN = "pooltable-import-message-v1"
MAX_RECEIVES = 5


def sqs():
    import boto3

    return boto3.client("sqs", endpoint_url=os.environ["AWS_ENDPOINT_URL_SQS"],
                        region_name=os.environ.get("AWS_REGION", "us-east-1"))


def create(name):
    client = sqs()
    dlq = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVES)})
    url = client.create_queue(QueueName=name, Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "30"})["QueueUrl"]
    print(url)


def event(queue_arn, messages):
    records = []
    for m in messages:
        attrs = {k: {"stringValue": v.get("StringValue"), "stringListValues": [], "binaryListValues": [],
                     "dataType": v["DataType"]} for k, v in m.get("MessageAttributes", {}).items()}
        records.append({"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                        "attributes": m.get("Attributes", {}), "messageAttributes": attrs,
                        "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": queue_arn,
                        "awsRegion": os.environ.get("AWS_REGION", "us-east-1")})
    return {"Records": records}


def poll(queue_url, invoke_url, until_empty):
    client = sqs()
    arn = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    while True:
        got = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1 if until_empty else 10,
                                     MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
        messages = got.get("Messages", [])
        if not messages:
            if until_empty:
                attrs = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
                    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
                if sum(int(v) for v in attrs.values()) == 0:
                    return
            continue
        payload = json.dumps(event(arn, messages)).encode()
        request = urllib.request.Request(invoke_url, data=payload, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = json.loads(response.read())
            again = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
        except Exception as e:  # a failed invocation: every message comes back after its timeout
            print(f"import poller: the consumer failed ({e}); the batch will be delivered again", file=sys.stderr)
            continue
        done = [m for m in messages if m["MessageId"] not in again]
        if done:
            client.delete_message_batch(QueueUrl=queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        print(f"import poller: delivered {len(messages)}, {len(again)} to retry", file=sys.stderr)


def signature(key, domain, payload):
    """CursorKeys::sign_for: HMAC-SHA-256 of the domain, a newline and the payload, base64url."""
    mac = hmac.new(key.encode(), f"{domain}\n{payload}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def sign(key, tenant, body):
    return signature(key, SIGNING_DOMAIN, f"{tenant}\n{body}")


SEALING_DOMAIN = "pooltable-import-items-v1"
CATALOG_SHARDS = 16


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


IMPORTS_PURPOSE = b"pooltable/imports/v1"


def derived_import_key(dynamodb, tenant):
    """A keyed tenant's import key and its version (shared::store::imports::message_key): HKDF-SHA256
    of its data key's sealing version (the newest whose sealsFromMs has come), unwrapped by KMS under
    its encryption context; None when tenants have no keys here or this one has none."""
    keys_table = os.environ.get("TENANT_KEYS_TABLE")
    if not keys_table:
        return None
    rows = dynamodb.query(TableName=keys_table, KeyConditionExpression="tenantId = :t",
                          ExpressionAttributeValues={":t": {"S": tenant}}, ConsistentRead=True)["Items"]
    now_ms = int(time.time() * 1000)
    rows = [r for r in rows if int(r.get("sealsFromMs", {"N": "0"})["N"]) <= now_ms]
    if not rows:
        return None
    row = max(rows, key=lambda r: int(r["version"]["N"]))
    import boto3
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    version = row["version"]["N"]
    kms = boto3.client("kms", endpoint_url=os.environ["AWS_ENDPOINT_URL_KMS"],
                       region_name=os.environ.get("AWS_REGION", "us-east-1"))
    data_key = kms.decrypt(CiphertextBlob=row["wrapped"]["B"], KeyId=row["kmsKeyId"]["S"],
                           EncryptionContext={"pooltable:tenant": tenant, "pooltable:keyVersion": version})["Plaintext"]
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"pooltable", info=IMPORTS_PURPOSE).derive(data_key)
    return key, int(version)


def import_key(dynamodb, table, tenant):
    """The tenant's stored import sealing key (shared::store::imports::ensure_sealing_item), made if
    missing."""
    pk = f"TENANT#{tenant}#SEALING#imports"
    key = {"PK": {"S": pk}, "SK": {"S": pk}}
    item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    if item is None:
        catalog = f"TENANT#{tenant}#CATALOG#{fnv1a64(pk.encode()) % CATALOG_SHARDS}"
        try:
            dynamodb.put_item(TableName=table, Item={**key, "key": {"B": os.urandom(32)},
                                                     "catalog": {"S": catalog}},
                              ConditionExpression="attribute_not_exists(PK)")
        except dynamodb.exceptions.ConditionalCheckFailedException:
            pass
        item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return item["key"]["B"]


def seal(key, context, plaintext):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    sealed = nonce + AESGCM(key).encrypt(nonce, plaintext, context.encode())
    return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()


def sign_event(source, target, table):
    import boto3

    key = os.environ["CURSOR_SIGNING_KEY"]
    dynamodb = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL_DYNAMODB"],
                            region_name=os.environ.get("AWS_REGION", "us-east-1"))
    ev = json.load(open(source))
    for record in ev["Records"]:
        tenant = record["messageAttributes"]["tenant"]["stringValue"]
        pk = f"TENANT#{tenant}#TENANT"
        item = dynamodb.get_item(TableName=table, Key={"PK": {"S": pk}, "SK": {"S": pk}}).get("Item", {})
        body = json.loads(record["body"])
        body["issuedAt"] = int(time.time() * 1000)
        body["tenantSince"] = item.get("createdAt", {}).get("S", "")
        items = json.dumps(body.pop("items"), separators=(",", ":")).encode()
        context = f"{SEALING_DOMAIN}\n{tenant}\n{body['importId']}"
        derived = derived_import_key(dynamodb, tenant)
        if derived is not None:
            sealing_key, body["keyVersion"] = derived
        else:
            sealing_key = import_key(dynamodb, table, tenant)
        body["sealedItems"] = seal(sealing_key, context, items)
        record["body"] = json.dumps(body, separators=(",", ":"))
        record["md5OfBody"] = hashlib.md5(record["body"].encode()).hexdigest()
        record["messageAttributes"]["signature"]["stringValue"] = sign(key, tenant, record["body"])
    json.dump(ev, open(target, "w"))


LANE_SIGNING_DOMAIN = "pooltable/lanes/v1"


def sign_lane_event(source, target):
    key = os.environ["CURSOR_SIGNING_KEY"]
    ev = json.load(open(source))
    for record in ev["Records"]:
        record["messageAttributes"]["signature"]["stringValue"] = \
            signature(key, LANE_SIGNING_DOMAIN, record["body"])
    json.dump(ev, open(target, "w"))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["create"] and len(args) == 2:
        create(args[1])
    elif args[:1] == ["poll"] and len(args) in (3, 4):
        poll(args[1], args[2], args[3:] == ["--until-empty"])
    elif args[:1] == ["sign-event"] and len(args) == 4:
        sign_event(args[1], args[2], args[3])
    elif args[:1] == ["sign-lane-event"] and len(args) == 3:
        sign_lane_event(args[1], args[2])
    else:
        sys.exit(__doc__)

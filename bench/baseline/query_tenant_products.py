"""The Python baseline for the scatter-gather benchmark: the handler shape of the standard
write-sharding guidance, done right enough to do the same work as query-tenant-products:

- STS AssumeRole with the tenant's session policy on EVERY request (as that guidance's handler does);
- a ThreadPoolExecutor fans the Query out over all shards, following every shard's LastEvaluatedKey;
- results merged in productId order, first `limit` items returned.

Run by the benchmark: `python3 query_tenant_products.py TABLE TENANT SHARDS LIMIT ITERATIONS ROLE_ARN POLICY_FILE`.
Prints one JSON line: {"latencies_ms": [...], "items": N, "cold_ms": first-request time incl. imports}.
"""
import json
import sys
import time

T0 = time.perf_counter()
import boto3  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402


def handler(sts, table, tenant, shards, limit, role_arn, policy):
    creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=f"py-{tenant}"[:64], Policy=policy, DurationSeconds=900)["Credentials"]
    ddb = boto3.client(
        "dynamodb",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    prefix = f"TENANT#{tenant}#PRODUCT#"

    def one_shard(shard):
        items, start = [], None
        while True:
            kwargs = dict(
                TableName=table,
                KeyConditionExpression="PK = :pk AND begins_with(SK, :kind)",
                ExpressionAttributeValues={":pk": {"S": f"{prefix}{shard}"}, ":kind": {"S": prefix}},
                Limit=limit - len(items),
            )
            if start:
                kwargs["ExclusiveStartKey"] = start
            out = ddb.query(**kwargs)
            items.extend(out.get("Items", []))
            start = out.get("LastEvaluatedKey")
            if not start or len(items) >= limit:
                return items

    with ThreadPoolExecutor(max_workers=min(shards, 32)) as pool:
        pages = list(pool.map(one_shard, range(shards)))
    merged = sorted((i for p in pages for i in p), key=lambda i: i["SK"]["S"])[:limit]
    return merged


def main():
    table, tenant, shards, limit, iterations, role_arn, policy_file = sys.argv[1:8]
    shards, limit, iterations = int(shards), int(limit), int(iterations)
    policy = open(policy_file).read()
    sts = boto3.client("sts")
    latencies, items = [], 0
    cold_ms = None
    for _ in range(iterations):
        t = time.perf_counter()
        items = len(handler(sts, table, tenant, shards, limit, role_arn, policy))
        latencies.append((time.perf_counter() - t) * 1000)
        if cold_ms is None:
            cold_ms = (time.perf_counter() - T0) * 1000
    print(json.dumps({"latencies_ms": latencies, "items": items, "cold_ms": cold_ms}))


if __name__ == "__main__":
    main()

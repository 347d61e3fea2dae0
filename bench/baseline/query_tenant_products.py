"""The Python baseline for the scatter-gather benchmark: the handler shape of the standard
write-sharding guidance, done right enough to do the same work as query-tenant-products:

- STS AssumeRole with the tenant's session policy on EVERY request (as that guidance's handler does);
- a ThreadPoolExecutor fans the Query out over all shards, following every shard's LastEvaluatedKey;
- results merged in productId order, first `limit` items returned.

Run by the benchmark: `python3 query_tenant_products.py TABLE TENANT SHARDS LIMIT ITERATIONS ROLE_ARN POLICY_FILE`.
Each iteration walks every page (as a client following nextCursor). Prints one JSON line:
{"latencies_ms": [per page], "items": items of the last walk, "cold_ms": imports + first page}.
"""
import json
import sys
import time

T0 = time.perf_counter()
import boto3  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402


def page(sts, table, tenant, shards, limit, role_arn, policy, positions, done):
    """One request of the handler: AssumeRole, fan out over the open shards, merge, first `limit`."""
    creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=f"py-{tenant}"[:64], Policy=policy, DurationSeconds=900)["Credentials"]
    ddb = boto3.client(
        "dynamodb",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    prefix = f"TENANT#{tenant}#PRODUCT#"

    def one_shard(shard):
        items, start = [], positions.get(shard)
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
                return shard, items, not start

    open_shards = [s for s in range(shards) if s not in done]
    with ThreadPoolExecutor(max_workers=min(max(len(open_shards), 1), 32)) as pool:
        reads = list(pool.map(one_shard, open_shards))
    merged = sorted(((i["SK"]["S"], shard, i) for shard, items, _ in reads for i in items), key=lambda x: x[0])[:limit]
    # Same per-shard positions as pooltable's cursor: after the last item returned, or exhausted.
    for shard, items, exhausted in reads:
        taken = [m for m in merged if m[1] == shard]
        if exhausted and len(taken) == len(items):
            done.add(shard)
        elif taken:
            last = taken[-1][2]
            positions[shard] = {"PK": last["PK"], "SK": last["SK"]}
    return [m[2] for m in merged]


def walk(sts, table, tenant, shards, limit, role_arn, policy):
    """Every page of the catalog, as a client following nextCursor would."""
    positions, done, latencies, items = {}, set(), [], 0
    while len(done) < shards:
        t = time.perf_counter()
        items += len(page(sts, table, tenant, shards, limit, role_arn, policy, positions, done))
        latencies.append((time.perf_counter() - t) * 1000)
    return latencies, items


def main():
    table, tenant, shards, limit, iterations, role_arn, policy_file = sys.argv[1:8]
    shards, limit, iterations = int(shards), int(limit), int(iterations)
    policy = open(policy_file).read()
    sts = boto3.client("sts")
    latencies, items = [], 0
    cold_ms = None
    for _ in range(iterations):
        pages, items = walk(sts, table, tenant, shards, limit, role_arn, policy)
        if cold_ms is None:
            cold_ms = (time.perf_counter() - T0) * 1000 - sum(pages) + pages[0]
        latencies.extend(pages)
    print(json.dumps({"latencies_ms": latencies, "items": items, "cold_ms": cold_ms}))


if __name__ == "__main__":
    main()

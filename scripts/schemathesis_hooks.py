"""schemathesis hooks for scripts/schemathesis.sh: the few constraints of openapi.yaml that JSON Schema
cannot state by itself, which the spec carries as `x-` extensions (and in prose), made concrete here so
that valid ("positive") generated data really is valid:

- `x-epoch-seconds-from-now` on a number: its window is relative to the time of the request (an
  integration token's expiresAt: after now, at most 366 days ahead). Made absolute when the schema
  loads, with an hour's margin on each side, far more than a run lasts.
- `x-date-range` on an operation: its `from` and `to` query dates satisfy from <= to and span at most
  `maxCalendarMonths` calendar months. A positive case that breaks that is moved into range.
- `x-unique-by` on an array of objects: that property is unique across the items (an order's line
  itemIds). A positive case with a repeat gets distinct ids.

Negative cases are never touched: they are meant to be refused.
"""
from __future__ import annotations

import datetime
import time

import schemathesis
from schemathesis import GenerationMode

MARGIN_SECONDS = 3600


def _walk(node, visit):
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


@schemathesis.hook
def before_load_schema(context, raw_schema):
    now = int(time.time())

    def visit(node):
        window = node.get("x-epoch-seconds-from-now")
        if not isinstance(window, dict):
            return
        node.pop("exclusiveMinimum", None)
        node["minimum"] = now + MARGIN_SECONDS
        node["maximum"] = now + int(window["maximum"]) - MARGIN_SECONDS

    _walk(raw_schema, visit)


def _months(a: datetime.date, b: datetime.date) -> int:
    return (b.year - a.year) * 12 + (b.month - a.month) + 1


def _date(value):
    try:
        return datetime.date.fromisoformat(value) if isinstance(value, str) and len(value) == 10 else None
    except ValueError:
        return None


def _unique_by(items, prop):
    if not isinstance(items, list):
        return
    seen = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get(prop), str):
            continue
        value = item[prop]
        n = i
        while value in seen:
            value = f"{item[prop][:100]}-{n}"
            n += 1
        item[prop] = value
        seen.add(value)


def _unique_in_body(schema, body):
    if isinstance(schema, dict) and isinstance(body, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if isinstance(sub, dict) and "x-unique-by" in sub and name in body:
                _unique_by(body[name], sub["x-unique-by"])


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    raw = context.operation.definition.raw
    window = raw.get("x-date-range")
    if window and isinstance(case.query, dict):
        start, end = _date(case.query.get(window["from"])), _date(case.query.get(window["to"]))
        if start and end:
            if start > end:
                start, end = end, start
            if _months(start, end) > int(window["maxCalendarMonths"]):
                # Keep the generated start; pick an end within the window, derived from the generated end.
                days = min(end.toordinal() % 365, datetime.date.max.toordinal() - start.toordinal())
                end = start + datetime.timedelta(days=days)
            case.query[window["from"]] = start.isoformat()
            case.query[window["to"]] = end.isoformat()
    body_schema = (
        raw.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    )
    if isinstance(body_schema, dict) and "$ref" in body_schema:
        name = body_schema["$ref"].rsplit("/", 1)[-1]
        body_schema = context.operation.schema.raw_schema["components"]["schemas"].get(name)
    _unique_in_body(body_schema, case.body)
    return case

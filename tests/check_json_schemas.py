#!/usr/bin/env python3
"""Checks JSON documents leakref printed against the schemas it ships.

usage: check_json_schemas.py SPOOL_DIR SCHEMA_DIR [--require-all]

Each file under SPOOL_DIR (its subdirectories too: one per test process of a
sharded run) is one output: a JSON document, or JSON Lines (walk
--jsonl: a header record naming the schema, object records, a summary),
checked as {"jsonl": [records]}.
A document's "schema" value leakref.X/N is checked against
SCHEMA_DIR/leakref.X-N.schema.json. With --require-all, every schema file
must have been used at least once (a schema nothing exercises proves
nothing). Prints one line per problem; exit 1 when there is any.
"""
import json
import os
import sys

import jsonschema


# Arrays longer than this are checked at their first and last KEEP items:
# their items share one schema, and a walk of a million objects would
# otherwise take minutes here.
KEEP = 2000


def sample(doc):
    if isinstance(doc, list):
        if len(doc) > 2 * KEEP:
            doc = doc[:KEEP] + doc[-KEEP:]
        return [sample(x) for x in doc]
    if isinstance(doc, dict):
        return {k: sample(v) for k, v in doc.items()}
    return doc


def schema_file(name):
    base, _, version = name.partition("/")
    return f"{base}-{version}.schema.json"


def documents(path):
    """The (schema name, document) pairs in one output file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text)
        return [(doc.get("schema"), doc)]
    except json.JSONDecodeError:
        pass
    # JSON Lines: each line a record with a "record" kind; the first names
    # the schema, whose "jsonl" form describes the records.
    try:
        lines = [json.loads(l) for l in text.splitlines() if l.strip()]
    except json.JSONDecodeError as e:
        raise ValueError(f"neither JSON nor JSON Lines ({e})")
    if not lines or not isinstance(lines[0], dict) or "schema" not in lines[0]:
        raise ValueError("JSON Lines whose first record names no schema")
    return [(lines[0]["schema"], {"jsonl": lines})]


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    spool, schema_dir = sys.argv[1], sys.argv[2]
    require_all = "--require-all" in sys.argv[3:]
    validators, used, problems = {}, set(), []
    for f in sorted(os.listdir(schema_dir)):
        if f.endswith(".schema.json"):
            with open(os.path.join(schema_dir, f), encoding="utf-8") as h:
                schema = json.load(h)
            jsonschema.Draft202012Validator.check_schema(schema)
            validators[f] = jsonschema.Draft202012Validator(schema)
    checked = 0
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(spool) for f in files)
    for path in paths:
        try:
            docs = documents(path)
        except ValueError as e:
            problems.append(f"{path}: {e}")
            continue
        for name, doc in docs:
            if not isinstance(name, str):
                problems.append(f"{path}: no \"schema\" member")
                continue
            sf = schema_file(name)
            if sf not in validators:
                problems.append(f"{path}: schema {name} has no {schema_dir}/{sf}")
                continue
            used.add(sf)
            checked += 1
            for err in sorted(validators[sf].iter_errors(sample(doc)), key=str)[:5]:
                where = "/".join(str(p) for p in err.absolute_path) or "(top)"
                problems.append(f"{path}: {name} at {where}: {err.message[:300]}")
    if require_all:
        for sf in sorted(set(validators) - used):
            problems.append(f"{schema_dir}/{sf}: no output of the test run used it")
    for p in problems:
        print("schema check: " + p)
    print(f"schema check: {checked} documents against {len(validators)} schemas, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

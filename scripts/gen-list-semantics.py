#!/usr/bin/env python3
"""Writes testserver/src/kinds/semantics.rs: how the fields of the built-in
kinds merge, read from the Go types of Kubernetes (k8s.io/api and
k8s.io/apimachinery), as kube-apiserver's OpenAPI documents publish it.

For every struct field the Go sources mark, one row: the list type
(`+listType=atomic|set|map`, `+listMapKey=...`), the map type
(`+mapType=atomic`), and the strategic-merge-patch strategy and merge key
(`patchStrategy:"..."`, `patchMergeKey:"..."` struct tags). Structs marked
`+structType=atomic` are listed apart. Unmarked fields keep the defaults
(lists atomic and replaced, maps and structs granular).

Usage (two git checkouts at the same Kubernetes release, e.g. v0.36.3):

    scripts/gen-list-semantics.py API_DIR APIMACHINERY_DIR VERSION \
        > testserver/src/kinds/semantics.rs
    cargo fmt --all

Only the group versions the testserver serves are read.
"""

import os
import re
import sys

API_GROUPS = [
    ("core/v1", "io.k8s.api.core.v1"),
    ("apps/v1", "io.k8s.api.apps.v1"),
    ("batch/v1", "io.k8s.api.batch.v1"),
    ("networking/v1", "io.k8s.api.networking.v1"),
    ("rbac/v1", "io.k8s.api.rbac.v1"),
    ("policy/v1", "io.k8s.api.policy.v1"),
    ("autoscaling/v1", "io.k8s.api.autoscaling.v1"),
    ("autoscaling/v2", "io.k8s.api.autoscaling.v2"),
    ("discovery/v1", "io.k8s.api.discovery.v1"),
    ("coordination/v1", "io.k8s.api.coordination.v1"),
    ("events/v1", "io.k8s.api.events.v1"),
]
MACHINERY_GROUPS = [
    ("pkg/apis/meta/v1", "io.k8s.apimachinery.pkg.apis.meta.v1"),
]

TYPE_RE = re.compile(r"^type\s+(\w+)\s+struct\s*\{\s*$")
FIELD_RE = re.compile(r"^\s+(\w+)\s+(\S+)\s+`([^`]*)`")
TAG_RE = re.compile(r'(\w+):"([^"]*)"')
INLINE_RE = re.compile(r'^\s+(?:\w+\.)?(\w+)\s+`json:",inline"')


def parse_file(path, prefix, fields, atomic_structs, inlines):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    markers = []
    current = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("//"):
            text = stripped[2:].strip()
            if text.startswith("+"):
                markers.append(text[1:])
            continue
        if current is None:
            m = TYPE_RE.match(line)
            if m:
                current = m.group(1)
                if "structType=atomic" in markers:
                    atomic_structs.add(f"{prefix}.{current}")
            markers = []
            continue
        if stripped == "}":
            current = None
            markers = []
            continue
        inline = INLINE_RE.match(line)
        if inline:
            inlines.setdefault(f"{prefix}.{current}", []).append(f"{prefix}.{inline.group(1)}")
        m = FIELD_RE.match(line)
        if m:
            _, go_type, tag = m.groups()
            tags = dict(TAG_RE.findall(tag))
            json_name = tags.get("json", "").split(",")[0]
            if json_name and json_name != "-":
                row = field_row(go_type, tags, markers)
                if row:
                    fields[(f"{prefix}.{current}", json_name)] = row
        if stripped == "" or m:
            markers = []


def field_row(go_type, tags, markers):
    list_type = None
    keys = []
    map_atomic = False
    for mk in markers:
        if mk.startswith("listType="):
            list_type = mk.split("=", 1)[1]
        elif mk.startswith("listMapKey="):
            keys.append(mk.split("=", 1)[1])
        elif mk == "mapType=atomic":
            map_atomic = True
    strategy = tags.get("patchStrategy", "")
    merge_key = tags.get("patchMergeKey", "")
    is_list = go_type.startswith("[]") and not go_type.startswith("[]byte")
    if not (list_type or map_atomic or strategy or merge_key):
        return None
    if list_type is None and is_list:
        list_type = "atomic"
    return (list_type, keys, map_atomic, strategy, merge_key)


def read_groups(root, groups, fields, atomic_structs, inlines):
    for rel, prefix in groups:
        d = os.path.join(root, rel)
        for name in sorted(os.listdir(d)):
            if name.endswith(".go") and not name.endswith("_test.go") and (
                name.startswith("types") or name in ("meta.go", "micro_time.go", "time.go")
            ):
                parse_file(os.path.join(d, name), prefix, fields, atomic_structs, inlines)


def resolve_inlines(fields, inlines):
    """Copies the rows of inlined structs into the structs that inline them
    (OpenAPI shows their fields in place)."""
    def rows_of(definition, seen):
        rows = {f: r for (d, f), r in fields.items() if d == definition}
        for inner in inlines.get(definition, []):
            if inner not in seen:
                for f, r in rows_of(inner, seen | {inner}).items():
                    rows.setdefault(f, r)
        return rows
    for outer in list(inlines):
        for f, r in rows_of(outer, {outer}).items():
            fields.setdefault((outer, f), r)


def rust_str_list(items):
    return "&[" + ", ".join(f'"{i}"' for i in items) + "]"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    api, machinery, version = sys.argv[1:]
    fields = {}
    atomic_structs = set()
    inlines = {}
    read_groups(api, API_GROUPS, fields, atomic_structs, inlines)
    read_groups(machinery, MACHINERY_GROUPS, fields, atomic_structs, inlines)
    resolve_inlines(fields, inlines)
    out = []
    out.append(
        "//! How the fields of the built-in kinds merge (list and map types for\n"
        "//! server-side apply, patch strategies and merge keys for strategic merge\n"
        "//! patches), as the Go types of Kubernetes mark them.\n"
        "//!\n"
        f"//! Generated by `scripts/gen-list-semantics.py` from k8s.io/api and\n"
        f"//! k8s.io/apimachinery {version}; do not edit by hand.\n"
    )
    out.append("use super::merge_rules::{Field, ListType};\n")
    out.append(
        "/// Fields with a list type, an atomic map type or a patch strategy,\n"
        "/// sorted by definition and field name.\n"
        "pub(crate) static FIELDS: &[Field] = &["
    )
    for (definition, field), (lt, keys, map_atomic, strategy, merge_key) in sorted(fields.items()):
        if lt == "map":
            list_type = f"ListType::Map({rust_str_list(keys)})"
        elif lt == "set":
            list_type = "ListType::Set"
        elif lt == "atomic":
            list_type = "ListType::Atomic"
        else:
            list_type = "ListType::NotAList"
        out.append(
            f'    Field {{ definition: "{definition}", field: "{field}", list: {list_type}, '
            f'map_atomic: {"true" if map_atomic else "false"}, '
            f'patch_strategy: "{strategy}", patch_merge_key: "{merge_key}" }},'
        )
    out.append("];\n")
    out.append("/// Structs replaced and owned as a whole (`+structType=atomic`), sorted.")
    out.append("pub(crate) static ATOMIC_STRUCTS: &[&str] = &[")
    for s in sorted(atomic_structs):
        out.append(f'    "{s}",')
    out.append("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()

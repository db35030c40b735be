#!/usr/bin/env python3
"""Writes proto/src/tables.rs: the protobuf schema of every k8s-pb message
(field number -> JSON name, wire type, nested message, Kubernetes special
types) and the index of the kinds that have one, for kcontrol-proto's
serde Deserializer.

Inputs (read, never copied into the output):
  - the k8s-pb sources in the cargo registry: messages, field numbers and
    types (the prost attributes), kinds (`impl crate::Resource`);
  - the k8s-openapi sources in the cargo registry (feature v1_33): each
    field's JSON name, from its serde `Deserialize` impl;
  - Go sources of the Kubernetes API types (k8s.io/api, apimachinery,
    apiextensions-apiserver, kube-aggregator, metrics), one directory each,
    given with --go MODULE=DIR: whether a scalar field is a Go pointer and
    whether its JSON tag has omitempty (the zero-value rule), which fields
    are inlined in JSON (`json:",inline"`), JSON names where k8s-openapi has
    no such type, and which messages are Go slices (`type Verbs []string`).

Usage: scripts/proto-tables --go api=DIR --go apimachinery=DIR ... [--out FILE]
"""

import argparse
import glob
import os
import re
import sys
from collections import OrderedDict

REGISTRY = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))

# k8s-pb module prefix -> Go module key (--go KEY=DIR) and the path inside it
GO_MODULES = [
    ("apimachinery::pkg::", "apimachinery", "pkg/"),
    ("apiextensions_apiserver::pkg::", "apiextensions-apiserver", "pkg/"),
    ("kube_aggregator::pkg::", "kube-aggregator", "pkg/"),
    ("metrics::pkg::", "metrics", "pkg/"),
    ("api::", "api", ""),
]

# messages with their own JSON form (Go types with MarshalJSON)
SPECIAL = {
    "apimachinery::pkg::apis::meta::v1::Time": "Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime": "MicroTime",
    "apimachinery::pkg::apis::meta::v1::Duration": "Duration",
    "apimachinery::pkg::apis::meta::v1::FieldsV1": "RawJson",
    "apimachinery::pkg::runtime::RawExtension": "RawJson",
    "apimachinery::pkg::api::resource::Quantity": "Quantity",
    "apimachinery::pkg::util::intstr::IntOrString": "IntOrString",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::Json": "RawJson",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1beta1::Json": "RawJson",
}
# messages whose JSON form is a union this decoder does not map: a kind
# reaching one has no table (asks JSON only)
UNSUPPORTED = {
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1beta1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1beta1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1beta1::JsonSchemaPropsOrStringArray",
    "apimachinery::pkg::api::resource::QuantityValue",
    "apimachinery::pkg::apis::meta::v1::Fields",
}
SCALARS = {"string": "String", "bytes": "Bytes", "bool": "Bool", "int32": "Int32",
           "int64": "Int64", "double": "Double"}


def registry_dir(prefix):
    for root in REGISTRY:
        hits = sorted(glob.glob(os.path.join(root, prefix + "*")))
        if hits:
            return hits[-1]
    sys.exit(f"{prefix} not found in the cargo registry")


def norm(name):
    return name.replace("r#", "").rstrip("_").lower().replace("_", "")


# ---------------------------------------------------------------- k8s-pb

FIELD_RE = re.compile(
    r"#\[prost\(([^)]*)\)\]\s*pub\s+(r#)?(\w+)\s*:\s*(.*?),\s*\n\s*(?=(///|#\[|pub |}))",
    re.S,
)


def parse_pb(root):
    messages = OrderedDict()  # path -> {name, module, fields: [..]}
    kinds = []  # (api_version, kind, path)
    for mod_rs in sorted(glob.glob(os.path.join(root, "src", "**", "mod.rs"), recursive=True)):
        rel = os.path.relpath(os.path.dirname(mod_rs), os.path.join(root, "src"))
        module = rel.replace(os.sep, "::")
        text = open(mod_rs, encoding="utf-8").read()
        for m in re.finditer(r"pub struct (\w+) \{(\}|.*?\n\})", text, re.S):
            name, body = m.group(1), m.group(2)
            fields = []
            for f in FIELD_RE.finditer(body):
                attrs, rust, ty = f.group(1), f.group(3), " ".join(f.group(4).split())
                tag = int(re.search(r'tag = "(\d+)"', attrs).group(1))
                kind = attrs.split(",")[0].strip()
                kind = "bytes" if kind.startswith("bytes") else kind
                fields.append({"rust": rust, "tag": tag, "attrs": attrs, "kind": kind, "ty": ty})
            messages[f"{module}::{name}"] = {"name": name, "module": module, "fields": fields}
        for m in re.finditer(
            r'impl crate::Resource for (\w+) \{\s*const API_VERSION: &\'static str = "([^"]*)";.*?const KIND: &\'static str = "([^"]*)";',
            text, re.S,
        ):
            kinds.append((m.group(2), m.group(3), f"{module}::{m.group(1)}"))
    return messages, kinds


def resolve(module, ty):
    """The k8s-pb path of a field's message type (`super::X`, `Y`, `Option<..>`)."""
    ty = ty.replace(" ", "").replace(",>", ">")
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<",
                    "::prost::alloc::boxed::Box<"):
        while wrapper in ty:
            ty = ty.replace(wrapper, "", 1)
            ty = ty[:-1] if ty.endswith(">") else ty
    parts = module.split("::")
    segs = ty.split("::")
    while segs and segs[0] == "super":
        parts.pop()
        segs.pop(0)
    if segs and segs[0] == "crate":
        segs.pop(0)
        parts = []
    return "::".join(parts + segs)


def map_value(ty):
    m = re.search(r"BTreeMap<::prost::alloc::string::String,(.*)>$", ty.replace(" ", "").replace(",>", ">"))
    return m.group(1) if m else None


# ------------------------------------------------------------ k8s-openapi

def parse_openapi(root):
    """(module, lowercased type name) -> {normalized rust field: json name}."""
    out = {}
    base = os.path.join(root, "src", "v1_33")
    for path in glob.glob(os.path.join(base, "**", "*.rs"), recursive=True):
        text = open(path, encoding="utf-8").read()
        m = re.search(r"pub struct (\w+)", text)
        if not m:
            continue
        module = os.path.relpath(os.path.dirname(path), base).replace(os.sep, "::")
        names = {}
        for fm in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
            names[norm(fm.group(2))] = fm.group(1)
        out[(module, m.group(1).lower())] = names
    return out


# --------------------------------------------------------------------- Go

GO_FIELD_RE = re.compile(r"^\s*(\w+)?\s*(\S+)\s+`([^`]*)`")


def parse_go(dirs):
    """(go module key, package dir) -> {lowercased struct: {tag: facts}} and slice types."""
    structs, slices = {}, {}
    for key, root in dirs.items():
        for path in glob.glob(os.path.join(root, "**", "*.go"), recursive=True):
            base = os.path.basename(path)
            if base.endswith("_test.go") or base.startswith("zz_generated") or base.endswith(".pb.go"):
                continue
            pkg = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "/")
            text = open(path, encoding="utf-8", errors="replace").read()
            for m in re.finditer(r"^type (\w+) \[\](\w+)\s*$", text, re.M):
                slices.setdefault((key, pkg), set()).add(m.group(1).lower())
            for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", text, re.S | re.M):
                fields = {}
                for line in m.group(2).splitlines():
                    fm = GO_FIELD_RE.match(line)
                    if not fm:
                        continue
                    tags = fm.group(3)
                    pb = re.search(r'protobuf:"([^"]*)"', tags)
                    js = re.search(r'json:"([^"]*)"', tags)
                    if not pb:
                        continue
                    parts = pb.group(1).split(",")
                    if len(parts) < 2 or not parts[1].isdigit():
                        continue
                    json_parts = js.group(1).split(",") if js else [""]
                    gotype = fm.group(2) if fm.group(1) else fm.group(2)
                    fields[int(parts[1])] = {
                        "pointer": gotype.startswith("*"),
                        "omitempty": "omitempty" in json_parts[1:],
                        # an embedded struct without a JSON name is inlined
                        "inline": json_parts[0] == "",
                        "json": json_parts[0],
                    }
                structs.setdefault((key, pkg), {})[m.group(1).lower()] = fields
    return structs, slices


def go_location(module):
    for prefix, key, sub in GO_MODULES:
        if (module + "::").startswith(prefix):
            rest = module[len(prefix):] if len(module) > len(prefix) else ""
            pkg = sub + rest.replace("::", "/")
            return key, pkg.rstrip("/")
    return None, None


def go_pkg_candidates(key, pkg):
    # k8s-pb names some packages without the Go separators
    yield key, pkg
    yield key, pkg.replace("storagemigration", "storagemigration")


# ------------------------------------------------------------------ build

def const_name(path):
    return re.sub(r"[^A-Za-z0-9]", "_", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", path.replace("::", "__"))).upper()


def build(messages, kinds, openapi, go_structs, go_slices):
    problems = []
    tables = OrderedDict()
    for path, msg in messages.items():
        if path in SPECIAL or path in UNSUPPORTED:
            continue
        key, pkg = go_location(msg["module"])
        go = go_structs.get((key, pkg), {}).get(msg["name"].lower())
        is_slice = msg["name"].lower() in go_slices.get((key, pkg), set())
        oa = openapi.get((msg["module"], msg["name"].lower()))
        fields, unsupported = [], []
        for f in sorted(msg["fields"], key=lambda f: f["tag"]):
            facts = (go or {}).get(f["tag"], {})
            attrs = f["attrs"]
            labels = [a.strip() for a in attrs.split(",")[1:]]
            repeated = "repeated" in labels and not attrs.startswith("btree_map")
            if f["kind"].startswith("btree_map"):
                vkind = re.search(r'btree_map = "string, (\w+)"', attrs).group(1)
                if vkind == "message":
                    vty = ("msg", resolve(msg["module"], map_value(f["ty"])))
                else:
                    vty = ("scalar", SCALARS[vkind])
                ty = ("map", vty)
            elif f["kind"] == "message":
                ty = ("msg", resolve(msg["module"], f["ty"]))
            else:
                ty = ("scalar", SCALARS[f["kind"]])
            inline = facts.get("inline", False)
            json = None
            if not inline and not is_slice:
                if oa is not None and norm(f["rust"]) in oa:
                    json = oa[norm(f["rust"])]
                    if facts.get("json") and facts["json"] != json:
                        problems.append(f"{path}.{f['rust']}: k8s-openapi {json!r}, Go {facts['json']!r}")
                elif facts.get("json"):
                    json = facts["json"]
                else:
                    unsupported.append(f"{f['rust']} has no known JSON name")
            omit_zero = (ty[0] == "scalar" and not repeated and not facts.get("pointer", True)
                         and facts.get("omitempty", False))
            fields.append({"tag": f["tag"], "json": json or "", "ty": ty, "repeated": repeated,
                           "omit_zero": omit_zero, "inline": inline})
        array = None
        if is_slice and len(fields) == 1 and fields[0]["repeated"] and fields[0]["tag"] == 1:
            array = fields[0]["ty"]
        tables[path] = {"fields": fields, "unsupported": unsupported, "array": array, "go": go is not None}
    return tables, problems


def ty_rust(ty, tables):
    kind, arg = ty
    if kind == "scalar":
        return f"Ty::{arg}"
    if kind == "map":
        return f"Ty::Map(&{ty_rust(arg, tables)})"
    if arg in SPECIAL:
        return f"Ty::{SPECIAL[arg]}"
    if arg in UNSUPPORTED or arg not in tables:
        return "Ty::Unsupported"
    if tables[arg]["array"]:
        return f"Ty::Array(&{ty_rust(tables[arg]['array'], tables)})"
    return f"Ty::Message(&{const_name(arg)})"


def reaches_unsupported(path, tables, seen=None):
    seen = seen if seen is not None else set()
    if path in seen:
        return False
    seen.add(path)
    t = tables.get(path)
    if t is None:
        return path not in SPECIAL
    if t["unsupported"]:
        return True
    for f in t["fields"]:
        ty = f["ty"]
        while ty[0] == "map":
            ty = ty[1]
        if ty[0] == "msg" and (ty[1] in UNSUPPORTED or reaches_unsupported(ty[1], tables, seen)):
            return True
    return False


def emit(tables, kinds, messages, out):
    w = out.write
    w("//! The schema of every k8s-pb message, generated by `scripts/proto-tables`\n")
    w("//! from the k8s-pb and k8s-openapi sources and the Go API types (see the\n")
    w("//! script); do not edit. `omit_zero`: a Go non-pointer scalar with\n")
    w("//! `omitempty`, which protobuf always carries and JSON leaves out when zero.\n\n")
    w("#![allow(clippy::all)]\n\n")
    w("use crate::schema::{Field, Message, Ty};\n\n")
    w("const fn f(number: u32, json: &'static str, ty: Ty, repeated: bool, omit_zero: bool) -> Field {\n")
    w("    Field { number, json, ty, repeated, omit_zero, inline: false }\n}\n\n")
    w("const fn inline(number: u32, ty: Ty) -> Field {\n")
    w("    Field { number, json: \"\", ty, repeated: false, omit_zero: false, inline: true }\n}\n\n")
    index, reachable = kind_index(tables, kinds)
    for path, t in tables.items():
        if t["array"] or path not in reachable:
            continue
        w(f"/// `{path}`\n")
        w(f"pub(crate) static {const_name(path)}: Message = Message {{\n")
        w(f"    name: \"{messages[path]['name']}\",\n    fields: &[\n")
        for fl in t["fields"]:
            ty = ty_rust(fl["ty"], tables)
            if fl["inline"]:
                w(f"        inline({fl['tag']}, {ty}),\n")
            else:
                w(f"        f({fl['tag']}, \"{fl['json']}\", {ty}, {str(fl['repeated']).lower()}, {str(fl['omit_zero']).lower()}),\n")
        w("    ],\n};\n\n")
    w("/// Every kind with a complete schema, sorted by (apiVersion, kind).\n")
    w("pub(crate) static KINDS: &[(&str, &str, &Message)] = &[\n")
    for av, k, c in index:
        w(f"    (\"{av}\", \"{k}\", &{c}),\n")
    w("];\n")
    return index


def kind_index(tables, kinds):
    """The (apiVersion, kind, const) index and every message it reaches."""
    index, roots = [], []
    for api_version, kind, path in kinds:
        for k, p in ((kind, path), (kind + "List", path + "List")):
            if p in tables and not reaches_unsupported(p, tables):
                index.append((api_version, k, const_name(p)))
                roots.append(p)
    meta = "apimachinery::pkg::apis::meta::v1::"
    for av in ("v1", "meta.k8s.io/v1"):
        index.append((av, "Status", const_name(meta + "Status")))
        roots.append(meta + "Status")
    for k in ("PartialObjectMetadata", "PartialObjectMetadataList"):
        if meta + k in tables and not reaches_unsupported(meta + k, tables):
            index.append(("meta.k8s.io/v1", k, const_name(meta + k)))
            roots.append(meta + k)
    missing = [(av, k) for av, k, p in kinds if p in tables and reaches_unsupported(p, tables)]
    if missing:
        print(f"kinds without a table: {missing}", file=sys.stderr)
    reachable = set()
    todo = list(roots)
    while todo:
        p = todo.pop()
        if p in reachable or p not in tables:
            continue
        reachable.add(p)
        for f in tables[p]["fields"]:
            ty = f["ty"]
            while ty[0] == "map":
                ty = ty[1]
            if ty[0] == "msg":
                todo.append(ty[1])
                if tables.get(ty[1], {}).get("array"):
                    arr = tables[ty[1]]["array"]
                    if arr[0] == "msg":
                        todo.append(arr[1])
    return sorted(set(index)), reachable


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", action="append", default=[], help="MODULE=DIR of Go API sources")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "proto", "src", "tables.rs"))
    args = ap.parse_args()
    go_dirs = dict(a.split("=", 1) for a in args.go)
    for _, key, _ in GO_MODULES:
        if key not in go_dirs:
            sys.exit(f"missing --go {key}=DIR (Go sources of k8s.io/{key})")
    messages, kinds = parse_pb(registry_dir("k8s-pb-0.9"))
    openapi = parse_openapi(registry_dir("k8s-openapi-0.29"))
    go_structs, go_slices = parse_go(go_dirs)
    tables, problems = build(messages, kinds, openapi, go_structs, go_slices)
    with open(args.out, "w", encoding="utf-8") as out:
        index = emit(tables, kinds, messages, out)
    no_go = [p for p, t in tables.items() if not t["go"] and not t["array"]]
    unsupported = [p for p, t in tables.items() if t["unsupported"]]
    print(f"{len(tables)} messages, {len(index)} kinds; {len(no_go)} messages without Go facts; "
          f"{len(unsupported)} with fields of unknown JSON name", file=sys.stderr)
    for p in problems + [f"no Go struct: {p}" for p in no_go] + [f"unsupported: {p}: {tables[p]['unsupported']}" for p in unsupported]:
        print("  " + p, file=sys.stderr)


if __name__ == "__main__":
    main()

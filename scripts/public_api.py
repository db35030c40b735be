"""Renders rustdoc JSON of the library crates as the tables of API.md: each item
a crate exports at its root, its kind and the first line of its docs.
Called by scripts/public-api."""

import json
import re
import os
import sys

START = "<!-- public-api:start -->"
END = "<!-- public-api:end -->"


LINK = re.compile(r"\[(`[^`]*`)\](\([^)]*\))?")


def first_line(docs):
    """The first sentence of the docs' first paragraph, intra-doc links
    reduced to their text (API.md is not rustdoc)."""
    paragraph = []
    for line in (docs or "").strip().splitlines():
        line = line.strip()
        if not line:
            break
        paragraph.append(line)
    text = LINK.sub(r"\1", " ".join(paragraph))
    end = re.search(r"\.(\s|$)", text)
    if end:
        text = text[: end.start() + 1]
    if len(text) > 160:
        text = text[:157].rstrip() + "…"
    return text.replace("|", "\\|")


def kind_of(item):
    return next(iter(item["inner"].keys()), "?")


def rows(doc):
    index = doc["index"]
    root = index[str(doc["root"])]
    for item_id in root["inner"]["module"]["items"]:
        item = index[str(item_id)]
        kind = kind_of(item)
        if kind == "use":
            use = item["inner"]["use"]
            target = index.get(str(use.get("id"))) if use.get("id") is not None else None
            if use.get("is_glob"):
                continue
            kind = kind_of(target) if target else "crate" if use["source"].count("::") == 0 else "item"
            docs = (target or {}).get("docs") or item.get("docs") or ""
            if not docs and kind == "crate":
                docs = "re-export of the `%s` crate" % use["source"]
            elif not docs:
                docs = "re-export of `%s`" % use["source"]
            yield use["name"], kind, first_line(docs)
        elif kind in ("impl", "macro") and not item.get("name"):
            continue
        else:
            yield item.get("name") or "?", kind, first_line(item.get("docs"))


def render(doc_dir, crates):
    parts, total = [], 0
    for crate in crates:
        path = os.path.join(doc_dir, crate.replace("-", "_") + ".json")
        if not os.path.exists(path):
            continue
        doc = json.load(open(path))
        found = sorted(rows(doc), key=lambda r: (r[1] != "module", r[0].lower()))
        total += len(found)
        parts.append("\n<details><summary><code>%s</code>: %d items</summary>\n\n| item | kind | what it is |\n|---|---|---|" % (crate, len(found)))
        parts.extend("| `%s` | %s | %s |" % r for r in found)
        parts.append("\n</details>")
    head = "%d items in all, counted by `scripts/public-api` (rustdoc's JSON): what each library crate exports at its root, modules included (their contents are not counted)." % total
    return "\n".join([START, head] + parts + [END])


def main():
    doc_dir, readme, check = sys.argv[1], sys.argv[2], sys.argv[3] == "--check"
    crates = sys.argv[4:]
    text = open(readme).read()
    if START not in text or END not in text:
        sys.exit("API.md has no public-api markers")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    new = before + render(doc_dir, crates) + after
    if check:
        sys.exit(0 if new == text else 1)
    open(readme, "w").write(new)


if __name__ == "__main__":
    main()

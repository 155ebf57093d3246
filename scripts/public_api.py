#!/usr/bin/env python3
"""The public API of gpuscope's Rust crates, checked against the lists in
docs/contributing/public-api/: every public item (module, type, function,
constant, trait, macro), reachable from the crate's root through public
modules and re-exports, with a function's parameter names, a struct's
public fields, an enum's variants, the methods of its inherent impls and
whether a type is `#[non_exhaustive]`. A change to the surface shows as a
diff to review (a removal or rename breaks users; an addition is public
for good).

    python3 scripts/public_api.py           # check (CI)
    python3 scripts/public_api.py --bless   # write the lists again

Uses rustdoc's JSON output, an unstable option: the toolchain in use is
told to allow it (RUSTC_BOOTSTRAP=1), so no nightly toolchain is needed.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LISTS = os.path.join(ROOT, "docs", "contributing", "public-api")
# (package, library name): the crates users program against. cupti-sys is
# generated bindings; gpuscope-ffi's surface is the C header (checked by its
# own test).
CRATES = [("gpuscope", "gpuscope"), ("gpuscope-report", "gpuscope_report"), ("gpuscope-nvtx", "gpuscope_nvtx")]


def rustdoc_json(package, lib, target):
    cmd = ["cargo", "rustdoc", "-q", "-p", package, "--lib", "--",
           "-Z", "unstable-options", "--output-format", "json"]
    env = dict(os.environ, CARGO_TARGET_DIR=target, RUSTDOCFLAGS="", RUSTC_BOOTSTRAP="1")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"public_api: `{' '.join(cmd)}` failed:\n{r.stderr[-2000:]}")
    with open(os.path.join(target, "doc", f"{lib}.json")) as f:
        return json.load(f)


def surface(doc):
    index = doc["index"]
    get = lambda i: index.get(str(i))
    out = set()
    seen = set()

    def attrs(item):
        text = json.dumps(item.get("attrs", []))
        return " #[non_exhaustive]" if "non_exhaustive" in text else ""

    def params(fn):
        sig = fn["inner"]["function"]["sig"]
        return ", ".join(name for name, _ in sig["inputs"])

    def methods(path, item, kind):
        for impl_id in item["inner"][kind].get("impls", []):
            impl = get(impl_id)
            if not impl or impl["inner"]["impl"].get("trait") is not None:
                continue
            for m in impl["inner"]["impl"]["items"]:
                mi = get(m)
                if mi and mi.get("visibility") == "public" and "function" in mi["inner"]:
                    out.add(f"fn {path}::{mi['name']}({params(mi)})")
                elif mi and mi.get("visibility") == "public" and "assoc_const" in mi["inner"]:
                    out.add(f"const {path}::{mi['name']}")

    def walk(item_id, path):
        item = get(item_id)
        if item is None:
            return  # an item of another crate, re-exported: named by its `use`
        inner = item["inner"]
        kind = next(iter(inner))
        key = (item_id, path)
        if key in seen:
            return
        seen.add(key)
        if kind == "module":
            out.add(f"mod {path}")
            for child in inner["module"]["items"]:
                c = get(child)
                if c is None or c.get("visibility") not in ("public", "default"):
                    continue
                if "use" in c["inner"]:
                    u = c["inner"]["use"]
                    if u.get("is_glob"):
                        target = get(u["id"]) if u.get("id") is not None else None
                        if target and "module" in target["inner"]:
                            for g in target["inner"]["module"]["items"]:
                                gi = get(g)
                                if gi and gi.get("visibility") == "public" and gi.get("name"):
                                    walk(g, f"{path}::{gi['name']}")
                        continue
                    if u.get("id") is None or get(u["id"]) is None:
                        out.add(f"use {path}::{u['name']} = {u['source']}")
                    else:
                        walk(u["id"], f"{path}::{u['name']}")
                elif c.get("name"):
                    walk(child, f"{path}::{c['name']}")
        elif kind == "struct":
            out.add(f"struct {path}{attrs(item)}")
            k = inner["struct"]["kind"]
            fields = k.get("plain", {}).get("fields", []) if isinstance(k, dict) else []
            for fid in fields:
                f = get(fid)
                if f and f.get("visibility") == "public":
                    out.add(f"field {path}.{f['name']}")
            methods(path, item, "struct")
        elif kind == "enum":
            out.add(f"enum {path}{attrs(item)}")
            for vid in inner["enum"]["variants"]:
                v = get(vid)
                if v:
                    out.add(f"variant {path}::{v['name']}{attrs(v)}")
            methods(path, item, "enum")
        elif kind == "function":
            out.add(f"fn {path}({params(item)})")
        elif kind == "trait":
            out.add(f"trait {path}")
            for t in inner["trait"]["items"]:
                ti = get(t)
                if ti:
                    out.add(f"trait-item {path}::{ti['name']}")
        elif kind in ("constant", "static", "type_alias", "macro", "union", "proc_macro"):
            out.add(f"{kind} {path}")
            if kind == "union":
                methods(path, item, "union")
        else:
            out.add(f"{kind} {path}")

    root = get(doc["root"])
    walk(doc["root"], root["name"])
    return sorted(out)


def main():
    bless = "--bless" in sys.argv[1:]
    target = os.path.join(ROOT, "target", "public-api")
    failed = False
    os.makedirs(LISTS, exist_ok=True)
    for package, lib in CRATES:
        lines = surface(rustdoc_json(package, lib, target))
        path = os.path.join(LISTS, f"{package}.txt")
        text = "\n".join(lines) + "\n"
        if bless:
            with open(path, "w") as f:
                f.write(text)
            print(f"public_api: wrote {os.path.relpath(path, ROOT)} ({len(lines)} items)")
            continue
        try:
            with open(path) as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old != text:
            failed = True
            before, after = set(old.splitlines()), set(lines)
            print(f"public_api: {package}'s public API differs from {os.path.relpath(path, ROOT)}:")
            for line in sorted(before - after):
                print(f"  - {line}")
            for line in sorted(after - before):
                print(f"  + {line}")
        else:
            print(f"public_api: {package}: {len(lines)} items, as listed")
    if failed:
        sys.exit("public_api: review the change (a removal or rename breaks users), then "
                 "`python3 scripts/public_api.py --bless`")


if __name__ == "__main__":
    main()

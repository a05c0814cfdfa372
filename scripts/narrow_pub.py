#!/usr/bin/env python3
"""Narrow `pub` in src/ to what the binary, the integration tests and the benches use.

The compiler knows what outside code reaches, but no lint says "this `pub` is reachable and
nobody outside uses it" (`unreachable_pub` only sees items behind private modules), and no
crate rewrites visibility from the compiler's errors, so this script does the loop by hand:

1. Rewrite every `pub ` visibility in src/ (not src/main.rs) to `pub(crate) `: with `--mods`
   only the `pub mod` and `pub use` lines, otherwise every item, field and re-export.
2. Check the bin, the integration tests and the benches with JSON diagnostics; each privacy
   error (E0603 private item, E0624 private method, E0616/E0451 private field, E0364/E0365
   private re-export) and each `private_interfaces`/`private_bounds` warning names the item
   that must stay `pub`; put `pub` back on exactly that item and check again until clean.

It edits only the visibility keyword on a line, never the rest of the line. Run it from the
crate root: `python3 scripts/narrow_pub.py [--mods]` (`--resume` skips step 1 and only
restores). It prints every line it restored.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.getcwd()
SRC = os.path.join(ROOT, "src")
CHECK = [
    "cargo", "check", "--message-format=json",
    "--bins", "--test", "integration", "--benches",
]

LINE_PUB = re.compile(r"^(\s*)pub (?!\()")
MOD_PUB = re.compile(r"^(\s*)pub (mod|use) ")
# Tuple fields on one line: `struct Foo(pub String);`, `(pub A, pub B)`.
TUPLE_PUB = re.compile(r"([(,]\s*)pub (?=[A-Za-z&\[(])")


def src_files():
    for d, _, names in os.walk(SRC):
        for n in names:
            p = os.path.join(d, n)
            if n.endswith(".rs") and p != os.path.join(SRC, "main.rs"):
                yield p


def narrow(mods_only):
    count = 0
    for path in src_files():
        with open(path) as f:
            lines = f.read().split("\n")
        out = []
        for line in lines:
            if line.lstrip().startswith("//"):
                out.append(line)
                continue
            if mods_only:
                new = MOD_PUB.sub(r"\1pub(crate) \2 ", line)
            else:
                new = LINE_PUB.sub(r"\1pub(crate) ", line)
                if re.match(r"^\s*(pub(\(crate\))? )?struct ", new):
                    new = TUPLE_PUB.sub(r"\1pub(crate) ", new)
            count += new != line
            out.append(new)
        with open(path, "w") as f:
            f.write("\n".join(out))
    print(f"narrowed {count} lines", file=sys.stderr)


def restore_at(path, line_no, col):
    """Put `pub` back on the last `pub(crate)` at or before column `col` (1-based) of a line
    (a span starts at the visibility or at the keyword after it); failing that, the first
    one. Returns True when the line changed."""
    path = os.path.join(ROOT, path) if not os.path.isabs(path) else path
    if not path.startswith(SRC + os.sep) or path == os.path.join(SRC, "main.rs"):
        return False
    with open(path) as f:
        lines = f.read().split("\n")
    line = lines[line_no - 1]
    hits = [m.start() for m in re.finditer(r"pub\(crate\) ", line)]
    if not hits:
        # A name inside a multi-line `use a::{..};` group: the `use` starts a few lines up.
        for up in range(line_no - 2, max(line_no - 40, -1), -1):
            if ";" in lines[up] or "}" in lines[up]:
                break
            if re.match(r"^\s*pub\(crate\) use ", lines[up]):
                return restore_at(path, up + 1, 1)
        return False
    before = [h for h in hits if h <= col - 1]
    at = before[-1] if before else hits[0]
    lines[line_no - 1] = line[:at] + "pub " + line[at + len("pub(crate) "):]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"restored {os.path.relpath(path, ROOT)}:{line_no}: {lines[line_no - 1].strip()}")
    return True


ITEM = r"(?:(?:async|const|unsafe|extern \"C\")\s+)*(?:struct|enum|union|trait|type|fn|const|static|mod)"


def restore_item_named(name):
    """Restore the `pub(crate)` definitions and re-exports of a name that a `pub use`
    re-exports, when at most three lines in src/ define or re-export it."""
    pat = re.compile(r"^\s*pub\(crate\) " + ITEM + r"\s+" + re.escape(name) + r"\b")
    use = re.compile(r"^\s*pub\(crate\) use .*\b" + re.escape(name) + r"\b")
    found = []
    for path in src_files():
        with open(path) as f:
            for i, line in enumerate(f.read().split("\n"), 1):
                if pat.match(line) or use.match(line):
                    found.append((path, i))
    if 1 <= len(found) <= 3:
        changed = False
        for path, i in found:
            changed |= restore_at(path, i, 1)
        return changed
    print(f"warning: {len(found)} definitions of `{name}`; restore it by hand", file=sys.stderr)
    return False


def module_dir(path):
    """The directory holding the children of the module that `path` (under src/) defines."""
    path = os.path.join(ROOT, path) if not os.path.isabs(path) else path
    base = os.path.basename(path)
    if base in ("mod.rs", "lib.rs"):
        return os.path.dirname(path)
    return path[: -len(".rs")]


def module_file(d):
    for cand in (d + ".rs", os.path.join(d, "mod.rs")):
        if os.path.exists(cand):
            return cand
    return None


def restore_reexported(path, line_no, name):
    """For `pub use a::b::{.., name, ..};` at `path:line_no`, restore `name` (its definition
    or its own re-export) in the module the `use` path names."""
    full = os.path.join(ROOT, path) if not os.path.isabs(path) else path
    with open(full) as f:
        lines = f.read().split("\n")
    start = line_no - 1
    while start > 0 and not re.match(r"^\s*pub(\(crate\))? use ", lines[start]):
        start -= 1
    text = " ".join(lines[start:line_no + 40])
    m = re.match(r"^\s*pub(?:\(crate\))? use ([^;]*);", text)
    if not m:
        return False
    tree = m.group(1).replace(" ", "")
    # The module path in front of `name`: `a::b::name`, or `a::b::{..,name,..}`.
    mm = re.match(r"^((?:\w+::)+)(?:" + re.escape(name) + r"$|\{)", tree)
    if not mm:
        return False
    segs = [x for x in mm.group(1).split("::") if x]
    d = module_dir(full)
    if segs and segs[0] == "crate":
        d, segs = SRC, segs[1:]
    for seg in segs:
        if seg == "self":
            continue
        if seg == "super":
            d = os.path.dirname(d)
            continue
        d = os.path.join(d, seg)
    target = module_file(d)
    if not target:
        return False
    pat = re.compile(r"^\s*pub\(crate\) " + ITEM + r"\s+" + re.escape(name) + r"\b")
    use = re.compile(r"^\s*pub\(crate\) use .*\b" + re.escape(name) + r"\b")
    with open(target) as f:
        tl = f.read().split("\n")
    for i, line in enumerate(tl):
        if pat.match(line) or use.match(line):
            return restore_at(target, i + 1, 1)
    # `name` inside a multi-line `pub(crate) use x::{..}` group in that module.
    for i, line in enumerate(tl):
        if re.search(r"\b" + re.escape(name) + r"\b", line) and not line.lstrip().startswith("//"):
            if restore_at(target, i + 1, 1):
                return True
    return False


def restore_field(struct, field):
    """Restore `pub(crate) field:` inside the definition of `struct` (searched by name)."""
    head = re.compile(r"^\s*(pub(\(crate\))? )?struct\s+" + re.escape(struct) + r"\b")
    fpat = re.compile(r"^\s*pub\(crate\) " + re.escape(field) + r"\s*:")
    changed = False
    for path in src_files():
        with open(path) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            if not head.match(line):
                continue
            for j in range(i + 1, min(i + 400, len(lines))):
                if lines[j].startswith("}") or re.match(r"^\s*(pub(\(crate\))? )?struct ", lines[j]):
                    break
                if fpat.match(lines[j]):
                    changed |= restore_at(path, j + 1, 1)
                    break
    return changed


def spans_of(diag, top=True):
    """Every span of a diagnostic and its notes, leaving out the top-level primary span (the
    place that uses the item, or for a lint the item it warns about)."""
    for s in diag.get("spans", []):
        if not (top and s.get("is_primary")):
            yield s
    for c in diag.get("children", []):
        yield from spans_of(c, False)


def handle(diag):
    code = (diag.get("code") or {}).get("code", "")
    msg = diag.get("message", "")
    changed = False
    if code in ("E0603", "E0624", "private_interfaces", "private_bounds"):
        for s in spans_of(diag):
            changed |= restore_at(s["file_name"], s["line_start"], s["column_start"])
    elif code in ("E0616", "E0451"):
        m = re.search(r"fields? (.*) of (?:struct|union) `([^`<]+)", msg)
        if m:
            for field in re.findall(r"`([^`]+)`", m.group(1)):
                changed |= restore_field(m.group(2).split("::")[-1], field)
    elif code in ("E0364", "E0365"):
        m = re.search(r"`([^`]+)`", msg)
        if m:
            name = m.group(1).split("::")[-1]
            prim = [x for x in diag.get("spans", []) if x.get("is_primary")]
            if prim:
                changed |= restore_reexported(prim[0]["file_name"], prim[0]["line_start"], name)
            if not changed:
                changed |= restore_item_named(name)
    return changed


def check():
    proc = subprocess.run(CHECK, cwd=ROOT, capture_output=True, text=True)
    diags = []
    for line in proc.stdout.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("reason") == "compiler-message":
            diags.append(obj["message"])
    return proc.returncode, diags


def main():
    mods_only = "--mods" in sys.argv[1:]
    if "--resume" not in sys.argv[1:]:
        narrow(mods_only)
    for round_no in range(1, 30):
        rc, diags = check()
        changed = False
        for d in diags:
            if d.get("level") == "error" or (d.get("code") or {}).get("code", "") in (
                "private_interfaces", "private_bounds"):
                changed |= handle(d)
        errors = [d for d in diags if d.get("level") == "error"]
        print(f"round {round_no}: {len(errors)} errors, restored something: {changed}",
              file=sys.stderr)
        if not changed:
            for d in errors:
                print(d.get("rendered", d.get("message")), file=sys.stderr)
            sys.exit(1 if rc != 0 else 0)
    sys.exit(1)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""Fails when the C API reference (docs/c-api.md and docs/c-api-work.md) and the public headers disagree.

    check_c_api.py INCLUDE_DIR C_API_MD...

Every public function of include/dlstream/*.h (DLS_API declarations and the static inline helpers) must be
documented in the reference: named in backticks outside the code blocks (`dls_stream_create` or
`dls_stream_create(...)`). Every dls_ name the reference's prose uses must exist in the headers, so a renamed
or removed function cannot linger in the docs.
"""
import glob
import os
import re
import sys

DECL = re.compile(r"(?:DLS_API|static\s+inline)\s+[^;{}()]*?\b(dls_[a-z0-9_]+)\s*\(")
IDENT = re.compile(r"\bdls_[a-z0-9_]*[a-z0-9]\b")


def prose(path):
    """The lines of a Markdown file outside its ``` blocks."""
    out, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced:
                out.append(line)
    return "".join(out)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    include_dir, docs = argv[1], argv[2:]
    doc = " + ".join(docs)
    functions, known = {}, set()
    for header in sorted(glob.glob(os.path.join(include_dir, "dlstream", "*.h"))):
        with open(header, encoding="utf-8") as f:
            text = f.read()
        known.update(IDENT.findall(text))
        for name in DECL.findall(text):
            if not name.startswith("dls__"):
                functions.setdefault(name, os.path.basename(header))
    text = "".join(prose(d) for d in docs)
    missing = [f"{name} ({header})" for name, header in sorted(functions.items())
               if not re.search(r"`" + re.escape(name) + r"[`(]", text)]
    unknown = sorted({name for name in IDENT.findall(text) if name not in known and not name.startswith("dls__")})
    for name in missing:
        print(f"{doc}: the public function {name} is not documented (name it in backticks outside a code block)")
    for name in unknown:
        print(f"{doc}: names {name}, which no public header declares")
    if missing or unknown:
        return 1
    print(f"{doc}: all {len(functions)} public functions of {include_dir}/dlstream documented; no unknown names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

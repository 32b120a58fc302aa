# SPDX-License-Identifier: Apache-2.0
"""The code blocks of the Markdown docs, written out as files so that the build compiles and runs them.

    doc_blocks.py c OUT_DIR FILE.md...        every ```c block: a whole program (it must define main);
                                              prints the files written, as a CMake list
    doc_blocks.py python OUT_DIR FILE.md...   every ```python block; prints one line per block:
                                              "run PATH" or "skip PATH REASON"

A block is named after its file and the heading above it (c-api_03_streams.c). A line
``<!-- doc-test: skip REASON -->`` right before a Python block keeps the suite from running it (a fragment
that needs the reader's own variables); it is still written out. Files are rewritten only when their text
changes, so an edit of one block rebuilds one program.
"""
import os
import re
import sys

FENCE = re.compile(r"^```(\w*)\s*$")
HEADING = re.compile(r"^#+\s+(.*)$")
SKIP = re.compile(r"^<!--\s*doc-test:\s*skip\s+(.*?)\s*-->\s*$")


def blocks(path, lang):
    """(index, heading, skip reason or None, text) of every block of `lang` in a Markdown file."""
    out = []
    heading, skip, fence, body, prev = "top", None, None, [], ""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if fence is None:
                m = FENCE.match(line)
                if m:
                    fence, body, start = m.group(1), [], number
                    s = SKIP.match(prev)
                    skip = s.group(1) if s else None
                elif HEADING.match(line):
                    heading = HEADING.match(line).group(1)
                prev = line if line.strip() else prev
            elif line.startswith("```"):
                if fence == lang:
                    out.append((len(out) + 1, heading, skip, "\n".join(body) + "\n", start))
                fence = None
            else:
                body.append(line)
    if fence is not None:
        sys.exit(f"{path}: a ``` block is not closed")
    return out


def slug(text):
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "block"


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv):
    if len(argv) < 4 or argv[1] not in ("c", "python"):
        sys.exit(__doc__)
    lang, out_dir, docs = argv[1], argv[2], argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    written, lines = [], []
    for doc in docs:
        stem = slug(os.path.splitext(os.path.basename(doc))[0])
        for index, heading, skip, text, line in blocks(doc, lang):
            name = f"{stem}_{index:02d}_{slug(heading)}"
            path = os.path.join(out_dir, name + (".c" if lang == "c" else ".py"))
            if lang == "c" and not re.search(r"\bint\s+main\s*\(", text):
                sys.exit(f"{doc}:{line}: a ```c block must be a whole program with main() (CI compiles and runs "
                         "every one); show a fragment as ```text")
            origin = f"{os.path.relpath(doc)} line {line}"
            header = f"/* From {origin}: edit it there. */\n" if lang == "c" else f"# From {origin}: edit it there.\n"
            write_if_changed(path, header + text)
            written.append(path)
            lines.append(f"skip {path} {skip}" if skip else f"run {path}")
    print(";".join(written) if lang == "c" else "\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)

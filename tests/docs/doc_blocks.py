# SPDX-License-Identifier: Apache-2.0
"""The code blocks of the Markdown docs, written out as files so that the build compiles and runs them.

    doc_blocks.py c OUT_DIR FILE.md...        every ```c block: a whole program (it must define main);
                                              prints the files written, as a CMake list
    doc_blocks.py python OUT_DIR FILE.md...   every ```python block; prints one line per block:
                                              "run PATH", "needs PATH WHAT[,WHAT]" or "skip PATH REASON"

A block is named after its file and the heading above it (c-api_03_streams.c). A line right before a block may
say what it is (an HTML comment: the page shows nothing):

    <!-- doc-test: skip REASON -->        a fragment (it needs the reader's own variables): written out, not run,
                                          and never a page's first example
    <!-- doc-test: needs WHAT, ... -->    runs only where the machine has each WHAT (NEEDS lists them: a GPU,
                                          an optional framework); elsewhere the suite skips it and names the need

Files are rewritten only when their text changes, so an edit of one block rebuilds one program.
"""
import os
import re
import sys
import typing

FENCE = re.compile(r"^```(\w*)\s*$")
HEADING = re.compile(r"^#+\s+(.*)$")
MARK = re.compile(r"^<!--\s*doc-test:\s*(\S+)\s*(.*?)\s*-->\s*$")

# What a block may need, and what that means. The suite (tests/python/test_docs.py) checks each on the machine.
NEEDS = {
    "cuda": "a CUDA device",
    "rocm": "a ROCm device",
    "nvrtc": "NVRTC (kernels from source)",
    "torch": "torch (its CPU build will do)",
    "torch-cuda": "torch with CUDA and a CUDA device",
    "cupy": "CuPy with a CUDA device",
    "jax": "JAX (its CPU wheel will do)",
    "jax-cuda": "JAX with CUDA and a CUDA device",
}
# The needs that only a GPU meets: a page's first example with one of them must say so in its first line.
GPU_NEEDS = {"cuda", "rocm", "nvrtc", "torch-cuda", "cupy", "jax-cuda"}


class Block(typing.NamedTuple):
    index: int        # 1, 2, ... among the page's blocks of its language
    heading: str      # the heading above it
    skip: str | None  # a fragment: why it is not run
    needs: tuple      # of NEEDS keys
    text: str
    line: int         # of its opening fence
    lang: str


def blocks(path, lang=None):
    """The blocks of `lang` in a Markdown file (of every language when None), in order."""
    out, count = [], {}
    heading, fence, body, prev, mark = "top", None, [], "", (None, ())
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if fence is None:
                m = FENCE.match(line)
                if m:
                    fence, body, start = m.group(1), [], number
                    mark = _mark(path, number, prev)
                elif HEADING.match(line):
                    heading = HEADING.match(line).group(1)
                prev = line if line.strip() else prev
            elif line.startswith("```"):
                if lang is None or fence == lang:
                    count[fence] = count.get(fence, 0) + 1
                    out.append(Block(count[fence], heading, mark[0], mark[1], "\n".join(body) + "\n", start, fence))
                fence = None
            else:
                body.append(line)
    if fence is not None:
        sys.exit(f"{path}: a ``` block is not closed")
    return out


def _mark(path, number, prev):
    """(skip reason, needs) from the line before a block's fence."""
    m = MARK.match(prev)
    if m is None:
        if "doc-test" in prev:
            sys.exit(f"{path}:{number - 1}: a doc-test line is <!-- doc-test: skip REASON --> or "
                     "<!-- doc-test: needs WHAT, ... -->")
        return None, ()
    kind, rest = m.groups()
    if kind == "skip" and rest:
        return rest, ()
    if kind == "needs":
        needs = tuple(n.strip() for n in rest.split(",") if n.strip())
        unknown = [n for n in needs if n not in NEEDS]
        if needs and not unknown:
            return None, needs
        sys.exit(f"{path}:{number - 1}: doc-test needs {', '.join(unknown) or 'nothing'}: a block needs one or more "
                 f"of {', '.join(NEEDS)}")
    sys.exit(f"{path}:{number - 1}: doc-test '{kind}': a doc-test line is <!-- doc-test: skip REASON --> or "
             "<!-- doc-test: needs WHAT, ... -->")


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
        for b in blocks(doc, lang):
            name = f"{stem}_{b.index:02d}_{slug(b.heading)}"
            path = os.path.join(out_dir, name + (".c" if lang == "c" else ".py"))
            if lang == "c" and (b.skip or b.needs or not re.search(r"\bint\s+main\s*\(", b.text)):
                sys.exit(f"{doc}:{b.line}: a ```c block must be a whole program with main() that runs on the CPU "
                         "backend (CI compiles and runs every one); show a fragment as ```text")
            origin = f"{os.path.relpath(doc)} line {b.line}"
            header = f"/* From {origin}: edit it there. */\n" if lang == "c" else f"# From {origin}: edit it there.\n"
            write_if_changed(path, header + b.text)
            written.append(path)
            lines.append(f"skip {path} {b.skip}" if b.skip else f"needs {path} {','.join(b.needs)}" if b.needs
                         else f"run {path}")
    print(";".join(written) if lang == "c" else "\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)

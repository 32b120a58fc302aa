# SPDX-License-Identifier: Apache-2.0
"""scripts/layers, the structure checker, on small trees of its own: a clean tree passes (exit 0) with a two-file
loop docs/design.md lists and with same-named statics, private macros and forward typedefs that tie no files, and a
header's macro counts where it is expanded (an X-macro or vtable macro ties no header to what it names); a loop
of three files, a two-file loop the picture does not list, an arrow up a layer (a call or an include) each fail it
(exit 1, naming what broke); a tree without the picture is an error (exit 2)."""
import os
import shutil
import subprocess
import sys

import pytest

LAYERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts",
                      "layers")

DESIGN = """\
# Design

## Layers

The picture the checker reads.

```
plugin/top        what calls the core
      |
plugin/core       the core (its files, highest first:)
      |   a <-> b      a and b call each other: allowed
      |
plugin/base       the base
```
"""

CLEAN = {
    "plugin/base/x.h": "int base_x(void);\n#define BASE_ONE 1\n",
    "plugin/base/x.c": '#include "x.h"\nint base_x(void) { return BASE_ONE; }\n',
    "plugin/core/a.h": '#include "base/x.h"\nint a_fn(void);\ntypedef struct thing thing;\n',
    "plugin/core/a.c": '#include "a.h"\nint b_fn(void);\nint a_fn(void) { return base_x() + b_fn(); }\n',
    "plugin/core/b.c": '#include "a.h"\nint b_fn(void) { return 0; }\nint b_twice(void) { return a_fn() * 2; }\n',
    # c and d each have a static helper and a macro named alike, and a forward typedef of one name: no loop;
    # d calls c, one way
    "plugin/core/c.c": ('#define g c_state\nstatic int c_state;\nstatic int helper(void) { return g; }\n'
                        'int c_fn(void) { return helper(); }\n'),
    "plugin/core/d.c": ('#include "a.h"\n#define g d_state\nstatic int d_state;\n'
                        'static int helper(void) { return g; }\nint c_fn(void);\n'
                        'int d_fn(void) { return helper() + c_fn(); }\ntypedef struct thing thing;\n'),
    "plugin/top/t.c": '#include "core/a.h"\nint t_fn(void) { return a_fn(); }\n',
}


def tree(tmp_path, files):
    for rel, text in {**files, "docs/design.md": DESIGN}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def layers(root, *args):
    r = subprocess.run([sys.executable, LAYERS, "--root", str(root), *args], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout + r.stderr


def test_clean_tree_passes_with_its_listed_pair_and_no_false_loops(tmp_path):
    rc, out = layers(tree(tmp_path, CLEAN))
    assert rc == 0, out
    assert "2 files: a.[ch] b.c (2 arrows), listed in docs/design.md" in out
    assert "c.c" not in out.split("loops:")[2].split("arrows up")[0], "same-named statics and macros tie no files"
    assert "layers: no arrow up a layer" in out
    rc, out = layers(tmp_path, "--check")
    assert rc == 0 and out.strip() == "layers: no arrow up a layer, no loop of more than two files, every two-file " \
                                      "loop listed", out


@pytest.mark.parametrize("change, expect", [
    ({"plugin/core/c.c": "int a_fn(void);\nint c_fn(void) { return a_fn(); }\n",
      "plugin/core/b.c": '#include "a.h"\nint c_fn(void);\nint b_fn(void) { return c_fn(); }\n'},
     "plugin/core: a loop of 3 files: a.[ch] <-> b.c <-> c.c"),
    ({"plugin/core/d.c": "int e_fn(void);\nint d_fn(void) { return e_fn(); }\n",
      "plugin/core/e.c": "int d_fn(void);\nint e_fn(void) { return d_fn(); }\n"},
     "plugin/core: a loop of two files that docs/design.md's Layers picture does not list: d.c <-> e.c"),
    ({"plugin/base/x.c": '#include "x.h"\nint a_fn(void);\nint base_x(void) { return a_fn(); }\n'},
     "plugin/base: an arrow up from layer 0 to plugin/core (layer 1): x.[ch] -> plugin/core/a.[ch] (a_fn)"),
    ({"plugin/core/b.c": '#include "a.h"\n#include "top/t.h"\nint b_fn(void) { return 0; }\n',
      "plugin/top/t.h": "int t_fn(void);\n"},
     "plugin/core: an arrow up from layer 1 to plugin/top (layer 2): b.c -> plugin/top/t.[ch] (#include)"),
])
def test_a_loop_or_an_arrow_up_fails(tmp_path, change, expect):
    rc, out = layers(tree(tmp_path, {**CLEAN, **change}), "--check")
    assert rc == 1, out
    assert expect in out, out


def test_a_header_macro_is_used_where_it_is_expanded(tmp_path):
    # m.h's macros name m_impl (m.c) and n_fn (n.c, which includes m.h): a header that named them itself would make
    # m.[ch] <-> n.c a loop; expanded, n.c uses m_impl (an arrow n.c -> m.[ch]) and t.c uses n_fn
    files = {**CLEAN,
             "plugin/core/m.h": "int m_impl(int);\n#define M_OF(x) m_impl(x)\n#define M_TABLE {n_fn}\n",
             "plugin/core/m.c": '#include "m.h"\nint m_impl(int x) { return x; }\n',
             "plugin/core/n.c": '#include "m.h"\nint n_fn(void) { return M_OF(1); }\n',
             "plugin/top/u.c": '#include "core/m.h"\nint n_fn(void);\nstatic int (*const tab[])(void) = M_TABLE;\n'
                               'int u_fn(void) { return tab[0](); }\n'}
    rc, out = layers(tree(tmp_path, files), "--floors")
    assert rc == 0, out
    core = out.split("plugin/core (")[1].split("plugin/top (")[0]
    assert "loops: 1" in core, out  # a <-> b only
    floors = core.split("floors:")[1]
    assert floors.index("m.[ch]") < floors.index("n.c"), "n.c uses m_impl through M_OF, one floor above m.[ch]"
    # the macro ties the file that expands it: n.c made to call back into a file m.c uses is a loop again
    files["plugin/core/m.c"] = '#include "m.h"\nint n_fn(void);\nint m_impl(int x) { return x + n_fn(); }\n'
    rc, out = layers(tree(tmp_path, files), "--check")
    assert rc == 1 and "a loop of two files that docs/design.md's Layers picture does not list: m.[ch] <-> n.c" in out, out


def test_no_picture_is_an_error(tmp_path):
    (tmp_path / "plugin" / "core").mkdir(parents=True)
    rc, out = layers(tmp_path)
    assert rc == 2 and "docs/design.md" in out, out


ROOT = os.path.dirname(os.path.dirname(LAYERS))


def test_the_repository_passes_and_ci_checks_it_first():
    rc, out = layers(ROOT, "--check")
    assert rc == 0, out
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert "\nscripts/layers --check\n" in ci, "CI runs the checker as a step of its own (set -e: its exit fails CI)"
    assert ci.index("scripts/layers --check") < ci.index("\nmake demo"), "before anything is built"


def repository_copy(tmp_path):
    for folder in ("include", "plugin", "interop"):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder,
                        ignore=shutil.ignore_patterns("*.py", "*.pyi", "__pycache__", "*.cu", "*.cuh"))
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(ROOT, "docs", "design.md"), tmp_path / "docs" / "design.md")
    return tmp_path


@pytest.mark.parametrize("what", ["a loop", "an arrow up", "an unlisted pair"])
def test_the_repository_with_a_deliberate_break_fails(tmp_path, what):
    root = repository_copy(tmp_path)
    rc, out = layers(root, "--check")
    assert rc == 0, out  # the copy passes as the repository does
    if what == "a loop":  # the device registry (floor 3) made to drop a buffer reference (release.c, above it)
        with open(root / "plugin" / "core" / "device.c", "a") as f:
            f.write('\n#include "core/release.h"\nvoid dls__test_loop(dls__buffer *b) { dls__buffer_unref(b); }\n')
        expect = "plugin/core: a loop of "
    elif what == "an arrow up":  # the base calls into the core
        with open(root / "plugin" / "base" / "spin.c", "w") as f:
            f.write("int dls_device_count(int *);\nint dls__test_up(void) { int n; return dls_device_count(&n); }\n")
        expect = "plugin/base: an arrow up from layer 1 to plugin/core"
    else:  # the picture stops listing stream <-> capture
        design = (root / "docs" / "design.md").read_text().replace("stream <-> capture", "stream, capture")
        (root / "docs" / "design.md").write_text(design)
        expect = "does not list: capture.[ch] <-> stream.[ch]"
    rc, out = layers(root, "--check")
    assert rc == 1, out
    assert expect in out, out

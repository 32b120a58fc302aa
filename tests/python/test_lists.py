# SPDX-License-Identifier: Apache-2.0
"""The lists written once and what is made from them, against the places still written by hand (as
test_builtin_table.py does for the built-ins):
- the statuses: include/dlstream/status.h's DLS_STATUS_MAP. The extension's exception classes are made from it
  (interop/python/errors.c); the package's imports, the type stubs and docs/python.md's table must follow.
- the backends: plugin/backend/backend.h's DLS__BACKENDS. The core's registry, the fault wrappers and the messages
  naming device types are made from it (tests/c/test_status.c checks those); the device names the extension parses and dlstream.jax's device types must
  follow.
Fails when a status has no class (or one with another status or built-in base), when a class is missing from the
package, the stubs or the docs, and when a backend's device type has no name in Python."""
import re

import pytest

import dlstream
from test_builtin_table import ROOT, source  # the repository, and one of its files (skips where it is not here)


def macro_body(text, name):
    """The body of `#define name(X) ...` with its continuations joined."""
    m = re.search(r"^#define " + name + r"\(X\)((?:.*\\\n)*.*)$", text, re.M)
    assert m, f"no #define {name}(X)"
    return m.group(1).replace("\\\n", " ")


def statuses():
    """[(name, value)] of DLS_STATUS_MAP, DLS_OK first."""
    body = macro_body(source("include/dlstream/status.h"), "DLS_STATUS_MAP")
    return [(n, int(v)) for n, v in re.findall(r"X\((\w+),\s*(\d+),", body)]


def backends():
    """[(device type, value)] of DLS__BACKENDS."""
    body = macro_body(source("plugin/backend/backend.h"), "DLS__BACKENDS")
    return [(t, int(v)) for t, v in re.findall(r",\s*(kDL\w+),\s*(\d+)\)", body)]


def status_classes():
    """status value -> the dlstream exception class of that status (OutOfRangeError, a subclass, aside)."""
    out = {}
    for name in dir(dlstream):
        cls = getattr(dlstream, name)
        if isinstance(cls, type) and issubclass(cls, dlstream.Error) and cls.__bases__[0] is dlstream.Error \
                and cls is not dlstream.ArgumentTypeError:
            out[cls.status] = cls
    return out


def test_the_lists_parse():
    s = statuses()
    assert s[0] == ("OK", 0) and [v for _, v in s] == list(range(len(s))), s
    b = backends()
    assert ("kDLCPU", 1) in b and len(b) >= 3, b


def test_every_status_has_its_class_and_no_class_lacks_a_status():
    classes = status_classes()
    listed = {v: n for n, v in statuses() if v != 0}
    assert sorted(classes) == sorted(listed), (sorted(classes), listed)
    for value, name in listed.items():
        cls = classes[value]
        assert cls.status_name == "DLS_" + name, (cls, name)
        assert cls.__module__ == "dlstream" and cls.__doc__, cls


def test_the_stubs_the_package_and_the_docs_name_every_status_class():
    stubs = source("interop/python/dlstream/_dlstream.pyi")
    init = source("interop/python/dlstream/__init__.py")
    init_stub = source("interop/python/dlstream/__init__.pyi")
    doc = source("docs/python.md")
    table = doc[doc.index("## Errors"):]
    for cls in status_classes().values():
        builtin = cls.__bases__[1].__name__
        assert re.search(rf"^class {cls.__name__}\(Error, {builtin}\): \.\.\.$", stubs, re.M), \
            f"_dlstream.pyi does not declare class {cls.__name__}(Error, {builtin})"
        assert re.search(rf"^\s+{cls.__name__},$", init, re.M), f"dlstream/__init__.py does not import {cls.__name__}"
        assert f"{cls.__name__} as {cls.__name__}" in init_stub, f"__init__.pyi does not re-export {cls.__name__}"
        short = cls.status_name[len("DLS_ERR_"):]
        rows = [line for line in table.split("\n") if line.startswith("|")]
        row = next((line for line in rows if f"`{cls.__name__}`" in line), None)
        assert row is not None, f"docs/python.md's Errors table has no row for {cls.__name__}"
        assert short in row and f"`{builtin}`" in row, f"docs/python.md's row of {cls.__name__}: {row}"


def test_every_backends_device_type_has_a_name_in_python():
    listed = backends()
    for dtype, value in listed:
        assert getattr(dlstream, dtype, value) == value, dtype
    # the names the extension parses ('cpu', 'cuda:1', 'rocm'), one per backend at least
    parsed = set(re.findall(r"\*out = (kDL\w+);", source("interop/python/devices.c")))
    assert parsed == {t for t, _ in listed}, (parsed, listed)
    # dlstream.jax's device kinds
    jax_py = source("interop/python/dlstream/jax.py")
    kinds = eval(re.search(r"^_DEVICE_TYPES = (\{.*\})$", jax_py, re.M).group(1))  # a literal dict
    assert sorted(kinds.values()) == sorted(v for _, v in listed), (kinds, listed)



def c_sources():
    for folder in ("plugin", "interop"):
        root = ROOT / folder
        if not root.exists():
            pytest.skip(f"{folder} is not here (an installed package without its sources)")
        yield from sorted(p for p in root.rglob("*") if p.suffix in (".c", ".h"))


def test_one_handle_lookup_and_one_output_check():
    # handle lookups: DLS__GET_OF(kind, ...) (core/tables.h) for every kind, no macro of a kind's own; output
    # pointers: DLS__OUT (base/error.h), no check written by hand
    per_kind, by_hand = [], []
    for p in c_sources():
        text = p.read_text()
        rel = p.relative_to(ROOT)
        per_kind += [f"{rel}: {m}" for m in re.findall(r"#define (DLS__GET_(?!OF\b)\w+)\(", text)]
        if str(rel) not in ("plugin/base/error.h", "plugin/base/error.c"):
            by_hand += [f"{rel}: {m}" for m in re.findall(r'"[^"\n]*(?:output pointer is NULL|: out_\w+ is NULL)', text)]
    assert per_kind == [], per_kind
    assert by_hand == [], by_hand

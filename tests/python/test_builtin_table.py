# SPDX-License-Identifier: Apache-2.0
"""The built-ins are written once (plugin/kernels/builtin_table.h): every list still written by hand must agree with
the table, and the generated ones must say what it says. Fails when a GPU kernel, a header line or a doc row is
missing or has another argument count, or when a built-in's name, signature or kernel does not reach a way in."""
import pathlib
import re

import pytest

import dlstream
from conftest import CPU

TABLE = dlstream._dlstream._builtins()
ROOT = pathlib.Path(__file__).resolve().parents[2]


def source(rel):
    path = ROOT / rel
    if not path.exists():
        pytest.skip(f"{rel} is not here (an installed package without its sources)")
    return path.read_text()


def test_every_builtin_is_a_function_with_its_tables_signature():
    for b in TABLE:
        f = dlstream.builtin_function(b["name"], CPU)  # the CPU backend's kernel, by the table's name
        assert f.signature == b["signature"], b["name"]
        assert len(b["args"]) == (len(b["signature"].split(",")) if b["signature"] else 0)
        assert f._builtin


def test_the_not_found_message_lists_the_table():
    with pytest.raises(dlstream.NotFoundError) as e:
        dlstream.builtin_function("dls_nope", CPU)
    listed = re.search(r"no such built-in \(([^)]*)\)", str(e.value)).group(1).split(", ")
    assert listed == [b["name"] for b in TABLE]


def test_every_gpu_symbol_is_a_kernel_of_builtins_cu_with_the_tables_arguments():
    cu = source("plugin/kernels/builtins.cu")
    for b in TABLE:
        m = re.search(r"__global__\s+void\s+" + re.escape(b["gpu_symbol"]) + r"\s*\(([^)]*)\)", cu)
        assert m, f"plugin/kernels/builtins.cu has no __global__ void {b['gpu_symbol']}(...)"
        params = [p for p in m.group(1).split(",") if p.strip() not in ("", "void")]
        assert len(params) == len(b["args"]), f"{b['gpu_symbol']} takes {len(params)}, the table {len(b['args'])}"


def test_the_header_and_the_docs_list_every_builtin_with_its_arguments():
    header = source("include/dlstream/builtin.h")
    for b in TABLE:
        m = re.search(r'"' + re.escape(b["name"]) + r'"\s*\(([^)]*)\)', header)
        assert m, f"include/dlstream/builtin.h does not list {b['name']}"
        listed = [p for p in m.group(1).split(",") if p.strip()]
        assert len(listed) == len(b["args"]), f"builtin.h lists {len(listed)} arguments of {b['name']}"
    for doc in ("docs/c-api-work.md", "docs/python.md"):
        text = source(doc)
        for b in TABLE:
            assert f"`{b['name']}`" in text or f'`"{b["name"]}"`' in text, f"{doc} does not name {b['name']}"


def test_every_memory_argument_is_a_p_or_cp_with_a_rule_and_every_scalar_has_none():
    for b in TABLE:
        for a in b["args"]:
            assert (a["kind"] in ("p", "cp")) == (a["rule"] is not None), (b["name"], a)
            assert a["kind"] != "bytes" or a["struct"], (b["name"], a)
            if a["rule"] and a["rule"][0] in ("sized", "desc"):
                ref = b["args"][a["rule"][1]]
                assert ref["kind"] == ("bytes" if a["rule"][0] == "desc" else "u32"), (b["name"], a, ref)

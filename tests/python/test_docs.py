# SPDX-License-Identifier: Apache-2.0
"""What a reader of the docs and of help() sees: the Python examples of docs/python.md and README.md run, every
public callable has a signature and a real description, asynchronous calls say how to wait, and the package's
namespace holds its public names only. (The C examples are built and run by CTest: tests/docs.)"""
import importlib.util
import inspect
import pathlib
import re

import pytest

import dlstream
from conftest import HAVE_CUDA, run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / "tests" / "docs" / "doc_blocks.py")
doc_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_blocks)

BLOCKS = [(doc, index, skip, text) for doc in ("docs/python.md", "README.md")
          for index, _heading, skip, text, _line in doc_blocks.blocks(str(ROOT / doc), "python")]


def _missing_framework(text):
    for name in re.findall(r"^\s*(?:import|from)\s+(torch|cupy|jax)\b", text, re.M):
        if importlib.util.find_spec(name) is None:
            return name
    return None


@pytest.mark.parametrize("doc,index,skip,text", BLOCKS, ids=[f"{d}#{i}" for d, i, _, _ in BLOCKS])
def test_the_python_examples_of_the_docs_run(doc, index, skip, text):
    if skip:
        pytest.skip(f"{doc} block {index}: {skip}")
    name = _missing_framework(text)
    if name:
        pytest.skip(f"{doc} block {index} needs {name}, which is not installed")
    if re.search(r"device=[\"']cuda", text) and not HAVE_CUDA:
        pytest.skip(f"{doc} block {index} needs a CUDA device")
    r = run_python(text, timeout=120)
    assert r.returncode == 0, f"{doc} block {index} failed:\n{r.stderr}"


def _public_callables():
    for name in dlstream.__all__:
        obj = getattr(dlstream, name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if callable(member) and (not attr.startswith("_") or attr in ("__dlpack__", "__cuda_stream__")):
                    yield f"{name}.{attr}", getattr(obj, attr)
        elif callable(obj):
            yield name, obj


CALLABLES = sorted(_public_callables())


@pytest.mark.parametrize("name,obj", CALLABLES, ids=[n for n, _ in CALLABLES])
def test_every_public_callable_has_a_signature_and_a_description(name, obj):
    inspect.signature(obj)          # the C functions carry text signatures
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 30, f"{name}: help() says only {doc!r}"


ASYNC = ["axpy", "fill", "copy", "spin", "empty", "from_dlpack", "Function.launch", "Graph.replay", "capture.replay",
         "Event.record", "Stream.record", "Group.end", "stream_parallel"]


@pytest.mark.parametrize("name", ASYNC)
def test_asynchronous_calls_say_so_and_how_to_wait(name):
    obj = dlstream
    for part in name.split("."):
        obj = getattr(obj, part)
    doc = inspect.getdoc(obj) or ""
    assert re.search(r"[Aa]synchronous|host does not wait|host never waits", doc), f"{name}: {doc!r}"
    if name not in ("Event.record", "Stream.record"):
        assert "synchronize" in doc, f"{name} does not say how to wait: {doc!r}"


def test_help_of_axpy_is_a_real_description():
    doc = inspect.getdoc(dlstream.axpy)
    assert doc.count("\n") >= 2 and "dlstream.synchronize()" in doc
    assert str(inspect.signature(dlstream.axpy)) == "(a, x, y, *, stream=None)"
    assert str(inspect.signature(dlstream.empty)) == "(shape, dtype='float32', *, device=None, stream=None)"


def test_the_namespace_holds_the_public_names_only():
    submodules = {"_dlstream", "_capture", "_carry", "_parallel", "_providers", "_torchspec"}
    on_demand = {"jax", "torch"}  # dlstream.jax, dlstream.torch: imported by whoever uses them
    public = {n for n in vars(dlstream) if not n.startswith("_")} - on_demand
    assert public == set(dlstream.__all__) - {"__version__"}, public ^ set(dlstream.__all__)
    assert not hasattr(dlstream, "annotations")
    private = {n for n in vars(dlstream) if n.startswith("_") and not n.startswith("__")}
    assert private <= submodules | {"_stream_var"}, private

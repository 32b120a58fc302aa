# SPDX-License-Identifier: Apache-2.0
"""What a reader of the docs and of help() sees: the Python examples of every page (README.md, docs/*.md,
examples/c/README.md) run, each page's first example runs on the CPU backend or says in its first line that it needs
a GPU, the docs point at nothing outside the repository, every public callable has a signature and a real
description, asynchronous calls say how to wait, and the package's namespace holds its public names only. (The C
examples are built and run by CTest: tests/docs.)"""
import functools
import importlib.util
import inspect
import pathlib
import re

import pytest

import dlstream
from conftest import CUPY_CUDA, HAVE_CUDA, TORCH_CUDA, run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("doc_blocks", ROOT / "tests" / "docs" / "doc_blocks.py")
doc_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_blocks)

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
         "examples/c/README.md"]
BLOCKS = [(doc, b) for doc in PAGES for b in doc_blocks.blocks(str(ROOT / doc), "python")]


def _importable(name):
    return importlib.util.find_spec(name) is not None


@functools.cache
def _jax_cuda():
    r = run_python("import jax; print(any(d.platform == 'gpu' for d in jax.devices()))")
    return r.returncode == 0 and r.stdout.strip() == "True"


@functools.cache
def _nvrtc():
    try:
        dlstream.compiler_version()
        return True
    except dlstream.Error:
        return False


# doc_blocks.NEEDS, checked on this machine.
HAVE = {
    "cuda": lambda: HAVE_CUDA,
    "rocm": lambda: dlstream.device_count("rocm") > 0,
    "nvrtc": _nvrtc,
    "torch": lambda: _importable("torch"),
    "torch-cuda": lambda: TORCH_CUDA,
    "cupy": lambda: CUPY_CUDA,
    "jax": lambda: _importable("jax"),
    "jax-cuda": lambda: _importable("jax") and _jax_cuda(),
}
# What marks a block as needing something (an import of a framework, a CUDA or ROCm device named).
IMPLIED = [(re.compile(r"^\s*(?:import|from)\s+torch\b", re.M), ("torch", "torch-cuda")),
           (re.compile(r"^\s*(?:import|from)\s+cupy\b", re.M), ("cupy",)),
           (re.compile(r"^\s*(?:import|from)\s+jax\b", re.M), ("jax", "jax-cuda")),
           (re.compile(r"[\"'](?:cuda|rocm|hip)(?::\d+)?[\"']|device=[\"'](?:cuda|rocm)"),
            ("cuda", "rocm", "torch-cuda", "cupy", "jax-cuda")),
           (re.compile(r"\bfrom_source\(|\bdlstream\.compile\("), ("nvrtc",))]


def test_every_block_need_is_one_the_suite_checks():
    assert set(HAVE) == set(doc_blocks.NEEDS)


@pytest.mark.parametrize("doc,block", BLOCKS, ids=[f"{d}#{b.index}" for d, b in BLOCKS])
def test_the_python_examples_of_the_docs_run(doc, block):
    where = f"{doc} block {block.index} (line {block.line})"
    if block.skip:
        pytest.skip(f"{where}: {block.skip}")
    code = re.sub(r"#.*$", "", block.text, flags=re.M)  # what the comments say is no need
    for pattern, needs in IMPLIED:
        m = pattern.search(code)
        assert not m or set(needs) & set(block.needs), (
            f"{where} uses {m.group(0).strip()!r} but is not marked: put <!-- doc-test: needs "
            f"{needs[0]} --> (or another of {', '.join(needs)}) on the line before it")
    missing = [n for n in block.needs if not HAVE[n]()]
    if missing:
        pytest.skip(f"{where} needs {', '.join(doc_blocks.NEEDS[n] for n in missing)}, which this machine lacks")
    r = run_python(block.text, timeout=120)
    assert r.returncode == 0, f"{where} failed:\n{r.stderr}"


FIRST_LINE_SAYS_GPU = re.compile(r"^\s*(?:#|/\*).*\bneeds? (?:a |an )?(?:CUDA |ROCm |NVIDIA |AMD )?(?:GPU|device)", re.I)


@pytest.mark.parametrize("doc", PAGES)
def test_every_pages_first_example_runs_on_the_cpu_or_says_it_needs_a_gpu(doc):
    first = next((b for b in doc_blocks.blocks(str(ROOT / doc)) if b.lang in ("python", "c")), None)
    if first is None:
        return  # a page without examples
    where = f"{doc}: the first example (line {first.line})"
    assert not first.skip, f"{where} is a fragment ({first.skip}): a page's first example must run"
    if first.lang == "c":  # CTest builds and runs every ```c block on the CPU backend (tests/docs): whole programs
        assert re.search(r"\bint\s+main\s*\(", first.text), f"{where} is a C fragment: make it a whole program"
        return
    gpu = sorted(set(first.needs) & doc_blocks.GPU_NEEDS)
    assert not gpu or FIRST_LINE_SAYS_GPU.match(first.text.splitlines()[0]), (
        f"{where} needs {', '.join(gpu)}: make it run on the CPU backend, or say in its first line that it needs a GPU")


# Documents the project was made from, which a reader of the repository does not have.
ELSEWHERE = re.compile(r"shared/(?:seeds|DESIGN|ANCHORS|device)|\bDESIGN\.md\b|\bANCHORS\.md\b|\bKINDS\b|"
                       r"\bthe seeds\b")
READ = [*PAGES, *(str(p.relative_to(ROOT)) for d in ("examples", "include", "interop/python/dlstream", "bench")
                  for p in sorted((ROOT / d).rglob("*")) if p.suffix in (".py", ".c", ".h", ".md", ".pyi"))]


def test_the_docs_point_at_nothing_outside_the_repository():
    found = []
    for name in READ:
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            if ELSEWHERE.search(line) and "TENSOR_KINDS" not in line:
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "name a public source, or say it in the page:\n" + "\n".join(found)


PATH = re.compile(r"`((?:docs|examples|scripts|tests|plugin|interop|include|bench|cmake|\.ci)/[^`\s*?<>{}$]+)`")


@pytest.mark.parametrize("doc", PAGES)
def test_the_paths_a_page_names_exist(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = sorted({m.group(1) for m in PATH.finditer(text)
                      if not (ROOT / m.group(1).split("(")[0].rstrip(".,:;)/")).exists()})
    assert not missing, f"{doc} names {missing}, which the repository lacks"


def _section(doc, heading):
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end > 0 else len(text)]


@pytest.mark.parametrize("doc,heading", [("README.md", "## A taste (Python, no GPU needed)"),
                                         ("docs/python.md", "## Waiting")])
def test_the_asynchrony_rule_says_how_to_debug_it_and_not_to_write_inputs_early(doc, heading):
    text = " ".join(_section(doc, heading).split())
    assert "DLSTREAM_CPU_SYNC=1" in text, f"{doc} {heading}: name the debugging switch beside the rule"
    assert re.search(r"not (?:be )?writ(?:e|ten)[^.]*before the work that reads", text), (
        f"{doc} {heading}: say that inputs must not be written before the work that reads them is done")


def test_with_dlstream_cpu_sync_the_readme_snippet_needs_no_synchronize():
    snippet = next(b for b in doc_blocks.blocks(str(ROOT / "README.md"), "python") if not b.needs and not b.skip)
    without_wait = "\n".join(line for line in snippet.text.splitlines() if "synchronize()" not in line)
    r = run_python(without_wait, env={"DLSTREAM_CPU_SYNC": "1"})
    assert r.returncode == 0, r.stderr


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
    assert str(inspect.signature(dlstream.empty)) == "(shape, dtype='float32', *, device=None, stream=None, ipc=False)"


def test_the_namespace_holds_the_public_names_only():
    submodules = {"_dlstream", "_capture", "_carry", "_parallel", "_providers", "_torchspec"}
    on_demand = {"jax", "torch"}  # dlstream.jax, dlstream.torch: imported by whoever uses them
    public = {n for n in vars(dlstream) if not n.startswith("_")} - on_demand
    assert public == set(dlstream.__all__) - {"__version__"}, public ^ set(dlstream.__all__)
    assert not hasattr(dlstream, "annotations")
    private = {n for n in vars(dlstream) if n.startswith("_") and not n.startswith("__")}
    assert private <= submodules | {"_stream_var"}, private

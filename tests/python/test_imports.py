"""convcore's Python modules import one another one way: the graph of their imports (read from the
sources with ast, function-level imports included: a lazy import hides a cycle, it does not remove
it) has no cycle, and every module imports on its own in a fresh interpreter."""

import ast
import concurrent.futures
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(REPO, "python", "convcore")


def _modules(package_dir):
    """{module name: path} of the package's Python files ("convcore" for __init__.py)."""
    found = {}
    for name in sorted(os.listdir(package_dir)):
        if name.endswith(".py"):
            stem = name[:-3]
            found["convcore" if stem == "__init__" else f"convcore.{stem}"] = os.path.join(package_dir, name)
    return found


def _other_submodules(package_dir):
    """The package's submodules that are not Python files (the compiled bindings, whose stub
    _convcore.pyi stands for them in a source checkout): imported, they import nothing of the
    package."""
    return {"convcore." + name.split(".")[0] for name in os.listdir(package_dir)
            if name.endswith((".pyi", ".so", ".pyd")) and not name.startswith("__init__.")}


def _type_checking_only(node):
    """Whether ``node`` is an ``if TYPE_CHECKING:`` block (its imports never run)."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree, module, modules, others):
    """The package's modules that ``module``'s source imports, anywhere in it (in functions too),
    outside ``if TYPE_CHECKING:`` blocks."""
    package = module if module == "convcore" else module.rpartition(".")[0]
    found = set()

    def target(name):  # a module of the package, or the package itself
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node):
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "convcore" or alias.name.startswith("convcore."):
                    found.add(target(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if base == "convcore" or base.startswith("convcore."):
                for alias in node.names:  # `from convcore import x`: the module x, or the package
                    full = f"{base}.{alias.name}"
                    if full not in others:
                        found.add(full if full in modules else target(base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(None)
    found.discard(module)
    return found


def import_graph(package_dir):
    """{module: the package's modules it imports}."""
    modules, others = _modules(package_dir), _other_submodules(package_dir)
    graph = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            graph[module] = _imported(ast.parse(f.read(), path), module, modules, others)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted: every
    import cycle lies in one."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def _source_checkout():
    if not os.path.isdir(PACKAGE):
        pytest.skip("not in a source checkout")


@pytest.mark.pure_python
def test_no_import_cycles():
    _source_checkout()
    graph = import_graph(PACKAGE)
    assert {"convcore", "convcore._api", "convcore.torch"} <= set(graph)
    assert "convcore._api" in graph["convcore"]  # (the graph sees the package's imports)
    found = cycles(graph)
    assert not found, "import cycles among convcore's modules:\n" + "\n".join(
        " <-> ".join(c) + ": " + "; ".join(f"{m} imports {', '.join(sorted(graph[m] & set(c)))}" for m in c)
        for c in found)


@pytest.mark.pure_python
def test_the_cycle_check_finds_cycles(tmp_path):
    """The check itself: a lazy import (in a function) that closes a cycle is found, as is one
    through the package's __init__; TYPE_CHECKING imports do not count."""
    package = tmp_path / "convcore"
    package.mkdir()
    (package / "__init__.py").write_text("from ._a import f\nfrom . import _ext\n")
    (package / "_ext.pyi").write_text("")
    (package / "_a.py").write_text("from . import _b\n\ndef f():\n    return _b\n")
    (package / "_b.py").write_text("def g():\n    from ._a import f\n    return f\n")
    (package / "_c.py").write_text("import convcore\n")
    (package / "_d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from convcore import _e\n")
    (package / "_e.py").write_text("from convcore import _d\n")
    graph = import_graph(str(package))
    assert graph["convcore._a"] == {"convcore._b"} and graph["convcore._b"] == {"convcore._a"}
    assert graph["convcore"] == {"convcore._a"}  # (_ext: compiled, imports nothing)
    assert graph["convcore._c"] == {"convcore"} and graph["convcore._d"] == set()
    assert cycles(graph) == [["convcore._a", "convcore._b"]]
    (package / "__init__.py").write_text("from ._a import f\nfrom . import _c\n")
    assert cycles(import_graph(str(package))) == [["convcore", "convcore._c"], ["convcore._a", "convcore._b"]]


def _import_alone(module):
    """(module, None) when ``import module`` succeeds in a new interpreter; (module, the name of
    an optional dependency it lacks) or (module, the error) otherwise."""
    out = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                         timeout=300)
    if out.returncode == 0:
        return module, None
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", out.stderr)
    if missing and not missing.group(1).startswith("convcore"):
        return module, ("missing", missing.group(1))
    return module, out.stderr[-3000:]


def test_every_module_imports_alone():
    """Each of the installed package's modules imports first, in an interpreter of its own (one
    that needs an optional dependency which is not installed aside)."""
    import convcore
    modules = sorted(_modules(os.path.dirname(convcore.__file__)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = dict(pool.map(_import_alone, modules))
    failed = {m: r for m, r in results.items() if r is not None and not isinstance(r, tuple)}
    assert not failed, "\n\n".join(f"import {m}:\n{r}" for m, r in failed.items())
    assert results["convcore"] is None and results["convcore._api"] is None

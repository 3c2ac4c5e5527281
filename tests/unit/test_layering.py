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

"""``linkedqa reproduce`` end to end: one runnable condition of each paper, run with the embedded model at
``--limit 1``, lands in the catalog's ``reproduction_matrix`` beside the paper's figure.

The runs go to the method matrix's vLLM server (the embedded model under a name of the test's) and KB
(``tests/e2e/matrix_home.py``, fixture ``matrix_env``), through the real command line. Each paper's condition is a
cheap one of its runnable ones that asks the LLM; ELA's is Table 2's ELA-for-QA row, whose ELA run's id feeds the ER
run (a condition with a ``before`` step).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from storage import layout
from tasks.reproduce.conditions import load_papers, needs_llm
from tests.cli_env import user_shell_env
from tests.e2e.matrix_home import KB_NAME, SERVED_NAME

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("cli_session_api")]

#: One condition per paper (paper id -> condition id).
SMOKE = {"ela": "t2-triviaqa-ela", "er": "t2-factoidqa-er50w", "ea-agent": "t1-fr-en-ea-agent",
         "anchorrag": "t1-webqsp-io-qwenplus", "qald-react": "t3-qald10-train-kg-props-gpt35"}


def test_one_condition_per_paper_lands_in_the_reproduction_matrix(matrix_env: tuple[Path, str]) -> None:
    home, base_url = matrix_env
    papers = load_papers()
    assert set(SMOKE) == set(papers)
    for pid, cid in SMOKE.items():
        cmd = [sys.executable, "-m", "flows.cli", "reproduce", pid, "--condition", cid, "--limit", "1", "--kb",
               KB_NAME, "--backend", "openai", "--base-url", base_url, "--model", SERVED_NAME, "--timeout", "300",
               "--retries", "1"]
        out = subprocess.run(cmd, cwd=layout.REPO_ROOT, env=user_shell_env(home), capture_output=True, text=True,
                             timeout=900)
        assert out.returncode == 0, f"{' '.join(cmd[3:])}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        assert f"{pid}: the paper's figures beside the measured ones" in out.stdout
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    rows = con.execute("SELECT paper, condition, metric, paper_printed, paper_value, measured, difference, n, model, "
                       "question_limit, run_id FROM reproduction_matrix").fetchall()
    con.close()
    by = {(r[0], r[1], r[2]): r for r in rows}
    for pid, cid in SMOKE.items():
        c = papers[pid].condition(cid)
        assert c.metrics(), cid
        for f in c.metrics():
            _, _, _, printed, paper_value, measured, diff, n, model, limit, run_id = by[(pid, cid, f.linkedqa)]
            assert printed == f.printed and paper_value == pytest.approx(f.value)
            assert model == SERVED_NAME and needs_llm(c) and limit == 1
            assert (home / "runs" / run_id / "manifest.json").is_file()
            stored = duckdb.sql(f"SELECT value, n FROM read_parquet('{home / 'runs' / run_id / 'metrics'}/*.parquet')"
                                f" WHERE metric = '{f.linkedqa}'").fetchall()
            assert [(measured, n)] == stored, (cid, f.linkedqa)
            if measured is not None:
                assert diff == pytest.approx(measured - f.value)
    # ELA-for-QA: the ER run read the entities of the ELA run made just before it
    (er_run,) = {r[10] for r in rows if r[1] == SMOKE["ela"]}
    plan = (home / "runs" / er_run / "plan.json").read_text()
    assert '"entities": "run:ela-triviaqa-test-' in plan
    report = subprocess.run([sys.executable, "-m", "flows.cli", "report", "--reproductions"], cwd=layout.REPO_ROOT,
                            env=user_shell_env(home), capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert all(cid in report.stdout for cid in SMOKE.values())

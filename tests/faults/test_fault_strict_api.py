"""A real `linkedqa run ela --backend openai` against a loopback server as strict as the public API.

The server (``tests/openai_servers.py``) answers 400 to any request field the public API does not document (vLLM's
``repetition_penalty``, ``structured_outputs``, and ``max_tokens``), 429 with ``Retry-After: 1`` to the first
attempt of every conversation, and plays ELA's two turns (a ``Search()`` call, then ``<answer>[0][0]</answer>``).
``--api`` is left to its default (``auto``): the server's model list says it is not vLLM.

Guarantee: the run completes with every item answered and no item error; no request drew a 400 (ELA's default
``repetition_penalty=1.05`` is not sent, and the run says so and records it in its plan and run id); every
conversation was retried once after its 429; ``--set guided=true`` and a model the server does not serve are
refused before the first completion request, each with one clear line and exit code 2.
"""

from __future__ import annotations

import json
import re

import pytest
from faultkit import kb_args

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tests.openai_servers import StrictServer
from tests.procs import serving


def _ela_turns(body: dict) -> str:
    if "</search>" in (body.get("stop") or []):
        return "<search> Search(United States) "  # the server stops before the stop sequence, as the API does
    return "<think>The first candidate is the entity meant.</think> <answer>[0][0]"


@pytest.mark.timeout(600)
def test_ela_runs_against_a_strict_public_api(cli, data_root, tmp_path):
    home = tmp_path / "warehouse"
    rc, out = cli(home, "none", kb_args(data_root))
    assert rc == 0, out[-3000:]
    server = StrictServer(_ela_turns, models=("gpt-test", "gpt-test-mini"))
    base = ["run", "ela", "--dataset", "webqsp-el", "--split", "test", "--limit", "3", "--backend", "openai",
            "--base-url", server.url, "--retries", "2"]
    with serving(server):
        rc, out = cli(home, "none", [*base, "--model", "gpt-test"])
        assert rc == 0, out[-3000:]
        ran = list(server.log)
        # refused before the first completion request: a guided run, and a model the server does not serve
        rc_guided, out_guided = cli(home, "none", [*base, "--model", "gpt-test", "--set", "guided=true"])
        rc_model, out_model = cli(home, "none", [*base, "--model", "qwen2.5-coder-0.5b-instruct"])
        assert server.log == ran
    assert "note: openai API: repetition_penalty not sent (1.05: a vLLM extension" in out
    (rdir,) = [d for d in layout.runs_root(home).iterdir() if d.is_dir()]
    manifest = read_manifest(rdir)
    assert manifest["row_counts"]["predictions"] == 3 and manifest["n_errors"] == 0, manifest
    preds = read_table(rdir / "predictions", "predictions").to_pylist()
    assert all(p["predicted_entities"] for p in preds), preds
    # no 400: every request carried only documented fields, the limit as max_completion_tokens
    assert {e["status"] for e in ran} == {429, 200}
    assert all("max_completion_tokens" in e["body"] and "repetition_penalty" not in e["body"] for e in ran)
    # each conversation: one 429, then the retry after Retry-After answered
    convos = {}
    for e in ran:
        convos.setdefault(json.dumps(e["body"]["messages"]), []).append(e["status"])
    assert len(convos) == 6 and all(s == [429, 200] for s in convos.values()), convos
    plan = json.loads((rdir / "plan.json").read_text())
    assert plan["config"]["api"] == "openai" and plan["api_applied"]["api"] == "openai"
    assert set(plan["api_applied"]["not_sent"]) == {"repetition_penalty"}
    for rc_, out_, needle in ((rc_guided, out_guided, "--set guided=true constrains answers with vLLM's structured"),
                              (rc_model, out_model, "does not serve model 'qwen2.5-coder-0.5b-instruct'; it serves: "
                                                    "gpt-test, gpt-test-mini")):
        assert rc_ == 2, out_[-3000:]
        errors = [ln for ln in out_.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and needle in errors[0], out_[-2000:]
    assert len([d for d in layout.runs_root(home).iterdir() if d.is_dir()]) == 1
    assert re.search(r"^ela-webqsp-el-test-[0-9a-f]{8}$", rdir.name)

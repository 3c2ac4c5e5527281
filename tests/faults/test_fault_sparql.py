"""A real Oxigraph SPARQL server stopped mid-run, and frozen (accepting connections, never answering).

Guarantee: the batched KG tools turn the endpoint failure into per-item errors after the configured retries
(every item returned, the run goes on), within a bounded time; a frozen server gives ``KGTimeout`` rather than
a hang, and the same client works again once the server answers.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tasks.kg.base import KGError, KGTimeout
from tasks.kg.oxigraph_server import OxigraphServer
from tasks.kg.sparql import SparqlKG
from tasks.methods.kg_tools import kg_tools
from tasks.methods.records import AgentResult
from tasks.methods.runtime import AgentError, ToolCall, run_agents

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
NT = "\n".join([
    f'<{WD}Q90> <{LABEL}> "Paris"@en .',
    f'<{WD}Q142> <{LABEL}> "France"@en .',
    f'<{WD}P17> <{LABEL}> "country"@en .',
    f"<{WD}Q90> <{WDT}P17> <{WD}Q142> .",
]) + "\n"


def _agent(item, ctx):
    """Two KG lookups per item; a tool error is an item error (as in the KGQA agents)."""
    for _ in range(2):
        res = yield ToolCall("kg_facts", {"qids": [item["qid"]]})
        if "error" in res:
            raise AgentError(f"KG error in kg_facts: {res['error']}")
    return AgentResult(answer=res["labels"][item["qid"]] or "")


@pytest.fixture()
def server(tmp_path):
    nt = tmp_path / "few.nt"
    nt.write_text(NT)
    srv = OxigraphServer(store_dir=tmp_path / "store")
    try:
        srv.load_ntriples(nt)  # bulk load while stopped
        srv.start()
        yield srv
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            os.kill(srv.proc.pid, signal.SIGCONT)  # a frozen server must be able to take its SIGTERM
        srv.stop()


@pytest.mark.timeout(60)
def test_server_stopped_mid_run_gives_item_errors_quickly(server):
    """Step 1 answers; the server is stopped before step 2; every item errors with the endpoint named."""
    kg = SparqlKG(server.query_url, timeout_s=2, retries=1, backoff_s=0.05)
    assert kg.outgoing(["Q90"])["Q90"][0].object_qid == "Q142"  # the server really answers

    def on_progress(p):
        if p.step == 1 and p.active_items:  # step 1 is over: stop the server before step 2
            server.stop()

    items = [{"question_id": f"q{i}", "qid": q} for i, q in enumerate(["Q90", "Q142", "Q90"])]
    t0 = time.perf_counter()
    out, _ = run_agents(_agent, items, None, kg_tools(kg), on_progress=on_progress)
    elapsed = time.perf_counter() - t0
    assert [o["question_id"] for o in out] == ["q0", "q1", "q2"]
    for o in out:
        assert o["error"].startswith("AgentError: KG error in kg_facts: KGError: ")
        assert server.query_url in o["error"] and "failed after 2 attempt(s)" in o["error"]
    assert elapsed < 15
    with pytest.raises(KGError, match="failed after 2 attempt"):
        kg.labels(["Q90"])


@pytest.mark.timeout(60)
def test_frozen_server_times_out_then_recovers(server):
    """SIGSTOP: the kernel still accepts connections but nothing answers -> KGTimeout, bounded; SIGCONT heals."""
    kg = SparqlKG(server.query_url, timeout_s=0.5, retries=1, backoff_s=0.05)
    assert kg.labels(["Q90"]) == {"Q90": "Paris"}
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.perf_counter()
        with pytest.raises(KGTimeout, match=r"no answer within 0.5s \(2 attempt\(s\)\)"):
            kg.labels(["Q142"])
        assert time.perf_counter() - t0 < 5
        out, _ = run_agents(_agent, [{"question_id": "a", "qid": "Q90"}], None, kg_tools(kg))
        assert "KGTimeout" in out[0]["error"]
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert kg.labels(["Q142"]) == {"Q142": "France"}

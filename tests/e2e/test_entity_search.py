"""Entity search on the real sample KB: the agents' ``entity_search`` tool over the labels+aliases index.

Query terms add up across the label and the aliases: "jackie kennedy" finds Jacqueline Kennedy Onassis
(Q165421: "Kennedy" in her label, "Jackie" only in aliases such as "Jackie Kennedy Onassis"), a WebQSP-EL test
gold mention; and candidate recall on the gold mentions whose entity the KB can name stays at its measured level.
"""

from __future__ import annotations

from storage import layout


def test_jackie_kennedy_finds_jacqueline_kennedy_onassis(kb_home: str):
    from tasks.search.kb_indexes import search_tool

    tool = search_tool(kb_home, layout.home(), "wikidata")
    [[hits]] = tool([{"queries": ["jackie kennedy"], "k": 50}])
    qids = [h["qid"] for h in hits]
    assert "Q165421" in qids[:3], [(h["qid"], h["title"]) for h in hits[:5]]
    jackie_only = [h for h in hits if h["title"].casefold().startswith("jackie ") and "kennedy" not in
                   h["title"].casefold()]
    onassis = hits[qids.index("Q165421")]
    assert all(onassis["score"] > h["score"] for h in jackie_only)


def test_recall_on_covered_webqsp_el_gold_mentions(kb_home: str):
    from tasks.methods.base import MethodContext
    from tasks.methods.runtime import run_agents
    from tasks.methods.search_recall.method import SearchRecallMethod
    from tasks.metrics.runs import summary_metrics
    from tasks.runs.planning import load_questions

    questions, _, _ = load_questions("webqsp-el", "test")
    method = SearchRecallMethod(SearchRecallMethod.Settings())
    ctx = MethodContext(kb_version=kb_home, root=layout.home())
    tools = method.build_tools(ctx)
    outs, _ = run_agents(method.agent(ctx), questions, None, tools)
    m = {r["metric"]: r for r in summary_metrics("search", outs, questions)}
    assert m["recall@50_covered"]["n"] > 1300
    # measured 0.8313 / 0.9398 / 0.9593, the same from two builds of the sample KB whose rows came out of the
    # merge in different orders (ties broken by QID; broken by row: 0.823 / 0.939 / 0.958 from one of them;
    # with the whole-query disjunction-max: 0.814 / 0.937 / 0.957)
    assert m["recall@1_covered"]["value"] >= 0.831
    assert m["recall@10_covered"]["value"] >= 0.939
    assert m["recall@50_covered"]["value"] >= 0.959

"""Secrets: a real `linkedqa run closed-book --backend openai` against a local OpenAI-compatible endpoint, with
``OPENAI_API_KEY`` planted in the subprocess environment, or (second test) unset and the key in a Prefect
``Secret`` block named by ``--api-key-block``; the endpoint answers one question with garbage.

Guarantee: the key is really sent (the endpoint saw it), the garbage answer is a per-item error (the run
completes and counts it), and the key is in no file under LINKEDQA_HOME (manifests, plans, predictions, the
LLM response cache, the catalog).
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest
from faultkit import PLANTED_KEY, files_containing

from storage import layout
from storage.manifest import read_manifest
from tests.openai_servers import ModelList


class _Endpoint(ModelList):  # GET /v1/models: the list `linkedqa run` checks the model against
    seen_auth: list[str] = []
    calls = 0
    lock = threading.Lock()  # the client sends its requests at once: one handler thread each

    def do_POST(self):  # noqa: N802 - stdlib handler name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with type(self).lock:
            type(self).seen_auth.append(self.headers.get("Authorization", ""))
            type(self).calls += 1
            first = type(self).calls == 1
        if first:
            out = b"<html>502 upstream garbage"  # a malformed 200 answer: no retry, an item error
        else:
            out = json.dumps({"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 10, "completion_tokens": 1},
                              "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def _run_against_endpoint(cli, home, extra_args=(), env=None) -> tuple[int, str]:
    from tasks.datasets.entity_qa import POPQA

    _Endpoint.seen_auth, _Endpoint.calls = [], 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)  # bound now: no port race
    server.daemon_threads = True
    server.models, server.owned_by = ("test-model",), "vllm"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return cli(home, "none", ["run", "closed-book", "--dataset", POPQA, "--limit", "4", "--backend", "openai",
                                  "--model", "test-model", "--base-url",
                                  f"http://127.0.0.1:{server.server_address[1]}/v1", *extra_args], env=env)
    finally:
        server.shutdown()
        server.server_close()


def _check_run(home, rc: int, out: str, key: str) -> None:
    assert rc == 0, out[-3000:]
    assert _Endpoint.seen_auth and all(a == f"Bearer {key}" for a in _Endpoint.seen_auth)
    (rdir,) = [d for d in layout.runs_root(home).iterdir() if d.is_dir()]
    manifest = read_manifest(rdir)
    assert manifest["row_counts"]["predictions"] == 4 and manifest["n_errors"] == 1
    assert key not in out
    assert files_containing(home, key) == []
    assert files_containing(home, key[-10:]) == []  # not even a partial echo


@pytest.mark.timeout(240)
def test_planted_api_key_is_used_but_never_stored(cli, tmp_path):
    home = tmp_path / "warehouse"
    rc, out = _run_against_endpoint(cli, home)
    _check_run(home, rc, out, PLANTED_KEY)


@pytest.mark.timeout(240)
def test_api_key_from_a_prefect_secret_block_is_used_but_never_stored(cli, tmp_path):
    """OPENAI_API_KEY unset; `--api-key-block` names a Secret block on the session's Prefect server."""
    from prefect.blocks.system import Secret

    block_key = "sk-test-BLOCK-4567890"
    Secret(value=block_key).save("lqa-test-openai-key", overwrite=True)
    home = tmp_path / "warehouse"
    rc, out = _run_against_endpoint(cli, home, ["--api-key-block", "lqa-test-openai-key"],
                                    env={"OPENAI_API_KEY": ""})
    _check_run(home, rc, out, block_key)
    (rdir,) = [d for d in layout.runs_root(home).iterdir() if d.is_dir()]
    plan = json.loads((rdir / "plan.json").read_text())
    assert plan["config"]["api_key_block"] == "lqa-test-openai-key"  # the plan records the name, not the key

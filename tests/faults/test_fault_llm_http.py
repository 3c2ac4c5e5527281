"""A hanging OpenAI-compatible endpoint under a real `linkedqa run closed-book --backend openai` subprocess.

The endpoint accepts every connection; for one question it never answers, for another it trickles a byte every
0.3 s (no single read ever times out), the rest get a proper answer. With ``--timeout 1 --retries 1``:

Guarantee: the run completes (exit 0) in bounded time, the two stuck items are per-item ``timeout`` errors after
exactly 2 attempts each, the other items are answered, and the manifest counts 2 errors. The knobs are not part
of the run id (a re-run with other values resumes the same run).
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tests.openai_servers import ModelList


class _Endpoint(ModelList):  # GET /v1/models: the list `linkedqa run` checks the model against
    stuck: dict[str, str] = {}  # question text -> "hang" | "trickle"
    attempts: dict[str, int] = {}
    release = threading.Event()

    def do_POST(self):  # noqa: N802 - stdlib handler name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        mode = next((m for q, m in self.stuck.items() if q in prompt), None)
        key = mode or prompt
        type(self).attempts[key] = type(self).attempts.get(key, 0) + 1
        try:
            if mode == "hang":
                self.release.wait(60)  # never answers within the client's deadline
                return
            if mode == "trickle":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                while not self.release.wait(0.3):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                return
            out = json.dumps({"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 10, "completion_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: expected
            pass

    def log_message(self, *args):
        pass


@pytest.mark.timeout(240)
def test_hanging_and_trickling_endpoint_become_item_timeouts(cli, data_root, tmp_path):
    from tasks.datasets.entity_qa import POPQA
    from tasks.runs.planning import load_questions

    home = tmp_path / "warehouse"
    questions = load_questions(POPQA, None, tmp_path / "plain", data_root)[0][:4]  # plan order = id order
    _Endpoint.stuck = {questions[1]["question"]: "hang", questions[2]["question"]: "trickle"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)  # bound now: no port race
    server.daemon_threads = True
    server.models, server.owned_by = ("m",), "vllm"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    args = ["run", "closed-book", "--dataset", POPQA, "--limit", "4", "--backend", "openai", "--model", "m",
            "--base-url", f"http://127.0.0.1:{server.server_address[1]}", "--timeout", "1", "--retries", "1",
            "--no-cache"]
    try:
        t0 = time.perf_counter()
        rc, out = cli(home, "none", args)
        elapsed = time.perf_counter() - t0
        rc2, out2 = cli(home, "none", args[:-5] + ["--timeout", "5", "--retries", "0", "--no-cache"])
    finally:
        _Endpoint.release.set()
        server.shutdown()
        server.server_close()
    assert rc == 0, out[-3000:]
    (rdir,) = [d for d in layout.runs_root(home).iterdir() if d.is_dir()]
    manifest = read_manifest(rdir)
    assert manifest["row_counts"]["predictions"] == 4 and manifest["n_errors"] == 2
    preds = {p["question_id"]: p for p in read_table(rdir / "predictions", "predictions").to_pylist()}
    by_q = [preds[q["question_id"]] for q in questions]
    assert [p["answer"] for p in (by_q[0], by_q[3])] == ["Paris", "Paris"]
    for p in by_q[1:3]:
        assert p["error"] and "timeout after 1 s" in p["error"], p["error"]
    assert _Endpoint.attempts["hang"] == 2 and _Endpoint.attempts["trickle"] == 2  # 1 try + 1 retry each
    # 2 attempts x 1 s per stuck item (concurrently) + process start; without the deadline: 2 x 120 s x 5
    assert elapsed < 90, elapsed
    # other --timeout/--retries: the same run id, already done -> nothing re-sent
    assert rc2 == 0, out2[-3000:]
    assert rdir.name in out2.split() and len([d for d in layout.runs_root(home).iterdir() if d.is_dir()]) == 1
    assert _Endpoint.attempts["hang"] == 2

"""Progress reporting (tasks.progress): plain/tty/off modes, thread safety, the vLLM hook, runtime and staging."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from storage import layout
from tasks import progress as P
from tasks.dumps.base import Shard, byte_shards, iter_lines
from tasks.llm.types import ChatRequest, Completion
from tasks.methods.records import AgentResult
from tasks.methods.runtime import LLMCall, RunProgress, run_agents


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def no_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """No background heartbeat thread: line counts depend on updates and the (fake) clock only."""
    monkeypatch.setattr(P, "HEARTBEAT_S", 0)


def _lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


# ------------------------------------------------------------------------------------------------ plain mode
def test_plain_with_total_prints_about_one_line_per_decile(no_heartbeat):
    buf = io.StringIO()
    with P.progress("work", total=1000, unit="item", stream=buf, mode="plain") as p:
        for _ in range(1000):
            p.update(1, {"tok/s": 12.5}, step=3)
    lines = _lines(buf)
    assert len(lines) <= 11, lines
    assert lines[0] == "[work] started (total 1,000)"
    assert any(line.startswith("[work] 500/1,000 item 50%") for line in lines)
    assert lines[-1].startswith("[work] done: 1,000/1,000 item 100%")
    assert "tok/s=12.5 step=3" in lines[-1]


def test_plain_unknown_total_prints_time_based_lines(no_heartbeat, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(P, "_clock", clock)
    buf = io.StringIO()
    with P.progress("scan", total=None, unit="row", stream=buf, mode="plain", interval=30) as p:
        p.update(100)
        clock.t += 10
        p.update(100)
        assert len(_lines(buf)) == 1  # only the start line: no 10 % steps without a total, 30 s not reached
        clock.t += 21
        p.update(110)
        lines = _lines(buf)
        assert len(lines) == 2
        assert lines[1] == "[scan] 310 row 10.0 row/s elapsed 31.0s"
        clock.t += 5
        p.update(1)
        assert len(_lines(buf)) == 2
    assert _lines(buf)[-1] == "[scan] done: 311 row 8.64 row/s in 36.0s"


def test_plain_bytes_eta_and_env_interval(no_heartbeat, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(P, "_clock", clock)
    monkeypatch.setenv(P.ENV_INTERVAL, "5")
    buf = io.StringIO()
    with P.progress("read", total=10 << 20, unit="B", stream=buf, mode="plain") as p:
        clock.t += 6
        p.update(512 << 10)  # 5 %: no decile, but 6 s > 5 s
    lines = _lines(buf)
    assert lines[0] == "[read] started (total 10.0 MiB)"
    assert lines[1].startswith("[read] 512.0 KiB/10.0 MiB 5% 85.3 KiB/s ETA 1:54")
    assert lines[-1].startswith("[read] done: 512.0 KiB/10.0 MiB 5%")


def test_heartbeat_writes_lines_while_no_update_arrives(monkeypatch):
    monkeypatch.setattr(P, "HEARTBEAT_S", 0.02)
    # a heartbeat of its own: an earlier test's thread may still be in a 1-s sleep, and no second one would start
    monkeypatch.setattr(P, "_HEARTBEAT", P._Heartbeat())
    buf = io.StringIO()

    def beats() -> int:
        return sum(1 for line in _lines(buf) if line.startswith("[blocked] 0/10 item 0%"))

    with P.progress("blocked", total=10, stream=buf, mode="plain", interval=0.1):
        deadline = time.monotonic() + 10
        while beats() < 2 and time.monotonic() < deadline:  # ~0.2 s on a quiet machine
            time.sleep(0.05)
    assert beats() >= 2, _lines(buf)


def test_phase_and_failure_lines(no_heartbeat):
    buf = io.StringIO()
    with P.phase("convert", stream=buf, mode="plain"):
        pass
    with pytest.raises(RuntimeError), P.progress("boom", total=4, stream=buf, mode="plain") as p:
        p.update(1)
        raise RuntimeError("x")
    lines = _lines(buf)
    assert lines[0] == "[convert] started"
    assert re.fullmatch(r"\[convert\] done in \d+\.\ds", lines[1])
    assert lines[-1].startswith("[boom] stopped: 1/4 item 25%")


def test_off_mode_and_env(monkeypatch, no_heartbeat):
    buf = io.StringIO()
    monkeypatch.setenv(P.ENV_MODE, "off")
    with P.progress("quiet", total=3, stream=buf) as p:
        p.update(3)
        p.note("hello")
    assert buf.getvalue() == ""
    monkeypatch.setenv(P.ENV_MODE, "plain")
    assert P.resolve_mode(io.StringIO()) == "plain"
    monkeypatch.delenv(P.ENV_MODE)
    assert P.resolve_mode(io.StringIO()) == "plain"  # not a terminal
    assert P.resolve_mode(io.StringIO(), "tty") == "tty"


# -------------------------------------------------------------------------------------------------- tty mode
def test_tty_mode_renders_into_a_stringio():
    buf = io.StringIO()
    with P.progress("stage dump.json.gz", total=4 << 20, unit="B", stream=buf, mode="tty") as p:
        for _ in range(4):
            p.update(1 << 20, rows=1000, entities=10)
            time.sleep(0.05)
        with P.progress("nested unknown", total=None, unit="row", stream=buf, mode="tty") as q:
            q.update(7)
            time.sleep(0.6)  # at least one automatic refresh of the live display
        p.note("a note above the bars")
    out = buf.getvalue()
    assert "\x1b[" in out  # terminal control codes: a live display was drawn
    assert "[nested unknown] done: 7 row" in out
    assert "a note above the bars" in out
    assert "[stage dump.json.gz] done: 4.0 MiB/4.0 MiB 100%" in out
    assert "rows=1,000 entities=10" in out
    # the display stops with the last reporter and starts again with the next one
    with P.progress("again", total=2, stream=buf, mode="tty") as p:
        p.update(2)
    assert "[again] done: 2/2 item 100%" in buf.getvalue()


# ------------------------------------------------------------------------------------------------ threads
@pytest.mark.parametrize("mode", ["plain", "tty"])
def test_thread_safety_smoke(mode, no_heartbeat):
    buf = io.StringIO()
    errors: list[BaseException] = []
    shared = P.progress("shared", total=8 * 500, stream=buf, mode=mode)

    def work(k: int) -> None:
        try:
            with P.progress(f"own {k}", total=500, stream=buf, mode=mode) as own:
                for j in range(500):
                    shared.update(1, worker=k)
                    own.update(1, {"tok/s": float(j)})
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared.close()
    assert not errors
    assert shared.n == 4000
    out = buf.getvalue()
    assert "[shared] done: 4,000/4,000 item 100%" in out
    assert all(f"[own {k}] done: 500/500 item" in out for k in range(8))
    if mode == "plain":
        assert all(len(line) < 200 for line in out.splitlines())  # whole lines, never interleaved


# -------------------------------------------------------------------------------------------- vLLM hook
def _drive_like_vllm(outputs_tokens: list[int], sleep: float = 0.0) -> None:
    """What vLLM 0.32's ``LLM._run_engine`` does with ``use_tqdm=<callable>`` (entrypoints/common/offline.py)."""
    convs = [[{"role": "user", "content": str(i)}] for i in range(len(outputs_tokens))]
    assert P.vllm_tqdm(convs, desc="Rendering conversations") is convs  # the rendering pass: unchanged
    pbar = P.vllm_tqdm(total=len(outputs_tokens), desc="Processed prompts", dynamic_ncols=True,
                       postfix=f"est. speed input: {0:.2f} toks/s, output: {0:.2f} toks/s")
    total_in = total_out = 0
    for k in outputs_tokens:
        time.sleep(sleep)
        total_in += 10
        in_spd = total_in / pbar.format_dict["elapsed"]
        total_out += k
        out_spd = total_out / pbar.format_dict["elapsed"]
        pbar.postfix = f"est. speed input: {in_spd:.2f} toks/s, output: {out_spd:.2f} toks/s"
        pbar.update(1)
        if pbar.n == len(outputs_tokens):
            pbar.refresh()
    pbar.close()


def test_vllm_tqdm_forwards_requests_and_tokens(capsys):
    seen: list[tuple[int, int, int]] = []
    with P.llm_batch_progress(lambda done, total, toks, el: seen.append((done, total, toks))):
        _drive_like_vllm([5, 7, 11], sleep=0.01)
    assert [s[:2] for s in seen] == [(1, 3), (2, 3), (3, 3)]
    assert [s[2] for s in seen] == [5, 12, 23]
    # outside llm_batch_progress: silent, like use_tqdm=False
    _drive_like_vllm([1, 2])
    assert capsys.readouterr() == ("", "")


class _BatchBackend:
    """Answers every request with 4 tokens, reporting finished requests through vllm_tqdm like vLLM does."""

    name = "fake"
    model_id = "fake"

    def generate(self, requests):
        _drive_like_vllm([4] * len(requests))
        return [Completion(text="ok", completion_tokens=4) for _ in requests]


def _two_calls(item, ctx):
    first = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": item["q"]}]))
    if item["q"] == "short":
        return AgentResult(answer=first.text)
    second = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": item["q"] + "!"}]))
    return AgentResult(answer=second.text)


def test_run_agents_on_progress_moves_within_and_after_batches():
    items = [{"question_id": str(i), "q": "short" if i < 2 else "long"} for i in range(5)]
    snaps: list[RunProgress] = []
    out, stats = run_agents(_two_calls, items, _BatchBackend(), {}, on_progress=snaps.append)
    assert all(o["error"] is None for o in out)
    assert snaps[0].step == 0 and snaps[0].done_items == 0
    in_batch = [s for s in snaps if s.step == 1 and s.batch_total == 5]
    assert [s.batch_done for s in in_batch] == [0, 1, 2, 3, 4, 5]
    assert [s.completion_tokens for s in in_batch][1:] == [4, 8, 12, 16, 20]
    after_1 = [s for s in snaps if s.step == 1 and s.batch_total == 0][-1]
    assert (after_1.done_items, after_1.active_items, after_1.completion_tokens) == (2, 3, 20)
    last = snaps[-1]
    assert (last.done_items, last.total_items, last.active_items, last.completion_tokens) == (5, 5, 0, 32)
    assert last.tokens_per_s > 0
    # a failing callback never fails the run
    out2, _ = run_agents(_two_calls, items, _BatchBackend(), {}, on_progress=lambda p: 1 / 0)
    assert [o["answer"] for o in out2] == ["ok"] * 5


# --------------------------------------------------------------------------------------------- staging
def test_counted_reads_give_the_same_lines(data_root: Path):
    path = data_root / "wikidata-entities" / "opentapioca" / "Q8502.json"
    for shard in byte_shards(path, 3) + [Shard()]:
        plain = list(iter_lines(path, shard))
        with P.count_reads() as c:
            counted = list(iter_lines(path, shard))
        assert counted == plain
        assert c.bytes > 0
    with P.count_reads() as c:
        list(iter_lines(path))
    assert c.bytes == path.stat().st_size


def test_stage_shard_reports_bytes_in_plain_mode(data_root: Path, tmp_path: Path, monkeypatch, no_heartbeat):
    from tasks.kb import stage
    from tasks.kb.plan import InputSpec

    path = data_root / "wikidata-entities" / "opentapioca" / "sample_wikidata_items.json.bz2"
    monkeypatch.setenv(P.ENV_MODE, "plain")
    monkeypatch.setattr(stage, "REPORT_ROWS", 2000)
    buf = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf)
    spec = InputSpec(kind="wikidata-json", path=str(path), source="test", shards=(Shard(by_lines=True),))
    rec = stage.stage_shard("t-00000000", spec, Shard(by_lines=True), tmp_path)
    lines = [line for line in _lines(buf) if line.startswith(f"[stage {path.name} [1/1]]")]
    size = P._fmt_bytes(path.stat().st_size)
    assert lines[0] == f"[stage {path.name} [1/1]] started (total {size})"
    assert 3 <= len(lines) <= 12, lines
    assert all("rows=" in line and "entities=" in line for line in lines[1:])
    assert lines[-1].startswith(f"[stage {path.name} [1/1]] done: {size}/{size} 100%")
    assert f"entities={rec['rows']['entities']:,}" in lines[-1]


def test_vllm_tqdm_with_vllms_own_engine_loop():
    """The real ``_run_engine`` of the installed vLLM drives the hook (a fake engine; no model is loaded)."""
    from vllm.entrypoints.common.offline import OfflineInferenceMixin
    from vllm.outputs import CompletionOutput, RequestOutput

    def out(i: int, n_tok: int) -> RequestOutput:
        comp = CompletionOutput(index=0, text="x", token_ids=list(range(n_tok)), cumulative_logprob=None,
                                logprobs=None, finish_reason="stop")
        return RequestOutput(request_id=str(i), prompt=None, prompt_token_ids=[1, 2, 3], prompt_logprobs=None,
                             outputs=[comp], finished=True)

    class Engine:
        def __init__(self) -> None:
            self.steps = [[out(0, 5)], [], [out(2, 9), out(1, 1)]]

        def get_num_unfinished_requests(self) -> int:
            return 3

        def has_unfinished_requests(self) -> bool:
            return bool(self.steps)

        def step(self) -> list:
            time.sleep(0.01)
            return self.steps.pop(0)

    class FakeLLM:
        llm_engine = Engine()

    seen: list[tuple[int, int, int]] = []
    with P.llm_batch_progress(lambda done, total, toks, el: seen.append((done, total, toks))):
        res = OfflineInferenceMixin._run_engine(FakeLLM(), RequestOutput, use_tqdm=P.vllm_tqdm)
    assert [r.request_id for r in res] == ["0", "1", "2"]
    assert seen == [(1, 3, 5), (2, 3, 14), (3, 3, 15)]


def test_gguf_tensor_loop_is_reported(tmp_path: Path, no_heartbeat, monkeypatch):
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from tasks.llm import models

    monkeypatch.setenv(P.ENV_MODE, "plain")
    buf = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf)
    orig = gguf_utils.tqdm
    with models._tensor_progress("qwen"):
        assert list(gguf_utils.tqdm(range(20), desc="Converting and de-quantizing GGUF tensors...")) == list(range(20))
    assert gguf_utils.tqdm is orig
    parts = [tmp_path / "a.bin", tmp_path / "b.bin"]
    parts[0].write_bytes(b"x" * 1000)
    parts[1].write_bytes(b"y" * 500)
    models.assemble_gguf(models.GgufSource("tiny", tuple(parts), None), tmp_path / "out" / "tiny.gguf")
    lines = _lines(buf)
    assert lines[0] == "[qwen: Converting and de-quantizing GGUF tensors] started (total 20)"
    assert lines[-1].startswith("[tiny: assemble + verify GGUF] done: 1.5 KiB/1.5 KiB 100%")


def test_worker_init_turns_live_bars_into_plain_lines(monkeypatch):
    for name in (P.ENV_MODE, P.ENV_INTERVAL):  # set, then delete: both recorded, so undone after the test
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    P.worker_init("tty")
    assert P.resolve_mode(io.StringIO()) == "plain" and P.plain_interval() == 10
    P.worker_init("off")
    assert P.resolve_mode() == "off"


# ------------------------------------------------------------------------------------------------ say()
class _Syscalls(io.RawIOBase):
    """A raw stream recording each write, as the file descriptor under an unbuffered stdout sees them."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # noqa: ANN001 - the raw-IO protocol passes a buffer
        self.calls.append(bytes(b))
        return len(b)


def test_say_writes_a_line_and_its_newline_in_one_call_where_print_makes_two():
    raw = _Syscalls()
    unbuffered = io.TextIOWrapper(raw, write_through=True)  # what PYTHONUNBUFFERED (the Makefile) makes of stdout
    print("  staged x.json [1/2] 0.8s: claims=22,064", file=unbuffered, flush=True)
    assert raw.calls == [b"  staged x.json [1/2] 0.8s: claims=22,064", b"\n"]  # another line could land between
    raw.calls.clear()
    P.say("  staged x.json [2/2] 0.8s: claims=22,064", unbuffered)
    assert raw.calls == [b"  staged x.json [2/2] 0.8s: claims=22,064\n"]


SAY_LINES = r'''
import sys
from tasks.progress import say
tag = sys.argv[1]
for i in range(20000):
    say(f"{tag} {i:05d} " + tag * 60)
'''


def test_lines_said_by_two_unbuffered_processes_on_one_pipe_stay_whole():
    r, w = os.pipe()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = [subprocess.Popen([sys.executable, "-c", SAY_LINES, tag], cwd=layout.REPO_ROOT, env=env, stdout=w)
             for tag in "AB"]
    os.close(w)
    with os.fdopen(r) as pipe:
        lines = pipe.read().splitlines()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(lines) == 40000
    for tag in "AB":
        mine = [ln for ln in lines if ln.startswith(tag + " ")]
        assert mine == [f"{tag} {i:05d} " + tag * 60 for i in range(20000)]  # whole, in order

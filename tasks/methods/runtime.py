"""Batching runtime: runs many agent step machines in lockstep (docs/architecture.md#llm-layer).

An agent is a generator function ``agent(item, ctx)`` that *yields* what it needs and receives the result:

* ``yield LLMCall(request)`` -> receives a ``Completion``;
* ``yield [LLMCall(r1), LLMCall(r2), ...]`` -> receives a list of ``Completion`` (parallel sub-agents);
* ``yield ToolCall(tool, payload)`` -> receives that tool's result for the payload;
* ``return {...}`` -> the item's result (keys of the predictions table: predicted_entities, answer, answers).

Agents never touch a backend, a file or an index. At every step the runtime collects the pending actions of
all active items, sends every LLM request of the step in ONE ``backend.generate`` call (vLLM continuous
batching, shared prefixes hit the prefix cache), calls each tool ONCE with all payloads of the step
(``tool(payloads) -> results``), resumes the generators, and drops finished items. It records a trajectory
per item (prompt hash, raw output, tool payload and result, plus whatever the agent logs with
``ctx.log``), token counts, call counts and latency. An exception inside one agent, or an LLM error the
agent does not handle, becomes that item's ``error``; the other items continue.

Example:
    >>> def echo(item, ctx):  # doctest: +SKIP
    ...     c = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": item["question"]}]))
    ...     return {"answer": c.text}
    >>> run_agents(echo, items, backend, tools={})  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.llm.streaming import open_session
from tasks.llm.types import ChatRequest, Completion, LLMBackend
from tasks.progress import llm_batch_progress

log = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 4000


@dataclass(frozen=True)
class LLMCall:
    """Ask the backend for one completion."""

    request: ChatRequest


@dataclass(frozen=True)
class ToolCall:
    """Ask a tool for one result; the runtime batches payloads of all items per tool."""

    tool: str
    payload: Any


class AgentError(RuntimeError):
    """An item-level failure (unparseable output, LLM error...). Recorded as the item's error."""


@dataclass
class ItemContext:
    """Per-item bookkeeping the agent can write to (``log``) and the runtime fills (counters)."""

    item_id: str
    trajectory: list[dict] = field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached_calls: int = 0

    def log(self, entry: dict) -> None:
        """Append an agent-side record (e.g. the parsed action) to the trajectory."""
        self.trajectory.append({"kind": "note", **entry})

    def count(self, comp: Completion) -> int:
        """Add one LLM call's counters; returns its freshly generated tokens (0 for a response-cache hit)."""
        self.llm_calls += 1
        self.prompt_tokens += comp.prompt_tokens
        self.completion_tokens += comp.completion_tokens
        self.latency_s += comp.latency_s
        self.cached_calls += int(comp.cached)
        return 0 if comp.cached else comp.completion_tokens


@dataclass
class RuntimeStats:
    """Aggregate counters of one ``run_agents`` call."""

    steps: int = 0
    llm_batches: int = 0
    llm_requests: int = 0
    llm_seconds: float = 0.0
    tool_calls: int = 0
    tool_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def non_llm_seconds(self) -> float:
        """Wall time not spent inside backend.generate."""
        return max(0.0, self.wall_seconds - self.llm_seconds)


@dataclass(frozen=True)
class RunProgress:
    """What ``run_agents`` passes to its ``on_progress`` callback (after every step and within LLM batches).

    Attributes:
        step: Current step (0 before the first one).
        done_items: Items finished (result or error).
        total_items: Items of the call.
        active_items: Items still running.
        completion_tokens: Completion tokens generated so far (cache hits excluded), including the running
            batch's finished requests when the backend reports them.
        llm_seconds: Time spent inside ``backend.generate`` so far, including the running call.
        batch_done: Requests of the running step already answered (0 outside a ``generate`` call).
        batch_total: Requests of the running step (0 outside a ``generate`` call).
    """

    step: int
    done_items: int
    total_items: int
    active_items: int
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    batch_done: int = 0
    batch_total: int = 0

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of LLM time (0 before any)."""
        return self.completion_tokens / self.llm_seconds if self.llm_seconds > 0 else 0.0


AgentFn = Callable[[dict, ItemContext], Generator[Any, Any, dict]]
Tool = Callable[[list[Any]], list[Any]]


def _truncate(obj: Any) -> Any:
    text = json.dumps(obj, ensure_ascii=False, default=_default)
    if len(text) <= MAX_TOOL_RESULT_CHARS:
        return json.loads(text)
    return text[:MAX_TOOL_RESULT_CHARS] + "...(truncated)"


def _default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump()
    if hasattr(o, "__dataclass_fields__"):
        return {k: getattr(o, k) for k in o.__dataclass_fields__}
    return str(o)


def _llm_record(step: int, req: ChatRequest, comp: Completion) -> dict:
    """The trajectory entry of one LLM call."""
    return {"kind": "llm", "step": step, "prompt_hash": req.prompt_hash(), "raw_output": comp.text,
            "prompt_tokens": comp.prompt_tokens, "completion_tokens": comp.completion_tokens, "cached": comp.cached,
            **({"prefix_cached_tokens": comp.prefix_cached_tokens} if not comp.cached else {}),
            **({"error": comp.error} if comp.error else {})}


def _outputs(items: Sequence[dict], ctxs: list[ItemContext], results: list[dict | None], errors: list[str | None],
             id_key: str) -> list[dict]:
    """One output per item, in input order: the agent's result plus the runtime's bookkeeping."""
    out: list[dict] = []
    for it, c, res, err in zip(items, ctxs, results, errors, strict=True):
        row = dict(res or {})
        row.update({
            id_key: str(it[id_key]),
            "trajectory": json.dumps(c.trajectory, ensure_ascii=False, default=_default),
            "llm_calls": c.llm_calls,
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "latency_s": round(c.latency_s, 4),
            "error": err or row.get("error"),
        })
        out.append(row)
    return out


def prefix_order(requests: Sequence[ChatRequest]) -> list[int]:
    """Send order of a batch that puts requests with a common prefix next to each other.

    Requests are sorted by their messages (role and content, in turn order), so every group sharing a system
    prompt, few-shot turns or earlier conversation turns is contiguous and the engine's prefix cache serves the
    group after its first member; ties keep the agents' order (stable sort).
    """
    def key(k: int) -> list[tuple[str, str]]:
        return [(m.get("role", ""), m.get("content", "")) for m in requests[k].messages]

    return sorted(range(len(requests)), key=key)


def run_agents(
    agent: AgentFn,
    items: Sequence[dict],
    backend: LLMBackend | None,
    tools: dict[str, Tool],
    id_key: str = "question_id",
    max_steps: int = 50,
    on_step: Callable[[int, int], None] | None = None,
    on_progress: Callable[[RunProgress], None] | None = None,
) -> tuple[list[dict], RuntimeStats]:
    """Run ``agent`` over all ``items`` with batched LLM and tool calls.

    Args:
        agent: Generator function ``agent(item, ctx)``.
        items: Input rows (e.g. questions).
        backend: LLM backend (may be None for agents that only use tools).
        tools: Name -> batched tool function.
        id_key: Field of an item holding its id.
        max_steps: Safety bound on steps per item (an item still active after it gets an error).
        on_step: Callback ``(step, n_active)`` for progress output.
        on_progress: Callback receiving a :class:`RunProgress` after every step and, while a step's
            ``generate`` call runs, whenever the backend reports a finished request (vLLM with
            ``use_tqdm=tasks.progress.vllm_tqdm``; see :func:`tasks.progress.llm_batch_progress`). An exception
            in it is logged and ignored (progress never fails a run).

    Returns:
        One output per item, in input order: the agent's result dict plus ``question_id``, ``trajectory``
        (JSON text), ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``latency_s``, ``error``; and stats.
    """
    t_start = time.perf_counter()
    stats = RuntimeStats()
    n = len(items)
    ctxs = [ItemContext(str(it[id_key])) for it in items]
    results: list[dict | None] = [None] * n
    errors: list[str | None] = [None] * n
    gens: dict[int, Generator] = {}
    pending: dict[int, Any] = {}

    def advance(i: int, value: Any, first: bool = False) -> None:
        try:
            action = next(gens[i]) if first else gens[i].send(value)
            pending[i] = action
        except StopIteration as stop:
            results[i] = stop.value or {}
            gens.pop(i, None)
            pending.pop(i, None)
        except Exception as exc:  # noqa: BLE001 - any agent failure is an item error, never a run failure
            errors[i] = f"{type(exc).__name__}: {exc}"
            ctxs[i].trajectory.append({"kind": "error", "error": errors[i]})
            gens.pop(i, None)
            pending.pop(i, None)

    fresh_tokens = 0  # completion tokens generated (not cached) so far

    def report(step: int, batch_done: int = 0, batch_total: int = 0, batch_tokens: int = 0,
               batch_s: float = 0.0) -> None:
        if on_progress is None:
            return
        try:
            on_progress(RunProgress(step, n - len(gens), n, len(gens), fresh_tokens + batch_tokens,
                                    stats.llm_seconds + batch_s, batch_done, batch_total))
        except Exception as exc:  # noqa: BLE001 - progress output must never fail a run
            log.debug("on_progress failed: %s: %s", type(exc).__name__, exc)

    for i, it in enumerate(items):
        gens[i] = agent(it, ctxs[i])
        advance(i, None, first=True)
    report(0)

    step = 0
    while pending:
        step += 1
        stats.steps = step
        if on_step is not None:
            on_step(step, len(pending))
        if step > max_steps:
            for i in list(pending):
                errors[i] = f"step limit {max_steps} exceeded"
                gens[i].close()
                gens.pop(i, None)
                pending.pop(i, None)
            break
        # --- collect LLM requests of this step (flattening list actions) ---
        llm_slots: list[tuple[int, int | None]] = []
        requests: list[ChatRequest] = []
        tool_groups: dict[str, list[tuple[int, Any]]] = {}
        for i, action in pending.items():
            if isinstance(action, LLMCall):
                llm_slots.append((i, None))
                requests.append(action.request)
            elif isinstance(action, list) and all(isinstance(a, LLMCall) for a in action):
                for j, a in enumerate(action):
                    llm_slots.append((i, j))
                    requests.append(a.request)
            elif isinstance(action, ToolCall):
                tool_groups.setdefault(action.tool, []).append((i, action.payload))
            else:
                errors[i] = f"AgentError: agent yielded an unsupported action {type(action).__name__}"
                gens[i].close()
                gens.pop(i, None)
        for i in [i for i in pending if i not in gens]:
            pending.pop(i, None)

        replies: dict[int, Any] = {}
        if requests:
            if backend is None:
                raise RuntimeError("agent asked for an LLM call but the method runs without a backend")
            t0 = time.perf_counter()
            n_req = len(requests)

            def in_batch(done: int, total: int, tokens: int, elapsed: float, _step: int = step,
                         _n: int = n_req) -> None:
                # requests the engine never saw (cache hits, pre-check errors) count as answered
                report(_step, min(_n, max(0, _n - total) + done), _n, tokens, elapsed)

            report(step, 0, n_req)
            # requests sharing a prefix (system prompt, few-shot turns, earlier turns) go to the engine side by
            # side, so its prefix cache serves them; completions come back in the agents' order
            order = prefix_order(requests)
            batch = [requests[k] for k in order]
            try:
                if on_progress is not None:
                    with llm_batch_progress(in_batch):
                        sent = backend.generate(batch)
                else:
                    sent = backend.generate(batch)
            except Exception as exc:  # noqa: BLE001 - a crashing backend fails the items, not the run
                msg = f"backend error: {type(exc).__name__}: {exc}"
                sent = [Completion(error=msg) for _ in batch]
            dt = time.perf_counter() - t0
            stats.llm_seconds += dt
            stats.llm_batches += 1
            stats.llm_requests += len(requests)
            if len(sent) != len(requests):
                raise RuntimeError(f"backend returned {len(sent)} completions for {len(requests)} requests")
            completions: list[Completion] = [Completion()] * len(requests)
            for k, comp in zip(order, sent, strict=True):
                completions[k] = comp
            multi: dict[int, list[Completion]] = {}
            for (i, j), req, comp in zip(llm_slots, requests, completions, strict=True):
                fresh_tokens += ctxs[i].count(comp)
                ctxs[i].trajectory.append(_llm_record(step, req, comp))
                if j is None:
                    replies[i] = comp
                else:
                    multi.setdefault(i, []).append(comp)
            replies.update(multi)
        for tool_name, calls in tool_groups.items():
            fn = tools.get(tool_name)
            t0 = time.perf_counter()
            if fn is None:
                for i, _ in calls:
                    errors[i] = f"AgentError: unknown tool {tool_name!r}"
                    gens[i].close()
                    gens.pop(i, None)
                    pending.pop(i, None)
                continue
            outs = fn([p for _, p in calls])
            stats.tool_seconds += time.perf_counter() - t0
            stats.tool_calls += 1
            for (i, payload), out in zip(calls, outs, strict=True):
                ctxs[i].trajectory.append(
                    {"kind": "tool", "step": step, "tool": tool_name, "payload": _truncate(payload),
                     "result": _truncate(out)}
                )
                replies[i] = out
        for i, value in replies.items():
            if i in gens:
                advance(i, value)
        report(step)

    report(step)  # the final count (also after a step-limit stop)
    stats.wall_seconds = time.perf_counter() - t_start
    return _outputs(items, ctxs, results, errors, id_key), stats


def run_agents_continuous(
    agent: AgentFn,
    items: Sequence[dict],
    backend: LLMBackend | None,
    tools: dict[str, Tool],
    id_key: str = "question_id",
    max_steps: int = 50,
    on_progress: Callable[[RunProgress], None] | None = None,
    session: Any = None,
) -> tuple[list[dict], RuntimeStats]:
    """Run ``agent`` over ``items`` with continuous per-item scheduling (same contract as :func:`run_agents`).

    No item waits for another: an item's next LLM request is submitted as soon as its previous one returns (the
    engine adds it to the running batch at its next scheduler step), and between engine steps every tool call
    pending by then runs, batched per tool. So a step no longer lasts as long as its longest completion, and
    tools run while the engine generates for the other items. Trajectories, token counts, errors and the
    output format are those of :func:`run_agents`; with a deterministic backend the predictions are the same
    (tested). ``step`` in trajectories and progress counts an item's own actions.

    Args:
        agent: Generator function ``agent(item, ctx)``.
        items: Input rows (e.g. questions).
        backend: LLM backend (may be None for agents that only use tools, or when ``session`` is given).
        tools: Name -> batched tool function.
        id_key: Field of an item holding its id.
        on_progress: Callback receiving a :class:`RunProgress` after every engine step (``step``: the most
            actions any item has taken).
        max_steps: Bound on the actions of one item (an item still running after it gets an error).
        session: A streaming session (``tasks.llm.streaming``); default: ``open_session(backend)``, closed at
            the end.
    """
    t_start = time.perf_counter()
    stats = RuntimeStats()
    n = len(items)
    ctxs = [ItemContext(str(it[id_key])) for it in items]
    results: list[dict | None] = [None] * n
    errors: list[str | None] = [None] * n
    gens: dict[int, Generator] = {}
    actions: list[int] = [0] * n  # actions taken per item
    waiting: dict[int, list[Completion | None]] = {}  # item -> completions of its pending LLM action
    asked: dict[int, list[ChatRequest]] = {}  # item -> the requests of its pending LLM action
    multi_call: set[int] = set()  # items whose pending action is a list of LLM calls
    tool_queue: dict[str, list[tuple[int, Any]]] = {}
    fresh_tokens = 0
    own_session = session is None and backend is not None
    sess = open_session(backend) if own_session else session
    to_submit: list[tuple[tuple[int, int], ChatRequest]] = []

    def fail(i: int, msg: str) -> None:
        errors[i] = msg
        ctxs[i].trajectory.append({"kind": "error", "error": msg})
        g = gens.pop(i, None)
        if g is not None:
            g.close()
        waiting.pop(i, None)
        asked.pop(i, None)

    def dispatch(i: int, action: Any) -> None:
        actions[i] += 1
        if actions[i] > max_steps:
            fail(i, f"step limit {max_steps} exceeded")
            return
        if isinstance(action, LLMCall):
            action = [action]
        elif isinstance(action, list) and action and all(isinstance(a, LLMCall) for a in action):
            multi_call.add(i)
        elif isinstance(action, ToolCall):
            if action.tool not in tools:
                fail(i, f"AgentError: unknown tool {action.tool!r}")
                return
            tool_queue.setdefault(action.tool, []).append((i, action.payload))
            return
        else:
            fail(i, f"AgentError: agent yielded an unsupported action {type(action).__name__}")
            return
        if backend is None and session is None:
            raise RuntimeError("agent asked for an LLM call but the method runs without a backend")
        waiting[i] = [None] * len(action)
        asked[i] = [a.request for a in action]
        to_submit.extend(((i, j), a.request) for j, a in enumerate(action))

    def advance(i: int, value: Any, first: bool = False) -> None:
        try:
            action = next(gens[i]) if first else gens[i].send(value)
        except StopIteration as stop:
            results[i] = stop.value or {}
            gens.pop(i, None)
            return
        except Exception as exc:  # noqa: BLE001 - any agent failure is an item error, never a run failure
            fail(i, f"{type(exc).__name__}: {exc}")
            return
        dispatch(i, action)

    def report() -> None:
        if on_progress is None:
            return
        try:
            on_progress(RunProgress(max(actions, default=0), n - len(gens), n, len(gens), fresh_tokens,
                                    stats.llm_seconds))
        except Exception as exc:  # noqa: BLE001 - progress output must never fail a run
            log.debug("on_progress failed: %s: %s", type(exc).__name__, exc)

    def submit() -> None:
        if not to_submit:
            return
        batch = list(to_submit)
        to_submit.clear()
        order = prefix_order([r for _, r in batch])
        t0 = time.perf_counter()
        sess.submit([batch[k] for k in order])
        stats.llm_seconds += time.perf_counter() - t0
        stats.llm_batches += 1
        stats.llm_requests += len(batch)

    try:
        for i, it in enumerate(items):
            gens[i] = agent(it, ctxs[i])
            advance(i, None, first=True)
        report()
        while gens:
            submit()
            # tools first: whatever is pending since the last engine step runs now, one call per tool
            if tool_queue:
                queued = dict(tool_queue)
                tool_queue.clear()
                for tool_name, calls in queued.items():
                    t0 = time.perf_counter()
                    outs = tools[tool_name]([p for _, p in calls])
                    stats.tool_seconds += time.perf_counter() - t0
                    stats.tool_calls += 1
                    for (i, payload), out in zip(calls, outs, strict=True):
                        ctxs[i].trajectory.append({"kind": "tool", "step": actions[i], "tool": tool_name,
                                                   "payload": _truncate(payload), "result": _truncate(out)})
                    for (i, _), out in zip(calls, outs, strict=True):
                        if i in gens:
                            advance(i, out)
                submit()
            if not waiting:
                if not tool_queue and gens:
                    raise RuntimeError("continuous runtime stalled: active items with no pending action")
                continue
            t0 = time.perf_counter()
            finished = sess.poll()
            stats.llm_seconds += time.perf_counter() - t0
            stats.steps += 1
            for (i, j), comp in finished:
                c = ctxs[i]
                fresh_tokens += c.count(comp)
                if i not in waiting:
                    continue  # the item failed meanwhile
                slot = waiting[i]
                slot[j] = comp
                if any(x is None for x in slot):
                    continue
                # every call of the action answered: record them in call order (as the lockstep runtime does)
                c.trajectory += [_llm_record(actions[i], req, done)
                                 for req, done in zip(asked.pop(i), slot, strict=True)]
                del waiting[i]
                value = list(slot) if i in multi_call else slot[0]
                multi_call.discard(i)
                advance(i, value)
            report()
    finally:
        if own_session:
            sess.close()
    report()
    stats.wall_seconds = time.perf_counter() - t_start
    return _outputs(items, ctxs, results, errors, id_key), stats

"""Agent runtime: runs many agent step machines over one backend (docs/architecture.md#llm-layer).

An agent is a generator function ``agent(item, ctx)`` that *yields* what it needs and receives the result:

* ``yield LLMCall(request)`` -> receives a ``Completion``;
* ``yield [LLMCall(r1), LLMCall(r2), ...]`` -> receives a list of ``Completion`` (parallel sub-agents);
* ``yield ToolCall(tool, payload)`` -> receives that tool's result for the payload;
* ``return AgentResult(...)`` -> the item's result (``tasks.methods.records``: the typed contract).

Agents never touch a backend, a file or an index. One item state machine (:class:`_Items`) starts each agent,
checks every action it yields (step bound, known tool, supported kind), records the trajectory (prompt hash, raw
output, tool payload and result, plus whatever the agent logs with ``ctx.log``) and counters, and turns an
exception inside one agent, or an LLM error the agent does not handle, into that item's ``error``; the other items
continue. Two schedulers drive it and differ only in when requests are sent:

* **continuous** (the default, :func:`run_agents_continuous`): an item's next LLM request goes to the engine as soon
  as its previous one returns (a streaming session), and the tool calls pending between engine steps run batched
  per tool;
* **lockstep** (:func:`run_agents`): every step sends all active items' LLM requests in ONE ``backend.generate``
  call and calls each tool ONCE with all payloads of the step.

With a deterministic backend both give the same predictions (tested). Requests sharing a prefix are sent side by
side (:func:`prefix_order`) so the engine's prefix cache serves them.

Example:
    >>> def echo(item, ctx):  # doctest: +SKIP
    ...     c = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": item["question"]}]))
    ...     return AgentResult(answer=c.text)
    >>> run_agents_continuous(echo, items, backend, tools={})  # doctest: +SKIP
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
from tasks.methods.records import (
    AgentResult,
    ErrorEvent,
    ItemOutput,
    LlmEvent,
    Note,
    ToolEvent,
    TrajectoryEvent,
    item_output,
    note_event,
)
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
    trajectory: list[TrajectoryEvent] = field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached_calls: int = 0

    def log(self, note: Note) -> None:
        """Append an agent-side note (e.g. the parsed action) to the trajectory.

        Raises:
            TypeError: A note metrics read in another shape, or a ``kind`` key (``records.note_event``): the item's
                error, nothing stored.
        """
        self.trajectory.append(note_event(note))

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
    """Aggregate counters of one runtime call."""

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


AgentFn = Callable[[dict, ItemContext], Generator[Any, Any, AgentResult | None]]
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


def prefix_order(requests: Sequence[ChatRequest]) -> list[int]:
    """Send order of a batch that puts requests with a common prefix next to each other.

    Requests are sorted by their messages (role and content, in turn order), so every group sharing a system
    prompt, few-shot turns or earlier conversation turns is contiguous and the engine's prefix cache serves the
    group after its first member; ties keep the agents' order (stable sort).
    """
    def key(k: int) -> list[tuple[str, str]]:
        return [(m.get("role", ""), m.get("content", "")) for m in requests[k].messages]

    return sorted(range(len(requests)), key=key)


@dataclass
class _Waiting:
    """An item's LLM action: its requests, whether the agent yielded a list, and the answers so far."""

    requests: tuple[ChatRequest, ...]
    multi: bool
    answers: list[Completion | None]


class _Items:
    """The item state machine both schedulers drive; they only decide when its queues are emptied.

    It runs each agent to its next action, checks and queues it (``requests``, ``tools_due``), and resumes the agent
    once the action is answered.
    """

    def __init__(self, agent: AgentFn, items: Sequence[dict], tools: dict[str, Tool], id_key: str, max_steps: int,
                 has_backend: bool, on_progress: Callable[[RunProgress], None] | None, stats: RuntimeStats):
        self.agent, self.items, self.tools, self.max_steps = agent, items, tools, max_steps
        self.has_backend, self.on_progress, self.stats = has_backend, on_progress, stats
        self.ctxs = [ItemContext(str(it[id_key])) for it in items]
        self.results: list[AgentResult | None] = [None] * len(items)
        self.errors: list[str | None] = [None] * len(items)
        self.actions = [0] * len(items)  # actions taken per item: the trajectory's ``step``
        self.gens: dict[int, Generator] = {}
        self.fresh_tokens = 0  # completion tokens generated (not cached) so far
        self.waiting: dict[int, _Waiting] = {}
        self.requests: list[tuple[tuple[int, int], ChatRequest]] = []  # (item, call of its action), request
        self.tools_due: dict[str, list[tuple[int, Any]]] = {}  # tool -> queued (item, payload)

    def start_all(self) -> None:
        """Start every item's agent and queue its first action."""
        for i, item in enumerate(self.items):
            self.gens[i] = gen = self.agent(item, self.ctxs[i])
            self._advance(i, gen.__next__)

    def _advance(self, i: int, go: Callable[[], Any]) -> None:
        """Run item ``i``'s agent to its next action (``go``), then queue the action or end the item."""
        try:
            action = go()
        except StopIteration as stop:
            self.gens.pop(i, None)
            try:
                self.results[i] = AgentResult.of(stop.value)
            except TypeError as exc:
                self.fail(i, f"AgentError: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - any agent failure is an item error, never a run failure
            return self.fail(i, f"{type(exc).__name__}: {exc}")
        self.actions[i] += 1
        if self.actions[i] > self.max_steps:
            return self.fail(i, f"step limit {self.max_steps} exceeded")
        if isinstance(action, ToolCall):
            if action.tool not in self.tools:
                return self.fail(i, f"AgentError: unknown tool {action.tool!r}")
            self.tools_due.setdefault(action.tool, []).append((i, action.payload))
            return
        calls = action if isinstance(action, list) else [action]
        if not calls or not all(isinstance(a, LLMCall) for a in calls):
            return self.fail(i, f"AgentError: agent yielded an unsupported action {type(action).__name__}")
        if not self.has_backend:
            raise RuntimeError("agent asked for an LLM call but the method runs without a backend")
        self.waiting[i] = _Waiting(tuple(a.request for a in calls), isinstance(action, list), [None] * len(calls))
        self.requests.extend(((i, j), a.request) for j, a in enumerate(calls))

    def _resume(self, i: int, value: Any) -> None:
        if (gen := self.gens.get(i)) is not None:
            self._advance(i, lambda: gen.send(value))

    def fail(self, i: int, msg: str) -> None:
        """End item ``i`` with an error (recorded in its trajectory)."""
        self.errors[i] = msg
        self.ctxs[i].trajectory.append(ErrorEvent(kind="error", error=msg))
        if (gen := self.gens.pop(i, None)) is not None:
            gen.close()

    def take_requests(self) -> list[tuple[tuple[int, int], ChatRequest]]:
        """Empty the request queue: item order, then :func:`prefix_order` (so the prefix cache serves groups)."""
        queued = sorted(self.requests, key=lambda kr: kr[0])
        self.requests = []
        return [queued[k] for k in prefix_order([r for _, r in queued])]

    def take_tools(self) -> dict[str, list[tuple[int, Any]]]:
        """Empty the tool queue: tool -> its (item, payload) pairs."""
        queued, self.tools_due = self.tools_due, {}
        groups = {name: sorted(group, key=lambda ip: ip[0]) for name, group in queued.items()}
        return dict(sorted(groups.items(), key=lambda kv: kv[1][0][0]))  # item order, whatever answered first

    def answer(self, key: tuple[int, int], comp: Completion) -> None:
        """Deliver one completion; once its action's calls are all answered, record them in call order and resume."""
        i, j = key
        self.fresh_tokens += self.ctxs[i].count(comp)
        if i not in self.waiting:
            return  # the item failed meanwhile
        action = self.waiting[i]
        action.answers[j] = comp
        if any(x is None for x in action.answers):
            return
        del self.waiting[i]
        for req, c in zip(action.requests, action.answers, strict=True):
            event = LlmEvent(kind="llm", step=self.actions[i], prompt_hash=req.prompt_hash(), raw_output=c.text,
                             prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, cached=c.cached)
            if not c.cached:
                event["prefix_cached_tokens"] = c.prefix_cached_tokens
            if c.error:
                event["error"] = c.error
            self.ctxs[i].trajectory.append(event)
        self._resume(i, list(action.answers) if action.multi else action.answers[0])

    def run_tools(self, queued: dict[str, list[tuple[int, Any]]]) -> None:
        """One batched call per tool of its queued payloads, recorded per item; each item resumes with its result."""
        for name, group in queued.items():
            t0 = time.perf_counter()
            outs = self.tools[name]([p for _, p in group])
            self.stats.tool_seconds += time.perf_counter() - t0
            self.stats.tool_calls += 1
            for (i, payload), out in zip(group, outs, strict=True):
                self.ctxs[i].trajectory.append(ToolEvent(kind="tool", step=self.actions[i], tool=name,
                                                         payload=_truncate(payload), result=_truncate(out)))
                self._resume(i, out)

    def report(self, step: int | None = None, batch_done: int = 0, batch_total: int = 0, batch_tokens: int = 0,
               batch_s: float = 0.0) -> None:
        """Pass a :class:`RunProgress` to the callback (``step`` default: the most actions any item has taken)."""
        if self.on_progress is None:
            return
        n, step = len(self.items), max(self.actions, default=0) if step is None else step
        try:
            self.on_progress(RunProgress(step, n - len(self.gens), n, len(self.gens), self.fresh_tokens + batch_tokens,
                                         self.stats.llm_seconds + batch_s, batch_done, batch_total))
        except Exception as exc:  # noqa: BLE001 - progress output must never fail a run
            log.debug("on_progress failed: %s: %s", type(exc).__name__, exc)

    def outputs(self, id_key: str) -> list[ItemOutput]:
        """One output per item, in input order: the agent's result plus the runtime's bookkeeping."""
        return [item_output(str(it[id_key]), res, json.dumps(c.trajectory, ensure_ascii=False, default=_default),
                            {"llm_calls": c.llm_calls, "prompt_tokens": c.prompt_tokens,
                             "completion_tokens": c.completion_tokens, "latency_s": round(c.latency_s, 4)}, err)
                for it, c, res, err in zip(self.items, self.ctxs, self.results, self.errors, strict=True)]


def run_agents(agent: AgentFn, items: Sequence[dict], backend: LLMBackend | None, tools: dict[str, Tool],
               id_key: str = "question_id", max_steps: int = 50,
               on_progress: Callable[[RunProgress], None] | None = None) -> tuple[list[ItemOutput], RuntimeStats]:
    """Run ``agent`` over all ``items`` in lockstep: one ``backend.generate`` and one call per tool per step.

    Args:
        agent: Generator function ``agent(item, ctx)``.
        items: Input rows (e.g. questions).
        backend: LLM backend (may be None for agents that only use tools).
        tools: Name -> batched tool function.
        id_key: Field of an item holding its id.
        max_steps: Bound on the actions of one item (an item still running after it gets an error).
        on_progress: Gets a :class:`RunProgress` after every step and whenever the backend reports a finished
            request of the running ``generate`` call (see :func:`tasks.progress.llm_batch_progress`).

    Returns:
        One :class:`~tasks.methods.records.ItemOutput` per item, in input order; and the stats.
    """
    t_start, stats = time.perf_counter(), RuntimeStats()
    core = _Items(agent, items, tools, id_key, max_steps, backend is not None, on_progress, stats)
    core.start_all()
    core.report(0)
    while core.gens:
        stats.steps += 1
        queued = core.take_tools()  # this step's tool calls; the answers below queue the next step's
        if batch := core.take_requests():
            for (key, _), comp in zip(batch, _generate(backend, [r for _, r in batch], core), strict=True):
                core.answer(key, comp)
        core.run_tools(queued)
        core.report(stats.steps)
    core.report(stats.steps)  # the final count
    stats.wall_seconds = time.perf_counter() - t_start
    return core.outputs(id_key), stats


def _generate(backend: Any, requests: list[ChatRequest], core: _Items) -> list[Completion]:
    """One lockstep ``generate`` call with in-batch progress; a backend exception fails its requests, not the run."""
    t0, n_req, stats = time.perf_counter(), len(requests), core.stats

    def in_batch(done: int, total: int, tokens: int, elapsed: float) -> None:
        # requests the engine never saw (cache hits, pre-check errors) count as answered
        core.report(stats.steps, min(n_req, max(0, n_req - total) + done), n_req, tokens, elapsed)

    core.report(stats.steps, 0, n_req)
    try:
        if core.on_progress is None:
            sent = backend.generate(requests)
        else:
            with llm_batch_progress(in_batch):
                sent = backend.generate(requests)
    except Exception as exc:  # noqa: BLE001 - a crashing backend fails the items, not the run
        sent = [Completion(error=f"backend error: {type(exc).__name__}: {exc}") for _ in requests]
    stats.llm_seconds += time.perf_counter() - t0
    stats.llm_batches += 1
    stats.llm_requests += n_req
    if len(sent) != n_req:
        raise RuntimeError(f"backend returned {len(sent)} completions for {n_req} requests")
    return sent


def run_agents_continuous(agent: AgentFn, items: Sequence[dict], backend: LLMBackend | None, tools: dict[str, Tool],
                          id_key: str = "question_id", max_steps: int = 50,
                          on_progress: Callable[[RunProgress], None] | None = None,
                          session: Any = None) -> tuple[list[ItemOutput], RuntimeStats]:
    """Run ``agent`` over ``items`` scheduling each item on its own (arguments and result as :func:`run_agents`).

    No item waits for another: an item's next LLM request is submitted as soon as its previous one returns (the
    engine adds it to the running batch at its next scheduler step), and between engine steps every tool call
    pending by then runs, batched per tool, so tools run while the engine generates for the other items.
    ``step`` in trajectories counts an item's own actions; in progress, the most actions any item has taken.
    ``session`` is a streaming session (``tasks.llm.streaming``); default: ``open_session(backend)``, closed at the end.
    """
    t_start, stats = time.perf_counter(), RuntimeStats()
    core = _Items(agent, items, tools, id_key, max_steps, backend is not None or session is not None, on_progress,
                  stats)
    own_session = session is None and backend is not None
    sess = open_session(backend) if own_session else session

    def submit() -> None:
        if batch := core.take_requests():
            t0 = time.perf_counter()
            sess.submit(batch)
            stats.llm_seconds += time.perf_counter() - t0
            stats.llm_batches += 1
            stats.llm_requests += len(batch)

    try:
        core.start_all()
        core.report()
        while core.gens:
            submit()
            if core.tools_due:  # whatever is pending since the last engine step runs now, one call per tool
                core.run_tools(core.take_tools())
                submit()
            if not core.waiting:
                if not core.tools_due and core.gens:
                    raise RuntimeError("continuous runtime stalled: active items with no pending action")
                continue
            t0 = time.perf_counter()
            finished = sess.poll()
            stats.llm_seconds += time.perf_counter() - t0
            stats.steps += 1
            for key, comp in finished:
                core.answer(key, comp)
            core.report()
    finally:
        if own_session:
            sess.close()
    core.report()
    stats.wall_seconds = time.perf_counter() - t_start
    return core.outputs(id_key), stats

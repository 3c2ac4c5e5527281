"""Progress of long steps: a live bar on a terminal, a few plain lines elsewhere (Prefect-free, thread-safe).

One reporter API for every long step (KB staging, index builds, model preparation, LLM steps)::

    with progress("stage latest-all.json.gz", total=size, unit="B") as p:
        for block in blocks:
            p.update(len(block), entities=n_entities)   # postfix fields shown after the counters

Modes (``LINKEDQA_PROGRESS``, default ``auto``):

* ``tty`` (auto when the stream is a terminal): one shared ``rich`` live display per stream, a row per open
  reporter (description, bar or pulse when the total is unknown, ``done/total``, %, rate, ETA, elapsed,
  postfix). It refreshes itself twice a second, so the elapsed time moves even while the caller is blocked
  (e.g. inside one long ``generate`` call). A closed reporter leaves one summary line above the display.
* ``plain`` (auto without a terminal: CI, deployments, log files): a start line, one line per 10 % of the total
  or every ``LINKEDQA_PROGRESS_INTERVAL`` seconds (default 30) since the last line, whichever comes first,
  and a final line. A heartbeat thread writes the time-based lines even while no ``update`` arrives.
* ``off``: nothing.

Units: ``"B"`` formats counts and rates as bytes (KiB, MiB, GiB); any other string is printed after the number
(``"item"`` -> ``12/40 item``); ``""`` or ``None`` shows elapsed time only (a phase without a counter, see
:func:`phase`).

The vLLM hook (:func:`vllm_tqdm`, passed as ``LLM.chat(..., use_tqdm=vllm_tqdm)``) forwards the finished
requests and generated tokens of the running batch to the callback installed by :func:`llm_batch_progress`
in the same thread (the agent runtime installs one per step), so progress moves within one batched call.

Example:
    >>> import io
    >>> buf = io.StringIO()
    >>> with progress("demo", total=4, unit="item", stream=buf, mode="plain") as p:
    ...     p.update(4)
    >>> buf.getvalue().splitlines()[-1].startswith("[demo] done: 4/4 item")
    True
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, SpinnerColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

ENV_MODE = "LINKEDQA_PROGRESS"
ENV_INTERVAL = "LINKEDQA_PROGRESS_INTERVAL"
#: Seconds between time-based plain lines (when no 10 % step was crossed in between).
PLAIN_INTERVAL_S = 30.0
#: How often the plain-mode heartbeat thread looks at open reporters (0 disables the thread; tests).
HEARTBEAT_S = 1.0
#: Live display refreshes per second in tty mode.
REFRESH_PER_S = 2.0
MODES = ("tty", "plain", "off")

_clock = time.monotonic  # monkeypatched by tests (fake clock)
_WRITE_LOCK = threading.Lock()
T = TypeVar("T")


# --------------------------------------------------------------------------------------------------- modes
def resolve_mode(stream: IO[str] | None = None, mode: str | None = None) -> str:
    """The effective mode: ``mode``, else ``$LINKEDQA_PROGRESS``, else ``tty`` if ``stream`` is a terminal.

    Args:
        stream: Where output goes (default ``sys.stdout``: errors alone go to stderr).
        mode: ``tty``, ``plain``, ``off`` or ``auto``/``None``.

    Returns:
        One of :data:`MODES`.
    """
    m = (mode or os.environ.get(ENV_MODE) or "auto").strip().lower()
    if m in ("0", "no", "none", "false", "quiet"):
        m = "off"
    if m in MODES:
        return m
    s = stream if stream is not None else sys.stdout
    try:
        return "tty" if s is not None and s.isatty() else "plain"
    except (AttributeError, ValueError, OSError):
        return "plain"


def plain_interval() -> float:
    """Seconds between time-based plain lines (``$LINKEDQA_PROGRESS_INTERVAL`` or :data:`PLAIN_INTERVAL_S`)."""
    try:
        v = float(os.environ.get(ENV_INTERVAL, ""))
        return v if v > 0 else PLAIN_INTERVAL_S
    except ValueError:
        return PLAIN_INTERVAL_S


# ---------------------------------------------------------------------------------------------- formatting
def _fmt_bytes(x: float) -> str:
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or suffix == "TiB":
            return f"{x:.0f} {suffix}" if suffix == "B" else f"{x:.1f} {suffix}"
        x /= 1024
    return f"{x:.1f} TiB"  # pragma: no cover


def _fmt_num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.1f}"


def fmt_duration(s: float) -> str:
    """``75.3`` -> ``"1:15"``, ``3725`` -> ``"1:02:05"``."""
    s = max(0, int(round(s)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


# ------------------------------------------------------------------------------------------------ reporter
class Progress:
    """One long step's progress; create it with :func:`progress` (a context manager) and call :meth:`update`.

    Attributes:
        desc: What is running (shown first).
        total: Expected count (``None``: unknown; then count and rate are shown, no %/ETA).
        unit: ``"B"`` (bytes), any unit name, or ``""`` (no counter: elapsed time only).
        n: Count so far.
        mode: ``tty``, ``plain`` or ``off``.
    """

    def __init__(self, desc: str, total: float | None = None, unit: str | None = "item", *,
                 stream: IO[str] | None = None, mode: str | None = None, interval: float | None = None):
        self.desc = desc
        self.total = total if total is None or total > 0 else None
        self.unit = unit or ""
        self.n: float = 0
        self.postfix: dict[str, Any] = {}
        s = stream if stream is not None else sys.stdout
        # while a live display runs, sys.stdout/sys.stderr are rich FileProxy objects: use the real stream
        self.stream = getattr(s, "rich_proxied_file", s)
        self.mode = resolve_mode(self.stream, mode)
        self.interval = interval if interval is not None else plain_interval()
        self._lock = threading.Lock()
        self._push_lock = threading.Lock()
        self._t0 = _clock()
        self._t_end: float | None = None
        self._last_line = self._t0
        self._decile = 0
        self._closed = False
        self._display: _Display | None = None
        self._task_id: Any = None
        if self.mode == "tty":
            self._display = _display_for(self.stream)
            self._task_id = self._display.add(self)
        elif self.mode == "plain":
            extra = f" (total {self._fmt_count(self.total)})" if self.total is not None and self.unit else ""
            self._write(f"[{self.desc}] started{extra}")
            _HEARTBEAT.add(self)

    # ------------------------------------------------------------------------------------------ public API
    def update(self, n: float = 1, postfix: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Advance by ``n`` and merge postfix fields (``postfix`` for names like ``"tok/s"``; ``None`` drops one)."""
        with self._lock:
            if self._closed:
                return
            self.n += n
            self._merge(postfix, fields)
        self._changed()

    def set(self, n: float | None = None, postfix: Mapping[str, Any] | None = None, /, *,
            total: float | None = None, **fields: Any) -> None:
        """Set the absolute count (and optionally a new total) and merge postfix fields."""
        with self._lock:
            if self._closed:
                return
            if n is not None:
                self.n = n
            if total is not None:
                self.total = total if total > 0 else None
            self._merge(postfix, fields)
        self._changed()

    def set_postfix(self, postfix: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Merge postfix fields without changing the count."""
        self.set(None, postfix, **fields)

    def note(self, message: str) -> None:
        """Write one line (above the live display on a terminal; nothing in ``off`` mode)."""
        if self.mode == "tty" and self._display is not None:
            self._display.print(message)
        elif self.mode == "plain":
            self._write(message)

    @property
    def elapsed(self) -> float:
        """Seconds since the reporter was created (frozen at close)."""
        return (self._t_end if self._t_end is not None else _clock()) - self._t0

    def close(self, failed: bool = False) -> None:
        """Finish: remove the live row and write the final summary line (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._t_end = _clock()
            sep = ": " if self.unit else " "
            line = f"[{self.desc}] {'stopped' if failed else 'done'}{sep}{self._stats(final=True)}"
        if self.mode == "tty" and self._display is not None:
            self._display.remove(self, self._task_id, line)
        elif self.mode == "plain":
            _HEARTBEAT.remove(self)
            self._write(line)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)

    # ------------------------------------------------------------------------------------------- internals
    def _merge(self, postfix: Mapping[str, Any] | None, fields: dict[str, Any]) -> None:
        for src in (postfix or {}), fields:
            self.postfix.update(src)  # None hides a field but keeps its place (stable order)

    def _changed(self) -> None:
        if self.mode == "tty" and self._display is not None:
            # _push_lock keeps the pushes in order; rich is never called under self._lock, which its refresh
            # thread takes (rich lock -> self._lock) to render the row
            with self._push_lock:
                with self._lock:
                    n, total = self.n, self.total
                self._display.update(self._task_id, n, total)
        elif self.mode == "plain":
            self._maybe_line(force_time_only=False)

    def _maybe_line(self, force_time_only: bool) -> None:
        with self._lock:
            if self._closed:
                return
            now = _clock()
            due = False
            if not force_time_only and self.total:
                dec = int(self.n * 10 // self.total)
                if 0 < dec < 10 and dec > self._decile:
                    self._decile = dec
                    due = True
            if not due and now - self._last_line >= self.interval:
                due = True
            if not due:
                return
            self._last_line = now
            line = f"[{self.desc}] {self._stats()}"
        self._write(line)

    def _tick(self) -> None:
        """Heartbeat (plain mode): a time-based line when the interval has passed without one."""
        self._maybe_line(force_time_only=True)

    def _write(self, line: str) -> None:
        try:
            say(line, self.stream)
        except (ValueError, OSError):  # stream closed (interpreter exit, captured stream gone)
            pass

    def _fmt_count(self, x: float | None) -> str:
        if x is None:
            return "?"
        return _fmt_bytes(x) if self.unit == "B" else _fmt_num(x)

    def _stats(self, final: bool = False) -> str:
        """Counters, rate, ETA, elapsed and postfix as one string (caller holds ``self._lock`` or a snapshot)."""
        el = max(self.elapsed, 1e-9)
        parts: list[str] = []
        if self.unit:
            rate = self.n / el
            if self.total is not None:
                if self.unit == "B":
                    parts.append(f"{_fmt_bytes(self.n)}/{_fmt_bytes(self.total)}")
                else:
                    parts.append(f"{_fmt_num(self.n)}/{_fmt_num(self.total)} {self.unit}")
                parts.append(f"{min(100.0, 100.0 * self.n / self.total):.0f}%")
            else:
                parts.append(_fmt_bytes(self.n) if self.unit == "B" else f"{_fmt_num(self.n)} {self.unit}")
            parts.append(f"{_fmt_bytes(rate)}/s" if self.unit == "B" else f"{_fmt_value(float(rate))} {self.unit}/s")
            if not final and self.total is not None and rate > 0 and self.n < self.total:
                parts.append(f"ETA {fmt_duration((self.total - self.n) / rate)}")
        parts.append(f"{'in ' if final else 'elapsed '}{fmt_duration(el) if el >= 60 else f'{el:.1f}s'}")
        shown = " ".join(f"{k}={_fmt_value(v)}" for k, v in self.postfix.items() if v is not None)
        if shown:
            parts.append(shown)
        return " ".join(parts)

    def _render_text(self) -> str:
        """Live-row text (called from the display's refresh thread)."""
        with self._lock:
            return self._stats()


def progress(desc: str, total: float | None = None, unit: str | None = "item", *,
             stream: IO[str] | None = None, mode: str | None = None, interval: float | None = None) -> Progress:
    """A new reporter for a ``with`` block (see :class:`Progress` and the module docstring).

    Args:
        desc: What is running.
        total: Expected count, or ``None`` when unknown.
        unit: ``"B"``, a unit name such as ``"item"``/``"row"``, or ``""`` for a phase without a counter.
        stream: Output stream (default ``sys.stdout`` at creation time).
        mode: Force ``tty``, ``plain`` or ``off`` (default: ``$LINKEDQA_PROGRESS``, else auto-detect).
        interval: Seconds between time-based plain lines (default ``$LINKEDQA_PROGRESS_INTERVAL`` or 30).
    """
    return Progress(desc, total, unit, stream=stream, mode=mode, interval=interval)


@contextlib.contextmanager
def phase(desc: str, *, stream: IO[str] | None = None, mode: str | None = None) -> Iterator[Progress]:
    """A step without a counter: a live spinner with elapsed time, or start/heartbeat/``done in`` lines."""
    with progress(desc, None, "", stream=stream, mode=mode) as p:
        yield p


def track(iterable: Iterable[T], desc: str, total: float | None = None, unit: str = "item", *, every: int = 1,
          stream: IO[str] | None = None, mode: str | None = None) -> Iterator[T]:
    """Iterate while reporting progress (``total`` defaults to ``len(iterable)`` when it has one).

    Args:
        iterable: What to iterate.
        desc: What is running.
        total: Expected count (default: ``len(iterable)`` if defined).
        unit: Unit name.
        every: Report once per this many items (keeps cheap loops cheap).
        stream: Output stream (default ``sys.stdout``).
        mode: Force a mode (see :func:`resolve_mode`).
    """
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with progress(desc, total, unit, stream=stream, mode=mode) as p:
        k = 0
        for x in iterable:
            yield x
            k += 1
            if k >= every:
                p.update(k)
                k = 0
        if k:
            p.update(k)


# ---------------------------------------------------------------------------------------- plain heartbeat
class _Heartbeat:
    """One daemon thread per process that gives open plain reporters their time-based lines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reps: set[Progress] = set()
        self._thread: threading.Thread | None = None

    def add(self, rep: Progress) -> None:
        with self._lock:
            self._reps.add(rep)
            if self._thread is None and HEARTBEAT_S > 0:
                self._thread = threading.Thread(target=self._run, name="linkedqa-progress", daemon=True)
                self._thread.start()

    def remove(self, rep: Progress) -> None:
        with self._lock:
            self._reps.discard(rep)

    def _run(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S if HEARTBEAT_S > 0 else 1.0)
            with self._lock:
                reps = list(self._reps)
                if not reps:
                    self._thread = None
                    return
            for r in reps:
                r._tick()


_HEARTBEAT = _Heartbeat()


def say(line: str, stream: IO[str] | None = None) -> None:
    """Write ``line`` and its newline to ``stream`` (default stdout) in one call, flushed.

    For the lines that tasks print while other threads, or shard worker processes sharing the stream, print
    theirs. ``print`` writes the text and the newline in two calls and, with ``PYTHONUNBUFFERED`` (the Makefile
    sets it), each is its own system call, so another line could land between them (``make demo``'s log had
    ``claims=22,064[stage descriptions.en.tsv.gz ...`` on one line). One write of a line reaches a pipe whole
    below ``PIPE_BUF`` (4 KiB); within this process the progress lines' lock orders them.
    """
    out = sys.stdout if stream is None else stream
    if out is None:  # no stdout at all (pythonw, a closed descriptor): print() writes nothing either
        return
    with _WRITE_LOCK:
        out.write(line + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------- tty live display
class _Display:
    """A ``rich`` live display shared by the open tty reporters of one stream (started/stopped on demand)."""

    def __init__(self, stream: IO[str]):

        class _Stats(ProgressColumn):
            def render(self, task):  # noqa: ANN001, ANN202 - rich's column protocol
                rep = task.fields.get("rep")
                return Text(rep._render_text() if rep is not None else "")

        self.console = Console(file=stream, force_terminal=True)
        self.rich = RichProgress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24), _Stats(),
            console=self.console, transient=True, refresh_per_second=REFRESH_PER_S,
        )
        self.active = 0

    def add(self, rep: Progress) -> Any:
        with _DISPLAY_LOCK:
            task_id = self.rich.add_task(rep.desc, total=rep.total, rep=rep)
            self.active += 1
            if self.active == 1:
                self.rich.start()
            return task_id

    def update(self, task_id: Any, n: float, total: float | None) -> None:
        self.rich.update(task_id, completed=n, total=total)

    def print(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def remove(self, rep: Progress, task_id: Any, final_line: str) -> None:
        with _DISPLAY_LOCK:
            self.rich.remove_task(task_id)
            self.rich.refresh()
            self.print(final_line)
            self.active -= 1
            if self.active == 0:
                self.rich.stop()


_DISPLAYS: dict[int, _Display] = {}
_DISPLAY_LOCK = threading.RLock()


def _display_for(stream: IO[str]) -> _Display:
    with _DISPLAY_LOCK:
        d = _DISPLAYS.get(id(stream))
        if d is None or d.console.file is not stream:
            d = _DISPLAYS[id(stream)] = _Display(stream)
        return d


# -------------------------------------------------------------------------------------------- vLLM hook
#: ``callback(done_requests, total_requests, output_tokens, elapsed_s)`` of the running batch, per thread.
BatchCallback = Callable[[int, int, int, float], None]
_BATCH = threading.local()
_SPEED = re.compile(r"output:\s*([0-9.]+)\s*toks/s")


@contextlib.contextmanager
def llm_batch_progress(callback: BatchCallback) -> Iterator[None]:
    """Route :func:`vllm_tqdm` bars created in this thread to ``callback`` for the ``with`` block."""
    prev = getattr(_BATCH, "callback", None)
    _BATCH.callback = callback
    try:
        yield
    finally:
        _BATCH.callback = prev


class VLLMBatchBar:
    """The tqdm-like object vLLM's ``LLM._run_engine`` drives (``update``, ``postfix``, ``format_dict``).

    vLLM sets ``postfix = "est. speed input: X toks/s, output: Y toks/s"`` with ``Y = out_tokens / elapsed``
    (``elapsed`` read from ``format_dict`` just before) and then calls ``update(n)`` per finished request, so
    the generated tokens are recovered as ``Y * elapsed``. Without a callback installed
    (:func:`llm_batch_progress`) it is silent (as ``use_tqdm=False``), so direct ``generate`` calls in
    benchmarks and notebooks print nothing new.
    """

    def __init__(self, total: int | None = None, desc: str | None = None, callback: BatchCallback | None = None):
        self.total = int(total or 0)
        self.n = 0
        self.desc = desc or "LLM batch"
        self.output_tokens = 0
        self._t0 = _clock()
        self._elapsed: float | None = None
        self._postfix = ""
        self._callback = callback

    @property
    def format_dict(self) -> dict[str, Any]:
        """``elapsed`` (constant between two ``update`` calls, so vLLM's two reads agree), ``n``, ``total``."""
        if self._elapsed is None:
            self._elapsed = max(_clock() - self._t0, 1e-6)
        return {"elapsed": self._elapsed, "n": self.n, "total": self.total}

    @property
    def postfix(self) -> str:
        """The last postfix vLLM set."""
        return self._postfix

    @postfix.setter
    def postfix(self, value: Any) -> None:
        self._postfix = str(value or "")
        m = _SPEED.search(self._postfix)
        if m and self._elapsed is not None:
            self.output_tokens = int(round(float(m.group(1)) * self._elapsed))

    def update(self, n: int = 1) -> None:
        """``n`` more requests finished."""
        self.n += n
        elapsed = max(_clock() - self._t0, 1e-6)
        self._elapsed = None
        if self._callback is not None:
            self._callback(self.n, self.total, self.output_tokens, elapsed)

    def close(self) -> None:
        """End of the batch (the runtime reports the exact counts once ``generate`` returns)."""

    def refresh(self, *args: Any, **kwargs: Any) -> None:
        """No-op (the display refreshes itself)."""

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        """No-op (tqdm compatibility)."""

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """No-op (tqdm compatibility)."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Same as assigning ``postfix``."""
        self.postfix = s

    def __enter__(self) -> VLLMBatchBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def vllm_tqdm(iterable: Any = None, *args: Any, **kwargs: Any) -> Any:
    """Factory for vLLM's ``use_tqdm`` (``llm.chat(convs, params, use_tqdm=vllm_tqdm)``).

    vLLM calls it twice per ``chat``: with the conversations while rendering (returned unchanged: rendering
    is fast) and with ``total=<requests>`` for the engine loop (a :class:`VLLMBatchBar`).
    """
    if iterable is not None:
        return iterable
    return VLLMBatchBar(kwargs.get("total"), kwargs.get("desc"), getattr(_BATCH, "callback", None))


# ------------------------------------------------------------------------------------- worker processes
def worker_init(parent_mode: str) -> None:
    """``ProcessPoolExecutor`` initializer: plain lines in workers when the parent draws live bars.

    Several processes drawing their own live display on one terminal would overwrite each other; plain lines
    (at least every 10 s there, unless ``LINKEDQA_PROGRESS_INTERVAL`` says otherwise) interleave cleanly.

    Args:
        parent_mode: :func:`resolve_mode` of the parent process.
    """
    if parent_mode == "tty":
        os.environ[ENV_MODE] = "plain"
        os.environ.setdefault(ENV_INTERVAL, "10")
    else:
        os.environ[ENV_MODE] = parent_mode


# ----------------------------------------------------------------------------------------- byte counting
class ByteCounter:
    """Bytes read so far from files opened with :func:`tasks.dumps.base.open_text_stream` while it is active.

    Set by :func:`count_reads` for the current thread; the readers' files add what they read from disk
    (compressed bytes for .gz/.bz2/.xz), one addition per buffer fill (never per line).
    """

    def __init__(self) -> None:
        self.bytes = 0


_READS = threading.local()


@contextlib.contextmanager
def count_reads() -> Iterator[ByteCounter]:
    """Count the bytes read by input files opened in this thread during the block (see :class:`ByteCounter`)."""
    prev = getattr(_READS, "counter", None)
    c = _READS.counter = ByteCounter()
    try:
        yield c
    finally:
        _READS.counter = prev


def active_byte_counter() -> ByteCounter | None:
    """The :class:`ByteCounter` of the current thread, if :func:`count_reads` is active."""
    return getattr(_READS, "counter", None)

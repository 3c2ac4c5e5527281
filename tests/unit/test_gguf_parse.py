"""The model conversion parses its GGUF file once (``tasks.llm.models._one_gguf_parse``).

transformers' tokenizer, config and weight loaders each call ``load_gguf_checkpoint``, which builds a new
``gguf.GGUFReader``; parsing the embedded model's metadata takes ~10 s on 2 cores, so the three parses were about
half of a conversion. The file here is a small GGUF written with gguf's own writer (a few fields and tensors): the
test is about the reader cache, and parsing the real 491 MB file would cost ~10 s per parse. On the real file the
change was checked by converting it with and without the cache (byte-identical ``model.safetensors``, sha256
``df8f6054...``).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from tasks.llm import models


def _tiny_gguf(path: Path) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_block_count(1)
    writer.add_token_list(["a", "b", "ab"])
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_one_reader_per_file_within_the_block_and_the_class_restored_after(tmp_path: Path):
    import gguf

    real = gguf.GGUFReader
    a, b = _tiny_gguf(tmp_path / "a.gguf"), _tiny_gguf(tmp_path / "b.gguf")
    built: list[str] = []

    class Counting(real):
        def __init__(self, path, mode="r"):
            built.append(str(path))
            super().__init__(path, mode)

    gguf.GGUFReader = Counting
    try:
        with models._one_gguf_parse():
            first = gguf.GGUFReader(a)
            assert gguf.GGUFReader(str(a)) is first and gguf.GGUFReader(tmp_path / "." / "a.gguf") is first
            other = gguf.GGUFReader(b)
            assert other is not first
        assert gguf.GGUFReader is Counting  # whatever was there before the block is back
    finally:
        gguf.GGUFReader = real
    assert built == [str(a), str(b)]
    # the cached reader is a complete one: the same fields and tensors as a fresh parse
    fresh = real(a)
    assert list(first.fields) == list(fresh.fields)
    assert [t.name for t in first.tensors] == [t.name for t in fresh.tensors] == ["token_embd.weight"]
    np.testing.assert_array_equal(first.tensors[0].data, fresh.tensors[0].data)


def test_the_class_is_restored_when_the_block_fails(tmp_path: Path):
    import gguf

    real = gguf.GGUFReader
    with pytest.raises(RuntimeError, match="boom"), models._one_gguf_parse():
        assert gguf.GGUFReader is not real
        raise RuntimeError("boom")
    assert gguf.GGUFReader is real


def test_transformers_looks_the_reader_up_at_call_time():
    """The cache works because ``load_gguf_checkpoint`` imports ``GGUFReader`` from ``gguf`` on each call; a
    transformers version that binds it at import would silently parse three times again: this fails first."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    src = inspect.getsource(load_gguf_checkpoint)
    assert "from gguf import GGUFReader" in src and "GGUFReader(gguf_checkpoint_path)" in src


def test_transformers_bars_are_off_within_the_conversion_and_restored_after():
    """The conversion's phases report loading and saving; transformers' own tqdm bars would run into their lines
    in a log. A caller that had turned them off keeps them off."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    try:
        for before in (True, False):
            (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
            with models._no_transformers_bars():
                assert not hf_logging.is_progress_bar_enabled()
            assert hf_logging.is_progress_bar_enabled() is before
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()

"""DBP15K loaders (``dbp15k-fr-en``, ``dbp15k-ja-en``, ``dbp15k-zh-en``): one question per gold link.

Inputs: ``<data_root>/dbp15k/<pair>/`` (see :mod:`tasks.datasets.ea_kg`). Outputs: ``questions`` rows, task ``ea``:

* ``question_id`` = the source (KG1) entity id, e.g. ``"fr:0"``; ``question`` = its name (from the IRI);
* ``gold_entities`` = ``[target (KG2) entity id]``, e.g. ``["en:10500"]``;
* ``meta`` = ``{source_iri, target_iri, pair, link_line, split_seed}``;
* splits: the standard 30% ``train`` / 70% ``test`` (4,500 / 10,500 links), a seeded shuffle of the links in
  file order (``SPLIT_SEED``), so every run and every method sees the same split.

The two graphs themselves are written as KB-like tables beside the stored dataset version by
:func:`tasks.datasets.ea_kg.write_kg_tables` (the methods call ``tasks.datasets.store.ensure_kg`` in ``build_tools``).
"""

from __future__ import annotations

import random
from pathlib import Path

from tasks.datasets.base import DatasetBuilder, LoadedDataset, question_row
from tasks.datasets.ea_kg import read_pair_cached

SPLIT_SEED = 2023
TRAIN_FRACTION = 0.3
DATASETS: dict[str, str] = {"dbp15k-fr-en": "fr_en", "dbp15k-ja-en": "ja_en", "dbp15k-zh-en": "zh_en"}
DESCRIPTIONS: dict[str, str] = {
    name: f"DBP15K {pair.replace('_', '-').upper()}: 15,000 cross-lingual entity links, 30/70 train/test (EA)"
    for name, pair in DATASETS.items()
}


def split_of(n_links: int, seed: int = SPLIT_SEED, train_fraction: float = TRAIN_FRACTION) -> list[str]:
    """Split label per link (file order): a seeded shuffle, the first ``train_fraction`` is ``train``."""
    order = list(range(n_links))
    random.Random(seed).shuffle(order)
    n_train = int(round(n_links * train_fraction))
    labels = ["test"] * n_links
    for i in order[:n_train]:
        labels[i] = "train"
    return labels


def load_pair(name: str, data_root: Path) -> LoadedDataset:
    """Load one DBP15K pair as questions (see the module docstring).

    Raises:
        FileNotFoundError, tasks.datasets.ea_kg.KGFileError: Missing or unreadable raw files.
    """
    pair = DATASETS[name]
    ap = read_pair_cached(data_root, pair)
    b = DatasetBuilder(name, ["train", "test"])
    folder = Path(data_root) / "dbp15k" / pair
    for f in ("ent_ids_1.gz", "ent_ids_2.gz", "triples_1.gz", "triples_2.gz", "ref_ent_ids.gz"):
        b.source(folder / f)
    for file, line, reason, text in ap.rejects:
        b.reject(file, reason, text, line=line)
    labels = split_of(len(ap.links))
    for n, ((src, tgt), split) in enumerate(zip(ap.links, labels, strict=True)):
        s_row, t_row = ap.kg1.index[src], ap.kg2.index[tgt]
        row = question_row(
            name, split, src, ap.kg1.names[s_row],
            gold_entities=[tgt],
            meta={"source_iri": ap.kg1.iris[s_row], "target_iri": ap.kg2.iris[t_row], "pair": pair,
                  "link_index": n, "split_seed": SPLIT_SEED},
        )
        b.add(row, source_file=folder / "ref_ent_ids.gz", where=f"link {n}")
    return b.result()


def _loader(name: str):
    def load(data_root: Path) -> LoadedDataset:
        return load_pair(name, data_root)

    load.__doc__ = f"Load ``{name}`` (see :func:`load_pair`)."
    return load


LOADERS = {name: _loader(name) for name in DATASETS}

"""DBP15K loaders and the KB-like tables of the two graphs, on the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage.parquet_io import read_table
from tasks.datasets.dbp15k import DATASETS, SPLIT_SEED, load_pair, split_of
from tasks.datasets.ea_kg import kg_dir, name_from_iri, read_kg_tables, read_pair
from tasks.datasets.registry import dataset_task, known_datasets
from tasks.datasets.store import ensure_kg


def test_names_from_iris():
    assert name_from_iri("http://fr.dbpedia.org/resource/Saint-Isidore_(Roussillon)") == "Saint-Isidore (Roussillon)"
    assert name_from_iri("http://dbpedia.org/resource/Caf%C3%A9_society") == "Café society"
    assert name_from_iri("http://zh.dbpedia.org/resource/民族陣線_(法國)") == "民族陣線 (法國)"


def test_split_is_seeded_30_70():
    labels = split_of(15000)
    assert labels.count("train") == 4500 and labels.count("test") == 10500
    assert labels == split_of(15000, SPLIT_SEED) and labels != split_of(15000, SPLIT_SEED + 1)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_pair_loads_15000_links(name: str, data_root: Path):
    ds = load_pair(name, data_root)
    assert ds.counts() == {"train": 4500, "test": 10500}
    assert ds.rejects == [] and len(ds.sources) == 5
    assert dataset_task(name) == "ea" and name in known_datasets()
    lang = DATASETS[name][:2]
    rows = list(ds.rows())
    assert len({r["question_id"] for r in rows}) == 15000
    for r in rows[:50]:
        assert r["question_id"].startswith(f"{lang}:") and len(r["gold_entities"]) == 1
        assert r["gold_entities"][0].startswith("en:") and r["question"]
        meta = json.loads(r["meta"])
        assert meta["source_iri"].startswith(f"http://{lang}.dbpedia.org/resource/")
        assert meta["target_iri"].startswith("http://dbpedia.org/resource/")


def test_kg_tables_round_trip(home: Path, data_root: Path):
    raw = read_pair(data_root, "fr_en")
    assert (len(raw.kg1), len(raw.kg2), raw.kg1.n_triples, raw.kg2.n_triples) == (19661, 19993, 105998, 115722)
    ensure_kg("dbp15k-fr-en", home, data_root)
    folder = kg_dir(next((home / "datasets" / "dbp15k-fr-en").iterdir()))
    stored = read_kg_tables(folder.parent, "fr_en")
    for a, b in ((raw.kg1, stored.kg1), (raw.kg2, stored.kg2)):
        assert a.ids == b.ids and a.iris == b.iris and a.names == b.names
        assert sorted(a.triples) == sorted(b.triples)
    ents = read_table(folder / "entities", "entities")
    assert ents.num_rows == 19661 + 19993
    claims = read_table(folder / "claims", "claims", ["property"])
    props = claims["property"].to_pylist()
    assert props.count("iri") == 19661 + 19993 and len(props) - props.count("iri") == 105998 + 115722
    # second call reads the stored tables
    assert ensure_kg("dbp15k-fr-en", home, data_root).kg2.n_triples == 115722

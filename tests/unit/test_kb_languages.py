"""Label languages as a build option (``linkedqa kb build --languages``), on the real dump samples.

The readers keep only the chosen languages' ``labels`` / ``aliases`` rows and nothing else changes: the
``entities`` / ``properties`` / ``claims`` / ``rejects`` rows are those of an all-languages read (including the
label of an entity that has no ``en``/``mul`` label: opentapioca's ``short_stream`` has 120 such items). The choice
is part of the KB version; ``all`` keeps the version every earlier build had.
"""

from __future__ import annotations

import bz2
import collections
import gzip
from pathlib import Path

import orjson
import pytest

from tasks.dumps.base import RowBlock
from tasks.dumps.triples import read_codex_json, read_kgtk, read_label_file, read_ntriples
from tasks.dumps.wikidata_json import read_entity_file, read_wikidata_json
from tasks.kb.plan import DEFAULT_LANGUAGES, make_plan, parse_languages, plan_from_inputs, sample_inputs

DUMP_FILES = [
    "wikidata-entities/wikibase-dump-filter/entities.gz",
    "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2",
    "wikidata-entities/opentapioca/short_stream.json.bz2",
]
ENTITY_FILES = [
    "wikidata-entities/qwikidata/wd_Q42.json",
    "wikidata-entities/opentapioca/wbgetentities_response.json.gz",
    "wikidata-entities/wikibase-sdk/P8098.json",
]
CHOICES = [("en", "mul"), ("en",), ("fr",), ("de", "ja", "zh-hans")]
LANG_TABLES = ("labels", "aliases")


def _by_table(rows) -> dict[str, list[dict]]:
    tables: dict[str, list[dict]] = collections.defaultdict(list)
    for table, row in rows:
        for r in row.rows() if type(row) is RowBlock else [row]:
            tables[table].append(r)
    return tables


def _key(r: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in r.items()))


def _check_filtered(everything: dict[str, list[dict]], some: dict[str, list[dict]], langs: tuple[str, ...]) -> None:
    """``some`` is ``everything`` with only the ``langs`` rows of the language tables."""
    for table in set(everything) | set(some):
        if table in LANG_TABLES:
            want = sorted(_key(r) for r in everything[table] if r["lang"] in langs)
            assert sorted(_key(r) for r in some.get(table, [])) == want, table
        else:
            assert some[table] == everything[table], table


def test_parse_languages() -> None:
    assert parse_languages("en,mul") == parse_languages(" MUL, en ,en") == ("en", "mul")
    assert parse_languages(["fr", "en"]) == ("en", "fr")
    assert parse_languages("zh-hans,be-tarask,tokipona,zh-min-nan") == ("be-tarask", "tokipona", "zh-hans",
                                                                         "zh-min-nan")
    assert parse_languages("all") is parse_languages("ALL") is parse_languages(None) is None
    for bad, says in (("", "expected comma-separated"), ("en,", "expected comma-separated"),
                      ("all,en", "cannot be combined"), ("en_US", "'en_US': not a Wikidata language code"),
                      ("e", "not a Wikidata language code"), ("fr;de", "not a Wikidata language code"),
                      ("en-", "not a Wikidata language code"), ([], "expected comma-separated")):
        with pytest.raises(ValueError, match=says):
            parse_languages(bad)


@pytest.fixture(scope="module")
def everything(data_root: Path) -> dict[str, dict[str, list[dict]]]:
    return {f: _by_table(read_wikidata_json(data_root / f)) for f in DUMP_FILES}


@pytest.mark.parametrize("langs", [("en", "mul"), ("fr",), ("de", "ja", "zh-hans")], ids=",".join)
@pytest.mark.parametrize("name", DUMP_FILES)
def test_dump_reader_keeps_only_the_chosen_languages(data_root: Path, everything, name: str,
                                                     langs: tuple[str, ...]) -> None:
    every = everything[name]
    fast = _by_table(read_wikidata_json(data_root / name, languages=langs))
    _check_filtered(every, fast, langs)
    # the typed fast path (labels kept raw, only the chosen ones decoded), its bulk label blocks and the orjson
    # reference path give the same rows
    assert _by_table(read_wikidata_json(data_root / name, languages=langs, blocks=True)) == fast
    assert _by_table(read_wikidata_json(data_root / name, languages=langs, fast=False)) == fast
    assert {r["lang"] for r in fast["labels"]} <= set(langs)


def test_entities_without_an_english_label_keep_theirs(data_root: Path, everything) -> None:
    """An item labelled only in other languages keeps its label (the first language's) when those are not kept."""
    name = "wikidata-entities/opentapioca/short_stream.json.bz2"
    foreign = []  # (qid, its first label) of every line whose labels have neither en nor mul
    with bz2.open(data_root / name) as fh:
        for line in fh:
            labels = orjson.loads(line).get("labels") or {}
            if labels and not {"en", "mul"} & set(labels):
                foreign.append((orjson.loads(line)["id"], next(iter(labels.values()))["value"]))
    assert len(foreign) == 120
    kept = _by_table(read_wikidata_json(data_root / name, languages=DEFAULT_LANGUAGES))
    qids = {q for q, _ in foreign}
    assert [(e["qid"], e["label"]) for e in kept["entities"] if e["qid"] in qids] == foreign
    assert not qids & {r["qid"] for r in kept["labels"]}
    assert len(everything[name]["labels"]) > 2 * len(kept["labels"])


@pytest.mark.parametrize("name", ENTITY_FILES)
def test_entity_file_reader_keeps_only_the_chosen_languages(data_root: Path, name: str) -> None:
    every = _by_table(read_entity_file(data_root / name))
    for langs in CHOICES:
        _check_filtered(every, _by_table(read_entity_file(data_root / name, languages=langs)), langs)


def test_kgtk_label_and_codex_readers(data_root: Path) -> None:
    """English-only inputs: their ``en`` rows are kept with ``en``, dropped without it; the entity rows stay."""
    for read in (
        lambda **kw: read_kgtk(data_root / "kgtk-arnold/labels.en.tsv.gz", **kw),
        lambda **kw: read_kgtk(data_root / "kgtk-arnold/aliases.en.tsv.gz", **kw),
        lambda **kw: read_label_file(data_root / "literallywikidata/Entities/entity_labels_en.txt", **kw),
        lambda **kw: read_label_file(data_root / "literallywikidata/Entities/entity_aliases_en.txt", **kw),
        lambda **kw: read_codex_json(data_root / "codex/types/en/types.json", **kw),
    ):
        every = _by_table(read())
        assert sum(len(every.get(t, [])) for t in LANG_TABLES) > 0
        for langs in (DEFAULT_LANGUAGES, ("fr",)):
            _check_filtered(every, _by_table(read(languages=langs)), langs)


def test_ntriples_labels_in_many_languages(data_root: Path, tmp_path: Path) -> None:
    """Truthy-style N-Triples written from the real dump sample's labels (every language) and English aliases."""
    lines = []
    with gzip.open(data_root / DUMP_FILES[0]) as fh:
        for line in fh:
            line = line.strip().rstrip(b",")
            if line in (b"[", b"]", b""):
                continue
            obj = orjson.loads(line)
            subj = f"<http://www.wikidata.org/entity/{obj['id']}>"
            for lang, t in obj["labels"].items():
                text = orjson.dumps(t["value"]).decode()
                lines.append(f"{subj} <http://www.w3.org/2000/01/rdf-schema#label> {text}@{lang} .")
            for a in obj.get("aliases", {}).get("en", []):
                text = orjson.dumps(a["value"]).decode()
                lines.append(f"{subj} <http://www.w3.org/2004/02/skos/core#altLabel> {text}@en .")
    path = tmp_path / "labels.nt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    every = _by_table(read_ntriples(path))
    assert len({r["lang"] for r in every["labels"]}) > 100 and every["aliases"] and not every.get("rejects")
    for langs in CHOICES:
        _check_filtered(every, _by_table(read_ntriples(path, languages=langs)), langs)


def test_the_choice_is_part_of_the_kb_version(data_root: Path) -> None:
    specs = [s for s in sample_inputs(data_root) if s.kind in ("wikidata-json", "entity-file")]
    every = make_plan("t", specs)
    assert "languages" not in every.config and all(s.languages is None for s in every.inputs)
    assert make_plan("t", specs, languages="all").version == every.version  # the version builds had before
    en_mul = make_plan("t", specs, languages="en,mul")
    assert en_mul.config["languages"] == "en,mul" and all(s.languages == ("en", "mul") for s in en_mul.inputs)
    assert make_plan("t", specs, languages=["MUL", "en"]).version == en_mul.version  # one choice, one version
    versions = {every.version, en_mul.version, make_plan("t", specs, languages="en").version,
                make_plan("t", specs, languages="en,fr").version}
    assert len(versions) == 4
    assert [s.key for s in en_mul.inputs] == [s.key for s in every.inputs]


def test_defaults_sample_all_dumps_en_mul(data_root: Path) -> None:
    """The sample KB keeps every language (so its version is the one it always had); a dump build keeps en,mul."""
    sample = plan_from_inputs(sample=True, data_root=data_root)
    assert sample.version == make_plan("sample", sample_inputs(data_root)).version
    assert "languages" not in sample.config
    q42 = [str(data_root / ENTITY_FILES[0])]
    dump = plan_from_inputs(wikidata=q42, name="q42")
    assert dump.config["languages"] == ",".join(DEFAULT_LANGUAGES) == "en,mul"
    assert dump.version == plan_from_inputs(wikidata=q42, name="q42", languages="en,mul").version
    assert dump.version != plan_from_inputs(wikidata=q42, name="q42", languages="all").version
    assert plan_from_inputs(sample=True, data_root=data_root, languages="en,mul").version != sample.version
    with pytest.raises(ValueError, match="not a Wikidata language code"):  # before any input is looked at
        plan_from_inputs(wikidata=["/nonexistent.json"], languages="english,en_GB")

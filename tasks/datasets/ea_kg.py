"""The two knowledge graphs of a DBP15K pair: raw files -> KB-like tables -> in-memory graphs.

Inputs (under ``<data_root>/dbp15k/<pair>/``, JAPE/GCN-Align copies): ``ent_ids_1.gz`` / ``ent_ids_2.gz``
(``id<TAB>DBpedia IRI``; KG1 is the non-English side), ``triples_1.gz`` / ``triples_2.gz``
(``head<TAB>relation<TAB>tail``, numeric ids), ``ref_ent_ids.gz`` (15,000 gold links ``id1<TAB>id2``).
This copy has **no attribute triples and no relation names**: relations are shown as ``r<id>``.

Outputs:

* :class:`AlignmentPair` (two :class:`KG` objects + the gold links) read from the raw files
  (:func:`read_pair`) or from the stored tables (:func:`read_kg_tables`);
* KB-like Parquet tables written beside the dataset version (:func:`write_kg_tables`), reusing the declared
  ``entities`` and ``claims`` schemas (no new table kind):
  ``datasets/<name>/<version>/kg/entities/`` — ``qid`` = entity id (``"fr:0"``, ``"en:10500"``), ``label`` =
  name derived from the IRI (percent-decoded, ``_`` -> space), ``enwiki_title`` for the English side (DBpedia
  resource names are Wikipedia titles), ``source`` = the ``ent_ids`` file;
  ``datasets/<name>/<version>/kg/claims/`` — one ``iri`` claim per entity (``object_value`` = the IRI,
  datatype ``url``) and one claim per relation triple (``property`` = ``r<id>``, ``object_qid`` = tail id,
  datatype ``entity``).

Entity ids are ``"<lang>:<numeric id>"``; the numeric ids of DBP15K are unique across both graphs.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from storage import layout
from storage.manifest import read_manifest, write_manifest
from storage.parquet_io import read_table, write_table

PAIRS: dict[str, tuple[str, str]] = {"fr_en": ("fr", "en"), "ja_en": ("ja", "en"), "zh_en": ("zh", "en")}
RAW_FILES = ("ent_ids_1.gz", "ent_ids_2.gz", "triples_1.gz", "triples_2.gz", "ref_ent_ids.gz")
KG_FORMAT = 1
IRI_PROPERTY = "iri"


class KGFileError(ValueError):
    """A DBP15K file that cannot be read (missing, truncated gzip, dangling ids)."""


def entity_id(lang: str, num: int | str) -> str:
    """The string id of a DBP15K entity: ``"<lang>:<numeric id>"``."""
    return f"{lang}:{int(num)}"


def name_from_iri(iri: str) -> str:
    """Human-readable name of a DBpedia resource IRI (percent-decoded, underscores as spaces).

    Example:
        ``http://fr.dbpedia.org/resource/Saint-Isidore_(Roussillon)`` -> ``Saint-Isidore (Roussillon)``.
    """
    tail = iri.rsplit("/resource/", 1)[-1] if "/resource/" in iri else iri.rstrip("/").rsplit("/", 1)[-1]
    return " ".join(unquote(tail).replace("_", " ").split())


@dataclass
class KG:
    """One knowledge graph: entities (row index = position) and relation triples over row indexes.

    Attributes:
        lang: Language code of the graph (``fr``, ``ja``, ``zh``, ``en``).
        ids: Entity ids (``"fr:0"``).
        iris: DBpedia IRIs, aligned with ``ids``.
        names: Names derived from the IRIs, aligned with ``ids``.
        triples: ``(head row, relation id, tail row)``.
    """

    lang: str
    ids: list[str]
    iris: list[str]
    names: list[str]
    triples: list[tuple[int, int, int]]
    index: dict[str, int] = field(init=False, repr=False)
    out_edges: list[list[tuple[int, int]]] = field(init=False, repr=False)
    in_edges: list[list[tuple[int, int]]] = field(init=False, repr=False)
    rel_freq: Counter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {e: i for i, e in enumerate(self.ids)}
        self.out_edges = [[] for _ in self.ids]
        self.in_edges = [[] for _ in self.ids]
        for h, r, t in self.triples:
            self.out_edges[h].append((r, t))
            self.in_edges[t].append((r, h))
        self.rel_freq = Counter(r for _, r, _ in self.triples)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"KG({self.lang!r}, entities={len(self.ids)}, triples={len(self.triples)})"

    @property
    def n_triples(self) -> int:
        """Number of relation triples (``N`` of Eq. 2)."""
        return len(self.triples)

    def entity_triples(self, row: int) -> list[tuple[int, int, int]]:
        """Relation triples touching entity ``row`` (outgoing then incoming), as ``(head, rel, tail)`` rows."""
        return [(row, r, t) for r, t in self.out_edges[row]] + [(h, r, row) for r, h in self.in_edges[row]]

    def neighbours(self, row: int) -> list[int]:
        """Distinct neighbour rows of entity ``row`` (either direction), first-seen order."""
        seen: dict[int, None] = {}
        for _, t in self.out_edges[row]:
            seen.setdefault(t, None)
        for _, h in self.in_edges[row]:
            seen.setdefault(h, None)
        seen.pop(row, None)
        return list(seen)


@dataclass
class AlignmentPair:
    """A DBP15K pair: source graph (KG1, non-English), target graph (KG2, English), gold links.

    Attributes:
        pair: ``fr_en``, ``ja_en`` or ``zh_en``.
        kg1: Source graph.
        kg2: Target graph.
        links: Gold links ``(kg1 id, kg2 id)`` in file order (empty when read from stored tables).
        rejects: ``(file, line, reason, text)`` for lines that could not be read.
    """

    pair: str
    kg1: KG
    kg2: KG
    links: list[tuple[str, str]] = field(default_factory=list)
    rejects: list[tuple[str, int, str, str]] = field(default_factory=list)


def pair_folder(data_root: Path, pair: str) -> Path:
    """Raw folder of a pair under the data root."""
    if pair not in PAIRS:
        raise KeyError(f"unknown DBP15K pair {pair!r}; known: {', '.join(PAIRS)}")
    return Path(data_root) / "dbp15k" / pair


def raw_files(data_root: Path, pair: str) -> list[Path]:
    """The five raw files of a pair (all must exist).

    Raises:
        FileNotFoundError: Naming the missing file.
    """
    folder = pair_folder(data_root, pair)
    out = []
    for name in RAW_FILES:
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"DBP15K file missing: {p} (set LINKEDQA_DATA to the shared data folder)")
        out.append(p)
    return out


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if line.strip():
                    yield n, line.split("\t")
    except (EOFError, OSError, zlib.error) as exc:
        raise KGFileError(f"{path}: cannot read gzip stream ({exc})") from exc


def read_pair(data_root: Path, pair: str) -> AlignmentPair:
    """Read both graphs and the gold links of a pair from the raw files.

    Malformed lines (wrong field count, non-integer ids, triples or links naming unknown entities) are
    skipped and listed in ``rejects``.

    Raises:
        FileNotFoundError, KGFileError: Missing or unreadable files.
    """
    f_e1, f_e2, f_t1, f_t2, f_ref = raw_files(data_root, pair)
    langs = PAIRS[pair]
    rejects: list[tuple[str, int, str, str]] = []
    num_to_id: dict[int, str] = {}
    kgs = []
    for lang, f_ent, f_tri in ((langs[0], f_e1, f_t1), (langs[1], f_e2, f_t2)):
        ids, iris, names = [], [], []
        for n, parts in _lines(f_ent):
            if len(parts) != 2 or not parts[0].strip().isdigit() or not parts[1].strip():
                rejects.append((str(f_ent), n, "expected 'id<TAB>IRI'", "\t".join(parts)[:200]))
                continue
            num, iri = int(parts[0]), parts[1].strip()
            if num in num_to_id:
                rejects.append((str(f_ent), n, f"duplicate entity id {num}", "\t".join(parts)[:200]))
                continue
            eid = entity_id(lang, num)
            num_to_id[num] = eid
            ids.append(eid)
            iris.append(iri)
            names.append(name_from_iri(iri))
        index = {e: i for i, e in enumerate(ids)}
        triples = []
        for n, parts in _lines(f_tri):
            try:
                h, r, t = (int(x) for x in parts)
            except ValueError:
                reason = "expected 'head<TAB>relation<TAB>tail' integers"
                rejects.append((str(f_tri), n, reason, "\t".join(parts)[:200]))
                continue
            hi, ti = index.get(num_to_id.get(h, "")), index.get(num_to_id.get(t, ""))
            if hi is None or ti is None:
                rejects.append((str(f_tri), n, "triple names an entity outside this graph", "\t".join(parts)[:200]))
                continue
            triples.append((hi, r, ti))
        kgs.append(KG(lang, ids, iris, names, triples))
    links = []
    for n, parts in _lines(f_ref):
        try:
            a, b = (int(x) for x in parts)
        except ValueError:
            rejects.append((str(f_ref), n, "expected 'id1<TAB>id2' integers", "\t".join(parts)[:200]))
            continue
        ea, eb = num_to_id.get(a), num_to_id.get(b)
        if ea is None or eb is None or ea not in kgs[0].index or eb not in kgs[1].index:
            rejects.append((str(f_ref), n, "link names an unknown entity", "\t".join(parts)[:200]))
            continue
        links.append((ea, eb))
    return AlignmentPair(pair, kgs[0], kgs[1], links, rejects)


def read_pair_cached(data_root: Path, pair: str) -> AlignmentPair:
    """:func:`read_pair`, memoised per process on the files' paths, sizes and mtimes (loader and methods share it).

    The result is shared: callers must not mutate it.
    """
    files = raw_files(data_root, pair)
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _read_pair_memo(str(Path(data_root)), pair, stamp)


@functools.lru_cache(maxsize=3)
def _read_pair_memo(data_root: str, pair: str, _stamp: tuple) -> AlignmentPair:
    return read_pair(Path(data_root), pair)


# ------------------------------------------------------------------------------------------ KB-like tables
def kg_dir(dataset_folder: Path) -> Path:
    """Folder of the KG tables beside a dataset version."""
    return Path(dataset_folder) / "kg"


def write_kg_tables(ap: AlignmentPair, dataset_folder: Path, sources: list[Path]) -> Path:
    """Persist both graphs as ``entities`` + ``claims`` parts and a manifest (written last; idempotent).

    Args:
        ap: The pair read by :func:`read_pair`.
        dataset_folder: ``datasets/<name>/<version>``.
        sources: Raw files (recorded in the manifest).

    Returns:
        The ``kg`` folder.
    """
    folder = kg_dir(dataset_folder)
    if read_manifest(folder) is not None:
        return folder
    ents, claims = [], []
    for kg, src in ((ap.kg1, "ent_ids_1.gz"), (ap.kg2, "ent_ids_2.gz")):
        source = f"dbp15k/{ap.pair}/{src}"
        for eid, iri, name in zip(kg.ids, kg.iris, kg.names, strict=True):
            ents.append({"qid": eid, "label": name, "description": None, "aliases": [],
                         "enwiki_title": name if kg.lang == "en" else None, "sitelinks": None,
                         "instance_of": [], "source": source})
            claims.append({"subject": eid, "property": IRI_PROPERTY, "object_qid": None, "object_value": iri,
                           "datatype": "url", "rank": "truthy", "source": source})
        tsource = source.replace("ent_ids", "triples")
        for h, r, t in kg.triples:
            claims.append({"subject": kg.ids[h], "property": f"r{r}", "object_qid": kg.ids[t],
                           "object_value": None, "datatype": "entity", "rank": "truthy", "source": tsource})
    write_table(ents, "entities", folder / "entities" / layout.part_name(0, 1))
    write_table(claims, "claims", folder / "claims" / layout.part_name(0, 1))
    write_manifest(folder, {
        "kind": "ea-kg", "format": KG_FORMAT, "pair": ap.pair,
        "entities": {ap.kg1.lang + "_kg1": len(ap.kg1), "en_kg2": len(ap.kg2)},
        "relation_triples": {"kg1": ap.kg1.n_triples, "kg2": ap.kg2.n_triples},
        "attribute_triples": 0,
        "inputs": [str(p) for p in sources],
    })
    return folder


def read_kg_tables(dataset_folder: Path, pair: str) -> AlignmentPair:
    """Rebuild both graphs from the stored tables (links are not part of the KG tables).

    Raises:
        FileNotFoundError: The KG tables were never written for this dataset version.
    """
    folder = kg_dir(dataset_folder)
    if read_manifest(folder) is None:
        raise FileNotFoundError(f"no finished KG tables under {folder}")
    ents = read_table(folder / "entities", "entities", ["qid", "label"])
    claims = read_table(folder / "claims", "claims", ["subject", "property", "object_qid", "object_value"])
    langs = PAIRS[pair]
    rows = {lang: ([], [], []) for lang in langs}
    iri_of: dict[str, str] = {}
    subj, prop, obj, val = (claims[c].to_pylist() for c in ("subject", "property", "object_qid", "object_value"))
    for s, p, v in zip(subj, prop, val, strict=True):
        if p == IRI_PROPERTY:
            iri_of[s] = v
    for eid, name in zip(ents["qid"].to_pylist(), ents["label"].to_pylist(), strict=True):
        ids, iris, names = rows[eid.split(":", 1)[0]]
        ids.append(eid)
        iris.append(iri_of[eid])
        names.append(name)
    index = {lang: {e: i for i, e in enumerate(rows[lang][0])} for lang in langs}
    triples: dict[str, list[tuple[int, int, int]]] = {lang: [] for lang in langs}
    for s, p, o in zip(subj, prop, obj, strict=True):
        if p == IRI_PROPERTY:
            continue
        lang = s.split(":", 1)[0]
        triples[lang].append((index[lang][s], int(p[1:]), index[lang][o]))
    kgs = [KG(lang, *rows[lang], triples[lang]) for lang in langs]
    return AlignmentPair(pair, kgs[0], kgs[1])

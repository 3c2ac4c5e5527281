"""Plan a KB build: which inputs, which reader, which shards, and the content-addressed KB version.

Inputs: file paths given on the command line, or every sample file under ``LINKEDQA_DATA`` (``--sample``).
Outputs: a ``BuildPlan`` (frozen pydantic model): a list of ``InputSpec`` with their shards, and the version
``<name>-<hash8>`` where the hash covers the input fingerprints, the build config and ``BUILD_FORMAT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from storage import layout
from storage.layout import LayoutError, safe_name
from storage.manifest import config_hash, file_fingerprint
from tasks.dumps.base import Shard, byte_shardable, byte_shards, is_compressed

# Bump when readers or merge rules change what a build produces (invalidates old versions' hashes).
BUILD_FORMAT = 4  # 2: merge ties between sources of one priority broken by value, not file/thread order;
# 3: LitWD coordinate halves (P625_Latitude / P625_Longtiude) joined into one globe-coordinate claim;
# 4: a claim stated with two ranks keeps the stronger; instance_of leaves deprecated P31 values out

# Lower = richer source; used to pick one row per qid on merge.
SOURCE_PRIORITY = {
    "wikidata-json": 0,
    "entity-file": 0,
    "ntriples": 1,
    "kgtk": 2,
    "literallywikidata": 3,
    "codex": 4,
    "properties-json": 1,
    "title-map": 5,
    "wikipedia": 6,
    "cmu-articles": 7,
}

KINDS = (
    "wikidata-json",
    "entity-file",
    "kgtk",
    "triples",
    "ntriples",
    "litwd-labels",
    "litwd-aliases",
    "litwd-descriptions",
    "codex-json",
    "title-map",
    "properties-json",
    "wikipedia",
    "cmu-articles",
)

#: Label languages of a dump build (``linkedqa kb build`` without ``--sample`` and without ``--languages``): what
#: the methods read. Every method reads the entities' English columns (label, description, aliases; ``mul``, the
#: Wikidata label that holds for every language, is their fallback), which every choice keeps; no method reads the
#: ``labels`` / ``aliases`` rows of other languages. ``all`` keeps every language (the sample KB's default).
DEFAULT_LANGUAGES = ("en", "mul")
ALL_LANGUAGES = "all"
#: A Wikidata language code: lower-case letters, then ``-``-separated subtags (``en``, ``mul``, ``zh-hans``,
#: ``be-tarask``, ``zh-min-nan``, ``tokipona``); upper case is folded.
_LANG_CODE = re.compile(r"[a-z]{2,8}(?:-[a-z0-9]{1,8})*")


def parse_languages(value: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """Normalise a ``--languages`` value: ``"en,mul"`` -> ``("en", "mul")``; ``"all"`` or ``None`` -> ``None``.

    Args:
        value: Comma-separated codes (``"en,mul"``), a list of codes, ``"all"``, or ``None`` (= all).

    Returns:
        The sorted, de-duplicated, lower-case codes, or ``None`` for every language.

    Raises:
        ValueError: When the value is empty, mixes ``all`` with codes, or holds a code that is not of the Wikidata
            language-code form (letters, then ``-``-separated subtags: ``en``, ``zh-hans``).
    """
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    codes = [str(c).strip().lower() for c in items]
    if codes == [ALL_LANGUAGES]:
        return None
    if not codes or any(not c for c in codes):
        raise ValueError(f"expected comma-separated language codes (e.g. en,mul) or all, got {value!r}")
    if ALL_LANGUAGES in codes:
        raise ValueError(f"'all' cannot be combined with language codes, got {value!r}")
    bad = [str(raw).strip() for raw, c in zip(items, codes, strict=True) if not _LANG_CODE.fullmatch(c)]
    if bad:
        raise ValueError(f"{', '.join(map(repr, bad))}: not a Wikidata language code (letters, then '-'-separated "
                         "subtags, e.g. en, mul, zh-hans); all keeps every language")
    return tuple(sorted(set(codes)))


class InputSpec(BaseModel):
    """One input file and how to read it."""

    model_config = ConfigDict(frozen=True)

    kind: str
    path: str
    source: str
    shards: tuple[Shard, ...] = (Shard(),)
    #: Label languages its reader keeps (``labels`` / ``aliases`` rows); ``None`` = every language.
    languages: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        """Stable folder-safe key of this input (used for staging folders)."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.path).name)[:80]
        return f"{self.kind}.{stem}.{config_hash(self.path, 6)}"


class BuildPlan(BaseModel):
    """A resolved KB build."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    inputs: tuple[InputSpec, ...]
    config: dict


def _spec(kind: str, path: Path, source: str, shards_per_file: int) -> InputSpec:
    if kind not in KINDS:
        raise ValueError(f"unknown input kind {kind!r}; known: {', '.join(KINDS)}")
    if not path.is_file():
        raise FileNotFoundError(f"input not found: {path}")
    line_kinds = {"wikidata-json", "kgtk", "triples", "ntriples"}
    if kind in line_kinds or (kind == "wikipedia" and byte_shardable(path)):
        # byte ranges; of the decompressed bytes for .gz/.bz2 (seek index built once, cached), except a multistream
        # .bz2, cut at its bzip2 stream starts (tasks/dumps/bz2streams.py); .xz: one shard.
        # An XML shard owns the pages whose <page> tag starts in its range (tasks/dumps/wikipedia_xml.py)
        shards = tuple(byte_shards(path, shards_per_file))
    elif kind == "wikipedia" and shards_per_file > 1:
        # .xz XML: by page ordinal (page i goes to shard i % n), every shard decompressing the whole stream
        shards = tuple(Shard(i, shards_per_file) for i in range(shards_per_file))
    else:
        shards = (Shard(0, 1, 0, None, by_lines=is_compressed(path)),)
    return InputSpec(kind=kind, path=str(path.resolve()), source=source, shards=shards)


def sample_inputs(data: Path, shards_per_file: int = 1) -> list[InputSpec]:
    """Every sample file of the real shared data that the sample KB is built from.

    Args:
        data: ``LINKEDQA_DATA`` root.
        shards_per_file: Byte shards per line file (.gz/.bz2: of its decompressed bytes).

    Returns:
        Input specs (CoDEx ``*_negatives.txt`` are false triples and are never included).
    """
    specs: list[InputSpec] = []

    def add(kind: str, rel: str, source: str) -> None:
        specs.append(_spec(kind, data / rel, source, shards_per_file))

    wd = "wikidata-entities"
    add("wikidata-json", f"{wd}/wikibase-dump-filter/entities.gz", "wikidata-json")
    add("wikidata-json", f"{wd}/opentapioca/sample_wikidata_items.json.bz2", "wikidata-json")
    add("wikidata-json", f"{wd}/opentapioca/short_stream.json.bz2", "wikidata-json")
    for rel in sorted((data / wd).rglob("*.json")):
        name = rel.name
        if name.startswith(("cirrus_", "results_with_")) or name.endswith((".meta.json", ".part.json")):
            continue  # API responses that are not entity documents; a fetch's sidecars (tasks.fetch.http)
        add("entity-file", str(rel.relative_to(data)), "entity-file")
    for f in ("labels.en", "aliases.en", "descriptions.en", "derived.P31", "derived.P279", "claims.time"):
        add("kgtk", f"kgtk-arnold/{f}.tsv.gz", "kgtk")
    lw = "literallywikidata"
    add("litwd-labels", f"{lw}/Entities/entity_labels_en.txt", "literallywikidata")
    add("litwd-aliases", f"{lw}/Entities/entity_aliases_en.txt", "literallywikidata")
    add("litwd-descriptions", f"{lw}/Entities/entity_wikidata_descriptions_en.txt", "literallywikidata")
    add("triples", f"{lw}/Entities/entity_types.txt", "literallywikidata")
    for grp in ("Relations", "Attributes"):
        pfx = "relation" if grp == "Relations" else "attribute"
        add("litwd-labels", f"{lw}/{grp}/{pfx}_labels_en.txt", "literallywikidata")
        add("litwd-aliases", f"{lw}/{grp}/{pfx}_aliases_en.txt", "literallywikidata")
        add("litwd-descriptions", f"{lw}/{grp}/{pfx}_wikidata_descriptions_en.txt", "literallywikidata")
    for sub in ("LitWD1K", "LitWD19K", "LitWD48K"):
        for split in ("train", "valid", "test"):
            if (data / lw / sub / f"{split}.txt").is_file():
                add("triples", f"{lw}/{sub}/{split}.txt", "literallywikidata")
    add("triples", f"{lw}/LitWD1K/numeric_literals.txt", "literallywikidata")
    for size in ("codex-s", "codex-m", "codex-l"):
        for split in ("train.txt", "train.txt.gz", "valid.txt", "test.txt"):
            if (data / "codex/triples" / size / split).is_file():
                add("triples", f"codex/triples/{size}/{split}", "codex")
    add("codex-json", "codex/relations/en/relations.json", "codex")
    add("codex-json", "codex/types/en/types.json", "codex")
    add("properties-json", "wikidata-properties/properties.json.gz", "properties-json")
    add("title-map", "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz", "title-map")
    for f in sorted((data / "wikipedia-xml-dump").glob("*.xml*.bz2")):
        add("wikipedia", str(f.relative_to(data)), "wikipedia")
    # FactoidQA's article texts (one input per year; tasks/dumps/cmu_articles.py)
    for year in ("S08", "S09", "S10"):
        add("cmu-articles", f"factoidqa-cmu/{year}/question_answer_pairs.txt", "cmu-articles")
    return specs


def explicit_inputs(
    wikidata: list[Path] = (),
    truthy: list[Path] = (),
    kgtk: list[Path] = (),
    triples: list[Path] = (),
    wikipedia: list[Path] = (),
    properties: list[Path] = (),
    title_maps: list[Path] = (),
    shards_per_file: int = 1,
    xml_shards: int | None = None,
) -> list[InputSpec]:
    """Input specs from explicit files/folders (``linkedqa kb build --wikidata F ...``).

    ``xml_shards`` (default ``shards_per_file``): shards per pages-articles XML file that cannot be cut by byte
    range (``.xz``). Each such shard decompresses and scans the whole file (it keeps every n-th page), so more of
    them than worker processes only repeat that work (measured by ``make bench-scale`` before XML had byte-range
    shards: 7 shards of a 1 GB XML spent 265 of 392 core-seconds decompressing). Plain, ``.bz2`` and ``.gz`` XML
    files take ``shards_per_file`` byte-range shards, like the line files (a multistream ``.bz2``, Wikimedia's
    ``pages-articles-multistream.xml.bz2``: at most that many, cut at its bzip2 stream starts).
    """
    specs: list[InputSpec] = []
    for p in wikidata:
        kind = "wikidata-json"
        if p.suffix == ".json" and p.stat().st_size < (64 << 20):
            # A single Special:EntityData document is one JSON object, not a dump
            with open(p, "rb") as fh:
                head = fh.read(1).strip()
            kind = "entity-file" if head == b"{" else kind
        specs.append(_spec(kind, p, kind, shards_per_file))
    for p in truthy:
        specs.append(_spec("ntriples", p, "ntriples", shards_per_file))
    for d in kgtk:
        files = sorted(d.glob("*.tsv*")) if d.is_dir() else [d]
        for f in files:
            specs.append(_spec("kgtk", f, "kgtk", shards_per_file))
    for p in triples:
        if "negatives" in p.name:
            raise ValueError(f"{p}: *_negatives files hold FALSE triples and are never imported as claims")
        specs.append(_spec("triples", p, "triples", shards_per_file))
    for p in wikipedia:
        n = shards_per_file if byte_shardable(p) else (xml_shards or shards_per_file)
        specs.append(_spec("wikipedia", p, "wikipedia", n))
    for p in properties:
        specs.append(_spec("properties-json", p, "properties-json", shards_per_file))
    for p in title_maps:
        specs.append(_spec("title-map", p, "title-map", shards_per_file))
    return specs


_DATE = re.compile(r"(20\d{6})")


def make_plan(name: str | None, specs: list[InputSpec], passage_words: int = 100,
              languages: str | Iterable[str] | None = None) -> BuildPlan:
    """Resolve the KB version for a set of inputs.

    Args:
        name: KB name (default: the dump date found in the first input's file name, else ``kb``).
        specs: Inputs.
        passage_words: Words per Wikipedia passage.
        languages: Label languages to keep (``parse_languages``: ``"en,mul"``, a list, ``"all"``); ``None`` =
            every language. A choice other than all is part of the config, so of the version (and of every run id
            on it); all adds nothing to the config, so versions built without a language choice keep their hashes.

    Returns:
        The plan; ``version = <name>-<hash8 of inputs+config>``.

    Raises:
        ValueError: Bad ``languages`` (``parse_languages``).
    """
    if not specs:
        raise LayoutError("no inputs: give --sample or at least one input file")
    if name is None:
        m = next((_DATE.search(Path(s.path).name) for s in specs if _DATE.search(Path(s.path).name)), None)
        name = m.group(1) if m else "kb"
    safe_name(name, "KB name")
    config = {"build_format": BUILD_FORMAT, "passage_words": passage_words}
    langs = parse_languages(languages)
    if langs is not None:
        config["languages"] = ",".join(langs)
        specs = [s.model_copy(update={"languages": langs}) for s in specs]
    fingerprint = {
        "config": config,
        "inputs": [
            {"kind": s.kind, "fp": {k: v for k, v in file_fingerprint(Path(s.path)).items() if k != "path"},
             "name": Path(s.path).name}
            for s in specs
        ],
    }
    return BuildPlan(name=name, version=f"{name}-{config_hash(fingerprint)}", inputs=tuple(specs), config=config)


def plan_from_inputs(sample: bool = False, name: str | None = None, *, wikidata: list[str] = (),
                     truthy: list[str] = (), kgtk: list[str] = (), triples: list[str] = (),
                     wikipedia: list[str] = (), properties: list[str] = (), title_maps: list[str] = (),
                     shards_per_file: int = 1, data_root: Path | None = None,
                     languages: str | Iterable[str] | None = None, workers: int | None = None) -> BuildPlan:
    """The one KB planning path (``linkedqa kb build`` and the ``build_kb_from_inputs`` flow): every input kind.

    Args:
        sample: Every real sample file under ``data_root`` (``LINKEDQA_DATA``); the explicit inputs are ignored.
        name: KB name (``sample`` for the sample KB; default: the dump date in the first file name, else ``kb``).
        wikidata: Wikidata JSON dumps / Special:EntityData files.
        truthy: Wikidata truthy N-Triples.
        kgtk: KGTK TSV files or folders.
        triples: ``subject<TAB>property<TAB>object`` files.
        wikipedia: pages-articles XML (``.bz2``).
        properties: ``properties.json(.gz)`` label lists.
        title_maps: ``QID;title;url`` maps.
        shards_per_file: Byte-range shards per line input file (.gz/.bz2: of its decompressed bytes).
        data_root: Where ``sample`` reads (default ``LINKEDQA_DATA``).
        languages: Label languages to keep (``"en,mul"``, ``"all"``); ``None`` = the default: ``all`` for the
            sample KB (its version, indexes and run ids stay those of every earlier sample build),
            ``DEFAULT_LANGUAGES`` otherwise.
        workers: Worker processes of the build: an ``.xz`` XML file gets at most this many shards (each of its
            shards decompresses the whole file, ``explicit_inputs``). Shards are not part of the version.

    Returns:
        The resolved plan (content-addressed version).

    Raises:
        ValueError: Bad ``languages``.
    """
    if languages is None:
        languages = ALL_LANGUAGES if sample else DEFAULT_LANGUAGES
    parse_languages(languages)  # a bad value fails before any input is looked at
    if sample:
        specs = sample_inputs(data_root or layout.data_root(), shards_per_file)
        name = name or "sample"
    else:
        def paths(xs):
            return [Path(x) for x in xs or ()]

        specs = explicit_inputs(wikidata=paths(wikidata), truthy=paths(truthy), kgtk=paths(kgtk),
                                triples=paths(triples), wikipedia=paths(wikipedia), properties=paths(properties),
                                title_maps=paths(title_maps), shards_per_file=shards_per_file,
                                xml_shards=min(shards_per_file, max(1, workers)) if workers else None)
    return make_plan(name, specs, languages=languages)

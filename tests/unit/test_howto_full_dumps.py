"""docs/howto/full-dumps.md quotes the scale rehearsal as docs/benchmarks/scale.md states it.

Each row of the how-to's step table is checked against the benchmark page: the measured cells (wall / peak RSS,
disk peak and net growth) are the rehearsal table's cells at the size the row names, the projected wall is the
figure of the benchmark's projection paragraph, and the full-size disk estimate is recomputed from the measured
disk with the scale factors the benchmark page states (the step's driver, entities or XML bytes, from
``tests/bench/bench_scale.py``). The prose figures are looked up in their source pages, and the page's ``linkedqa``
command lines parse with the real parser.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from tests import readme_sections as gen
from tests.bench.bench_scale import DISK_ROW_MIN, DRIVER, FULL_ENTITIES

PAGE = gen.DOCS / "howto" / "full-dumps.md"
SCALE = gen.DOCS / "benchmarks" / "scale.md"
KB_BUILD = gen.DOCS / "benchmarks" / "kb-build.md"
#: The how-to's size labels as the rehearsal table's column headers.
SIZES = {"10 M": "10,000,000", "3 M": "3,000,000"}
#: Where the projection paragraph of scale.md states each step's projected wall (a regex per step; the groups
#: hold the number(s), the last group the unit).
PROJECTED = {
    "stage wikidata": (r"staging Wikidata (\d+\.\d+) (min|h)", 0),
    "stage wikipedia": (r"Wikipedia (\d+\.\d+) (min|h)", 0),
    "seek index wikidata": (r"the seek indexes (\d+\.\d+) and (\d+\.\d+) (min|h)", 0),
    "seek index wikipedia": (r"the seek indexes (\d+\.\d+) and (\d+\.\d+) (min|h)", 1),
    "merge": (r"merge (\d+\.\d+) \+ (\d+\.\d+) (min|h)", 0),
    "merge wikipedia": (r"merge (\d+\.\d+) \+ (\d+\.\d+) (min|h)", 1),
    "index entity-bm25": (r"entity-bm25 (\d+\.\d+) (min|h)", 0),
    "index title-bm25": (r"title-bm25 (\d+\.\d+) (min|h)", 0),
    "index passage-bm25": (r"passage-bm25 (\d+\.\d+) (min|h)", 0),
    "index kg-duckdb": (r"kg-duckdb (\d+\.\d+) (min|h)", 0),
    "index kg-oxigraph": (r"kg-oxigraph (\d+\.\d+) (min|h)", 0),
    "export-nt": (r"export-nt (\d+\.\d+) (min|h)", 0),
    "search-recall": (r"search-recall (\d+\.\d+) (min|h)", 0),
}
#: ``kb build``'s projection on the page: the sum of its parts' (the multistream Wikipedia file needs no seek index).
KB_BUILD_PARTS = ("stage wikidata", "stage wikipedia", "seek index wikidata", "merge", "merge wikipedia")
#: Prose figures of the page and where the benchmark pages state them: (text on the page, source page, text there).
PROSE = (
    ("**1.5 h**", SCALE, "(1.5 h with the multistream Wikipedia input)"),
    ("Oxigraph's store included, takes 6.2 h", SCALE,
     "| everything but the dense indexes (with Oxigraph's store) | 6.2 h |"),
    ("Oxigraph's bulk load is three quarters", SCALE,
     "Oxigraph's bulk load is three quarters of the total and measured only to 3 M"),
    ("measured 31 passages/s on 2 cores would take ~3 days on 16 cores", SCALE,
     "passage-dense at the measured 31 passages/s on 2 cores is ~3 days on 16 cores"),
    ("230 M texts encode in 1.9 h on one H200", SCALE, "the entity index's 230 M texts at 1.9 h on one H200"),
    ("2 cores with 24 GB", SCALE, "2 cores **with AVX-512**, 24 GB"),
    ("held to 6300MB", SCALE, "each step's DuckDB limit `auto` (6300MB on this machine)"),
    ("16GB on 64 GB", SCALE, "6300MB on this 23.5 GiB machine, 16GB on 64 GB"),
    ("needs ~31 GB at full size", SCALE, "would need ~31 GB for the subject index alone"),
    ("fits 75 % of the DuckDB limit", SCALE, "An index is built only where its estimate fits 75 % of the limit"),
    ("single-entity lookups take the same time", SCALE, "single-entity lookups the same"),
    ("~2 GB of memory per bulk load", None, "(~2 GB of memory per load)"),
    ("one shard per 512 MB of JSON", None, '["json_bytes"] / 512e6'),
    ("114-120 MB per process", KB_BUILD, "119–120 MB"),
    ("110 GB of JSON in 17.7 GB of gzip, and 34.6 GB of XML in 9.6 GB of bzip2", SCALE,
     "110 GB of JSON in 17.7 GB of gzip, 34.6 GB of XML in 9.6 GB of bzip2"),
    ("~1.3 TB of JSON", KB_BUILD, "~1.3 TB uncompressed"),
    ("~100 GB of XML would", SCALE, "~100 GB of XML)"),
)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(text: str, start: int) -> list[list[str]]:
    """The rows (header first, separator left out) of the first Markdown table at or after ``start``."""
    lines = text[start:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        if not re.fullmatch(r"\|[-:| ]+\|", line.strip()):
            rows.append(_cells(line))
    return rows


def rehearsal() -> dict[str, dict[str, str]]:
    """scale.md's rehearsal table: ``{step: {size header: cell}}`` (disk rows as ``"<step>: disk peak (net
    growth)"``)."""
    text = SCALE.read_text()
    header, *rows = _table(text, text.index("## Scale rehearsal"))
    assert header[0] == "step" and SIZES["10 M"] in header, header
    return {r[0]: dict(zip(header[1:], r[1:], strict=True)) for r in rows}


def howto_rows() -> list[dict[str, str]]:
    text = PAGE.read_text()
    header, *rows = _table(text, text.index("<!-- full-dump-steps -->"))
    keys = ("step", "at", "wall", "disk", "projected", "estimate")
    assert len(header) == len(keys), header
    return [dict(zip(keys, r, strict=True)) for r in rows]


def projection() -> dict[str, str]:
    """``{step: "16.4 min"}`` from scale.md's projection paragraph (after "(printed with it):")."""
    text = SCALE.read_text()
    start = text.index("## Projected")
    para = text[text.index("(printed with it):", start):text.index("| scope |", start)]
    para = " ".join(para.split())
    out = {}
    for step, (pattern, which) in PROJECTED.items():
        m = re.search(pattern, para)
        assert m, f"{step}: {pattern!r} not in scale.md's projection"
        out[step] = f"{m.group(which + 1)} {m.group(m.lastindex)}"
    return out


def _bytes(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"MB": 1e6, "GB": 1e9}[unit]


def _disk(cell: str) -> tuple[float, float]:
    m = re.fullmatch(r"(\d+\.\d+ [MG]B) \((\d+\.\d+ [MG]B)\)", cell)
    assert m, cell
    return _bytes(m.group(1)), _bytes(m.group(2))


def scale_factors() -> dict[str, float]:
    """The factors scale.md's projection states: ``{"entities": 11.5, "xml": 2.9}`` (from the 10 M size)."""
    m = re.search(r"\(x(\d+\.\d+) entities, x(\d+\.\d+) XML bytes", SCALE.read_text())
    assert m, "scale.md no longer states its scale factors"
    return {"entities": float(m.group(1)), "xml": float(m.group(2))}


def test_the_page_lists_every_step_of_the_rehearsal_once() -> None:
    steps = [s for s in rehearsal() if ": disk peak" not in s]
    assert [r["step"] for r in howto_rows()] == steps


@pytest.mark.parametrize("row", howto_rows(), ids=lambda r: r["step"])
def test_each_row_quotes_the_rehearsal(row: dict[str, str]) -> None:
    table, step = rehearsal(), row["step"]
    size = SIZES[row["at"]]
    assert row["wall"] == table[step][size]
    if row["at"] != "10 M":  # a smaller size only where the step did not run at 10 M
        assert table[step][SIZES["10 M"]] == "-"
    disk = table.get(f"{step}: disk peak (net growth)")
    if disk is None:  # no disk row: under DISK_ROW_MIN at every size, which the page says
        assert row["disk"] == row["estimate"] == ""
        assert DISK_ROW_MIN == 1e9 and "stayed under 1 GB at every size" in PAGE.read_text()
        return
    assert row["disk"] == disk[size]
    peak, kept = _disk(disk[size])
    driver = DRIVER.get(step, "entities")
    if row["at"] == "10 M":
        factor = scale_factors()[driver]
    else:
        assert driver == "entities", step
        factor = FULL_ENTITIES / float(size.replace(",", ""))
    assert row["estimate"] == f"{peak * factor / 1e9:.0f} GB ({kept * factor / 1e9:.0f} GB)"


def test_projected_walls_are_the_benchmarks() -> None:
    proj = projection()
    rows = {r["step"]: r["projected"] for r in howto_rows()}
    parts = sum(float(proj[s].split()[0]) for s in KB_BUILD_PARTS)
    assert all(proj[s].endswith(" min") for s in KB_BUILD_PARTS)
    assert rows.pop("kb build") == f"{parts:.1f} min"
    assert f"Its projection, {parts:.1f} min, adds them up" in PAGE.read_text()
    assert rows == proj


def test_the_stated_factors_and_ratios_follow_from_the_benchmark() -> None:
    page, table, f = " ".join(PAGE.read_text().split()), rehearsal(), scale_factors()
    full_m = FULL_ENTITIES / 1e6
    assert f"×{f['entities']} entities ({full_m:.0f} M / 10 M)" in page
    assert f"×{f['xml']} XML bytes" in page
    assert f"×{full_m / 3:.1f} entities" in page  # kg-oxigraph from 3 M
    three, ten = SIZES["3 M"], SIZES["10 M"]
    assert f"(×{10 / 3:.1f})" in page
    for step, shown in (("kb build", "`kb build` (×{:.1f})"), ("index kg-duckdb", "kg-duckdb (×{:.1f})")):
        disk = table[f"{step}: disk peak (net growth)"]
        assert shown.format(_disk(disk[ten])[0] / _disk(disk[three])[0]) in page, step
    # the download estimate: the full dump's text at the rehearsal's compression ratios
    json_gb = 1.3e3 * 17.7 / 110
    xml_gb = 100 * 9.6 / 34.6
    assert f"about {round(json_gb, -1):.0f} GB and {xml_gb:.0f} GB" in page


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("ours, source, theirs", PROSE, ids=[p[0][:30] for p in PROSE])
def test_prose_figures_are_their_sources(ours: str, source, theirs: str) -> None:
    """Whitespace (line breaks) aside, the page says ``ours`` and its source says ``theirs``."""
    assert _flat(ours) in _flat(PAGE.read_text())
    if source is None:  # stated by the code: the CLI's help, the bench's shard rule
        from flows.cli import build_parser
        from tests.bench import bench_scale

        help_text = " ".join(a.help or "" for sub in _subparsers(build_parser()) for a in sub._actions)
        assert _flat(theirs) in _flat(help_text) or theirs in Path(bench_scale.__file__).read_text()
    else:
        assert _flat(theirs) in _flat(source.read_text())


def _subparsers(parser):
    """Every parser below ``parser`` (depth first)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from _subparsers(sub)


def _command_lines() -> list[str]:
    text = PAGE.read_text()
    block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1).replace("\\\n", " ")
    return [line.split(" #")[0].strip() for line in block.splitlines() if line.startswith("linkedqa ")]


def test_the_commands_parse_with_the_flags_the_page_explains() -> None:
    from flows.cli import build_parser

    lines = _command_lines()
    parsed = []
    for line in lines:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                parsed.append(build_parser().parse_args(shlex.split(line)[1:]))
            except SystemExit:
                pytest.fail(f"{line}: {err.getvalue().strip()}")
    download, build, *index = parsed
    assert (download.kb_cmd, download.wikidata, download.wikipedia) == ("download", "latest", "enwiki:latest")
    assert (build.kb_cmd, build.shards, build.workers, build.memory_limit, build.languages) == (
        "build", 256, 16, "16GB", "en,mul")
    from tasks.kb.plan import DEFAULT_LANGUAGES

    assert build.languages == ",".join(DEFAULT_LANGUAGES)  # the page calls it the default
    kinds = [k for a in index for k in a.kind]
    assert all(a.kb_cmd == "index" and a.workers == 16 and a.memory_limit == "16GB" for a in index)
    assert sorted(kinds) == sorted(s.removeprefix("index ") for s in PROJECTED if s.startswith("index "))

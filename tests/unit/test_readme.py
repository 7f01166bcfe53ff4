"""The README is a user's guide that stays true: its first screen, its manifests, its commands
and its links are checked against the program itself (issue 22).

- the first 60 lines: how to install, the two commands that exist today, a manifest to copy;
- every YAML manifest in it validates with `dotlab-hpc validate` (in-process, through cli.main);
- every `dotlab-hpc VERB …` in its sh blocks, inline code and command table names a verb the
  parser knows and only options of that verb;
- every link into docs/ (and every #anchor) leads somewhere.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from dotlab_hpc import api, cli
from dotlab_hpc.cli.verbs import build_parser

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TEXT = README.read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
OPERATORS = {"&&", "||", ";", "|", "&"}


def blocks(lang: str, text: str | None = None) -> list[str]:
    """The bodies of the fenced blocks of one language (in the README, or in ``text``)."""
    return [body for kind, body in FENCE.findall(TEXT if text is None else text) if kind == lang]


def verbs() -> dict[str, argparse.ArgumentParser]:
    """Each verb of the command line and its parser."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def section(heading_part: str) -> str:
    """The README's text from the heading that contains ``heading_part`` to the next heading of
    the same or a higher level."""
    lines = TEXT.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = re.match(r"(#+) ", line)
        if m and heading_part in line:
            level = len(m.group(1))
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if (h := re.match(r"(#+) ", lines[j])) and len(h.group(1)) <= level
                ),
                len(lines),
            )
            return "".join(lines[i:end])
    raise AssertionError(f"README has no heading containing {heading_part!r}")


def sh_commands(text: str | None = None) -> list[list[str]]:
    """Every `dotlab-hpc …` command in the sh blocks, as the words after `dotlab-hpc`, up to the
    end of the line or a shell operator (continued lines joined, comments dropped)."""
    found = []
    for body in blocks("sh", text):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for i, word in enumerate(words):
                if word == "dotlab-hpc":
                    rest = words[i + 1 :]
                    cut = next((j for j, w in enumerate(rest) if w in OPERATORS), len(rest))
                    found.append(rest[:cut])
    return found


def options_in(text: str) -> list[str]:
    """The option words (`-o`, `--code-dir`) in a usage text, with `=value` dropped."""
    return re.findall(r"(?<![\w.<-])(--?[A-Za-z][\w-]*)", text)


def unknown_options(verb: str, words: list[str]) -> list[str]:
    """The option words that are not options of ``verb``."""
    known = verbs()[verb]._option_string_actions
    return [w for w in words if w not in known]


# ------------------------------------------------------------------------------- first screen


def test_the_first_screen_says_how_to_install_run_and_write_a_manifest() -> None:
    top = "".join(TEXT.splitlines(keepends=True)[:60])
    assert "pip install" in top, "the first screen does not say how to install"
    sh = "".join(blocks("sh", top))
    starts = [line.split("#")[0].strip() for line in sh.splitlines()]
    assert "bash examples/run.sh" in starts, "the main job's command is not on the first screen"
    assert "bash .ci/run" in starts, "the tests' command is not on the first screen"
    whole = [b for b in blocks("yaml", top) if re.search(r"^version: 1\b", b, re.M)]
    assert whole, "no complete ```yaml manifest (version: 1) in the first 60 lines"


def test_the_two_commands_that_exist_today_exist() -> None:
    assert (REPO / "examples" / "run.sh").is_file()
    assert (REPO / ".ci" / "run").is_file()


def test_the_five_steps_show_the_commands_a_newcomer_types() -> None:
    steps = section("five steps")
    lines = {line.strip() for body in blocks("sh", steps) for line in body.splitlines()}
    for command in (
        "dotlab-hpc init --code-dir code --data-dir data --from"
        " docker://python:3.12-slim@sha256:<digest> --results first-run/results.json -o claim.yaml",
        "dotlab-hpc build claim.yaml -o claim.sif --pin",
        "dotlab-hpc run claim.yaml --code-dir code --data-dir data --image claim.sif",
    ):
        assert command in lines, f"not on a line of its own in a sh block of the steps: {command}"


# ---------------------------------------------------------------------------------- manifests


SITE_DOC = Path(__file__).resolve().parents[2] / "docs" / "site.md"


@pytest.mark.parametrize("where", ["README.md", "docs/site.md"], ids=["readme", "site-doc"])
def test_each_site_file_shown_is_one_dotlab_hpc_reads(where: str) -> None:
    from dotlab_hpc.site.sitefile import parse_site_text

    text = TEXT if where == "README.md" else SITE_DOC.read_text(encoding="utf-8")
    shown = blocks("toml", text)
    assert shown, f"{where} shows no site file"
    for body in shown:
        spec = parse_site_text(body, where)
        assert spec.where or spec.prepare or spec.sbatch_args


def test_there_are_manifests_to_check() -> None:
    assert len(manifests()) >= 2


def manifests() -> list[str]:
    """The README's YAML blocks that are whole manifests."""
    return [b for b in blocks("yaml") if re.search(r"^version: 1\b", b, re.M)]


def claim_of(body: str) -> str:
    m = re.search(r"^claim: (\S+)", body, re.M)
    return m.group(1) if m else "?"


@pytest.mark.parametrize("body", manifests(), ids=claim_of)
def test_each_manifest_in_the_readme_validates(
    body: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(body, encoding="utf-8")
    code = cli.main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "", ""), f"{body}\n{err}"


def test_the_full_manifest_shows_every_field_of_the_schema() -> None:
    """The annotated manifest names every property `dotlab-hpc schema` describes."""
    schema = api.schema()
    names = set(schema["properties"])
    for definition in schema.get("$defs", {}).values():
        names |= set(definition.get("properties", {}))
    # the full manifest shows every field of a claim's one run; a claim over many runs' fields
    # (runs, and each target's statistic) are in its own manifest, and `repeat` in the text
    full = max(manifests(), key=len) + "".join(
        m for m in manifests() if "\nruns:" in m or "\nvariants:" in m
    )
    full += "\n  repeat: 30" if "`runs: {repeat: 30}`" in README.read_text() else ""
    keys = set(re.findall(r"^\s*-?\s*([a-z_0-9]+):", full, re.M))  # block keys
    keys |= set(re.findall(r"[{,] ?([a-z_]+):", full))  # flow keys: {value: 1, abs_tol: 0}
    assert names <= keys, f"the README's full manifest lacks {sorted(names - keys)}"


# ----------------------------------------------------------------------------------- commands


def test_the_readme_runs_commands() -> None:
    assert len(sh_commands()) >= 8


@pytest.mark.parametrize("words", sh_commands(), ids=lambda w: " ".join(w)[:60])
def test_each_command_in_an_sh_block_parses(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert words, "`dotlab-hpc` without a verb"
    verb = words[0]
    if verb.startswith("-"):  # dotlab-hpc --help, --version
        assert verb in build_parser()._option_string_actions
        return
    assert verb in verbs(), f"dotlab-hpc has no verb {verb!r}"
    given = [w.split("=", 1)[0] for w in words[1:] if w.startswith("-") and w != "-"]
    bad = unknown_options(verb, given)
    assert not bad, f"dotlab-hpc {' '.join(words)}: not options of {verb}: {bad}"
    try:
        _, extra = build_parser().parse_known_args(words)
    except SystemExit:
        raise AssertionError(f"dotlab-hpc {' '.join(words)}: {capsys.readouterr().err}") from None
    assert extra == [], f"dotlab-hpc {' '.join(words)}: not understood: {extra}"


def inline_commands() -> list[str]:
    """Every inline code span holding `dotlab-hpc VERB`, from `dotlab-hpc` on."""
    prose = FENCE.sub("", TEXT)
    spans = re.findall(r"`([^`\n]*dotlab-hpc [^`\n]*)`", prose)
    return [span[span.index("dotlab-hpc") :] for span in spans]


@pytest.mark.parametrize("span", inline_commands())
def test_each_inline_command_names_a_verb_and_its_options(span: str) -> None:
    verb = span.split()[1]
    if verb.startswith("-"):
        return
    verb = verb.rstrip(")")
    assert verb in verbs(), f"`{span}`: dotlab-hpc has no verb {verb!r}"
    bad = unknown_options(verb, options_in(span))
    assert not bad, f"`{span}`: not options of {verb}: {bad}"


def command_table() -> dict[str, str]:
    """The Commands table: each verb → the usage in its first cell."""
    rows = {}
    for line in section("Commands").splitlines():
        m = re.match(r"\| `(.+?)` \|", line.replace("\\|", "/"))
        if m and not line.startswith("| command"):
            usage = m.group(1)
            rows[usage.split()[0]] = usage
    return rows


def test_the_command_table_lists_every_verb_the_parser_knows() -> None:
    table = command_table()
    assert set(table) == set(verbs()), (
        f"missing from the table: {sorted(set(verbs()) - set(table))};"
        f" not verbs: {sorted(set(table) - set(verbs()))}"
    )


@pytest.mark.parametrize("verb", sorted(command_table()))
def test_each_row_of_the_command_table_shows_only_that_verbs_options(verb: str) -> None:
    usage = command_table()[verb]
    bad = unknown_options(verb, options_in(usage))
    assert not bad, f"{usage}: not options of {verb}: {bad}"


# -------------------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def links() -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", TEXT))


def test_every_docs_link_leads_to_a_file_and_every_anchor_to_a_heading() -> None:
    targets = [t for t in links() if t.startswith(("docs/", "#"))]
    assert any(t.startswith("docs/") for t in targets)
    for target in targets:
        file, _, anchor = target.partition("#")
        path = REPO / file if file else README
        assert path.is_file(), f"README links to {file}, which does not exist"
        if anchor:
            assert anchor in anchors(path), f"README links to {target}: no such heading"


def test_the_more_list_links_every_page_in_docs() -> None:
    more = section("More")
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)\)", more))
    pages = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert pages <= linked, f"docs/ pages the More list does not link: {sorted(pages - linked)}"

"""The manifest (docs/contract.md §1): one line per problem, naming the file and the field path."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pydantic
import pytest

from dotlab_hpc.errors import ManifestError
from dotlab_hpc.manifest import models as models_mod
from dotlab_hpc.manifest import parse as parse_mod
from dotlab_hpc.manifest import rules as rules_mod

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
GOOD_YAML = MANIFESTS / "good.yaml"
GOOD_JSON = MANIFESTS / "good.json"
MINIMAL_YAML = MANIFESTS / "minimal.yaml"

# The label errors start with; validate_data() takes it as given.
LABEL = "claim.yaml"

DELETE = object()
HEX40 = "3f2a9c1e0b7d4a5f6e8c9b0a1d2e3f4a5b6c7d8e"
HEX64 = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
NAME_RULE = "must start with a letter or digit and hold only letters, digits"
COMMIT_RULE = "must be a full commit id (40 or 64 hex digits"
DIGEST_RULE = "'sha256:' and 64 hex digits"
PATH_SEP = "must not contain a newline, NUL or backslash"


def good() -> dict[str, Any]:
    """The complete manifest as plain data, read from JSON (not through the YAML loader)."""
    data: dict[str, Any] = json.loads(GOOD_JSON.read_text(encoding="utf-8"))
    return data


def mutate(path: str, value: Any = DELETE) -> dict[str, Any]:
    """The good manifest with the dotted ``path`` set to ``value`` (or deleted); ``data.1.x``
    indexes lists."""
    data = copy.deepcopy(good())
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = data
    for part in parts[:-1]:
        node = node[part]
    if value is DELETE:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return data


def problems_of(data: Any) -> list[str]:
    with pytest.raises(ManifestError) as info:
        models_mod.validate_data(data, LABEL)
    return info.value.problems


def assert_one_line(line: str) -> None:
    assert "\n" not in line
    assert "\r" not in line
    assert len(line.splitlines()) == 1
    assert line.isprintable(), line


def expect_one_problem(problems: list[str], label: str, where: str | None, fragment: str) -> None:
    """Exactly one problem, ``LABEL: where: ...fragment...`` on one line."""
    assert len(problems) == 1, problems
    line = problems[0]
    assert_one_line(line)
    prefix = f"{label}: {where}: " if where is not None else f"{label}: "
    assert line.startswith(prefix), (line, prefix)
    assert fragment in line[len(prefix) :], (line, fragment)


# --------------------------------------------------------------------------- malformed data
# (id, path to mutate, new value or DELETE, expected field path, message fragment)
MUTATIONS: list[tuple[str, str, Any, str, str]] = [
    # every required field missing
    ("missing-version", "version", DELETE, "version", "required field is missing"),
    ("missing-claim", "claim", DELETE, "claim", "required field is missing"),
    ("missing-code", "code", DELETE, "code", "required field is missing"),
    ("missing-code-commit", "code.commit", DELETE, "code.commit", "required field is missing"),
    ("missing-data-name", "data.0.name", DELETE, "data[0].name", "required field is missing"),
    ("missing-data-path", "data.1.path", DELETE, "data[1].path", "required field is missing"),
    ("missing-data-sha", "data.0.sha256", DELETE, "data[0].sha256", "required field is missing"),
    ("missing-image", "image", DELETE, "image", "required field is missing"),
    ("missing-image-digest", "image.digest", DELETE, "image.digest", "not pinned yet; run "),
    ("missing-build-from", "image.build.from", DELETE, "image.build.from", "is missing"),
    ("missing-entrypoint", "entrypoint", DELETE, "entrypoint", "required field is missing"),
    ("missing-targets", "targets", DELETE, "targets", "required field is missing"),
    ("missing-target-value", "targets.loss.value", DELETE, "targets.loss.value", "is missing"),
    ("missing-resources", "resources", DELETE, "resources", "required field is missing"),
    ("missing-time", "resources.time", DELETE, "resources.time", "required field is missing"),
    # unknown keys, top level and nested: the message lists the allowed fields
    (
        "unknown-top",
        "bogus",
        1,
        "bogus",
        "unknown field (allowed: version, claim, title, license, authors, publisher, code, data,"
        " image, entrypoint, seed, runs, variants, pairing, evidence, targets, resources, sandbox)",
    ),
    ("unknown-code", "code.branch", "main", "code.branch", "(allowed: commit, repo, working_dir)"),
    (
        "unknown-dataset",
        "data.1.size",
        3,
        "data[1].size",
        "(allowed: name, path, sha256, url, doi)",
    ),
    ("unknown-image", "image.tag", "latest", "image.tag", "(allowed: digest, build)"),
    # the Python attribute name is not the manifest's key
    ("unknown-build-from_", "image.build.from_", "x", "image.build.from_", "(allowed: from, post,"),
    (
        "unknown-target",
        "targets.loss.tol",
        1,
        "targets.loss.tol",
        "(allowed: value, abs_tol, rel_tol, statistic, of, compare)",
    ),
    ("unknown-resources", "resources.mem", "4G", "resources.mem", "(allowed: time, cpus, memory,"),
    (
        "unknown-sandbox",
        "sandbox.net",
        "none",
        "sandbox.net",
        "(allowed: writable_tmpfs, network, scratch)",
    ),
    # wrong types
    (
        "str-for-int",
        "resources.cpus",
        "2",
        "resources.cpus",
        "must be a whole number, not a string",
    ),
    ("bool-for-number", "targets.loss.value", True, "targets.loss.value", "not true/false"),
    ("str-for-number", "targets.loss.value", "0.31", "targets.loss.value", "must be a number"),
    ("float-for-int", "seed", 1.5, "seed", "must be a whole number, not a decimal number"),
    ("bool-for-int", "seed", True, "seed", "must be a whole number, not true/false"),
    ("str-for-seed", "seed", "42", "seed", "must be a whole number, not a string"),
    ("list-for-mapping", "code", [HEX40], "code", "must be a mapping, not a list"),
    ("int-for-string", "claim", 5, "claim", "must be a string, not a whole number (put quotes"),
    ("null-for-string", "entrypoint", None, "entrypoint", "must be a string, not null"),
    ("list-for-entrypoint", "entrypoint", ["python", "run.py"], "entrypoint", "not a list"),
    ("mapping-for-list", "data", {"train": "x"}, "data", "must be a list, not a mapping"),
    ("string-for-dataset", "data.0", "train.csv", "data[0]", "must be a mapping, not a string"),
    ("list-for-targets", "targets", [{"value": 1}], "targets", "must be a mapping, not a list"),
    ("number-for-target", "targets.accuracy", 0.912, "targets.accuracy", "must be a mapping"),
    ("int-for-memory", "resources.memory", 4096, "resources.memory", "(put quotes around it)"),
    ("bool-for-time", "resources.time", True, "resources.time", 'a string like "01:00:00"'),
    ("float-for-time", "resources.time", 1.5, "resources.time", "or a whole number of minutes"),
    ("string-for-files", "image.build.files", "a b", "image.build.files", "must be a list"),
    ("int-label", "image.build.labels.maintainer", 7, "image.build.labels.maintainer", "string"),
    ("str-for-bool", "sandbox.writable_tmpfs", "yes", "sandbox.writable_tmpfs", "true or false"),
    ("int-for-bool", "sandbox.writable_tmpfs", 1, "sandbox.writable_tmpfs", "true or false"),
    ("huge-int-value", "targets.accuracy.value", 10**400, "targets.accuracy.value", "too large"),
    # version
    ("version-2", "version", 2, "version", "must be 1"),
    ("version-string", "version", "1", "version", "must be 1"),
    ("version-true", "version", True, "version", "must be 1"),
    ("version-float", "version", 1.0, "version", "must be 1"),
    # negative and non-finite tolerances and values
    ("negative-abs-tol", "targets.accuracy.abs_tol", -0.001, "targets.accuracy.abs_tol", ">= 0"),
    ("negative-rel-tol", "targets.loss.rel_tol", -1, "targets.loss.rel_tol", "must be >= 0"),
    ("nan-abs-tol", "targets.accuracy.abs_tol", float("nan"), "targets.accuracy.abs_tol", "finite"),
    ("inf-rel-tol", "targets.loss.rel_tol", float("inf"), "targets.loss.rel_tol", "finite"),
    ("nan-value", "targets.accuracy.value", float("nan"), "targets.accuracy.value", "finite"),
    ("neg-inf-value", "targets.loss.value", float("-inf"), "targets.loss.value", "finite number"),
    # commit ids
    ("short-commit", "code.commit", "3f2a9c1", "code.commit", COMMIT_RULE),
    ("branch-commit", "code.commit", "main", "code.commit", "branch and tag names are not pinned"),
    ("head-commit", "code.commit", "HEAD", "code.commit", COMMIT_RULE),
    ("tag-commit", "code.commit", "v1.0.0", "code.commit", COMMIT_RULE),
    ("non-hex-commit", "code.commit", "g" * 40, "code.commit", COMMIT_RULE),
    ("39-hex-commit", "code.commit", HEX40[:-1], "code.commit", COMMIT_RULE),
    ("41-hex-commit", "code.commit", HEX40 + "a", "code.commit", COMMIT_RULE),
    ("spaced-commit", "code.commit", f" {HEX40}", "code.commit", COMMIT_RULE),
    # image digests: tags and other forms are rejected
    ("digest-latest", "image.digest", "latest", "image.digest", DIGEST_RULE),
    ("digest-tag", "image.digest", "python:3.11", "image.digest", "tags and names are not pinned"),
    ("digest-short", "image.digest", "sha256:abc", "image.digest", DIGEST_RULE),
    ("digest-sha512", "image.digest", "sha512:" + HEX64 * 2, "image.digest", DIGEST_RULE),
    (
        "digest-docker-ref",
        "image.digest",
        f"docker://x@sha256:{HEX64}",
        "image.digest",
        DIGEST_RULE,
    ),
    # image.build.from must be pinned
    (
        "from-unpinned",
        "image.build.from",
        "docker://python:3.11-slim",
        "image.build.from",
        "pinned",
    ),
    ("from-latest", "image.build.from", "python:latest", "image.build.from", "pinned by digest"),
    ("from-short-digest", "image.build.from", "python@sha256:2bac", "image.build.from", "pinned"),
    # paths
    ("workdir-dotdot", "code.working_dir", "../x", "code.working_dir", "must not contain '..'"),
    ("workdir-inner-dotdot", "code.working_dir", "a/../../b", "code.working_dir", "'..'"),
    ("workdir-absolute", "code.working_dir", "/abs", "code.working_dir", "must be relative"),
    ("workdir-backslash", "code.working_dir", "a\\b", "code.working_dir", PATH_SEP),
    ("workdir-newline", "code.working_dir", "a\nb", "code.working_dir", PATH_SEP),
    ("workdir-empty", "code.working_dir", "", "code.working_dir", "must be a non-empty"),
    ("workdir-space", "code.working_dir", " src", "code.working_dir", "surrounding spaces"),
    ("datapath-dotdot", "data.1.path", "..", "data[1].path", "must not contain '..'"),
    ("datapath-absolute", "data.1.path", "/etc/passwd", "data[1].path", "not absolute"),
    ("datapath-windows", "data.0.path", "C:\\data\\x.csv", "data[0].path", PATH_SEP),
    ("datapath-newline", "data.0.path", "x\ny.csv", "data[0].path", PATH_SEP),
    ("datapath-nul", "data.0.path", "x\0y.csv", "data[0].path", "must not contain a NUL byte"),
    # datasets
    ("duplicate-dataset", "data.1.name", "train", "data[1].name", "duplicate dataset name 'train'"),
    ("dataset-sha-short", "data.0.sha256", "9f86d08", "data[0].sha256", "64 hex digits"),
    ("dataset-sha512", "data.0.sha256", "sha512:" + HEX64, "data[0].sha256", "64 hex digits"),
    ("dataset-bad-name", "data.0.name", "train set", "data[0].name", NAME_RULE),
    # claim ids
    ("claim-leading-dash", "claim", "-claim", "claim", NAME_RULE),
    ("claim-leading-dot", "claim", ".claim", "claim", NAME_RULE),
    ("claim-space", "claim", "claim 1", "claim", NAME_RULE),
    ("claim-65-chars", "claim", "a" * 65, "claim", "(at most 64 characters)"),
    ("claim-empty", "claim", "", "claim", NAME_RULE),
    ("claim-unicode", "claim", "clâim", "claim", NAME_RULE),
    ("claim-slash", "claim", "a/b", "claim", NAME_RULE),
    # time strings
    ("time-1h", "resources.time", "1h", "resources.time", '"HH:MM:SS" or "D-HH:MM:SS"'),
    ("time-25-61", "resources.time", "25:61:00", "resources.time", "must be below 60"),
    ("time-zero", "resources.time", "0", "resources.time", "must be longer than zero"),
    ("time-zero-int", "resources.time", 0, "resources.time", "must be longer than zero"),
    ("time-negative", "resources.time", "-5", "resources.time", 'must be minutes (e.g. "90")'),
    ("time-negative-int", "resources.time", -5, "resources.time", "must be longer than zero"),
    ("time-day-25h", "resources.time", "1-25:00:00", "resources.time", "hours below 24 with days"),
    ("time-empty", "resources.time", "", "resources.time", "must be minutes"),
    ("time-mm-ss", "resources.time", "01:00", "resources.time", "must be minutes"),
    ("time-too-long", "resources.time", "366-00:00:00", "resources.time", "at most 365 days"),
    # memory strings
    ("memory-space", "resources.memory", "4 GB", "resources.memory", "optional K, M, G or T"),
    ("memory-zero", "resources.memory", "0", "resources.memory", "must be a positive whole"),
    ("memory-negative", "resources.memory", "-1G", "resources.memory", "positive whole number"),
    ("memory-unit-x", "resources.memory", "4X", "resources.memory", "K, M, G or T suffix"),
    ("memory-gb", "resources.memory", "4GB", "resources.memory", "K, M, G or T suffix"),
    ("memory-decimal", "resources.memory", "1.5G", "resources.memory", "whole number"),
    ("memory-huge", "resources.memory", "9999999999T", "resources.memory", "larger than any node"),
    # targets
    ("empty-targets", "targets", {}, "targets", "must not be empty"),
    (
        "target-name-space",
        "targets",
        {"top 1": {"value": 1}},
        "targets['top 1']",
        "name " + NAME_RULE,
    ),
    ("target-name-dash", "targets", {"-acc": {"value": 1}}, "targets.-acc", "name " + NAME_RULE),
    ("target-name-unicode", "targets", {"äcc": {"value": 1}}, "targets['äcc']", "name must start"),
    ("target-name-newline", "targets", {"a\nb": {"value": 1}}, "targets['a\\nb']", "name must"),
    # resources
    ("cpus-zero", "resources.cpus", 0, "resources.cpus", "must be >= 1"),
    ("cpus-too-many", "resources.cpus", 5000, "resources.cpus", "must be <= 4096"),
    ("gpus-negative", "resources.gpus", -1, "resources.gpus", "must be >= 0"),
    ("partition-shell", "resources.partition", "gpu; rm -rf ~", "resources.partition", "Slurm"),
    ("account-newline", "resources.account", "lab\n#SBATCH", "resources.account", "Slurm name"),
    ("seed-negative", "seed", -1, "seed", "must be >= 0"),
    ("seed-too-big", "seed", 2**63, "seed", "must be <= 9223372036854775807"),
    # sandbox
    ("network-host", "sandbox.network", "host", "sandbox.network", "must be 'none'"),
    ("tmpfs-yes", "sandbox.writable_tmpfs", "yes", "sandbox.writable_tmpfs", "not a string"),
    # .def sections, labels, single-line strings
    ("def-section", "image.build.post", "echo hi\n%files\nx y\n", "image.build.post", "line 2"),
    ("def-indented", "image.build.environment", "  %runscript\n", "image.build.environment", "%"),
    ("label-key-space", "image.build.labels", {"a b": "x"}, "image.build.labels['a b']", "name"),
    (
        "label-value-lines",
        "image.build.labels.maintainer",
        "a\nb",
        "image.build.labels.maintainer",
        "must be a single line",
    ),
    ("files-newline", "image.build.files", ["a\nb"], "image.build.files[0]", "single line"),
    ("title-multiline", "title", "Table 2\nrow 3", "title", "must be a single line"),
    ("repo-newline", "code.repo", "https://x\n", "code.repo", "not a repository git can clone"),
    ("repo-relative", "code.repo", "../analysis", "code.repo", "not a repository git can clone"),
    ("data-url", "data.0.url", "www.example.org/x", "data[0].url", "is not a URL"),
    ("data-doi", "data.0.doi", "zenodo.1234", "data[0].doi", "is not a DOI"),
    ("entrypoint-blank", "entrypoint", "   ", "entrypoint", "must not be empty"),
    ("entrypoint-nul", "entrypoint", "python\0run.py", "entrypoint", "NUL"),
]


@pytest.mark.parametrize(
    ("path", "value", "where", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in MUTATIONS],
)
def test_malformed_data_gives_one_line_naming_the_field(
    path: str, value: Any, where: str, fragment: str
) -> None:
    expect_one_problem(problems_of(mutate(path, value)), LABEL, where, fragment)


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("resources.cpus", "['resources.cpus']"),
        ("a\nb", "['a\\nb']"),
        ("<<", "['<<']"),
        ("\u2028", "['\\u2028']"),
        ("[key]", "['[key]']"),
    ],
    ids=["dotted", "newline", "merge-key", "line-separator", "pydantic-marker"],
)
# A key the user wrote that is not a plain word (a dot, a newline) is quoted in the path.
def test_unknown_keys_are_quoted_so_the_path_stays_exact(key: str, where: str) -> None:
    data = good()
    data[key] = 1
    expect_one_problem(problems_of(data), LABEL, where, "unknown field (allowed: version,")


def test_several_problems_give_one_line_each_in_document_order() -> None:
    data = mutate("claim", "-x")
    data["resources"]["cpus"] = "2"
    data["targets"]["accuracy"]["abs_tol"] = -1
    del data["image"]["digest"]
    lines = problems_of(data)
    for line in lines:
        assert_one_line(line)
    assert [line.split(": ")[1] for line in lines] == [
        "claim",
        "image.digest",
        "targets.accuracy.abs_tol",
        "resources.cpus",
    ]


def test_no_pydantic_internals_leak_into_messages() -> None:
    data = mutate("resources.time", 1.5)
    data["targets"]["a b"] = {"value": True}
    data["image"]["build"]["labels"] = {"x y": 1}
    for line in problems_of(data):
        for internal in ("[key]", "function-", "Input should", "str.", "int.", "pydantic"):
            assert internal not in line, line


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([1, 2], "not a list"),
        ("claim-1", "not a string"),
        (None, "not empty"),
        (3, "not a whole number"),
    ],
    ids=["list", "string", "none", "int"],
)
def test_data_that_is_not_a_mapping(data: Any, fragment: str) -> None:
    expect_one_problem(problems_of(data), LABEL, None, "must be a mapping of fields, " + fragment)


# --------------------------------------------------------------------------- malformed files
ANCHOR_RULE = "YAML anchors (&name) and aliases (*name) are not allowed"
BILLION_LAUGHS = b"""\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
GOOD_TEXT = GOOD_YAML.read_bytes()
GOOD_LINES = len(GOOD_TEXT.splitlines())

# (id, file name, bytes, expected "where" (field path or "line N, column M", None: the file
# itself), message fragment)
DOCUMENTS: list[tuple[str, str, bytes, str | None, str]] = [
    (
        "yaml-list",
        "claim.yaml",
        b"- version: 1\n- claim: x\n",
        None,
        "mapping of fields, not a list",
    ),
    ("yaml-scalar", "claim.yaml", b"hello\n", None, "must be a mapping of fields, not a string"),
    ("yaml-number", "claim.yaml", b"42\n", None, "must be a mapping of fields, not a whole number"),
    ("yaml-empty", "claim.yaml", b"", None, "must be a mapping of fields, not empty"),
    ("yaml-only-comment", "claim.yml", b"# nothing\n", None, "not empty"),
    ("yaml-billion-laughs", "claim.yaml", BILLION_LAUGHS, "line 1, column 4", ANCHOR_RULE),
    ("yaml-alias", "claim.yaml", b"a: 1\nb: *a\n", "line 2, column 4", "aliases (*name)"),
    (
        "yaml-merge-alias",
        "claim.yaml",
        b"base: &base {cpus: 1}\nresources:\n  <<: *base\n",
        "line 1, column 7",
        ANCHOR_RULE,
    ),
    ("yaml-merge-inline", "claim.yaml", b"<<: {version: 1}\n" + GOOD_TEXT, "['<<']", "unknown"),
    (
        "yaml-merge-tag",
        "claim.yaml",
        b"!!merge <<: {version: 1}\n",
        "line 1, column 1",
        "could not determine a constructor",
    ),
    (
        "yaml-duplicate-key",
        "claim.yaml",
        GOOD_TEXT + b"claim: other\n",
        f"line {GOOD_LINES + 1}, column 1",
        "duplicate key 'claim'",
    ),
    (
        "yaml-nested-duplicate",
        "claim.yaml",
        b"targets:\n  acc: {value: 1}\n  acc: {value: 2}\n",
        "line 3, column 3",
        "duplicate key 'acc'",
    ),
    (
        "yaml-tab",
        "claim.yaml",
        b"version: 1\ncode:\n\tcommit: x\n",
        "line 3, column 1",
        "found character '\\t' that cannot start any token",
    ),
    ("yaml-unclosed", "claim.yaml", b"version: 1\nclaim: [a\n", "line 3, column 1", "expected ','"),
    ("yaml-bad-indent", "claim.yaml", b"a:\n  b: 1\n c: 2\n", "line 3, column 2", "expected"),
    (
        "yaml-two-documents",
        "claim.yaml",
        b"version: 1\n---\nversion: 1\n",
        "line 2, column 1",
        "expected a single document in the stream, but found another document",
    ),
    ("yaml-int-key", "claim.yaml", b"1: one\n", "line 1, column 1", "keys must be strings, not 1"),
    (
        "yaml-null-key",
        "claim.yaml",
        b"~: x\n",
        "line 1, column 1",
        "keys must be strings, not None",
    ),
    (
        "yaml-python-tag",
        "claim.yaml",
        b"claim: !!python/object/apply:os.system [id]\n",
        "line 1, column 8",
        "could not determine a constructor for the tag",
    ),
    ("yaml-binary-tag", "claim.yaml", b"claim: !!binary aGk=\n", "line 1, column 8", "not allowed"),
    ("yaml-timestamp-tag", "claim.yaml", b"t: !!timestamp x\n", "line 1, column 4", "not allowed"),
    (
        "yaml-bool-tag-yes",
        "claim.yaml",
        b"b: !!bool yes\n",
        "line 1, column 4",
        "not true or false",
    ),
    ("yaml-int-tag-empty", "claim.yaml", b"seed: !!int\n", "line 1, column 7", "is not a number"),
    ("yaml-float-tag-junk", "claim.yaml", b"x: !!float abc\n", "line 1, column 4", "not a number"),
    (
        "yaml-huge-int",
        "claim.yaml",
        b"seed: " + b"9" * 5000 + b"\n",
        None,
        "seed: a 5000-character number is too large",
    ),
    ("yaml-nul", "claim.yaml", b"version: 1\nclaim: a\x00b\n", "line 2, column 9", "U+0000"),
    ("yaml-deep", "claim.yaml", b"[" * 50_000, None, "invalid YAML: nested too deeply"),
    ("yaml-unknown-directive", "claim.yaml", b"%YAML 2.0\n---\na: 1\n", "line 1, column 1", "1.*"),
    (
        "yaml-not-utf8",
        "claim.yaml",
        b"version: 1\nclaim: caf\xe9\n",
        None,
        "not UTF-8 text (byte 0xe9 at offset 21)",
    ),
    ("yaml-utf16", "claim.yaml", "version: 1\n".encode("utf-16"), None, "byte 0xff at offset 0"),
    ("json-duplicate-key", "claim.json", b'{"claim": "a", "claim": "b"}', None, "duplicate key"),
    ("json-nan", "claim.json", b'{"seed": NaN}', None, "NaN is not a number a manifest may hold"),
    ("json-infinity", "claim.json", b'{"seed": -Infinity}', None, "-Infinity is not a number"),
    ("json-trailing", "claim.json", b'{"version": 1} []', "line 1, column 16", "Extra data"),
    ("json-trailing-comma", "claim.json", b'{"version": 1,}', "line 1, column 15", "invalid JSON"),
    ("json-single-quotes", "claim.json", b"{'version': 1}", "line 1, column 2", "invalid JSON"),
    ("json-list", "claim.json", b"[]", None, "must be a mapping of fields, not a list"),
    ("json-empty", "claim.json", b"", "line 1, column 1", "invalid JSON: Expecting value"),
    ("json-deep", "claim.json", b"[" * 50_000, None, "invalid JSON: nested too deeply"),
    ("json-huge-int", "claim.json", b'{"seed": ' + b"9" * 5000 + b"}", None, "seed: a 5000-"),
    ("json-not-utf8", "claim.json", b'{"claim": "\xff"}', None, "byte 0xff at offset 11"),
]


@pytest.mark.parametrize(
    ("name", "raw", "where", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in DOCUMENTS],
)
def test_malformed_file_gives_one_line(
    tmp_path: Path, name: str, raw: bytes, where: str | None, fragment: str
) -> None:
    path = tmp_path / name
    path.write_bytes(raw)
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(info.value.problems, str(path), where, fragment)


def test_yaml_and_json_errors_name_line_and_column() -> None:
    """The position is 1-based, as editors show it."""
    with pytest.raises(ManifestError) as info:
        parse_mod.parse_document(b"version: 1\nclaim: a\n  code: b\n", ".yaml", LABEL)
    assert info.value.problems[0].startswith(f"{LABEL}: line 3, column 7: invalid YAML: ")


def test_a_directory_is_not_a_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "claim.yaml"
    folder.mkdir()
    with pytest.raises(ManifestError) as info:
        models_mod.load(folder)
    expect_one_problem(info.value.problems, str(folder), None, "is a directory")


def test_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(info.value.problems, str(path), None, "no such file")


def test_an_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "claim.txt"
    path.write_bytes(GOOD_TEXT)
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(info.value.problems, str(path), None, "name it .yaml, .yml or .json")


def test_a_file_over_one_mib(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_bytes(GOOD_TEXT + b"#" * rules_mod.MAX_MANIFEST_BYTES)
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(info.value.problems, str(path), None, f"larger than {1 << 20} bytes")


def test_a_file_of_exactly_one_mib_is_read(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_bytes(GOOD_TEXT + b"#" * (rules_mod.MAX_MANIFEST_BYTES - len(GOOD_TEXT)))
    assert models_mod.load(path).spec == models_mod.load(GOOD_YAML).spec


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "a\nb.yaml"
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    assert_one_line(info.value.problems[0])
    assert info.value.problems[0].endswith("a\\nb.yaml: no such file")


def test_a_file_name_with_a_nul_byte(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        models_mod.load(f"{tmp_path}/a\0b.yaml")
    assert_one_line(info.value.problems[0])
    assert "cannot be opened" in info.value.problems[0]


def test_count_of_malformed_cases() -> None:
    """The issue asks for at least 40 malformed manifests; keep this table from shrinking."""
    assert len(MUTATIONS) + len(DOCUMENTS) >= 150


# --------------------------------------------------------------------------- what is accepted
def load_text(tmp_path: Path, text: str, name: str = "claim.yaml") -> models_mod.Manifest:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return models_mod.load(path)


def replace_line(old: str, new: str) -> str:
    text = GOOD_TEXT.decode("utf-8")
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_good_manifest_uses_every_field() -> None:
    spec = models_mod.load(GOOD_YAML).spec
    fields_set = {
        "ManifestSpec": spec.model_fields_set,
        "CodeSpec": spec.code.model_fields_set,
        "ImageSpec": spec.image.model_fields_set,
        "BuildSpec": spec.image.build.model_fields_set if spec.image.build else set(),
        "ResourcesSpec": spec.resources.model_fields_set,
        "SandboxSpec": spec.sandbox.model_fields_set,
        "DatasetSpec": spec.data[0].model_fields_set,
    }
    models: dict[str, type[pydantic.BaseModel]] = {
        "ManifestSpec": models_mod.ManifestSpec,
        "CodeSpec": models_mod.CodeSpec,
        "ImageSpec": models_mod.ImageSpec,
        "BuildSpec": models_mod.BuildSpec,
        "ResourcesSpec": models_mod.ResourcesSpec,
        "SandboxSpec": models_mod.SandboxSpec,
        "DatasetSpec": models_mod.DatasetSpec,
    }
    # a claim over many runs (runs, and the targets' statistics) is test_manifest_runs.py's;
    # one of paired measurements (variants, pairing) is test_manifest_pairs.py's; declared
    # evidence files (evidence) test_manifest_evidence.py's
    fields_set["ManifestSpec"] |= {"runs", "variants", "pairing", "evidence"}
    for name, model in models.items():
        assert fields_set[name] == set(model.model_fields), name
    assert len(spec.data) == 2
    assert set(spec.targets) == {"accuracy", "loss"}
    assert spec.seed == 42
    assert spec.is_gpu


def test_json_and_yaml_forms_give_equal_models() -> None:
    assert models_mod.load(GOOD_YAML).spec == models_mod.load(GOOD_JSON).spec


def test_minimal_manifest_gets_the_defaults() -> None:
    spec = models_mod.load(MINIMAL_YAML).spec
    assert spec.title is None
    assert spec.data == ()
    assert spec.seed is None
    assert spec.image.build is None
    assert spec.code.working_dir is None
    assert spec.resources.cpus == 1
    assert spec.resources.memory == "4G"
    assert spec.resources.memory_mib == 4096
    assert spec.resources.gpus == 0
    assert not spec.is_gpu
    assert spec.resources.time_s == 30 * 60
    assert spec.sandbox.writable_tmpfs is True
    assert spec.sandbox.network == "none"
    assert spec.targets["accuracy"].abs_tol == 0.0
    assert spec.targets["accuracy"].rel_tol == 0.0


def test_sha256_is_of_the_file_bytes() -> None:
    loaded = models_mod.load(GOOD_YAML)
    raw = GOOD_YAML.read_bytes()
    assert loaded.sha256 == hashlib.sha256(raw).hexdigest()
    assert loaded.raw == raw
    assert loaded.path == GOOD_YAML


def test_models_are_frozen() -> None:
    spec = models_mod.load(GOOD_YAML).spec
    with pytest.raises(pydantic.ValidationError):
        spec.claim = "other"  # type: ignore[misc]


def test_unquoted_hh_mm_ss_is_one_hour_not_sexagesimal(tmp_path: Path) -> None:
    """YAML 1.1 reads 01:00:00 as the base-60 integer 3600, which would mean 3600 minutes."""
    spec = load_text(tmp_path, replace_line('time: "01:00:00"', "time: 01:00:00")).spec
    assert spec.resources.time == "01:00:00"
    assert spec.resources.time_s == 3600


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("90", 90 * 60),
        ('"90"', 90 * 60),
        ('"0090"', 90 * 60),
        ("00:00:01", 1),
        ("1-00:00:00", 86400),
        ("2-03:04:05", ((2 * 24 + 3) * 60 + 4) * 60 + 5),
        ("48:00:00", 48 * 3600),
    ],
)
def test_time_limits(tmp_path: Path, written: str, seconds: int) -> None:
    spec = load_text(tmp_path, replace_line('time: "01:00:00"', f"time: {written}")).spec
    assert spec.resources.time_s == seconds


@pytest.mark.parametrize(
    ("written", "mib"),
    [
        ("512", 512),
        ("1K", 1),
        ("1024K", 1),
        ("1025K", 2),
        ("1M", 1),
        ("4G", 4096),
        ("2g", 2048),
        ("1T", 1024 * 1024),
    ],
)
def test_memory_suffixes_convert_to_mib(tmp_path: Path, written: str, mib: int) -> None:
    spec = load_text(tmp_path, replace_line("memory: 16G", f'memory: "{written}"')).spec
    assert spec.resources.memory_mib == mib


def test_leading_zero_numbers_stay_strings(tmp_path: Path) -> None:
    """JSON has no 0001; in a manifest `claim: 0001` is the claim id "0001", quoted or not."""
    unquoted = load_text(tmp_path, replace_line("claim: claim-0001", "claim: 0001")).spec
    quoted = load_text(tmp_path, replace_line("claim: claim-0001", 'claim: "0001"')).spec
    assert unquoted.claim == quoted.claim == "0001"
    assert (
        load_text(tmp_path, replace_line("claim: claim-0001", "claim: 00.5")).spec.claim == "00.5"
    )


def test_a_leading_zero_number_where_a_number_belongs_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(replace_line("seed: 42", "seed: 0042"), encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(
        info.value.problems, str(path), "seed", "must be a whole number, not a string"
    )


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On"])
def test_yaml_1_1_booleans_stay_strings(tmp_path: Path, word: str) -> None:
    spec = load_text(tmp_path, replace_line("claim: claim-0001", f"claim: {word}")).spec
    assert spec.claim == word
    text = replace_line("writable_tmpfs: true", f"writable_tmpfs: {word}")
    path = tmp_path / "tmpfs.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        models_mod.load(path)
    expect_one_problem(
        info.value.problems, str(path), "sandbox.writable_tmpfs", "true or false, not a string"
    )


@pytest.mark.parametrize("word", ["2001-01-01", "0x1F", "0o17", "1_000", "1:30", "~x", ".5e"])
def test_other_yaml_1_1_scalars_stay_strings(tmp_path: Path, word: str) -> None:
    spec = load_text(tmp_path, replace_line("title: Table 2, row 3", f"title: {word}")).spec
    assert spec.title == word


@pytest.mark.parametrize(
    ("written", "value"),
    [("1", 1.0), ("-2", -2.0), ("0.5", 0.5), ("1e-3", 0.001), ("1.", 1.0), (".5", 0.5)],
)
def test_numbers_read_as_json_would(tmp_path: Path, written: str, value: float) -> None:
    spec = load_text(tmp_path, replace_line("value: 0.31", f"value: {written}")).spec
    assert spec.targets["loss"].value == value
    assert isinstance(spec.targets["loss"].value, float)


def test_true_false_and_null_are_typed(tmp_path: Path) -> None:
    text = replace_line("writable_tmpfs: true", "writable_tmpfs: False")
    text = text.replace("title: Table 2, row 3", "title: ~")
    spec = load_text(tmp_path, text).spec
    assert spec.sandbox.writable_tmpfs is False
    assert spec.title is None


def test_commit_ids_are_lower_cased(tmp_path: Path) -> None:
    spec = load_text(tmp_path, replace_line(HEX40, HEX40.upper())).spec
    assert spec.code.commit == HEX40


@pytest.mark.parametrize(
    ("written", "field"),
    [
        ("sha256:" + HEX64, "image"),
        (HEX64, "image"),
        ("SHA256:" + HEX64.upper(), "image"),
        (HEX64, "data"),
        ("sha256:" + HEX64, "data"),
        (HEX64.upper(), "data"),
    ],
)
def test_one_digest_form_is_accepted_everywhere(written: str, field: str) -> None:
    """`hash` prints bare hex, `build` prints sha256:<hex>: either pastes into either field."""
    if field == "image":
        spec = models_mod.validate_data(mutate("image.digest", written), LABEL)
        assert spec.image.digest == "sha256:" + HEX64
    else:
        spec = models_mod.validate_data(mutate("data.0.sha256", written), LABEL)
        assert spec.data[0].sha256 == HEX64


def test_a_missing_image_digest_says_how_to_pin_one() -> None:
    # image.build is set: the image is still to be built, and the one step is the command
    (line,) = problems_of(mutate("image.digest"))
    assert line == (
        f"{LABEL}: image.digest: not pinned yet; run dotlab-hpc build claim.yaml -o claim.sif --pin"
    )
    # nothing to build: build one, or pin an image you have
    data = mutate("image.digest")
    del data["image"]["build"]
    (line,) = problems_of(data)
    assert line.startswith(f"{LABEL}: image.digest: required field is missing; ")
    assert "dotlab-hpc build MANIFEST -o claim.sif --pin" in line


def test_a_target_without_tolerance_is_warned_about_not_refused() -> None:
    data = mutate("targets.loss", {"value": 5.5})
    models_mod.validate_data(data, LABEL)  # valid
    warned = rules_mod.tolerance_warnings(data, LABEL)
    assert warned == [
        f"{LABEL}: targets.loss: no tolerance (abs_tol and rel_tol are 0): only an exact match"
        " reproduces; add abs_tol or rel_tol, or write abs_tol: 0 to mean it"
    ]
    zero = mutate("targets.loss", {"value": 5.5, "abs_tol": 0})
    assert rules_mod.tolerance_warnings(zero, LABEL) == []
    assert rules_mod.tolerance_warnings(good(), LABEL) == []


def test_a_64_hex_commit_is_accepted(tmp_path: Path) -> None:
    spec = load_text(tmp_path, replace_line(HEX40, HEX64)).spec
    assert spec.code.commit == HEX64


def test_working_dir_is_normalised(tmp_path: Path) -> None:
    text = replace_line("working_dir: analysis/src", "working_dir: ./analysis//src/")
    assert load_text(tmp_path, text).spec.code.working_dir == "analysis/src"


@pytest.mark.parametrize("name", ["claim.yml", "claim.YAML", "claim.Json"])
def test_extensions_are_case_insensitive(tmp_path: Path, name: str) -> None:
    raw = GOOD_JSON.read_bytes() if name.lower().endswith(".json") else GOOD_TEXT
    (tmp_path / name).write_bytes(raw)
    assert models_mod.load(tmp_path / name).spec == models_mod.load(GOOD_YAML).spec


def test_a_utf8_bom_is_accepted_in_yaml(tmp_path: Path) -> None:
    (tmp_path / "claim.yaml").write_bytes(b"\xef\xbb\xbf" + GOOD_TEXT)
    assert models_mod.load(tmp_path / "claim.yaml").spec == models_mod.load(GOOD_YAML).spec


def test_json_schema_is_strict_and_uses_manifest_keys() -> None:
    schema = models_mod.json_schema()
    assert schema["additionalProperties"] is False
    for name, sub in schema["$defs"].items():
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False, name
    build = schema["$defs"]["BuildSpec"]
    assert "from" in build["properties"]
    assert "from_" not in build["properties"]
    assert build["required"] == ["from"]


def test_a_fifo_as_the_manifest_is_refused_without_blocking(tmp_path: Path, no_hang: None) -> None:
    fifo = tmp_path / "claim.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError) as info:
        models_mod.load(fifo)
    assert info.value.problems == [f"{fifo}: is not a regular file (it is a FIFO)"]


def test_a_link_to_dev_zero_as_the_manifest_is_refused(tmp_path: Path, no_hang: None) -> None:
    link = tmp_path / "claim.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ManifestError) as info:
        models_mod.load(link)
    assert "is not a regular file" in info.value.problems[0]


# ------------------------------------------------------------------------ read twice, parsed once
def test_the_same_bytes_are_parsed_once_and_a_changed_file_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission loads each manifest twice (by job, then the plan): the second load of the
    same bytes is the same frozen spec; a file changed in between is read and parsed again."""
    parsed: list[str] = []
    real = parse_mod.parse_document

    def counting(raw: bytes, suffix: str, label: str) -> Any:
        parsed.append(label)
        return real(raw, suffix, label)

    monkeypatch.setattr(models_mod, "parse_document", counting)
    models_mod._validated.cache_clear()
    p = tmp_path / "c.yaml"
    p.write_bytes(GOOD_YAML.read_bytes())
    first, second = models_mod.load(p), models_mod.load(p)
    assert parsed == [str(p)] and second.spec is first.spec
    p.write_bytes(GOOD_YAML.read_bytes().replace(b"claim: ", b"claim: x", 1))
    changed = models_mod.load(p)
    assert len(parsed) == 2 and changed.spec.claim == "x" + first.spec.claim
    assert changed.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()


def test_an_unchanged_file_is_not_read_again_and_one_rewritten_in_place_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second load of a file that is still the same one (device, inode, size, modification
    and change times) reads nothing; a rewrite of the same size with its modification time put
    back still changes the change time, so it is read again."""
    read: list[str] = []
    real = parse_mod.read_raw

    def counting(path: Any) -> Any:
        read.append(str(path))
        return real(path)

    monkeypatch.setattr(models_mod, "read_raw", counting)
    p = tmp_path / "c.yaml"
    p.write_bytes(GOOD_YAML.read_bytes())
    first = models_mod.load(p)
    assert models_mod.load(p) is first and models_mod.load(str(p)).spec is first.spec
    assert read == [str(p)]  # the same name, as a Path or as a str
    before = p.stat()
    p.write_bytes(GOOD_YAML.read_bytes().replace(b"claim: claim-0001", b"claim: claim-0002", 1))
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert p.stat().st_size == before.st_size and p.stat().st_mtime_ns == before.st_mtime_ns
    again = models_mod.load(p)
    assert len(read) == 2 and again.raw == p.read_bytes() != first.raw
    assert again.spec.claim == "claim-0002"


def test_an_invalid_manifest_is_refused_each_time(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("version: 1\n")
    for _ in range(2):  # nothing of a refused document is kept
        with pytest.raises(ManifestError):
            models_mod.load(p)

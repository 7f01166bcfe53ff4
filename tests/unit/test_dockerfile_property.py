"""Properties of the Dockerfile conversion over generated WORKDIR/COPY/RUN/ENV/ARG/CMD sequences."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dotlab_hpc.container.deffile import parse_def
from dotlab_hpc.container.dockerfile import dockerfile_to_def
from dotlab_hpc.errors import UsageError

A = "sha256:" + "a" * 64
PY = f"python:3.11-slim@{A}"

NAMES = st.sampled_from(["A", "B", "V", "TARGETARCH"])
SEG = st.sampled_from(["a", "b", "app", "..", ".", "src"])
PATHS = st.lists(SEG, min_size=1, max_size=3).map("/".join)
VALUES = st.one_of(
    st.sampled_from(["1", "x y", "", "$A", "${B}", "${V:-d}", "${A:+s}", "$PATH", "'$A'", "\\$A"]),
    # a value ending in \ (even with spaces after it, as Docker reads it) would continue the
    # line into the next instruction
    st.text(alphabet="ab$/{}:-+'\" \\", max_size=8).filter(
        lambda v: not v.rstrip(" \t").endswith("\\")
    ),
)
STEPS = st.one_of(
    st.tuples(st.just("WORKDIR"), st.one_of(PATHS, PATHS.map(lambda p: "/" + p))),
    st.tuples(st.just("COPY"), st.tuples(SEG, PATHS, st.booleans())),
    st.tuples(st.just("ADD"), st.tuples(SEG, PATHS, st.booleans())),  # an archive: unpacked
    st.tuples(st.just("RUN"), st.integers(0, 99)),
    st.tuples(st.just("ENV"), st.tuples(NAMES, VALUES)),
    st.tuples(st.just("ARG"), st.tuples(NAMES, st.one_of(st.none(), VALUES))),
    st.tuples(st.just("CMD"), st.sampled_from(['["a", "b"]', "echo $A"])),
    st.tuples(st.just("ENTRYPOINT"), st.sampled_from(['["e"]', "e x"])),
)


def render(steps: list[tuple[str, Any]]) -> str:
    out = [f"FROM {PY}"]
    for kw, arg in steps:
        if kw == "COPY":
            src, dest, slash = arg
            out.append(f"COPY f{src.replace('.', 'd')} {dest}{'/' if slash else ''}")
        elif kw == "ADD":
            src, dest, slash = arg
            out.append(f"ADD a{src.replace('.', 'd')}.tar.gz {dest}{'/' if slash else ''}")
        elif kw == "RUN":
            out.append(f"RUN echo step{arg}")
        elif kw == "ENV":
            name, value = arg
            out.append(f"ENV {name}={value}")
        elif kw == "ARG":
            name, value = arg
            out.append(f"ARG {name}" if value is None else f"ARG {name}={value}")
        else:
            out.append(f"{kw} {arg}")
    return "\n".join(out) + "\n"


def post_of(text: str) -> list[str]:
    for s in parse_def(text)[-1].sections:
        if s.name == "post":
            return s.body.split("\n")
    return []


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(STEPS, max_size=10))
def test_conversion_keeps_order_and_places_or_refuses_at_a_line(
    steps: list[tuple[str, Any]],
) -> None:
    text = render(steps)
    try:
        conv = dockerfile_to_def(text, source="Dockerfile")
    except UsageError as e:
        assert "\n" not in e.message
        assert re.match(r"Dockerfile:\d+: ", e.message), e.message
        return
    post = post_of(conv.text)
    # RUN lines and the placing of staged copies keep the Dockerfile's order
    runs = [int(m.group(1)) for x in post if (m := re.fullmatch(r"echo step(\d+)", x))]
    assert runs == [a for kw, a in steps if kw == "RUN"]
    # every COPY lands under the WORKDIR in force (or / before any)
    workdir = "/"
    expected: list[str] = []
    ran, after_run = False, 0
    for kw, arg in steps:
        if kw == "WORKDIR":
            workdir = "/" + posixpath.normpath(posixpath.join(workdir, str(arg))).lstrip("/")
        elif kw == "RUN":
            ran = True
        elif kw in ("COPY", "ADD"):
            _, dest, _ = arg
            after_run += ran or kw == "ADD"  # an archive is always unpacked in %post
            expected.append("/" + posixpath.normpath(posixpath.join(workdir, dest)).lstrip("/"))
    placed = [x for x in post if "/.dotlab-files/" in x and not x.startswith("rm ")]
    files = [
        line.split()[1]
        for s in parse_def(conv.text)[-1].sections
        if s.name == "files"
        for line in s.body.split("\n")
        if line.strip()
    ]
    direct = [f for f in files if not f.startswith("/.dotlab-files/")]
    assert len(placed) + len(direct) == len(expected)
    for target in direct:
        assert target in expected
    for step in placed:
        assert any(f"mkdir -p {t}" in step or f"mkdir -p '{t}'" in step for t in expected), step
    # a COPY after a RUN, or an archive, is never a direct %files line: it is placed in %post
    assert len(placed) >= after_run
    assert sum(" && tar -xzf /.dotlab-files/" in x for x in post) == sum(
        kw == "ADD" for kw, _ in steps
    )
    # nothing goes straight into %files once something was staged: it would land first
    staged = [f.startswith("/.dotlab-files/") for f in files]
    assert staged == sorted(staged)
    # an ENV value never holds a reference to an ARG or ENV defined before every ENV line
    defined: set[str] = set()
    for kw, a in steps:
        if kw == "ENV":
            break
        if kw == "ARG" and a[1] is not None:
            defined.add(a[0])
    for s in parse_def(conv.text)[-1].sections:
        if s.name == "environment":
            for name in defined:
                assert not re.search(rf"(?<!\\)\$\{{?{name}\b", s.body), s.body

"""A track read from a folder or a TOML file (evaluate/track.py), and the ways it is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.evaluate.track import read_track


def _folder(root: Path, name: str, *parts: str) -> Path:
    a = root / name
    for p in parts:
        (a / p).mkdir(parents=True, exist_ok=True)
    return a


def test_a_folder_track_has_one_artifact_a_folder_by_name(tmp_path: Path) -> None:
    t = tmp_path / "track"
    a = _folder(t, "paper-b", "bundle", "code", "data")
    (a / "key.pub").write_text("k")
    (a / "NOTE").write_text("shepherd:\n  A. Reviewer\n")
    b = _folder(t, "paper-a", "code")
    (b / "bundle.tar").write_bytes(b"")
    c = _folder(t, "paper-c", "code", "bundles/one", "bundles/.hidden")
    (c / "bundles" / "two.tar").write_bytes(b"")
    _folder(t, ".git")
    track = read_track(t)
    assert [x.name for x in track.artifacts] == ["paper-a", "paper-b", "paper-c"]
    pa, pb, pc = track.artifacts
    assert pa.bundles == (b / "bundle.tar",) and pa.data is None and pa.key is None
    assert pb.bundles == (a / "bundle",) and pb.data == a / "data" and pb.key == a / "key.pub"
    assert pb.note == "shepherd: A. Reviewer"
    assert pc.bundles == (c / "bundles" / "one", c / "bundles" / "two.tar")


def test_a_folder_without_a_bundle_is_left_to_its_check(tmp_path: Path) -> None:
    t = tmp_path / "track"
    a = _folder(t, "paper", "code")
    (art,) = read_track(t).artifacts
    assert art.bundles == (a / "bundle",)  # missing: its check says so, for it alone


def test_a_toml_track_names_its_paths_relative_to_itself(tmp_path: Path) -> None:
    f = tmp_path / "t" / "track.toml"
    f.parent.mkdir()
    f.write_text(
        "[[artifact]]\n"
        'name = "p1"\nbundle = "b/p1.tar"\ncode = "code/p1"\ndata = "/abs/data"\n'
        'key = "keys/p1.pub"\nnote = "a note"\n'
        "[[artifact]]\n"
        'name = "p2"\nbundles = ["x", "y.tar"]\ncode = "code/p2"\n'
    )
    p1, p2 = read_track(f).artifacts
    base = f.parent
    assert p1.bundles == (base / "b" / "p1.tar",) and p1.code == base / "code" / "p1"
    assert p1.data == Path("/abs/data") and p1.key == base / "keys" / "p1.pub"
    assert p1.note == "a note"
    assert p2.bundles == (base / "x", base / "y.tar") and p2.data is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not toml = = =", "not TOML"),
        ("[x]\na = 1\n", "unknown table or key 'x'"),
        ("artifact = 3\n", "[[artifact]] tables"),
        ('[[artifact]]\nname = "a"\ncode = "c"\n', "give bundle = "),
        ('[[artifact]]\nname = "a"\nbundle = "b"\nbundles = ["c"]\ncode = "c"\n', "one of them"),
        ('[[artifact]]\nname = "a"\nbundles = []\ncode = "c"\n', "at least one"),
        ('[[artifact]]\nname = "a b"\nbundle = "b"\ncode = "c"\n', "an artifact's name is"),
        ('[[artifact]]\nname = "../x"\nbundle = "b"\ncode = "c"\n', "an artifact's name is"),
        ('[[artifact]]\nname = "a"\nbundle = "b"\n', "artifact[0].code: required"),
        (
            '[[artifact]]\nname = "a"\nbundle = "b"\ncode = "c"\ncolour = 1\n',
            "unknown key 'colour'",
        ),
        ('[[artifact]]\nname = "a"\nbundle = "b"\ncode = 3\n', "artifact[0].code"),
        (
            '[[artifact]]\nname = "a"\nbundle = "b"\ncode = "c"\n'
            '[[artifact]]\nname = "a"\nbundle = "b"\ncode = "c"\n',
            "artifact 'a' is listed twice",
        ),
        ("", "a track lists its artifacts as [[artifact]] tables"),
    ],
)
def test_a_bad_toml_track_is_one_line_naming_the_field(
    tmp_path: Path, text: str, words: str
) -> None:
    f = tmp_path / "track.toml"
    f.write_text(text)
    with pytest.raises(UsageError) as e:
        read_track(f)
    assert words in e.value.message and str(f) in e.value.message
    assert "\n" not in e.value.message


def test_a_hostile_track_file_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "track.toml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"not a regular file|FIFO|cannot be read"):
        read_track(fifo)
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as f:
        f.truncate(2 << 20)  # sparse: 2 MiB of nothing
    with pytest.raises(UsageError, match="larger than"):
        read_track(huge)
    with pytest.raises(UsageError, match="no such track"):
        read_track(tmp_path / "nowhere")
    bad = tmp_path / "bad-name"
    _folder(bad, "no way", "code")
    with pytest.raises(UsageError, match="an artifact's name is"):
        read_track(bad)


def test_a_track_names_a_bundle_by_its_pinned_reference(tmp_path: Path) -> None:
    track = tmp_path / "track.toml"
    ref = "oras://registry.example.org/lab/paper-1:v1@sha256:" + "ab" * 32
    track.write_text(f'[[artifact]]\nname = "p1"\nbundle = "{ref}"\ncode = "code"\n')
    (art,) = read_track(track).artifacts
    assert art.bundles == (ref,) and art.code == tmp_path / "code"
    track.write_text(
        '[[artifact]]\nname = "p1"\nbundle = "oras://r.example.org/x:v1"\ncode = "c"\n'
    )
    with pytest.raises(UsageError, match=r"artifact\[0\]\.bundle \(p1\): .* is not pinned"):
        read_track(track)
    track.write_text('[[artifact]]\nname = "p1"\nbundle = "oras://Bad Ref"\ncode = "c"\n')
    with pytest.raises(UsageError, match=r"artifact\[0\]\.bundle \(p1\)"):
        read_track(track)

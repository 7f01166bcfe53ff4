"""verify: dataset and image checks, refusals, usage errors, the report (git is faked here)."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.fsio import sha256 as sha256_mod
from dotlab_hpc.manifest.models import ManifestSpec, validate_data
from dotlab_hpc.printers import table as table_mod
from dotlab_hpc.printers.reports import verify_table
from dotlab_hpc.verify import hashing
from dotlab_hpc.verify import inputs as verify
from tests.support.fakes import clean_git


def hash_one(path: Path) -> str:
    """What `dotlab-hpc hash PATH` prints for one path."""
    return hashing.hash_paths([path])[0]


COMMIT = "3f2a" + "0" * 36


def spec(data: list[dict[str, str]], digest: str) -> ManifestSpec:
    return validate_data(
        {
            "version": 1,
            "claim": "c1",
            "code": {"commit": COMMIT},
            "data": data,
            "image": {"digest": digest},
            "entrypoint": "python run.py",
            "targets": {"acc": {"value": 1.0}},
            "resources": {"time": "00:01:00"},
        },
        "test.yaml",
    )


def spec_text_hash(root: Path) -> str:
    """The docs/contract.md §3 directory rule, written independently of verify.py."""
    entries = []
    for dirpath, _dirs, files in os.walk(os.fsencode(root)):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, os.fsencode(root))
            with open(full, "rb") as f:
                entries.append((rel, hashlib.sha256(f.read()).hexdigest()))
    text = b"".join(d.encode() + b"  " + rel + b"\n" for rel, d in sorted(entries))
    return hashlib.sha256(text).hexdigest()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Nested folders, spaces, unicode, empty files, names sorting differently per component."""
    root = tmp_path / "data" / "set"
    for rel, content in {
        "a/b": b"1",
        "a b": b"2",
        "a-b": b"",
        "a.b": b"4",
        "ab": b"5",
        "deep/er/still/file.txt": b"x" * 5000,
        "espa\u00f1ol/\u00e9t\u00e9 \u65e5\u672c.csv": b"6",
        "empty": b"",
        " lead and trail ": b"7",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    (root / "an empty dir").mkdir()
    (root / os.fsdecode(b"latin1-\xe9.bin")).write_bytes(b"8")  # not UTF-8
    return root


# --------------------------------------------------------------------------- hashing paths
def test_directory_hash_is_the_spec_text_rule(tree: Path) -> None:
    assert hash_one(tree) == spec_text_hash(tree)


def test_directory_lines_are_sorted_by_whole_path_bytes(tree: Path) -> None:
    t = hashing.scan(tree, shown="set", follow_top=False)
    rels = list(t.rels)
    assert rels == sorted(rels)
    # "a b" < "a-b" < "a.b" < "a/b" < "ab": a per-folder walk would put "a/b" elsewhere
    assert [r for r in rels if r.startswith(b"a") and len(r) == 3] == [
        b"a b",
        b"a-b",
        b"a.b",
        b"a/b",
    ]


def test_file_hash_is_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"hello")
    assert hash_one(tmp_path / "f") == hashlib.sha256(b"hello").hexdigest()


def test_empty_directory_hashes_the_empty_text(tmp_path: Path) -> None:
    assert hash_one(tmp_path) == hashlib.sha256(b"").hexdigest()


def test_hash_paths_many_in_one_pass(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    got = hashing.hash_paths([tree, tmp_path / "f", tree], workers=2)
    assert got == [spec_text_hash(tree), hashlib.sha256(b"x").hexdigest(), spec_text_hash(tree)]


def test_hash_line_escapes_like_sha256sum() -> None:
    assert table_mod.hash_line("ab", "x y") == "ab  x y"
    assert table_mod.hash_line("ab", "a\\b\nc") == "\\ab  a\\\\b\\nc"


# --------------------------------------------------------------------------- refusals
REFUSALS = {
    "symlink to a file": "symlink",
    "symlink to a folder": "symlink",
    "dangling symlink": "symlink",
    "fifo": "FIFO",
    "socket": "socket",
    "newline": "newline",
    "backslash": "backslash",
    "carriage return": "carriage return",
}


def _make(kind: str, folder: Path) -> str:
    (folder / "ok.csv").write_text("fine")
    if kind == "symlink to a file":
        (folder / "link.csv").symlink_to("ok.csv")
        return "link.csv"
    if kind == "symlink to a folder":
        (folder / "sub").mkdir()
        (folder / "sub" / "linked").symlink_to(folder)
        return "sub/linked"
    if kind == "dangling symlink":
        (folder / "gone").symlink_to("nowhere")
        return "gone"
    if kind == "fifo":
        os.mkfifo(folder / "pipe")
        return "pipe"
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(folder / "sock"))
        s.close()
        return "sock"
    name = {"newline": "a\nb", "backslash": "a\\b", "carriage return": "a\rb"}[kind]
    (folder / name).write_text("x")
    return name if name.isprintable() else repr(name)[1:-1]  # escaped: messages stay one line


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_refused_inside_a_dataset(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "d"
    folder = data / "set"
    folder.mkdir(parents=True)
    shown = _make(kind, folder)
    with pytest.raises(UsageError, match=REFUSALS[kind]) as info:
        hash_one(folder)
    assert shown in info.value.message
    report = _verify(tmp_path, data, [{"name": "set", "path": "set", "sha256": "0" * 64}])
    (check,) = [c for c in report.checks if c.kind == "dataset"]
    assert not check.ok and check.actual is None
    assert REFUSALS[kind] in check.reason and shown in check.reason
    assert check.line().startswith("dataset set (set): ")
    assert "set/" in check.line()


def test_refused_device_node(tmp_path: Path) -> None:
    # /dev/null is a character device every Linux has; make --data-dir point at /dev.
    report = _verify(tmp_path, Path("/dev"), [{"name": "n", "path": "null", "sha256": "0" * 64}])
    (check,) = [c for c in report.checks if c.kind == "dataset"]
    assert not check.ok
    assert "is a character device" in check.reason


def test_refused_device_node_inside_a_dataset(tmp_path: Path) -> None:
    folder = tmp_path / "d" / "set"
    folder.mkdir(parents=True)
    try:
        os.mknod(folder / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("cannot make a device node here (no CAP_MKNOD)")
    with pytest.raises(UsageError, match="set/dev: is a character device"):
        hash_one(folder)


def _verify(
    tmp_path: Path,
    data_dir: Path,
    data: list[dict[str, str]],
    *,
    image: Path | None = None,
    digest: str | None = None,
) -> verify.VerifyReport:
    code = tmp_path / "code"
    (code / ".git").mkdir(parents=True, exist_ok=True)
    if image is None:
        image = tmp_path / "img.sif"
        image.write_bytes(b"SIF")
    digest = digest or "sha256:" + hashlib.sha256(b"SIF").hexdigest()
    return verify.verify_inputs(
        spec(data, digest), code_dir=code, data_dir=data_dir, image=image, runner=clean_git(COMMIT)
    )


def _dataset(report: verify.VerifyReport) -> verify.Check:
    (check,) = [c for c in report.checks if c.kind == "dataset"]
    return check


def test_missing_dataset_is_a_mismatch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    report = _verify(tmp_path, data, [{"name": "train", "path": "train.csv", "sha256": "0" * 64}])
    check = _dataset(report)
    assert not report.ok and not check.ok
    assert check.line() == f"dataset train (train.csv): does not exist in --data-dir {data}"
    assert report.mismatches() == [check.line()]
    assert report.fixes() == [
        f"give the --data-dir that holds train.csv (now {data}), or correct data[0].path"
        " (relative to --data-dir)"
    ]
    # a submission's verifier hands the fix on with the line (run and submit print it)
    assert [getattr(m, "fix", None) for m in report.mismatches()] == report.fixes()


def test_a_symlinked_or_unreadable_dataset_says_what_to_do(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "real.csv").write_text("x")
    (data / "x.csv").symlink_to("real.csv")
    rows = [{"name": "x", "path": "x.csv", "sha256": "0" * 64}]
    assert _dataset(_verify(tmp_path, data, rows)).fix == (
        f"put the file or folder itself at {data}/x.csv: verify follows no symlink in a dataset"
    )
    fifo = data / "pipe"
    os.mkfifo(fifo)
    rows = [{"name": "p", "path": "pipe", "sha256": "0" * 64}]
    assert _dataset(_verify(tmp_path, data, rows)).fix == (
        "restore data[0] (pipe) as pinned: regular files and folders only; if it changed on"
        f" purpose, pin it again: `dotlab-hpc hash {fifo}`"
    )


def test_dataset_leaving_data_dir_through_a_symlinked_parent(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.csv").write_text("secret")
    data = tmp_path / "data"
    data.mkdir()
    (data / "sub").symlink_to(outside)
    report = _verify(tmp_path, data, [{"name": "x", "path": "sub/x.csv", "sha256": "0" * 64}])
    check = _dataset(report)
    assert not check.ok
    assert check.reason == f"leaves --data-dir: sub is a symlink to {outside}"


def test_dataset_that_is_itself_a_symlink_out(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s")
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").symlink_to(tmp_path / "secret")
    check = _dataset(_verify(tmp_path, data, [{"name": "x", "path": "x.csv", "sha256": "0" * 64}]))
    assert not check.ok and "leaves --data-dir" in check.reason


def test_symlinked_parent_inside_data_dir_is_still_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "real").mkdir(parents=True)
    (data / "real" / "x.csv").write_text("x")
    (data / "alias").symlink_to("real")
    check = _dataset(
        _verify(tmp_path, data, [{"name": "x", "path": "alias/x.csv", "sha256": "0" * 64}])
    )
    assert not check.ok
    assert check.reason == "alias is a symlink; symlinks are refused in datasets"


def test_data_dir_itself_may_be_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.csv").write_bytes(b"x")
    (tmp_path / "data").symlink_to(tmp_path / "real")
    want = hashlib.sha256(b"x").hexdigest()
    report = _verify(tmp_path, tmp_path / "data", [{"name": "x", "path": "x.csv", "sha256": want}])
    assert report.ok, report.mismatches()


def test_dataset_path_through_a_file_is_a_mismatch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "f").write_text("x")
    check = _dataset(_verify(tmp_path, data, [{"name": "x", "path": "f/y", "sha256": "0" * 64}]))
    assert not check.ok and "f is not a directory" in check.reason


class FailingFile(io.FileIO):
    def readinto(self, buffer: object) -> int:
        raise OSError(errno.EIO, "Input/output error")


def test_unreadable_file_in_a_dataset_is_a_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose read fails (works as root too: the failure is injected at the read)."""
    data = tmp_path / "data"
    (data / "set").mkdir(parents=True)
    (data / "set" / "good.csv").write_text("g")
    (data / "set" / "bad.csv").write_text("b")
    real_open = sha256_mod.open_regular

    def open_regular(path: Any, *, follow_symlinks: bool = True) -> io.FileIO:
        if os.fsdecode(path).endswith("bad.csv"):
            return FailingFile(os.fspath(path), "rb")
        return real_open(path, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(sha256_mod, "open_regular", open_regular)
    check = _dataset(_verify(tmp_path, data, [{"name": "s", "path": "set", "sha256": "0" * 64}]))
    assert not check.ok
    assert check.reason == "set/bad.csv cannot be read (Input/output error)"


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_unreadable_real_file_even_as_root(tmp_path: Path) -> None:
    """/proc/self/clear_refs is a regular file none can read: EACCES for users, EINVAL for root."""
    dataset = {"name": "p", "path": "clear_refs", "sha256": "0" * 64}
    check = _dataset(_verify(tmp_path, Path("/proc/self"), [dataset]))
    assert not check.ok
    assert check.reason in (
        "cannot be read (Invalid argument)",
        "cannot be read (Permission denied)",
    )


def test_unreadable_folder_inside_a_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    (data / "set" / "locked").mkdir(parents=True)
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if os.fsdecode(path).endswith("locked"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    check = _dataset(_verify(tmp_path, data, [{"name": "s", "path": "set", "sha256": "0" * 64}]))
    assert check.reason == "set/locked cannot be read (Permission denied)"


# --------------------------------------------------------------------------- matches, image
def test_all_match(tree: Path, tmp_path: Path) -> None:
    data = tree.parent
    (data / "one.csv").write_bytes(b"a,b\n")
    report = _verify(
        tmp_path,
        data,
        [
            {"name": "set", "path": "set", "sha256": spec_text_hash(tree)},
            {"name": "one", "path": "one.csv", "sha256": hashlib.sha256(b"a,b\n").hexdigest()},
        ],
    )
    assert report.ok, report.mismatches()
    assert [c.kind for c in report.checks] == ["dataset", "dataset", "code", "code", "image"]
    assert report.mismatches() == []


def test_hash_mismatch_names_expected_and_actual(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_bytes(b"new")
    actual = hashlib.sha256(b"new").hexdigest()
    report = _verify(tmp_path, data, [{"name": "train", "path": "train.csv", "sha256": "9" * 64}])
    assert report.mismatches() == [
        f"dataset train (train.csv): expected sha256 {'9' * 64}, got {actual}"
    ]


def test_image_digest_mismatch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    report = _verify(tmp_path, data, [], digest="sha256:" + "1" * 64)
    (check,) = [c for c in report.checks if c.kind == "image"]
    want = "sha256:" + hashlib.sha256(b"SIF").hexdigest()
    assert check.actual == want
    assert check.reason == f"expected sha256:{'1' * 64}, got {want}"


def test_image_through_a_symlink_is_fine(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "real.sif").write_bytes(b"SIF")
    (tmp_path / "link.sif").symlink_to("real.sif")
    assert _verify(tmp_path, data, [], image=tmp_path / "link.sif").ok
    check = next(
        c
        for c in _verify(tmp_path, data, [], image=tmp_path / "link.sif").checks
        if c.kind == "image"
    )
    assert check.actual == "sha256:" + hashlib.sha256(b"SIF").hexdigest()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_image_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    image = tmp_path / "img"
    if kind == "directory":
        image.mkdir()
    else:
        os.mkfifo(image)
    report = _verify(tmp_path, data, [], image=image)
    (check,) = [c for c in report.checks if c.kind == "image"]
    assert not check.ok and check.actual is None
    assert ("is a directory" if kind == "directory" else "is a FIFO") in check.reason


# --------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize(
    ("which", "how"),
    [
        ("code", "missing"),
        ("data", "missing"),
        ("image", "missing"),
        ("code", "wrong type"),  # a wrong-type image is a mismatch, tested above
        ("data", "wrong type"),
    ],
)
def test_command_line_paths_that_do_not_exist_are_usage_errors(
    tmp_path: Path, which: str, how: str
) -> None:
    code, data, image = tmp_path / "code", tmp_path / "data", tmp_path / "img.sif"
    (code / ".git").mkdir(parents=True)
    data.mkdir()
    image.write_bytes(b"SIF")
    target = {"code": code, "data": data, "image": image}[which]
    target = tmp_path / "nope" if how == "missing" else image  # a file where a folder belongs
    kwargs: dict[str, Any] = {"code_dir": code, "data_dir": data, "image": image}
    kwargs[{"code": "code_dir", "data": "data_dir", "image": "image"}[which]] = target
    with pytest.raises(UsageError) as info:
        verify.verify_inputs(spec([], "sha256:" + "0" * 64), runner=clean_git(COMMIT), **kwargs)
    assert info.value.exit_code == 2
    assert str(target) in info.value.message


# --------------------------------------------------------------------------- the report
def test_table_and_json(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_bytes(b"a")
    report = _verify(
        tmp_path,
        data,
        [
            {"name": "a", "path": "a.csv", "sha256": hashlib.sha256(b"a").hexdigest()},
            {"name": "longer-name", "path": "b.csv", "sha256": "0" * 64},
        ],
    )
    table = verify_table(report).splitlines()
    assert table[0].split() == ["CHECK", "NAME", "RESULT", "DETAIL"]
    assert len(table) == 1 + 5 + 1  # the header, five checks, the missing file's fix
    assert table[-1].startswith("fix: give the --data-dir that holds b.csv")
    result_col = table[0].index("RESULT")
    assert [line[result_col:].split()[0] for line in table[1:-1]] == [
        "ok",
        "MISMATCH",
        "ok",
        "ok",
        "ok",
    ]
    assert "b.csv: does not exist" in table[2]
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["ok"] is False
    assert doc["checks"][1] == {
        "kind": "dataset",
        "name": "longer-name",
        "path": "b.csv",
        "expected": "0" * 64,
        "actual": None,
        "ok": False,
        "reason": f"does not exist in --data-dir {data}",
        "fix": f"give the --data-dir that holds b.csv (now {data}), or correct data[1].path"
        " (relative to --data-dir)",
    }


def test_one_cache_hashes_shared_inputs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claims of one submission share the image and here a dataset: read once, same answers."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.csv").write_text("x")
    good = {"name": "x", "path": "x.csv", "sha256": hashlib.sha256(b"x").hexdigest()}
    bad = {**good, "sha256": "0" * 64}
    code = tmp_path / "code"
    (code / ".git").mkdir(parents=True)
    image = tmp_path / "img.sif"
    image.write_bytes(b"SIF")
    digest = "sha256:" + hashlib.sha256(b"SIF").hexdigest()
    opened: list[bytes] = []
    real = sha256_mod.sha256_many

    def counting(paths: Any, **kw: Any) -> Any:
        opened.extend(os.fsencode(p) for p in paths)
        return real(paths, **kw)

    monkeypatch.setattr(hashing, "sha256_many", counting)
    cache: hashing.HashCache = {}
    reports = [
        verify.verify_inputs(
            spec([d], digest),
            code_dir=code,
            data_dir=data,
            image=image,
            runner=clean_git(COMMIT),
            cache=cache,
        )
        for d in (good, bad, good)
    ]
    assert [r.ok for r in reports] == [True, False, True]
    assert _dataset(reports[1]).reason.startswith("expected sha256 " + "0" * 64)
    assert sorted(opened) == sorted([os.fsencode(data / "x.csv"), os.fsencode(image)])

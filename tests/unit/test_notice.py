"""Issue 41, item 2: ends noticed at once. The follower waits on the kernel's notices (inotify)
where the end markers' folders are on a local file system, and sleeps elsewhere (NFS), saying
which; mountinfo texts recorded on this project's Debian 12 machine (tests/data/mountinfo)."""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import pytest

from dotlab_hpc.errors import UsageError
from dotlab_hpc.follow.follower import follow
from dotlab_hpc.fsio.notice import (
    NOTICE_ENV,
    Notified,
    Sleeping,
    folder_waiter,
    parse_mount_fstype,
)
from dotlab_hpc.slurm.client import SlurmClient
from tests.support.fakes import ScriptedRunner
from tests.support.runfiles import NOW
from tests.unit.test_follow import Cluster, FakeClock, Job, array_runs, end

DATA = Path(__file__).resolve().parents[1] / "data" / "mountinfo"
VM = (DATA / "debian12-vm.txt").read_text()
SPACE = (DATA / "debian12-tmpfs-with-space.txt").read_text()
# a login node's home on NFS: the recorded root line, and one in the kernel's format (proc(5))
NFS = VM + "45 27 0:40 / /home rw,relatime shared:25 - nfs4 srv:/export/home rw,vers=4.2\n"


@pytest.fixture(autouse=True)
def libc(monkeypatch: pytest.MonkeyPatch) -> None:
    """inotify_simple finds libc with ctypes.util.find_library, which runs ``ldconfig -p``; a
    unit test runs no program: the process's own symbols hold libc's calls."""
    import inotify_simple

    monkeypatch.setattr(inotify_simple, "_libc", ctypes.CDLL(None, use_errno=True))


def test_the_deepest_mount_above_a_path_gives_its_type() -> None:
    assert parse_mount_fstype(VM, "/") == "ext4"
    assert parse_mount_fstype(VM, "/tmp/runs/.ends/b-1") == "ext4"
    assert parse_mount_fstype(VM, "/dev/shm/x") == "tmpfs"
    assert parse_mount_fstype(VM, "/sys/fs/cgroup/unified") == "cgroup2"
    assert parse_mount_fstype(VM, "/sys/fs/cgroupX") == "sysfs"  # a prefix is not a parent
    assert parse_mount_fstype(SPACE, "/tmp/mnt a b/ends") == "tmpfs"  # \040 is a space
    assert parse_mount_fstype(NFS, "/home/ana/runs/.ends/b") == "nfs4"
    assert parse_mount_fstype("", "/x") is None
    assert parse_mount_fstype("garbage\n1 2 3\n", "/x") is None


def test_a_folder_on_a_network_file_system_is_watched_by_sleeping(tmp_path: Path) -> None:
    w = folder_waiter([Path("/home/ana/runs/.ends/b")], env={}, mountinfo=NFS)
    assert isinstance(w, Sleeping) and w.kind == "polling"
    assert "/home/ana/runs/.ends/b is on nfs4" in w.why and "other machines" in w.why
    forced = folder_waiter([tmp_path], env={NOTICE_ENV: "poll"}, mountinfo=VM)
    assert forced.kind == "polling" and forced.why == f"{NOTICE_ENV}=poll"
    assert folder_waiter([], env={}, mountinfo=VM).kind == "polling"
    with pytest.raises(UsageError, match="DOTLAB_FOLLOW_NOTICE='inotify': must be auto or poll"):
        folder_waiter([tmp_path], env={NOTICE_ENV: "inotify"}, mountinfo=VM)


def test_a_local_folder_is_watched_by_the_kernel_and_a_new_file_ends_the_wait(
    tmp_path: Path,
) -> None:
    w = folder_waiter([tmp_path], env={})
    try:
        assert isinstance(w, Notified) and w.kind == "inotify", w.why
        (tmp_path / "b-3").touch()  # a job's end marker, made before the wait began
        start = time.monotonic()
        w.wait(60)
        assert time.monotonic() - start < 30  # the notice, not the 60 s
    finally:
        w.close()


def test_a_folder_gone_before_the_watch_falls_back_to_sleeping(tmp_path: Path) -> None:
    w = folder_waiter([tmp_path / "gone"], env={})
    assert w.kind == "polling" and "inotify refused" in w.why


class Recording(Sleeping):
    """A waiter that advances the fake clock, as sleeping would, and counts its waits."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__("test", clock.sleep, "inotify")
        self.waits: list[float] = []
        self.closed = False

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        super().wait(seconds)

    def close(self) -> None:
        self.closed = True


def test_the_follower_waits_on_the_folders_of_its_unfinished_runs_and_says_how(
    tmp_path: Path,
) -> None:
    runs = array_runs(tmp_path, 3)
    end(runs[0], "r0", tmp_path / ".ends")  # ended already: nothing of it to wait for
    cluster = Cluster(controller={"500_1": Job("RUNNING"), "500_2": Job("RUNNING")})
    clock = FakeClock(NOW)

    def end_the_others(t: object) -> None:
        for i, rd in enumerate(runs[1:], start=1):
            end(rd, f"r{i}", tmp_path / ".ends")

    clock.hooks.append(end_the_others)
    asked: list[list[Path]] = []
    waiter = Recording(clock)

    def waiter_for(folders: list[Path]) -> Recording:
        asked.append(list(folders))
        return waiter

    logged: list[dict[str, object]] = []
    states = follow(
        runs,
        SlurmClient(ScriptedRunner(cluster.answer)),
        clock,
        waiter_for=waiter_for,  # type: ignore[arg-type]
        log=lambda rd, ev, **_: logged.append(ev),
    )
    assert all(s.finished for s in states)
    assert asked == [[tmp_path / ".ends"]] and waiter.waits and waiter.closed
    first = logged[0]
    assert first["event"] == "follow" and first["notice"] == "inotify" and first["why"] == "test"


@pytest.mark.parametrize("broken", [KeyboardInterrupt, RuntimeError])
def test_the_waiter_is_closed_when_following_stops(tmp_path: Path, broken: type) -> None:
    runs = array_runs(tmp_path, 1)
    cluster = Cluster(controller={"500_0": Job("RUNNING")})
    clock = FakeClock(NOW)
    waiter = Recording(clock)

    def stop(t: object) -> None:
        raise broken()

    clock.hooks.append(stop)
    with pytest.raises(broken):
        follow(
            runs, SlurmClient(ScriptedRunner(cluster.answer)), clock, waiter_for=lambda f: waiter
        )
    assert waiter.closed

"""The escape corpus (issue 40): a hostile analysis that tries, from inside its container, every
way out that docs/escapes.md lists, and writes what became of each attempt.

``ESCAPE`` is the analysis (``python3 escape.py HEX``, HEX the context as hex of JSON: the host's
paths, ports, process and names it reaches for). Each attempt ends ``blocked`` (what stopped
it, in words), ``escaped`` (it got through: a finding), ``exposed`` (it reads what the tool lets
it read and the record's ``isolation.exposed`` must name: ``named`` is that name) or
``host-check`` (it wrote where the host must not see it: the test looks on the host). It writes
``escapes.json`` (every attempt) and ``results.json`` (``escaped``: how many got through) into
its output folder, then exits 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ESCAPE_FILE = "escape.py"

ESCAPE = r'''
import ctypes, errno, json, os, resource, socket, stat, sys

ctx = json.loads(bytes.fromhex(sys.argv[1]).decode())
out = os.environ.get("DOTLAB_OUT_DIR", "/work/out")
libc = ctypes.CDLL(None, use_errno=True)
rows = []


def row(group, name, outcome, detail, named=None):
    rows.append({"group": group, "name": name, "outcome": outcome, "detail": str(detail)[:300],
                 "named": named})


def blocked_if_fails(group, name, action, what):
    """``action()`` must raise OSError: blocked (its errno), else escaped (what it returned)."""
    try:
        got = action()
    except OSError as e:
        row(group, name, "blocked", f"{what}: {errno.errorcode.get(e.errno, e.errno)}")
        return
    except ValueError as e:  # Python's word for EPERM from setrlimit(2)
        row(group, name, "blocked", f"{what}: {e}")
        return
    except Exception as e:  # anything but an OS refusal is a broken attempt: say so
        row(group, name, "escaped", f"{what}: the attempt itself failed: {e!r}")
        return
    row(group, name, "escaped", f"{what}: succeeded: {got!r}")


def check(group, name, held, detail):
    row(group, name, "blocked" if held else "escaped", detail)


def sys_call(number, *args):
    rc = libc.syscall(number, *args)
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def read(path, size=4096):
    with open(path, "rb") as f:
        return f.read(size)


def connect_tcp(host, port):
    s = socket.create_connection((host, port), timeout=2)
    s.close()
    return "connected"


def connect_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path)
    finally:
        s.close()
    return "connected"


def in_child(fn):
    """``fn()`` in a forked child (namespace changes stay there): its result, or its OSError."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            msg = {"ok": fn()}
        except OSError as e:
            msg = {"errno": e.errno}
        except Exception as e:
            msg = {"error": repr(e)}
        os.write(w, json.dumps(msg).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    msg = json.loads(data or b'{"error": "no answer"}')
    if "errno" in msg:
        raise OSError(msg["errno"], os.strerror(msg["errno"]))
    if "error" in msg:
        raise RuntimeError(msg["error"])
    return msg["ok"]


def interfaces():
    with open("/proc/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


# --------------------------------------------------------------------------- the network
G = "network"
blocked_if_fails(G, "host_loopback_tcp", lambda: connect_tcp("127.0.0.1", ctx["port"]),
                 f"connect to the host's 127.0.0.1:{ctx['port']}")
blocked_if_fails(G, "host_address_tcp", lambda: connect_tcp(ctx["host_ip"], ctx["port"]),
                 f"connect to the host's {ctx['host_ip']}:{ctx['port']}")
blocked_if_fails(G, "slurmctld_port", lambda: connect_tcp("127.0.0.1", ctx["slurmctld_port"]),
                 f"connect to slurmctld's port {ctx['slurmctld_port']}")
blocked_if_fails(G, "udp_outside",
                 lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                     b"x", ("192.0.2.1", 9)), "send a UDP datagram off the machine")
blocked_if_fails(G, "abstract_unix_socket", lambda: connect_unix("\0" + ctx["abstract"]),
                 "connect to the host's abstract unix socket")
blocked_if_fails(G, "raw_socket",
                 lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close() or "opened",
                 "open a raw packet socket")
ifs = interfaces()
check(G, "interfaces", ifs == ["lo"], f"/proc/net/dev lists {ifs}")
with open("/proc/net/route") as f:
    routes = f.readlines()[1:]
check(G, "routes", not routes, f"{len(routes)} route(s) in /proc/net/route")
listening = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A":
                    listening.append(int(local.rsplit(":", 1)[1], 16))
    except OSError:
        pass
check(G, "host_listeners", ctx["port"] not in listening and ctx["slurmctld_port"] not in listening,
      f"listening ports seen: {sorted(set(listening))}")
try:
    sys_net = sorted(os.listdir("/sys/class/net"))
except OSError as e:
    sys_net = []
if [n for n in sys_net if n not in ifs]:
    row(G, "sysfs_interfaces", "exposed", f"/sys/class/net lists {sys_net}", named="sysfs")
else:
    row(G, "sysfs_interfaces", "blocked", f"/sys/class/net lists {sys_net}")

# --------------------------------------------------------------------------- the scheduler
G = "scheduler"
blocked_if_fails(G, "munge_socket", lambda: connect_unix(ctx["munge_socket"]),
                 "connect to munged's socket")
blocked_if_fails(G, "munge_key", lambda: read(ctx["munge_key"]), "read munge's key")
blocked_if_fails(G, "slurm_conf", lambda: read(ctx["slurm_conf"]), "read slurm.conf")
blocked_if_fails(G, "slurmd_spool", lambda: os.listdir(ctx["spool"]), "list slurmd's spool")
slurm_env = sorted(n for n in os.environ if n.startswith(("SLURM", "SBATCH")))
check(G, "job_environment", not slurm_env, f"Slurm's variables inside: {slurm_env}")
blocked_if_fails(G, "signal_outside", lambda: os.kill(ctx["host_pid"], 0) or "signalled",
                 f"signal 0 to host process {ctx['host_pid']}")
blocked_if_fails(G, "ptrace_outside", lambda: sys_call(101, 16, ctx["host_pid"], 0, 0),
                 f"ptrace(PTRACE_ATTACH) host process {ctx['host_pid']}")
seen = set()
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        seen.add(read(f"/proc/{pid}/comm").decode().strip())
    except OSError:
        pass
daemons = sorted(seen & {"slurmstepd", "slurmd", "slurmctld", "slurmdbd", "munged", "sbatch"})
check(G, "scheduler_processes", not daemons, f"processes seen: {sorted(seen)}")

# --------------------------------------------------------------------------- the host's files
G = "files"
blocked_if_fails(G, "host_tmp_secret", lambda: read(ctx["tmp_secret"]),
                 "read a secret in the host's /tmp")
blocked_if_fails(G, "home_secret", lambda: read(ctx["home_secret"]),
                 "read a secret in the user's home")
blocked_if_fails(G, "runs_root", lambda: os.listdir(ctx["runs_root"]),
                 "list the host's run directories")
blocked_if_fails(G, "checkout_by_host_path", lambda: os.listdir(ctx["code_host"]),
                 "list the checkout by its host path")
blocked_if_fails(G, "code_write", lambda: open("/work/code/.git/hooks/post-commit", "w").close(),
                 "write a git hook into the checkout")
blocked_if_fails(G, "data_write", lambda: open("/work/data/points.csv", "a").close(),
                 "append to the pinned data")
link = os.path.join(out, "to-code")
os.symlink("/work/code/escaped-through-link", link)
blocked_if_fails(G, "write_through_link", lambda: open(link, "w").close(),
                 "write into the checkout through a link in the output folder")
os.unlink(link)
blocked_if_fails(G, "other_users_files", lambda: os.listdir(ctx["other_files"]),
                 "list a folder of another user's (slurmctld's state, root's)")
for name, path in (("dev_shm_to_host", "/dev/shm/" + ctx["nonce"]),
                   ("tmp_to_host", "/tmp/" + ctx["nonce"]),
                   ("var_tmp_to_host", "/var/tmp/" + ctx["nonce"])):
    try:
        with open(path, "w") as f:
            f.write("escaped")
        row(G, name, "host-check", path)
    except OSError as e:
        row(G, name, "blocked", f"write {path}: {errno.errorcode.get(e.errno, e.errno)}")
with open("/proc/self/mountinfo") as f:
    mountinfo = f.read()
shown = [p for p in ctx["bind_sources"] if p in mountinfo]
if shown:
    row(G, "bind_sources", "exposed", f"/proc/self/mountinfo names {shown}", named="bind_sources")
else:
    row(G, "bind_sources", "blocked", "/proc/self/mountinfo names no bind source")

# --------------------------------------------------------------------------- privilege
G = "privilege"
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
caps = {k: int(status[k].strip(), 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}
check(G, "capabilities", not any(caps.values()), f"{caps}")
check(G, "no_new_privs", status.get("NoNewPrivs", "0").strip() == "1",
      f"NoNewPrivs {status.get('NoNewPrivs', '?').strip()}")
check(G, "setuid_programs", bool(os.statvfs("/").f_flag & os.ST_NOSUID),
      "the root file system is mounted nosuid" if os.statvfs("/").f_flag & os.ST_NOSUID
      else "the root file system honours setuid bits")
blocked_if_fails(G, "setuid_root", lambda: os.setuid(0) or "uid 0", "setuid(0)")
blocked_if_fails(G, "mount", lambda: sys_call(165, b"none", b"/tmp", b"tmpfs", 0, None),
                 "mount a tmpfs")
blocked_if_fails(G, "chroot", lambda: os.chroot("/tmp") or "chrooted", "chroot")


def nested_userns_mount():
    sys_call(272, 0x10000000 | 0x00020000)  # unshare(CLONE_NEWUSER | CLONE_NEWNS)
    sys_call(165, b"none", b"/tmp", b"tmpfs", 0, None)
    return "a new user namespace, then a mount in it"


try:
    got = in_child(nested_userns_mount)
    row(G, "nested_userns_mount", "exposed", got, named="user_namespaces")
except OSError as e:
    row(G, "nested_userns_mount", "blocked",
        f"unshare/mount: {errno.errorcode.get(e.errno, e.errno)}")
except RuntimeError as e:
    row(G, "nested_userns_mount", "escaped", f"the attempt itself failed: {e}")
null = os.open("/dev/null", os.O_RDONLY)
blocked_if_fails(G, "kernel_module", lambda: sys_call(313, null, b"", 0), "finit_module")
blocked_if_fails(G, "proc_sys_write",
                 lambda: open("/proc/sys/kernel/hostname", "w").write("escaped"),
                 "write /proc/sys/kernel/hostname")
written = []
for line in open("/proc/self/cgroup"):
    _, controllers, path = line.rstrip("\n").split(":", 2)
    for c in (controllers.split(",") if controllers else ["unified"]):
        base = f"/sys/fs/cgroup/{c.replace('name=', '')}{path}"
        for leaf in ("memory.limit_in_bytes", "memory.max", "cpuset.cpus", "pids.max",
                     "cgroup.procs", "tasks"):
            target = os.path.join(base, leaf)
            if os.path.exists(target):
                try:
                    with open(target, "w") as f:
                        f.write("max\n" if leaf != "cgroup.procs" else "0\n")
                    written.append(target)
                except OSError:
                    pass
check(G, "cgroup_limits", not written, f"cgroup files written: {written}")
opened = []
for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/vda", "/dev/sda",
            "/dev/nvme0n1", "/dev/loop0", "/dev/fuse", "/dev/net/tun"):
    try:
        os.close(os.open(dev, os.O_RDONLY))
        opened.append(dev)
    except OSError:
        pass
check(G, "raw_devices", not opened, f"devices opened: {opened}")
blocked_if_fails(
    G, "user_keyring",
    lambda: sys_call(250, 10, ctypes.c_int(-4), b"user", ctx["key"].encode(), 0),
    "find the key the host put into the user's keyring")

# --------------------------------------------------------------------------- inherited descriptors
G = "descriptors"
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2 and int(fd) != null)
extra = {}
for fd in fds:
    try:
        extra[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass  # the listing's own descriptor, closed by now
check(G, "inherited_fds", not extra, f"descriptors beyond 0-2: {extra}")
bad = []
for fd in (1, 2):
    for action in (lambda: os.lseek(fd, 0, os.SEEK_SET), lambda: os.ftruncate(fd, 0)):
        try:
            action()
            bad.append(fd)
        except OSError:
            pass
check(G, "rewind_output", not bad, f"descriptors rewound or truncated: {bad}")

# --------------------------------------------------------------------------- resource bounds
G = "bounds"
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
blocked_if_fails(G, "processes",
                 lambda: resource.setrlimit(resource.RLIMIT_NPROC, (hard + 1, hard + 1)) or hard,
                 f"raise RLIMIT_NPROC above {hard}")
blocked_if_fails(G, "core_files",
                 lambda: resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20)) or "raised",
                 "raise RLIMIT_CORE")
tmp = os.statvfs("/tmp")
check(G, "tmp_bounded", tmp.f_blocks * tmp.f_frsize <= ctx["tmp_bound"],
      f"/tmp holds {tmp.f_blocks * tmp.f_frsize} bytes")
before = os.sched_getaffinity(0)
try:
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
except OSError:
    pass
check(G, "cpus", os.sched_getaffinity(0) == before and len(before) <= ctx["cpus"],
      f"CPUs {sorted(before)} -> {sorted(os.sched_getaffinity(0))}")
limits = []
for line in open("/proc/self/cgroup"):  # the job's bound is on one of its cgroup's ancestors
    _, controllers, path = line.rstrip("\n").split(":", 2)
    if "memory" in controllers.split(","):
        base, leaf = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
    elif controllers == "":
        base, leaf = "/sys/fs/cgroup", "memory.max"
    else:
        continue
    parts = path.strip("/").split("/") if path.strip("/") else []
    for depth in range(len(parts), -1, -1):
        try:
            v = read("/".join([base, *parts[:depth], leaf])).decode().strip()
            limits.append(int(v) if v != "max" else 1 << 62)
        except (OSError, ValueError):
            pass
check(G, "memory", bool(limits) and min(limits) <= ctx["memory_bound"],
      f"memory limits seen: {limits}")

# --------------------------------------------------------------------------- what reveals the host
G = "identity"
leaks = sorted(n for n, v in os.environ.items()
               if any(p in v for p in ctx["host_paths"] if p not in ("", "/")))
check(G, "environment_host_paths", not leaks, f"variables naming a host path: {leaks}")
# every process it can read: what each was started with (its first environment, its arguments)
found = []
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    for part in ("environ", "cmdline"):
        try:
            text = read(f"/proc/{pid}/{part}", 1 << 20).decode(errors="replace")
        except OSError:
            continue
        hits = [p for p in ctx["host_paths"] if p not in ("", "/") and p in text]
        if hits or "ENGINE_CONFIG" in text:
            found.append(f"/proc/{pid}/{part}: {hits or 'ENGINE_CONFIG'}")
check(G, "process_host_paths", not found, f"host paths in: {found or 'no process'}")
host = socket.gethostname()
check(G, "host_name", host != ctx["host_name"], f"gethostname() is {host!r}")
login = ctx["login"]
found = [f for f in ("/etc/passwd", "/etc/group")
         if any(line.split(":")[0] == login for line in open(f))]
check(G, "login_name", not found, f"{login!r} named in {found or 'neither'} /etc/passwd, group")
check(G, "home_folder", not os.path.exists("/home/" + login),
      f"/home/{login} {'exists' if os.path.exists('/home/' + login) else 'does not exist'}")

with open(os.path.join(out, "escapes.json"), "w") as f:
    json.dump(rows, f, indent=1)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump({"escaped": sum(r["outcome"] == "escaped" for r in rows), "attempts": len(rows)}, f)
'''


@dataclass(frozen=True)
class Attempt:
    """One row of ``escapes.json``: what the hostile analysis tried and what became of it."""

    group: str
    name: str
    outcome: str  # blocked | escaped | exposed | host-check
    detail: str
    named: str | None


def read_attempts(text: str) -> list[Attempt]:
    """``escapes.json`` as attempts."""
    return [Attempt(**row) for row in json.loads(text)]

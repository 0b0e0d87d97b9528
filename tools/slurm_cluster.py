#!/usr/bin/env python3
"""A real one-node SLURM cluster on this machine, to try the slurm profile (and to test it).

    sudo apt-get install slurmctld slurmd slurm-client munge            # Debian 12: SLURM 22.05
    sudo apt-get install slurmdbd mariadb-server                        # for --accounting (sacct)
    sudo python3 tools/slurm_cluster.py up --gpus 2 --accounting        # in /tmp/bracket-slurm
    snakemake --profile workflow/profiles/slurm smoke                   # every job through sbatch
    sacct -a -X -o JobID,Comment%40,State,AllocTRES%50,ReqMem,Timelimit,NodeList
    sudo python3 tools/slurm_cluster.py down                            # stops every job and daemon

Everything lives in one folder: the munge key and socket, slurm.conf (loopback, this machine's
cores and memory from `slurmd -C`, one partition), a gres.conf with GPUs that exist only on paper
when --gpus is given (SLURM schedules and accounts them; no device is bound), state, spool and
logs. The one file outside it is a link, /etc/slurm/slurm.conf, to the folder's slurm.conf: inside a
job, the executor plugin's `srun` finds the cluster only there (see DEFAULT_CONF); `up` refuses to
replace a real one, and `down` removes the link. The ports are free ones picked at start, and the
daemons run in the foreground of their own sessions, so `down` (or the test fixture) stops them
and the cluster leaves nothing running. With --accounting, a private MariaDB and slurmdbd keep
the job records that `sacct` reads, with an account (`bracket`) that sbatch's -A must name;
without it, `scontrol show job` reads jobs while the controller remembers them (MinJobAge, an
hour) and job completions go to a text file (jobcomp/filetxt).

The daemons run as root (slurmd must start jobs as their user); run this as root.
Python standard library only, so it runs before any project environment exists.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = "slurmctld slurmd slurm-client munge"
ACCOUNTING_PACKAGES = "slurmdbd mariadb-server"
CLUSTER = "bracket"
ACCOUNT = "bracket"
PARTITION = "debug"
STATE = "cluster.json"  # what `down` needs: the daemons' pids, in start order
# Where every SLURM command looks when SLURM_CONF is unset. Inside a job, the executor plugin's
# jobstep (snakemake-executor-plugin-slurm-jobstep 0.6.1) drops every SLURM_* variable before its
# `srun`, SLURM_CONF included, so the job's srun finds the cluster only here.
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")


class ClusterError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str, package: str) -> str:
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/usr/bin", "/sbin"]:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise ClusterError(f"{name} not found: install it with `apt-get install {package}` (as root)")


def machine() -> dict:
    """This machine as slurmd sees it: CPUs, sockets, cores, threads and RealMemory (MB)."""
    out = subprocess.run([_which("slurmd", "slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    first = out.splitlines()[0]
    fields = dict(kv.split("=", 1) for kv in first.split() if "=" in kv)
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {k: int(fields[k]) for k in keep if k in fields}


# How the node confines a job step to the CPUs it was given. task/affinity pins each task to its CPUs
# (sched_setaffinity), as most sites do, so a block that asked for one CPU runs on one; task/cgroup
# (with task/affinity) also fences the step in a cpuset cgroup, where the machine lets slurmd
# write one (cgroup v1 here). task/none confines nothing and would hide a confined block.
TASK_PLUGINS = {
    "affinity": ("proctrack/linuxproc", "task/affinity"),
    "cgroup": ("proctrack/cgroup", "task/cgroup,task/affinity"),
    "none": ("proctrack/linuxproc", "task/none"),
}


def slurm_conf(d: Path, node: str, hw: dict, gpus: int, ports: dict, accounting: bool, task: str = "affinity") -> str:
    proctrack, task_plugin = TASK_PLUGINS[task]
    host = socket.gethostname().split(".")[0]
    hw_text = " ".join(f"{k}={v}" for k, v in hw.items())
    lines = [
        f"ClusterName={CLUSTER}",
        f"SlurmctldHost={host}(127.0.0.1)",  # slurmctld starts only on the host named here
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge/munge.socket",  # a private munged, not the system's
        f"SlurmctldPort={ports['slurmctld']}",
        f"SlurmdPort={ports['slurmd']}",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"ProctrackType={proctrack}",
        f"TaskPlugin={task_plugin}",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",  # --mem is a consumable, as on most sites
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "MinJobAge=3600",  # `scontrol show job` and squeue keep finished jobs for an hour
        # A cancelled step's processes get SIGTERM, then SIGKILL after KillWait (30 s by default). Snakemake's
        # job-step process answers SIGTERM by waiting for its running job, so a short block could finish inside
        # those 30 s and a test of cancelling one would depend on the machine's speed; 2 s ends it at once.
        "KillWait=2",
        "SlurmdTimeout=300",
        "MailProg=/bin/true",
        "JobCompType=jobcomp/filetxt",  # one line per finished job, with or without a database
        f"JobCompLoc={d}/log/jobcomp.txt",
    ]
    if accounting:
        lines += [
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=30",
            "AccountingStorageTRES=gres/gpu",  # sacct's AllocTRES then shows the GPUs
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={ports['slurmdbd']}",
            # for accounting connections the munge socket goes here, not in AuthInfo
            f"AccountingStoragePass={d}/munge/munge.socket",
            "AccountingStorageEnforce=associations",  # sbatch -A must name a known account
            "AccountingStoreFlags=job_comment",
        ]  # sacct shows --comment (the rule and wildcards)
    else:
        lines += ["AccountingStorageType=accounting_storage/none"]
    gres = ""
    if gpus:
        lines.append("GresTypes=gpu")
        gres = f" Gres=gpu:{gpus}"
    lines += [
        f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname={host} {hw_text}{gres} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


class Cluster:
    """munged, [mariadbd, slurmdbd,] slurmctld and slurmd, in DIR; start() then stop()."""

    def __init__(
        self, root: Path, node: str | None = None, gpus: int = 0, accounting: bool = False, task: str = "affinity"
    ):
        if task not in TASK_PLUGINS:
            raise ClusterError(f"unknown task plugin {task!r}: choose one of {', '.join(TASK_PLUGINS)}")
        self.dir = Path(root).resolve()
        self.node = node or socket.gethostname().split(".")[0]
        self.gpus = gpus
        self.accounting = accounting
        self.task = task
        self.pids: dict[str, int] = {}

    # ---- what clients need -----------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    def env(self) -> dict:
        """The environment for sbatch, squeue, sacct, scontrol and snakemake: SLURM_CONF set."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    # ---- start ---------------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> "Cluster":
        if os.geteuid() != 0:
            raise ClusterError("the daemons must run as root (slurmd starts jobs as their user); run as root")
        for name in ("slurmctld", "slurmd", "sbatch", "munged"):
            _which(name, PACKAGES)
        if self.accounting:
            _which("slurmdbd", ACCOUNTING_PACKAGES)
            _which("mariadbd", ACCOUNTING_PACKAGES)
        if (self.dir / STATE).exists():
            raise ClusterError(
                f"{self.dir} holds a cluster already; stop it first: {sys.argv[0]} down --dir {self.dir}"
            )
        for parent in self.dir.parents:
            if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
                raise ClusterError(
                    f"{parent} is closed to other users (no o+x), and munged refuses a socket "
                    f"below it: choose a --dir elsewhere (for example under /tmp)"
                )
        for sub in ("etc", "munge", "state", "spool", "run", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        os.chmod(self.dir / "munge", 0o755)  # munged wants its socket's folder open to all
        ports = {"slurmctld": _free_port(), "slurmd": _free_port(), "slurmdbd": _free_port(), "mysql": _free_port()}
        hw = machine()
        self.conf.write_text(slurm_conf(self.dir, self.node, hw, self.gpus, ports, self.accounting, self.task))
        self.conf.chmod(0o644)
        if self.task == "cgroup":
            (self.dir / "etc" / "cgroup.conf").write_text(
                "CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\nConstrainCores=yes\nConstrainDevices=no\n"
            )
        if self.gpus:
            # GPUs on paper: slurmd drops a GPU without a device file, so each gets a character
            # device standing in for /dev/nvidiaN (it is /dev/null's). SLURM schedules and accounts them.
            (self.dir / "dev").mkdir(exist_ok=True)
            for i in range(self.gpus):
                _null_device(self.dir / "dev" / f"gpu{i}")
            (self.dir / "etc" / "gres.conf").write_text(
                f"NodeName={self.node} Name=gpu File={self.dir}/dev/gpu[0-{self.gpus - 1}]\n"
            )
        try:
            self._link_default_conf()
            self._start_munge()
            if self.accounting:
                self._start_database(ports["mysql"])
                self._start_slurmdbd(ports)
            self._spawn("slurmctld", [_which("slurmctld", PACKAGES), "-D", "-i", "-f", str(self.conf)])
            self._wait(
                lambda: self.run("scontrol", "ping", check=False).returncode == 0,
                timeout,
                "slurmctld did not answer `scontrol ping`",
                "slurmctld.log",
            )
            if self.accounting:
                self._add_account()
            self._spawn("slurmd", [_which("slurmd", PACKAGES), "-D", "-N", self.node, "-f", str(self.conf)])
            self._wait(self._node_idle, timeout, f"node {self.node} did not become idle", "slurmd.log")
        except BaseException:
            self.stop()
            raise
        return self

    def _link_default_conf(self):
        """/etc/slurm/slurm.conf -> this cluster's, unless another cluster's file is there."""
        if DEFAULT_CONF.is_symlink() and not DEFAULT_CONF.exists():
            DEFAULT_CONF.unlink()  # left by a cluster that is gone
        if DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink():
            raise ClusterError(
                f"{DEFAULT_CONF} exists ({os.path.realpath(DEFAULT_CONF)}): this machine has a "
                "SLURM configuration already; use that cluster, or move the file away"
            )
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(self.conf)

    def _unlink_default_conf(self):
        if DEFAULT_CONF.is_symlink() and os.readlink(DEFAULT_CONF) == str(self.conf):
            DEFAULT_CONF.unlink()

    def _spawn(self, name: str, argv: list[str], env: dict | None = None):
        log = open(self.dir / "log" / f"{name}.out", "ab")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env or self.env(),
            cwd=self.dir / "run",
        )
        log.close()
        self.pids[name] = proc.pid
        self._save()
        time.sleep(0.2)
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited at once ({proc.returncode}); see {self.dir}/log/{name}.out")

    def _save(self):
        (self.dir / STATE).write_text(
            json.dumps({"pids": self.pids, "node": self.node, "gpus": self.gpus, "accounting": self.accounting}) + "\n"
        )

    def _wait(self, ready, timeout: float, what: str, log: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, pid in self.pids.items():
                if not _alive(pid):
                    raise ClusterError(f"{name} stopped while starting; see {self.dir}/log/")
            try:
                if ready():
                    return
            except (ClusterError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.5)
        tail = (self.dir / "log" / log).read_text(errors="replace")[-2000:] if (self.dir / "log" / log).exists() else ""
        raise ClusterError(f"{what} within {timeout:.0f} s; {self.dir}/log/{log} ends:\n{tail}")

    def _node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", check=False).stdout.strip()
        return out == "idle"

    def _start_munge(self):
        key = self.dir / "etc" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        m = self.dir / "munge"
        self._spawn(
            "munged",
            [
                _which("munged", "munge"),
                "-F",
                f"--socket={m}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={m}/munged.pid",
                f"--seed-file={m}/munged.seed",
                f"--log-file={self.dir}/log/munged.log",
            ],
        )
        self._wait(lambda: Path(f"{m}/munge.socket").exists(), 30, "munged did not open its socket", "munged.log")

    def _start_database(self, port: int):
        db = self.dir / "mysql"
        sock = self.dir / "run" / "mysqld.sock"
        if not (db / "mysql").exists():
            install = _which("mariadb-install-db", ACCOUNTING_PACKAGES)
            proc = subprocess.run(
                [
                    install,
                    "--no-defaults",
                    f"--datadir={db}",
                    "--user=root",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise ClusterError(f"mariadb-install-db failed: {proc.stderr[-2000:]}")
        self._spawn(
            "mariadbd",
            [
                _which("mariadbd", ACCOUNTING_PACKAGES),
                "--no-defaults",
                f"--datadir={db}",
                "--user=root",
                "--bind-address=127.0.0.1",
                f"--port={port}",
                f"--socket={sock}",
                f"--pid-file={self.dir}/run/mariadbd.pid",
                f"--log-error={self.dir}/log/mariadbd.log",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=32M",
            ],
        )
        client = _which("mariadb", ACCOUNTING_PACKAGES)
        sql = (
            "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-local';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        self._wait(
            lambda: (
                subprocess.run([client, f"--socket={sock}", "-uroot", "-e", sql], capture_output=True).returncode == 0
            ),
            60,
            "mariadbd did not accept connections",
            "mariadbd.log",
        )

    def _start_slurmdbd(self, ports: dict):
        conf = self.dir / "etc" / "slurmdbd.conf"
        conf.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.dir}/munge/munge.socket",
                    "DbdHost=localhost",
                    "DbdAddr=127.0.0.1",
                    f"DbdPort={ports['slurmdbd']}",
                    "SlurmUser=root",
                    f"LogFile={self.dir}/log/slurmdbd.log",
                    f"PidFile={self.dir}/run/slurmdbd.pid",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={ports['mysql']}",
                    "StorageUser=slurm",
                    "StoragePass=slurm-local",
                    "StorageLoc=slurm_acct_db",
                ]
            )
            + "\n"
        )
        conf.chmod(0o600)  # slurmdbd refuses a readable config: it holds the database password
        self._spawn(
            "slurmdbd", [_which("slurmdbd", ACCOUNTING_PACKAGES), "-D"], env=dict(self.env(), SLURM_CONF=str(self.conf))
        )
        self._wait(
            lambda: self.run("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0,
            60,
            "slurmdbd did not answer sacctmgr",
            "slurmdbd.log",
        )

    def _add_account(self):
        """The account and its users, each added only when the database lacks it: the database outlives
        `down`, and sacctmgr exits 1 on "Nothing new added", so adding again would fail every second `up`."""
        user = os.environ.get("SUDO_USER") or "root"
        if not self._listed("cluster", CLUSTER):
            self.run("sacctmgr", "-i", "add", "cluster", CLUSTER, check=False)  # slurmctld may add it meanwhile
        if not self._listed("account", ACCOUNT):
            self.run(
                "sacctmgr",
                "-i",
                "add",
                "account",
                ACCOUNT,
                f"cluster={CLUSTER}",
                "description=bracket",
                "organization=bracket",
            )
        for u in sorted({"root", user}):
            if not self._listed("association", u, f"account={ACCOUNT}", f"cluster={CLUSTER}", f"user={u}"):
                self.run("sacctmgr", "-i", "add", "user", u, f"account={ACCOUNT}", f"cluster={CLUSTER}")
        # slurmctld reads new associations on its own; make it so now
        self.run("scontrol", "reconfigure", check=False)

    def _listed(self, kind: str, name: str, *where: str) -> bool:
        """Whether `sacctmgr list KIND` shows NAME (for an association: its user, under WHERE)."""
        fmt = {"cluster": "Cluster", "account": "Account", "association": "User"}[kind]
        out = self.run("sacctmgr", "-n", "-P", "list", kind, *(where or (name,)), f"format={fmt}").stdout
        return name in {line.strip() for line in out.splitlines()}

    # ---- stop ----------------------------------------------------------------------------------
    def stop(self, timeout: float = 60):
        """Cancel every job, wait for them to end, then stop the daemons in reverse start order."""
        if not self.pids and (self.dir / STATE).exists():
            self.pids = json.loads((self.dir / STATE).read_text())["pids"]
        if _alive(self.pids.get("slurmctld")):
            self.run("scancel", "--full", "--user", "root", check=False)
            for user in {os.environ.get("SUDO_USER")} - {None}:
                self.run("scancel", "--full", "--user", user, check=False)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                out = self.run("squeue", "-h", "-o", "%i", check=False)
                if out.returncode == 0 and not out.stdout.strip():
                    break
                time.sleep(0.5)
        for name in reversed(list(self.pids)):
            _terminate(self.pids[name], timeout=20)
        # job steps that outlived slurmd (none should): their slurmstepd is ours by its spool dir
        for pid in _stepds(self.dir / "spool"):
            _terminate(pid, timeout=10)
        self.pids = {}
        self._unlink_default_conf()
        (self.dir / STATE).unlink(missing_ok=True)

    def running(self) -> list[str]:
        return [n for n, p in self.pids.items() if _alive(p)]


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _terminate(pid: int, timeout: float):
    if not _alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not _alive(pid):
            return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _null_device(path: Path):
    if path.exists():
        return
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:  # no CAP_MKNOD: slurmd logs an error for a plain file but still counts it
        path.touch()


def _stepds(spool: Path) -> list[int]:
    """slurmstepd processes whose working directory is this cluster's spool directory."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (p / "comm").read_text().strip() != "slurmstepd":
                continue
            if Path(os.readlink(p / "cwd")).resolve() == spool.resolve():
                found.append(int(p.name))
        except OSError:
            continue
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start munged, [mariadbd, slurmdbd,] slurmctld and slurmd")
    down = sub.add_parser("down", help="cancel every job and stop every daemon")
    for p in (up, down):
        p.add_argument("--dir", type=Path, default=Path("/tmp/bracket-slurm"), help="where the cluster lives")
    up.add_argument("--node", default=None, help="the node's name (default: this host's short name)")
    up.add_argument("--gpus", type=int, default=0, help="GPUs on paper (GRES gpu) the node declares")
    up.add_argument(
        "--task",
        choices=sorted(TASK_PLUGINS),
        default="affinity",
        help="how a job step is confined to its CPUs (default affinity: pinned, as on most sites)",
    )
    up.add_argument(
        "--accounting",
        action="store_true",
        help="a private MariaDB and slurmdbd, so sacct reads every job (needs slurmdbd mariadb-server)",
    )
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            c = Cluster(args.dir, node=args.node, gpus=args.gpus, accounting=args.accounting, task=args.task).start()
            print(
                f"# node {c.node}, partition {PARTITION}"
                + (f", account {ACCOUNT}" if c.accounting else "")
                + f"; stop with: {sys.argv[0]} down --dir {c.dir}"
            )
            print(f"export SLURM_CONF={c.conf}")
        else:
            if not (args.dir / STATE).exists():
                print(f"no cluster in {args.dir}", file=sys.stderr)
                return 0
            Cluster(args.dir).stop()
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 32, class 2: `rewardlang ir-groups` runs nothing built from a data row on the host.

A row's C source and harness are data from anywhere. Before, a row whose source held an
``__attribute__((constructor))`` ran it on the host as the trainer's user (root here), once per winner and per
mutant: no namespace, no seccomp, the host's files and network. Now every compile, link and harness run happens
in the sandbox at the level scoring uses, and where no level can be had the command refuses.

Each hostile row carries a probe: C code that tries every escape (write a marker file on the host, read a host
secret, connect to a loopback listener, find a secret of the command's environment, run as root) and, when any
works, exits 0 at once, so that every mutant "survives" and no group can form. The probe itself is proven to see
each escape when it does run on the host (``test_the_probe_sees_every_escape_on_the_host``), so a group formed
from such a row means none of them worked, and the host is checked directly as well (no marker, no connection).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardlang.datasets import cfuncs
from rewardlang.datasets.irgroups import build_groups
from rewardlang.datasets.sandboxed import NoSandbox, open_sandbox
from rewardlang.sandbox import Sandbox, SandboxConfig

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = "RL_HOST_SECRET_IRG"


def _need_clang() -> None:
    if shutil.which("clang") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("clang is missing (CI=true: scripts/install.sh installs it)")
        pytest.skip("clang is not installed")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, own_listener) -> Iterator[dict]:
    d = tmp_path_factory.mktemp("irg-host")
    os.chmod(d, 0o777)  # world-writable: only isolation keeps a program out, not the directory's mode
    secret = d / "secret.inc"
    secret.write_text("int leaked_secret_value = 424242;\n")
    os.chmod(secret, 0o644)
    old = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = "s3cr3t-of-the-trainer"
    try:
        yield {"dir": d, "marker": d / "marker", "secret": secret, "listener": own_listener}
    finally:
        if old is None:
            os.environ.pop(SECRET_ENV, None)
        else:
            os.environ[SECRET_ENV] = old


def probe(h: dict) -> str:
    """C code whose constructor tries each escape and exits 0 at once when one works (and says which in the marker
    file, when it can write one)."""
    return r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <netinet/in.h>
static int rl_escapes(void) {
    int e = 0;
    FILE *m = fopen("%(marker)s", "w");
    if (m) { fputs("the row's code ran on the host", m); fclose(m); e |= 1; }
    int fd = open("%(secret)s", O_RDONLY);
    if (fd >= 0) { close(fd); e |= 2; }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET; a.sin_port = htons(%(port)d); a.sin_addr.s_addr = htonl(0x7f000001);
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) e |= 4;
        close(s);
    }
    if (getuid() == 0) e |= 8;
    if (getenv("%(env)s")) e |= 16;
    return e;
}
#ifndef RL_PROBE_ONLY
__attribute__((constructor)) static void rl_probe(void) { if (rl_escapes()) _exit(0); }
#endif
""" % {"marker": h["marker"], "secret": h["secret"], "port": h["listener"].port, "env": SECRET_ENV}


def test_the_probe_sees_every_escape_on_the_host(host: dict, tmp_path: Path) -> None:
    """The probe is not blind: run unisolated (as the row's code used to run), it finds all five escapes."""
    _need_clang()
    (tmp_path / "p.c").write_text(probe(host) + "int main(void) { return rl_escapes(); }\n")
    subprocess.run(["clang", "-w", "-DRL_PROBE_ONLY", "p.c", "-o", "p"], cwd=tmp_path, check=True)
    before = host["listener"].settled()
    try:
        got = subprocess.run([str(tmp_path / "p")], cwd=tmp_path).returncode
        if os.geteuid() != 0:
            got |= 8  # only a root run can show the root escape
        assert got == 31, got
        assert host["marker"].read_text() == "the row's code ran on the host"
        assert host["listener"].settled() == before + 1
    finally:
        host["marker"].unlink(missing_ok=True)  # the next test checks the host is clean: leave it so


def _rows(h: dict) -> list[dict]:
    fns = {f.name: f for f in cfuncs.corpus()}
    base = cfuncs.rows([fns["gcd"], fns["is_sorted"]])
    gcd, srt = base
    return [
        # the constructor in the source: it runs in every winner's and every mutant's harness run
        dict(gcd, id="ctor_in_source", source=probe(h) + gcd["source"]),
        # the constructor in the harness (compiled once, linked with every member)
        dict(srt, id="ctor_in_harness", harness=probe(h) + srt["harness"]),
        # compile-time reads: a host file through #include (its text would land in the IR), /dev/zero
        dict(gcd, id="include_host_file", source=f'#include "{h["secret"]}"\n' + gcd["source"]),
        dict(gcd, id="include_dev_zero", source='#include "/dev/zero"\n' + gcd["source"]),
        # the assembler reading a host file while linking (.incbin in module-level asm)
        dict(gcd, id="incbin_host_file",
             source=f'__asm__(".pushsection .rodata\\n.incbin \\"{h["secret"]}\\"\\n.popsection");\n' + gcd["source"]),
    ]


def _check_host(h: dict, before: int) -> None:
    assert not h["marker"].exists(), h["marker"].read_text()
    assert h["listener"].settled() == before
    assert sorted(p.name for p in h["dir"].iterdir()) == ["secret.inc"]


def test_hostile_rows_run_nothing_on_the_host(host: dict) -> None:
    _need_clang()
    before = host["listener"].settled()
    with Sandbox(SandboxConfig(slots=2)) as sb:
        res = {r.id: r for r in build_groups(_rows(host), sandbox=sb, losers=2)}
        assert sb.stray_processes() == []
    _check_host(host, before)
    # no escape worked: the probes' rows make their groups as a harmless row would, winners and losers checked
    for rid in ("ctor_in_source", "ctor_in_harness"):
        r = res[rid]
        assert r.error is None and r.group is not None, (rid, r.error)
        assert len(r.group["losers"]) == 2 and r.infra == 0 and r.winners_failed == 0
        assert sum(r.killed.values()) == 2
    # a file of the host is not there to include: the row does not compile; nothing of the secret anywhere
    assert "does not compile at -O0" in res["include_host_file"].error
    assert "secret.inc" in res["include_host_file"].error and "not found" in res["include_host_file"].error
    assert "does not compile" in (res["include_dev_zero"].error or "") or res["include_dev_zero"].group is not None
    assert res["incbin_host_file"].group is None and "no IR of the source passes" in res["incbin_host_file"].error
    assert "424242" not in json.dumps([r.group for r in res.values()]) + json.dumps([r.error for r in res.values()])


def test_the_command_refuses_without_a_sandbox_level_and_writes_nothing(tmp_path: Path) -> None:
    """Where the level asked for cannot be had (no bubblewrap on PATH here), nothing is compiled or run: exit 1,
    one plain error, no output file."""
    _need_clang()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    (tmp_path / "f.jsonl").write_text(json.dumps(cfuncs.rows([cfuncs.corpus()[0]])[0]) + "\n")
    env = {**os.environ, "PATH": str(bin_dir), "REWARDLANG_SANDBOX_LEVEL": "bwrap",
           "REWARDLANG_CLANG": shutil.which("clang") or "clang", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "rewardlang", "ir-groups", "-i", "f.jsonl", "-o", "g.jsonl"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert "error: ir-groups runs every program it builds from its input" in p.stderr
    assert "bubblewrap" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_no_isolating_level_at_all_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rewardlang.sandbox import runner

    monkeypatch.delenv("REWARDLANG_SANDBOX_LEVEL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))                 # no bubblewrap
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)   # and not root: no level isolates
    with pytest.raises(NoSandbox, match="no isolating sandbox level"):
        open_sandbox("ir-groups", slots=1)


def test_a_clang_outside_usr_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """The slots see only /usr of the host's files: a clang elsewhere could not run there, so the command says so
    at once instead of skipping every row for a sandbox failure."""
    _need_clang()
    own = tmp_path / "clang"
    shutil.copy(os.path.realpath(shutil.which("clang") or ""), own)
    (tmp_path / "f.jsonl").write_text(json.dumps(cfuncs.rows([cfuncs.corpus()[0]])[0]) + "\n")
    p = subprocess.run([sys.executable, "-m", "rewardlang", "ir-groups", "-i", "f.jsonl", "-o", "g.jsonl"],
                       cwd=tmp_path, env={**os.environ, "REWARDLANG_CLANG": str(own), "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "is outside /usr" in p.stderr and not (tmp_path / "g.jsonl").exists(), p.stderr

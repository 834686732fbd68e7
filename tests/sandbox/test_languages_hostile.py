"""Bad programs in every language: each gets its verdict, nothing escapes (host files, network, processes),
nothing is left for the next program on the slot (a correct program and a probe of the run directory, /tmp
and /dev/shm follow each on the same one-slot sandbox), and no program masks itself (no infrastructure
outcome, no slot respawn). A fast representative set runs by default; the rest is marked slow."""

from __future__ import annotations

import json
import os
import resource
import time
from dataclasses import dataclass

import pytest
from lang_programs import PROBE, PROBE_TESTS, lang_tests, require, unit

from rewardlang.sandbox.config import Limits
from rewardlang.sandbox.languages import PROFILES
from rewardlang.sandbox.runner import Sandbox, Task

LIMITS = Limits(cpu=1.0, wall=3.0, memory_mb=512, processes=16)
COMPILE_CPU = 3.0

@dataclass(frozen=True)
class Case:
    name: str
    lang: str
    code: str
    outcome: str
    statuses: tuple[str, ...] | None = None
    slow: bool = False
    harness: str | None = None


C_HEAD = unit("c")
CASES = [
    Case("c_fork_bomb", "c", C_HEAD + """__attribute__((constructor)) static void bomb(void) {
    for (;;) fork();
}
""", "timeout"),
    Case("c_exit0_before_tests", "c", C_HEAD + """__attribute__((constructor)) static void quit(void) { _exit(0); }
""", "runtime_error", ("runtime_error",) * 3),
    Case("c_forged_records", "c", C_HEAD + """__attribute__((constructor)) static void forge(void) {
    dprintf(3, "0 [0,2,4]\\n1 [0]\\n2 []\\n");
}
""", "fail", ("fail",) * 3),
    Case("c_network", "c", """#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
""" + unit("c").replace("*len = 0;", """*len = 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0) { struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(PORT);
                  a.sin_addr.s_addr = htonl(0x7f000001); connect(s, (struct sockaddr *)&a, sizeof a);
                  out[(*len)++] = 99; }"""), "pass"),
    # Writes to /tmp and /dev/shm land in the slot's own tmpfs (the probe after it checks they are gone);
    # the host's files must be untouched and not created (checked on the host after the run); the host's
    # secret file is not there to read (79 would make the result wrong).
    Case("c_outside_run_dir", "c", unit("c").replace("*len = 0;", """*len = 0;
    const char *paths[] = CANARIES_C;
    for (int k = 0; paths[k]; k++) { FILE *f = fopen(paths[k], "w"); if (f) { fputs("x", f); fclose(f); } }
    const char *made[] = CREATED_C;
    for (int k = 0; made[k]; k++) { FILE *f = fopen(made[k], "w"); if (f) fclose(f); }
    FILE *s = fopen(SECRET_C, "r"); if (s) { out[(*len)++] = 79; fclose(s); }"""), "pass"),
    # out of address space (RLIMIT_AS), malloc returns NULL and the program aborts: a crash like any other
    # (a C program's own reaction to a failed allocation cannot be told apart from its other crashes)
    Case("c_memory", "c", unit("c").replace("*len = 0;", """*len = 0;
    for (;;) { char *p = malloc(1 << 20); if (!p) abort(); for (int k = 0; k < (1 << 20); k += 4096) p[k] = 1; }"""),
         "runtime_error", ("runtime_error",) * 3, slow=True),
    Case("cpp_template_recursion", "cpp", """template <int N> struct R { enum { v = R<N + 1>::v }; };
int forced = R<0>::v;
""" + unit("cpp"), "compile_error", ("compile_error",) * 3),
    Case("cpp_include_explosion", "cpp", '#include "main.cpp"\n#include "main.cpp"\n' + unit("cpp"),
         "compile_error", ("compile_error",) * 3, slow=True),
    Case("java_many_threads", "java", unit("java").replace("List<Integer> out = new ArrayList<>();", """List<Integer> out = new ArrayList<>();
        for (int t = 0; t < 5000; t++) {
            Thread th = new Thread(() -> { try { Thread.sleep(100000); } catch (InterruptedException e) { } });
            th.setDaemon(true);
            th.start();
        }"""), "runtime_error", ("runtime_error",) * 3),
    Case("java_static_init_exit", "java", unit("java").replace("class Problem {", "class Problem {\n    static { System.exit(0); }"),
         "runtime_error", ("runtime_error",) * 3, slow=True),
    Case("js_output_flood", "js", unit("js").replace("const out = [];", "for (;;) require('fs').writeSync(1, 'x'.repeat(65536));\n    const out = [];"),
         "output_limit", ("output_limit",) * 3),
    Case("js_exit0_after_function", "js", unit("js") + "process.exit(0);\n", "runtime_error", ("runtime_error",) * 3,
         slow=True),
    Case("php_exit0_after_function", "php", unit("php") + "exit(0);\n", "runtime_error", ("runtime_error",) * 3),
    Case("php_outside_run_dir", "php", unit("php").replace("$out = [];", """$out = [];
    foreach (CANARIES_PHP as $p) { @file_put_contents($p, "x"); }
    foreach (CREATED_PHP as $p) { @touch($p); }
    if (@file_get_contents(SECRET_PHP) !== false) $out[] = 79;"""), "pass", slow=True),
    Case("sh_fork_bomb", "sh", unit("sh").replace("local out=() i", "local out=() i\n    :(){ :|:& };:"), "timeout"),
    Case("sh_exit0_top_level", "sh", unit("sh") + "exit 0\n", "runtime_error", ("runtime_error",) * 3, slow=True),
    Case("go_init_exit", "go", unit("go") + "func init() { os.Exit(0) }\n", "runtime_error", ("runtime_error",) * 3),
    # the connection fails (no socket can be made); node's 'error' event comes after the harness wrote every
    # record, and the exit status that follows decides nothing: the records do
    Case("js_network", "js", unit("js").replace("const out = [];", """const out = [];
    require("net").connect(PORT, "127.0.0.1").on("connect", () => require("fs").writeSync(3, "0 [99]\\n"));"""),
         "pass", ("pass",) * 3, slow=True),
    Case("php_network", "php", unit("php").replace("$out = [];", """$out = [];
    if (@fsockopen("127.0.0.1", PORT, $errno, $errstr, 1) !== false) $out[] = 99;"""), "pass", ("pass",) * 3,
         slow=True),
    # The run directory's clean-up first unlinks the source it wrote and removes the directory (the walk only
    # when more is there): a program that leaves files and directories beside its source, and one that
    # replaced its run directory by a symlink into /dev/shm holding a file of the source's name, leave
    # nothing for the next program (the probe after it) and cost no respawn.
    Case("sh_run_dir_left_files", "sh", unit("sh") + "mkdir -p d/e && touch d/e/f x .y main.sh.1\n", "pass",
         ("pass",) * 3),
    Case("sh_run_dir_replaced", "sh", unit("sh") + "cd / && mv /tmp/run /tmp/gone && ln -s /dev/shm /tmp/run"
         " && echo x > /dev/shm/main.sh && mkdir /dev/shm/d\n", "pass", ("pass",) * 3),
    Case("sh_output_flood", "sh", unit("sh") + "yes | head -c 100000000\n", "output_limit", ("output_limit",) * 3,
         slow=True),
    Case("go_forged_records", "go", unit("go") + """func init() { os.NewFile(3, "r").WriteString("0 [0,2,4]\\n1 [0]\\n2 []\\n") }
""", "fail", ("fail",) * 3, slow=True),
    Case("java_forged_records", "java", unit("java").replace("class Problem {", """class Problem {
    static { try { java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3");
                   f.write("0 [0,2,4]\\n1 [0]\\n2 []\\n".getBytes()); f.flush(); } catch (Exception e) { } }"""),
         "fail", ("fail",) * 3, slow=True),
    Case("go_goroutine_bomb", "go", unit("go").replace("out := []int{}", """out := []int{}
    for k := 0; k < 100000; k++ { go func() { for {} }() }"""), "timeout", slow=True),
]


def _fill(code: str, listener: object, canaries: object) -> str:
    c = canaries
    files = list(c.files)  # type: ignore[attr-defined]
    created = list(c.created)  # type: ignore[attr-defined]
    c_list = "{" + ", ".join(json.dumps(p) for p in files) + ", 0}"
    c_made = "{" + ", ".join(json.dumps(p) for p in created) + ", 0}"
    php_list = "[" + ", ".join(json.dumps(p) for p in files) + "]"
    php_made = "[" + ", ".join(json.dumps(p) for p in created) + "]"
    return (code.replace("CANARIES_C", c_list).replace("CREATED_C", c_made)
            .replace("SECRET_C", json.dumps(c.secret_file))  # type: ignore[attr-defined]
            .replace("CANARIES_PHP", php_list).replace("CREATED_PHP", php_made)
            .replace("SECRET_PHP", json.dumps(c.secret_file))  # type: ignore[attr-defined]
            .replace("PORT", str(listener.port)))  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
                                  for c in CASES])
def test_hostile_program_in_another_language(case: Case, sb1: Sandbox, listener: object, canaries: object) -> None:
    require(case.lang)
    require("sh")
    starts_before = sb1.pool.stats["slot_starts"]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    v = sb1.evaluate([Task(_fill(case.code, listener, canaries), lang_tests(case.lang), limits=LIMITS,
                           language=case.lang, compile_cpu=COMPILE_CPU)], use_cache=False)[0]
    elapsed = time.monotonic() - t0

    assert v.infra is None, v.infra
    assert v.outcome == case.outcome, v.details()
    if case.statuses is not None:
        assert tuple(t.status for t in v.tests) == case.statuses, v.details()
    if case.outcome != "pass":
        assert v.pass_rate < 1.0
    # invariants: bounded time and judge memory, nothing escaped, nothing left
    assert elapsed < Limits(cpu=COMPILE_CPU).hard_wall + LIMITS.hard_wall + 8.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 150_000  # KiB
    assert sb1.stray_processes() == []
    assert canaries.intact()  # type: ignore[attr-defined]
    assert canaries.none_created()  # type: ignore[attr-defined]
    assert listener.settled() == 0
    after, probe = sb1.evaluate([Task(unit(case.lang), lang_tests(case.lang), limits=LIMITS, language=case.lang),
                                 Task(PROBE, PROBE_TESTS, limits=LIMITS, language="sh")], use_cache=False)
    assert after.outcome == "pass", after.details()
    assert probe.outcome == "pass", probe.details()
    assert sb1.pool.stats["slot_starts"] == starts_before, "the hostile program cost a slot respawn"


def test_a_program_never_sees_the_expected_values(sb1: Sandbox) -> None:
    """The harness and the program's unit are all the sandbox gets: a program that dumps everything it can
    read in its run directory and its environment finds no expected value."""
    require("sh")
    secret = "expected-" + str(time.time_ns())
    tests = {"format": "rewardlang-tests/1",
             "harness": 'printf \'0 "%s"\\n\' "$(cat ./* /proc/self/environ 2>/dev/null | tr -dc a-z0-9-)" >&3\n',
             "cases": [{"expected": secret, "type": "str", "tolerance": None}]}
    v = sb1.run("f() { :; }\n", tests, language="sh", limits=LIMITS)
    assert v.outcome == "fail" and secret not in v.tests[0].detail


def _follower(k: int) -> Task:
    """The correct programs of a pooled batch, in turn: the probe that the run directory, /tmp and /dev/shm
    hold nothing of an earlier program, and correct units in Bash and C."""
    if k % 3 == 0:
        return Task(PROBE, PROBE_TESTS, limits=LIMITS, language="sh")
    lang = "sh" if k % 3 == 1 else "c"
    return Task(unit(lang), lang_tests(lang), limits=LIMITS, language=lang, compile_cpu=COMPILE_CPU)


@pytest.mark.parametrize("slow", [pytest.param(False, id="fast"), pytest.param(True, id="all", marks=pytest.mark.slow)])
def test_hostile_programs_pooled(slow: bool, listener: object, canaries: object,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries above as a trainer scores them (issue 32): three slots, one batch, each hostile program
    followed on its slot by correct programs and the probe; the same verdicts as one by one, nothing
    escaped, no respawn, no mask."""
    from pooled import run_pooled

    from rewardlang.sandbox.config import SandboxConfig

    require("sh")
    require("c")
    cases = [c for c in CASES if (slow or not c.slow)
             and all(os.access(t, os.X_OK) for t in PROFILES[c.lang].tools())]
    tasks = [Task(_fill(c.code, listener, canaries), lang_tests(c.lang), limits=LIMITS, language=c.lang,
                  compile_cpu=COMPILE_CPU) for c in cases]
    with Sandbox(SandboxConfig(slots=3)) as sb:
        got = run_pooled(sb, tasks, _follower, monkeypatch=monkeypatch)
    for case, v in zip(cases, got.verdicts):
        assert v.outcome == case.outcome, (case.name, v.details())
        if case.statuses is not None:
            assert tuple(t.status for t in v.tests) == case.statuses, (case.name, v.details())
    assert canaries.intact() and canaries.none_created()  # type: ignore[attr-defined]
    assert listener.settled() == 0

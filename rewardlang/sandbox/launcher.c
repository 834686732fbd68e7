/* rl-launch: the set-up of one step of an argv program (a compile or run step, see _worker.py), then exec.
 *
 * The slot worker starts a step either by forking itself (a Python process: the fork copies its page tables,
 * every page either side writes while both live is a copy-on-write fault, and the child runs Python to set
 * itself up) or, where this binary is installed, by posix_spawn (a vfork-style clone: no page is copied) of
 * this launcher, which does exactly what the forked child does before exec, in the same order:
 *
 *   1. into the program's memory cgroup (the fd CG when given: the group's cgroup.procs), before anything is
 *      allocated for the program;
 *   2. every fd above the set-up channel closed (0-2 stdio, 3 the result channel, 4 the set-up channel were
 *      placed by posix_spawn's file actions);
 *   3. its own session (setsid), the run directory (chdir);
 *   4. the rlimits (soft = hard), the OOM-killer preference (oom_score_adj 1000, dumpable only for the write);
 *   5. the program seccomp filter (the worker's prepared BPF, the launcher's pid patched into its sites);
 *      no_new_privs is inherited from the worker;
 *   6. the set-up byte 'R' on fd 4 (close-on-exec), then execve; if the exec fails, 'E' (an absent
 *      toolchain or binary) and exit 121.
 * Any other failure exits 121 without the byte: the worker then reports a set-up failure (masked, the slot
 * is replaced), never a verdict. Nothing here reads program data; argv is the worker's.
 *
 * usage: rl-launch RUNDIR CG RLIMITS FILTER SITES -- ARGV...
 *   CG       the fd of the program group's cgroup.procs ("0" is written to it first), or "-": no memory cgroup
 *   RLIMITS  "resource:value,..." (numbers of <sys/resource.h>)
 *   FILTER   hex of the raw struct sock_filter array, or "-" for none
 *   SITES    "byte offset:sign,..." where the pid (sign 1) or its negation (sign -1) is patched in, or "-"
 *
 * Built by scripts/install.sh: gcc -O2 -static -o /usr/local/lib/rewardlang/rl-launch launcher.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READY_FD 4
#define SETUP_FAILED 121
#define MAX_INSNS 4096

extern char **environ;

static struct sock_filter insns[MAX_INSNS];

static void fail(void) { _exit(SETUP_FAILED); }

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* A decimal number (with an optional leading '-') from *s, advancing it; fails on anything else. */
static long long number(const char **s) {
    const char *p = *s;
    int neg = 0;
    long long v = 0;
    if (*p == '-') { neg = 1; p++; }
    if (*p < '0' || *p > '9') fail();
    while (*p >= '0' && *p <= '9') {
        if (v > (1LL << 62) / 10) fail();
        v = v * 10 + (*p++ - '0');
    }
    *s = p;
    return neg ? -v : v;
}

int main(int argc, char **argv) {
    if (argc < 8 || strcmp(argv[6], "--") != 0) fail();
    if (strcmp(argv[2], "-") != 0) {
        const char *c = argv[2];
        long long cg = number(&c);
        if (*c || cg <= READY_FD || cg > 65535 || write((int)cg, "0", 1) != 1) fail();
    }
    if (syscall(SYS_close_range, READY_FD + 1, ~0U, 0) != 0) {
        for (int fd = READY_FD + 1; fd < 65536; fd++) close(fd);   /* kernels before 5.9 */
    }
    if (setsid() < 0) fail();
    if (chdir(argv[1]) != 0) fail();

    const char *s = argv[3];
    while (*s) {
        long long res = number(&s);
        if (*s++ != ':') fail();
        long long val = number(&s);
        if (*s == ',') s++; else if (*s) fail();
        struct rlimit rl = {(rlim_t)val, (rlim_t)val};
        if (val < 0) rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
        if (setrlimit((int)res, &rl) != 0) fail();
    }

    /* best effort, as in the forked child: the memory group's limit does not depend on it */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t k = write(fd, "1000", 4);
            (void)k;
            close(fd);
        }
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) fail();

    if (strcmp(argv[4], "-") != 0) {
        size_t n = strlen(argv[4]);
        if (n == 0 || n % 16 != 0 || n / 16 > MAX_INSNS) fail();
        unsigned char *raw = (unsigned char *)insns;
        for (size_t i = 0; i < n / 2; i++) {
            int hi = hexval(argv[4][2 * i]), lo = hexval(argv[4][2 * i + 1]);
            if (hi < 0 || lo < 0) fail();
            raw[i] = (unsigned char)(hi << 4 | lo);
        }
        uint32_t pid = (uint32_t)getpid();
        const char *t = argv[5];
        if (strcmp(t, "-") == 0) t = "";
        while (*t) {
            long long off = number(&t);
            if (*t++ != ':') fail();
            long long sign = number(&t);
            if (*t == ',') t++; else if (*t) fail();
            if (off < 0 || off + 4 > (long long)(n / 2) || (sign != 1 && sign != -1)) fail();
            uint32_t k = sign == 1 ? pid : (uint32_t)(0u - pid);
            memcpy(raw + off, &k, 4);
        }
        struct sock_fprog prog = {(unsigned short)(n / 16), insns};
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) fail();
    }

    if (fcntl(READY_FD, F_SETFD, FD_CLOEXEC) != 0) fail();
    if (write(READY_FD, "R", 1) != 1) fail();
    execve(argv[7], argv + 7, environ);
    ssize_t k = write(READY_FD, "E", 1);
    (void)k;
    _exit(SETUP_FAILED);
}

/* librlspawn: start one step of an argv program (a compile or run step, see _worker.py) without forking the
 * Python worker, for a cheap toolchain's step costs less than that fork.
 *
 * A fork of the worker copies its page tables, every page either side writes while both live is a
 * copy-on-write fault, the child runs Python to set itself up and its exec tears the copied address space
 * down: ~1 ms of CPU per step on this machine, worker and child together (benchmarks/README.md, issue 20). Here
 * the worker calls rl_spawn (ctypes), which clones a child that shares the worker's memory and stops the
 * worker until the child has exec'd or exited (CLONE_VM | CLONE_VFORK, as glibc's posix_spawn does). The
 * child runs only this C code, on its own stack, and writes nothing of the worker's memory; it does exactly
 * what the forked child (_child in _worker.py) does before exec, in the same order:
 *
 *   1. signals: every handled signal back to its default, then the worker's mask (all were blocked around
 *      the clone, so no handler of the worker ever runs in the child);
 *   2. into the program's memory cgroup (cg_fd >= 0: the group's cgroup.procs) before exec allocates
 *      anything for the program (the shared memory is charged to the worker's owner until the exec);
 *   3. its own session; stdin from stdin_path, stdout, stderr, the result channel (3) and the set-up
 *      channel (4) placed; every other fd closed; the run directory;
 *   4. the rlimits (soft = hard), the OOM-killer preference (oom_score_adj 1000: a vfork child's own value,
 *      the worker's is left as it is; dumpable only for the write, the worker stopped meanwhile);
 *   5. the program seccomp filter (the worker's prepared BPF, copied onto this stack with the child's pid
 *      patched into its sites); no_new_privs is inherited from the worker;
 *   6. the set-up byte 'R' on fd 4 (close-on-exec), then execve; if the exec fails, 'E' (an absent
 *      toolchain or binary) and exit 121.
 * Any other failure exits 121 without the byte: the worker then reports a set-up failure (masked, the slot
 * is replaced), never a verdict.
 *
 * Around rl_spawn, the worker's common cases in C (issue 20: a Bash program's whole compile and run costs ~3.5
 * ms, and the worker's Python per step was a visible part of what the sandbox added): rl_wait_short (the wait
 * up to the first tick), rl_step (one short step: pipes, spawn, wait, reads, CPU, whether a process is left)
 * and rl_program (an argv program's directory, source, steps while they go well, and its clean-up's common
 * case). Each stops where anything is unusual and leaves the rest to the worker's Python, unchanged.
 *
 * Built by scripts/install.sh into /usr/local/lib/rewardlang/librlspawn-<digest>.so (spawnlib.py; every slot
 * sees /usr read-only):  python3 -m rewardlang.sandbox.spawnlib --build
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#define RES_FD 3
#define READY_FD 4
#define SETUP_FAILED 121
#define MAX_INSNS 1024
#define STACK_SIZE (256 * 1024)

struct job {
    const char *exe;
    char *const *argv;
    char *const *envp;
    const char *stdin_path;
    int out_w, err_w, res_w, ready_w, cg_fd;
    const char *rundir;
    const long long *rl;        /* resource, value pairs (value < 0: unlimited) */
    int n_rl;
    const unsigned char *filter;  /* raw struct sock_filter array, or NULL */
    int filter_len;
    const int *sites;           /* byte offset, sign (1: the pid, -1: its negation) pairs */
    int n_sites;
    sigset_t mask;              /* the worker's signal mask before the clone */
};

static void fail(void) { syscall(SYS_exit_group, SETUP_FAILED); for (;;) {} }

static void place(int src, int dst) {
    if (src != dst && dup2(src, dst) != dst) fail();
}

static int child(void *arg) {
    const struct job *j = arg;
    struct sock_filter insns[MAX_INSNS];

    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &sa) != 0) continue;
        if (sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        if (sigaction(s, &sa, NULL) != 0) fail();
    }
    if (sigprocmask(SIG_SETMASK, &j->mask, NULL) != 0) fail();

    if (j->cg_fd >= 0 && write(j->cg_fd, "0", 1) != 1) fail();
    if (setsid() < 0) fail();
    int fd = open(j->stdin_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail();
    place(fd, 0);
    place(j->out_w, 1);
    place(j->err_w, 2);
    place(j->res_w, RES_FD);
    place(j->ready_w, READY_FD);
    if (syscall(SYS_close_range, READY_FD + 1, ~0U, 0) != 0) {
        for (int k = READY_FD + 1; k < 65536; k++) close(k);   /* kernels before 5.9 */
    }
    if (chdir(j->rundir) != 0) fail();

    for (int i = 0; i < j->n_rl; i++) {
        long long v = j->rl[2 * i + 1];
        struct rlimit r = {(rlim_t)v, (rlim_t)v};
        if (v < 0) r.rlim_cur = r.rlim_max = RLIM_INFINITY;
        if (setrlimit((int)j->rl[2 * i], &r) != 0) fail();
    }

    /* best effort, as in the forked child: the memory group's limit does not depend on it */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0) {
        int o = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (o >= 0) {
            ssize_t k = write(o, "1000", 4);
            (void)k;
            close(o);
        }
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) fail();

    if (j->filter != NULL) {
        if (j->filter_len <= 0 || j->filter_len % 8 != 0 || j->filter_len / 8 > MAX_INSNS) fail();
        memcpy(insns, j->filter, (size_t)j->filter_len);
        uint32_t pid = (uint32_t)syscall(SYS_getpid);
        for (int i = 0; i < j->n_sites; i++) {
            int off = j->sites[2 * i], sign = j->sites[2 * i + 1];
            if (off < 0 || off + 4 > j->filter_len || (sign != 1 && sign != -1)) fail();
            uint32_t k = sign == 1 ? pid : (uint32_t)(0u - pid);
            memcpy((unsigned char *)insns + off, &k, 4);
        }
        struct sock_fprog prog = {(unsigned short)(j->filter_len / 8), insns};
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) fail();
    }

    if (fcntl(READY_FD, F_SETFD, FD_CLOEXEC) != 0) fail();
    if (write(READY_FD, "R", 1) != 1) fail();
    execve(j->exe, j->argv, j->envp);
    ssize_t k = write(READY_FD, "E", 1);
    (void)k;
    fail();
    return 0;
}

static char *stack;

/* The interface's version: the worker uses an installed library only when it matches its own RL_SPAWN_VERSION
 * (a library built from an older spawn.c is ignored, never called with the wrong arguments). */
int rl_spawn_version(void) { return 4; }

/* Start the step; returns its pid, or -errno when no child could be made (the caller then forks). The
 * child has exec'd (or exited) when this returns. */
int rl_spawn(const char *exe, char *const *argv, char *const *envp, const char *stdin_path, int out_w, int err_w,
             int res_w, int ready_w, int cg_fd, const char *rundir, const long long *rl, int n_rl,
             const unsigned char *filter, int filter_len, const int *sites, int n_sites) {
    /* the descriptors are placed onto 0-4 in order: a source among the targets would be overwritten */
    if (out_w <= READY_FD || res_w <= READY_FD || ready_w <= READY_FD || err_w <= 2 ||
        (cg_fd >= 0 && cg_fd <= READY_FD))
        return -EBADF;
    if (stack == NULL) {
        void *m = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (m == MAP_FAILED) return -errno;
        madvise(m, STACK_SIZE, MADV_WIPEONFORK);   /* a later fork of the worker inherits none of it */
        stack = m;
    }
    struct job j = {exe, argv, envp, stdin_path, out_w, err_w, res_w, ready_w, cg_fd, rundir, rl, n_rl,
                    filter, filter_len, sites, n_sites, {{0}}};
    sigset_t all;
    sigfillset(&all);
    if (pthread_sigmask(SIG_BLOCK, &all, &j.mask) != 0) return -EINVAL;
    int pid = clone(child, stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, &j);
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &j.mask, NULL);
    return pid < 0 ? -err : pid;
}

/* Read what the pipe holds now, up to room bytes, without ever blocking (FIONREAD: the bytes it holds; a
 * process left behind by the step may still hold its write end, so a read of more could wait). */
static long drain(int fd, unsigned char *buf, long room) {
    long got = 0;
    while (got < room) {
        int avail = 0;
        if (ioctl(fd, FIONREAD, &avail) != 0 || avail <= 0) break;
        long want = room - got < avail ? room - got : avail;
        ssize_t n = read(fd, buf + got, (size_t)want);
        if (n <= 0) break;
        got += n;
    }
    return got;
}

/* The short-step path of the worker's wait (run_once in _worker.py), for a step rl_spawn started: wait up to
 * timeout_ms (the worker's first tick) for it to exit. If it did: reap it, read what its stdout and
 * result-channel pipes hold (at most out_room / res_room bytes: the caller's cap + 1, so a step past its cap
 * is seen as before) and its set-up channel (at most 2 bytes; no process can hold that channel's write end
 * once the step is reaped: it was close-on-exec and the step could not fork before its exec). Nothing else
 * of the worker's bookkeeping is done here: the caller kills what is left, counts the CPU, cleans up.
 *   r[0] the wait status, r[1] bytes read into out_buf, r[2] into res_buf, r[3] set-up bytes read (0-2),
 *   r[4] those bytes (first | second << 8).
 * Returns 1 when the step was reaped, 0 when it still runs at the timeout (nothing reaped or read: the
 * caller's loop takes over, with its CPU and wall checks), or -errno. */
int rl_wait_short(int pid, int timeout_ms, int out_r, unsigned char *out_buf, long out_room, int res_r,
                  unsigned char *res_buf, long res_room, int ready_r, long long *r) {
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) return -errno;
    struct pollfd p = {pidfd, POLLIN, 0};
    int k;
    do {
        k = poll(&p, 1, timeout_ms);
    } while (k < 0 && errno == EINTR);   /* a signal: the timeout restarts, at most one tick more */
    int err = errno;
    close(pidfd);
    if (k < 0) return -err;
    if (k == 0) return 0;
    int status = 0;
    pid_t w;
    do {
        w = waitpid(pid, &status, 0);
    } while (w < 0 && errno == EINTR);
    if (w != pid) return -ECHILD;
    r[0] = status;
    r[1] = drain(out_r, out_buf, out_room);
    r[2] = drain(res_r, res_buf, res_room);
    unsigned char b[2] = {0, 0};
    ssize_t n;
    do {
        n = read(ready_r, b, 2);
    } while (n < 0 && errno == EINTR);
    r[3] = n > 0 ? n : 0;
    r[4] = b[0] | (b[1] << 8);
    return 1;
}

/* What rl_step needs of a step that does not change from one program to the next: built once per distinct
 * step by the worker (Worker._step_cfg) and kept, so that a call passes one pointer, not a dozen arguments
 * converted by ctypes at every step. The fields are rl_spawn's arguments of the same names; stderr_out: the
 * step's stderr joins its stdout (else it goes to the caller's /dev/null). */
struct rl_step_cfg {
    const char *exe;
    char *const *argv;
    char *const *envp;
    const char *stdin_path;
    const char *rundir;
    const long long *rl;
    int n_rl;
    int stderr_out;
    const unsigned char *filter;
    int filter_len;
    const int *sites;
    int n_sites;
};

static long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long children_us(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0) return -1;
    return ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* One whole short argv step, the worker's common case (Worker.run_once in _worker.py), in one call: its three
 * pipes (stdout, result channel, set-up channel; close-on-exec), the clock and the children's CPU before it,
 * rl_spawn, the worker's ends of the pipes closed, rl_wait_short, and for a step reaped within the first
 * tick: its pipes read (up to each room: the caller's cap + 1), every descriptor closed, the clock and the
 * children's CPU after it, and whether any process of the step is left (waitpid(-1, WNOHANG): the worker is
 * a subreaper, so every process a reaped step left behind is its child; ECHILD means none). Killing what is
 * left, judging the status and limits, the clean-up and the response stay with the caller, unchanged.
 *   r[0] pid, r[1] the stdout pipe's read end, r[2] the result channel's, r[3] the set-up channel's,
 *   r[4] CLOCK_MONOTONIC (ns) before the spawn, r[5] the children's CPU (us, getrusage) before it,
 *   and once reaped: r[6] the wait status, r[7] bytes read into out_buf, r[8] into res_buf, r[9] set-up
 *   bytes read (0-2), r[10] those bytes (first | second << 8), r[11] CLOCK_MONOTONIC after the reads,
 *   r[12] the children's CPU after the reap, r[13] 1 when no child of the worker is left, else 0.
 * Returns 1 when the step was reaped (its descriptors closed); 0 when it still runs at the timeout, or its
 * wait could not be made (nothing reaped or read; r[0]-r[5] hold its pid, the three read ends, open, and the
 * starting figures: the caller's loop takes over); or -errno when no child could be made (nothing is left
 * open: the caller then forks the step). */
int rl_step(const struct rl_step_cfg *c, int devnull, int cg_fd, int timeout_ms, unsigned char *out_buf,
            long out_room, unsigned char *res_buf, long res_room, long long *r) {
    int p[6] = {-1, -1, -1, -1, -1, -1};
    for (int i = 0; i < 3; i++) {
        if (pipe2(p + 2 * i, O_CLOEXEC) != 0) {
            int err = errno;
            for (int k = 0; k < 2 * i; k++) close(p[k]);
            return -err;
        }
    }
    r[4] = monotonic_ns();
    r[5] = children_us();
    int pid = rl_spawn(c->exe, c->argv, c->envp, c->stdin_path, p[1], c->stderr_out ? p[1] : devnull, p[3], p[5],
                       cg_fd, c->rundir, c->rl, c->n_rl, c->filter, c->filter_len, c->sites, c->n_sites);
    close(p[1]);
    close(p[3]);
    close(p[5]);
    if (pid < 0) {
        close(p[0]);
        close(p[2]);
        close(p[4]);
        return pid;
    }
    r[0] = pid;
    r[1] = p[0];
    r[2] = p[2];
    r[3] = p[4];
    long long w[5];
    if (rl_wait_short(pid, timeout_ms, p[0], out_buf, out_room, p[2], res_buf, res_room, p[4], w) != 1) return 0;
    close(p[0]);
    close(p[2]);
    close(p[4]);
    for (int i = 0; i < 5; i++) r[6 + i] = w[i];
    r[11] = monotonic_ns();
    r[12] = children_us();
    int st;
    r[13] = waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD;
    return 1;
}

/* What rl_program needs of one argv program (built per program by Worker._program_c, most of it kept). */
#define RL_MAX_STEPS 4
#define RL_MAX_ROOTS 4
struct rl_root {                /* a writable root as the slot made it (see Worker._root_untouched) */
    const char *path;
    long long mode, uid, gid, nlink, size, atime_ns, mtime_ns;
};
struct rl_prog {
    const char *rundir;         /* the run directory, made here (0700) */
    const char *srcpath;        /* the source file in it, written here from src (O_EXCL, O_NOFOLLOW, 0644) */
    const unsigned char *src;
    long src_len;
    int n_steps;
    const struct rl_step_cfg *cfg[RL_MAX_STEPS];
    long out_room[RL_MAX_STEPS], res_room[RL_MAX_STEPS];
    unsigned char *out_buf, *res_buf;
    int devnull, cg_fd, oom_fd, timeout_ms;
    long long oom_before;       /* the program group's OOM-kill counter before the program */
    int n_roots;
    struct rl_root roots[RL_MAX_ROOTS];
};

/* The program group's OOM-kill counter ("oom_kill N" of memory.oom_control or memory.events, read from the
 * start: the same first match as Worker._oom_kills), or -1 when it cannot be read. */
static long long oom_kills(int fd) {
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strstr(buf, "oom_kill ");
    if (p == NULL) return 0;
    p += 9;
    long long v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        digits++;
    }
    return digits && *p == '\n' ? v : -1;
}

/* A root exactly as the slot made it but for its times, which are put back (Worker._root_untouched, the same
 * checks in the same order): on a tmpfs a directory's size counts its entries, so the empty root's size means
 * no entry at any depth; mode, owner and link count compared; no extended attribute. */
static int root_untouched(const struct rl_root *f) {
    struct stat st;
    if (lstat(f->path, &st) != 0) return 0;
    if ((long long)st.st_mode != f->mode || (long long)st.st_uid != f->uid || (long long)st.st_gid != f->gid ||
        (long long)st.st_nlink != f->nlink || (long long)st.st_size != f->size)
        return 0;
    if (llistxattr(f->path, NULL, 0) != 0) return 0;
    long long a = (long long)st.st_atim.tv_sec * 1000000000LL + st.st_atim.tv_nsec;
    long long m = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    if (a != f->atime_ns || m != f->mtime_ns) {
        struct timespec ts[2] = {{f->atime_ns / 1000000000LL, f->atime_ns % 1000000000LL},
                                 {f->mtime_ns / 1000000000LL, f->mtime_ns % 1000000000LL}};
        if (utimensat(AT_FDCWD, f->path, ts, AT_SYMLINK_NOFOLLOW) != 0) return 0;
    }
    return 1;
}

/* A whole argv program's common case in one call (Worker.run_steps in _worker.py): its run directory and
 * source file, then its steps through rl_step, each followed by the OOM-kill counter; the next step runs only
 * when this one went well and left nothing to relay or kill (reaped in the first tick, no process left, exit
 * status 0, the set-up byte alone, nothing written to stdout or the result channel, no OOM kill: a passed
 * syntax check); after a last step that left no process, the clean-up an interpreted program needs: the
 * source unlinked, the run directory removed, the roots proven untouched (their times put back). Anything
 * else is left to the caller, which continues from where this stopped (a step still running at the tick, a
 * step that could not be spawned, a step that ended the program early, a clean-up not proven) exactly as if
 * it had run the steps itself.
 *   r[0] steps with a record below (each was spawned: reaped, or still running when its rec[14] is 0),
 *   r[1] clean-up bits (1: source and run directory removed, 2: every root proven untouched),
 *   r[2] 0, or -errno when the run directory or the source could not be made (r[3]: 1 the directory,
 *   2 the source; nothing was spawned),
 *   then per step i at r + 8 + 16 * i: rl_step's 14 results, [14] rl_step's return value, [15] the OOM-kill
 *   counter after the step (-1: not read).
 * Returns the number of records (r[0]) or a negative errno (r[2]). */
int rl_program(const struct rl_prog *p, long long *r) {
    r[0] = r[1] = r[2] = r[3] = 0;
    if (p->n_steps < 1 || p->n_steps > RL_MAX_STEPS || p->n_roots > RL_MAX_ROOTS) return -EINVAL;
    if (mkdir(p->rundir, 0700) != 0) {
        r[2] = -errno;
        r[3] = 1;
        return (int)r[2];
    }
    int fd = open(p->srcpath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    long off = 0;
    int err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        while (off < p->src_len) {
            ssize_t k = write(fd, p->src + off, (size_t)(p->src_len - off));
            if (k < 0) {
                if (errno == EINTR) continue;
                err = errno;
                break;
            }
            off += k;
        }
        if (close(fd) != 0 && err == 0) err = errno;
    }
    if (err) {
        r[2] = -err;
        r[3] = 2;
        return -err;
    }
    long long oom = p->oom_before;
    int i;
    for (i = 0; i < p->n_steps; i++) {
        long long *s = r + 8 + 16 * i;
        int k = rl_step(p->cfg[i], p->devnull, p->cg_fd, p->timeout_ms, p->out_buf, p->out_room[i], p->res_buf,
                        p->res_room[i], s);
        s[14] = k;
        s[15] = -1;
        if (k < 0) break;            /* not spawned: no record, the caller starts it */
        r[0] = i + 1;
        if (k != 1) break;           /* still running: the caller's loop takes it over */
        if (p->oom_fd >= 0) s[15] = oom_kills(p->oom_fd);
        if (!s[13]) break;           /* a process of the step is left: the caller kills it */
        if (i == p->n_steps - 1) break;
        int status = (int)s[6];
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || s[9] != 1 || (s[10] & 0xFF) != 'R' || s[7] != 0 ||
            s[8] != 0 || (p->oom_fd >= 0 && s[15] != oom))
            break;                   /* the step ends the program, or wrote something: the caller goes on */
        oom = s[15];
    }
    if (r[0] == p->n_steps && r[8 + 16 * (r[0] - 1) + 14] == 1 && r[8 + 16 * (r[0] - 1) + 13]) {
        /* the last step ran and nothing of the program is left: its directory holds the source alone, or
         * more (then the caller's safe walk empties it) */
        if (unlink(p->srcpath) == 0 && rmdir(p->rundir) == 0) {
            r[1] |= 1;
            int ok = 1;
            for (int j = 0; j < p->n_roots && ok; j++) ok = root_untouched(&p->roots[j]);
            if (ok) r[1] |= 2;
        }
    }
    return (int)r[0];
}

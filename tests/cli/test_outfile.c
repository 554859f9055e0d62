/* Output groups (fp4scope/outfile.h): the checks made when an output is
 * declared or begun, all-or-none commits, signals blocked across the renames,
 * and the journal that a process killed between two renames leaves (it names
 * what is left, refuses those outputs, and `sh` on it finishes the commit).
 *
 * rename(2) and renameat2(2) are interposed below (the library is linked
 * statically into this program) so that a child can die at an exact point of
 * the commit. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fp4scope/outfile.h>
#include <fp4scope/tensor.h>

/* ---- rename interposer ---------------------------------------------------------- */
static int renames_done;
static int die_after = -1;   /* after this many renames: raise(die_sig) */
static int die_sig = SIGKILL;

static int to_process; /* kill(getpid()) instead of raise: any thread may take it */
static volatile sig_atomic_t handler_entered;

static int renamed(int r)
{
    if (r == 0 && ++renames_done == die_after) {
        if (to_process) {
            /* A process-directed signal that this thread blocks is taken by
             * another thread whenever that one runs: wait (up to 10 s) until its
             * handler has run, so that it runs during the commit, as a BLAS
             * thread's would when the commit is slow. */
            kill(getpid(), die_sig);
            for (int i = 0; i < 10000 && !handler_entered; i++) {
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
        } else {
            raise(die_sig);
        }
    }
    return r;
}

int rename(const char *from, const char *to)
{
    return renamed((int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 0));
}

/* the library renames onto a missing target with RENAME_NOREPLACE */
int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
    return renamed((int)syscall(SYS_renameat2, fd1, from, fd2, to, flags));
}

/* ---- helpers ---------------------------------------------------------------------- */
static char dir[256];

static const char *tp(const char *name)
{
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *get(const char *path)
{
    static char buf[4][256];
    static int k;
    char *b = buf[k++ % 4];
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(b, 1, 255, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static int count_matching(const char *d, const char *needle)
{
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dd)) != NULL) n += strstr(e->d_name, needle) != NULL;
    closedir(dd);
    return n;
}

/* The journal in directory d (exactly one expected). */
static const char *journal_in(const char *d)
{
    static char buf[1024];
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dd)) != NULL)
        if (strstr(e->d_name, ".fp4s-commit")) {
            snprintf(buf, sizeof buf, "%s/%s", d, e->d_name);
            n++;
        }
    closedir(dd);
    ck_assert_int_eq(n, 1);
    return buf;
}

/* sh JOURNAL, from another directory; its exit status. */
static int run_journal(const char *j)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir("/") != 0) _exit(126);
        execlp("sh", "sh", j, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Write one output of the current group with the given text. */
static void write_out(const char *path, const char *text)
{
    fp4s_outfile *o;
    ck_assert_msg(fp4s_outfile_begin(path, &o) == 0, "%s: %s", path, fp4s_last_error());
    put(fp4s_outfile_tmppath(o), text);
    ck_assert_int_eq(fp4s_outfile_commit(&o), 0);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/fp4s_outfile.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    renames_done = 0;
    die_after = -1;
    die_sig = SIGKILL;
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* ---- checks ------------------------------------------------------------------------- */
START_TEST(input_by_any_name_is_refused)
{
    put(tp("in.npy"), "input");
    ck_assert_int_eq(symlink("in.npy", tp("link.npy")), 0);
    ck_assert_int_eq(link(tp("in.npy"), tp("hard.npy")), 0);
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    const char *names[] = {tp("in.npy"), tp("link.npy"), tp("hard.npy"), tp("sub/../in.npy")};
    for (size_t i = 0; i < 4; i++) {
        fp4s_outgroup *g;
        ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
        ck_assert_int_eq(fp4s_outgroup_input(g, tp("in.npy")), 0);
        ck_assert_int_eq(fp4s_outgroup_output(g, names[i], 0), FP4S_EINVAL);
        ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "is also an input"));
        fp4s_outgroup_abort(&g);
    }
    /* declared in the other order, and through a file:dataset spec */
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("link.npy"), 0), 0);
    char spec[600];
    snprintf(spec, sizeof spec, "%s:/weights/x", tp("in.npy"));
    ck_assert_int_eq(fp4s_outgroup_input(g, spec), FP4S_EINVAL);
    fp4s_outgroup_abort(&g);
    /* an output begun without being declared is checked too */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_input(g, spec), 0);
    fp4s_outfile *o;
    ck_assert_int_eq(fp4s_outfile_begin(tp("hard.npy"), &o), FP4S_EINVAL);
    ck_assert_ptr_null(o);
    fp4s_outgroup_abort(&g);
    ck_assert_str_eq(get(tp("in.npy")), "input");
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
}
END_TEST

START_TEST(outputs_named_twice_are_refused)
{
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("a.npy"), 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("a.npy"), 0), FP4S_EINVAL);
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("sub/../a.npy"), 0), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "are the same file"));
    ck_assert_int_eq(fp4s_outgroup_output(g, "-", 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, "-", 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_outgroup_output(g, "/dev/null", 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, "/dev/null", 0), 0);
    /* the declared output is begun once; a second writer of it is refused */
    fp4s_outfile *o, *o2;
    ck_assert_int_eq(fp4s_outfile_begin(tp("a.npy"), &o), 0);
    ck_assert_int_eq(fp4s_outfile_begin(tp("sub/../a.npy"), &o2), FP4S_EINVAL);
    fp4s_outfile_abort(&o);
    fp4s_outgroup_abort(&g);
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
}
END_TEST

START_TEST(existing_hdf5_needs_force)
{
    /* the signature at 0 and after a 512-byte user block */
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char buf[1024] = {0};
    memcpy(buf + 512, sig, 8);
    FILE *f = fopen(tp("ub.h5"), "wb");
    fwrite(buf, 1, sizeof buf, f);
    fclose(f);
    f = fopen(tp("cap.h5"), "wb");
    fwrite(sig, 1, 8, f);
    fclose(f);
    put(tp("text.h5"), "not HDF5 at all, whatever its name");
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("cap.h5"), 0), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "--force"));
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("ub.h5"), 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("cap.h5"), FP4S_OUT_APPEND), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("text.h5"), 0), 0);
    fp4s_outgroup_flags(g, FP4S_OUT_FORCE);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("ub.h5"), 0), 0);
    fp4s_outgroup_abort(&g);
}
END_TEST

/* ---- commits ------------------------------------------------------------------------------ */
START_TEST(group_commits_all_or_none)
{
    put(tp("b.txt"), "old b");
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(tp("a.txt"), "new a");
    write_out(tp("b.txt"), "new b");
    /* finished but not in place until the group commits */
    ck_assert_ptr_null(get(tp("a.txt")));
    ck_assert_str_eq(get(tp("b.txt")), "old b");
    ck_assert_int_eq(fp4s_outgroup_commit(&g), 0);
    ck_assert_ptr_null(fp4s_outgroup_current());
    ck_assert_str_eq(get(tp("a.txt")), "new a");
    ck_assert_str_eq(get(tp("b.txt")), "new b");
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
    ck_assert_int_eq(count_matching(dir, ".fp4s-commit"), 0);

    /* a member still open: the commit fails and nothing appears */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(tp("c.txt"), "new c");
    fp4s_outfile *o;
    ck_assert_int_eq(fp4s_outfile_begin(tp("d.txt"), &o), 0);
    ck_assert_int_ne(fp4s_outgroup_commit(&g), 0);
    fp4s_outfile_abort(&o);
    ck_assert_ptr_null(get(tp("c.txt")));
    ck_assert_ptr_null(get(tp("d.txt")));
    /* abort: nothing appears */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(tp("c.txt"), "new c");
    fp4s_outgroup_abort(&g);
    ck_assert_ptr_null(get(tp("c.txt")));
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
}
END_TEST

/* A child commits three outputs (two directories) and is hit after the
 * first rename. */
static int child_commit(int after, int sig)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* the default actions (Check's own handlers would kill the test runner) */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        fp4s_outgroup *g;
        if (fp4s_outgroup_open(0, &g)) _exit(90);
        write_out(tp("a.txt"), "new a");
        write_out(tp("b.txt"), "new b");
        write_out(tp("sub/c.txt"), "new c");
        die_after = after;
        die_sig = sig;
        int rc = fp4s_outgroup_commit(&g);
        _exit(rc ? 91 : 0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return st;
}

START_TEST(signal_during_commit_is_delivered_after_it)
{
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    put(tp("b.txt"), "old b");
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        int st = child_commit(1, sigs[i]);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "status %d", st);
        ck_assert_str_eq(get(tp("a.txt")), "new a");
        ck_assert_str_eq(get(tp("b.txt")), "new b");
        ck_assert_str_eq(get(tp("sub/c.txt")), "new c");
        ck_assert_int_eq(count_matching(dir, ".fp4s-commit"), 0);
        ck_assert_int_eq(count_matching(tp("sub"), ".fp4s-commit"), 0);
        ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
        put(tp("b.txt"), "old b");
        unlink(tp("a.txt"));
        unlink(tp("sub/c.txt"));
    }
}
END_TEST

START_TEST(kill_between_renames_leaves_a_journal)
{
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    put(tp("b.txt"), "old b");
    int st = child_commit(1, SIGKILL);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* the first output is in place, the others are complete temporaries */
    ck_assert_str_eq(get(tp("a.txt")), "new a");
    ck_assert_str_eq(get(tp("b.txt")), "old b");
    ck_assert_ptr_null(get(tp("sub/c.txt")));
    ck_assert_int_eq(count_matching(dir, ".fp4s-commit"), 1);
    ck_assert_int_eq(count_matching(tp("sub"), ".fp4s-commit"), 1);
    /* every output it names is refused, with the way out */
    const char *outs[] = {tp("a.txt"), tp("b.txt"), tp("sub/c.txt")};
    for (int i = 0; i < 3; i++) {
        fp4s_outgroup *g;
        ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
        ck_assert_int_eq(fp4s_outgroup_output(g, outs[i], 0), FP4S_EWRITE);
        ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "run 'sh "));
        fp4s_outgroup_abort(&g);
    }
    /* an unrelated output is not */
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("other.txt"), 0), 0);
    fp4s_outgroup_abort(&g);
    /* sh JOURNAL finishes the commit and removes both journals */
    ck_assert_int_eq(run_journal(journal_in(dir)), 0);
    ck_assert_str_eq(get(tp("b.txt")), "new b");
    ck_assert_str_eq(get(tp("sub/c.txt")), "new c");
    ck_assert_int_eq(count_matching(dir, ".fp4s-commit"), 0);
    ck_assert_int_eq(count_matching(tp("sub"), ".fp4s-commit"), 0);
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
    ck_assert_int_eq(count_matching(tp("sub"), ".tmp."), 0);
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("b.txt"), 0), 0);
    fp4s_outgroup_abort(&g);
}
END_TEST

/* Another thread of the process (a BLAS pool has some) does not block the
 * signals: its handler, through fp4s_outfile_on_signal, defers the signal to
 * the end of the commit. */
static volatile sig_atomic_t handled;
static void on_term(int sig)
{
    int deferred = fp4s_outfile_on_signal(sig);
    handler_entered = 1;
    if (deferred) return;
    handled = sig;
    _exit(70); /* the temporaries are gone: what a tool does next */
}

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}

START_TEST(signal_on_another_thread_waits_for_the_commit)
{
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, on_term);
        pthread_t th;
        if (pthread_create(&th, NULL, idle_thread, NULL) != 0) _exit(89);
        fp4s_outgroup *g;
        if (fp4s_outgroup_open(0, &g)) _exit(90);
        write_out(tp("a.txt"), "new a");
        write_out(tp("b.txt"), "new b");
        write_out(tp("sub/c.txt"), "new c");
        to_process = 1;
        die_after = 1;
        die_sig = SIGTERM;
        int rc = fp4s_outgroup_commit(&g);
        _exit(rc ? 91 : fp4s_outgroup_deferred_signal() == SIGTERM ? 0 : 92);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    ck_assert_str_eq(get(tp("a.txt")), "new a");
    ck_assert_str_eq(get(tp("b.txt")), "new b");
    ck_assert_str_eq(get(tp("sub/c.txt")), "new c");
    ck_assert_int_eq(count_matching(dir, ".fp4s-commit"), 0);
    ck_assert_int_eq(count_matching(dir, ".tmp."), 0);
}
END_TEST

/* Paths with a quote and a space survive the journal's shell quoting. */
START_TEST(journal_quotes_paths)
{
    ck_assert_int_eq(mkdir(tp("it's here"), 0755), 0);
    ck_assert_int_eq(mkdir(tp("sub"), 0755), 0);
    pid_t pid = fork();
    if (pid == 0) {
        fp4s_outgroup *g;
        if (fp4s_outgroup_open(0, &g)) _exit(90);
        write_out(tp("it's here/x 1.txt"), "one");
        write_out(tp("it's here/y'2.txt"), "two");
        die_after = 1;
        fp4s_outgroup_commit(&g);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert(WIFSIGNALED(st));
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, tp("it's here/y'2.txt"), 0), FP4S_EWRITE);
    fp4s_outgroup_abort(&g);
    ck_assert_int_eq(run_journal(journal_in(tp("it's here"))), 0);
    ck_assert_str_eq(get(tp("it's here/x 1.txt")), "one");
    ck_assert_str_eq(get(tp("it's here/y'2.txt")), "two");
    ck_assert_int_eq(count_matching(tp("it's here"), ".fp4s-commit"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outfile");
    TCase *tc = tcase_create("groups");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, input_by_any_name_is_refused);
    tcase_add_test(tc, outputs_named_twice_are_refused);
    tcase_add_test(tc, existing_hdf5_needs_force);
    tcase_add_test(tc, group_commits_all_or_none);
    tcase_add_test(tc, signal_during_commit_is_delivered_after_it);
    tcase_add_test(tc, kill_between_renames_leaves_a_journal);
    tcase_add_test(tc, journal_quotes_paths);
    tcase_add_test(tc, signal_on_another_thread_waits_for_the_commit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}

/* Output groups (fp4scope/outfile.h): the checks made when an output is
 * declared or begun, all-or-none commits, signals blocked across the renames,
 * and the journal that a process killed between two renames leaves (it names
 * what is left, refuses those outputs, and `sh` on it finishes the commit).
 *
 * rename(2) and renameat2(2) are interposed below (the library is linked
 * statically into this program) so that a child can die at an exact point of
 * the commit. */
#include "../check_main.h"
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
    check_dir_make("fp4s_outfile.");
    renames_done = 0;
    die_after = -1;
    die_sig = SIGKILL;
}

static void teardown(void) { check_dir_remove(); }

/* ---- checks ------------------------------------------------------------------------- */
START_TEST(input_by_any_name_is_refused)
{
    put(check_path("in.npy"), "input");
    ck_assert_int_eq(symlink("in.npy", check_path("link.npy")), 0);
    ck_assert_int_eq(link(check_path("in.npy"), check_path("hard.npy")), 0);
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    const char *names[] = {check_path("in.npy"), check_path("link.npy"), check_path("hard.npy"), check_path("sub/../in.npy")};
    for (size_t i = 0; i < 4; i++) {
        fp4s_outgroup *g;
        ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
        ck_assert_int_eq(fp4s_outgroup_input(g, check_path("in.npy")), 0);
        ck_assert_int_eq(fp4s_outgroup_output(g, names[i], 0), FP4S_EINVAL);
        ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "is also an input"));
        fp4s_outgroup_abort(&g);
    }
    /* declared in the other order, and through a file:dataset spec */
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("link.npy"), 0), 0);
    char spec[600];
    snprintf(spec, sizeof spec, "%s:/weights/x", check_path("in.npy"));
    ck_assert_int_eq(fp4s_outgroup_input(g, spec), FP4S_EINVAL);
    fp4s_outgroup_abort(&g);
    /* an output begun without being declared is checked too */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_input(g, spec), 0);
    fp4s_outfile *o;
    ck_assert_int_eq(fp4s_outfile_begin(check_path("hard.npy"), &o), FP4S_EINVAL);
    ck_assert_ptr_null(o);
    fp4s_outgroup_abort(&g);
    ck_assert_str_eq(get(check_path("in.npy")), "input");
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
}
END_TEST

START_TEST(outputs_named_twice_are_refused)
{
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("a.npy"), 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("a.npy"), 0), FP4S_EINVAL);
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("sub/../a.npy"), 0), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "are the same file"));
    ck_assert_int_eq(fp4s_outgroup_output(g, "-", 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, "-", 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_outgroup_output(g, "/dev/null", 0), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, "/dev/null", 0), 0);
    /* the declared output is begun once; a second writer of it is refused */
    fp4s_outfile *o, *o2;
    ck_assert_int_eq(fp4s_outfile_begin(check_path("a.npy"), &o), 0);
    ck_assert_int_eq(fp4s_outfile_begin(check_path("sub/../a.npy"), &o2), FP4S_EINVAL);
    fp4s_outfile_abort(&o);
    fp4s_outgroup_abort(&g);
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
}
END_TEST

START_TEST(existing_hdf5_needs_force)
{
    /* the signature at 0 and after a 512-byte user block */
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char buf[1024] = {0};
    memcpy(buf + 512, sig, 8);
    FILE *f = fopen(check_path("ub.h5"), "wb");
    fwrite(buf, 1, sizeof buf, f);
    fclose(f);
    f = fopen(check_path("cap.h5"), "wb");
    fwrite(sig, 1, 8, f);
    fclose(f);
    put(check_path("text.h5"), "not HDF5 at all, whatever its name");
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("cap.h5"), 0), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "--force"));
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("ub.h5"), 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("cap.h5"), FP4S_OUT_APPEND), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("text.h5"), 0), 0);
    fp4s_outgroup_flags(g, FP4S_OUT_FORCE);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("ub.h5"), 0), 0);
    fp4s_outgroup_abort(&g);
}
END_TEST

/* ---- commits ------------------------------------------------------------------------------ */
START_TEST(group_commits_all_or_none)
{
    put(check_path("b.txt"), "old b");
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(check_path("a.txt"), "new a");
    write_out(check_path("b.txt"), "new b");
    /* finished but not in place until the group commits */
    ck_assert_ptr_null(get(check_path("a.txt")));
    ck_assert_str_eq(get(check_path("b.txt")), "old b");
    ck_assert_int_eq(fp4s_outgroup_commit(&g), 0);
    ck_assert_ptr_null(fp4s_outgroup_current());
    ck_assert_str_eq(get(check_path("a.txt")), "new a");
    ck_assert_str_eq(get(check_path("b.txt")), "new b");
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
    ck_assert_int_eq(check_entries(NULL, ".fp4s-commit"), 0);

    /* a member still open: the commit fails and nothing appears */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(check_path("c.txt"), "new c");
    fp4s_outfile *o;
    ck_assert_int_eq(fp4s_outfile_begin(check_path("d.txt"), &o), 0);
    ck_assert_int_ne(fp4s_outgroup_commit(&g), 0);
    fp4s_outfile_abort(&o);
    ck_assert_ptr_null(get(check_path("c.txt")));
    ck_assert_ptr_null(get(check_path("d.txt")));
    /* abort: nothing appears */
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    write_out(check_path("c.txt"), "new c");
    fp4s_outgroup_abort(&g);
    ck_assert_ptr_null(get(check_path("c.txt")));
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
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
        write_out(check_path("a.txt"), "new a");
        write_out(check_path("b.txt"), "new b");
        write_out(check_path("sub/c.txt"), "new c");
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
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    put(check_path("b.txt"), "old b");
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        int st = child_commit(1, sigs[i]);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "status %d", st);
        ck_assert_str_eq(get(check_path("a.txt")), "new a");
        ck_assert_str_eq(get(check_path("b.txt")), "new b");
        ck_assert_str_eq(get(check_path("sub/c.txt")), "new c");
        ck_assert_int_eq(check_entries(NULL, ".fp4s-commit"), 0);
        ck_assert_int_eq(check_entries(check_path("sub"), ".fp4s-commit"), 0);
        ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
        put(check_path("b.txt"), "old b");
        unlink(check_path("a.txt"));
        unlink(check_path("sub/c.txt"));
    }
}
END_TEST

START_TEST(kill_between_renames_leaves_a_journal)
{
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    put(check_path("b.txt"), "old b");
    int st = child_commit(1, SIGKILL);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* the first output is in place, the others are complete temporaries */
    ck_assert_str_eq(get(check_path("a.txt")), "new a");
    ck_assert_str_eq(get(check_path("b.txt")), "old b");
    ck_assert_ptr_null(get(check_path("sub/c.txt")));
    ck_assert_int_eq(check_entries(NULL, ".fp4s-commit"), 1);
    ck_assert_int_eq(check_entries(check_path("sub"), ".fp4s-commit"), 1);
    /* every output it names is refused, with the way out */
    const char *outs[] = {check_path("a.txt"), check_path("b.txt"), check_path("sub/c.txt")};
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
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("other.txt"), 0), 0);
    fp4s_outgroup_abort(&g);
    /* sh JOURNAL finishes the commit and removes both journals */
    ck_assert_int_eq(run_journal(journal_in(check_dir())), 0);
    ck_assert_str_eq(get(check_path("b.txt")), "new b");
    ck_assert_str_eq(get(check_path("sub/c.txt")), "new c");
    ck_assert_int_eq(check_entries(NULL, ".fp4s-commit"), 0);
    ck_assert_int_eq(check_entries(check_path("sub"), ".fp4s-commit"), 0);
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
    ck_assert_int_eq(check_entries(check_path("sub"), ".tmp."), 0);
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("b.txt"), 0), 0);
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
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, on_term);
        pthread_t th;
        if (pthread_create(&th, NULL, idle_thread, NULL) != 0) _exit(89);
        fp4s_outgroup *g;
        if (fp4s_outgroup_open(0, &g)) _exit(90);
        write_out(check_path("a.txt"), "new a");
        write_out(check_path("b.txt"), "new b");
        write_out(check_path("sub/c.txt"), "new c");
        to_process = 1;
        die_after = 1;
        die_sig = SIGTERM;
        int rc = fp4s_outgroup_commit(&g);
        _exit(rc ? 91 : fp4s_outgroup_deferred_signal() == SIGTERM ? 0 : 92);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    ck_assert_str_eq(get(check_path("a.txt")), "new a");
    ck_assert_str_eq(get(check_path("b.txt")), "new b");
    ck_assert_str_eq(get(check_path("sub/c.txt")), "new c");
    ck_assert_int_eq(check_entries(NULL, ".fp4s-commit"), 0);
    ck_assert_int_eq(check_entries(NULL, ".tmp."), 0);
}
END_TEST

/* Paths with a quote and a space survive the journal's shell quoting. */
START_TEST(journal_quotes_paths)
{
    ck_assert_int_eq(mkdir(check_path("it's here"), 0755), 0);
    ck_assert_int_eq(mkdir(check_path("sub"), 0755), 0);
    pid_t pid = fork();
    if (pid == 0) {
        fp4s_outgroup *g;
        if (fp4s_outgroup_open(0, &g)) _exit(90);
        write_out(check_path("it's here/x 1.txt"), "one");
        write_out(check_path("it's here/y'2.txt"), "two");
        die_after = 1;
        fp4s_outgroup_commit(&g);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert(WIFSIGNALED(st));
    fp4s_outgroup *g;
    ck_assert_int_eq(fp4s_outgroup_open(0, &g), 0);
    ck_assert_int_eq(fp4s_outgroup_output(g, check_path("it's here/y'2.txt"), 0), FP4S_EWRITE);
    fp4s_outgroup_abort(&g);
    ck_assert_int_eq(run_journal(journal_in(check_path("it's here"))), 0);
    ck_assert_str_eq(get(check_path("it's here/x 1.txt")), "one");
    ck_assert_str_eq(get(check_path("it's here/y'2.txt")), "two");
    ck_assert_int_eq(check_entries(check_path("it's here"), ".fp4s-commit"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outfile");
    const check_case cases[] = {
        CHECK_CASE(input_by_any_name_is_refused),
        CHECK_CASE(outputs_named_twice_are_refused),
        CHECK_CASE(existing_hdf5_needs_force),
        CHECK_CASE(group_commits_all_or_none),
        CHECK_CASE(signal_during_commit_is_delivered_after_it),
        CHECK_CASE(kill_between_renames_leaves_a_journal),
        CHECK_CASE(journal_quotes_paths),
        CHECK_CASE(signal_on_another_thread_waits_for_the_commit),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), setup, teardown, 0);
    return check_run(s, CK_NORMAL);
}

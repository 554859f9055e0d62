/* What the Check tests share: a table of test functions each run as its own
 * test case, the runner that gives main its exit status, and a fresh
 * directory per test for the tests that write files. */
#ifndef FP4S_TESTS_CHECK_MAIN_H
#define FP4S_TESTS_CHECK_MAIN_H

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A row of a case table: a test function and its name. */
typedef struct check_case {
    const char *name;
    const TTest *fn;
} check_case;
#define CHECK_CASE(fn) {#fn, fn}
#define CHECK_NCASES(cases) (sizeof(cases) / sizeof((cases)[0]))

/* One TCase per row of cases[n], named after its test, added to s: with the
 * checked fixture setup/teardown around each test (NULL: none) and a
 * timeout in seconds (0: Check's default). */
static inline void check_add_cases(Suite *s, const check_case *cases, size_t n, SFun setup,
                                   SFun teardown, double timeout)
{
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        if (setup || teardown) tcase_add_checked_fixture(tc, setup, teardown);
        if (timeout > 0) tcase_set_timeout(tc, timeout);
        tcase_add_test(tc, cases[i].fn);
        suite_add_tcase(s, tc);
    }
}

/* Run s (output mode: CK_NORMAL, or CK_ENV for CK_VERBOSITY; fork:
 * CK_FORK_GETENV, Check's default, or CK_NOFORK) and free it: main's exit
 * status, 0 when every test passed, else 1. */
static inline int check_run_fork(Suite *s, enum print_output mode, enum fork_status fork)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, fork);
    srunner_run_all(sr, mode);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

static inline int check_run(Suite *s, enum print_output mode)
{
    return check_run_fork(s, mode, CK_FORK_GETENV);
}

/* The test's directory: check_dir_make creates $TMPDIR/<prefix>XXXXXX (TMPDIR
 * unset: /tmp), check_dir_remove removes it and all it holds (a failure
 * fails the test), check_path joins a name to it (eight results stay valid
 * at once), check_entries counts the entries of directory dir (NULL: the
 * test's) whose name contains needle (NULL: all but . and ..). For a
 * checked fixture. */
static inline char *check_dir(void)
{
    static char dir[256];
    return dir;
}

static inline void check_dir_make(const char *prefix)
{
    const char *t = getenv("TMPDIR");
    snprintf(check_dir(), 256, "%s/%sXXXXXX", t && *t ? t : "/tmp", prefix);
    ck_assert_ptr_nonnull(mkdtemp(check_dir()));
}

static inline void check_dir_remove(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", check_dir());
    ck_assert_msg(system(cmd) == 0, "cannot remove %s", check_dir());
}

static inline const char *check_path(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", check_dir(), name);
    return buf[k];
}

static inline int check_entries(const char *dir, const char *needle)
{
    if (!dir) dir = check_dir();
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n += !needle || strstr(e->d_name, needle);
    closedir(d);
    return n;
}

/* Drop path's pages [off, off + len) (len 0: to the end) from the page cache,
 * written back first: a cold cache without root. Whether the kernel did (it
 * does not on tmpfs) is for the caller to ask. */
static inline void check_evict(const char *path, off_t off, off_t len)
{
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_int_eq(fsync(fd), 0);
    ck_assert_int_eq(posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

#endif

/* Crash safety of the capture writer: a child process writes steps and
 * reports each step whose fp4s_capture_flush() returned; the parent SIGKILLs
 * it at a random moment (mid-step, mid-put or mid-flush), reopens the file and
 * checks that every reported step is listed and holds exactly the bytes that
 * were written. FP4S_CRASH_ROUNDS sets the number of kills (default 12; the
 * slow suite runs 200). The soak grows one capture to FP4S_SOAK_STEPS steps
 * (default 40; the slow suite 1000) through writers killed at random moments,
 * each appending where the last one's committed steps end. */
#include <fp4scope/capture.h>

#include "../check_main.h"
#include <hdf5.h>
#include "../capture_test.h"
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSITES 6
#define ROWS 48
#define COLS 128
#define BLOCKS 3 /* puts per (step, site, side) */

static float value(int64_t step, int site, int side, size_t r, size_t c)
{
    return (float)(step * 1000 + site * 10 + side) + (float)r * 0.25f + (float)c * 1e-3f;
}

static void site_name(int j, char *buf, size_t n)
{
    snprintf(buf, n, "layers.%d.mlp.experts.%d.up_proj", j / 3, j % 3);
}

/* Put all of step s (every site, both sides, BLOCKS puts each); 0 or the
 * first error. */
static int put_step(fp4s_capture *c, int64_t s)
{
    static float buf[ROWS * COLS];
    for (int j = 0; j < NSITES; j++) {
        char site[64];
        site_name(j, site, sizeof site);
        for (int side = 0; side < 2; side++)
            for (int b = 0; b < BLOCKS; b++) {
                for (size_t r = 0; r < ROWS; r++)
                    for (size_t k = 0; k < COLS; k++) buf[r * COLS + k] = value(s, j, side, b * ROWS + r, k);
                int rc = fp4s_capture_put(c, s, site, side ? "rollout" : "trainer", FP4S_DT_F32, buf, ROWS,
                                          COLS, COLS, NULL);
                if (rc) return rc;
            }
    }
    return 0;
}

static _Noreturn void child_writer(const char *path, int wfd, unsigned seed)
{
    fp4s_capture_opts o;
    fp4s_capture_opts_defaults(&o);
    o.overwrite = true;
    o.gzip = (seed & 1) ? 1 : 0; /* half the rounds compressed */
    fp4s_capture *c;
    if (fp4s_capture_create(path, &o, &c)) _exit(3);
    for (int64_t s = 0;; s++) {
        if (put_step(c, s)) _exit(4);
        float lp[16];
        int64_t seq[16];
        for (int i = 0; i < 16; i++) {
            lp[i] = -(float)(s + i);
            seq[i] = i / 4;
        }
        if (fp4s_capture_put_logprobs(c, s, lp, lp, seq, NULL, NULL, 16)) _exit(5);
        if (fp4s_capture_flush(c)) _exit(6);
        if (write(wfd, &s, sizeof s) != (ssize_t)sizeof s) _exit(7);
    }
}

/* Read a dataset with plain HDF5 and compare with the values written. */
static int check_dataset(hid_t f, int64_t s, int j, int side)
{
    char site[64], path[256];
    site_name(j, site, sizeof site);
    snprintf(path, sizeof path, "/steps/%" PRId64 "/%s/%s", s, site, side ? "rollout" : "trainer");
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2];
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    int bad = 0;
    if (dims[0] != ROWS * BLOCKS || dims[1] != COLS) bad = 1;
    float *v = malloc(sizeof(float) * ROWS * BLOCKS * COLS);
    if (!bad && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) bad = 1;
    for (size_t r = 0; !bad && r < ROWS * BLOCKS; r++)
        for (size_t k = 0; k < COLS; k++)
            if (v[r * COLS + k] != value(s, j, side, r, k)) {
                bad = 1;
                break;
            }
    free(v);
    H5Dclose(d);
    return bad ? -1 : 0;
}

/* fork() with a pipe from the child to the parent: 0 in the child, *fd the
 * write end; the child's pid in the parent, *fd the read end. */
static pid_t fork_with_pipe(int *fd)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    close(pid == 0 ? p[0] : p[1]);
    *fd = pid == 0 ? p[1] : p[0];
    return pid;
}

/* SIGKILL a writer child and reap it: its wait status. */
static int kill_writer(pid_t pid)
{
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

/* The last step number a dead writer reported on pipe fd (last if none
 * more), the pipe read to its end and closed. */
static int64_t last_reported(int fd, int64_t last)
{
    int64_t s;
    while (read(fd, &s, sizeof s) == (ssize_t)sizeof s) last = s;
    close(fd);
    return last;
}

/* Each test's capture lives in a directory of its own, removed after it;
 * HDF5's error printing is off (the kills leave files it complains about). */
static void setup(void)
{
    check_dir_make("fp4s_crash_");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void teardown(void) { check_dir_remove(); }

static void one_round(const char *path, unsigned seed)
{
    int fd;
    pid_t pid = fork_with_pipe(&fd);
    if (pid == 0) child_writer(path, fd, seed); /* does not return */
    srand(seed);
    int want = 1 + rand() % 4; /* steps to see flushed before the kill window opens */
    int64_t s, last = -1;
    while (last + 1 < want) {
        ssize_t r = read(fd, &s, sizeof s);
        ck_assert_msg(r == (ssize_t)sizeof s, "writer died early (round seed %u)", seed);
        last = s;
    }
    /* Kill somewhere in the next step or two: put, extend, flush or report. */
    struct timespec ts = {0, (long)(rand() % 40000) * 1000L};
    nanosleep(&ts, NULL);
    int st = kill_writer(pid);
    ck_assert_msg(WIFSIGNALED(st), "writer exited by itself with %d", WEXITSTATUS(st));
    last = last_reported(fd, last);

    /* The library reader must open it and list every reported step. */
    fp4s_capture_info info;
    ck_assert_msg(fp4s_capture_info_read(path, &info) == 0, "info after kill: %s", fp4s_last_error());
    ck_assert(info.interrupted);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_msg(fp4s_capture_list(path, &e, &n) == 0, "list after kill (seed %u): %s", seed,
                  fp4s_last_error());
    /* Every reported step is listed; a later step (its flush was under way
     * at the kill) is either absent or complete. */
    int64_t maxlisted = -1;
    for (size_t i = 0; i < n; i++)
        if (e[i].step > maxlisted) maxlisted = e[i].step;
    ck_assert_msg(maxlisted <= last + 1, "step %" PRId64 " listed, last flush reported %" PRId64,
                  maxlisted, last);
    for (int64_t k = 0; k <= maxlisted; k++) {
        size_t found = 0, lp = 0;
        for (size_t i = 0; i < n; i++)
            if (e[i].step == k) {
                if (strcmp(e[i].site, "logprobs") != 0)
                    found++;
                else
                    lp++;
            }
        ck_assert_msg(found == 2 * NSITES && lp == 3, "step %" PRId64 " (last flushed %" PRId64 "): "
                      "%zu datasets and %zu log-prob fields listed (seed %u)", k, last, found, lp, seed);
    }
    free(e);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    for (int64_t k = 0; k <= maxlisted; k++)
        for (int j = 0; j < NSITES; j++)
            for (int side = 0; side < 2; side++)
                ck_assert_msg(check_dataset(f, k, j, side) == 0, "step %" PRId64 " site %d side %d "
                              "damaged after kill (seed %u)", k, j, side, seed);
    H5Fclose(f);

    /* And the writer can append to it afterwards. */
    fp4s_capture *c;
    ck_assert_msg(fp4s_capture_open_append(path, NULL, &c) == 0, "append after kill: %s",
                  fp4s_last_error());
    float row[COLS] = {0};
    ck_assert_int_eq(fp4s_capture_put(c, last + 100, "after.kill", "trainer", FP4S_DT_F32, row, 1,
                                      COLS, COLS, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_info_read(path, &info), 0);
    ck_assert(!info.interrupted);
}

START_TEST(kill_mid_step_keeps_flushed_steps)
{
    const char *path = check_path("cap.h5");
    const char *env = getenv("FP4S_CRASH_ROUNDS");
    int rounds = env ? atoi(env) : 12;
    unsigned base = (unsigned)time(NULL);
    for (int r = 0; r < rounds; r++) one_round(path, base + (unsigned)r);
}
END_TEST

START_TEST(unflushed_step_is_absent_after_kill)
{
    /* Deterministic: flush step 0, write all of step 1 without flushing, kill. */
    const char *path = check_path("cap.h5");
    int fd;
    pid_t pid = fork_with_pipe(&fd);
    if (pid == 0) {
        fp4s_capture *c;
        if (fp4s_capture_create(path, NULL, &c)) _exit(3);
        for (int64_t s = 0; s < 2; s++) {
            if (put_step(c, s)) _exit(4);
            if (s == 0 && fp4s_capture_flush(c)) _exit(6);
        }
        char ok = 1;
        if (write(fd, &ok, 1) != 1) _exit(7);
        pause();
        _exit(0);
    }
    char ok;
    ck_assert_int_eq(read(fd, &ok, 1), 1);
    kill_writer(pid);
    close(fd);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_msg(fp4s_capture_list(path, &e, &n) == 0, "%s", fp4s_last_error());
    ck_assert_uint_eq(n, 2 * NSITES);
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(e[i].step, 0);
    free(e);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    for (int j = 0; j < NSITES; j++)
        for (int side = 0; side < 2; side++) ck_assert_int_eq(check_dataset(f, 0, j, side), 0);
    H5Fclose(f);
}
END_TEST

/* What fp4-capture import -a does, killed before its closing flush: rows
 * appended to datasets that were there (enough to push chunks out of HDF5's
 * cache onto the disk), a site added to an old step, a new step and a new
 * constant weight, in a file opened for append; then SIGKILL. The capture
 * must be as it was (capture(5), Undoing a write; fp4-capture(1), FILES):
 * the same datasets with the same rows and bytes, reported as interrupted,
 * and appendable. Compressed and not. */
static void append_then_kill(int gzip)
{
    const char *path = check_path(gzip ? "cap-gzip.h5" : "cap.h5");
    fp4s_capture_opts o;
    fp4s_capture_opts_defaults(&o);
    o.gzip = gzip;
    fp4s_capture *c;
    ck_assert_int_eq(fp4s_capture_create(path, &o, &c), 0);
    ck_assert_int_eq(put_step(c, 0), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    static float buf[ROWS * COLS];
    fp4s_capture_entry *e0;
    size_t n0;
    ck_assert_int_eq(fp4s_capture_list(path, &e0, &n0), 0);

    int fd;
    pid_t pid = fork_with_pipe(&fd);
    if (pid == 0) {
        if (fp4s_capture_open_append(path, &o, &c)) _exit(3);
        for (size_t r = 0; r < ROWS * COLS; r++) buf[r] = -1.0f - (float)r;
        for (int b = 0; b < 200; b++) /* 200 blocks of 24 KiB onto each side of site 0 */
            for (int side = 0; side < 2; side++) {
                char site[64];
                site_name(0, site, sizeof site);
                if (fp4s_capture_put(c, 0, site, side ? "rollout" : "trainer", FP4S_DT_F32, buf, ROWS, COLS,
                                     COLS, NULL))
                    _exit(4);
            }
        if (fp4s_capture_put(c, 0, "new.site", "trainer", FP4S_DT_F32, buf, ROWS, COLS, COLS, NULL) ||
            fp4s_capture_put(c, 1, "new.step", "trainer", FP4S_DT_F32, buf, ROWS, COLS, COLS, NULL) ||
            fp4s_capture_put(c, FP4S_CAPTURE_CONST_STEP, "new.weight", "weight", FP4S_DT_F32, buf, ROWS, COLS,
                             COLS, NULL))
            _exit(5);
        char ok = 1;
        if (write(fd, &ok, 1) != 1) _exit(7);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_msg(read(fd, &ok, 1) == 1, "the appending writer failed");
    ck_assert(WIFSIGNALED(kill_writer(pid)));
    close(fd);

    fp4s_capture_info info;
    ck_assert_int_eq(fp4s_capture_info_read(path, &info), 0);
    ck_assert(info.interrupted);
    fp4s_capture_entry *e1;
    size_t n1;
    ck_assert_msg(fp4s_capture_list(path, &e1, &n1) == 0, "%s", fp4s_last_error());
    capture_same_listing(e0, n0, e1, n1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    for (int j = 0; j < NSITES; j++)
        for (int side = 0; side < 2; side++)
            ck_assert_msg(check_dataset(f, 0, j, side) == 0, "site %d side %d changed (gzip %d)", j, side, gzip);
    ck_assert_int_eq(H5Lexists(f, "/weights", H5P_DEFAULT) > 0 &&
                     H5Lexists(f, "/weights/new.weight", H5P_DEFAULT) > 0, 0);
    H5Fclose(f);
    ck_assert_msg(fp4s_capture_verify(path) == 0, "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_capture_open_append(path, NULL, &c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 2, "after.kill", "trainer", FP4S_DT_F32, buf, 1, COLS, COLS, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_list(path, &e1, &n1), 0);
    ck_assert_uint_eq(n1, n0 + 1);
    free(e1);
}

START_TEST(unflushed_append_leaves_the_capture_as_it_was)
{
    append_then_kill(0);
    append_then_kill(4);
}
END_TEST

/* ---- the soak: one capture grown to FP4S_SOAK_STEPS steps (default 40; the
 * slow suite 1000) by writers killed at random moments, each appending from
 * the first step that is not in the file ---------------------------------------- */
#define SOAK_SITES 2
#define SOAK_ROWS 16
#define SOAK_COLS 64

static float soak_value(int64_t step, int site, int side, size_t r, size_t c)
{
    return (float)(step * 100 + site * 10 + side) + (float)r * 0.5f + (float)c * 1e-2f;
}

static _Noreturn void soak_writer(const char *path, int64_t from, int wfd)
{
    fp4s_capture *c;
    int rc = from == 0 ? fp4s_capture_create(path, NULL, &c) : fp4s_capture_open_append(path, NULL, &c);
    if (rc) _exit(3);
    static float buf[SOAK_ROWS * SOAK_COLS];
    for (int64_t s = from;; s++) {
        for (int j = 0; j < SOAK_SITES; j++) {
            char site[32];
            snprintf(site, sizeof site, "layers.%d.up_proj", j);
            for (int side = 0; side < 2; side++) {
                for (size_t r = 0; r < SOAK_ROWS; r++)
                    for (size_t k = 0; k < SOAK_COLS; k++) buf[r * SOAK_COLS + k] = soak_value(s, j, side, r, k);
                if (fp4s_capture_put(c, s, site, side ? "rollout" : "trainer", FP4S_DT_F32, buf, SOAK_ROWS,
                                     SOAK_COLS, SOAK_COLS, NULL))
                    _exit(4);
            }
        }
        if (fp4s_capture_flush(c)) _exit(6);
        if (write(wfd, &s, sizeof s) != (ssize_t)sizeof s) _exit(7);
    }
}

static int soak_check(hid_t f, int64_t s)
{
    static float v[SOAK_ROWS * SOAK_COLS];
    for (int j = 0; j < SOAK_SITES; j++)
        for (int side = 0; side < 2; side++) {
            char path[96];
            snprintf(path, sizeof path, "/steps/%" PRId64 "/layers.%d.up_proj/%s", s, j, side ? "rollout" : "trainer");
            hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
            if (d < 0) return -1;
            herr_t e = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
            H5Dclose(d);
            if (e < 0) return -1;
            for (size_t r = 0; r < SOAK_ROWS; r++)
                for (size_t k = 0; k < SOAK_COLS; k++)
                    if (v[r * SOAK_COLS + k] != soak_value(s, j, side, r, k)) return -1;
        }
    return 0;
}

START_TEST(soak_grows_a_capture_through_kills)
{
    const char *path = check_path("soak.h5");
    const char *env = getenv("FP4S_SOAK_STEPS");
    int64_t target = env ? atoll(env) : 40;
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    int64_t committed = -1; /* every step up to this one is in the file and checked */
    int64_t reported = -1;  /* the last step any writer reported flushed */
    int kills = 0;
    while (committed + 1 < target) {
        int fd;
        pid_t pid = fork_with_pipe(&fd);
        if (pid == 0) soak_writer(path, committed + 1, fd); /* does not return */
        /* let it flush a few steps, then kill it at a random moment */
        int want = 1 + rand() % 8;
        int64_t s;
        for (int k = 0; k < want && committed + 1 + k < target; k++) {
            ssize_t r = read(fd, &s, sizeof s);
            ck_assert_msg(r == (ssize_t)sizeof s, "soak writer died early (seed %u, from step %" PRId64 ")",
                          seed, committed + 1);
            reported = s;
        }
        struct timespec ts = {0, (long)(rand() % 3000) * 1000L};
        nanosleep(&ts, NULL);
        kills += WIFSIGNALED(kill_writer(pid));
        reported = last_reported(fd, reported);
        /* every reported step is listed and exact; a step whose flush was
         * under way at the kill is complete or absent */
        fp4s_capture_entry *e;
        size_t n;
        ck_assert_msg(fp4s_capture_list(path, &e, &n) == 0, "list after kill %d (seed %u): %s", kills, seed,
                      fp4s_last_error());
        int64_t maxl = -1;
        for (size_t i = 0; i < n; i++)
            if (e[i].step > maxl) maxl = e[i].step;
        ck_assert_msg(maxl >= reported && maxl <= reported + 1, "steps up to %" PRId64 " listed, %" PRId64
                      " reported (seed %u)", maxl, reported, seed);
        ck_assert_msg(n == (size_t)(maxl + 1) * SOAK_SITES * 2, "%zu datasets for steps 0..%" PRId64 " (seed %u)",
                      n, maxl, seed);
        free(e);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        for (int64_t k = committed + 1; k <= maxl; k++)
            ck_assert_msg(soak_check(f, k) == 0, "step %" PRId64 " damaged (seed %u)", k, seed);
        H5Fclose(f);
        committed = maxl;
    }
    /* all of it, once more, through the library's reader and plain HDF5 */
    ck_assert_int_eq(fp4s_capture_verify(path), 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    for (int64_t k = 0; k <= committed; k++)
        ck_assert_msg(soak_check(f, k) == 0, "step %" PRId64 " damaged at the end (seed %u)", k, seed);
    H5Fclose(f);
    printf("soak: %" PRId64 " steps through %d kills (seed %u), every flushed step intact\n", committed + 1,
           kills, seed);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("capture_crash");
    const check_case kill[] = {CHECK_CASE(kill_mid_step_keeps_flushed_steps)};
    const check_case soak[] = {CHECK_CASE(soak_grows_a_capture_through_kills)};
    const check_case unflushed[] = {
        CHECK_CASE(unflushed_step_is_absent_after_kill),
        CHECK_CASE(unflushed_append_leaves_the_capture_as_it_was),
    };
    check_add_cases(s, kill, CHECK_NCASES(kill), setup, teardown, 600);
    check_add_cases(s, soak, CHECK_NCASES(soak), setup, teardown, 3000);
    check_add_cases(s, unflushed, CHECK_NCASES(unflushed), setup, teardown, 0);
    return check_run_fork(s, CK_NORMAL, CK_NOFORK);
}

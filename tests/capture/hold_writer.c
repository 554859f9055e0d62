/* A live capture writer for the shell tests: creates CAP (or appends to it
 * with -a), puts and flushes step 0, creates READY, waits until STOP exists,
 * puts step 1 and closes. Usage: hold_writer [-a] CAP READY STOP */
#include <fp4scope/capture.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what)
{
    fprintf(stderr, "hold_writer: %s: %s\n", what, fp4s_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int a = argc > 1 && strcmp(argv[1], "-a") == 0;
    if (argc != 4 + a) {
        fprintf(stderr, "usage: hold_writer [-a] CAP READY STOP\n");
        return 2;
    }
    const char *cap = argv[1 + a], *ready = argv[2 + a], *stop = argv[3 + a];
    float x[2 * 32];
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    fp4s_capture *c;
    if ((a ? fp4s_capture_open_append(cap, NULL, &c) : fp4s_capture_create(cap, NULL, &c)) != 0)
        return die("open");
    if (fp4s_capture_put(c, 0, "s", "trainer", FP4S_DT_F32, x, 2, 32, 32, NULL) ||
        fp4s_capture_flush(c))
        return die("step 0");
    FILE *f = fopen(ready, "w");
    if (!f) return die("ready");
    fclose(f);
    struct timespec ts = {0, 20 * 1000 * 1000};
    for (int i = 0; access(stop, F_OK) != 0; i++) {
        if (i > 3000) return die("no stop file within 60 s");
        if (access(ready, F_OK) != 0) return die("the test went away");
        nanosleep(&ts, NULL);
    }
    if (fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 2, 32, 32, NULL) ||
        fp4s_capture_close(&c))
        return die("step 1");
    return 0;
}

/* Root string attributes of a capture, read one by one (the quantizers a
 * producer records: fp4scope-capture(5) "Root attributes"). */
#include "io/h5_internal.h"

#include <fp4scope/capture.h>

#include <stdio.h>

int fp4s_capture_root_str(const char *file, const char *name, char *buf, size_t n)
{
    if (!file || !name || !buf || n == 0) return fp4s_error_set(FP4S_EINVAL, "capture root attribute: NULL argument");
    buf[0] = '\0';
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    hid_t f = fp4s_h5_open_read(file, &rc);
    if (f >= 0) {
        int got = fp4s_h5_attr_get_str(f, name, buf, n);
        if (got < 0) rc = fp4s_error_set(FP4S_EFORMAT, "%s: root attribute %s is not a string", file, name);
        else rc = got;
        H5Fclose(f);
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

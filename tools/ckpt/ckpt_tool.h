/* fp4-ckpt's parts (tools/fp4-ckpt.c: main, ls, dequant; check.c; audit.c). */
#ifndef FP4S_TOOLS_CKPT_TOOL_H
#define FP4S_TOOLS_CKPT_TOOL_H

#include "cli.h"

#include <fp4scope/ckpt.h>

/* Open a checkpoint or exit 3 with the library's message. */
fp4s_ckpt *ckpt_open_or_die(const char *path);

/* The verbs: argc/argv start at the verb (argv[0] the program). */
int ckpt_cmd_check(int argc, char **argv);
int ckpt_cmd_audit(int argc, char **argv);

/* The default profile of a layout for fp4-ckpt check (fp4-ckpt(1) says why). */
const char *ckpt_default_profile(fp4s_ckpt_layout l);

#endif

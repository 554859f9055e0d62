/* The public structs a caller allocates (options, results, items of arrays
 * passed in) and their sizes on the 64-bit ABIs (x86-64, AArch64): one row
 * each, X(name without the fp4s_ prefix, bytes, the member that holds the
 * room for later fields, the struct's last). abi.c defines each one's
 * fp4s_<name>_size() from this list and holds the sizes fixed (a build
 * whose struct changed size fails there), tests/headers/abi_sizes.c checks
 * a caller's view against the library's.
 *
 * A struct keeps its size and layout while fields are added: a new field
 * takes its room from the struct's reserved[] (fp4s_mm_metrics: the next
 * free slot of v[]). A number here changes only with an incompatible
 * layout: a new major version from 1.0 on (version.h: the major is the
 * soname); 0.x, as now, promises no stable ABI. */
#ifndef FP4S_ABI_STRUCTS_H
#define FP4S_ABI_STRUCTS_H

#define FP4S_ABI_STRUCTS(X) \
    X(spec, 148, reserved) \
    X(tscale, 32, reserved) \
    X(qstats, 544, reserved) \
    X(qout, 96, reserved) \
    X(capture_opts, 64, reserved) \
    X(capture_entry, 848, reserved) \
    X(capture_scalar, 112, reserved) \
    X(capture_info, 336, reserved) \
    X(capture_meta, 64, reserved) \
    X(id_match, 88, reserved) \
    X(flip_share, 88, reserved) \
    X(ckpt_check, 120, reserved) \
    X(synth_opts, 184, reserved) \
    X(qfile_opts, 64, reserved) \
    X(qfile_data, 144, reserved) \
    X(decomp_opts, 72, reserved) \
    X(decomp_result, 464, reserved) \
    X(decomp_hist, 1328, reserved) \
    X(decomp_item, 80, reserved) \
    X(channels_opts, 144, reserved) \
    X(channel_stat, 168, reserved) \
    X(mm_opts, 56, reserved) \
    X(mm_metrics, 560, v) \
    X(trace_opts, 104, reserved) \
    X(mm_run, 136, reserved) \
    X(mm_result, 48, reserved) \
    X(mm_onset_opts, 64, reserved) \
    X(mm_onset, 96, reserved) \
    X(mm_changepoint_opts, 48, reserved) \
    X(mm_changepoint, 88, reserved) \
    X(mm_trend, 96, reserved) \
    X(remedy, 280, reserved) \
    X(remedy_cost, 200, reserved) \
    X(remedy_time, 120, reserved) \
    X(remedy_eval_opts, 56, reserved) \
    X(remedy_site, 1096, reserved) \
    X(remedy_result, 1792, reserved) \
    X(remedy_row, 72, reserved) \
    X(plan_item, 56, reserved) \
    X(logits_opts, 96, reserved) \
    X(logits_result, 944, reserved) \
    X(compare_site, 200, reserved) \
    X(compare_opts, 36, reserved) \
    X(rl_opts, 704, reserved) \
    X(rl_stats, 272, reserved) \
    X(rl_sft, 64, reserved) \
    X(rl_seedstat, 152, reserved)

#endif

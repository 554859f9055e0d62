/* The C compiler's layout of the structs the Python package lays out itself
 * (tools/python/fp4scope/_lib.py): one line "STRUCT FIELD OFFSET SIZE" per
 * field and "STRUCT sizeof SIZE" per struct, read by test_binding.py. */
#include <fp4scope/fp4scope.h>

#include <stddef.h>
#include <stdio.h>

#define F(S, f) printf("%s %s %zu %zu\n", #S, #f, offsetof(S, f), sizeof(((S *)0)->f))
#define Z(S) printf("%s sizeof %zu\n", #S, sizeof(S))

int main(void)
{
    Z(fp4s_capture_opts);
    F(fp4s_capture_opts, gzip); F(fp4s_capture_opts, shuffle); F(fp4s_capture_opts, chunk_rows);
    F(fp4s_capture_opts, producer); F(fp4s_capture_opts, overwrite); F(fp4s_capture_opts, checksum);
    F(fp4s_capture_opts, reserved);
    Z(fp4s_capture_entry);
    F(fp4s_capture_entry, step); F(fp4s_capture_entry, site); F(fp4s_capture_entry, side);
    F(fp4s_capture_entry, path); F(fp4s_capture_entry, rows); F(fp4s_capture_entry, cols);
    F(fp4s_capture_entry, dtype); F(fp4s_capture_entry, reserved);
    Z(fp4s_spec);
    F(fp4s_spec, format); F(fp4s_spec, block); F(fp4s_spec, tie); F(fp4s_spec, keep_neg_zero);
    F(fp4s_spec, zero_in); F(fp4s_spec, packing); F(fp4s_spec, nonfinite); F(fp4s_spec, mx_rule);
    F(fp4s_spec, mx_zero_block_code); F(fp4s_spec, mx_scale_is_ggml); F(fp4s_spec, nv_recipe);
    F(fp4s_spec, global_scale); F(fp4s_spec, tile2d); F(fp4s_spec, fp8_gran); F(fp4s_spec, profile);
    F(fp4s_spec, tensor_amax); F(fp4s_spec, mx_elem); F(fp4s_spec, nv_4over6_err); F(fp4s_spec, nv_scale_bound);
    F(fp4s_spec, rht_signs); F(fp4s_spec, rht); F(fp4s_spec, sr); F(fp4s_spec, sr_seed);
    F(fp4s_spec, nv_scope);
    Z(fp4s_tscale);
    F(fp4s_tscale, amax); F(fp4s_tscale, s_enc); F(fp4s_tscale, s_dec); F(fp4s_tscale, stored);
    F(fp4s_tscale, fp8_scale); F(fp4s_tscale, reserved);
    Z(fp4s_qout);
    F(fp4s_qout, codes); F(fp4s_qout, ld_codes); F(fp4s_qout, scales); F(fp4s_qout, ld_scales);
    F(fp4s_qout, scale_f32); F(fp4s_qout, ld_scale_f32); F(fp4s_qout, dequant); F(fp4s_qout, ld_dequant);

    
    
    

    Z(fp4s_decomp_opts);
    F(fp4s_decomp_opts, dz_tie); F(fp4s_decomp_opts, by); F(fp4s_decomp_opts, chunk_elems);
    F(fp4s_decomp_opts, max_groups); F(fp4s_decomp_opts, device); F(fp4s_decomp_opts, keep_bytes);
    F(fp4s_decomp_opts, reserved);
    Z(fp4s_decomp_field);
    F(fp4s_decomp_field, name); F(fp4s_decomp_field, is_count); F(fp4s_decomp_field, offset);
    F(fp4s_decomp_field, desc);
    Z(fp4s_decomp_item);
    F(fp4s_decomp_item, source); F(fp4s_decomp_item, step); F(fp4s_decomp_item, site); F(fp4s_decomp_item, side);
    F(fp4s_decomp_item, synthetic); F(fp4s_decomp_item, acc); F(fp4s_decomp_item, reserved);
    Z(fp4s_decomp_hist);
    F(fp4s_decomp_hist, lo); F(fp4s_decomp_hist, hi); F(fp4s_decomp_hist, counts); F(fp4s_decomp_hist, reserved);
    Z(fp4s_channels_opts);
    F(fp4s_channels_opts, score); F(fp4s_channels_opts, top); F(fp4s_channels_opts, ratio);
    F(fp4s_channels_opts, weight_tile2d); F(fp4s_channels_opts, n_out); F(fp4s_channels_opts, decomp);
    F(fp4s_channels_opts, reserved);
    Z(fp4s_channel_stat);
    F(fp4s_channel_stat, channel); F(fp4s_channel_stat, rank); F(fp4s_channel_stat, score);
    F(fp4s_channel_stat, selected); F(fp4s_channel_stat, n); F(fp4s_channel_stat, nonfinite);
    F(fp4s_channel_stat, energy_total); F(fp4s_channel_stat, energy_scale); F(fp4s_channel_stat, energy_deadzone);
    F(fp4s_channel_stat, energy_grid); F(fp4s_channel_stat, relative_error); F(fp4s_channel_stat, residual_norm);
    F(fp4s_channel_stat, amax); F(fp4s_channel_stat, deadzone_fraction); F(fp4s_channel_stat, mean_abs_dx);
    F(fp4s_channel_stat, mean_abs_dw); F(fp4s_channel_stat, hcp); F(fp4s_channel_stat, reserved);
    Z(fp4s_coverage_point);
    F(fp4s_coverage_point, ratio); F(fp4s_coverage_point, channels); F(fp4s_coverage_point, share);
    Z(fp4s_channels_cost);
    F(fp4s_channels_cost, tokens); F(fp4s_channels_cost, n_out); F(fp4s_channels_cost, k);
    F(fp4s_channels_cost, selected); F(fp4s_channels_cost, padded); F(fp4s_channels_cost, n_out_assumed);
    F(fp4s_channels_cost, flops_base); F(fp4s_channels_cost, flops_extra); F(fp4s_channels_cost, flops_ratio);
    F(fp4s_channels_cost, bytes_base); F(fp4s_channels_cost, bytes_extra); F(fp4s_channels_cost, bytes_ratio);
    Z(fp4s_channels_report);
    F(fp4s_channels_report, k); F(fp4s_channels_report, tokens); F(fp4s_channels_report, score);
    F(fp4s_channels_report, top); F(fp4s_channels_report, ratio); F(fp4s_channels_report, count);
    F(fp4s_channels_report, ch); F(fp4s_channels_report, coverage); F(fp4s_channels_report, ncoverage);
    F(fp4s_channels_report, energy_total); F(fp4s_channels_report, summary); F(fp4s_channels_report, have_weight);
    F(fp4s_channels_report, weight_rows); F(fp4s_channels_report, weight_tile2d);
    F(fp4s_channels_report, weight_summary); F(fp4s_channels_report, cost);
    Z(fp4s_compare_opts);
    F(fp4s_compare_opts, dz_tie); F(fp4s_compare_opts, reserved);
    Z(fp4s_compare_site);
    F(fp4s_compare_site, m); F(fp4s_compare_site, n); F(fp4s_compare_site, k); F(fp4s_compare_site, input_rel_diff);
    F(fp4s_compare_site, code_flips); F(fp4s_compare_site, scale_flips); F(fp4s_compare_site, tscale_rel_diff);
    F(fp4s_compare_site, amplification); F(fp4s_compare_site, mismatch2); F(fp4s_compare_site, ref2);
    F(fp4s_compare_site, mismatch_rel); F(fp4s_compare_site, contrib); F(fp4s_compare_site, ch_input_rel_diff);
    F(fp4s_compare_site, ch_code_flips); F(fp4s_compare_site, ch_scale_flips);
    F(fp4s_compare_site, ch_amplification); F(fp4s_compare_site, ch_contrib); F(fp4s_compare_site, ch_energy);
    F(fp4s_compare_site, rollout_only); F(fp4s_compare_site, trainer_only); F(fp4s_compare_site, reserved);
    Z(fp4s_remedy_eval_opts);
    F(fp4s_remedy_eval_opts, dz_tie); F(fp4s_remedy_eval_opts, decompose); F(fp4s_remedy_eval_opts, accel);
    F(fp4s_remedy_eval_opts, device); F(fp4s_remedy_eval_opts, reserved);
    Z(fp4s_remedy_field);
    F(fp4s_remedy_field, name); F(fp4s_remedy_field, desc); F(fp4s_remedy_field, get);
    Z(fp4s_mm_opts);
    F(fp4s_mm_opts, is_cap); F(fp4s_mm_opts, clamp); F(fp4s_mm_opts, allow_positive);
    F(fp4s_mm_opts, by_position); F(fp4s_mm_opts, skip_empty); F(fp4s_mm_opts, reserved);
    Z(fp4s_mm_metrics);
    F(fp4s_mm_metrics, step); F(fp4s_mm_metrics, tokens); F(fp4s_mm_metrics, sequences); F(fp4s_mm_metrics, masked);
    F(fp4s_mm_metrics, nonfinite); F(fp4s_mm_metrics, nmetrics); F(fp4s_mm_metrics, reserved);
    F(fp4s_mm_metrics, v);
    Z(fp4s_profile_info);
    F(fp4s_profile_info, name);
    return 0;
}

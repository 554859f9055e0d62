/* fp4scope: the stable public API in one include.
 *
 *   version.h   FP4S_VERSION_*
 *   common.h    errors, exit statuses, features, threads
 *   codec.h     E2M1, E4M3, E8M0, BF16, FP16 scalar codecs and tie rules
 *   spec.h      quantizer specs and the engine profiles
 *   quant.h     quantize / dequantize / pack, kernel selection
 *   tensor.h    tensor sources (.npy, safetensors, HDF5), atomic outputs, .npy writer
 *   qfile.h     the packed quantized HDF5 file
 *   capture.h   the capture schema fp4scope-capture/1: reader and writer
 *   ckpt.h      quantized checkpoints (ModelOpt, compressed-tensors, gpt-oss) and their configs
 *   decompose.h the three-way error decomposition and its mergeable accumulators
 *   channels.h  per-channel statistics, ranking and compensation sets
 *   mismatch.h  rollout/trainer log-prob mismatch metrics, onset and trend
 *   batch.h     batch coupling: rows re-quantized under two batch compositions
 *   remedy.h    remedies applied to a linear site (rac, mbs, of, keep, aqn) and their cost
 *   cuda.h      CUDA kernels (available when built with -Dcuda=enabled and a GPU is present)
 *
 * Experimental headers, included one by one (their structs may change
 * between releases and have no size queries; the tools use them):
 *   units.h     the unit walker of the site analyses
 *   record.h    result records: field tables, serialization
 *   outfile.h   output groups: a run's outputs all or none (the tools' output helpers)
 *   rl.h        the RL testbed: a small MoE policy trained with GRPO, FP4 rollouts (needs BLAS)
 *
 * See libfp4scope(3) for the flow they form and what "stable" promises. */
#ifndef FP4SCOPE_H
#define FP4SCOPE_H

#include <fp4scope/version.h>
#include <fp4scope/common.h>
#include <fp4scope/codec.h>
#include <fp4scope/spec.h>
#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>
#include <fp4scope/qfile.h>
#include <fp4scope/capture.h>
#include <fp4scope/ckpt.h>
#include <fp4scope/decompose.h>
#include <fp4scope/channels.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/batch.h>
#include <fp4scope/remedy.h>
#include <fp4scope/cuda.h>

#endif

/* The mismatch metrics as tables (internal): the sums the accumulator keeps
 * and how each metric is finished from them. acc.c and the token kernel
 * (mm_token.c) iterate these rows; nothing else lists a metric.
 *
 * A new metric is one row of MM_METRICS, appended at the end (its position is
 * its id, and ids are part of the ABI: fp4s_mm_metrics.v[id]). When it needs
 * a quantity the accumulator does not sum yet, that is one more row of
 * MM_TOKEN_SUMS (over tokens) or MM_SEQ_TERMS (over sequences) here.
 *
 * The rows are X-macros so that the token loop stays one vectorizable loop:
 * each expansion site defines what a row becomes (an enum, a name table, a
 * lane update, a merge, a finishing assignment). */
#ifndef FP4S_MM_METRICS_H
#define FP4S_MM_METRICS_H

/* ---- per-token sums ----------------------------------------------------------------
 * X(id, reduction, term): the reduction (SUM, MAX or MIN) of the term over
 * the counted tokens of a step. A term is written in the token variables
 *   lt, lr  trainer and rollout log-prob       rho = lt - lr, ab = |rho|
 *   e       exp(rho)                           w = exp(clamp(rho, -B, B))
 *   wc      w clamped to [1/C, C]              pt = exp(lt), pr = exp(lr)
 *   d       |pt - pr|                          ie = 1 / e = exp(-rho)
 * and the options C (IS cap), Cl = 1/C, B (clamp); GT(a, b) and LT(a, b) are
 * 1 where a > b (a < b), else 0. */
#define MM_TOKEN_SUMS(X)                 \
    X(T_ABS, SUM, ab)                    \
    X(T_MAXABS, MAX, ab)                 \
    X(T_RHO, SUM, rho)                   \
    X(T_RHO2, SUM, rho * rho)            \
    X(T_K3, SUM, e - rho - 1.0)          \
    X(T_W, SUM, w)                       \
    X(T_W2, SUM, w * w)                  \
    X(T_MAXW, MAX, w)                    \
    X(T_MINW, MIN, w)                    \
    X(T_WC, SUM, wc)                     \
    X(T_WC2, SUM, wc * wc)               \
    X(T_HI, SUM, GT(w, C))               \
    X(T_LO, SUM, LT(w, Cl))              \
    X(T_D, SUM, d)                       \
    X(T_D2, SUM, d * d)                  \
    X(T_MAXD, MAX, d)                    \
    X(T_PT, SUM, pt)                     \
    X(T_PR, SUM, pr)                     \
    X(T_PT2, SUM, pt * pt)               \
    X(T_PR2, SUM, pr * pr)               \
    X(T_PTPR, SUM, pt * pr)              \
    X(T_EABS, SUM, (e - ie) * GT(rho, 0.0) + ie) \
    X(T_K3R, SUM, ie + rho - 1.0)

/* ---- per-sequence sums -------------------------------------------------------------
 * X(id, term): summed over the counted tokens of each sequence (token
 * variables as above). */
#define MM_SEQ_SUMS(X) \
    X(Q_ABS, ab)       \
    X(Q_RHO, rho)      \
    X(Q_LT, lt)        \
    X(Q_LR, lr)

/* X(id, reduction, term): the reduction over the sequences (with at least one
 * counted token) of a term in the sequence variables
 *   q[Q_*]  the sequence's sums             qn  its counted tokens
 *   mt, mr  mean lt and mean lr             dd  mr - mt (log-PPL difference)
 *   rc      q[Q_RHO] clamped to [-B, B] */
#define MM_SEQ_TERMS(X)                   \
    X(R_ABS, SUM, q[Q_ABS] / qn)          \
    X(R_CHI, SUM, exp(2.0 * rc))          \
    X(R_PT, SUM, exp(-mt))                \
    X(R_PR, SUM, exp(-mr))                \
    X(R_D, SUM, dd)                       \
    X(R_AD, SUM, fabs(dd))                \
    X(R_ED, SUM, exp(dd))                 \
    X(R_DMAX, MAX, dd)                    \
    X(R_DMIN, MIN, dd)

/* ---- the metrics, in id order ---------------------------------------------------------
 * X(key, label, kind, arg): key is the metric's name (JSON field, CSV column,
 * --metric), label its description with the unit. kind VAL: arg is the value
 * in n (counted tokens), ns (sequences), T[T_*], R[R_*], C and the helpers of
 * acc.c; kind PCT: arg is a percentile level of |rho| in percent, with
 * llama.cpp's rule (the percentiles are selected together). */
#define MM_METRICS(X)                                                                                  \
    X(mean_abs, "mean |rho| (nats)", VAL, T[T_ABS] / n)                                                \
    X(mean_abs_per_seq, "mean of per-sequence mean |rho| (nats)", VAL, R[R_ABS] / ns)                  \
    X(max_abs, "max |rho| (nats)", VAL, T[T_MAXABS])                                                   \
    X(k1, "k1 = mean(lp_rollout - lp_trainer) (nats)", VAL, -T[T_RHO] / n)                             \
    X(k2, "k2 = mean(rho^2/2) (nats)", VAL, T[T_RHO2] / (2.0 * n))                                     \
    X(k3, "k3 = mean(exp(rho) - rho - 1) (nats)", VAL, T[T_K3] / n)                                    \
    X(chi2_token, "chi^2 token = mean(w^2) - 1", VAL, T[T_W2] / n - 1.0)                               \
    X(chi2_seq, "chi^2 sequence = mean((prod w)^2) - 1", VAL, R[R_CHI] / ns - 1.0)                     \
    X(probs_diff_mean, "mean |p_trainer - p_rollout| (probability)", VAL, T[T_D] / n)                  \
    X(probs_diff_max, "max |p_trainer - p_rollout| (probability)", VAL, T[T_MAXD])                     \
    X(probs_diff_std, "std |p_trainer - p_rollout| (probability)", VAL, sample_std(T[T_D], T[T_D2], n)) \
    X(probs_pearson, "Pearson r of p_trainer, p_rollout", VAL, pearson(T, n))                          \
    X(ppl_trainer, "trainer perplexity (per-sequence mean)", VAL, R[R_PT] / ns)                        \
    X(ppl_rollout, "rollout perplexity (per-sequence mean)", VAL, R[R_PR] / ns)                        \
    X(log_ppl_diff_mean, "mean log-PPL difference (nats)", VAL, R[R_D] / ns)                           \
    X(log_ppl_abs_diff, "mean |log-PPL difference| (nats)", VAL, R[R_AD] / ns)                         \
    X(log_ppl_diff_max, "max log-PPL difference (nats)", VAL, R[R_DMAX])                               \
    X(log_ppl_diff_min, "min log-PPL difference (nats)", VAL, R[R_DMIN])                               \
    X(ppl_ratio, "mean PPL ratio trainer/rollout", VAL, R[R_ED] / ns)                                  \
    X(is_mean, "mean IS weight w", VAL, T[T_W] / n)                                                    \
    X(is_max, "max IS weight w", VAL, T[T_MAXW])                                                       \
    X(is_min, "min IS weight w", VAL, T[T_MINW])                                                       \
    X(is_std, "std of IS weight (clamped to [1/C, C])", VAL, is_std(T, n))                             \
    X(is_ess, "IS effective sample size (fraction)", VAL, is_ess(T, n))                                \
    X(is_frac_high, "fraction of tokens with w > C", VAL, T[T_HI] / n)                                 \
    X(is_frac_low, "fraction of tokens with w < 1/C", VAL, T[T_LO] / n)                                \
    X(abs_p99_9, "99.9th percentile of |rho| (nats)", PCT, 99.9)                                       \
    X(abs_p99, "99th percentile of |rho| (nats)", PCT, 99.0)                                           \
    X(abs_p95, "95th percentile of |rho| (nats)", PCT, 95.0)                                           \
    X(abs_p90, "90th percentile of |rho| (nats)", PCT, 90.0)                                           \
    X(abs_p50, "median |rho| (nats)", PCT, 50.0)                                                       \
    X(abs_p10, "10th percentile of |rho| (nats)", PCT, 10.0)                                           \
    X(abs_p1, "1st percentile of |rho| (nats)", PCT, 1.0)                                              \
    X(mult_prob_error, "mean exp(|rho|) (multiplicative probability error)", VAL, T[T_EABS] / n)         \
    X(k3_reverse, "reverse k3 = mean(exp(-rho) + rho - 1) (nats)", VAL, T[T_K3R] / n)

/* Ids of the rows. */
#define MM_ID3(id, op, t) id,
#define MM_ID2(id, t) id,
#define MM_MID(key, label, kind, arg) M_##key,
enum { MM_TOKEN_SUMS(MM_ID3) MM_NT };
enum { MM_SEQ_SUMS(MM_ID2) MM_NQ };
enum { MM_SEQ_TERMS(MM_ID3) MM_NR };
enum { MM_METRICS(MM_MID) MM_NM };
#undef MM_ID3
#undef MM_ID2
#undef MM_MID

/* A reduction's neutral value and how two partials combine (scalar). */
#define MM_INIT_SUM 0.0
#define MM_INIT_MAX (-INFINITY)
#define MM_INIT_MIN INFINITY
#define MM_OP_SUM(a, b) ((a) + (b))
#define MM_OP_MAX(a, b) ((b) > (a) ? (b) : (a))
#define MM_OP_MIN(a, b) ((b) < (a) ? (b) : (a))

#endif

/* fsdp_mlp.h - the model tide-fsdp-train trains, as plain math: a stack of
 * width x width linear layers (weights, then biases, in one flat buffer per
 * layer) with ReLU between them, a teacher matrix that makes the task
 * learnable, and the data of every step, generated per row so that any
 * split of a batch across ranks sees the same rows.  Matrix products go
 * through CBLAS. */
#ifndef TIDE_FSDP_MLP_H
#define TIDE_FSDP_MLP_H

#include <stddef.h>
#include <stdint.h>

/* Elements of one layer's flat buffer: W (width*width, row = output) then b. */
size_t mlp_layer_numel(int width);

/* Seeded initial values of layer `layer`: uniform(+-sqrt(6 / width))
 * weights (He, for ReLU), zero biases.  Identical on every rank. */
void mlp_init_layer(float *wb, int width, uint64_t seed, int layer);

/* The teacher: a fixed random width x width matrix, scaled to keep targets
 * of the same magnitude as inputs. */
void mlp_teacher(float *t, int width, uint64_t seed);

/* Rows [row0, row0 + rows) of step `step`'s inputs x, and their targets
 * y = x T^T. */
void mlp_batch(float *x, float *y, const float *teacher, int width, int rows, uint64_t seed,
               int step, long row0);

/* out = relu?(in W^T + b) for `rows` rows. */
void mlp_forward(const float *wb, const float *in, float *out, int width, int rows, int relu);

/*
 * Backward through one layer.  dout holds dL/d(out) and is overwritten
 * with dL/d(pre-activation); grad (a layer buffer like wb) gets the
 * weight and bias gradients added (accumulate = 1) or written over
 * whatever it held (accumulate = 0: a GEMM with beta = 0, for a fresh
 * FSDP buffer); din, when not NULL, receives dL/d(in).
 */
void mlp_backward(const float *wb, const float *in, const float *out, float *dout, float *din,
                  float *grad, int accumulate, int width, int rows, int relu);

/* Mean squared error over n values; dout = d(loss * scale)/d(out). */
double mlp_loss(const float *out, const float *y, float *dout, size_t n, float scale);

/* Round every value to bfloat16 precision (nearest even), as a bfloat16
 * all-gather delivers it. */
void mlp_round_bf16(float *v, size_t n);

#endif

/* fsdp_mlp.c - see fsdp_mlp.h. */
#include "tools/fsdp_train/fsdp_mlp.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float uniform(uint64_t *s)
{
    return (float)((double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

size_t mlp_layer_numel(int width)
{
    return (size_t)width * (size_t)width + (size_t)width;
}

void mlp_init_layer(float *wb, int width, uint64_t seed, int layer)
{
    uint64_t s = seed * 1000003u + (uint64_t)layer * 7919u + 1;
    float a = sqrtf(6.0f / (float)width); /* He: keeps the signal through ReLU */
    size_t w = (size_t)width * (size_t)width;
    for (size_t i = 0; i < w; i++)
        wb[i] = a * uniform(&s);
    memset(wb + w, 0, (size_t)width * sizeof(float));
}

void mlp_teacher(float *t, int width, uint64_t seed)
{
    uint64_t s = seed ^ 0x7eac4e5ull;
    float a = sqrtf(3.0f / (float)width);
    for (size_t i = 0; i < (size_t)width * (size_t)width; i++)
        t[i] = a * uniform(&s);
}

void mlp_batch(float *x, float *y, const float *teacher, int width, int rows, uint64_t seed,
               int step, long row0)
{
    for (int r = 0; r < rows; r++) {
        uint64_t s = seed * 0x100000001b3ull + (uint64_t)step * 0x9e3779b1ull +
                     (uint64_t)(row0 + r) * 0x85ebca6bull;
        for (int i = 0; i < width; i++)
            x[(size_t)r * width + i] = uniform(&s);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, width, 1.0f, x, width,
                teacher, width, 0.0f, y, width);
}

void mlp_forward(const float *wb, const float *in, float *out, int width, int rows, int relu)
{
    const float *b = wb + (size_t)width * width;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, width, width, 1.0f, in, width, wb,
                width, 0.0f, out, width);
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * width;
        for (int j = 0; j < width; j++) {
            float v = o[j] + b[j];
            o[j] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

void mlp_backward(const float *wb, const float *in, const float *out, float *dout, float *din,
                  float *grad, int accumulate, int width, int rows, int relu)
{
    float *gb = grad + (size_t)width * width;
    if (!accumulate) /* width floats; the GEMM writes the width^2 others */
        memset(gb, 0, (size_t)width * sizeof(float));
    for (int r = 0; r < rows; r++) {
        float *d = dout + (size_t)r * width;
        const float *o = out + (size_t)r * width;
        for (int j = 0; j < width; j++) {
            if (relu && o[j] <= 0.0f)
                d[j] = 0.0f;
            gb[j] += d[j];
        }
    }
    /* dW (+)= dY^T X: beta = 1 accumulates into FSDP's buffer, beta = 0
     * writes a fresh one (BLAS does not read C when beta is zero). */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, width, width, rows, 1.0f, dout, width,
                in, width, accumulate ? 1.0f : 0.0f, grad, width);
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, width, width, 1.0f, dout,
                    width, wb, width, 0.0f, din, width);
}

double mlp_loss(const float *out, const float *y, float *dout, size_t n, float scale)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)out[i] - (double)y[i];
        sum += e * e;
        dout[i] = (float)(2.0 * e / (double)n) * scale;
    }
    return sum / (double)n;
}

static float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return x;
    u += 0x7fffu + ((u >> 16) & 1);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof u);
    return x;
}

void mlp_round_bf16(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = round_bf16(v[i]);
}

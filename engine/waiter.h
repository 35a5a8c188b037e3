/* waiter.h - sleeping on a 32-bit word (Linux futex), for threads that
 * have spun long enough.  Private to the process. */
#ifndef TIDE_WAITER_H
#define TIDE_WAITER_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *word == expected, at most timeout_ns (UINT64_MAX: no limit).
 * Returns 0 when woken or the word changed, -ETIMEDOUT, or -EINTR. */
int tide__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns);

/* Wake every thread sleeping on word. */
void tide__futex_wake(_Atomic uint32_t *word);

/* A pause instruction for spin loops (lets the sibling hyperthread run). */
static inline void tide__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif

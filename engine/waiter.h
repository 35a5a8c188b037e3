/* waiter.h - spinning politely, and sleeping on a 32-bit word (Linux
 * futex) for threads that have spun long enough.  Private to the process. */
#ifndef TIDE_WAITER_H
#define TIDE_WAITER_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *word == expected, at most timeout_ns (UINT64_MAX: no limit).
 * Returns 0 when woken or the word changed, -ETIMEDOUT, or -EINTR. */
int tide__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns);

/* Wake every thread sleeping on word. */
void tide__futex_wake(_Atomic uint32_t *word);

/* One idle pass of a spin loop: hand the core to any thread that wants
 * it.  With more threads than cores (4 ranks, each with a progress
 * thread, on 2 cores) the peer a waiter spins for is often runnable but
 * not running, and a pause instruction would burn the rest of the time
 * slice it needs; sched_yield lets it run now, and returns at once when
 * nobody else wants the core, so a waiter alone on its core loses only
 * the system call (under a microsecond). */
void tide__spin_yield(void);

/* One pass of a tight spin on memory (a flag another core will raise):
 * tells the core so, which frees its pipelines for an SMT sibling - a
 * VM may not say which CPUs are siblings - and avoids the pipeline flush
 * of a mispredicted exit when the flag changes. */
static inline void tide__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif

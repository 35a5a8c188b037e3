/* seccomp_deny.h - refuse io_uring to this process and its children, as
 * Docker's default seccomp profile does (since 25.0): io_uring_setup,
 * io_uring_enter and io_uring_register fail with EPERM. */
#ifndef TIDE_TEST_SECCOMP_DENY_H
#define TIDE_TEST_SECCOMP_DENY_H

/* 0, or -1 with errno when the kernel cannot install the filter. */
int seccomp_deny_io_uring(void);

#endif

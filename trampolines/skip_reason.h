/* SPDX-License-Identifier: MIT */
/*
 * The relocators' skip reasons (x86-64 and aarch64): formatted into one
 * thread-local buffer, valid until the next reason in the same thread.
 */
#ifndef PROFD_SKIP_REASON_H
#define PROFD_SKIP_REASON_H

/* Formats a reason; returns the thread-local buffer. Not async-signal-safe. */
__attribute__((format(printf, 1, 2)))
const char *skip_reason_format(const char *fmt, ...);

/* In a relocator: sets reloc->skip_reason and evaluates to err. */
#define SKIP(reloc, err, ...) ((reloc)->skip_reason = skip_reason_format(__VA_ARGS__), (err))

#endif

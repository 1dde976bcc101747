/* SPDX-License-Identifier: MIT */
/* Error and progress messages, each tagged with the rank that prints it. */
#ifndef EMUNIC_LOG_H
#define EMUNIC_LOG_H

#include "emunic.h"

/* "emunic: rank R: <message>" on stderr; returns -err so callers can
 * `return emunic_err(-EINVAL, "...")`. */
int emunic_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emunic_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed only when EMUNIC_DEBUG is set. */
void emunic_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

/* Attribution of faults inside plugin calls at run time: a crash or a hang
 * in a stage's function ends the process with a line naming the stage,
 * its plugin file and the call, instead of "Segmentation fault" or a hang.
 *
 * Chosen in-process, by cost per token: marking a call is two clock reads
 * and a few stores to this thread's slot (tens of nanoseconds, against a
 * 40-70 ms CPU step of a 1.5B model); running plugins in a child would
 * copy every row of 151,936 floats over a pipe or shared memory and add
 * two context switches per call. The price is that a crash cannot be
 * survived: the process ends, as it would anyway, but named. */
#ifndef SD_CALL_GUARD_H
#define SD_CALL_GUARD_H

/* (The settings are sd_sampler_guard in sampler_host.h.) */

/* Installs the fault handlers and starts the watchdog, once per process;
 * later calls do nothing. 0, or -1 when the watchdog thread cannot start
 * (the handlers are installed all the same). */
int sd_call_guard_install(void);
/* Marks this thread as inside call (a string literal, "process") of stage
 * (its name) from file (its plugin path), until sd_call_leave. The strings
 * must outlive the call. */
void sd_call_enter(const char *stage, const char *file, const char *call);
void sd_call_leave(void);

#endif

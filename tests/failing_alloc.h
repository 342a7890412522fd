/* Allocations that fail on demand, for tests of what code does when memory
 * runs out. A binary linked with FAILING_ALLOC_WRAP (tests/module.mk:
 * -Wl,--wrap=malloc and the rest) sends the allocations of the objects it
 * links (rig's code, not libc's, softgpu's or the sanitizer's) through
 * here. Only the arming thread's allocations count: the other threads of
 * the code under test run on unharmed, and a run is repeatable. Blocks
 * allocated while armed are followed until freed (by any thread). */
#ifndef RIG_TESTS_FAILING_ALLOC_H
#define RIG_TESTS_FAILING_ALLOC_H

#include <stdbool.h>

/* From now on this thread counts its allocations; the nth (1-based) fails,
 * none when nth is 0. */
void failing_alloc_arm(unsigned long nth);
/* Stops counting; returns how many allocations were made since arm. */
unsigned long failing_alloc_disarm(void);
/* Whether the armed allocation was reached (and failed). */
bool failing_alloc_hit(void);
/* Blocks allocated while armed that no thread has freed yet: once the code
 * under test has given back everything it holds, a leak. */
unsigned long failing_alloc_live(void);

#endif

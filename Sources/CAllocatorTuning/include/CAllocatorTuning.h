#ifndef MEDIACACHE_ALLOCATOR_TUNING_H
#define MEDIACACHE_ALLOCATOR_TUNING_H

/// Whether the allocator settings of `tuning.c` were applied at load time (0 on other C libraries, or when
/// GLIBC_TUNABLES was given).
int mediacache_allocator_tuned(void);

#endif

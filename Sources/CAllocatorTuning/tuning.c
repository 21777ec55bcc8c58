// glibc allocator settings for the mediacache executable, applied by a constructor before main() and so before
// any thread exists: M_ARENA_MAX set later does not undo arenas that threads already made.
//
// The data path moves 1 MiB chunks. With glibc's defaults each 1 MiB block is mmapped and unmapped (fresh pages
// faulted in on every chunk) and every thread gets its own arena, each keeping freed memory. Here: blocks up to
// 4 MiB come from the heap and are reused, two arenas at most, and free memory above 4 MiB at the top of an
// arena is given back. Settings given at exec (GLIBC_TUNABLES=glibc.malloc....) win: nothing is changed then.
#include "CAllocatorTuning.h"

#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>

static int tuned = 0;

__attribute__((constructor)) static void mediacache_tune_allocator(void) {
  if (getenv("GLIBC_TUNABLES") != NULL) return;
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  mallopt(M_ARENA_MAX, 2);
  tuned = 1;
}

int mediacache_allocator_tuned(void) { return tuned; }
#else
int mediacache_allocator_tuned(void) { return 0; }
#endif

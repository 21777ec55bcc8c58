#ifndef MEDIACACHE_CRESIDENTREAD_H
#define MEDIACACHE_CRESIDENTREAD_H

#include <stddef.h>
#include <stdint.h>

/// Reads up to `count` bytes at `offset` of the file `fd` only if they are in the page cache now, without
/// waiting for the disk: Linux's `preadv2(…, RWF_NOWAIT)`. Returns the bytes read (fewer than `count` when only
/// the first pages are resident, 0 at end of file), or -1 with `errno` set: `EAGAIN` when the first page is not
/// resident, `ENOTSUP` where the system has no such read (not Linux, or a kernel or file system without it).
int64_t mediacache_pread_resident(int fd, void *buffer, size_t count, int64_t offset);

/// Frees the blocks of `length` bytes at `offset` of the file `fd`, keeping its size (the bytes then read as
/// zeros): Linux's `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`, Darwin's `F_PUNCHHOLE`. Returns 0,
/// or -1 with `errno` set: `ENOTSUP` where the system or file system cannot.
int mediacache_punch_hole(int fd, int64_t offset, int64_t length);

#endif

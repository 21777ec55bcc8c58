// A read that never waits for the disk (see CResidentRead.h). Swift's Glibc module does not export preadv2,
// which glibc declares only under _GNU_SOURCE.
#define _GNU_SOURCE
#include "CResidentRead.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

int64_t mediacache_pread_resident(int fd, void *buffer, size_t count, int64_t offset) {
#if defined(__linux__) && defined(RWF_NOWAIT)
  struct iovec vector = {buffer, count};
  ssize_t done = preadv2(fd, &vector, 1, (off_t)offset, RWF_NOWAIT);
  if (done < 0 && (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) errno = ENOTSUP;
  return (int64_t)done;
#else
  (void)fd;
  (void)buffer;
  (void)count;
  (void)offset;
  errno = ENOTSUP;
  return -1;
#endif
}

// Freeing a file's blocks in place (see CResidentRead.h). Swift's Glibc module does not export fallocate,
// which glibc declares only under _GNU_SOURCE.
#define _GNU_SOURCE
#include "CResidentRead.h"

#include <errno.h>
#include <fcntl.h>

int mediacache_punch_hole(int fd, int64_t offset, int64_t length) {
#if defined(__linux__) && defined(FALLOC_FL_PUNCH_HOLE)
  int result = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
  if (result != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) errno = ENOTSUP;
  return result;
#elif defined(__APPLE__) && defined(F_PUNCHHOLE)
  struct fpunchhole hole = {0, 0, (off_t)offset, (off_t)length};
  int result = fcntl(fd, F_PUNCHHOLE, &hole);
  if (result != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) errno = ENOTSUP;
  return result;
#else
  (void)fd, (void)offset, (void)length;
  errno = ENOTSUP;
  return -1;
#endif
}

#ifndef MEDIACACHE_CZLIB_SHIM_H
#define MEDIACACHE_CZLIB_SHIM_H
#include <zlib.h>
#endif

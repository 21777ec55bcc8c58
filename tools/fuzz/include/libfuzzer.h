// libFuzzer's mutation entry point, for the custom mutator in FuzzManifest.swift.
// Defined by libclang_rt.fuzzer, which `swiftc -sanitize=fuzzer` links.
#include <stddef.h>
#include <stdint.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

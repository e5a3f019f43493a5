// SPDX-License-Identifier: MIT
// pmc/config.hpp: version, namespace and compiler macros shared by every pmc header.
#pragma once

#include <boost/config.hpp>

#define PMC_VERSION_MAJOR 0
#define PMC_VERSION_MINOR 1
#define PMC_VERSION_PATCH 0
#define PMC_VERSION_STRING "0.1.0"

// Everything lives in an inline versioned namespace so that two incompatible pmc versions linked into one
// program do not violate the ODR silently.
#define PMC_BEGIN_NAMESPACE                                                                                       \
    namespace pmc {                                                                                               \
    inline namespace v0 {
#define PMC_END_NAMESPACE                                                                                         \
    }                                                                                                             \
    }

#if !defined(__linux__)
#error "pmc reads Linux perf_event counters and builds only on Linux"
#endif

#if defined(__x86_64__)
#define PMC_ARCH_X86_64 1
#else
#define PMC_ARCH_X86_64 0
#endif
#if defined(__aarch64__)
#define PMC_ARCH_AARCH64 1
#else
#define PMC_ARCH_AARCH64 0
#endif

// The hot path's slow branches go to functions marked cold so the compiler moves them out of line.
#if defined(__GNUC__)
#define PMC_COLD __attribute__((cold))
#else
#define PMC_COLD
#endif

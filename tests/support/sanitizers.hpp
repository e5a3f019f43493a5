// SPDX-License-Identifier: MIT
// Which sanitizer this test was built with, for the checks a sanitizer's runtime changes (its malloc takes no memory
// with brk, its shadow memory adds page faults, it replaces operator new). g++ says so with __SANITIZE_*__, clang++
// with __has_feature. PMC_TEST_ASAN and PMC_TEST_TSAN are 1 or 0, usable in #if and in code.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PMC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PMC_TEST_ASAN 1
#endif
#endif
#ifndef PMC_TEST_ASAN
#define PMC_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define PMC_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PMC_TEST_TSAN 1
#endif
#endif
#ifndef PMC_TEST_TSAN
#define PMC_TEST_TSAN 0
#endif

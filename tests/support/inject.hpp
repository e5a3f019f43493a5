// SPDX-License-Identifier: MIT
// Swapping pmc's system calls for the length of a test, to simulate failures the machine cannot produce.
#pragma once

#include <pmc/detail/sys.hpp>

namespace pmc_test {

/// Restores the real system calls when it goes out of scope; assign to calls() meanwhile.
class SystemCallOverride {
public:
    SystemCallOverride() : saved_(pmc::detail::system_calls()) {}
    ~SystemCallOverride() { pmc::detail::system_calls() = saved_; }
    SystemCallOverride(const SystemCallOverride&) = delete;
    SystemCallOverride& operator=(const SystemCallOverride&) = delete;
    pmc::detail::SystemCalls& calls() { return pmc::detail::system_calls(); }

private:
    pmc::detail::SystemCalls saved_;
};

/// perf_event_open fails with `err` every time while this is alive.
template <int Err>
struct FailingPerfEventOpen : SystemCallOverride {
    FailingPerfEventOpen() {
        calls().perf_event_open = [](perf_event_attr*, pid_t, int, int, unsigned long) {
            errno = Err;
            return -1;
        };
    }
};

} // namespace pmc_test

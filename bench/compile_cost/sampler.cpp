// SPDX-License-Identifier: MIT
// What #include <pmc/sampler.hpp> costs a user's file: one sampler opened, drained and stopped.
#include <pmc/sampler.hpp>

#include <cstdint>

std::uint64_t sample_work(void (*work)()) {
    pmc::Sampler s{"cycles:u"};
    std::uint64_t ips = 0;
    work();
    s.drain([&](const pmc::Sample& sample) { ips += sample.ip; });
    s.stop();
    return ips;
}

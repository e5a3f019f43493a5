// SPDX-License-Identifier: MIT
// Failures are for people: every way opening can fail says what failed, why, and the fix. Real failures where
// this machine can produce them (no PMU, paranoid as an unprivileged user, too many files); injected errnos
// for the rest.
#include "catch.hpp"
#include "fake_sysfs.hpp"
#include "inject.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/machine.hpp>

#include <sys/mman.h>
#include <sys/resource.h>

#include <fstream>
#include <vector>

using pmc_test::FailingPerfEventOpen;

namespace {
std::string open_failure(const char* event, const pmc::OpenOptions& options = {}) {
    auto r = pmc::Counter::try_open(event, options);
    if (r) return {};
    return r.failure().message;
}
} // namespace

TEST_CASE("a hardware event without a PMU fails with the reason and the fix", "[system][errors]") {
    if (pmc::has_core_pmu()) {
        // This machine has a PMU: the same event must open.
        CHECK(pmc::Counter::try_open("instructions:u").ok());
        return;
    }
    try {
        pmc::Counter c{"instructions:u"};
        FAIL("opened a hardware event on a machine without a PMU");
    } catch (const pmc::error& e) {
        const std::string m = e.what();
        CHECK(e.code().value() == ENOENT);
        CHECK_THAT(m, ContainsSubstring("cannot open counter 'instructions:u'"));
        CHECK_THAT(m, ContainsSubstring("ENOENT"));
        CHECK_THAT(m, ContainsSubstring("no hardware PMU"));
        if (pmc::under_hypervisor()) CHECK_THAT(m, ContainsSubstring("virtual machine without a virtual PMU"));
        CHECK_THAT(m, ContainsSubstring("Fix:"));
        CHECK_THAT(m, ContainsSubstring("software events"));
    }
    // The same through the non-throwing API, for each kind of hardware event.
    for (const char* event : {"cycles", "r01cb:u", "L1-dcache-load-misses", "branch-misses:u"}) {
        INFO(event);
        auto r = pmc::Counter::try_open(event);
        REQUIRE_FALSE(r.ok());
        CHECK(r.failure().code.value() == ENOENT);
        CHECK_THAT(r.failure().message, ContainsSubstring("no hardware PMU"));
    }
}

TEST_CASE("a bad event string opens nothing", "[system][errors]") {
    const int before = pmc_test::open_fd_count();
    CHECK_THROWS_AS(pmc::Counter{"page-faults:uu"}, pmc::error);
    auto r = pmc::Counter::try_open("nosuch/event=1/");
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure().code.value() == ENOENT);
    CHECK(pmc_test::open_fd_count() == before);
}

TEST_CASE("permission refused: paranoid level, its meaning, and three fixes", "[system][errors]") {
    FailingPerfEventOpen<EACCES> inject;
    pmc::OpenOptions strict; // without perf's user-mode fallback: the refusal of kernel mode itself
    strict.exclude_kernel_fallback = false;
    const std::string kernel = open_failure("page-faults", strict);
    CHECK_THAT(kernel, ContainsSubstring("EACCES"));
    CHECK_THAT(kernel, ContainsSubstring("perf_event_paranoid"));
    if (auto level = pmc::perf_event_paranoid())
        CHECK_THAT(kernel, ContainsSubstring("perf_event_paranoid is " + std::to_string(*level)));
    CHECK_THAT(kernel, ContainsSubstring("also counts kernel mode"));
    CHECK_THAT(kernel, ContainsSubstring("':u'"));
    CHECK_THAT(kernel, ContainsSubstring("sudo sysctl kernel.perf_event_paranoid=1"));
    CHECK_THAT(kernel, ContainsSubstring("CAP_PERFMON"));
    const std::string user = open_failure("page-faults:u");
    CHECK_THAT(user, !ContainsSubstring("also counts kernel mode"));
    CHECK_THAT(user, ContainsSubstring("Fix: lower the setting: sudo sysctl kernel.perf_event_paranoid=2"));
    // With the fallback (the default) refused in user mode too (paranoid 3, a seccomp profile): said as such.
    const auto level = pmc::perf_event_paranoid();
    if (level && *level <= 1) return; // perf falls back only above 1
    const std::string both = open_failure("page-faults");
    CHECK_THAT(both, ContainsSubstring("retried with exclude_kernel=1, user mode only, as perf does"));
    CHECK_THAT(both, !ContainsSubstring("also counts kernel mode"));
    CHECK_THAT(both, ContainsSubstring("Fix: lower the setting"));
}

TEST_CASE("permission refused for real: an unprivileged user at paranoid >= 2", "[system][errors]") {
    auto level = pmc::perf_event_paranoid();
    if (::geteuid() != 0 || !level || *level < 2)
        PMC_SKIP("needs root (to become an unprivileged user) and perf_event_paranoid >= 2; covered by injection");
    const int status = pmc_test::in_child([] {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 10;
        pmc::OpenOptions strict; // perf's user-mode fallback is tests/system/test_unprivileged.cpp's
        strict.exclude_kernel_fallback = false;
        auto kernel = pmc::Counter::try_open("page-faults", strict);
        if (kernel) return 1;
        if (kernel.failure().code.value() != EACCES && kernel.failure().code.value() != EPERM) return 2;
        if (kernel.failure().message.find("':u'") == std::string::npos) return 3;
        auto user = pmc::Counter::try_open("page-faults:u"); // allowed at paranoid 2
        if (*pmc::perf_event_paranoid() == 2 && !user) return 4;
        return 0;
    });
    CHECK(status == 0);
}

TEST_CASE("too many open files, for real and injected", "[system][errors]") {
    const int status = pmc_test::in_child([] {
        rlimit lim{32, 32};
        if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 10;
        std::vector<pmc::Counter> counters;
        for (int i = 0; i < 64; ++i) {
            auto r = pmc::Counter::try_open("task-clock");
            if (!r) {
                if (r.failure().code.value() != EMFILE) return 1;
                if (r.failure().message.find("RLIMIT_NOFILE = 32") == std::string::npos) return 2;
                if (r.failure().message.find("hard limit 32") == std::string::npos) return 3;
                // Soft = hard: only root can raise it, so no `ulimit -n` beyond the hard limit is suggested.
                if (r.failure().message.find("65536") != std::string::npos) return 5;
                if (r.failure().message.find("needs root") == std::string::npos) return 6;
                return 0;
            }
            counters.push_back(std::move(r.value()));
        }
        return 4; // never hit the limit
    });
    CHECK(status == 0);
    // Below the hard limit: raise the soft limit to exactly the hard limit, which needs no privilege.
    const int below_hard = pmc_test::in_child([] {
        rlimit lim{32, 48};
        if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 10;
        std::vector<pmc::Counter> counters;
        for (int i = 0; i < 64; ++i) {
            auto r = pmc::Counter::try_open("task-clock");
            if (!r) {
                const std::string& m = r.failure().message;
                if (m.find("RLIMIT_NOFILE = 32, hard limit 48") == std::string::npos) return 1;
                if (m.find("`ulimit -n 48`") == std::string::npos) return 2;
                if (m.find("65536") != std::string::npos) return 3;
                return 0;
            }
            counters.push_back(std::move(r.value()));
        }
        return 4;
    });
    CHECK(below_hard == 0);
    FailingPerfEventOpen<EMFILE> inject;
    CHECK_THAT(open_failure("task-clock"), ContainsSubstring("every counter holds one file descriptor"));
}

TEST_CASE("invalid attributes name the fields that were set", "[system][errors]") {
    {
        FailingPerfEventOpen<EINVAL> inject;
        const std::string m = open_failure("page-faults:u");
        CHECK_THAT(m, ContainsSubstring("EINVAL"));
        CHECK_THAT(m, ContainsSubstring("type=1 config=0x2"));
        CHECK_THAT(m, ContainsSubstring("exclude_kernel=1"));
        CHECK_THAT(m, ContainsSubstring("exclude_hv=1"));
        CHECK_THAT(open_failure("instructions:pp"), ContainsSubstring("precise_ip=2"));
    }
}

TEST_CASE("invalid attributes for real: the msr PMU cannot filter by mode", "[system][errors]") {
    if (!pmc::load_pmu("msr")) PMC_SKIP("this kernel has no msr PMU (msr/tsc/)");
    const std::string m = open_failure("msr/tsc/u");
    CHECK_THAT(m, ContainsSubstring("EINVAL"));
    CHECK_THAT(m, ContainsSubstring("msr PMU counts in every mode"));
    // An explicit H keeps exclude_guest, so perf's fallback does not apply and the kernel refuses it.
    if (pmc_test::msr_refused_reason().empty())
        CHECK_THAT(open_failure("msr/tsc/H"), ContainsSubstring("drop the ':G'/':H' modifier"));
    else // unprivileged: kernel mode is refused first, and user mode only is no help with the msr PMU
        CHECK_THAT(open_failure("msr/tsc/H"), ContainsSubstring("cannot count user mode alone"));
}

TEST_CASE("other errnos get their own explanation", "[system][errors]") {
    {
        FailingPerfEventOpen<E2BIG> inject;
        CHECK_THAT(open_failure("task-clock"), ContainsSubstring("kernel is older"));
    }
    {
        FailingPerfEventOpen<EBUSY> inject;
        CHECK_THAT(open_failure("task-clock:D"), ContainsSubstring("exclusively"));
    }
    {
        FailingPerfEventOpen<ENOSPC> inject;
        CHECK_THAT(open_failure("mem:0x1000"), ContainsSubstring("breakpoint slot"));
    }
    {
        FailingPerfEventOpen<ENOSYS> inject;
        CHECK_THAT(open_failure("task-clock"), ContainsSubstring("CONFIG_PERF_EVENTS"));
    }
    {
        FailingPerfEventOpen<ENOENT> inject;
        CHECK_THAT(open_failure("task-clock"), ContainsSubstring("no such event"));
    }
}

TEST_CASE("a failed mmap of the control page is reported, and the fd is not leaked", "[system][errors]") {
    if (!pmc::load_pmu("msr")) PMC_SKIP("no msr PMU here: msr/tsc/ is the event here that gets a control page");
    if (const auto why = pmc_test::msr_refused_reason(); !why.empty()) PMC_SKIP(why);
    const int before = pmc_test::open_fd_count();
    {
        pmc_test::SystemCallOverride inject;
        inject.calls().mmap = [](void*, std::size_t, int, int, int, off_t) -> void* {
            errno = ENOMEM;
            return MAP_FAILED;
        };
        const std::string m = open_failure("msr/tsc/");
        CHECK_THAT(m, ContainsSubstring("mmap of its control page failed"));
    }
    CHECK(pmc_test::open_fd_count() == before);
}

TEST_CASE("a failing read() raises with the reason", "[system][errors]") {
    pmc::Counter c{"task-clock"};
    pmc_test::SystemCallOverride inject;
    inject.calls().read = [](int, void*, std::size_t) -> ssize_t { return 0; };
    try {
        (void)c.read();
        FAIL("no exception");
    } catch (const pmc::error& e) {
        CHECK_THAT(std::string(e.what()), ContainsSubstring("error state"));
    }
    inject.calls().read = [](int, void*, std::size_t) -> ssize_t {
        errno = EIO;
        return -1;
    };
    CHECK_THROWS_AS(c.read(), pmc::error);
}

namespace {
/// Every sysfs path a hint names (".../rdpmc") must exist: a fix that points at a missing file misleads.
void check_named_rdpmc_files_exist(const std::string& hint) {
    for (std::size_t at = hint.find("/rdpmc"); at != std::string::npos; at = hint.find("/rdpmc", at + 1)) {
        const std::size_t start = hint.rfind(' ', at) + 1;
        const std::string path = hint.substr(start, at + 6 - start);
        INFO(hint);
        CHECK(::access(path.c_str(), F_OK) == 0);
    }
}
} // namespace

TEST_CASE("the rdpmc hint names only settings that exist, and none for events rdpmc never reads", "[system][errors]") {
    pmc_test::FakeSysfs sysfs;
    const std::string root = sysfs.root();
    // msr/tsc/ is not on the core PMU: no setting makes it rdpmc-readable, so none is named.
    const std::string msr = pmc::detail::rdpmc_setting_hint(pmc::parse_event("msr/tsc/", root), root);
    CHECK_THAT(msr, ContainsSubstring("the msr PMU"));
    CHECK_THAT(msr, ContainsSubstring("read() is the way"));
    CHECK_THAT(msr, !ContainsSubstring("rdpmc is"));
    CHECK_THAT(msr, !ContainsSubstring("sudo"));
    check_named_rdpmc_files_exist(msr);
    // A core event: the cpu PMU's setting, with the fix only when it is off.
    const pmc::EventSpec instructions = pmc::parse_event("instructions:u", root);
    const std::string on = pmc::detail::rdpmc_setting_hint(instructions, root);
    CHECK_THAT(on, ContainsSubstring(root + "/cpu/rdpmc is 1"));
    CHECK_THAT(on, !ContainsSubstring("enable with"));
    check_named_rdpmc_files_exist(on);
    std::ofstream(root + "/cpu/rdpmc") << "0\n";
    const std::string off = pmc::detail::rdpmc_setting_hint(instructions, root);
    CHECK_THAT(off, ContainsSubstring(root + "/cpu/rdpmc is 0"));
    CHECK_THAT(off, ContainsSubstring("enable with: echo 1 | sudo tee " + root + "/cpu/rdpmc"));
    check_named_rdpmc_files_exist(off);
    // A hybrid machine's core-type PMUs: their files are named, and only those that exist (cpu/rdpmc removed).
    pmc_test::FakeSysfs hybrid(false);
    hybrid.core_type_pmu("cpu_core", 10, "0-3");
    hybrid.core_type_pmu("cpu_atom", 11, "4-7");
    std::ofstream(hybrid.root() + "/cpu_core/rdpmc") << "1\n";
    ::unlink((hybrid.root() + "/cpu/rdpmc").c_str());
    const std::string both = pmc::detail::rdpmc_setting_hint(instructions, hybrid.root());
    CHECK_THAT(both, ContainsSubstring(hybrid.root() + "/cpu_core/rdpmc is 1"));
    CHECK_THAT(both, !ContainsSubstring("cpu_atom/rdpmc"));
    check_named_rdpmc_files_exist(both);
}

TEST_CASE("a real msr/tsc/ counter's notes name no rdpmc file that does not exist", "[system][errors]") {
    if (!pmc::load_pmu("msr")) PMC_SKIP("this kernel has no msr PMU (msr/tsc/)");
    if (const auto why = pmc_test::msr_refused_reason(); !why.empty()) PMC_SKIP(why);
    pmc::Counter c{"msr/tsc/"};
    std::string notes;
    for (const auto& n : c.notes()) notes += n + "\n";
    INFO(notes);
    CHECK_THAT(notes, !ContainsSubstring("msr/rdpmc"));
    check_named_rdpmc_files_exist(notes);
}

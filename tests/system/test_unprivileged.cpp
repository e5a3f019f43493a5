// SPDX-License-Identifier: MIT
// As most people run pmc: without root, where the kernel's default perf_event_paranoid (2) refuses to count kernel
// mode. pmc then does what perf does (evsel__fallback): an event whose string chose no mode is opened again with
// exclude_kernel=1 and exclude_hv=1, in user mode only. Checked with the refusal injected (runs anywhere), for real as
// uid 65534 in a child (when root), and for real in this process when the suite runs unprivileged
// (tests/support/run-unprivileged reruns it so).
#include "catch.hpp"
#include "inject.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/group.hpp>
#include <pmc/machine.hpp>

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

/// perf_event_open as the kernel answers an unprivileged user at perf_event_paranoid 2: EACCES for an event that
/// counts kernel mode, the real call otherwise.
struct RefuseKernelMode : pmc_test::SystemCallOverride {
    RefuseKernelMode() {
        calls().perf_event_open = [](perf_event_attr* attr, pid_t pid, int cpu, int group, unsigned long flags) {
            if (!attr->exclude_kernel) {
                errno = EACCES;
                return -1;
            }
            return pmc::detail::real_perf_event_open(attr, pid, cpu, group, flags);
        };
    }
};

std::string joined(const std::vector<std::string>& notes) {
    std::string all;
    for (const auto& n : notes) all += n + "\n";
    return all;
}

/// perf applies its fallback only above perf_event_paranoid 1 (or where the level cannot be read).
bool perf_falls_back() {
    const auto level = pmc::perf_event_paranoid();
    return !level || *level > 1;
}

std::string paranoid_text() {
    const auto level = pmc::perf_event_paranoid();
    return level ? std::to_string(*level) : std::string("unreadable");
}

} // namespace

TEST_CASE("refused kernel mode: an event that chose no mode opens in user mode only, as perf does",
          "[system][unprivileged]") {
    RefuseKernelMode refuse;
    auto c = pmc::Counter::try_open("page-faults");
    if (!perf_falls_back()) { // perf_event_paranoid <= 1: a refusal there is not the paranoid level's; it stands
        CHECK_FALSE(c.ok());
        return;
    }
    INFO((c ? std::string() : c.failure().message));
    REQUIRE(c.ok());
    CHECK(c->attr().exclude_kernel == 1);
    CHECK(c->attr().exclude_hv == 1);
    CHECK(c->attr().exclude_user == 0);
    CHECK(c->event().name == "page-faults"); // what was asked for; perf's name for what was opened:
    CHECK(pmc::name_as_opened(c->event(), c->attr()) == "page-faults:u");
    const std::string notes = joined(c->notes());
    CHECK_THAT(notes, ContainsSubstring("'page-faults' opened with exclude_kernel=1 as perf does "
                                        "(perf_event_paranoid " + paranoid_text()));
    CHECK_THAT(notes, ContainsSubstring("user mode only, as perf's 'page-faults:u'"));
    CHECK_THAT(notes, ContainsSubstring("exclude_kernel_fallback = false"));
    // It counts: a page fault on a user-mode store is a user-mode event.
    pmc_test::FreshPages pages(64);
    auto iv = c->interval();
    pages.touch();
    CHECK(iv.stop() >= 64);

    // context-switches happen in kernel mode: in user mode only it counts nothing, which the note says.
    auto cs = pmc::Counter::try_open("cs");
    REQUIRE(cs.ok());
    CHECK_THAT(joined(cs->notes()), ContainsSubstring("always 0"));

    // An explicit mode is what the user asked for: kept, and refused with the reason.
    for (const char* event : {"page-faults:k", "page-faults:uk"}) {
        INFO(event);
        auto k = pmc::Counter::try_open(event);
        REQUIRE_FALSE(k.ok());
        CHECK(k.failure().code.value() == EACCES);
        CHECK_THAT(k.failure().message, ContainsSubstring("also counts kernel mode"));
    }
    // ':u' asked for user mode: nothing to fall back from, nothing to note.
    auto u = pmc::Counter::try_open("page-faults:u");
    REQUIRE(u.ok());
    CHECK_THAT(joined(u->notes()), !ContainsSubstring("exclude_kernel=1"));
    CHECK(pmc::name_as_opened(u->event(), u->attr()) == "page-faults:u");

    // No fallback when asked for none: the refusal, with its fixes.
    pmc::OpenOptions strict;
    strict.exclude_kernel_fallback = false;
    auto refused = pmc::Counter::try_open("page-faults", strict);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.failure().code.value() == EACCES);
    CHECK_THAT(refused.failure().message, ContainsSubstring("also counts kernel mode"));
    CHECK_THAT(refused.failure().message, ContainsSubstring("':u'"));
}

TEST_CASE("refused kernel mode: a group falls back event by event, and keeps the names it was given",
          "[system][unprivileged][group]") {
    if (!perf_falls_back()) PMC_SKIP("perf_event_paranoid is " + paranoid_text() + ": perf applies no fallback there");
    RefuseKernelMode refuse;
    auto g = pmc::Group::try_open({"page-faults", "task-clock", "minor-faults:u"});
    INFO((g ? std::string() : g.failure().message));
    REQUIRE(g.ok());
    for (std::size_t i = 0; i < g->size(); ++i) {
        INFO(g->name(i));
        CHECK(g->attr(i).exclude_kernel == 1);
    }
    CHECK(pmc::name_as_opened(g->event(0), g->attr(0)) == "page-faults:u");
    CHECK(pmc::name_as_opened(g->event(1), g->attr(1)) == "task-clock:u");
    CHECK(pmc::name_as_opened(g->event(2), g->attr(2)) == "minor-faults:u"); // as written
    CHECK(g->index("page-faults") == 0); // looked up by the name the caller gave
    const std::string notes = joined(g->notes());
    CHECK_THAT(notes, ContainsSubstring("'page-faults' opened with exclude_kernel=1 as perf does"));
    CHECK_THAT(notes, ContainsSubstring("'task-clock' opened with exclude_kernel=1 as perf does"));
    CHECK_THAT(notes, !ContainsSubstring("'minor-faults:u' opened"));
    pmc_test::FreshPages pages(64);
    auto iv = g->interval();
    pages.touch();
    iv.stop();
    CHECK(iv["page-faults"].raw >= 64);
    CHECK(iv["minor-faults:u"].raw >= 64);

    // As pmc count opens a command's events (another process, inherited, enabled at exec).
    pmc::OpenOptions command;
    command.pid = ::getpid();
    command.count_children = true;
    auto counted = pmc::Group::try_open({"page-faults", "task-clock"}, command);
    REQUIRE(counted.ok());
    CHECK(counted->attr(0).exclude_kernel == 1);
    // With the fallback off, the group is refused.
    pmc::OpenOptions none;
    none.exclude_kernel_fallback = false;
    CHECK_FALSE(pmc::Group::try_open({"page-faults", "task-clock"}, none).ok());
}

TEST_CASE("perf's name for a user-mode fallback, and the attr perf stat opens for this user",
          "[system][unprivileged]") {
    // perf appends ":u", or just "u" after a name that already has a ':' or a '/'.
    const pmc::EventSpec faults = pmc::parse_event("page-faults");
    const perf_event_attr user = pmc::without_kernel_mode(faults.attr);
    CHECK(user.exclude_kernel == 1);
    CHECK(user.exclude_hv == 1);
    CHECK(pmc::name_as_opened(faults, user) == "page-faults:u");
    CHECK(pmc::name_as_opened(faults, faults.attr) == "page-faults"); // not fallen back: as given
    const pmc::EventSpec precise = pmc::parse_event("cpu-clock:p");
    CHECK(pmc::name_as_opened(precise, pmc::without_kernel_mode(precise.attr)) == "cpu-clock:pu");
    const pmc::EventSpec bp = pmc::parse_event("mem:0x1000/8:w");
    CHECK(pmc::name_as_opened(bp, pmc::without_kernel_mode(bp.attr)) == "mem:0x1000/8:wu");
    // Which strings may fall back: those that chose no mode (G, H, p, I, D are not modes).
    for (const char* event : {"page-faults", "page-faults:p", "page-faults:G", "page-faults:I"}) {
        INFO(event);
        const pmc::EventSpec s = pmc::parse_event(event);
        CHECK(pmc::kernel_fallback_applies(s, s.attr));
    }
    for (const char* event : {"page-faults:u", "page-faults:k", "page-faults:uk", "page-faults:h", "page-faults:kh"}) {
        INFO(event);
        const pmc::EventSpec s = pmc::parse_event(event);
        CHECK_FALSE(pmc::kernel_fallback_applies(s, s.attr));
    }

    // The probe and the attr `pmc encode --like-perf-stat` prints, under an injected refusal...
    {
        RefuseKernelMode refuse;
        CHECK_FALSE(pmc::kernel_counting_allowed());
        const perf_event_attr a = pmc::as_this_user_opens_it(faults, faults.attr);
        CHECK(a.exclude_kernel == (perf_falls_back() ? 1 : 0));
        const pmc::EventSpec k = pmc::parse_event("page-faults:k");
        CHECK(pmc::as_this_user_opens_it(k, k.attr).exclude_kernel == 0);
    }
    {
        pmc_test::FailingPerfEventOpen<ENOENT> other; // a failure that is no refusal of kernel mode
        CHECK(pmc::kernel_counting_allowed());
    }
    // ...and for real: kernel mode is allowed exactly where a kernel-mode software event opens without fallback.
    pmc::OpenOptions strict;
    strict.exclude_kernel_fallback = false;
    CHECK(pmc::kernel_counting_allowed() == pmc::Counter::try_open("task-clock", strict).ok());
}

namespace {
/// What an unprivileged user at perf_event_paranoid >= 2 gets, for real. 0, or the first check that failed (said
/// on stderr: it may run in a child).
int check_as_unprivileged_user() {
    auto fail = [](int code, const std::string& why) {
        std::fprintf(stderr, "unprivileged check %d failed: %s\n", code, why.c_str());
        return code;
    };
    if (pmc::kernel_counting_allowed()) return fail(1, "this user may count kernel mode");
    auto c = pmc::Counter::try_open("page-faults"); // the README's quickstart
    if (!c) return fail(2, c.failure().message);
    if (!c->attr().exclude_kernel || !c->attr().exclude_hv) return fail(3, "page-faults did not fall back");
    if (joined(c->notes()).find("as perf does (perf_event_paranoid") == std::string::npos)
        return fail(4, "no note: " + joined(c->notes()));
    pmc_test::FreshPages pages(64);
    auto iv = c->interval();
    pages.touch();
    if (const auto n = iv.stop(); n < 64) return fail(5, "page faults counted: " + std::to_string(n));
    auto k = pmc::Counter::try_open("page-faults:k");
    if (k || (k.failure().code.value() != EACCES && k.failure().code.value() != EPERM))
        return fail(6, "page-faults:k was not refused");
    pmc::OpenOptions strict;
    strict.exclude_kernel_fallback = false;
    auto refused = pmc::Counter::try_open("task-clock", strict);
    if (refused) return fail(7, "task-clock opened in kernel mode without the fallback");
    if (refused.failure().message.find("':u'") == std::string::npos) return fail(8, refused.failure().message);
    auto g = pmc::Group::try_open({"task-clock", "page-faults", "context-switches"});
    if (!g) return fail(9, g.failure().message);
    if (pmc::name_as_opened(g->event(1), g->attr(1)) != "page-faults:u") return fail(10, "group names");
    return 0;
}
} // namespace

TEST_CASE("for real as an unprivileged user: the quickstart's page-faults opens, in user mode only",
          "[system][unprivileged]") {
    const auto level = pmc::perf_event_paranoid();
    if (!level || *level < 2)
        PMC_SKIP("perf_event_paranoid is " + paranoid_text() +
                 ": users may count kernel mode, nothing to fall back from");
    if (::geteuid() == 0) {
        const int status = pmc_test::in_child([] {
            if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) return 100;
            return check_as_unprivileged_user();
        });
        CHECK(status == 0);
        return;
    }
    if (pmc::kernel_counting_allowed())
        PMC_SKIP("this user may count kernel mode (CAP_PERFMON?): nothing to fall back from");
    CHECK(check_as_unprivileged_user() == 0);
}

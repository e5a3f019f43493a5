// Several events and several threads on the real kernel (software events: they need no PMU).
#include "catch.hpp"
#include "fake_sysfs.hpp"
#include "inject.hpp"
#include "test_support.hpp"

#include <pmc/group.hpp>
#include <pmc/threads.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <thread>
#include <vector>

using pmc_test::FreshPages;

TEST_CASE("a group of four software events counts together", "[system][group]") {
    pmc::Group g{"task-clock", "page-faults", "minor-faults", "context-switches"};
    CHECK(g.size() == 4);
    CHECK(g.path() == pmc::ReadPath::syscall); // software events are never on a hardware counter
    FreshPages pages(128);
    auto iv = g.interval();
    pages.touch();
    timespec ms{0, 2000000};
    ::nanosleep(&ms, nullptr); // one voluntary context switch
    const auto& counts = iv.stop();
    for (std::size_t i = 0; i < g.size(); ++i) {
        INFO(g.name(i));
        CHECK(counts[i].counted);
        CHECK(counts[i].running_fraction == 1.0); // software events are never multiplexed
        CHECK(counts[i].estimate == Approx(static_cast<double>(counts[i].raw)));
    }
    CHECK(iv["page-faults"].raw >= 128);
    CHECK(iv["page-faults"].raw <= 128 + 32 + pmc_test::sanitizer_fault_slack(128));
    CHECK(iv["minor-faults"].raw >= 128);
    CHECK(iv["context-switches"].raw >= 1);
    CHECK(iv["task-clock"].raw > 0);
    // The times come with every reading.
    auto r = g.read();
    CHECK(r.time_enabled >= r.time_running);
    CHECK(r.time_running > 0);
}

TEST_CASE("group members are addressed by name, and bad groups are refused", "[system][group]") {
    pmc::Group named{"page-faults", "software/config=2,name=faults-again/"};
    CHECK(named.name(1) == "faults-again");
    CHECK(named.index("faults-again") == 1);
    CHECK_THAT(pmc::Group::try_open({}).failure().message, ContainsSubstring("at least one event"));
    CHECK_THAT(pmc::Group::try_open({"page-faults", "wall-time"}).failure().message, ContainsSubstring("pmc's clock"));
    CHECK_THAT(pmc::Group::try_open({"page-faults", "page-faults"}).failure().message, ContainsSubstring("twice"));
    CHECK_THAT(pmc::Group::try_open({"page-faults", "bogus-event"}).failure().message, ContainsSubstring("unknown event"));
    if (!pmc::has_core_pmu())
        CHECK_THAT(pmc::Group::try_open({"task-clock", "instructions:u"}).failure().message,
                   ContainsSubstring("no hardware PMU"));
}

TEST_CASE("page faults caused on three threads add up in a PerThread total", "[system][threads]") {
    pmc::PerThread<> faults{"minor-faults"};
    std::vector<std::thread> pool;
    for (int t = 0; t < 3; ++t)
        pool.emplace_back([&faults, t] {
            pmc::Counter& mine = faults.local();
            CHECK(&mine == &faults.local()); // one counter per thread
            FreshPages pages(static_cast<std::size_t>(100 * (t + 1)));
            pages.touch();
        });
    for (auto& t : pool) t.join();
    CHECK(faults.threads() == 3);
    const std::uint64_t total = faults.total(); // all three have exited: their final counts were kept
    CHECK(total >= 600);
    CHECK(total <= 600 + 3 * 40 + pmc_test::sanitizer_fault_slack(600));
    CHECK_THROWS_AS(pmc::PerThread<>{"wall-time"}, pmc::error);
}

TEST_CASE("a PerThread total reads threads that are still running", "[system][threads]") {
    pmc::PerThread<> faults{"minor-faults"};
    std::atomic<int> stage{0};
    std::thread worker([&] {
        faults.local();
        FreshPages pages(200);
        pages.touch();
        stage = 1;
        while (stage.load() != 2) std::this_thread::yield();
    });
    while (stage.load() != 1) std::this_thread::yield();
    CHECK(faults.total() >= 200); // read across threads with read(): the worker's own count
    stage = 2;
    worker.join();
    CHECK(faults.total() >= 200);
}

TEST_CASE("count_children counts a child thread's and a child process's page faults", "[system][threads]") {
    pmc::OpenOptions children;
    children.count_children = true;
    pmc::Counter c{"minor-faults", children};
    CHECK(c.path() == pmc::ReadPath::syscall);
    CHECK_THAT(c.notes().back(), ContainsSubstring("rdpmc sees only the calling thread"));
    const std::uint64_t before = c.read();
    std::thread child([] {
        FreshPages pages(300);
        pages.touch();
    });
    child.join();
    const std::uint64_t after_thread = c.read();
    CHECK(after_thread - before >= 300);
    // A child process created after opening is counted too (its count arrives when it exits).
    const int status = pmc_test::in_child([] {
        FreshPages pages(200);
        pages.touch();
        return 0;
    });
    REQUIRE(status == 0);
    CHECK(c.read() - after_thread >= 200);
    // And such a counter may be read from any thread: it is the sum the kernel keeps.
    std::uint64_t from_other = 0;
    std::thread reader([&] { from_other = c.read(); });
    reader.join();
    CHECK(from_other >= after_thread);
    // A group can count children too.
    pmc::Group g({"page-faults", "minor-faults"}, children);
    auto iv = g.interval();
    std::thread t2([] {
        FreshPages pages(150);
        pages.touch();
    });
    t2.join();
    CHECK(iv.stop()[1].raw >= 150);
}

namespace {
/// A fake hybrid machine for the hybrid policies: cpu_core on CPUs 0-(n-1), cpu_atom beyond (none on 2 CPUs).
struct HybridTree {
    pmc_test::FakeSysfs base{false};
    explicit HybridTree(const std::string& core_cpus, const std::string& atom_cpus) {
        for (auto [name, type, cpus] :
             {std::tuple{"cpu_core", 4, core_cpus}, std::tuple{"cpu_atom", 10, atom_cpus}}) {
            const std::string dir = base.root() + "/" + name;
            ::mkdir(dir.c_str(), 0755);
            std::ofstream(dir + "/type") << type << "\n";
            std::ofstream(dir + "/cpus") << cpus << "\n";
        }
    }
};
std::map<int, std::uint64_t> g_fake_counts; // fd -> count, for the injected perf_event_open/read below
std::vector<perf_event_attr> g_opened;
} // namespace

TEST_CASE("hybrid CPUs: a generic event refuses an unpinned thread, or sums both core types on request", "[system][hybrid]") {
    HybridTree tree("0", "1"); // this thread may run on CPU 0 (P) and CPU 1 (E): not pinned
    pmc_test::SystemCallOverride inject;
    inject.calls().perf_event_open = [](perf_event_attr* attr, pid_t, int, int, unsigned long) {
        g_opened.push_back(*attr);
        const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        g_fake_counts[fd] = (attr->config >> 32) == 4 ? 700 : 300; // P-core part, E-core part
        return fd;
    };
    inject.calls().read = [](int fd, void* buf, std::size_t size) -> ssize_t {
        std::uint64_t v[3] = {g_fake_counts[fd], 100, 100};
        std::memcpy(buf, v, std::min(size, sizeof v));
        return static_cast<ssize_t>(std::min(size, sizeof v));
    };
    pmc::OpenOptions options;
    options.sysfs_root = tree.base.root();
    if (pmc::thread_affinity().size() < 2) return; // a one-CPU machine is pinned by definition
    auto refused = pmc::Counter::try_open("instructions:u", options);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.failure().message, ContainsSubstring("hybrid CPU"));
    CHECK_THAT(refused.failure().message, ContainsSubstring("pin_this_thread"));
    options.hybrid = pmc::HybridPolicy::sum_core_types;
    g_opened.clear();
    auto summed = pmc::Counter::try_open("instructions:u", options);
    REQUIRE(summed.ok());
    CHECK(summed->path() == pmc::ReadPath::syscall_sum);
    REQUIRE(g_opened.size() == 2);
    CHECK(g_opened[0].config == 0x0000000400000001ull); // instructions on cpu_core (type 4)
    CHECK(g_opened[1].config == 0x0000000a00000001ull); // and on cpu_atom (type 10)
    CHECK(summed->read() == 1000);
    for (int fd : {summed->fd()}) (void)fd;
}

// SPDX-License-Identifier: MIT
// The C API (include/pmc/pmc.h) over pmc's C++ profiler and counters. Every entry point is noexcept: a C++
// exception never crosses into C (or into another language's FFI); failures become pmc_last_error().
#include <pmc/pmc.h>

#include <pmc/counter.hpp>
#include <pmc/error.hpp>
#include <pmc/profiler.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pmc_counter {
    pmc::Counter counter;
    std::string event;
    std::string notes;
};

struct pmc_profiler {
    pmc::Profiler profiler;
    std::uint64_t serial = 0;           ///< tells this profiler's per-thread nesting from a closed one's
    std::mutex names_mutex;             ///< names: written when a label is interned, read for error messages
    std::uint32_t forks = 0;            ///< pmc::detail::profiler_forks at its start: another value in a fork() child,
                                        ///< where names_mutex may be held for ever by a thread that was not copied
    /// By label id (interned through this API; data() null: not yet), the texts in names_memory: mapped for the
    /// profiler, not the heap of whichever thread interned a label first (see pmc::detail::MappedArena).
    pmc::detail::MappedArena names_memory;
    std::pmr::vector<std::string_view> names{&names_memory};
};

namespace {

thread_local std::string last_error;
thread_local int last_errno = 0;

void set_error(int code, std::string message) noexcept {
    try {
        last_error = std::move(message);
    } catch (...) {
        last_error.clear(); // out of memory for the message itself: the code still says it
    }
    last_errno = code;
}

// The message of the exception being handled; call inside a catch block.
int take_current_exception(const char* what_failed) noexcept {
    try {
        throw;
    } catch (const pmc::error& e) {
        set_error(e.code().value() ? e.code().value() : EIO, e.what());
        return last_errno;
    } catch (const std::bad_alloc&) {
        set_error(ENOMEM, std::string(what_failed) + ": out of memory");
        return ENOMEM;
    } catch (const std::exception& e) {
        set_error(EIO, std::string(what_failed) + ": " + e.what());
        return EIO;
    } catch (...) {
        set_error(EIO, std::string(what_failed) + ": an unknown C++ exception");
        return EIO;
    }
}

std::atomic<std::uint64_t> next_serial{1};

pmc_profiler* make_profiler(pmc::Profiler p) {
    auto* out = new pmc_profiler;
    out->profiler = std::move(p);
    out->serial = next_serial.fetch_add(1, std::memory_order_relaxed);
    out->forks = pmc::detail::profiler_forks.load(std::memory_order_relaxed);
    return out;
}

// The labels open on this thread, per profiler, so that pmc_profiler_end can say at once (a return value and a
// message naming both labels) what pmc::Profiler::end reports in the file: an end that does not match the innermost
// open interval. A vector per thread and profiler: it allocates only when the nesting gets deeper than ever before.
struct OpenLabels {
    std::uint64_t serial = 0;
    std::vector<pmc_label> labels;
};
thread_local OpenLabels* open_cache = nullptr; // the one used last
thread_local std::vector<std::unique_ptr<OpenLabels>> open_all;

OpenLabels& open_labels(const pmc_profiler* p) {
    if (BOOST_LIKELY(open_cache != nullptr && open_cache->serial == p->serial)) return *open_cache;
    for (auto& o : open_all)
        if (o->serial == p->serial) return *(open_cache = o.get());
    // A closed profiler's entry, empty (its intervals ended), is reused before a new one is made.
    for (auto& o : open_all)
        if (o->labels.empty()) {
            o->serial = p->serial;
            return *(open_cache = o.get());
        }
    open_all.push_back(std::make_unique<OpenLabels>());
    open_all.back()->serial = p->serial;
    open_all.back()->labels.reserve(64); // as the profiler's own nesting: no allocation inside the first 64 levels
    return *(open_cache = open_all.back().get());
}

bool in_fork_child(const pmc_profiler* p) noexcept {
    return pmc::detail::profiler_forks.load(std::memory_order_relaxed) != p->forks;
}

std::string label_name(pmc_profiler* p, pmc_label label) {
    if (label == 0) return "none (0)";
    if (in_fork_child(p)) return "label " + std::to_string(label); // (names_mutex may be held for ever there)
    std::lock_guard<std::mutex> lock(p->names_mutex);
    if (label < p->names.size() && p->names[label].data()) return "'" + std::string(p->names[label]) + "'";
    return "label " + std::to_string(label);
}

// The caller's options, reading only the fields its struct has (`size`, from pmc_profiler_options_init).
bool has(const pmc_profiler_options* o, std::size_t offset, std::size_t bytes) { return offset + bytes <= o->size; }
#define PMC_C_HAS(o, field) has(o, offsetof(pmc_profiler_options, field), sizeof(o->field))

std::optional<pmc::ProfilerOptions> to_options(const pmc_profiler_options* o, const char* caller) {
    pmc::ProfilerOptions out;
    if (!o) return out;
    if (!PMC_C_HAS(o, path)) {
        set_error(EINVAL, std::string(caller) + ": the options' size is " + std::to_string(o->size) +
                              " bytes, too small for any field: fill them with pmc_profiler_options_init(&options, "
                              "sizeof options) first");
        return std::nullopt;
    }
    if (o->path) out.path = o->path;
    if (PMC_C_HAS(o, counters) && o->counters && *o->counters) {
        out.counters = pmc::split_event_list(o->counters); // pmc count -e's rule: an empty event is refused
        if (std::string why = pmc::empty_event_text(std::string(caller) + ": counters", o->counters, out.counters);
            !why.empty()) {
            set_error(EINVAL, why);
            return std::nullopt;
        }
    }
    if (PMC_C_HAS(o, page_bytes) && o->page_bytes) out.page_bytes = o->page_bytes;
    if (PMC_C_HAS(o, preallocate_bytes)) out.preallocate_bytes = o->preallocate_bytes;
    if (PMC_C_HAS(o, flush_on_fatal_signals)) out.flush_on_fatal_signals = o->flush_on_fatal_signals != 0;
    if (PMC_C_HAS(o, measure_cost)) out.measure_cost = o->measure_cost != 0;
    if (PMC_C_HAS(o, strict)) out.strict = o->strict != 0;
    return out;
}

} // namespace

extern "C" {

const char* pmc_last_error(void) noexcept { return last_error.c_str(); }
int pmc_last_errno(void) noexcept { return last_errno; }
const char* pmc_version(void) noexcept { return PMC_VERSION_STRING; }

pmc_counter* pmc_counter_open(const char* event) noexcept {
    if (!event) {
        set_error(EINVAL, "pmc_counter_open: the event string is NULL; pass an event such as \"page-faults\" or "
                          "\"instructions:u\" (docs/events.md, installed as share/doc/pmc/events.md)");
        return nullptr;
    }
    try {
        auto opened = pmc::Counter::try_open(event);
        if (!opened) {
            const pmc::Failure& f = opened.failure();
            set_error(f.code.value() ? f.code.value() : EINVAL, f.message);
            return nullptr;
        }
        auto* c = new pmc_counter{std::move(*opened), event, {}};
        for (const auto& note : c->counter.notes()) c->notes += (c->notes.empty() ? "" : "; ") + note;
        return c;
    } catch (...) {
        take_current_exception("pmc_counter_open");
        return nullptr;
    }
}

int pmc_counter_read(pmc_counter* counter, uint64_t* value) noexcept {
    if (value) *value = 0;
    if (!counter || !value) {
        set_error(EINVAL, std::string("pmc_counter_read: ") + (!counter ? "the counter is NULL (pmc_counter_open "
                                                                          "failed? pmc_last_error() said why)"
                                                                        : "the value pointer is NULL"));
        return EINVAL;
    }
    try {
        *value = counter->counter.read();
        return 0;
    } catch (...) {
        return take_current_exception("pmc_counter_read");
    }
}

const char* pmc_counter_event(const pmc_counter* counter) noexcept { return counter ? counter->event.c_str() : ""; }
const char* pmc_counter_notes(const pmc_counter* counter) noexcept { return counter ? counter->notes.c_str() : ""; }

void pmc_counter_close(pmc_counter* counter) noexcept { delete counter; }

void pmc_profiler_options_init(pmc_profiler_options* options, size_t size) noexcept {
    if (!options || size < sizeof options->size) return;
    pmc_profiler_options d{};
    const pmc::ProfilerOptions cpp;
    d.size = std::min(size, sizeof d);
    d.page_bytes = cpp.page_bytes;
    d.preallocate_bytes = cpp.preallocate_bytes;
    d.flush_on_fatal_signals = cpp.flush_on_fatal_signals ? 1 : 0;
    d.measure_cost = cpp.measure_cost ? 1 : 0;
    d.strict = cpp.strict ? 1 : 0;
    std::memcpy(options, &d, d.size); // never past the caller's struct
}

pmc_profiler* pmc_profiler_from_env(const pmc_profiler_options* defaults) noexcept {
    std::optional<pmc::ProfilerOptions> o;
    try {
        o = to_options(defaults, "pmc_profiler_from_env");
        if (!o) return nullptr;
    } catch (...) {
        take_current_exception("pmc_profiler_from_env");
        return nullptr;
    }
    try {
        auto p = pmc::Profiler::from_env(std::move(*o)); // says on stderr why it is off, if it is
        if (!p.enabled()) return nullptr;
        return make_profiler(std::move(p));
    } catch (const pmc::error& e) {
        // Only strict mode throws here: as the uncaught pmc::error would in C++, the program ends, and says why.
        std::fprintf(stderr, "pmc profiler: strict mode (PMC_PROFILE_STRICT): %s\n", e.what());
        std::fflush(stderr);
        std::abort();
    } catch (...) {
        take_current_exception("pmc_profiler_from_env");
        return nullptr;
    }
}

pmc_profiler* pmc_profiler_open(const pmc_profiler_options* options) noexcept {
    if (!options || (options->size >= offsetof(pmc_profiler_options, path) + sizeof options->path &&
                     (!options->path || !*options->path))) {
        set_error(EINVAL, "pmc_profiler_open: no profile path; set options.path (after pmc_profiler_options_init), "
                          "or use pmc_profiler_from_env for PMC_PROFILE");
        return nullptr;
    }
    try {
        auto o = to_options(options, "pmc_profiler_open");
        if (!o) return nullptr;
        return make_profiler(pmc::Profiler(std::move(*o)));
    } catch (...) {
        take_current_exception("pmc_profiler_open");
        return nullptr;
    }
}

void pmc_profiler_close(pmc_profiler* profiler) noexcept { delete profiler; } // ~Profiler is noexcept

int pmc_profiler_enabled(const pmc_profiler* profiler) noexcept { return profiler && profiler->profiler.enabled() ? 1 : 0; }

pmc_label pmc_profiler_label_n(pmc_profiler* profiler, const char* name, size_t length) noexcept {
    if (!profiler) return 0;
    if (!name) {
        set_error(EINVAL, "pmc_profiler_label: the name is NULL");
        return 0;
    }
    try {
        // A lock other threads may hold, a copy: left out of this thread's intervals, as label() itself is.
        const pmc::ProfilerPause own_work = profiler->profiler.pause();
        const std::string_view text(name, length);
        const pmc_label id = profiler->profiler.label(text).id;
        if (in_fork_child(profiler)) return id; // its names are for messages: not worth a hang
        std::lock_guard<std::mutex> lock(profiler->names_mutex);
        if (profiler->names.size() <= id) profiler->names.resize(id + 1);
        if (!profiler->names[id].data()) {
            char* copy = static_cast<char*>(profiler->names_memory.allocate(std::max<std::size_t>(length, 1), 1));
            std::memcpy(copy, text.data(), length);
            profiler->names[id] = std::string_view(copy, length);
        }
        return id;
    } catch (...) {
        take_current_exception("pmc_profiler_label");
        return 0;
    }
}

pmc_label pmc_profiler_label(pmc_profiler* profiler, const char* name) noexcept {
    return pmc_profiler_label_n(profiler, name, name ? std::strlen(name) : 0);
}

// begin/end: pmc::Profiler::begin and end (noexcept, as cheap as a scope), with this thread's open labels kept
// beside them for pmc_profiler_end's answer. The try blocks cost nothing unless a vector cannot grow.
void pmc_profiler_begin(pmc_profiler* profiler, pmc_label label, pmc_label arg) noexcept {
    if (!profiler) return;
    try {
        open_labels(profiler).labels.push_back(label);
    } catch (...) {
        take_current_exception("pmc_profiler_begin");
        return; // not begun: its end will say so
    }
    profiler->profiler.begin(pmc::Label{label}, pmc::Label{arg});
}

int pmc_profiler_end(pmc_profiler* profiler, pmc_label label) noexcept {
    if (!profiler) return 0;
    try {
        auto& open = open_labels(profiler).labels;
        profiler->profiler.end(pmc::Label{label}); // a mismatch is written to the file as a nesting error
        if (BOOST_LIKELY(!open.empty() && open.back() == label)) {
            open.pop_back();
            return 0;
        }
        set_error(EINVAL, "pmc_profiler_end(" + label_name(profiler, label) + "): " +
                              (open.empty() ? std::string("no interval is open on this thread")
                                            : "the innermost interval open on this thread is " +
                                                  label_name(profiler, open.back())) +
                              "; nothing was ended (the profile records the mismatch as a nesting error, which the "
                              "tools report). Each pmc_profiler_begin needs one pmc_profiler_end with the same "
                              "label, on the same thread, innermost first");
        return EINVAL;
    } catch (...) {
        return take_current_exception("pmc_profiler_end");
    }
}

// The recording calls: a try block costs nothing until something throws (a thread's first event registers it,
// which allocates its page and may fail).
void pmc_profiler_instant(pmc_profiler* profiler, pmc_label label, pmc_label arg) noexcept {
    if (!profiler) return;
    try {
        profiler->profiler.instant(pmc::Label{label}, pmc::Label{arg});
    } catch (...) {
        take_current_exception("pmc_profiler_instant");
    }
}

void pmc_profiler_integer(pmc_profiler* profiler, pmc_label label, uint64_t value, pmc_label arg) noexcept {
    if (!profiler) return;
    try {
        profiler->profiler.integer(pmc::Label{label}, value, pmc::Label{arg});
    } catch (...) {
        take_current_exception("pmc_profiler_integer");
    }
}

void pmc_profiler_thread_name(pmc_profiler* profiler, const char* name) noexcept {
    if (!profiler || !name) return;
    try {
        profiler->profiler.thread_name(name);
    } catch (...) {
        take_current_exception("pmc_profiler_thread_name");
    }
}

uint32_t pmc_profiler_depth(pmc_profiler* profiler) noexcept { return profiler ? profiler->profiler.depth() : 0; }

void pmc_profiler_end_to(pmc_profiler* profiler, uint32_t depth) noexcept {
    if (!profiler) return;
    profiler->profiler.end_to(depth);
    // This API's own list of open labels follows (it holds the begins made through it, the innermost last).
    try {
        auto& open = open_labels(profiler).labels;
        if (open.size() > depth) open.resize(depth);
    } catch (...) {
        take_current_exception("pmc_profiler_end_to");
    }
}

void pmc_profiler_flush(pmc_profiler* profiler) noexcept {
    if (!profiler) return;
    try {
        profiler->profiler.flush();
    } catch (...) {
        take_current_exception("pmc_profiler_flush");
    }
}

} // extern "C"

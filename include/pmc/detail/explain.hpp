// SPDX-License-Identifier: MIT
// pmc/detail/explain.hpp: turning a failed perf_event_open/mmap into a message that says what failed, why, and
// how to fix it. Only called on failure.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/emulated.hpp>
#include <pmc/error.hpp>
#include <pmc/event.hpp>
#include <pmc/pmu.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

PMC_BEGIN_NAMESPACE
namespace detail {

inline constexpr const char* paranoid_path = "/proc/sys/kernel/perf_event_paranoid";

/// kernel.perf_event_paranoid, if readable.
inline std::optional<int> perf_event_paranoid() {
    auto text = read_file(paranoid_path);
    if (!text) return std::nullopt;
    std::string_view t = trim(*text);
    bool negative = !t.empty() && t.front() == '-';
    if (negative) t.remove_prefix(1);
    auto v = parse_number(t);
    if (!v || *v > 100) return std::nullopt;
    return negative ? -static_cast<int>(*v) : static_cast<int>(*v);
}

inline const char* paranoid_meaning(int level) {
    if (level <= -1) return "no restrictions";
    if (level == 0) return "unprivileged users may count user and kernel mode, but not CPU-wide raw tracepoints";
    if (level == 1) return "unprivileged users may count user and kernel mode of their own processes";
    if (level == 2) return "unprivileged users may count user mode only (':u')";
    return "unprivileged users may not use perf events at all (a Debian/Ubuntu kernel setting)";
}

inline const char* errno_name(int err) {
    switch (err) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case E2BIG: return "E2BIG";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case ENOSPC: return "ENOSPC";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EOVERFLOW: return "EOVERFLOW";
    default: return "errno";
    }
}

/// The attr fields that are set, as "type=9 config=0x1 exclude_kernel=1 ...".
inline std::string describe_attr_fields(const perf_event_attr& a) {
    std::string s = concat({"type=", decimal(a.type), " config=", hex_digits(a.config)});
    auto add = [&](const char* name, std::uint64_t v, bool as_hex = false) {
        if (v) append(s, {" ", name, "=", as_hex ? hex_digits(v) : decimal(v)});
    };
    add("config1", a.config1, true);
    add("config2", a.config2, true);
    add("sample_period", a.sample_period);
    add("read_format", a.read_format, true);
    add("disabled", a.disabled);
    add("inherit", a.inherit);
    add("pinned", a.pinned);
    add("exclusive", a.exclusive);
    add("exclude_user", a.exclude_user);
    add("exclude_kernel", a.exclude_kernel);
    add("exclude_hv", a.exclude_hv);
    add("exclude_idle", a.exclude_idle);
    add("precise_ip", a.precise_ip);
    add("exclude_host", a.exclude_host);
    add("exclude_guest", a.exclude_guest);
    if (a.type == PERF_TYPE_BREAKPOINT) add("bp_type", a.bp_type);
    return s;
}

inline std::string list_pmus(std::string_view root) {
    std::string have;
    for (auto& n : pmu_names(root)) append(have, {have.empty() ? "" : ", ", n});
    return have.empty() ? "none" : have;
}

/// Why perf_event_open failed with `err` for `spec` (opened with `attr`), and what to do about it.
/// `user_only_refused`: the PMU also refused user-mode-only counting, so ':u' is no fix to offer.
inline Failure explain_open_failure(int err, const EventSpec& spec, const perf_event_attr& attr,
                                    std::string_view sysfs_root = default_sysfs_root,
                                    bool user_only_refused = false) {
    std::string msg = concat({"cannot open counter '", spec.text, "': perf_event_open failed with ", errno_name(err),
                              " (", std::strerror(err), ").\n"});
    const bool counts_kernel = !attr.exclude_kernel;
    switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
        if (spec.core_pmu && !has_core_pmu(sysfs_root)) {
            append(msg, {"This machine has no hardware PMU: ", sysfs_root, " lists no cpu PMU (it has: ",
                         list_pmus(sysfs_root), ")."});
            if (under_hypervisor())
                msg += " The CPU reports a hypervisor: this is a virtual machine without a virtual PMU?";
            msg += "\nFix: run on bare metal, or enable the guest PMU (QEMU/KVM: -cpu host,pmu=on; libvirt: "
                   "<pmu state='on'/>; VMware: 'Virtualize CPU performance counters'; cloud: a bare-metal or "
                   "PMU-enabled instance type). Without it, software events (task-clock, page-faults, "
                   "context-switches) and pmc's wall-time and tsc counters still work, and msr/tsc/ where "
                   "kernel.perf_event_paranoid is at most 1 or with CAP_PERFMON (it counts kernel mode too). For "
                   "exact instruction counts without a PMU, run the program under `pmc emulate` (QEMU user mode with "
                   "pmc's plugin: docs/emulated-pmu.md, installed as share/doc/pmc/emulated-pmu.md).";
            // The emulator answers these only with its models on: name the flag, not a second error away.
            if (is_modelled_cache_event_name(spec.text))
                msg += " This event comes from its cache model: `pmc emulate --cache -- PROGRAM`.";
            else if (is_branch_count_event_name(spec.text) || is_modelled_branch_event_name(spec.text))
                msg += " This event comes from its branch model: `pmc emulate --branches -- PROGRAM`.";
        } else if (err == ENOENT) {
            append(msg, {"The kernel has no such event: ", describe_attr_fields(attr),
                         ".\nFix: check the event name or code against `pmc list` and your CPU's event tables."});
        } else {
            append(msg, {"The PMU cannot count this event the way it was asked: ", describe_attr_fields(attr),
                         ".\nFix: drop modifiers this PMU may not support (precise 'p' levels, ':u'/':k' on uncore "
                         "and msr PMUs, ':D'/':e')."});
        }
        break;
    case EACCES:
    case EPERM: {
        auto level = perf_event_paranoid();
        msg += "The kernel refused permission. ";
        if (level) {
            append(msg, {"kernel.perf_event_paranoid is ", decimal(*level), " (", paranoid_path, "): ",
                         paranoid_meaning(*level), "."});
        } else {
            append(msg, {"kernel.perf_event_paranoid could not be read from ", paranoid_path, "."});
        }
        if (counts_kernel) msg += " This event also counts kernel mode (no ':u').";
        msg += "\nFix:";
        if (counts_kernel && !user_only_refused && (!level || *level <= 2))
            msg += " count user mode only by adding ':u' (e.g. 'instructions:u'); or";
        msg += " lower the setting: sudo sysctl kernel.perf_event_paranoid=";
        msg += counts_kernel ? "1" : "2";
        msg += "; or give the program CAP_PERFMON: sudo setcap cap_perfmon+ep ./your-program. Inside a container, "
               "the seccomp profile may block perf_event_open (Docker: --cap-add PERFMON or a profile that allows "
               "it).";
        break;
    }
    case EMFILE: {
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        auto count = [](rlim_t v) {
            Digits d = decimal(v);
            if (v == RLIM_INFINITY) d = Digits{"unlimited", 9};
            return d;
        };
        append(msg, {"This process has reached its limit of open files (RLIMIT_NOFILE = ", count(lim.rlim_cur),
                     ", hard limit ", count(lim.rlim_max), "); every counter holds one file descriptor.\nFix: close "
                     "counters you no longer read"});
        if (lim.rlim_cur < lim.rlim_max) {
            // Anyone may raise the soft limit up to the hard one.
            const bool unlimited = lim.rlim_max == RLIM_INFINITY;
            append(msg, {", or raise the limit up to the hard limit: `ulimit -n ",
                         unlimited ? std::string_view("N") : std::string_view(count(lim.rlim_max)),
                         unlimited ? "` (up to fs.nr_open)" : "`",
                         " in the shell that starts the program, or setrlimit(RLIMIT_NOFILE) in it."});
        } else {
            msg += ". The hard limit is reached too: raising it needs root (CAP_SYS_RESOURCE): the nofile entry in "
                   "/etc/security/limits.conf, LimitNOFILE= for a systemd service, or --ulimit nofile=N:N for a "
                   "container; then ulimit -n N.";
        }
        break;
    }
    case ENFILE:
        msg += "The whole system is out of file descriptors.\nFix: raise fs.file-max or close files elsewhere.";
        break;
    case EINVAL:
        append(msg, {"The kernel rejected these attributes: ", describe_attr_fields(attr), ".\n"});
        if (spec.pmu == "msr" && (attr.exclude_user || attr.exclude_kernel || attr.exclude_hv))
            msg += "Fix: the msr PMU counts in every mode and cannot filter; drop the ':u'/':k'/':h' modifier.";
        else if (spec.guest_host_explicit && (attr.exclude_guest || attr.exclude_host))
            msg += "Fix: this PMU cannot tell guest from host mode; drop the ':G'/':H' modifier.";
        else if (attr.precise_ip)
            append(msg, {"Fix: this PMU may not support precise_ip=", decimal(attr.precise_ip),
                         "; drop 'p' modifiers (they matter only for sampling)."});
        else
            append(msg, {"Fix: common causes are a PMU that cannot filter by mode (uncore, msr: drop ':u'/':k'), "
                         "reserved bits in a raw config, or a term value the PMU does not accept; compare with "
                         "`perf stat -vv -e '", spec.text, "' true`."});
        break;
    case E2BIG:
        append(msg, {"The kernel is older than the perf_event_attr pmc was built with (size ", decimal(attr.size),
                     ").\nFix: build pmc against the running kernel's headers, or upgrade the kernel."});
        break;
    case EBUSY:
        msg += "The counter is held exclusively by another user (a pinned or exclusive event, or another "
               "profiler).\nFix: stop the other perf user, or drop ':D'/':e'.";
        break;
    case ENOSPC:
        msg += "No free hardware breakpoint slot (x86 has four debug registers).\nFix: open fewer mem: events.";
        break;
    case ENOSYS:
        if (emulated_pmu()) {
            append(msg, {"This program runs under pmc emulate (QEMU user mode), which does not implement "
                         "perf_event_open: ", emulated_refusal(spec), ".\nUnder the emulator: instructions:u (exact, "
                         "emulated), wall-time and tsc; ", emulated_model_events_text(), "."});
        } else if (under_qemu_tcg()) {
            msg += "This program runs under QEMU's TCG emulator (CPUID says TCGTCGTCGTCG), whose user mode does not "
                   "implement perf_event_open.\nFix: for exact instruction counts run it under `pmc emulate -- "
                   "PROGRAM` (pmc's plugin is the PMU there); for other events run it without the emulator.";
        } else {
            msg += "This kernel was built without perf events (CONFIG_PERF_EVENTS).\nFix: use a kernel with perf "
                   "support.";
        }
        break;
    default:
        append(msg, {"Attributes: ", describe_attr_fields(attr), "."});
        break;
    }
    return make_failure(err, msg);
}

} // namespace detail
PMC_END_NAMESPACE

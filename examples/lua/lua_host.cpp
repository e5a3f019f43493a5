// SPDX-License-Identifier: MIT
// pmc-example-lua: a Lua 5.4 interpreter whose every Lua function call is a profiled interval.
//
//     PMC_PROFILE=base.pmcprof ./pmc-example-lua                  # the built-in workload, wall-time
//     PMC_PROFILE=new.pmcprof ./pmc-example-lua --plant 1000      # the planted change, in checksum alone
//     PMC_PROFILE=run.pmcprof PMC_PROFILE_COUNTERS=instructions:u pmc emulate -- ./pmc-example-lua script.lua
//     pmc summarize base.pmcprof; pmc diff base.pmcprof -- new.pmcprof
//
// Lua calls a hook where a function is called and where it returns, in two calls: no scope can span that, so each
// call is a Profiler::begin ... end interval. The label is the function's name where it was first called and where
// it is defined ("fannkuch (workload:12)"), worked out once per function and then found by a hash lookup keyed by
// the function's source and first line. C functions (the standard library) record nothing: their time is their
// Lua caller's self value.
#include <pmc/profiler.hpp>

#include <command_line.hpp>

#include <lua.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

extern "C" {
int pmc_example_lua_repeatable = 1; // repeatable.cpp: time() and clock() answer a fixed value
}

namespace {

constexpr const char* help = R"(usage: pmc-example-lua [--plant N] [--scale N] [--no-repeatable] [SCRIPT [ARGS...]]

A Lua 5.4 interpreter (Debian's liblua5.4, linked in) that records every Lua function call as an
interval of pmc::Profiler when PMC_PROFILE names a file (PMC_PROFILE_COUNTERS chooses the counters;
default wall-time), labelled by the function's name and where it is defined. Runs SCRIPT with ARGS
as Lua's arg table, or without SCRIPT a built-in workload (fannkuch, binary trees, word counts over
hashed strings, a sieve, closures, string building, a sort). Then: pmc summarize FILE.

Options:
  --plant N        A change of known size: the C function plant(), which the built-in workload's
                   checksum calls 64 times, runs a loop of exactly 2 x N more instructions (x86-64,
                   AArch64), in checksum's self value alone; under an exact counter (pmc emulate)
                   pmc diff reports exactly 128 x N there. Scripts may call plant() too.
  --scale N        The built-in workload's size (default 1; from 1 to 1000).
  --no-repeatable  Lua's hash seed and sort pivots from the real time() and clock(). By default
                   both answer a fixed value (os.time() too, and os.clock() answers 0). Lua
                   mixes addresses into the seed as well: runs repeat where the addresses do
                   (under pmc emulate, or setarch -R).
  -h, --help       Show this help.

Coroutines, and errors caught by pcall, unwind past the return hooks of the functions they leave:
the profile then holds nesting errors, which pmc summarize reports (the built-in workload has none).
)";

// The built-in workload: deterministic, of interpreter size (about 150,000 Lua calls at --scale 1).
constexpr const char* workload = R"LUA(
local scale = tonumber(arg and arg.scale) or 1

local function fannkuch(n)
  local perm, perm1, count = {}, {}, {}
  local maxflips, checksum, r, nperm = 0, 0, n, 0
  for i = 0, n - 1 do perm1[i] = i end
  while true do
    while r ~= 1 do count[r - 1] = r; r = r - 1 end
    for i = 0, n - 1 do perm[i] = perm1[i] end
    local flips, k = 0, perm[0]
    while k ~= 0 do
      local i, j = 0, k
      while i < j do perm[i], perm[j] = perm[j], perm[i]; i = i + 1; j = j - 1 end
      flips = flips + 1
      k = perm[0]
    end
    if flips > maxflips then maxflips = flips end
    checksum = checksum + (nperm % 2 == 0 and flips or -flips)
    while true do
      if r == n then return checksum, maxflips end
      local perm0 = perm1[0]
      for i = 0, r - 1 do perm1[i] = perm1[i + 1] end
      perm1[r] = perm0
      count[r] = count[r] - 1
      if count[r] > 0 then break end
      r = r + 1
    end
    nperm = nperm + 1
  end
end

local function make_tree(depth)
  if depth == 0 then return {} end
  depth = depth - 1
  return { make_tree(depth), make_tree(depth) }
end

local function check_tree(tree)
  if tree[1] then return 1 + check_tree(tree[1]) + check_tree(tree[2]) end
  return 1
end

local function binary_trees(depth)
  local total = 0
  for d = 4, depth, 2 do
    for _ = 1, 2 ^ (depth - d) do total = total + check_tree(make_tree(d)) end
  end
  return total
end

local function word(i)
  return string.format("w%x_%d", (i * 7919) % 4099, i % 13)
end

local function word_counts(n)
  local counts = {}
  for i = 1, n do
    local w = word(i)
    counts[w] = (counts[w] or 0) + 1
  end
  local total, distinct = 0, 0
  for w, c in pairs(counts) do total = total + c * #w; distinct = distinct + 1 end
  return total, distinct
end

local function sieve(n)
  local composite, primes = {}, 0
  for i = 2, n do
    if not composite[i] then
      primes = primes + 1
      for j = i * i, n, i do composite[j] = true end
    end
  end
  return primes
end

local function counter(step)
  local value = 0
  return function() value = value + step; return value end
end

local function closures(n)
  local sum = 0
  for i = 1, n do
    local next_value = counter(i % 5 + 1)
    sum = sum + next_value() + next_value()
  end
  return sum
end

local function build_text(n)
  local parts = {}
  for i = 1, n do parts[#parts + 1] = tostring(i * 3) end
  return #table.concat(parts, ",")
end

local function sorted(n)
  local t = {}
  for i = 1, n do t[i] = (i * 48271) % 2147483647 % 10007 end
  table.sort(t, function(a, b) return a > b end)
  return t[1] + t[n]
end

local function checksum(values)
  local sum = 0
  for _, v in ipairs(values) do sum = (sum * 31 + v) % 1000000007 end
  plant()
  return sum
end

local results = {}
for round = 1, 64 do
  local values = {}
  if round % 16 == 1 then values[#values + 1] = fannkuch(6) end
  if round % 8 == 2 then values[#values + 1] = binary_trees(8) end
  values[#values + 1] = word_counts(300 * scale)
  values[#values + 1] = sieve(2000 * scale)
  values[#values + 1] = closures(200 * scale)
  values[#values + 1] = build_text(200 * scale)
  if round % 4 == 3 then values[#values + 1] = sorted(500 * scale) end
  results[#results + 1] = checksum(values)
end
local total = 0
for _, v in ipairs(results) do total = (total + v) % 1000000007 end
print(string.format("workload: 64 rounds at scale %d, checksum %d", scale, total))
)LUA";

/// --plant's work: a loop of exactly 2 * n instructions (dec + jnz, or subs + b.ne), n >= 1, plus a call's constant.
/// Always run (with 1 + N), so that a planted N changes the count by exactly 2 * N.
__attribute__((noinline)) void known_work(std::uint64_t n) {
#if defined(__x86_64__)
    asm volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#elif defined(__aarch64__)
    asm volatile("1:\n\tsubs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
    for (volatile std::uint64_t i = 0; i < n; i = i + 1) {
    }
#endif
}

std::uint64_t planted = 0;
int lua_plant(lua_State*) {
    known_work(1 + planted);
    return 0;
}

/// What the hooks need: the profiler, the labels by function, and the labels of the calls open now.
struct Recorder {
    pmc::Profiler& prof;
    struct Key {
        const char* source; ///< the function's chunk text's name: one string per chunk, alive while its code is
        int line;
        bool operator==(const Key& o) const { return source == o.source && line == o.line; }
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const {
            return std::hash<const void*>()(k.source) ^ (static_cast<std::size_t>(k.line) * 0x9e3779b97f4a7c15u);
        }
    };
    std::unordered_map<Key, pmc::Label, KeyHash> labels;
    std::vector<pmc::Label> open;

    pmc::Label label_of(lua_State* L, lua_Debug* ar) {
        const Key key{ar->source, ar->linedefined};
        if (auto it = labels.find(key); it != labels.end()) return it->second;
        // Once per function: its name where first called ("?" for one without: a method through a table of
        // handlers), and where it is defined.
        lua_getinfo(L, "n", ar);
        std::string name = ar->what[0] == 'm' ? std::string("main chunk")
                           : ar->name         ? std::string(ar->name)
                                              : std::string("?");
        name += " (" + std::string(ar->short_src) + ":" + std::to_string(ar->linedefined) + ")";
        return labels.emplace(key, prof.label(name)).first->second;
    }
    void leave() {
        if (open.empty()) return;
        prof.end(open.back());
        open.pop_back();
    }
};
Recorder* recorder = nullptr;

void hook(lua_State* L, lua_Debug* ar) {
    Recorder& r = *recorder;
    lua_getinfo(L, "S", ar);
    if (ar->what[0] == 'C') return; // C functions: their Lua caller's self value
    if (ar->event == LUA_HOOKRET) return r.leave();
    const pmc::Label label = r.label_of(L, ar);
    if (ar->event == LUA_HOOKTAILCALL) r.leave(); // the caller's frame is reused: it returns through the callee
    r.open.push_back(label);
    r.prof.begin(label);
}

int report(lua_State* L, int status) {
    if (status == LUA_OK) return 0;
    const char* message = lua_tostring(L, -1);
    std::fprintf(stderr, "pmc-example-lua: %s\n", message ? message : "(an error object that is not a string)");
    lua_pop(L, 1);
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    std::string plant_text, scale_text;
    bool no_repeatable = false;
    pmc_cli::CommandLine command_line("pmc-example-lua", help);
    command_line.option("--plant", plant_text, "a number from 0 to 1000000000");
    command_line.option("--scale", scale_text, "a number from 1 to 1000");
    command_line.flag("--no-repeatable", no_repeatable);
    command_line.command_follows(); // SCRIPT and its arguments, options of its own included
    if (auto status = command_line.parse(argc, argv)) return *status;
    std::uint64_t scale = 1;
    if (command_line.count("--plant") > 0) {
        const auto v = pmc_cli::whole_number(plant_text, 1000000000);
        if (!v) return command_line.usage_error("--plant needs a number from 0 to 1000000000, not '" + plant_text + "'");
        planted = *v;
    }
    if (command_line.count("--scale") > 0) {
        const auto v = pmc_cli::whole_number(scale_text, 1000);
        if (!v || *v == 0) return command_line.usage_error("--scale needs a number from 1 to 1000, not '" + scale_text + "'");
        scale = *v;
    }
    pmc_example_lua_repeatable = no_repeatable ? 0 : 1;
    const std::vector<std::string> rest = command_line.command();

    lua_State* L = luaL_newstate();
    if (!L) {
        std::fprintf(stderr, "pmc-example-lua: cannot create a Lua state (out of memory)\n");
        return 1;
    }
    luaL_openlibs(L);
    lua_register(L, "plant", lua_plant);
    // arg: the script's arguments (arg[0] the script), or for the workload its scale.
    lua_createtable(L, static_cast<int>(rest.size()), 1);
    for (std::size_t i = 0; i < rest.size(); ++i) {
        lua_pushstring(L, rest[i].c_str());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i));
    }
    lua_pushinteger(L, static_cast<lua_Integer>(scale));
    lua_setfield(L, -2, "scale");
    lua_setglobal(L, "arg");

    auto prof = pmc::Profiler::from_env(); // PMC_PROFILE=FILE turns it on
    Recorder r{prof, {}, {}};
    r.open.reserve(256);
    recorder = &r;
    // Compiled before the hook is set: loading records nothing, running records every Lua call.
    int status = rest.empty() ? luaL_loadbufferx(L, workload, std::char_traits<char>::length(workload), "=workload", "t")
                              : luaL_loadfile(L, rest[0].c_str());
    if (report(L, status)) return 1;
    if (prof.enabled()) lua_sethook(L, hook, LUA_MASKCALL | LUA_MASKRET, 0);
    status = lua_pcall(L, 0, 0, 0);
    lua_sethook(L, nullptr, 0, 0);
    while (!r.open.empty()) r.leave(); // what an error left open
    const int failed = report(L, status);
    lua_close(L);
    return failed;
}

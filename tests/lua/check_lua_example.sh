#!/bin/sh
# SPDX-License-Identifier: MIT
# The Lua example's checks (tests/lua/CMakeLists.txt): check_lua_example.sh MODE EXAMPLE PMC
#   record      the built-in workload's profile: each Lua function a label with the calls it made (checksum 64,
#               word 19200), summarize's exit status 0 (no nesting error); a script of its own with arguments, tail
#               calls (one interval per call, none left open) and recursion (folded stacks 5 deep)
#   repeatable  the pin of Lua's seed: a script printing a table's traversal order prints the same in two runs a
#               second apart at fixed addresses (setarch -R), and (--no-repeatable) not the same
#   plant-emulated  instructions:u under pmc emulate: two runs identical (the gate exits 0), --plant 1000 found
#               exactly (+128000 in checksum) and alone (skipped without qemu-user, or under ASan)
#   usage       --help, wrong arguments named, a missing script said
# Prints "ok:" or "FAILED:" per check, and "all checks passed" at the end when none failed.
set -u
mode=$1 example=$2 pmc=$3
failed=0
ok() { echo "ok:     $1"; }
fail() { echo "FAILED: $1"; failed=1; }
check() { if eval "$2"; then ok "$1"; else fail "$1"; fi; }
# A label's count, from summarize's JSON.
row() { grep -oE "\"label\":\"$1\",\"count\":[0-9]+" "$2" | head -1 | sed 's/.*://'; }

case $mode in
record)
    PMC_PROFILE=lua-record.pmcprof "$example" >lua-record.out || fail "the workload ran"
    cat lua-record.out
    "$pmc" summarize --json lua-record.pmcprof >lua-record.json
    check "pmc summarize reads the profile whole, no nesting error (status 0)" "[ $? -eq 0 ]"
    check "checksum: 64 calls" "[ \"$(row 'checksum \(workload:[0-9]+\)' lua-record.json)\" = 64 ]"
    check "word: 19200 calls (64 rounds x 300)" "[ \"$(row 'word \(workload:[0-9]+\)' lua-record.json)\" = 19200 ]"
    check "the main chunk: one call" "[ \"$(row 'main chunk \(workload:0\)' lua-record.json)\" = 1 ]"
    cat >lua-record-script.lua <<'LUA'
local function countdown(n) if n == 0 then return 0 end return countdown(n - 1) end -- tail calls
local function depth(n) if n == 0 then return 0 end return 1 + depth(n - 1) end     -- real recursion
local function twice(f, n) return f(n) + f(n) end
print(arg[0] ~= nil, arg[1], twice(countdown, tonumber(arg[1])), depth(4))
LUA
    out=$(PMC_PROFILE=lua-script.pmcprof "$example" lua-record-script.lua 7 -x)
    check "the script ran with its arguments (arg[1] = 7, its own -x left to it)" "[ \"$out\" = 'true	7	0	4' ]"
    "$pmc" summarize --json lua-script.pmcprof >lua-script.json
    check "its profile reads whole (status 0): tail calls leave nothing open" "[ $? -eq 0 ]"
    # (countdown is named f: a function's label has the name it was first called by, here twice's parameter)
    check "countdown: 16 calls (2 x 8, tail calls each an interval)" \
        "[ \"$(row 'f \(lua-record-script.lua:1\)' lua-script.json)\" = 16 ]"
    check "depth: 5 calls" "[ \"$(row 'depth \(lua-record-script.lua:2\)' lua-script.json)\" = 5 ]"
    "$pmc" export --folded lua-script.pmcprof -o lua-script.folded
    check "recursion nests: depth five levels deep under the main chunk" \
        "grep -q ';main chunk (lua-record-script.lua:0);depth (lua-record-script.lua:2);depth (lua-record-script.lua:2);depth (lua-record-script.lua:2);depth (lua-record-script.lua:2);depth (lua-record-script.lua:2) ' lua-script.folded"
    check "tail calls do not nest: countdown one level under twice" \
        "grep -q ';twice (lua-record-script.lua:3);f (lua-record-script.lua:1) ' lua-script.folded &&
         ! grep -q 'f (lua-record-script.lua:1);f' lua-script.folded"
    ;;
repeatable)
    cat >lua-order.lua <<'LUA'
local t = {}
for i = 1, 200 do t["key" .. i] = i end
local order = {}
for k in pairs(t) do order[#order + 1] = k end
print(table.concat(order, " "))
LUA
    # Lua mixes addresses into its seed too: at fixed addresses (setarch -R, as pmc emulate does), the time alone.
    norandom="setarch $(uname -m) -R"
    $norandom true 2>/dev/null || { echo "SKIPPED: setarch -R cannot turn address randomization off here"; exit 77; }
    a=$($norandom "$example" lua-order.lua); sleep 1.2; b=$($norandom "$example" lua-order.lua)
    check "two runs a second apart: the same traversal order" "[ -n \"$a\" ] && [ \"$a\" = \"$b\" ]"
    a=$($norandom "$example" --no-repeatable lua-order.lua); sleep 1.2
    b=$($norandom "$example" --no-repeatable lua-order.lua)
    check "--no-repeatable: another order (Lua's seed from the time)" "[ -n \"$a\" ] && [ \"$a\" != \"$b\" ]"
    ;;
plant-emulated)
    if [ "${PMC_SANITIZED:-0}" = 1 ]; then
        echo "SKIPPED: built with AddressSanitizer, whose shadow memory does not fit QEMU user mode's address space"
        exit 77
    fi
    why=$("$pmc" emulate -- /bin/true 2>&1) ||
        { echo "SKIPPED: pmc emulate cannot run here (scripts/install-deps installs qemu-user): $why"; exit 77; }
    # Command lines of one length (--plant 0000 against --plant 1000): Lua's hash seed mixes in a stack address.
    for run in 1 2 p; do
        plant=0000; [ $run = p ] && plant=1000
        PMC_PROFILE=lua-plant-$run.pmcprof PMC_PROFILE_COUNTERS=instructions:u "$pmc" emulate -- "$example" \
            --plant $plant >/dev/null || fail "emulated run $run"
    done
    "$pmc" diff --fail-on-change lua-plant-1.pmcprof lua-plant-2.pmcprof >lua-same.txt 2>&1
    check "two unchanged runs: the gate passes (status 0)" "[ $? -eq 0 ]"
    "$pmc" diff --fail-on-change lua-plant-1.pmcprof lua-plant-p.pmcprof >lua-plant.txt 2>lua-plant.err
    status=$?
    cat lua-plant.err
    check "--plant 1000: the gate fails (status 3) on one label" \
        "[ $status -eq 3 ] && grep -q '^pmc diff: --fail-on-change: 1 label changed' lua-plant.err"
    check "checksum changed by exactly 64 x 2 x 1000" \
        "grep -qE '^  checksum \(workload:[0-9]+\): changed by \+128000$' lua-plant.err"
    ;;
usage)
    "$example" --help >lua-help.txt
    check "--help: status 0, the usage" "[ $? -eq 0 ] && grep -q '^usage: pmc-example-lua' lua-help.txt"
    "$example" --plant x >/dev/null 2>lua-usage.err
    check "--plant x: status 1, said" "[ $? -eq 1 ] && grep -q 'needs a number' lua-usage.err"
    "$example" --scale 0 >/dev/null 2>lua-usage.err
    check "--scale 0: status 1, said" "[ $? -eq 1 ] && grep -q 'needs a number from 1' lua-usage.err"
    "$example" /nonexistent/script.lua >/dev/null 2>lua-usage.err
    check "a missing script: status 1, named" "[ $? -eq 1 ] && grep -q 'cannot open /nonexistent/script.lua' lua-usage.err"
    echo 'error("planted failure")' >lua-error.lua
    "$example" lua-error.lua >/dev/null 2>lua-usage.err
    check "a script's error: status 1, its message" "[ $? -eq 1 ] && grep -q 'planted failure' lua-usage.err"
    ;;
*) echo "check_lua_example.sh: unknown mode '$mode'"; exit 1 ;;
esac
[ $failed -eq 0 ] && echo "all checks passed"
exit $failed

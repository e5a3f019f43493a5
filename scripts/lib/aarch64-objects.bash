# SPDX-License-Identifier: MIT
# Sourced by scripts/cross-aarch64 and scripts/qemu-pmu: the AArch64 cross compiler, its flags and one object cache
# (BUILD_DIR/obj) that both fill, so the pmc command, the quickstart and Catch's runner are compiled once for the two.
#   aarch64_setup BUILD_DIR      the staging directory of host headers, the flags, the cache (emptied when the
#                                flags changed)
#   aarch64_compile SOURCE...    compiles what is missing or stale, as many at once as there are CPUs; returns 1
#                                when a compile failed (it leaves no object behind)
#   aarch64_objects SOURCE...    the objects of those sources, in order
# Needs: source_dir (pmc's source tree).

aarch64_cxx=aarch64-linux-gnu-g++

aarch64_setup() {
    aarch64_build_dir=$1
    mkdir -p "$aarch64_build_dir/deps" "$aarch64_build_dir/obj"
    # Host headers through a directory holding only boost/, fmt/, catch2/ and CLI/, so no host libc header shadows
    # the target's; {fmt} is header-only here.
    local dep
    for dep in boost fmt catch2 CLI; do ln -sfn "/usr/include/$dep" "$aarch64_build_dir/deps/$dep"; done
    aarch64_flags=(-std=c++17 -g0 -Wall -Wextra -DFMT_HEADER_ONLY -DPMC_CATCH2_V3=0 -I"$source_dir/include"
        -I"$source_dir/tests/support" -isystem "$aarch64_build_dir/deps" -pthread -DPMC_TOOL_PATH='"/bin/pmc"')
    local stamp="${aarch64_flags[*]} $(declare -f aarch64_optimization)"
    if [[ $(cat "$aarch64_build_dir/obj/flags" 2>/dev/null) != "$stamp" ]]; then
        rm -f "$aarch64_build_dir"/obj/*
        echo "$stamp" >"$aarch64_build_dir/obj/flags"
    fi
}

# -O1 compiles a third faster than -O2; the hardware suite gets -O2, as in a release build, for its figures; Catch's
# runner needs no optimization at all.
aarch64_optimization() {
    case $1 in
    */hardware/*) echo -O2 ;;
    */support/main.cpp) echo -O0 ;;
    *) echo -O1 ;;
    esac
}

aarch64_objects() {
    local src
    for src in "$@"; do echo "$aarch64_build_dir/obj/$(realpath --relative-to="$source_dir" "$src" | tr / _).o"; done
}

# An object is stale when its source or any header it included (the compiler's .d file) is newer.
aarch64_stale() {
    local obj=$1 dep
    [[ -f $obj && -f $obj.d ]] || return 0
    for dep in $(sed -e 's/\\$//' -e 's/^[^:]*://' "$obj.d"); do [[ $dep -nt $obj ]] && return 0; done
    return 1
}

aarch64_compile() {
    local src obj pid failed=0 pids=() jobs
    jobs=$(nproc)
    declare -A seen=()
    for src in "$@"; do
        obj=$(aarch64_objects "$src")
        [[ -n ${seen[$obj]:-} ]] && continue
        seen[$obj]=1
        aarch64_stale "$obj" || continue
        ("$aarch64_cxx" "${aarch64_flags[@]}" "$(aarch64_optimization "$src")" -MMD -MF "$obj.d" -c "$src" -o "$obj" ||
            { rm -f "$obj"; exit 1; }) &
        pids+=($!)
        if [[ $(jobs -rp | wc -l) -ge $jobs ]]; then wait -n || true; fi
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done # each job's own status
    return $failed
}

# SPDX-License-Identifier: MIT
# Driver for the consumer tests (tests/consumer/CMakeLists.txt): cmake -DSTEP=... -P run.cmake
#
#   STEP=install           configure pmc (PMC_SOURCE_DIR) with only its install rules, install into WORK_DIR/prefix,
#                          check the installed tree (headers, package files, the C library and its RUNPATH, the docs)
#   STEP=find_package      build and run tests/consumer/project against WORK_DIR/prefix; then configure it again
#                          with Boost hidden, which must fail and name Debian's libboost-dev
#   STEP=add_subdirectory  build and run tests/consumer/project with pmc's source tree as a subdirectory
#   STEP=fetchcontent      build and run tests/consumer/project with FetchContent (SOURCE_DIR, no network)
#   STEP=find_package_c    build and run tests/consumer/c_project (C11, find_package(pmc COMPONENTS c)) against
#                          WORK_DIR/prefix, with pmc::c and with pmc::c_static, with Boost hidden
#                          (CMAKE_DISABLE_FIND_PACKAGE_Boost): the C API needs no Boost; then with Boost, where
#                          pmc::pmc must be defined too
#   STEP=pkg_config        compile c_project/main.c with `cc $(pkg-config --cflags --libs pmc-c)` against
#                          WORK_DIR/prefix and run it the two ways docs/install.md gives: linked with
#                          -Wl,-rpath,$(pkg-config --variable=libdir pmc-c), and with LD_LIBRARY_PATH
#                          ("SKIPPED:" without pkg-config or cc)
#   STEP=installed_tools   `cmake --install PMC_BUILD_DIR --prefix WORK_DIR/tools-prefix --component tools` (the
#                          pmc program built by this build tree, as the README installs it), then check its RUNPATH
#                          (PMC_TOOL_RUNPATH) and run `pmc --help` and, where QEMU user mode is installed,
#                          `pmc emulate`, which must find its plugin in the prefix
#   STEP=version           find_package(pmc VERSION) against WORK_DIR/prefix accepts PMC_ACCEPT, rejects PMC_REJECT
#                          (comma-separated versions)
#   STEP=plain             compile project/main.cpp with a bare `CXX -std=c++17 -I<pmc>/include` and run it
#   STEP=strict            compile every header under include/ on its own (STRICT_EACH_HEADER; else all in one
#                          file), and strict/instantiate.cpp (pmc's templates instantiated), with STRICT_CXX and the
#                          strict warnings below, -Werror: a header-only library's warnings are every user's
#                          warnings. "SKIPPED:" without STRICT_CXX.
#
# Other variables: CONSUMER_DIR (tests/consumer), WORK_DIR (scratch, under the build tree), CXX (the compiler),
# GENERATOR, MAKE_PROGRAM, PMC_BUILD_DIR and PMC_TOOL_RUNPATH (installed_tools). Every command and its output is printed; the first failure ends the step with
# FATAL_ERROR. A consumer that cannot open perf events at all here (perf_event_open denied) prints
# "SKIPPED:", which ctest reports as skipped.
cmake_minimum_required(VERSION 3.16)

foreach(var STEP PMC_SOURCE_DIR CONSUMER_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(generator_args "")
if(GENERATOR)
  list(APPEND generator_args -G "${GENERATOR}")
endif()
if(MAKE_PROGRAM)
  list(APPEND generator_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

# Runs a command in WORK_DIR, prints it and its output; on failure ends the step with `what`.
function(run what)
  list(JOIN ARGN " " shown)
  message("-- ${what}\n   $ ${shown}")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  string(STRIP "${out}" out)
  if(out)
    string(REPLACE "\n" "\n   | " out "${out}")
    message("   | ${out}")
  endif()
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "FAILED (${STEP}): ${what}: exit status ${rc}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# Runs a command that must fail, with output matching `expected` (a regular expression).
function(run_must_fail what expected)
  list(JOIN ARGN " " shown)
  message("-- ${what} (must fail)\n   $ ${shown}")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  string(STRIP "${out}" out)
  string(REPLACE "\n" "\n   | " shown_out "${out}")
  message("   | ${shown_out}")
  if(rc STREQUAL "0")
    message(FATAL_ERROR "FAILED (${STEP}): ${what}: succeeded, but must fail")
  endif()
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "FAILED (${STEP}): ${what}: failed, but its output does not match '${expected}'")
  endif()
endfunction()

# The RUNPATH (or RPATH) of an ELF file, "" if it has none, into `out_var`; needs readelf.
function(elf_runpath file out_var)
  find_program(readelf NAMES readelf)
  if(NOT readelf)
    message(FATAL_ERROR "FAILED (${STEP}): readelf (binutils) is needed to read ${file}'s RUNPATH")
  endif()
  execute_process(COMMAND "${readelf}" -d "${file}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "FAILED (${STEP}): readelf -d ${file}: ${out}")
  endif()
  set(runpath "")
  if(out MATCHES "\\((RUNPATH|RPATH)\\)[^[]*\\[([^]]*)\\]")
    set(runpath "${CMAKE_MATCH_2}")
  endif()
  set(${out_var} "${runpath}" PARENT_SCOPE)
endfunction()

# Configures, builds and runs tests/consumer/project in WORK_DIR/<mode> with the given cache arguments.
function(consumer mode)
  set(dir "${WORK_DIR}/${mode}")
  file(REMOVE_RECURSE "${dir}")
  run("configure the consumer project (${mode})" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}/project" -B "${dir}"
      ${generator_args} "-DCMAKE_CXX_COMPILER=${CXX}" "-DPMC_CONSUMER_MODE=${mode}" ${ARGN})
  run("build the consumer project (${mode})" "${CMAKE_COMMAND}" --build "${dir}")
  run_consumer("${dir}/consumer")
endfunction()

function(run_consumer exe)
  message("-- run the consumer\n   $ ${exe}")
  execute_process(COMMAND "${exe}" WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  string(STRIP "${out}" out)
  string(REPLACE "\n" "\n   | " shown "${out}")
  message("   | ${shown}")
  if(rc STREQUAL "77" AND out MATCHES "SKIPPED: ")
    # perf_event_open refused for reasons of this machine, not of the package: ctest reports a skip.
    message("SKIPPED: see the consumer's output above")
  elseif(NOT rc STREQUAL "0")
    message(FATAL_ERROR "FAILED (${STEP}): the consumer program exited with ${rc} (its FAILED lines are above)")
  endif()
endfunction()

if(STEP STREQUAL "install")
  set(build "${WORK_DIR}/pmc-build")
  file(REMOVE_RECURSE "${build}" "${prefix}")
  run("configure pmc with only its install rules" "${CMAKE_COMMAND}" -S "${PMC_SOURCE_DIR}" -B "${build}"
      ${generator_args} "-DCMAKE_CXX_COMPILER=${CXX}" -DPMC_BUILD_TESTS=OFF -DPMC_BUILD_TOOLS=OFF
      -DPMC_BUILD_BENCH=OFF -DPMC_BUILD_EXAMPLES=OFF -DPMC_INSTALL=ON "-DCMAKE_INSTALL_PREFIX=${prefix}")
  run("build pmc (the headers, and the C API's library pmc::c)" "${CMAKE_COMMAND}" --build "${build}")
  run("install pmc into ${prefix}" "${CMAKE_COMMAND}" --install "${build}")

  # Every header of the source tree is installed, and the package files are where find_package looks.
  file(GLOB_RECURSE headers RELATIVE "${PMC_SOURCE_DIR}/include" "${PMC_SOURCE_DIR}/include/*.hpp")
  set(missing "")
  foreach(h IN LISTS headers)
    if(NOT EXISTS "${prefix}/include/${h}")
      list(APPEND missing "include/${h}")
    endif()
  endforeach()
  foreach(f pmcConfig.cmake pmcConfigVersion.cmake pmcTargets.cmake pmcCTargets.cmake)
    if(NOT EXISTS "${prefix}/share/cmake/pmc/${f}")
      list(APPEND missing "share/cmake/pmc/${f}")
    endif()
  endforeach()
  # The C API: its header, both libraries and the pkg-config file (in lib/ or lib/<multiarch>/).
  if(NOT EXISTS "${prefix}/include/pmc/pmc.h")
    list(APPEND missing "include/pmc/pmc.h")
  endif()
  foreach(f libpmc_c.so libpmc_c.a pkgconfig/pmc-c.pc)
    file(GLOB_RECURSE found "${prefix}/lib*/${f}")
    if(NOT found)
      list(APPEND missing "lib/${f}")
    endif()
  endforeach()
  # The docs, where error texts say they are (share/doc/pmc/NAME.md), with the images they show.
  file(GLOB docs RELATIVE "${PMC_SOURCE_DIR}/docs" "${PMC_SOURCE_DIR}/docs/*.md" "${PMC_SOURCE_DIR}/docs/images/*")
  foreach(f IN LISTS docs ITEMS ../README.md ../LICENSE)
    get_filename_component(name "${f}" NAME)
    if(f MATCHES "^images/")
      set(name "${f}")
    endif()
    if(NOT EXISTS "${prefix}/share/doc/pmc/${name}")
      list(APPEND missing "share/doc/pmc/${name}")
    endif()
  endforeach()
  if(missing)
    message(FATAL_ERROR "FAILED (install): missing from the install in ${prefix}: ${missing}")
  endif()
  # A prefix outside the system paths: the C library's RUNPATH names its own directory, the install's libdir.
  file(GLOB_RECURSE libpmc_c "${prefix}/lib*/libpmc_c.so")
  elf_runpath("${libpmc_c}" runpath)
  if(NOT runpath STREQUAL "$ORIGIN")
    message(FATAL_ERROR "FAILED (install): ${libpmc_c} has RUNPATH '${runpath}', not '$ORIGIN' (its libdir)")
  endif()
  if(EXISTS "${prefix}/bin")
    file(GLOB bins "${prefix}/bin/*")
    message(FATAL_ERROR "FAILED (install): PMC_BUILD_TOOLS=OFF installed programs anyway: ${bins}")
  endif()
  list(LENGTH headers n)
  list(LENGTH docs n_docs)
  message("-- ok: ${n} headers, the CMake package files and ${n_docs} docs are installed in ${prefix}; "
          "libpmc_c.so's RUNPATH is $ORIGIN")

elseif(STEP STREQUAL "find_package")
  if(NOT EXISTS "${prefix}/share/cmake/pmc/pmcConfig.cmake")
    message(FATAL_ERROR "FAILED (find_package): no install in ${prefix}; consumer-install must run first")
  endif()
  consumer(find_package "-DCMAKE_PREFIX_PATH=${prefix}" "-DPMC_EXPECT_PREFIX=${prefix}"
           "-DPMC_WANT_VERSION=${PMC_WANT_VERSION}")
  # The C++ library needs Boost's headers: asked for without them, find_package says which package to install.
  set(dir "${WORK_DIR}/find_package-no-boost")
  file(REMOVE_RECURSE "${dir}")
  run_must_fail("configure the consumer project with Boost hidden" "libboost-dev" "${CMAKE_COMMAND}"
                -S "${CONSUMER_DIR}/project" -B "${dir}" ${generator_args} "-DCMAKE_CXX_COMPILER=${CXX}"
                -DPMC_CONSUMER_MODE=find_package "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)

elseif(STEP STREQUAL "find_package_c")
  if(NOT EXISTS "${prefix}/share/cmake/pmc/pmcCTargets.cmake")
    message(FATAL_ERROR "FAILED (find_package_c): no pmc::c in ${prefix}; consumer-install must run first")
  endif()
  # Without Boost (as on a machine without it: the C API does not need it), and once with it.
  foreach(kind shared static shared-with-boost)
    set(dir "${WORK_DIR}/c-${kind}")
    file(REMOVE_RECURSE "${dir}")
    set(static OFF)
    if(kind STREQUAL "static")
      set(static ON)
    endif()
    set(hide_boost ON)
    if(kind MATCHES "with-boost")
      set(hide_boost OFF)
    endif()
    run("configure the C consumer project (pmc::c, ${kind})" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}/c_project"
        -B "${dir}" ${generator_args} "-DCMAKE_PREFIX_PATH=${prefix}" "-DPMC_CONSUMER_STATIC=${static}"
        "-DCMAKE_DISABLE_FIND_PACKAGE_Boost=${hide_boost}")
    run("build the C consumer project (${kind})" "${CMAKE_COMMAND}" --build "${dir}")
    run("run the C consumer (${kind})" "${dir}/consumer" "${dir}/profile.pmcprof")
    if(NOT last_output MATCHES "consumer: all checks passed")
      message(FATAL_ERROR "FAILED (find_package_c): the C consumer (${kind}) did not pass")
    endif()
  endforeach()

elseif(STEP STREQUAL "pkg_config")
  find_program(pkg_config NAMES pkg-config pkgconf)
  find_program(cc NAMES cc gcc clang)
  if(NOT pkg_config OR NOT cc)
    message("SKIPPED: pkg-config or a C compiler is not installed")
    return()
  endif()
  file(GLOB_RECURSE pc "${prefix}/lib*/pkgconfig/pmc-c.pc")
  if(NOT pc)
    message(FATAL_ERROR "FAILED (pkg_config): no pmc-c.pc in ${prefix}; consumer-install must run first")
  endif()
  get_filename_component(pc_dir "${pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run("pkg-config --cflags --libs pmc-c" "${pkg_config}" --cflags --libs pmc-c)
  set(pc_flags "${last_output}")
  separate_arguments(flags UNIX_COMMAND "${pc_flags}")
  run("pkg-config --variable=libdir pmc-c" "${pkg_config}" --variable=libdir pmc-c)
  set(pc_libdir "${last_output}")
  # The .pc gives no rpath, as is usual: a program built from a prefix outside the loader's paths is linked with
  # one (the first way docs/install.md gives) or run with LD_LIBRARY_PATH (the second).
  unset(ENV{LD_LIBRARY_PATH})
  foreach(way rpath ld_library_path)
    set(dir "${WORK_DIR}/pkg-config-${way}")
    file(REMOVE_RECURSE "${dir}")
    file(MAKE_DIRECTORY "${dir}")
    set(link_rpath "")
    if(way STREQUAL "rpath")
      set(link_rpath "-Wl,-rpath,${pc_libdir}")
    endif()
    run("compile the C consumer with pkg-config's flags ${link_rpath}" "${cc}" -std=c11 -Wall -Wextra -Wpedantic
        -Werror "${CONSUMER_DIR}/c_project/main.c" ${flags} ${link_rpath} -o "${dir}/consumer")
    if(way STREQUAL "ld_library_path")
      set(ENV{LD_LIBRARY_PATH} "${pc_libdir}")
    endif()
    # The loader must take libpmc_c.so from the prefix (not from an install elsewhere on this machine).
    run("which libpmc_c the loader takes (${way})" "${CMAKE_COMMAND}" -E env LD_TRACE_LOADED_OBJECTS=1
        "${dir}/consumer")
    get_filename_component(real_libdir "${pc_libdir}" REALPATH)
    if(NOT last_output MATCHES "libpmc_c[^\n]*=> (${pc_libdir}|${real_libdir})/libpmc_c")
      message(FATAL_ERROR "FAILED (pkg_config): the consumer (${way}) does not load libpmc_c from ${pc_libdir}")
    endif()
    run("run the C consumer (${way})" "${dir}/consumer" "${dir}/profile.pmcprof")
    if(NOT last_output MATCHES "consumer: all checks passed")
      message(FATAL_ERROR "FAILED (pkg_config): the C consumer (${way}) did not pass")
    endif()
    unset(ENV{LD_LIBRARY_PATH})
  endforeach()

elseif(STEP STREQUAL "installed_tools")
  foreach(var PMC_BUILD_DIR)
    if(NOT ${var})
      message(FATAL_ERROR "run.cmake: -D${var}=... is required for STEP=installed_tools")
    endif()
  endforeach()
  set(tools_prefix "${WORK_DIR}/tools-prefix")
  file(REMOVE_RECURSE "${tools_prefix}")
  # What the README says, into a prefix outside the system paths; only the tools' component, which ctest's build has.
  run("install the pmc program into ${tools_prefix}" "${CMAKE_COMMAND}" --install "${PMC_BUILD_DIR}"
      --prefix "${tools_prefix}" --component tools)
  set(pmc "${tools_prefix}/bin/pmc")
  # Its RUNPATH holds what this build chose (cmake/pmcInstallRpath.cmake); none is chosen for a system prefix.
  elf_runpath("${pmc}" runpath)
  string(REPLACE ":" ";" have "${runpath}")
  string(REPLACE ":" ";" want "${PMC_TOOL_RUNPATH}")
  foreach(entry IN LISTS want)
    if(NOT entry IN_LIST have)
      message(FATAL_ERROR "FAILED (installed_tools): ${pmc} has RUNPATH '${runpath}', without '${entry}'")
    endif()
  endforeach()
  message("-- ok: bin/pmc's RUNPATH is '${runpath}' (this build chose '${PMC_TOOL_RUNPATH}')")
  unset(ENV{PMC_EMULATE_LIBDIR}) # pmc emulate must find its plugin by itself
  unset(ENV{PMC_QEMU})
  run("run the installed pmc --help" "${pmc}" --help)
  if(NOT last_output MATCHES "usage: pmc")
    message(FATAL_ERROR "FAILED (installed_tools): `pmc --help` printed no usage")
  endif()
  # pmc emulate: the plugin and its preload library from the prefix's LIBDIR/pmc, beside nothing of the build tree.
  execute_process(COMMAND uname -m OUTPUT_VARIABLE machine OUTPUT_STRIP_TRAILING_WHITESPACE) # none in cmake -P
  set(qemu_name qemu-${machine})
  find_program(qemu NAMES ${qemu_name})
  if(NOT qemu)
    message("-- not run: pmc emulate (${qemu_name} is not installed: Debian's qemu-user)")
  else()
    run("run the installed pmc emulate -- env" "${pmc}" emulate -- env)
    if(NOT last_output MATCHES "PMC_EMULATE_PLUGIN=([^\n]*)")
      message(FATAL_ERROR "FAILED (installed_tools): the emulated env printed no PMC_EMULATE_PLUGIN")
    endif()
    set(plugin "${CMAKE_MATCH_1}")
    get_filename_component(real_prefix "${tools_prefix}" REALPATH)
    if(NOT plugin MATCHES "^${real_prefix}/lib[^/]*(/[^/]+)?/pmc/libpmc-qemu-plugin.so")
      message(FATAL_ERROR "FAILED (installed_tools): pmc emulate loaded ${plugin}, not the plugin in ${tools_prefix}")
    endif()
    message("-- ok: the installed pmc emulate ran env under QEMU with ${plugin}")
  endif()

elseif(STEP STREQUAL "add_subdirectory" OR STEP STREQUAL "fetchcontent")
  consumer(${STEP} "-DPMC_SOURCE_DIR=${PMC_SOURCE_DIR}")

elseif(STEP STREQUAL "version")
  if(NOT EXISTS "${prefix}/share/cmake/pmc/pmcConfigVersion.cmake")
    message(FATAL_ERROR "FAILED (version): no install in ${prefix}; consumer-install must run first")
  endif()
  set(dir "${WORK_DIR}/version")
  file(REMOVE_RECURSE "${dir}")
  run("find_package(pmc VERSION) against the install" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}/version" -B "${dir}"
      ${generator_args} "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" "-DPMC_ACCEPT=${PMC_ACCEPT}"
      "-DPMC_REJECT=${PMC_REJECT}")

elseif(STEP STREQUAL "plain")
  set(dir "${WORK_DIR}/plain")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  # What a user without CMake writes: the include directory, C++17, threads. Warnings are errors, since a
  # header-only library's warnings become every user's warnings. Boost's headers come from the default path.
  run("compile with a bare ${CXX} -std=c++17 -I${PMC_SOURCE_DIR}/include" "${CXX}" -std=c++17 -Wall -Wextra
      -Werror "-I${PMC_SOURCE_DIR}/include" "${CONSUMER_DIR}/project/main.cpp" -o "${dir}/consumer" -pthread)
  run_consumer("${dir}/consumer")

elseif(STEP STREQUAL "strict")
  if(NOT STRICT_CXX)
    message("SKIPPED: ${STRICT_NAME} is not installed, so pmc's headers are not compiled with it")
    return()
  endif()
  # What a demanding consumer turns on (both compilers know every one of these).
  set(warnings -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wold-style-cast -Wcast-qual
      -Wnon-virtual-dtor -Woverloaded-virtual -Wdouble-promotion -Wformat=2 -Wundef -Wnull-dereference
      -Wimplicit-fallthrough -Wextra-semi -Werror)
  set(dir "${WORK_DIR}/strict-${STRICT_NAME}")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  file(GLOB_RECURSE headers RELATIVE "${PMC_SOURCE_DIR}/include" "${PMC_SOURCE_DIR}/include/*.hpp")
  list(SORT headers)
  set(failed "")
  if(STRICT_EACH_HEADER)
    set(units ${headers})
  else()
    # Every header in one file: the warnings are the same, at a thirtieth of the time; whether each header is
    # self-contained is the other compiler's test (STRICT_EACH_HEADER).
    set(units all)
    set(all_text "")
    foreach(h IN LISTS headers)
      string(APPEND all_text "#include <${h}>\n")
    endforeach()
  endif()
  foreach(h IN LISTS units)
    # A header on its own must also be self-contained.
    string(MAKE_C_IDENTIFIER "${h}" name)
    if(h STREQUAL "all")
      file(WRITE "${dir}/${name}.cpp" "${all_text}")
    else()
      file(WRITE "${dir}/${name}.cpp" "#include <${h}>\n")
    endif()
    execute_process(COMMAND "${STRICT_CXX}" -std=c++17 ${warnings} "-I${PMC_SOURCE_DIR}/include" -fsyntax-only
                            "${dir}/${name}.cpp"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(rc STREQUAL "0")
      message("-- ok: ${h}")
    else()
      message("-- FAILED: ${h}\n${out}")
      list(APPEND failed "${h}")
    endif()
  endforeach()
  # Templates warn only where they are instantiated; -O2 for the warnings that need the optimizer's analysis.
  list(JOIN warnings " " shown)
  message("-- instantiate pmc's templates: ${STRICT_CXX} -std=c++17 -O2 ${shown} -c strict/instantiate.cpp")
  execute_process(COMMAND "${STRICT_CXX}" -std=c++17 -O2 ${warnings} "-I${PMC_SOURCE_DIR}/include" -c
                          "${CONSUMER_DIR}/strict/instantiate.cpp" -o "${dir}/instantiate.o"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc STREQUAL "0")
    message("-- FAILED: strict/instantiate.cpp\n${out}")
    list(APPEND failed "strict/instantiate.cpp")
  endif()
  if(failed)
    message(FATAL_ERROR "FAILED (strict, ${STRICT_NAME}): warnings (as errors) in: ${failed}")
  endif()
  list(LENGTH headers n)
  if(STRICT_EACH_HEADER)
    message("-- ok: ${n} headers, each on its own, and the instantiated templates compile without a warning under ${STRICT_CXX}")
  else()
    message("-- ok: ${n} headers, in one file, and the instantiated templates compile without a warning under ${STRICT_CXX}")
  endif()

else()
  message(FATAL_ERROR "run.cmake: unknown STEP '${STEP}'")
endif()

# SPDX-License-Identifier: MIT
# pmc::c: the C API (include/pmc/pmc.h), compiled once over the header-only library. Two builds of src/pmc_c.cpp:
#   pmc::c         libpmc_c.so: for C programs and other languages' FFIs (Python ctypes, Rust, Go)
#   pmc::c_static  libpmc_c.a: linked into the program (a C link then needs the C++ runtime: CMake adds it)
# Only the pmc_* functions are exported (hidden visibility and cmake/pmc_c.map): the C++ inside cannot clash with a program's own pmc.
# As a subproject both are EXCLUDE_FROM_ALL: built only if something links them.
if(PMC_TOP_LEVEL)
  set(pmc_c_exclude "")
else()
  set(pmc_c_exclude EXCLUDE_FROM_ALL)
endif()
# The two share one compile of it (the same flags: hidden visibility, position-independent).
add_library(pmc_c_objects OBJECT ${pmc_c_exclude} ${CMAKE_CURRENT_SOURCE_DIR}/src/pmc_c.cpp)
set_target_properties(pmc_c_objects PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                                               POSITION_INDEPENDENT_CODE ON)
# pmc's headers (and Boost's) are needed to compile the library, not to use it: BUILD_INTERFACE keeps pmc::pmc out
# of the exported pmc::c_static, so that find_package(pmc COMPONENTS c) needs no Boost.
target_link_libraries(pmc_c_objects PRIVATE $<BUILD_INTERFACE:pmc>)
if(PMC_WARNINGS)
  target_compile_options(pmc_c_objects PRIVATE ${PMC_WARNINGS})
endif()
foreach(kind SHARED STATIC)
  if(kind STREQUAL "SHARED")
    set(target pmc_c)
    set(export_name c)
  else()
    set(target pmc_c_static)
    set(export_name c_static)
  endif()
  add_library(${target} ${kind} ${pmc_c_exclude} $<TARGET_OBJECTS:pmc_c_objects>)
  add_library(pmc::${export_name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME pmc_c EXPORT_NAME ${export_name} LINKER_LANGUAGE CXX)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:pmc>) # what pmc's headers link (threads, dl)
endforeach()
set_target_properties(pmc_c PROPERTIES VERSION ${PROJECT_VERSION}
                                       SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                                       INSTALL_RPATH "${PMC_INSTALL_RPATH_IN_LIBDIR}"
                                       LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/pmc_c.map)
target_link_options(pmc_c PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/pmc_c.map")
# A static library's users link what it uses, the C++ runtime included: a project with only C enabled links with the
# C driver, which does not add it (CMake's own C++ link-language hint needs CXX enabled in that project).
target_link_libraries(pmc_c_static INTERFACE stdc++ m Threads::Threads ${CMAKE_DL_LIBS})

if(PMC_INSTALL)
  install(TARGETS pmc_c pmc_c_static EXPORT pmcCTargets)
  install(EXPORT pmcCTargets NAMESPACE pmc:: DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/pmc)
  # pkg-config: prefix relative to the .pc file, so that `cmake --install --prefix` anywhere stays right.
  set(pmc_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  file(RELATIVE_PATH pmc_pc_to_prefix /root/${pmc_pc_dir} /root)
  string(REGEX REPLACE "/$" "" pmc_pc_to_prefix "${pmc_pc_to_prefix}")
  set(pmc_pc_private "-lstdc++ -lm -lpthread")
  if(CMAKE_DL_LIBS)
    string(APPEND pmc_pc_private " -l${CMAKE_DL_LIBS}")
  endif()
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/pmc-c.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pmc-c.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pmc-c.pc DESTINATION ${pmc_pc_dir})
endif()

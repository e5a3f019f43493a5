# SPDX-License-Identifier: MIT
# RUNPATH of what pmc installs, so that an install outside the system paths (cmake --install --prefix ~/.local or
# /opt/pmc) runs without LD_LIBRARY_PATH. Where the install's libdir is not one the linker searches anyway (the
# usual CMake idiom: CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES), each installed binary's RUNPATH names that libdir
# relative to the binary's own directory ($ORIGIN/...), so the install can move as a whole. A system libdir
# (/usr/lib/x86_64-linux-gnu for --prefix /usr, as a distribution package has it) gets none, as Debian wants.
# The decision is taken from CMAKE_INSTALL_PREFIX at configure time; an rpath given by the user
# (-DCMAKE_INSTALL_RPATH=..., or -DCMAKE_SKIP_INSTALL_RPATH=ON) wins.
#   CMAKE_INSTALL_RPATH            programs in BINDIR: $ORIGIN/../lib (or ../lib/<multiarch>); also
#                                  PMC_INSTALL_RPATH_IN_BINDIR
#   PMC_INSTALL_RPATH_IN_LIBDIR    libraries in LIBDIR (libpmc_c.so): $ORIGIN
#   PMC_INSTALL_RPATH_IN_PLUGINDIR modules in LIBDIR/pmc (pmc emulate's plugin and preload library): $ORIGIN/..
# CMAKE_INSTALL_RPATH_USE_LINK_PATH keeps the directories outside the system paths of the libraries a binary
# links (a {fmt} or libelf from /opt), which CMake otherwise drops from the build tree's rpath on install.
set(PMC_INSTALL_RPATH_IN_LIBDIR "")
set(PMC_INSTALL_RPATH_IN_PLUGINDIR "")
if(NOT DEFINED CMAKE_INSTALL_RPATH)
  list(FIND CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES "${CMAKE_INSTALL_FULL_LIBDIR}" pmc_libdir_is_system)
  if(pmc_libdir_is_system EQUAL -1)
    file(RELATIVE_PATH pmc_bindir_to_libdir "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(CMAKE_INSTALL_RPATH "$ORIGIN/${pmc_bindir_to_libdir}")
    set(PMC_INSTALL_RPATH_IN_LIBDIR "$ORIGIN")
    set(PMC_INSTALL_RPATH_IN_PLUGINDIR "$ORIGIN/..")
    # Built with it already: otherwise CMake pads the build tree's RUNPATH for the install's with empty entries,
    # which the loader reads as the current directory. Nothing built beside these links libpmc_c from the build
    # tree except the tests, which tests/CMakeLists.txt sets back to the build tree's rpath.
    set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
  endif()
else()
  set(PMC_INSTALL_RPATH_IN_LIBDIR "${CMAKE_INSTALL_RPATH}")
  set(PMC_INSTALL_RPATH_IN_PLUGINDIR "${CMAKE_INSTALL_RPATH}")
endif()
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
set(PMC_INSTALL_RPATH_IN_BINDIR "${CMAKE_INSTALL_RPATH}") # for tests/consumer, whose directory resets the default

# Helpers shared by every folder's CMakeLists.txt.

# tachyon_library(NAME SOURCES ... DEPS ...)
# One folder = one library target; DEPS encode the one-way layering of DESIGN.md.
function(tachyon_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# tachyon_test(NAME SOURCES ... DEPS ... [LABELS ...])
# A GoogleTest executable; each test case becomes its own ctest test so that
# `ctest -j` spreads them over the cores.
function(tachyon_test name)
  if(NOT TACHYON_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  # Shared test helpers: #include "tests/support/...".
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    TACHYON_SHARED_DIR="${TACHYON_SHARED_DIR}"
    TACHYON_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set(labels unit ${ARG_LABELS})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${labels}")
endfunction()

# tachyon_interface(NAME HEADERS ... DEPS ...)
# A header-only target (an interface other targets implement, such as the
# gateway's Stage), so that they can depend on it without depending on its folder's library.
function(tachyon_interface name)
  cmake_parse_arguments(ARG "" "" "HEADERS;DEPS" ${ARGN})
  add_library(${name} INTERFACE)
  target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} INTERFACE ${ARG_DEPS})
endfunction()

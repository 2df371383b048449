cmake_minimum_required(VERSION 3.25)
# The layering the build enforces (`cmake -P tools/check_layering.cmake`,
# run by the build before the libraries compile; CMakeLists.txt): each
# folder may include headers only from itself and the folders it declares
# below (the same table gives the per-folder library targets their
# dependencies). A forbidden include fails the build naming file, line and
# the folders allowed. Tests and benchmarks are exempt (they link
# everything); a fuzzer beside the code keeps its folder's layering (one that
# drives the whole pipeline lives in tests/fuzz/, issue 28).
#   -DSOURCE_DIR=... -DSTAMP=...   (set by CMakeLists.txt)
include(${CMAKE_CURRENT_LIST_DIR}/layering.cmake)
set(errors "")
foreach(folder ${GPUSIM_FOLDERS})
  file(GLOB_RECURSE srcs ${SOURCE_DIR}/${folder}/*.cc ${SOURCE_DIR}/${folder}/*.h)
  list(FILTER srcs EXCLUDE REGEX "(_test|_benchmark)\\.cc$")
  set(allowed ${folder} ${GPUSIM_DEPS_${folder}})
  foreach(src ${srcs})
    file(STRINGS ${src} lines REGEX "^#include \"(sim|models|viz|tools)/")
    foreach(line ${lines})
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
      get_filename_component(dir ${inc} DIRECTORY)
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${src})
      if(dir MATCHES "^sim/[a-z_]+/impl$" AND NOT "${rel}:${inc}" IN_LIST GPUSIM_IMPL_EXCEPTIONS)
        # sim/X/impl/ is X's registry's own: only sim/X may include it.
        string(REGEX REPLACE "/impl$" "" dir ${dir})
        if(NOT dir STREQUAL folder)
          string(APPEND errors "${src}: includes ${inc}: only ${dir} may include ${dir}/impl/\n")
        endif()
        continue()
      endif()
      # The folder a header belongs to: sim/X for anything under sim/X/.
      string(REGEX REPLACE "^(sim/[a-z_]+)/.*$" "\\1" dir "${dir}")
      list(FIND allowed ${dir} at)
      if(at EQUAL -1)
        string(APPEND errors "${src}: includes ${inc}: ${folder} may include only ${allowed}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "layering (tools/layering.cmake):\n${errors}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()

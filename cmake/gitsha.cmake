# Writes ${OUT} with the current git sha (and a -dirty mark); rewritten only when it changes, so a build
# after a commit reports the new sha without recompiling everything.
# Only SRC's own repository counts: a source tree exported with `git archive` and unpacked inside another
# checkout must not report that checkout's sha. Such a tree carries its sha in cmake/source-sha.txt
# (export-subst, .gitattributes).
execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc_top)
get_filename_component(src_real "${SRC}" REALPATH)
if(rc_top EQUAL 0 AND top)
  get_filename_component(top "${top}" REALPATH)
endif()
if(NOT rc_top EQUAL 0 OR NOT top STREQUAL src_real)
  set(sha "unknown")
  if(EXISTS ${SRC}/cmake/source-sha.txt)
    file(STRINGS ${SRC}/cmake/source-sha.txt archived LIMIT_COUNT 1)
    if(archived AND NOT archived MATCHES "Format")
      set(sha "${archived}-archive")
    endif()
  endif()
  set(rc 1)
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0 OR NOT sha)
  if(NOT sha)
    set(sha "unknown")
  endif()
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(dirty)
    set(sha "${sha}-dirty")
  endif()
endif()
set(text "#pragma once\n#define DROPBENCH_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()

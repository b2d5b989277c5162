# Man pages for the installed programs, generated at build time by help2man from each program's
# --help and --version (so they always match the binary), gzipped and installed into
# <datadir>/man/man1 with the program's install component. Without help2man (scripts/install-deps.sh
# installs it) no man pages are built, and configure says so.
find_program(COHORT_HELP2MAN help2man)
find_program(COHORT_GZIP gzip)
if(NOT COHORT_HELP2MAN OR NOT COHORT_GZIP)
  message(STATUS "Cohort man pages: OFF (help2man or gzip not found; scripts/install-deps.sh installs them)")
  set(COHORT_MAN_PAGES OFF)
  return()
endif()
message(STATUS "Cohort man pages: ON (${COHORT_HELP2MAN})")
set(COHORT_MAN_PAGES ON)

set(COHORT_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(_cohort_man_pages "")

# cohort_man_page(TARGET COMPONENT "one-line description for the NAME section")
function(cohort_man_page target component description)
  if(NOT TARGET ${target})
    return()
  endif()
  get_target_property(name ${target} OUTPUT_NAME)
  if(NOT name)
    set(name ${target})
  endif()
  set(page ${COHORT_MAN_DIR}/${name}.1)
  # help2man runs the program through a wrapper of the same name that capitalises the first line's
  # "usage:" (our style) into the "Usage:" it takes the SYNOPSIS from.
  set(wrapper ${COHORT_MAN_DIR}/bin/${name})
  file(GENERATE OUTPUT ${wrapper}
       CONTENT "#!/bin/sh\n\"$<TARGET_FILE:${target}>\" \"$@\" | sed '1s/^usage:/Usage:/'\n"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                        WORLD_EXECUTE)
  add_custom_command(
    OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${COHORT_MAN_DIR}
    COMMAND ${COHORT_HELP2MAN} --no-info --section=1 --source=Cohort
            "--name=${description}" --output=${page} ${wrapper}
    COMMAND ${COHORT_GZIP} -9 -n -f ${page}
    DEPENDS ${target} ${wrapper}
    COMMENT "help2man: ${name}.1"
    VERBATIM)
  install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
  set(_cohort_man_pages ${_cohort_man_pages} ${page}.gz PARENT_SCOPE)
endfunction()

cohort_man_page(cohort-coordinator coordinator "the Cohort coordinator daemon")
cohort_man_page(cohort-agent agent "the Cohort node agent daemon")
cohort_man_page(cohort-reducer agent "a Cohort Reduction Server reducer")
cohort_man_page(cohort-ps agent "a Cohort parameter server")
cohort_man_page(cohort client "launch and watch training jobs on a Cohort cluster")
cohort_man_page(cohort-bench bench "Cohort's all-reduce and parameter-server benchmarks")
cohort_man_page(digits-trainer examples "Cohort's example data-parallel trainer")
add_custom_target(cohort_man_pages ALL DEPENDS ${_cohort_man_pages})

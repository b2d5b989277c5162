# Read by cpack (CPACK_PROJECT_CONFIG_FILE): Debian packages need the /usr prefix, which the
# binaries, configs and units were generated for (scripts/package.sh configures it).
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_PACKAGING_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "Debian packages need a build configured with -DCMAKE_INSTALL_PREFIX=/usr "
                      "(this one has ${CPACK_PACKAGING_INSTALL_PREFIX}); use scripts/package.sh")
endif()

# Debian packages (CPack DEB, one per component): scripts/package.sh configures a build with
# -DCMAKE_INSTALL_PREFIX=/usr and runs cpack; the .deb files land in <build>/packages.
#   cohort-coordinator        cohort-coordinator, its unit, /etc/cohort/coordinator.conf (conffile),
#                             the `cohort` system user and the key directories (postinst)
#   cohort-agent              cohort-agent, cohort-replica-init, cohort-reducer, cohort-ps, its
#                             unit, /etc/cohort/agent.conf (conffile)
#   cohort-client             the `cohort` CLI and the Python package (Debian's dist-packages)
#   libcohort-collective-c0   the collective C API, libcohort_collective_c.so.0
#   libcohort-collective-c-dev  its header and the .so link
#   cohort-torch              the torch.distributed backend's extension (where torch was found)
# Depends come from dpkg-shlibdeps on what each package's binaries link, plus the lists below.
# Binaries are stripped when packaged (CPACK_STRIP_FILES).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VENDOR "Cohort")
set(CPACK_PACKAGE_CONTACT "Cohort maintainers <cohort-maintainers@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "self-hosted distributed training runtime")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "")
# Packages are built for prefix /usr only (/usr/bin, /etc/cohort, /lib/systemd/system): refused
# at cpack time otherwise (cmake/cpack_project.cmake).
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/cpack_project.cmake)

set(_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(COHORT_PYTHON_FULL_DIR ${CMAKE_INSTALL_PREFIX}/${COHORT_PYTHON_INSTALL_DIR})
set(_scripts ${PROJECT_BINARY_DIR}/packaging)
foreach(script coordinator.postinst coordinator.postrm agent.postinst agent.postrm client.prerm)
  string(REPLACE "." ";" _parts ${script})
  list(GET _parts 0 _component)
  list(GET _parts 1 _name)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/${script} ${_scripts}/${_component}/${_name}
                 @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                 GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
# The configs are conffiles: dpkg never overwrites one the admin edited.
file(WRITE ${_scripts}/coordinator/conffiles "${COHORT_CONFIG_DIR}/coordinator.conf\n")
file(WRITE ${_scripts}/agent/conffiles "${COHORT_CONFIG_DIR}/agent.conf\n")

set(CPACK_COMPONENTS_ALL coordinator agent client libcohort dev)

set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME cohort-coordinator)
set(CPACK_COMPONENT_COORDINATOR_DESCRIPTION
    "Cohort coordinator daemon\n The coordinator of a Cohort training cluster: keeps the jobs, gang-schedules\n their replicas on the agents' nodes and restarts them from their newest\n checkpoint. Runs as the cohort system user (systemd unit cohort-coordinator).")
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_CONTROL_EXTRA
    ${_scripts}/coordinator/postinst ${_scripts}/coordinator/postrm ${_scripts}/coordinator/conffiles)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME cohort-agent)
set(CPACK_COMPONENT_AGENT_DESCRIPTION
    "Cohort node agent daemon\n The agent of a Cohort training cluster's GPU node: runs the replicas the\n coordinator places on it (processes or OCI containers), ships their logs and\n reports their exits; with the reducer and parameter-server programs jobs use.")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "runc | crun")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    ${_scripts}/agent/postinst ${_scripts}/agent/postrm ${_scripts}/agent/conffiles)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME cohort-client)
set(CPACK_COMPONENT_CLIENT_DESCRIPTION
    "Cohort command-line client and Python package\n cohort submits and watches training jobs on a Cohort cluster; the cohort\n Python package does the same from Python and all-reduces from training code.")
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS
    "python3, python3-zmq, python3-flatbuffers, python3-numpy, libcohort-collective-c0 (= ${_deb_version})")
set(CPACK_DEBIAN_CLIENT_PACKAGE_CONTROL_EXTRA ${_scripts}/client/prerm)

set(CPACK_DEBIAN_LIBCOHORT_PACKAGE_NAME libcohort-collective-c0)
set(CPACK_COMPONENT_LIBCOHORT_DESCRIPTION
    "Cohort collective communication library (C API)\n All-reduce, broadcast, all-gather and the other collectives of a Cohort job,\n over the Reduction Server, the ring or shared memory.")
set(CPACK_DEBIAN_LIBCOHORT_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcohort-collective-c-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Cohort collective communication library (development files)\n The C header cohort/cohort_collective.h and the link to the library.")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libcohort-collective-c0 (= ${_deb_version})")

if(COHORT_HAVE_TORCH)
  list(APPEND CPACK_COMPONENTS_ALL torch)
  set(CPACK_DEBIAN_TORCH_PACKAGE_NAME cohort-torch)
  set(CPACK_COMPONENT_TORCH_DESCRIPTION
      "Cohort torch.distributed backend\n The cohort backend for PyTorch's torch.distributed (DDP): Cohort's all-reduce\n and Reduction Server under init_process_group('cohort').")
  set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "cohort-client (= ${_deb_version}), python3-torch")
endif()

include(CPack)

# `cmake --install` rules and the EpochClient package config.
#
# Components:
#   server  epochd, epoch-wal, the default configuration and the systemd unit
#           (cmake/EpochInstallServiceFiles.cmake)
#   cli     epochctl
#   devel   the client library (epoch::client with epoch::proto and epoch::common), its headers
#           and lib/cmake/EpochClient, so an application can find_package(EpochClient)
#
# Headers: include/epoch/... (client and common), include/epoch/proto/... (the generated
# etcdserverpb, mvccpb, ... headers, under their own root so they cannot clash with another
# package's copy of etcd's protos).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EPOCH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/EpochClient)
set(EPOCH_INSTALL_PROTO_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/epoch/proto)

install(TARGETS epochd epoch-wal RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
install(TARGETS epochctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(CODE "set(EPOCH_DEPLOY_DIR \"${PROJECT_SOURCE_DIR}/deploy\")
              set(EPOCH_STAGING_DIR \"${PROJECT_BINARY_DIR}/install-staging\")"
        COMPONENT server)
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/EpochInstallServiceFiles.cmake COMPONENT server)

# The library targets keep their in-tree names for consumers: epoch::client, epoch::proto,
# epoch::common.
set_target_properties(epoch_client PROPERTIES EXPORT_NAME client)
set_target_properties(epoch_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(epoch_common PROPERTIES EXPORT_NAME common)
target_include_directories(epoch_client PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(epoch_common PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(epoch_proto SYSTEM
                           PUBLIC $<INSTALL_INTERFACE:${EPOCH_INSTALL_PROTO_INCLUDEDIR}>)

install(TARGETS epoch_client epoch_proto epoch_common
        EXPORT EpochClientTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/ ${PROJECT_SOURCE_DIR}/common/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/gen/  # proto/CMakeLists.txt: EPOCH_PROTO_OUT
        DESTINATION ${EPOCH_INSTALL_PROTO_INCLUDEDIR} COMPONENT devel
        FILES_MATCHING PATTERN "*.h")
install(EXPORT EpochClientTargets
        NAMESPACE epoch::
        DESTINATION ${EPOCH_INSTALL_CMAKEDIR} COMPONENT devel)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/EpochClientConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/EpochClientConfig.cmake
                              INSTALL_DESTINATION ${EPOCH_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/EpochClientConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/EpochClientConfig.cmake
              ${PROJECT_BINARY_DIR}/EpochClientConfigVersion.cmake
        DESTINATION ${EPOCH_INSTALL_CMAKEDIR} COMPONENT devel)

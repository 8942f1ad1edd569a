# Every third-party dependency comes from a Debian package (scripts/deps.sh installs them).
# Third-party headers are SYSTEM includes through their imported targets.

find_package(Threads REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(Catch2 2 CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(PostgreSQL REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBSYSTEMD REQUIRED IMPORTED_TARGET libsystemd)  # epochd's sd_notify
find_program(EPOCH_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# Standalone Asio is header-only.
find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
if(NOT TARGET epoch::asio)
  add_library(epoch_asio INTERFACE)
  add_library(epoch::asio ALIAS epoch_asio)
  target_include_directories(epoch_asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
  target_compile_definitions(epoch_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
  target_link_libraries(epoch_asio INTERFACE Threads::Threads)
endif()

# Runs at install time (install(SCRIPT), component server): epochd's default configuration
# (deploy/systemd/epoch.conf.yml) and systemd unit (deploy/systemd/epochd.service).
# GNU's rule, as GNUInstallDirs states it: the /usr prefix (the Debian package) keeps its
# configuration in /etc, any other prefix in <prefix>/etc. The install prefix is known only now
# (`cmake --install --prefix`), so the paths are chosen here; the unit is rewritten to name the
# installed binary and configuration. file(INSTALL) honours DESTDIR, which CPack sets.
# Inputs: EPOCH_DEPLOY_DIR (deploy/), EPOCH_STAGING_DIR (a scratch directory in the build tree).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(epoch_etc "/etc/epoch")
else()
  set(epoch_etc "${CMAKE_INSTALL_PREFIX}/etc/epoch")
endif()
file(INSTALL "${EPOCH_DEPLOY_DIR}/systemd/epoch.conf.yml" DESTINATION "${epoch_etc}")

file(READ "${EPOCH_DEPLOY_DIR}/systemd/epochd.service" unit)
string(REPLACE "/usr/bin/epochd" "${CMAKE_INSTALL_PREFIX}/bin/epochd" unit "${unit}")
string(REPLACE "/etc/epoch/" "${epoch_etc}/" unit "${unit}")
# A directory of its own: installs into other prefixes (the tests, cpack) may run at once.
string(RANDOM LENGTH 16 staging)
set(staging "${EPOCH_STAGING_DIR}/${staging}")
file(WRITE "${staging}/epochd.service" "${unit}")
file(INSTALL "${staging}/epochd.service" DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
file(REMOVE_RECURSE "${staging}")

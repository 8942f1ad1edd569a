# The Debian package `epoch` (CPack DEB): components server and cli, i.e. epochd, epochctl,
# epoch-wal, /etc/epoch/epoch.conf.yml (a conffile) and epochd.service; the maintainer scripts
# in deploy/debian/ create the system user epoch and /var/lib/epoch (mode 0700).
#   cpack --config <build>/CPackConfig.cmake -B <out>      -> <out>/epoch_<version>_<arch>.deb
# Runtime dependencies come from dpkg-shlibdeps, so the .deb installs with
# `apt install ./epoch_*.deb` on Debian 12.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME epoch)
set(CPACK_PACKAGE_VENDOR "Epoch")
set(CPACK_PACKAGE_CONTACT "Epoch maintainers <epoch@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Raft metadata server with the etcd v3 API and fencing tokens")
set(CPACK_PACKAGE_DESCRIPTION
    "epochd serves the etcd v3 gRPC API from a Raft-replicated store; epochctl is its admin CLI \
and epoch-wal checks and repairs its write-ahead log.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL server cli)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# useradd/groupadd (passwd) and getent (libc-bin) run in the maintainer scripts.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/postrm ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

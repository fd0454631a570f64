# Run by `cmake --install` (and so by CPack): installs the default config and
# the systemd unit with the paths of the prefix being installed to, decided
# now rather than at configure time, so `--prefix /usr` (the .deb) gives
# /etc/rlimit and /usr/bin, and `--prefix /tmp/x` stays inside /tmp/x.
#
# In: CMAKE_INSTALL_PREFIX (the install's), RLIMIT_CONFIG_SOURCE (the
# generated rlimitd.toml), RLIMIT_UNIT_TEMPLATE, RLIMIT_STAGING_DIR, and
# RLIMIT_BINDIR / RLIMIT_UNITDIR / RLIMIT_DOCDIR relative to the prefix.
# file(INSTALL) adds $DESTDIR itself.

# GNUInstallDirs' rule for sysconfdir: /usr keeps its configuration in /etc.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(rlimit_sysconfdir "/etc")
else()
  set(rlimit_sysconfdir "${CMAKE_INSTALL_PREFIX}/etc")
endif()

set(RLIMIT_BINDIR "${CMAKE_INSTALL_PREFIX}/${RLIMIT_BINDIR}")
set(RLIMIT_DOCDIR "${CMAKE_INSTALL_PREFIX}/${RLIMIT_DOCDIR}")
set(RLIMIT_CONFIG "${rlimit_sysconfdir}/rlimit/rlimitd.toml")
configure_file("${RLIMIT_UNIT_TEMPLATE}" "${RLIMIT_STAGING_DIR}/rlimitd.service" @ONLY)

file(INSTALL DESTINATION "${rlimit_sysconfdir}/rlimit" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${RLIMIT_CONFIG_SOURCE}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${RLIMIT_UNITDIR}" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${RLIMIT_STAGING_DIR}/rlimitd.service")

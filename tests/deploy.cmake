# Deployment files (deploy/): the systemd unit passes `systemd-analyze verify`.
add_test(NAME deploy.systemd_unit COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/systemd_unit.sh)
set_tests_properties(deploy.systemd_unit PROPERTIES
  LABELS fast
  TIMEOUT 60
  SKIP_RETURN_CODE 77
  ENVIRONMENT "SLUICE=$<TARGET_FILE:sluice>;SRC=${CMAKE_SOURCE_DIR}")

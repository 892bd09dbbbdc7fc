# ctest labels: every test carries one of `fast`, `model`, `server`, `slow`
# (docs/design.md, "Running the tests"), so a contributor's loop can be
#   ctest --test-dir build -L fast -j2      (unit tests, ~20 s)
#   ctest --test-dir build -LE slow -j2     (all but the slow ones, ~1 min)
#
# sluice_tests (gtest): a suite takes the label of the folder its *_test.cpp
# sits in (server: src/serve/; model: src/k3, engine, pack, cli/ and tests/,
# which open a model; fast: the rest), unless it is listed as slow below (over
# ~5 s on 2 cores). A suite named in two folders takes the first of slow,
# server, model. Script tests set their label where they are added.
set(SLUICE_SLOW_GTESTS CliPlan.* RateProbe.* NanoK3Draft.* Cli.ModelFlagIsTheSameEverywhere)

set(sluice_server_suites "")
set(sluice_model_suites "")
foreach(src ${SLUICE_TEST_SOURCES})
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${src})
  if(rel MATCHES "^src/serve/")
    set(label server)
  elseif(rel MATCHES "^(src/(k3|engine|pack|cli)|tests)/")
    set(label model)
  else()
    continue()
  endif()
  file(STRINGS ${src} lines REGEX "^(TEST|TEST_F)\\( *[A-Za-z0-9_]+,")
  foreach(line ${lines})
    string(REGEX REPLACE "^(TEST|TEST_F)\\( *([A-Za-z0-9_]+),.*" "\\2.*" suite "${line}")
    list(APPEND sluice_${label}_suites ${suite})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES sluice_server_suites)
list(REMOVE_DUPLICATES sluice_model_suites)

# gtest filters, disjoint: "positive:patterns-negative:patterns".
string(JOIN ":" slow_f ${SLUICE_SLOW_GTESTS})
string(JOIN ":" server_f ${sluice_server_suites})
string(JOIN ":" model_f ${sluice_model_suites})
gtest_discover_tests(sluice_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${slow_f}"
                     PROPERTIES LABELS slow TIMEOUT 600)
gtest_discover_tests(sluice_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${server_f}-${slow_f}"
                     PROPERTIES LABELS server TIMEOUT 600)
gtest_discover_tests(sluice_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${model_f}-${slow_f}:${server_f}"
                     PROPERTIES LABELS model TIMEOUT 600)
gtest_discover_tests(sluice_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "*-${slow_f}:${server_f}:${model_f}"
                     PROPERTIES LABELS fast TIMEOUT 600)

# The check: no test without one of the four labels.
add_test(NAME labels COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${CMAKE_BINARY_DIR} -N -LE "^(fast|model|server|slow)$")
set_tests_properties(labels PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION "Total Tests: 0\n")

# End-to-end tests of `sluice serve`: the official openai npm client (pinned in
# tests/serve/package-lock.json, installed from the npm registry into the build
# dir) and raw HTTP clients against the fixture model, under node --test.
add_test(NAME serve_openai_npm
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/serve/run.sh $<TARGET_FILE:sluice>
          ${CMAKE_SOURCE_DIR}/tests/fixtures/k3-tiny/model ${CMAKE_BINARY_DIR}/npm-serve
          $<IF:$<BOOL:${SLUICE_SANITIZE}>,1,0>)
set_tests_properties(serve_openai_npm PROPERTIES LABELS "server;slow" TIMEOUT 900)

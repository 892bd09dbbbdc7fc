# Tokenizer parity with js-tiktoken from npm (cl100k_base and o200k_base, 12,000
# generated strings): identical ids and exact round trips. Needs the npm registry.
add_test(NAME tokenizer_parity_npm
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/npm/tokenizer/run_parity.sh
          $<TARGET_FILE:sluice> ${CMAKE_BINARY_DIR}/npm-tokenizer)
set_tests_properties(tokenizer_parity_npm PROPERTIES LABELS slow TIMEOUT 300)

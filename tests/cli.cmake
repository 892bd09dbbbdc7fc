# CLI tests driven as a user would: the interactive chat on a terminal (tmux).
add_test(NAME cli.chat_tmux COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/chat_tmux.sh)
set_tests_properties(cli.chat_tmux PROPERTIES
  LABELS model
  TIMEOUT 180
  ENVIRONMENT "SLUICE=$<TARGET_FILE:sluice>;SRC=${CMAKE_SOURCE_DIR}")

# Issue 38: a foreign or stale spine pack is refused naming it, and `pack` rebuilds it.
add_test(NAME cli.stale_pack COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/stale_pack.sh)
set_tests_properties(cli.stale_pack PROPERTIES
  LABELS model
  TIMEOUT 120
  ENVIRONMENT "SLUICE=$<TARGET_FILE:sluice>")

# Issue 35: experts striped over several drives (stripe, logits, verify, bench).
add_test(NAME cli.stripe COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/stripe.sh)
set_tests_properties(cli.stripe PROPERTIES
  LABELS model
  TIMEOUT 120
  ENVIRONMENT "SLUICE=$<TARGET_FILE:sluice>")

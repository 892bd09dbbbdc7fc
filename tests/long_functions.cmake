# No function in src/ over 120 lines (src/kernels/ aside): scripts/long_functions.sh
# lists any, longest first, and exits 1. Needs Universal Ctags (scripts/install-deps.sh).
add_test(NAME long_functions COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/long_functions.sh 120 ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(long_functions PROPERTIES LABELS fast)
# The check itself can fail: at a 10-line limit it names functions of src/base/.
add_test(NAME long_functions_selftest COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/long_functions.sh 10
         ${CMAKE_SOURCE_DIR}/src/base)
set_tests_properties(long_functions_selftest PROPERTIES LABELS fast
                     PASS_REGULAR_EXPRESSION "^[0-9]+ [^\n]*/src/base/[^\n]*:[0-9]+ [A-Za-z_]")

# No include runs upward (tests/layering.sh has the order); the per-folder
# libraries in CMakeLists.txt enforce the same order at link time.
add_test(NAME layering COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layering.sh ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(layering PROPERTIES LABELS fast)
# The check itself can fail: it catches a k3/ include above the model interface.
add_test(NAME layering_selftest COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layering_selftest.sh
         ${CMAKE_SOURCE_DIR}/tests/layering.sh)
set_tests_properties(layering_selftest PROPERTIES LABELS fast)

# Every doc path named in docs/, README.md or src/ exists, and every relative
# markdown link in the docs resolves (tests/doc_links.sh); doc_links_test
# checks that the check catches both.
add_test(NAME doc_links COMMAND bash ${CMAKE_SOURCE_DIR}/tests/doc_links.sh ${CMAKE_SOURCE_DIR})
add_test(NAME doc_links_test COMMAND bash ${CMAKE_SOURCE_DIR}/tests/doc_links_test.sh ${CMAKE_SOURCE_DIR}/tests/doc_links.sh)
set_tests_properties(doc_links doc_links_test PROPERTIES LABELS fast)

# Setup tests (issue 7): a real nginx on a loopback port serves the k3-tiny
# fixture in the Hugging Face hub's layout; a small fault proxy sits in front
# of it for the fault cases. Each script starts and stops its own servers.
add_executable(sluice_fault_proxy ${CMAKE_SOURCE_DIR}/tests/setup/fault_proxy.cpp)
target_link_libraries(sluice_fault_proxy PRIVATE Threads::Threads)
set_target_properties(sluice_fault_proxy PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

foreach(name e2e faults kill9 env k31 drives)
  add_test(NAME setup.${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/setup/${name}.sh)
  set(label model)
  if(name STREQUAL "faults")
    set(label slow)  # ~12 s
  endif()
  set_tests_properties(setup.${name} PROPERTIES
    LABELS ${label}
    TIMEOUT 180
    ENVIRONMENT "SLUICE=$<TARGET_FILE:sluice>;PROXY=$<TARGET_FILE:sluice_fault_proxy>;SRC=${CMAKE_SOURCE_DIR}")
endforeach()

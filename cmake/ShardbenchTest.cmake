# Helpers to register tests with labels.
# sb_mpi_test(NAME SRC RANKS...) builds one MPI test program and registers it at each rank count.
function(sb_mpi_test name src)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE -Wl,--whole-archive shardbench_workloads -Wl,--no-whole-archive
                        shardbench::workloads GTest::gtest)
  if(SHARDBENCH_USE_PCH)
    target_precompile_headers(${name} REUSE_FROM shardbench_workloads)
  endif()
  foreach(np ${ARGN})
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${np}
                     --mca btl self,vader $<TARGET_FILE:${name}>)
    set_tests_properties(${name}.np${np} PROPERTIES LABELS mpi TIMEOUT 600 PROCESSORS ${np}
                         ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()
endfunction()

# Compiler options shared by every Epoch target.

option(EPOCH_WERROR "Treat warnings in Epoch's own code as errors" ON)
set(EPOCH_SANITIZE "" CACHE STRING "Sanitizers: '', 'address', 'thread'")

find_program(EPOCH_CCACHE ccache)
if(EPOCH_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER ${EPOCH_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${EPOCH_CCACHE})
endif()

# Assertions stay on in every build type (docs/conventions.md §4); never define NDEBUG.
foreach(cfg RELEASE RELWITHDEBINFO MINSIZEREL)
  string(REPLACE "-DNDEBUG" "" CMAKE_CXX_FLAGS_${cfg} "${CMAKE_CXX_FLAGS_${cfg}}")
  string(REPLACE "-DNDEBUG" "" CMAKE_C_FLAGS_${cfg} "${CMAKE_C_FLAGS_${cfg}}")
endforeach()

if(EPOCH_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(EPOCH_SANITIZE STREQUAL "thread")
  # GCC defines __SANITIZE_THREAD__ under -fsanitize=thread, and protobuf's map_field.h adds
  # members to MapFieldBase when it is defined (Abseil's headers likewise switch on it). Debian
  # builds libprotobuf and Abseil without it, so our objects must see the layouts those libraries
  # were built with: undefine it. libstdc++ keys only _GLIBCXX_TSAN off it (shared_ptr's release
  # skips a two-word fast path TSan misreads; no layout change), so that is defined directly, and
  # Epoch's own annotations test EPOCH_TSAN.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -U__SANITIZE_THREAD__
                      -D_GLIBCXX_TSAN=1 -DEPOCH_TSAN=1)
  # GCC warns that TSan cannot model std::atomic_thread_fence (used inside Asio and gRPC headers).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT EPOCH_SANITIZE STREQUAL "")
  message(FATAL_ERROR "EPOCH_SANITIZE must be '', 'address' or 'thread', got '${EPOCH_SANITIZE}'")
endif()

# epoch_target_defaults(<target>): warnings for code we write (not generated or third-party code).
function(epoch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wimplicit-fallthrough)
  if(EPOCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

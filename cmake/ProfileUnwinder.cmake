# snmalloc_find_libunwind(): SNMALLOC_LIBUNWIND_INCLUDE_DIR and
# SNMALLOC_LIBUNWIND_LIBRARY (cached), and SNMALLOC_LIBUNWIND_FOUND.
macro(snmalloc_find_libunwind)
  find_path(SNMALLOC_LIBUNWIND_INCLUDE_DIR libunwind.h)
  find_library(SNMALLOC_LIBUNWIND_LIBRARY unwind)
  if(SNMALLOC_LIBUNWIND_INCLUDE_DIR AND SNMALLOC_LIBUNWIND_LIBRARY)
    set(SNMALLOC_LIBUNWIND_FOUND ON)
  else()
    set(SNMALLOC_LIBUNWIND_FOUND OFF)
  endif()
endmacro()

# snmalloc_choose_unwinder(OUT): which stack walker SNMALLOC_PROFILE_UNWINDER
# (auto|builtin|libunwind|libgcc) gives on this target, in OUT; for
# libunwind also SNMALLOC_LIBUNWIND_INCLUDE_DIR and SNMALLOC_LIBUNWIND_LIBRARY
# (Debian: libunwind-dev).  A value that cannot be had is a configure error.
function(snmalloc_choose_unwinder out)
  set(choice ${SNMALLOC_PROFILE_UNWINDER})
  if(NOT choice MATCHES "^(auto|builtin|libunwind|libgcc)$")
    message(FATAL_ERROR "SNMALLOC_PROFILE_UNWINDER=${choice}: expected auto, builtin, libunwind or libgcc")
  endif()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set(has_builtin ON)
  else()
    set(has_builtin OFF)
  endif()
  if(choice STREQUAL builtin AND NOT has_builtin)
    message(FATAL_ERROR "SNMALLOC_PROFILE_UNWINDER=builtin: the built-in walker is x86-64's; "
      "this target is ${CMAKE_SYSTEM_PROCESSOR} (use auto, libunwind or libgcc)")
  endif()
  # Where there is no built-in walker, auto takes libunwind if it is
  # installed: on aarch64 its cached warm walk takes 1/27 of libgcc's
  # instructions (docs/profiling.md, "Stack walkers").
  if(choice STREQUAL auto AND NOT has_builtin)
    snmalloc_find_libunwind()
    if(SNMALLOC_LIBUNWIND_FOUND)
      set(choice libunwind)
    else()
      set(choice libgcc)
    endif()
  elseif(choice STREQUAL auto)
    set(choice builtin)
  elseif(choice STREQUAL libunwind)
    snmalloc_find_libunwind()
    if(NOT SNMALLOC_LIBUNWIND_FOUND)
      message(FATAL_ERROR "SNMALLOC_PROFILE_UNWINDER=libunwind: libunwind not found (Debian: libunwind-dev)")
    endif()
  endif()
  set(${out} ${choice} PARENT_SCOPE)
endfunction()

# Loaded with -DCMAKE_PROJECT_INCLUDE=<this file> by scripts/bootstrap.sh, which builds
# against the Python in <repo>/.venv. Not needed for a plain `colcon build` in a workspace.
# Both fixes run at the end of the top-level CMakeLists.txt, before CMake generates:
#
# 1. The ROS 2 wheels' <pkg>::<pkg>__rosidl_generator_py targets export the include folders
#    of the machine that built them (/opt/python/cp311-cp311/...). CMake refuses to generate
#    while an imported target names a missing folder: use this Python's folders instead.
# 2. rosidl gives our own __rosidl_generator_py target the NumPy include folder as a plain
#    public include folder. With NumPy installed in .venv that folder is inside the source
#    tree, which CMake refuses to export: keep it for the build only ($<BUILD_INTERFACE:>).
if(CMAKE_VERSION VERSION_LESS 3.21)  # IMPORTED_TARGETS directory property
  message(FATAL_ERROR "CMake >= 3.21 is needed to build with scripts/bootstrap.sh")
endif()

function(_state_observer_venv_fixups)
  get_directory_property(imported DIRECTORY "${CMAKE_SOURCE_DIR}" IMPORTED_TARGETS)
  foreach(target IN LISTS imported)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(dirs AND dirs MATCHES "/opt/python/")
      set(kept "")
      foreach(dir IN LISTS dirs)
        if(NOT (dir MATCHES "^/opt/python/" AND NOT EXISTS "${dir}"))
          list(APPEND kept "${dir}")
        endif()
      endforeach()
      if(NOT kept STREQUAL dirs)
        find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
        list(APPEND kept ${Python3_INCLUDE_DIRS} ${Python3_NumPy_INCLUDE_DIRS})
        set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${kept}")
      endif()
    endif()
  endforeach()

  get_directory_property(own DIRECTORY "${CMAKE_SOURCE_DIR}" BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS own)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT dirs)
      continue()
    endif()
    set(fixed "")
    foreach(dir IN LISTS dirs)
      string(FIND "${dir}" "${CMAKE_SOURCE_DIR}/" pos)
      if(pos EQUAL 0)
        set(dir "$<BUILD_INTERFACE:${dir}>")
      endif()
      list(APPEND fixed "${dir}")
    endforeach()
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _state_observer_venv_fixups)

# kvbridge_install_python(<module> <file>...): install files of this folder (packages/python) into
# a wheel's package folder <module>, under their own names, beside the package's own Python. A
# package's CMakeLists.txt includes this file and calls it once; KVBRIDGE_PYTHON_DIR is this
# folder (../python in the tree, ./python in an sdist: the package's pyproject.toml).
function(kvbridge_install_python module)
  list(TRANSFORM ARGN PREPEND "${KVBRIDGE_PYTHON_DIR}/" OUTPUT_VARIABLE files)
  install(FILES ${files} DESTINATION "${module}")
endfunction()

// Compiles cmake/pch.h once (CMakeLists.txt, tb_pch); every other target reuses it.

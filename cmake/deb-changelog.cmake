# Writes the Debian changelog (gzip -9n) of a native package into the package's doc directory at
# install time: one entry for this version, from version.h (version and commit) and the date.
# -DVERSION_H=<generated/version.h> -DOUT=<dir> -DMAINTAINER=<name <mail>>
file(READ "${VERSION_H}" h)
string(REGEX MATCH "TB_VERSION \"([^\"]*)\"" _ "${h}")
set(version "${CMAKE_MATCH_1}")
string(REGEX MATCH "TB_COMMIT \"([^\"]*)\"" _ "${h}")
set(commit "${CMAKE_MATCH_1}")
string(REPLACE "-dirty" ".dirty" clean "${commit}")
string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(MAKE_DIRECTORY "${OUT}")
file(WRITE "${OUT}/changelog"
  "testbedctl (${version}+git${clean}) unstable; urgency=medium\n\n"
  "  * Built from commit ${commit}; the project's history is its git log.\n\n"
  " -- ${MAINTAINER}  ${date}\n")
execute_process(COMMAND gzip -9nf "${OUT}/changelog" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip of ${OUT}/changelog failed")
endif()

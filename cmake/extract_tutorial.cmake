# Extracts the block between "BEGIN TUTORIAL" and "END TUTORIAL" from the
# comment at the top of a header (IN) into a C file (OUT), stripping the
# leading " * " of each line.  A #line directive maps diagnostics back to IN.
# Usage: cmake -DIN=include/jitgrad.h -DOUT=tutorial.c -P extract_tutorial.cmake
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DIN=<header> -DOUT=<file.c> -P extract_tutorial.cmake")
endif()
file(READ "${IN}" txt)
string(FIND "${txt}" "BEGIN TUTORIAL" b)
string(FIND "${txt}" "END TUTORIAL" e)
if(b LESS 0 OR e LESS 0 OR e LESS b)
  message(FATAL_ERROR "${IN}: no BEGIN TUTORIAL ... END TUTORIAL block")
endif()
# Line number of the first code line (the one after BEGIN TUTORIAL).
string(SUBSTRING "${txt}" 0 ${b} head)
string(REGEX REPLACE "[^\n]" "" newlines "${head}")
string(LENGTH "${newlines}" nl)
math(EXPR first_line "${nl} + 2")
# Body: from BEGIN up to (not including) END; drop the BEGIN line and the
# partial " * " line in front of END.
math(EXPR len "${e} - ${b}")
string(SUBSTRING "${txt}" ${b} ${len} body)
string(REGEX REPLACE "^BEGIN TUTORIAL[^\n]*\n" "" body "${body}")
string(REGEX REPLACE "\n[ \t]*\\*[ \t]*$" "\n" body "${body}")
# Strip the comment prefix: optional spaces, '*', one optional space.
string(REGEX REPLACE "(^|\n)[ \t]*\\* ?" "\\1" body "${body}")
file(WRITE "${OUT}" "#line ${first_line} \"${IN}\"\n${body}")

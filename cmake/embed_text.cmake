# Writes a text file (IN) into a C header (OUT) as one string constant NAME,
# so a program can carry a source file's exact text.
# Usage: cmake -DIN=src/ops/ew_math.h -DOUT=ew_math_text.h -DNAME=X -P embed_text.cmake
if(NOT IN OR NOT OUT OR NOT NAME)
  message(FATAL_ERROR "usage: cmake -DIN=<file> -DOUT=<header> -DNAME=<identifier> -P embed_text.cmake")
endif()
file(READ "${IN}" txt)
string(REPLACE "\\" "\\\\" txt "${txt}")
string(REPLACE "\"" "\\\"" txt "${txt}")
# one string literal per line: "...\n"
string(REGEX REPLACE "\n" "\\\\n\"\n    \"" txt "${txt}")
set(body "/* Generated from ${IN} by cmake/embed_text.cmake; do not edit. */\n")
string(APPEND body "static const char ${NAME}[] =\n    \"${txt}\";\n")
# Rewrite only on change, so dependents do not rebuild for nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL body)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${body}")

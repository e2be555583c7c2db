# cmake -DIN=<file> -DOUT=<file.cc> -DNAME=<identifier> -P embed_file.cmake
# Writes OUT: the bytes of IN as one C++ raw string literal, `const char NAME[]`
# in namespace tachyon (a page served from the binary, with no file beside it).
file(READ "${IN}" content)
string(FIND "${content}" ")tachyon_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw string's delimiter )tachyon_embed\"")
endif()
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed_file.cmake: do not edit.\n"
                    "namespace tachyon {\n"
                    "extern const char ${NAME}[];\n"
                    "const char ${NAME}[] = R\"tachyon_embed(${content})tachyon_embed\";\n"
                    "}  // namespace tachyon\n")

#!/bin/sh
# Writes a C file that defines `const char NAME[]` and `const size_t NAME_len`
# holding standard input byte for byte, so the server can serve a file it
# embeds instead of one it reads at run time.
name="$1"
echo "#include <stddef.h>"
echo "const char ${name}[] = {"
od -An -v -tx1 | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^/  /'
echo "  0x00 };"
echo "const size_t ${name}_len = sizeof ${name} - 1;"

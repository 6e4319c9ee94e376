#!/bin/sh
# Writes web/index.html with each of its own style sheets and scripts, which
# it names on lines of their own (<link rel="stylesheet" href="F"> and
# <script src="F"></script>), copied in place: the server serves the page as
# one document, and the files stay small enough to read, each one concern.
# Fails when a file would end its element early (it holds "</style" or
# "</script") or is missing.
set -eu
dir=$(dirname "$1")
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    '<link rel="stylesheet" href="'*'">')
      f=${line#*href=\"}; f=${f%\">}
      if grep -qi '</style' "$dir/$f"; then echo "inline_page.sh: $f holds </style" >&2; exit 1; fi
      printf '<style>\n'; cat "$dir/$f"; printf '</style>\n' ;;
    '<script src="'*'"></script>')
      f=${line#*src=\"}; f=${f%\"></script>}
      if grep -qi '</script' "$dir/$f"; then echo "inline_page.sh: $f holds </script" >&2; exit 1; fi
      printf '<script>\n'; cat "$dir/$f"; printf '</script>\n' ;;
    *) printf '%s\n' "$line" ;;
  esac
done < "$1"

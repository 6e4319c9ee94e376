#!/bin/sh
# Writes web/index.html with each of its own style sheets and scripts, which
# it names on lines of their own (<link rel="stylesheet" href="F"> and
# <script type="module" src="F"></script>), copied in place: the server serves
# the page as one document, and the files stay small enough to read, each one
# concern. Fails when a file would end its element early (it holds "</style"
# or "</script") or is missing.
#
# The scripts are ES modules (web/js/*.js: the one index.html names, and the
# ones it imports, and theirs). In one served document they cannot stay apart:
# an inline module has no address that another could import it by, and an
# import map would have to point at data: or blob: URLs, which the page's
# Content-Security-Policy (script-src 'unsafe-inline', nothing else) refuses,
# and which would hide the text in an encoding. So the modules go, whole and
# readable, into ONE <script type="module">, in the order a browser evaluates
# them (each module's imports first, depth first, in the order they are
# written; a module already under way is not entered again, as in a cycle):
# one module scope, where what a module imports is the other module's own
# declaration. Each import statement stays as a comment and each "export " is
# dropped; nothing else changes, so no bundler is needed. What separate modules
# would keep apart, that scope shares, so this step refuses what would differ:
# two modules declaring the same top-level name, an import of a name its
# module does not export, and the forms it does not rewrite (renamed, default
# or namespace imports, export lists, a module outside the entry's folder).
# A module using another one's name without importing it would still work
# here: tests/ui/modules.test.mjs runs the modules as the browser loads them
# from web/, where it would not.
set -eu
dir=$(dirname "$1")
fail() { echo "inline_page.sh: $*" >&2; exit 1; }

# The modules a module imports, in order: the "./F" of each import statement.
imports() {
  awk -v file="$1" '
    /^import[ {"]/ { inimport = 1; text = "" }
    inimport {
      text = text " " $0
      if ($0 ~ /;[ \t]*(\/\/.*)?$/) {
        inimport = 0
        if (match(text, /["][^"]*["][ \t]*;/)) {
          spec = substr(text, RSTART + 1, RLENGTH - 1); sub(/["][ \t]*;$/, "", spec)
          if (spec !~ /^\.\/[A-Za-z0-9_.-]+\.js$/) { print "inline_page.sh: " file ": import from " spec ": only ./F.js, beside it" > "/dev/stderr"; exit 1 }
          print substr(spec, 3)
        } else { print "inline_page.sh: " file ": an import it cannot read:" text > "/dev/stderr"; exit 1 }
      }
    }' "$2"
}

# Depth first from the entry, each module after its imports: $order.
seen=" " order=""
visit() { # $1: the module's path under $dir
  case "$seen" in *" $1 "*) return ;; esac
  seen="$seen$1 "
  [ -f "$dir/$1" ] || fail "$1 is missing"
  deps=$(imports "$1" "$dir/$1") || exit 1
  for dep in $deps; do visit "$(dirname "$1")/$dep"; done
  order="$order $1"
}

# The modules in $order, checked (pass 1: what each declares and exports; pass 2:
# what each imports) and rewritten as one module's text.
modules() {
  set --
  for m in $order; do set -- "$@" "$dir/$m"; done
  awk -v top="$dir/" '
    function die(msg) { print "inline_page.sh: " name ": " msg > "/dev/stderr"; failed = 1; exit 1 }
    FNR == 1 {
      name = FILENAME; sub(/^.*\//, "", name)
      path = FILENAME; if (index(path, top) == 1) path = substr(path, length(top) + 1)
      if (pass == 2) print "// " path
    }
    tolower($0) ~ /<\/script/ { die("holds </script") }
    # pass 1: the top-level declarations (at the start of a line), each name once in the page
    pass == 1 && /^(export )?(async )?(function|const|let|var|class)[ *]/ {
      line = $0; isexport = sub(/^export /, "", line)
      sub(/^async /, "", line); sub(/^(function|const|let|var|class)[ *]*/, "", line)
      match(line, /^[A-Za-z_$][A-Za-z0-9_$]*/); id = substr(line, 1, RLENGTH)
      if (id == "") die("a top-level declaration it cannot read: " $0)
      if (id in owner) die(id " is also declared by " owner[id] ": the modules share one scope in the page")
      owner[id] = name
      if (isexport) exported[name, id] = 1
      next
    }
    pass == 1 && /^export/ { die("only \"export\" before a declaration (function, const, let, class): " $0) }
    pass == 1 { next }
    # pass 2: the imports, each name exported by its module, kept as comments
    /^import[ {"]/ { inimport = 1; text = "" }
    inimport {
      print "// " $0
      text = text " " $0
      if ($0 !~ /;[ \t]*(\/\/.*)?$/) next
      inimport = 0
      sub(/;[ \t]*\/\/.*$/, ";", text)
      if (text ~ /^ *import *"[^"]*" *;$/) next   # for its effect alone
      if (text !~ /^ *import *\{[A-Za-z0-9_$, \t]*\} *from *"[^"]*" *;$/)
        die("only import { a, b } from \"./F.js\" (or import \"./F.js\"):" text)
      if (text ~ /[{, \t]as[, \t]/) die("a renamed import (as):" text)
      from = text; sub(/^[^"]*"\.\//, "", from); sub(/".*$/, "", from)
      names = text; sub(/^[^{]*\{/, "", names); sub(/\}.*$/, "", names)
      k = split(names, list, /[, \t]+/)
      for (i = 1; i <= k; i++) if (list[i] != "" && !((from, list[i]) in exported))
        die("imports " list[i] " from " from ", which does not export it")
      next
    }
    { sub(/^export /, ""); print }
    END { if (!failed && inimport) die("an import with no end") }
  ' pass=1 "$@" pass=2 "$@"
}

while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    '<link rel="stylesheet" href="'*'">')
      f=${line#*href=\"}; f=${f%\">}
      [ -f "$dir/$f" ] || fail "$f is missing"
      if grep -qi '</style' "$dir/$f"; then fail "$f holds </style"; fi
      printf '<style>\n'; cat "$dir/$f"; printf '</style>\n' ;;
    '<script type="module" src="'*'"></script>')
      f=${line#*src=\"}; f=${f%\"></script>}
      [ -z "$order" ] || fail "a second module script, $f: one imports the others"
      visit "$f"
      printf '<script type="module">\n'; modules; printf '</script>\n' ;;
    '<script'*'src='*)
      fail "a script that is no module: $line" ;;
    *) printf '%s\n' "$line" ;;
  esac
done < "$1"

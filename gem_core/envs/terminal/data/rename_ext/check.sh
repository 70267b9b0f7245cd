[ -z "$(find notes -name '*.txt')" ] || exit 1
[ "$(cat notes/a.md)" = alpha ] && [ "$(cat notes/b.md)" = beta ] && [ "$(cat notes/old/c.md)" = gamma ] && [ "$(cat notes/readme.rst)" = "keep me" ]

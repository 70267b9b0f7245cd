[ -z "$(find . -maxdepth 1 -type f)" ] || exit 1
for f in photo.png scan.png; do [ "$(cat images/$f)" = "$f" ] || exit 1; done
for f in report.pdf summary.pdf; do [ "$(cat docs/$f)" = "$f" ] || exit 1; done
for f in notes.txt todo.txt; do [ "$(cat text/$f)" = "$f" ] || exit 1; done

test -f largest.txt && [ "$(tr -d ' \n' < largest.txt | sed 's|^\./||')" = "data/a/b/two.bin" ]

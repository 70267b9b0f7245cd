test -f top3.txt && [ "$(sed 's/^ *//; s/ \+/ /g' top3.txt)" = "$(printf '6 the\n4 a\n3 fox')" ]

find data -type f -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2 > largest.txt

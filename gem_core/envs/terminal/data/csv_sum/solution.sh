awk -F, '$2 == "north" {s += $3} END {print s}' sales.csv > north_total.txt
